//! The run in a module of its own: `web-run/` (tokenscope-web-run) is a wasm that
//! `boot.js` imports only when a run starts, or when the Real users view talks to
//! the built-in simulator (`window.tokenscopeRun()`), so the runner, its
//! transports, the simulator and the report's assembly weigh nothing on the
//! first load. It is this crate built without its `app` feature: the same
//! runner ([`super::runner::run`]) the wasm-bindgen tests drive, reached through
//! web-run's exports instead of a Rust call.
//!
//! The page hands it a [`RunRequest`] (JSON) and the stream view's element, and
//! hears back [`RunMessage`]s (JSON), one per runner event and one at the end of
//! each tier: the page's side is [`start`] and [`stop`], the module's
//! [`run_bench`] and [`stop_current`].

use std::cell::RefCell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use tokenscope_measure::record::RequestRecord;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use super::browser::lazy_export;
use super::clock::CancelToken;
use super::fetch::js_error_text;
use super::paint::Painter;
use super::runner::{self, RunEvent, RunInput};
use crate::settings::Settings;

/// A run to make: the settings, the key's fields (memory only, as in the page)
/// and the network worker's script.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRequest {
    /// The form's settings.
    pub settings: Settings,
    /// The API key.
    pub api_key: String,
    /// The header that carries it (empty: `Authorization: Bearer`).
    pub key_header: String,
    /// Extra headers, one `Name: value` per line.
    pub headers: String,
    /// The network worker's script URL.
    pub worker_url: Option<String>,
}

/// A measured request of a level: what the per-request timeline draws.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelRecord {
    /// Index of the level.
    pub level: usize,
    /// The request (the page reads what its timeline draws of it: `shown`).
    #[serde(deserialize_with = "tokenscope_core::model::shown::record")]
    pub record: RequestRecord,
}

/// What the run module tells the page.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RunMessage {
    /// The runner reported.
    Event(RunEvent),
    /// A tier of a run with several ended (the last one comes as `Finished` too).
    TierDone {
        /// `in256-out128`.
        label: String,
        /// Its report.
        report_json: String,
    },
    /// The run ended.
    Finished {
        /// The report (`#report-json`).
        report_json: String,
        /// Every request, warm-up included (`#records-json`).
        records_json: String,
        /// The measured requests (the per-request timeline).
        records: Vec<LevelRecord>,
        /// The run as a `tokenscope.raw/1.2` file.
        raw_jsonl: String,
    },
    /// The run could not be made.
    Failed(String),
}

/// The page's side: load the run module (once; `boot.js` caches it) and make
/// the run; `on_message` hears every message until the run ends.
pub async fn start(
    request: &RunRequest,
    lanes: Option<web_sys::Element>,
    on_message: impl Fn(RunMessage) + 'static,
) -> Result<(), String> {
    let run = lazy_export("tokenscopeRun", "run_bench", "run module").await?;
    let request = serde_json::to_string(request).map_err(|e| e.to_string())?;
    let on_text = Closure::<dyn Fn(String)>::new(move |text: String| {
        on_message(
            serde_json::from_str(&text)
                .unwrap_or_else(|e| RunMessage::Failed(format!("the run module's message: {e}"))),
        );
    });
    let lanes = lanes.map_or(JsValue::NULL, JsValue::from);
    let promise = run
        .call3(
            &JsValue::NULL,
            &JsValue::from_str(&request),
            &lanes,
            on_text.as_ref(),
        )
        .and_then(|p| p.dyn_into::<js_sys::Promise>())
        .map_err(|e| format!("the run module could not run: {}", js_error_text(&e)))?;
    let done = JsFuture::from(promise).await;
    drop(on_text);
    done.map(|_| ())
        .map_err(|e| format!("the run module could not run: {}", js_error_text(&e)))
}

/// The page's side: stop the run going (the module is loaded: a run started it).
pub async fn stop() {
    if let Ok(stop) = lazy_export("tokenscopeRun", "stop_bench", "run module").await {
        let _ = stop.call0(&JsValue::NULL);
    }
}

thread_local! {
    /// The stop signal of the run going in the module.
    static CANCEL: RefCell<Option<CancelToken>> = const { RefCell::new(None) };
}

/// The module's side: stop the run going.
pub fn stop_current() {
    CANCEL.with(|c| {
        if let Some(t) = c.borrow().as_ref() {
            t.cancel();
        }
    });
}

/// The module's side: make the run, tier after tier (input or output tiers: the
/// whole sweep at each, one report each, as `bench`), telling `send` as it goes.
pub async fn run_tiers(
    request: RunRequest,
    lanes: Option<web_sys::Element>,
    cancel: CancelToken,
    send: impl Fn(RunMessage) + Clone + 'static,
) {
    let auth = super::fetch::auth_of(&request.api_key, &request.key_header, &request.headers);
    let (plan, auth) = match request.settings.validate().and_then(|p| Ok((p, auth?))) {
        Ok(x) => x,
        Err(e) => return send(RunMessage::Failed(e)),
    };
    let painter = Painter::new(lanes, plan.paint, plan.paint_fallback);
    let input = RunInput {
        plan,
        auth,
        painter,
        cancel,
        worker_url: request.worker_url,
        tokens: Rc::default(),
    };
    let tiers = input.plan.tiers.clone();
    for (k, tier) in tiers.iter().enumerate() {
        let events = send.clone();
        let run = RunInput {
            plan: input.plan.for_tier(k),
            ..input.clone()
        };
        let out = match runner::run(run, move |e| events(RunMessage::Event(e))).await {
            Ok(out) => out,
            Err(e) => return send(RunMessage::Failed(e)),
        };
        let last = k + 1 == tiers.len() || input.cancel.is_cancelled();
        let report_json = out.report_json.unwrap_or_else(|| out.report.to_json());
        if tiers.len() > 1 {
            send(RunMessage::TierDone {
                label: tier.label(),
                report_json: report_json.clone(),
            });
        }
        if last {
            let records = out
                .records
                .iter()
                .filter(|r| !r.line.warmup)
                .map(|r| LevelRecord {
                    level: r.line.level,
                    record: r.line.record.clone(),
                })
                .collect();
            return send(RunMessage::Finished {
                records_json: serde_json::to_string(&out.records).unwrap_or_default(),
                raw_jsonl: runner::raw_jsonl(&out.raw, &out.records),
                records,
                report_json,
            });
        }
    }
}

/// The module's export `run_bench` (web-run's `lib.rs`): the [`RunRequest`] as
/// JSON, the stream view's element (or `null`), and a function that hears each
/// [`RunMessage`] as JSON; resolves when the run ended. The run's stop signal is
/// set before it returns, so a [`stop_current`] right after it stops this run.
pub fn run_bench(request: String, lanes: JsValue, on_message: js_sys::Function) -> js_sys::Promise {
    let token = CancelToken::new();
    CANCEL.with(|c| *c.borrow_mut() = Some(token.clone()));
    let on_message = Rc::new(on_message);
    let send = move |m: RunMessage| {
        let text = serde_json::to_string(&m).unwrap_or_default();
        let _ = on_message.call1(&JsValue::NULL, &JsValue::from_str(&text));
    };
    wasm_bindgen_futures::future_to_promise(async move {
        match serde_json::from_str::<RunRequest>(&request) {
            Ok(r) => run_tiers(r, lanes.dyn_into().ok(), token, send).await,
            Err(e) => send(RunMessage::Failed(format!("the page's run request: {e}"))),
        }
        Ok(JsValue::UNDEFINED)
    })
}
