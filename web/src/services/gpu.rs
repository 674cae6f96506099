//! The page's side of the GPU module: `web-gpu/` (the kernel harness on WebGPU and
//! the GPU view that runs it) is a second wasm that `boot.js` imports only when
//! asked (`window.tokenscopeGpu()`), so none of wgpu, the harness or the view's UI
//! weighs on the first load. The page hands it an element to render the view into
//! (`mount_view`) and takes back each finished run's report JSON.

use js_sys::{Function, Promise, Reflect};
use tokenscope_core::page::gpu::GpuViewSettings;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::services::fetch::js_error_text;

/// Load the module (once; `boot.js` caches it) and render the GPU view into
/// `root`; `on_report` gets each finished run's `tokenscope.kernels/1` JSON.
pub async fn mount(
    root: web_sys::Element,
    settings: &GpuViewSettings,
    on_report: impl Fn(String) + 'static,
) -> Result<(), String> {
    let loading = |e: JsValue| format!("could not load the GPU module: {}", js_error_text(&e));
    let window = web_sys::window().ok_or("no window")?;
    let loader = Reflect::get(&window, &JsValue::from_str("tokenscopeGpu"))
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
        .ok_or(
            "this build of the page has no GPU module (window.tokenscopeGpu is missing: build the page with scripts/build-web.sh)",
        )?;
    let promise: Promise = loader
        .call0(&JsValue::NULL)
        .and_then(|p| p.dyn_into::<Promise>())
        .map_err(loading)?;
    let module = JsFuture::from(promise).await.map_err(loading)?;
    let mount = Reflect::get(&module, &JsValue::from_str("mount_view"))
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
        .ok_or("the GPU module has no `mount_view` export")?;
    let settings = serde_json::to_string(settings).map_err(|e| e.to_string())?;
    // The view lives as long as the page: so does its callback.
    let callback = Closure::<dyn Fn(String)>::new(on_report).into_js_value();
    mount
        .call3(
            &JsValue::NULL,
            &root,
            &JsValue::from_str(&settings),
            &callback,
        )
        .map_err(|e| {
            format!(
                "the GPU module could not show its view: {}",
                js_error_text(&e)
            )
        })?;
    Ok(())
}
