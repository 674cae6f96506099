//! The page's side of the report module: `web-report/` (core's verdict, diagnosis
//! and combined-report renderer) is a wasm of its own that `boot.js` imports only
//! when asked (`window.tokenscopeReport()`), so none of it weighs on the first
//! load. The two talk in the JSON shapes of `tokenscope_render::page::report` (the
//! analysis) and `tokenscope_render::page::scrape` (a run's scrapes, read there).

use js_sys::{Function, Promise, Reflect};
use tokenscope_render::page::gpu::KernelsRead;
use tokenscope_render::page::report::{Rendered, ReportRequest};
use tokenscope_render::page::scrape::{ReadScrape, TakenScrape};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::services::fetch::js_error_text;

/// Loads the module (once; `boot.js` caches it) and returns its exports.
pub async fn module() -> Result<JsValue, String> {
    let window = web_sys::window().ok_or("no window")?;
    let loader = Reflect::get(&window, &JsValue::from_str("tokenscopeReport"))
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
        .ok_or(
            "this build of the page has no report module (window.tokenscopeReport is missing: build the page with scripts/build-web.sh)",
        )?;
    let promise: Promise = loader
        .call0(&JsValue::NULL)
        .and_then(|p| p.dyn_into::<Promise>())
        .map_err(|e| format!("could not load the report module: {}", js_error_text(&e)))?;
    JsFuture::from(promise)
        .await
        .map_err(|e| format!("could not load the report module: {}", js_error_text(&e)))
}

/// Call the module's export `name` with one text argument; its text answer.
async fn call(name: &str, arg: &str) -> Result<String, String> {
    let m = module().await?;
    let f = Reflect::get(&m, &JsValue::from_str(name))
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
        .ok_or_else(|| format!("the report module has no `{name}` export"))?;
    f.call1(&JsValue::NULL, &JsValue::from_str(arg))
        .map_err(|e| e.as_string().unwrap_or_else(|| js_error_text(&e)))?
        .as_string()
        .ok_or_else(|| "the report module answered with something other than text".into())
}

/// The analysis of `request`, rendered by the report module (loaded on first use).
pub async fn render(request: &ReportRequest) -> Result<Rendered, String> {
    let request = serde_json::to_string(request).map_err(|e| e.to_string())?;
    let text = call("render_report", &request).await?;
    serde_json::from_str(&text).map_err(|e| format!("the report module's answer: {e}"))
}

/// Mount the module's Compare panel into `host` (reopening it refreshes the
/// page's run in it).
pub async fn mount_compare(
    host: &web_sys::Element,
    run: Option<String>,
    raw: Option<String>,
) -> Result<(), String> {
    let m = module().await?;
    let f = Reflect::get(&m, &JsValue::from_str("mount_compare"))
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
        .ok_or("the report module has no `mount_compare` export")?;
    let text = |t: Option<String>| t.map_or(JsValue::UNDEFINED, |t| JsValue::from_str(&t));
    f.call3(&JsValue::NULL, host, &text(run), &text(raw))
        .map(|_| ())
        .map_err(|e| js_error_text(&e))
}

/// A kernels report file read by the module: its text and what the page shows.
pub async fn read_kernels(json: &str) -> Result<KernelsRead, String> {
    let text = call("read_kernels", json).await?;
    serde_json::from_str(&text).map_err(|e| format!("the report module's answer: {e}"))
}

/// The scrapes read into their raw-file lines (in order).
pub async fn read_scrapes(taken: &[TakenScrape]) -> Result<Vec<ReadScrape>, String> {
    let request = serde_json::to_string(taken).map_err(|e| e.to_string())?;
    let text = call("read_scrapes", &request).await?;
    serde_json::from_str(&text).map_err(|e| format!("the report module's answer: {e}"))
}

/// A prompts file or a trace prepared by the module (the CLI's parsers): every
/// body to send.
pub async fn prepare_workload(
    request: &tokenscope_render::page::workload::WorkloadRequest,
) -> Result<tokenscope_render::page::workload::PreparedWorkload, String> {
    let request = serde_json::to_string(request).map_err(|e| e.to_string())?;
    let text = call("prepare_workload", &request).await?;
    // Through `serde_json::Value`, as `ClientReport::from_json` reads: the
    // deserializing code is the one set the page already carries.
    serde_json::from_str(&text).map_err(|e| format!("the report module's answer: {e}"))
}

/// The page run's report (JSON) with the server view, from its raw file.
pub async fn rebuild_report(raw_jsonl: &str) -> Result<String, String> {
    call("rebuild_report", raw_jsonl).await
}
