//! # tokenscope-web
//!
//! The browser client: user-perceived latency measured in a real browser. The page
//! streams from an OpenAI-compatible endpoint with `fetch` (or from the simulator
//! built into the page), stamps every read with `performance.now()` before parsing,
//! feeds core's timeline (the same SSE decoder, metrics and report model as the
//! native client), and measures when each request's first token was *painted*
//! (Element Timing, or an animation-frame fallback).
//!
//! Layout, as yew's todomvc: [`state`] (`State` + `Action` in a `Reducible`),
//! [`components`] (small function components), [`services`] (fetch transport,
//! simulated transport, paint probe, runner). No metric is computed here: core does.
//!
//! `scripts/build-web.sh` builds the page into `dist/`; `docs/web.md` explains how
//! it measures and the URL automation contract.

pub mod actions;
pub mod app;
pub mod components;
pub mod services;
pub mod settings;
pub mod state;

#[cfg(feature = "app")]
use wasm_bindgen::prelude::*;

/// Mount the page on `#app` (called by the page's `boot.js`, with the URL of the
/// network worker's script).
#[cfg(feature = "app")]
#[wasm_bindgen]
pub fn run_app(worker_url: Option<String>) {
    console_error_panic_hook_set();
    let query = services::browser::location_query();
    let Some(root) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id("app"))
    else {
        return;
    };
    yew::Renderer::<app::App>::with_root_and_props(
        root,
        app::AppProps {
            query: query.into(),
            worker_url: worker_url.map(Into::into),
        },
    )
    .render();
}

/// Report panics in the console and in `#run-error` (for the automation contract).
#[cfg(feature = "app")]
fn console_error_panic_hook_set() {
    std::panic::set_hook(Box::new(|info| {
        let msg = format!("the page crashed: {info}");
        web_sys::console::error_1(&msg.clone().into());
        if let Some(doc) = web_sys::window().and_then(|w| w.document()) {
            if let Some(el) = doc.get_element_by_id("run-error") {
                el.set_text_content(Some(&msg));
            }
            if let Some(body) = doc.body() {
                let _ = body.set_attribute("data-run-state", "failed");
            }
        }
    }));
}
