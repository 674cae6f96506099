//! The page's side of the GPU module: `web-gpu/` (the kernel harness on WebGPU and
//! the GPU view that runs it) is a second wasm that `boot.js` imports only when
//! asked (`window.tokenscopeGpu()`), so none of wgpu, the harness or the view's UI
//! weighs on the first load. The page hands it an element to render the view into
//! (`mount_view`) and takes back each finished run's report JSON.

use tokenscope_render::page::gpu::GpuViewSettings;
use wasm_bindgen::prelude::*;

use crate::services::fetch::js_error_text;

/// Load the module (once; `boot.js` caches it) and render the GPU view into
/// `root`; `on_report` gets each finished run's `tokenscope.kernels/1` JSON.
pub async fn mount(
    root: web_sys::Element,
    settings: &GpuViewSettings,
    on_report: impl Fn(String) + 'static,
) -> Result<(), String> {
    let mount =
        crate::services::browser::lazy_export("tokenscopeGpu", "mount_view", "GPU module").await?;
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
