//! Small browser facts and chores: the protocol a request used (Resource Timing),
//! the user agent, page visibility, the session-only key store, file export and
//! import, the `data-run-state` attribute.

use js_sys::Reflect;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// `sessionStorage` key of the API key (only when the user ticks "remember in this tab").
const KEY_STORAGE: &str = "tokenscope.api_key";

fn window() -> Option<web_sys::Window> {
    web_sys::window()
}

/// The page's URL query (`?...`).
pub fn location_query() -> String {
    window()
        .and_then(|w| w.location().search().ok())
        .unwrap_or_default()
}

/// The page's URL without its query and fragment.
pub fn location_base() -> String {
    window()
        .and_then(|w| {
            let l = w.location();
            Some(format!("{}{}", l.origin().ok()?, l.pathname().ok()?))
        })
        .unwrap_or_default()
}

/// `navigator.userAgent`.
pub fn user_agent() -> Option<String> {
    window().and_then(|w| w.navigator().user_agent().ok())
}

/// `navigator.hardwareConcurrency`.
pub fn cpus() -> Option<u32> {
    window()
        .map(|w| w.navigator().hardware_concurrency())
        .filter(|n| *n >= 1.0)
        .map(|n| n as u32)
}

/// The wall-clock time now (RFC 3339), for the report's `started_at` only.
pub fn now_rfc3339() -> String {
    String::from(js_sys::Date::new_0().to_iso_string())
}

/// Whether the page is visible (a hidden tab paints nothing and throttles timers).
pub fn page_visible() -> bool {
    window()
        .and_then(|w| w.document())
        .is_none_or(|d| d.visibility_state() == web_sys::VisibilityState::Visible)
}

/// Keep Resource Timing entries for a whole run (the default buffer holds 250).
pub fn grow_resource_timing_buffer() {
    if let Some(p) = window().and_then(|w| w.performance()) {
        p.set_resource_timing_buffer_size(100_000);
    }
}

/// The protocol (`nextHopProtocol`: `http/1.1`, `h2`, `h3`) of the latest request
/// to `url`, when the browser tells (a cross-origin server must send
/// `Timing-Allow-Origin`).
pub fn protocol_of(url: &str) -> Option<String> {
    let perf = window()?.performance()?;
    let entries = perf.get_entries_by_name(url);
    entries
        .iter()
        .rev()
        .filter_map(|e| e.dyn_into::<web_sys::PerformanceResourceTiming>().ok())
        .map(|e| e.next_hop_protocol())
        .find(|p| !p.is_empty())
}

/// The Resource Timing (this page's clock) of this page's request to `url` that
/// started at `t_send_ms` (within 50 ms; the closest); `None` while there is no
/// such entry yet. A time the browser hides (0: a cross-origin endpoint without
/// `Timing-Allow-Origin`) is `None` in it.
pub fn resource_timing_of(url: &str, t_send_ms: f64) -> Option<super::exchange::ResourceTiming> {
    let perf = window()?.performance()?;
    let href = web_sys::Url::new_with_base(url, &window()?.location().href().ok()?)
        .map(|u| u.href())
        .unwrap_or_else(|_| url.to_owned());
    perf.get_entries_by_name(&href)
        .iter()
        .filter_map(|e| e.dyn_into::<web_sys::PerformanceResourceTiming>().ok())
        .map(|e| ((e.start_time() - t_send_ms).abs(), e))
        .filter(|(gap, _)| *gap <= 50.0)
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, e)| super::exchange::ResourceTiming {
            request_start_ms: Some(e.request_start()).filter(|t| *t > 0.0),
            response_start_ms: Some(e.response_start()).filter(|t| *t > 0.0),
            protocol: Some(e.next_hop_protocol()).filter(|p| !p.is_empty()),
            connection: tokenscope_render::page::transport::ConnectTiming {
                domain_lookup_start: e.domain_lookup_start(),
                domain_lookup_end: e.domain_lookup_end(),
                connect_start: e.connect_start(),
                connect_end: e.connect_end(),
                secure_connection_start: e.secure_connection_start(),
            }
            .connection(),
        })
}

/// The stored key, when the user asked the page to remember it in this tab.
pub fn stored_key() -> Option<String> {
    window()?
        .session_storage()
        .ok()??
        .get_item(KEY_STORAGE)
        .ok()?
        .filter(|k| !k.is_empty())
}

/// Remember the key in this tab's `sessionStorage`, or forget it.
pub fn store_key(key: Option<&str>) {
    let Some(storage) = window().and_then(|w| w.session_storage().ok().flatten()) else {
        return;
    };
    match key {
        Some(k) if !k.is_empty() => {
            let _ = storage.set_item(KEY_STORAGE, k);
        }
        _ => {
            let _ = storage.remove_item(KEY_STORAGE);
        }
    }
}

/// Set `document.body`'s `data-run-state` (the automation contract).
pub fn set_run_state(state: &str) {
    if let Some(body) = window().and_then(|w| w.document()).and_then(|d| d.body()) {
        let _ = body.set_attribute("data-run-state", state);
    }
}

/// Offer `text` as a file download (a `blob:` URL: nothing leaves the page).
pub fn download(filename: &str, text: &str, mime: &str) -> Result<(), String> {
    let err = |e: JsValue| crate::services::fetch::js_error_text(&e);
    let doc = window().and_then(|w| w.document()).ok_or("no document")?;
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts).map_err(err)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(err)?;
    let a: web_sys::HtmlAnchorElement = doc.create_element("a").map_err(err)?.unchecked_into();
    a.set_href(&url);
    a.set_download(filename);
    a.click();
    let _ = web_sys::Url::revoke_object_url(&url);
    Ok(())
}

/// Read a file the user picked, as text.
pub async fn read_file(file: web_sys::File) -> Result<String, String> {
    let text = JsFuture::from(file.text())
        .await
        .map_err(|e| crate::services::fetch::js_error_text(&e))?;
    text.as_string()
        .ok_or_else(|| "the file is not text".into())
}

/// Copy text to the clipboard (best effort).
pub fn copy_text(text: &str) {
    if let Some(w) = window() {
        let clipboard = w.navigator().clipboard();
        let _ = clipboard.write_text(text);
    }
}

/// A random hex tag for this run's request ids.
pub fn run_tag() -> String {
    let a = (js_sys::Math::random() * f64::from(u32::MAX)) as u32;
    format!("{a:08x}")
}

/// Whether a JS value has a property (feature detection).
pub fn has_property(target: &JsValue, name: &str) -> bool {
    Reflect::has(target, &JsValue::from_str(name)).unwrap_or(false)
}

/// A lazy module's export: `window[loader]()` (a `boot.js` loader: it imports
/// the module once and caches it) resolves to the module, whose `export` is
/// returned. Errors name `what` and say how to get a build that has it.
pub async fn lazy_export(
    loader: &str,
    export: &str,
    what: &str,
) -> Result<js_sys::Function, String> {
    let loading = |e: JsValue| {
        format!(
            "could not load the {what}: {}",
            super::fetch::js_error_text(&e)
        )
    };
    let window = web_sys::window().ok_or("no window")?;
    let load = Reflect::get(&window, &JsValue::from_str(loader))
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .ok_or_else(|| {
            format!(
                "this build of the page has no {what} (window.{loader} is missing: build the page with scripts/build-web.sh)"
            )
        })?;
    let promise: js_sys::Promise = load
        .call0(&JsValue::NULL)
        .and_then(|p| p.dyn_into::<js_sys::Promise>())
        .map_err(loading)?;
    let module = JsFuture::from(promise).await.map_err(loading)?;
    Reflect::get(&module, &JsValue::from_str(export))
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .ok_or_else(|| format!("the {what} has no `{export}` export"))
}
