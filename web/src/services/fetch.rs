//! The real transport: `fetch` with a `ReadableStream` reader.
//!
//! `performance.now()` is read inside the promise reaction of `fetch()` (the
//! response head) and of each `reader.read()` (a body chunk): the moment the
//! browser hands the data to the page, before any Rust code runs and before another
//! stream's processing can delay it. The chunk is copied out of JS after the stamp. Failures are classified like
//! the native client: no response at all is `connect` (the browser does not tell a
//! refused connection from DNS, TLS or a CORS refusal), a stream that breaks is
//! `reset`.

use js_sys::{Reflect, Uint8Array};
use tokenscope_measure::record::ErrorKind;
use tokenscope_render::page::transport::{header_name_problem, parse_header_lines};
use wasm_bindgen::prelude::*;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{ReadableStreamDefaultReader, RequestInit, Response};

use super::clock::now;
use super::exchange::{Body, Head, LocalFuture, Prepared, Read};

#[wasm_bindgen(inline_js = r#"
export function fetch_stamped(url, init) {
  return fetch(url, init).then((response) => ({ response, t: performance.now() }));
}
export function read_stamped(reader) {
  return reader.read().then((r) => { r.t = performance.now(); return r; });
}
"#)]
extern "C" {
    /// `fetch()`, resolving with `{response, t}`: `t` read as the head arrived.
    fn fetch_stamped(url: &str, init: &RequestInit) -> js_sys::Promise;
    /// `reader.read()`, resolving with `{done, value, t}`: `t` read as the chunk arrived.
    fn read_stamped(reader: &ReadableStreamDefaultReader) -> js_sys::Promise;
}

fn stamp_of(v: &JsValue) -> f64 {
    Reflect::get(v, &JsValue::from_str("t"))
        .ok()
        .and_then(|t| t.as_f64())
        .unwrap_or_else(now)
}

/// What every request to the endpoint carries besides the API's own headers: the
/// API key and the user's extra headers. Memory only: never stored, put in the
/// URL, the report or a log (the report names the headers, never their values).
#[derive(Clone, Default, PartialEq)]
pub struct Auth {
    /// The API key.
    pub key: Option<String>,
    /// The header that carries the key, `None` for `Authorization: Bearer`.
    pub key_header: Option<String>,
    /// Extra headers, `(name, value)`.
    pub headers: Vec<(String, String)>,
}

impl Auth {
    /// Every header to send, the key's first.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut out = Vec::with_capacity(self.headers.len() + 1);
        if let Some(key) = self.key.as_deref().filter(|k| !k.is_empty()) {
            out.push(match &self.key_header {
                Some(name) => (name.clone(), key.to_owned()),
                None => ("authorization".into(), format!("Bearer {key}")),
            });
        }
        out.extend(self.headers.iter().cloned());
        out
    }

    /// The names that make the browser ask the endpoint's CORS preflight, as
    /// typed: the key's header (`authorization` included) and the extra ones.
    pub fn preflight_names(&self) -> Vec<String> {
        self.pairs().into_iter().map(|(n, _)| n).collect()
    }

    /// Set every header on `h`.
    pub fn apply(&self, h: &web_sys::Headers) -> Result<(), String> {
        for (name, value) in self.pairs() {
            h.set(&name, &value).map_err(|e| js_error_text(&e))?;
        }
        Ok(())
    }

    /// What Anthropic's Messages API asks of every request (as `bench --api
    /// messages` does): the key, where there is one, in `x-api-key` unless a key
    /// header is named, `anthropic-version` unless an extra header gives one;
    /// and of a browser's, `anthropic-dangerous-direct-browser-access: true`
    /// (without it Anthropic's API refuses the page's cross-origin requests).
    pub fn for_messages_api(mut self) -> Auth {
        use tokenscope_measure::messages;
        if self.key.is_some() && self.key_header.is_none() {
            self.key_header = Some(messages::KEY_HEADER.into());
        }
        for (name, value) in [
            (messages::VERSION_HEADER, messages::ANTHROPIC_VERSION),
            (messages::BROWSER_ACCESS_HEADER, "true"),
        ] {
            if !self
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
            {
                self.headers.push((name.into(), value.into()));
            }
        }
        self
    }

    /// The same, without the key (a URL the key must not go to).
    pub fn without_key(&self) -> Auth {
        Auth {
            key: None,
            ..self.clone()
        }
    }
}

/// The key and extra headers from their fields (the key, the header that
/// carries it, one `Name: value` per line), or why the fields are wrong
/// (naming the line).
pub fn auth_of(api_key: &str, key_header: &str, headers: &str) -> Result<Auth, String> {
    let key_header = Some(key_header.trim())
        .filter(|h| !h.is_empty())
        .map(|h| match header_name_problem(h) {
            Some(p) => Err(format!("key header: {p}")),
            None => Ok(h.to_owned()),
        })
        .transpose()?;
    Ok(Auth {
        key: Some(api_key.to_owned()).filter(|k| !k.is_empty()),
        key_header,
        headers: parse_header_lines(headers)?,
    })
}

/// Where `fetch` sends requests.
#[derive(Clone)]
pub struct FetchTarget {
    /// The endpoint (`.../v1/chat/completions`).
    pub url: String,
    /// The key and extra headers (memory only).
    pub auth: Auth,
    /// Send `x-request-id`.
    pub send_request_id: bool,
}

/// What a request that got no response means in a browser, which does not say why.
pub fn no_response_message(error: &str) -> String {
    format!(
        "no response ({error}): connection refused, DNS, TLS, or a CORS refusal (the browser does not say which; check that the endpoint allows this page's origin and the authorization, content-type and x-request-id headers)"
    )
}

/// What a JS error says, without any URL.
pub fn js_error_text(e: &JsValue) -> String {
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        let name = String::from(err.name());
        let msg = String::from(err.message());
        return if msg.is_empty() {
            name
        } else {
            format!("{name}: {msg}")
        };
    }
    e.as_string().unwrap_or_else(|| "unknown error".into())
}

fn is_abort(e: &JsValue) -> bool {
    e.dyn_ref::<js_sys::Error>()
        .is_some_and(|err| err.name() == "AbortError")
}

impl FetchTarget {
    fn headers(&self, req: &Prepared) -> Result<web_sys::Headers, JsValue> {
        let h = web_sys::Headers::new()?;
        h.set("content-type", "application/json")?;
        h.set("accept", "text/event-stream")?;
        for (name, value) in self.auth.pairs() {
            h.set(&name, &value)?;
        }
        if self.send_request_id {
            h.set("x-request-id", &req.request_id)?;
        }
        Ok(h)
    }

    /// Build the request (headers, body, abort signal) ahead of its send, so the
    /// send stamp is taken right before `fetch()`.
    pub fn build(
        &self,
        req: &Prepared,
        abort: &web_sys::AbortController,
    ) -> Result<RequestInit, (ErrorKind, String)> {
        let headers = self
            .headers(req)
            .map_err(|e| (ErrorKind::Other, js_error_text(&e)))?;
        let init = RequestInit::new();
        init.set_method("POST");
        init.set_headers(&headers);
        init.set_body(&JsValue::from_str(&req.body));
        init.set_signal(Some(&abort.signal()));
        init.set_mode(web_sys::RequestMode::Cors);
        init.set_credentials(web_sys::RequestCredentials::Omit);
        // No `cache: "no-store"`: Chromium then bypasses its CORS preflight cache
        // too, and every request would pay a preflight round trip before its send.
        // (A POST is never answered from the HTTP cache anyway.)
        Ok(init)
    }

    /// Send a request built by [`FetchTarget::build`]; resolves at the response head.
    pub async fn open(
        &self,
        init: &RequestInit,
    ) -> Result<(f64, Head, FetchBody), (ErrorKind, String)> {
        let (t, resp): (f64, Response) = match JsFuture::from(fetch_stamped(&self.url, init)).await
        {
            Ok(v) => (
                stamp_of(&v),
                Reflect::get(&v, &JsValue::from_str("response"))
                    .map_err(|e| (ErrorKind::Other, js_error_text(&e)))?
                    .unchecked_into(),
            ),
            Err(e) if is_abort(&e) => return Err((ErrorKind::Cancelled, "aborted".into())),
            Err(e) => {
                return Err((ErrorKind::Connect, no_response_message(&js_error_text(&e))));
            }
        };
        let head = Head {
            status: resp.status(),
            content_type: resp.headers().get("content-type").ok().flatten(),
        };
        let reader = resp.body().and_then(|b| {
            b.get_reader()
                .dyn_into::<ReadableStreamDefaultReader>()
                .ok()
        });
        Ok((t, head, FetchBody { reader }))
    }

    /// `GET` a URL (the models list `{base}/models`, a prompts file): the body
    /// text, or why it failed.
    pub async fn get_text(url: &str, auth: &Auth) -> Result<String, String> {
        Self::text(url, auth, None).await
    }

    /// `GET` a URL, or `POST` it `json` (`/tokenize`): the body text, or why it
    /// failed.
    pub async fn text(url: &str, auth: &Auth, json: Option<&str>) -> Result<String, String> {
        let init = RequestInit::new();
        init.set_mode(web_sys::RequestMode::Cors);
        init.set_credentials(web_sys::RequestCredentials::Omit);
        let h = web_sys::Headers::new().map_err(|e| js_error_text(&e))?;
        auth.apply(&h)?;
        match json {
            Some(body) => {
                init.set_method("POST");
                h.set("content-type", "application/json")
                    .map_err(|e| js_error_text(&e))?;
                init.set_body(&JsValue::from_str(body));
            }
            None => init.set_method("GET"),
        }
        init.set_headers(&h);
        let window = web_sys::window().ok_or("no window")?;
        let resp: Response = JsFuture::from(window.fetch_with_str_and_init(url, &init))
            .await
            .map_err(|e| {
                format!(
                    "no response from {} ({})",
                    tokenscope_measure::parse::redact_url(url),
                    js_error_text(&e)
                )
            })?
            .unchecked_into();
        if !resp.ok() {
            return Err(format!(
                "{} answered HTTP {}",
                tokenscope_measure::parse::redact_url(url),
                resp.status()
            ));
        }
        let text = JsFuture::from(resp.text().map_err(|e| js_error_text(&e))?)
            .await
            .map_err(|e| js_error_text(&e))?;
        Ok(text.as_string().unwrap_or_default())
    }
}

/// A `fetch` response body, read with a `ReadableStreamDefaultReader`.
pub struct FetchBody {
    reader: Option<ReadableStreamDefaultReader>,
}

impl Body for FetchBody {
    fn read(&mut self) -> LocalFuture<'_, (f64, Read)> {
        Box::pin(async move {
            let Some(reader) = &self.reader else {
                return (now(), Read::End);
            };
            let result = JsFuture::from(read_stamped(reader)).await;
            let t = result.as_ref().map_or_else(|_| now(), stamp_of);
            let read = match result {
                Ok(result) => {
                    let done = Reflect::get(&result, &JsValue::from_str("done"))
                        .ok()
                        .and_then(|d| d.as_bool())
                        .unwrap_or(true);
                    if done {
                        return (t, Read::End);
                    }
                    match Reflect::get(&result, &JsValue::from_str("value")) {
                        Ok(v) => match v.dyn_into::<Uint8Array>() {
                            Ok(bytes) => Read::Bytes(bytes.to_vec()),
                            Err(_) => {
                                Read::Error(ErrorKind::Other, "a read that is not bytes".into())
                            }
                        },
                        Err(e) => Read::Error(ErrorKind::Other, js_error_text(&e)),
                    }
                }
                Err(e) if is_abort(&e) => Read::Error(ErrorKind::Cancelled, "aborted".into()),
                Err(e) => Read::Error(ErrorKind::Reset, js_error_text(&e)),
            };
            (t, read)
        })
    }

    fn cancel(&mut self) {
        if let Some(reader) = self.reader.take() {
            // Fire and forget: the promise settles when the stream is torn down.
            let _ = reader.cancel();
        }
    }
}
