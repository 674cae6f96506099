//! The page's side of the GPU module: `web-gpu/` (the kernel harness on WebGPU) is a
//! second wasm that `boot.js` imports only when asked (`window.tokenscopeGpu()`),
//! so none of wgpu or the harness weighs on the first load. The two modules talk in
//! the JSON shapes of `tokenscope_core::page::gpu`.

use js_sys::{Function, Promise, Reflect};
use tokenscope_core::page::gpu::{
    AdapterProbe, GpuEvent, GpuFailure, GpuFailureKind, GpuRunRequest, KernelsRead,
};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::services::fetch::js_error_text;

/// Reads JSON straight into its type, as `ClientReport::from_json` does (not
/// through `serde_json::Value`: one set of deserializing code in the page).
fn read<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

fn not_loaded(message: String) -> GpuFailure {
    GpuFailure {
        kind: GpuFailureKind::NotLoaded,
        message,
    }
}

/// A rejection from the GPU module: its `GpuFailure` JSON, or a JS error (a trap).
fn failure_of(e: &JsValue) -> GpuFailure {
    match e.as_string() {
        Some(text) => GpuFailure::parse(&text),
        None => GpuFailure {
            kind: GpuFailureKind::Failed,
            message: format!("the GPU module stopped: {}", js_error_text(e)),
        },
    }
}

/// Loads (once; `boot.js` caches it) and returns the GPU module's exports.
pub async fn module() -> Result<JsValue, GpuFailure> {
    let window = web_sys::window().ok_or_else(|| not_loaded("no window".into()))?;
    let loader = Reflect::get(&window, &JsValue::from_str("tokenscopeGpu"))
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
        .ok_or_else(|| {
            not_loaded(
                "this build of the page has no GPU module (window.tokenscopeGpu is missing: build the page with scripts/build-web.sh)"
                    .into(),
            )
        })?;
    let promise: Promise = loader
        .call0(&JsValue::NULL)
        .and_then(|p| p.dyn_into::<Promise>())
        .map_err(|e| {
            not_loaded(format!(
                "could not load the GPU module: {}",
                js_error_text(&e)
            ))
        })?;
    JsFuture::from(promise).await.map_err(|e| {
        not_loaded(format!(
            "could not load the GPU module: {}",
            js_error_text(&e)
        ))
    })
}

fn export(module: &JsValue, name: &str) -> Result<Function, GpuFailure> {
    Reflect::get(module, &JsValue::from_str(name))
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
        .ok_or_else(|| not_loaded(format!("the GPU module has no `{name}` export")))
}

async fn settle(result: Result<JsValue, JsValue>) -> Result<String, GpuFailure> {
    let promise: Promise = result
        .and_then(|p| p.dyn_into::<Promise>())
        .map_err(|e| failure_of(&e))?;
    let value = JsFuture::from(promise).await.map_err(|e| failure_of(&e))?;
    value.as_string().ok_or_else(|| GpuFailure {
        kind: GpuFailureKind::Failed,
        message: "the GPU module answered with something other than text".into(),
    })
}

/// The adapter the GPU view would run on (loads the module).
pub async fn adapter_info() -> Result<AdapterProbe, GpuFailure> {
    let m = module().await?;
    let text = settle(export(&m, "adapter_info")?.call0(&JsValue::NULL)).await?;
    read(&text).map_err(|e| GpuFailure {
        kind: GpuFailureKind::Failed,
        message: format!("unexpected adapter description from the GPU module: {e}"),
    })
}

/// Runs the kernel harness; `on_event` gets every progress event; aborting
/// `signal` stops the run between kernels. Returns the report and its JSON.
pub async fn run_kernels(
    request: &GpuRunRequest,
    on_event: impl Fn(GpuEvent) + 'static,
    signal: &web_sys::AbortSignal,
) -> Result<KernelsRead, GpuFailure> {
    let m = module().await?;
    let run = export(&m, "run_kernels")?;
    let callback = Closure::<dyn Fn(String)>::new(move |text: String| {
        if let Ok(event) = read::<GpuEvent>(&text) {
            on_event(event);
        }
    });
    let request = serde_json::to_string(request).unwrap_or_default();
    let result = run.call3(
        &JsValue::NULL,
        &JsValue::from_str(&request),
        callback.as_ref().unchecked_ref(),
        signal,
    );
    // `callback` lives until the run has settled.
    let text = settle(result).await;
    drop(callback);
    let text = text?;
    read::<KernelsRead>(&text).map_err(|e| GpuFailure {
        kind: GpuFailureKind::Failed,
        message: format!("the GPU module's report does not read back: {e}"),
    })
}
