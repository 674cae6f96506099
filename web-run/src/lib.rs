//! # tokenscope-web-run
//!
//! The page's run module: a wasm of its own that `boot.js` imports only when a
//! run starts, or when the Real users view talks to the built-in simulator
//! (`window.tokenscopeRun()`). It is the page's crate (`web/`, built without its
//! `app` feature) reached through these exports, so the runner, the `fetch` and
//! worker transports, the simulator, the paint probe and the report's assembly
//! weigh nothing on the page's first load. The messages are
//! `tokenscope_web::services::lazy_run`'s, as JSON.

use tokenscope_web::services::{lazy_run, rum_demo};
use wasm_bindgen::prelude::*;

/// Make a run: `request` is a `RunRequest` (JSON), `lanes` the stream view's
/// element (or `null`), `on_message` hears each `RunMessage` (JSON). Resolves
/// when the run ended.
#[wasm_bindgen]
pub fn run_bench(request: String, lanes: JsValue, on_message: js_sys::Function) -> js_sys::Promise {
    lazy_run::run_bench(request, lanes, on_message)
}

/// Stop the run going.
#[wasm_bindgen]
pub fn stop_bench() {
    lazy_run::stop_current();
}

/// The Real users view's simulated server: a function answering the chat demo's
/// requests (see `rum_demo::sim_opener`), for the simulator whose settings are
/// this `SimConfig` JSON.
#[wasm_bindgen]
pub fn sim_opener(config: String) -> Result<JsValue, JsValue> {
    rum_demo::sim_opener_of(&config).map_err(|e| JsValue::from_str(&e))
}
