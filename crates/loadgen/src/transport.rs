//! One streaming request over real HTTP (reqwest), stamped read by read.
//!
//! The clock is read the moment each read completes, before anything else; the
//! bytes then go to core's timeline (SSE decoding, JSON parsing). Nothing slow sits
//! between the read and the stamp.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use tokenscope_measure::record::{ErrorKind, RequestRecord};
use tokenscope_measure::timeline::{HeaderVerdict, MAX_ERROR_BODY_BYTES, RequestTimeline};
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
use super::http::ConnTracker;

/// Where requests go and how.
#[derive(Debug, Clone)]
pub struct Target {
    /// The full endpoint URL (`.../v1/chat/completions`).
    pub url: reqwest::Url,
    /// Per-request timeout (from the send).
    pub timeout: Duration,
    /// The client's connection tracker, when it has one: each record then says
    /// whether its request opened its connection.
    pub connections: Option<ConnTracker>,
}

/// How long to keep reading after `[DONE]` so the connection can be reused.
const DRAIN_AFTER_DONE: Duration = Duration::from_millis(500);

/// A request's own headers: JSON body and an id the server can log (the key and
/// the extra headers are the client's defaults: [`crate::http_client::HttpOptions`]).
pub fn headers(request_id: &str) -> reqwest::header::HeaderMap {
    let mut h = reqwest::header::HeaderMap::new();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(v) = HeaderValue::from_str(request_id) {
        h.insert("x-request-id", v);
    }
    h
}

/// Classify a reqwest error without its URL (which may carry a query-string key).
pub fn classify(err: &reqwest::Error, before_headers: bool) -> (ErrorKind, String) {
    // A connection that could not be made is `connect`; one that broke before or
    // while the answer streamed is `reset`.
    let kind = if err.is_connect() {
        ErrorKind::Connect
    } else if before_headers && err.is_builder() {
        ErrorKind::Other
    } else {
        ErrorKind::Reset
    };
    let host = err
        .url()
        .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
        .unwrap_or_else(|| "the server".into());
    let mut msg =
        crate::http_client::tls::tls_problem(err, &host).unwrap_or_else(|| strip_url(err));
    if msg.is_empty() {
        msg = "transport error".into();
    }
    (kind, msg)
}

pub(super) fn strip_url(err: &reqwest::Error) -> String {
    use std::error::Error as _;
    // reqwest's Display is terse ("error sending request"); add the root cause.
    let mut parts = vec![err.to_string()];
    let mut src = err.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        src = s.source();
    }
    let text = parts.join(": ");
    // Never let a URL (and its query) through: drop anything after " for url (".
    match text.find(" for url (") {
        Some(i) => {
            let end = text[i..].find(')').map_or(text.len(), |j| i + j + 1);
            format!("{}{}", &text[..i], &text[end..])
        }
        None => text,
    }
}

/// Send one request and follow it to its end. Always returns a record: every
/// outcome (success, each failure kind, timeout, cancellation) is data.
pub async fn run_request(
    client: &reqwest::Client,
    target: &Target,
    body: Bytes,
    request_id: &str,
    clock: &Clock,
    t_scheduled_ms: Option<f64>,
    cancel: &CancellationToken,
) -> RequestRecord {
    let send = Send {
        request_id,
        t_scheduled_ms,
        keep_answer: false,
        keep_text: false,
        keep_calls: false,
    };
    exchange(client, target, body, clock, send, cancel).await.0
}

/// What one send needs besides the target and the body.
#[derive(Debug, Clone, Copy)]
pub struct Send<'a> {
    /// `x-request-id`.
    pub request_id: &'a str,
    /// The open loop's scheduled time.
    pub t_scheduled_ms: Option<f64>,
    /// Keep the answer's text (a conversation's next turn sends it back).
    pub keep_answer: bool,
    /// Keep all the generated text, reasoning included (the run's tokenizer
    /// counts it).
    pub keep_text: bool,
    /// Put the answer's tool calls together (their schemas check them).
    pub keep_calls: bool,
}

/// What [`exchange`] gives back besides the record.
#[derive(Debug, Default)]
pub struct Texts {
    /// The answer (`content`), when `send.keep_answer`.
    pub answer: Option<String>,
    /// All the generated text, when `send.keep_text`.
    pub generated: Option<String>,
    /// The answer's tool calls, when `send.keep_calls`.
    pub calls: Vec<tokenscope_measure::tools::ToolCall>,
    /// Where each content event's text ends in `generated`, bytes.
    pub event_ends: Vec<usize>,
}

/// [`run_request`], also giving the answer's text when `send.keep_answer` and
/// all the generated text when `send.keep_text`.
pub async fn exchange(
    client: &reqwest::Client,
    target: &Target,
    body: Bytes,
    clock: &Clock,
    send: Send<'_>,
    cancel: &CancellationToken,
) -> (RequestRecord, Texts) {
    let headers = headers(send.request_id);
    let deadline = tokio::time::Instant::now() + target.timeout;
    let t_send = clock.now_ms();
    let mut tl = RequestTimeline::new(t_send, send.t_scheduled_ms)
        .keep_answer(send.keep_answer)
        .keep_text(send.keep_text)
        .keep_calls(send.keep_calls);
    enum End {
        Finished,
        Timeout,
        Cancelled,
    }
    let end = {
        let fut = drive(client, target, headers, body, clock, t_send, &mut tl);
        tokio::pin!(fut);
        tokio::select! {
            biased;
            () = &mut fut => End::Finished,
            () = tokio::time::sleep_until(deadline) => End::Timeout,
            () = cancel.cancelled() => End::Cancelled,
        }
    };
    match end {
        End::Finished => {}
        End::Timeout => tl.on_timeout(clock.now_ms()),
        End::Cancelled => tl.on_cancel(clock.now_ms()),
    }
    let texts = Texts {
        answer: tl.take_answer(),
        generated: send.keep_text.then(|| tl.text().to_owned()),
        calls: tl.take_calls().unwrap_or_default(),
        event_ends: tl.text_event_ends().to_vec(),
    };
    (tl.finish(), texts)
}

async fn drive(
    client: &reqwest::Client,
    target: &Target,
    headers: reqwest::header::HeaderMap,
    body: Bytes,
    clock: &Clock,
    t_send: f64,
    tl: &mut RequestTimeline,
) {
    // A server may close a kept-alive connection right after a streamed answer
    // while announcing Keep-Alive (llama.cpp's server does): a request sent on it
    // just then meets a closed socket before any answer. As browsers and curl do,
    // resend it at once (on a fresh connection): the server never saw it. Its
    // times still count from the first send, as the user's wait would.
    let mut attempts = 0;
    // The request's own send stamp as an instant (the connector's clock):
    // which part of a connection's setup it waited for.
    let sent_at = clock.instant_of(t_send);
    let sent = loop {
        attempts += 1;
        let sent = client
            .post(target.url.clone())
            .headers(headers.clone())
            .body(body.clone())
            .send()
            .await;
        match sent {
            Err(e) if attempts < MAX_SEND_ATTEMPTS && closed_before_answer(&e) => continue,
            other => break other,
        }
    };
    let t = clock.now_ms();
    let mut resp = match sent {
        Ok(r) => r,
        Err(e) => {
            let (kind, msg) = classify(&e, true);
            tl.on_transport_error(t, kind, msg);
            return;
        }
    };
    let connection = target
        .connections
        .as_ref()
        .zip(super::http::conn_key(&resp))
        .map(|(tracker, key)| tracker.claim(key, sent_at));
    tl.on_transport(Some(protocol_name(resp.version())), connection);
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match tl.on_headers(t, status, ct.as_deref()) {
        HeaderVerdict::Stream => loop {
            let read = resp.chunk().await;
            // The stamp comes first: before decoding, before anything else.
            let t = clock.now_ms();
            match read {
                Ok(Some(bytes)) => {
                    if tl.on_read(t, &bytes).finished {
                        drain(&mut resp).await;
                        tl.on_end(clock.now_ms());
                        return;
                    }
                }
                Ok(None) => {
                    tl.on_end(t);
                    return;
                }
                Err(e) => {
                    let (kind, msg) = classify(&e, false);
                    tl.on_transport_error(t, kind, format!("while streaming: {msg}"));
                    return;
                }
            }
        },
        HeaderVerdict::ErrorBody => {
            let mut read = 0usize;
            loop {
                let chunk = resp.chunk().await;
                let t = clock.now_ms();
                match chunk {
                    Ok(Some(bytes)) => {
                        tl.on_error_body(t, &bytes);
                        read += bytes.len();
                        if read >= MAX_ERROR_BODY_BYTES {
                            tl.on_end(t);
                            return;
                        }
                    }
                    Ok(None) | Err(_) => {
                        tl.on_end(t);
                        return;
                    }
                }
            }
        }
    }
}

/// The HTTP version's ALPN name (`http/1.1`, `h2`), as the report gives it.
pub fn protocol_name(v: reqwest::Version) -> String {
    match v {
        reqwest::Version::HTTP_09 => "http/0.9",
        reqwest::Version::HTTP_10 => "http/1.0",
        reqwest::Version::HTTP_11 => "http/1.1",
        reqwest::Version::HTTP_2 => "h2",
        reqwest::Version::HTTP_3 => "h3",
        _ => "unknown",
    }
    .to_owned()
}

/// Sends of one request when the connection was closed before any answer.
const MAX_SEND_ATTEMPTS: u32 = 3;

/// The connection closed before a byte of the answer came (hyper's
/// `IncompleteMessage`): the request met a socket the server had already closed.
fn closed_before_answer(err: &reqwest::Error) -> bool {
    use std::error::Error as _;
    let mut src = err.source();
    while let Some(s) = src {
        if s.to_string()
            .contains("connection closed before message completed")
        {
            return true;
        }
        src = s.source();
    }
    false
}

/// Read what is left after `[DONE]` (normally just the end of the chunked body),
/// briefly, so the connection goes back to the pool.
async fn drain(resp: &mut reqwest::Response) {
    let _ = tokio::time::timeout(DRAIN_AFTER_DONE, async {
        while let Ok(Some(_)) = resp.chunk().await {}
    })
    .await;
}
