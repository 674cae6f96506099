//! # tokenscope-web-gpu
//!
//! The kernel harness in the browser: `kernel-harness` (the same Rust, the same WGSL
//! in `shaders/`) on wgpu's WebGPU backend, compiled to a second wasm module that the
//! page loads only when its GPU view opens, so the first load stays light.
//!
//! Two exports, both async (JS promises), talking in the JSON shapes of
//! [`tokenscope_render::page::gpu`]:
//!
//! - [`adapter_info`] resolves to an [`AdapterProbe`] (the adapter, its features and
//!   limits) or rejects with a [`GpuFailure`] (no WebGPU, no adapter);
//! - [`run_kernels`] runs a preset, calling `on_progress` with [`GpuEvent`]s, stops
//!   between kernels when `signal` is aborted, and resolves to the
//!   `tokenscope.kernels/1` report (rejects with a [`GpuFailure`]).
//!
//! The browser's differences from the CLI are all in [`run`] or in
//! [`SuiteConfig::for_browser`]: `performance.now()` behind the harness's
//! [`Clock`], samples batched to 10 ms (browsers quantize timestamps), a per-kernel
//! memory budget, the user agent in the report; wgpu's callbacks are driven by the
//! browser's event loop (no `device.poll`).
//!
//! [`AdapterProbe`]: tokenscope_render::page::gpu::AdapterProbe
//! [`GpuFailure`]: tokenscope_render::page::gpu::GpuFailure
//! [`SuiteConfig::for_browser`]: kernel_harness::suite::SuiteConfig::for_browser
//! [`Clock`]: kernel_harness::clock::Clock

use tokenscope_render::page::gpu::{GpuEvent, GpuRunRequest, GpuViewSettings};
use wasm_bindgen::prelude::*;

mod dom;
pub mod file;
mod results;
mod run;
pub mod view;

pub use run::{GpuPageError, page_config};
use run::{install_panic_hook, probe, run};

/// Show the GPU view in `root` (the page calls this the first time the view
/// opens): `settings` is a `GpuViewSettings` JSON (the URL's preset, timestamps,
/// autorun and notes); `on_report` is called with each finished run's
/// `tokenscope.kernels/1` JSON (the page's Analysis takes it).
#[wasm_bindgen]
pub fn mount_view(root: web_sys::Element, settings: &str, on_report: js_sys::Function) {
    install_panic_hook();
    let settings: GpuViewSettings = serde_json::from_str(settings).unwrap_or_default();
    let onreport = yew::Callback::from(move |json: String| {
        let _ = on_report.call1(&JsValue::NULL, &JsValue::from_str(&json));
    });
    // The page is a yew app of another wasm module, and yew tells apps apart
    // by a number each module counts from 1 (`__yew_subtree_id` on the root):
    // with the same number as the page's own app, the page would take this
    // view's events for its own and run its listeners of the same ids (a
    // click on "Measure this GPU" switched the page's tab). An empty app on a
    // detached element takes number 1 here, so this view is 2.
    if let Some(spare) = root
        .owner_document()
        .and_then(|d| d.create_element("div").ok())
    {
        yew::Renderer::<Nothing>::with_root(spare).render();
    }
    yew::Renderer::<view::GpuView>::with_root_and_props(
        root,
        view::GpuViewProps { settings, onreport },
    )
    .render();
}

/// An app that renders nothing (see [`mount_view`]).
#[yew::function_component]
fn Nothing() -> yew::Html {
    yew::Html::default()
}

/// The adapter the GPU view would use: resolves to an `AdapterProbe` JSON, rejects
/// with a `GpuFailure` JSON (no WebGPU, no adapter).
#[wasm_bindgen]
pub async fn adapter_info() -> Result<String, JsValue> {
    install_panic_hook();
    let probe = probe().await.map_err(GpuPageError::into_js)?;
    serde_json::to_string(&probe).map_err(|e| JsValue::from_str(&e.to_string()))
}

/// Runs the kernel harness: `request` is a `GpuRunRequest` JSON (`{"preset":
/// "quick"}`), `on_progress` is called with each `GpuEvent` JSON, `signal` (an
/// `AbortSignal`) stops the run between kernels. Resolves to a `KernelsRead` JSON
/// (the `tokenscope.kernels/1` report's text and what the page shows of it),
/// rejects with a `GpuFailure` JSON.
#[wasm_bindgen]
pub async fn run_kernels(
    request: String,
    on_progress: js_sys::Function,
    signal: Option<web_sys::AbortSignal>,
) -> Result<String, JsValue> {
    install_panic_hook();
    let request: GpuRunRequest = if request.trim().is_empty() {
        GpuRunRequest::default()
    } else {
        serde_json::from_str(&request)
            .map_err(|e| GpuPageError::BadRequest(e.to_string()).into_js())?
    };
    let emit = Box::new(move |event: GpuEvent| {
        if let Ok(text) = serde_json::to_string(&event) {
            // A throwing callback must not stop the run.
            let _ = on_progress.call1(&JsValue::NULL, &JsValue::from_str(&text));
        }
    });
    let (read, _) = run(&request, run::Picked::default(), emit, signal)
        .await
        .map_err(GpuPageError::into_js)?;
    serde_json::to_string(&read).map_err(|e| JsValue::from_str(&e.to_string()))
}
