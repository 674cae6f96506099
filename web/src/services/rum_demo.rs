//! The Real users view's side in the page: the chat demo (`web/static/rum-demo.js`,
//! a plain-DOM chat UI with the RUM probe embedded as a product embeds it) is a
//! lazy module `boot.js` imports only when the view opens
//! (`window.tokenscopeRumDemo()`). The page hands it the endpoint the Benchmark
//! view is set to: a real one (URL, model, headers), or the built-in simulator
//! ([`sim_opener`]: the benchmark's own simulator transport), whose pushed bytes
//! the demo's `fetch` turns into a real `Response` (the probe reads it as any
//! other) and whose log is the server's truth shown beside each collected turn.
//! The glue to the web's types (`Response`, `ReadableStream`, `AbortSignal`) is
//! in the JS, where it weighs nothing on the page's first load.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Promise, Reflect, Uint8Array};
use tokenscope_measure::openai::Api;
use tokenscope_measure::record::ErrorKind;
use tokenscope_sim::SimConfig;
use tokenscope_workload::prompts::approx_tokens;
use wasm_bindgen::prelude::*;

use super::exchange::{Prepared, Read};
use super::fetch::{Auth, js_error_text};
use super::sim::SimServer;
use super::transport::Transport;
use crate::settings::RunPlan;

/// The built-in simulator as the demo's server: a JS function taking a request
/// `{prompt, max_tokens, sink, cancelled}` and answering it the way `tokenscope
/// mock` answers over HTTP, through the benchmark's own simulator transport.
/// What happens is pushed to `sink(kind, value)` as a network pushes bytes:
/// `head` (`[status, content type]`), `bytes` (a `Uint8Array`), `end`, `error`
/// (a message: the connection broke), then `truth` (`[received, first token]`,
/// the simulator's log on the page's clock, the probe's clock too; `NaN` where
/// none). Setting `cancelled` (an abort, or the reader let go) frees the
/// simulator's slot at the next chunk. One `FnMut(JsValue)` closure and no
/// exported class: nothing new in the page's glue.
pub fn sim_opener(server: SimServer) -> JsValue {
    let transport = Rc::new(Transport::Sim(server.clone()));
    Closure::<dyn FnMut(JsValue)>::new(move |req: JsValue| {
        let (transport, server) = (transport.clone(), server.clone());
        wasm_bindgen_futures::spawn_local(async move { serve(&transport, &server, req).await });
    })
    .into_js_value()
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

async fn serve(transport: &Transport, server: &SimServer, req: JsValue) {
    let get = |k: &str| Reflect::get(&req, &JsValue::from_str(k)).unwrap_or_default();
    let sink: js_sys::Function = get("sink").unchecked_into();
    let send = |kind: &str, v: &JsValue| {
        let _ = sink.call2(&JsValue::NULL, &JsValue::from_str(kind), v);
    };
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    let prepared = Prepared {
        request_id: format!("rum-demo-{id}"),
        body: String::new(),
        api: Api::Chat,
        prompt_tokens: approx_tokens(&get("prompt").as_string().unwrap_or_default()),
        max_tokens: get("max_tokens")
            .as_f64()
            .map_or(128, |n| n.clamp(1.0, 1e6) as u32),
        hide_reasoning: false,
        t_scheduled_ms: None,
        keep_answer: false,
        prompt_tokens_sent: None,
        turn: None,
    };
    let opened = match web_sys::AbortController::new() {
        Ok(abort) => match transport.outgoing(&prepared, &abort) {
            Ok(out) => transport.open(&prepared, &out, &mut |_| {}).await,
            Err(e) => Err(e),
        },
        Err(e) => Err((ErrorKind::Other, js_error_text(&e))),
    };
    match opened {
        Err((_, message)) => send("error", &JsValue::from_str(&message)),
        Ok((_, head, mut body)) => {
            let ct = head.content_type.as_deref().unwrap_or("text/plain");
            send(
                "head",
                &js_sys::Array::of2(&head.status.into(), &JsValue::from_str(ct)),
            );
            loop {
                if get("cancelled").is_truthy() {
                    body.cancel();
                    break;
                }
                match body.read().await.1 {
                    Read::Bytes(b) => send("bytes", &Uint8Array::from(b.as_slice())),
                    Read::End => {
                        send("end", &JsValue::NULL);
                        break;
                    }
                    Read::Error(_, message) => {
                        send("error", &JsValue::from_str(&message));
                        break;
                    }
                }
            }
        }
    }
    if let Some(l) = server
        .log()
        .iter()
        .find(|l| l.request_id == prepared.request_id)
    {
        let first = l.chunk_times_ms.first().copied().unwrap_or(f64::NAN);
        send(
            "truth",
            &js_sys::Array::of2(&l.t_received_ms.into(), &first.into()),
        );
    }
}

/// What the demo talks to.
enum DemoEndpoint {
    /// The built-in simulator with this model.
    Sim(SimConfig),
    /// A real endpoint: its chat completions and models URLs, the model (`None`:
    /// the first `/models` lists) and every header to send (the key's first).
    Real {
        base: String,
        chat_url: String,
        models_url: String,
        model: Option<String>,
        headers: Vec<(String, String)>,
    },
}

impl DemoEndpoint {
    /// The endpoint a run with `plan` (and `auth`) talks to.
    fn of(plan: RunPlan, auth: Result<Auth, String>) -> Result<DemoEndpoint, String> {
        Ok(match plan.base {
            None => DemoEndpoint::Sim(plan.sim),
            Some(base) => DemoEndpoint::Real {
                base: base.url.clone(),
                chat_url: base.endpoint("chat/completions"),
                models_url: base.endpoint("models"),
                model: plan.model,
                headers: auth?.pairs(),
            },
        })
    }

    /// Equal for the same endpoint (a new simulator when its model changed).
    fn key(&self) -> String {
        match self {
            DemoEndpoint::Sim(cfg) => serde_json::to_string(cfg).unwrap_or_default(),
            DemoEndpoint::Real {
                chat_url,
                model,
                headers,
                ..
            } => format!(
                "{chat_url}\n{}\n{headers:?}",
                model.as_deref().unwrap_or("")
            ),
        }
    }
}

/// The lazily loaded views handed the Benchmark view's endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lazy {
    /// The Real users view's chat demo.
    RumDemo,
    /// The Quality view (`web-quality/`).
    Quality,
}

thread_local! {
    /// The endpoint each view was last handed.
    static SHOWN: RefCell<[Option<String>; 2]> = const { RefCell::new([None, None]) };
}

/// Show `view` in `host` (the chat demo of the Real users view, or the
/// Quality view), talking to the endpoint a benchmark run with `plan` would:
/// the module loads the first time, and the view is handed the endpoint again
/// when it changed. A failure (settings that do not validate, a module that
/// does not load) is said in the view.
pub fn show(
    view: Lazy,
    host: web_sys::Element,
    plan: Result<RunPlan, String>,
    auth: Result<Auth, String>,
) {
    let endpoint = match plan.and_then(|p| DemoEndpoint::of(p, auth)) {
        Ok(e) => e,
        Err(e) => {
            return say(
                &host,
                &format!("The Benchmark view's settings are not valid ({e}): fix them there."),
            );
        }
    };
    let key = endpoint.key();
    let i = view as usize;
    if SHOWN.with(|s| s.borrow()[i].as_deref() == Some(key.as_str())) {
        // The same endpoint: the demo is as it was (an earlier complaint goes).
        return say(&host, "");
    }
    SHOWN.with(|s| s.borrow_mut()[i] = Some(key));
    say(&host, "");
    wasm_bindgen_futures::spawn_local(async move {
        let mounted = match view {
            Lazy::RumDemo => mount(&host, endpoint).await,
            Lazy::Quality => mount_quality(&host, endpoint).await,
        };
        if let Err(e) = mounted {
            SHOWN.with(|s| s.borrow_mut()[i] = None);
            super::browser::set_run_state("failed");
            say(&host, &e);
        }
    });
}

/// Put `text` in the view's `#rum-demo-error` (an empty text removes it).
fn say(host: &web_sys::Element, text: &str) {
    let Some(doc) = host.owner_document() else {
        return;
    };
    let old = host.query_selector("#rum-demo-error").ok().flatten();
    if text.is_empty() {
        if let Some(o) = old {
            o.remove();
        }
        return;
    }
    let Some(el) = old.or_else(|| doc.create_element("p").ok()) else {
        return;
    };
    el.set_id("rum-demo-error");
    el.set_class_name("run-error");
    let _ = el.set_attribute("role", "alert");
    el.set_text_content(Some(text));
    let _ = host.prepend_with_node_1(&el);
}

/// Load the demo module (once; `boot.js` caches it) and show the chat in `root`.
async fn mount(root: &web_sys::Element, endpoint: DemoEndpoint) -> Result<(), String> {
    let mount = super::browser::lazy_export("tokenscopeRumDemo", "mount", "chat demo").await?;
    let options = js_sys::Object::new();
    let set = |k: &str, v: JsValue| Reflect::set(&options, &JsValue::from_str(k), &v);
    let set = match endpoint {
        DemoEndpoint::Sim(cfg) => {
            let model = cfg.model.clone();
            let sim = lazy_sim_opener(&cfg).await?;
            set("model", JsValue::from_str(&model)).and_then(|_| set("sim", sim))
        }
        DemoEndpoint::Real {
            chat_url,
            models_url,
            base: _,
            model,
            headers,
        } => set("url", JsValue::from_str(&chat_url))
            .and_then(|_| set("modelsUrl", JsValue::from_str(&models_url)))
            .and_then(|_| set("model", model_value(model)))
            .and_then(|_| set("headers", headers_object(&headers))),
    };
    set.map_err(|e| js_error_text(&e))?;
    let failed = |e: JsValue| format!("the chat demo could not start: {}", js_error_text(&e));
    let started = mount
        .call2(&JsValue::NULL, root, &options)
        .map_err(failed)?;
    // `mount` is async (it imports the probe the first time).
    if let Ok(p) = started.dyn_into::<Promise>() {
        wasm_bindgen_futures::JsFuture::from(p)
            .await
            .map_err(failed)?;
    }
    Ok(())
}

/// Load the quality module (once; `boot.js` caches it) and show the Quality
/// view in `root`: `{url: base URL or null (the simulator), model, headers,
/// sim_seed}`.
async fn mount_quality(root: &web_sys::Element, endpoint: DemoEndpoint) -> Result<(), String> {
    let mount =
        super::browser::lazy_export("tokenscopeQuality", "mount_view", "quality module").await?;
    let options = js_sys::Object::new();
    let set = |k: &str, v: JsValue| Reflect::set(&options, &JsValue::from_str(k), &v);
    let set = match endpoint {
        DemoEndpoint::Sim(cfg) => set("model", JsValue::from_str(&cfg.model))
            .and_then(|_| set("sim_seed", JsValue::from_str(&cfg.seed.to_string()))),
        DemoEndpoint::Real {
            base,
            model,
            headers,
            ..
        } => set("url", JsValue::from_str(&base))
            .and_then(|_| set("model", model_value(model)))
            .and_then(|_| set("headers", headers_object(&headers))),
    };
    set.map_err(|e| js_error_text(&e))?;
    mount
        .call2(&JsValue::NULL, root, &options)
        .map_err(|e| format!("the Quality view could not start: {}", js_error_text(&e)))?;
    Ok(())
}

/// `{name: value}` of the headers to send.
fn headers_object(headers: &[(String, String)]) -> JsValue {
    let h = js_sys::Object::new();
    for (k, v) in headers {
        let _ = Reflect::set(&h, &JsValue::from_str(k), &JsValue::from_str(v));
    }
    h.into()
}

/// [`sim_opener`] for a simulator with `cfg`, made by the run module
/// (`services::lazy_run`: the simulator lives there, not in the first load).
async fn lazy_sim_opener(cfg: &SimConfig) -> Result<JsValue, String> {
    let make = super::browser::lazy_export("tokenscopeRun", "sim_opener", "run module").await?;
    let cfg = serde_json::to_string(cfg).map_err(|e| e.to_string())?;
    make.call1(&JsValue::NULL, &JsValue::from_str(&cfg))
        .map_err(|e| format!("the run module has no simulator: {}", js_error_text(&e)))
}

/// The module's export `sim_opener` (web-run's `lib.rs`): [`sim_opener`] for
/// the simulator whose `SimConfig` is this JSON.
pub fn sim_opener_of(cfg_json: &str) -> Result<JsValue, String> {
    let cfg: SimConfig =
        serde_json::from_str(cfg_json).map_err(|e| format!("the simulator's settings: {e}"))?;
    Ok(sim_opener(SimServer::new(cfg)))
}

/// The model, or `null` (the first `/models` lists).
fn model_value(model: Option<String>) -> JsValue {
    model.map_or(JsValue::NULL, |m| JsValue::from_str(&m))
}
