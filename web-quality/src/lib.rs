//! # tokenscope-web-quality
//!
//! The quality checks in the browser: core's [`tokenscope_quality::run`]
//! (the same measurement as `tokenscope quality`) compiled to a wasm module of
//! its own, which the page imports only when its Quality view opens, so none of
//! it weighs on the first load. The requests go by the browser's `fetch` to the
//! endpoint the Benchmark view is set to ([`transport::Fetch`]), or to the
//! page's simulator answered by core's toy model ([`transport::Sim`], as
//! `tokenscope mock` answers them).
//!
//! One export, [`mount_view`]: the view (a form, a status line, the report)
//! rendered into an element the page gives it.

pub mod transport;
mod view;

use wasm_bindgen::prelude::*;

/// Show the Quality view in `root` for `endpoint`: `{"url": base URL or null
/// (the simulator), "model": name or null, "headers": {name: value},
/// "sim_seed": the simulator's seed}`. Called again with another endpoint, the
/// view is rebuilt for it.
#[wasm_bindgen]
pub fn mount_view(root: web_sys::Element, endpoint: JsValue) -> Result<(), JsValue> {
    let endpoint = view::Endpoint::from_js(&endpoint).map_err(|e| JsValue::from_str(&e))?;
    view::mount(root, endpoint)
}
