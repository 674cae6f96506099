//! The few page services the GPU view needs: the automation attribute, a file
//! download, the clipboard and the time (as the page's own `services::browser`
//! has them for its views).

use wasm_bindgen::{JsCast, JsValue};

fn document() -> Option<web_sys::Document> {
    web_sys::window()?.document()
}

/// Whether the GPU view is shown (its host is not hidden).
pub fn view_shown() -> bool {
    document()
        .and_then(|d| d.get_element_by_id("gpu-view"))
        .is_some_and(|v| v.closest("[hidden]").ok().flatten().is_none())
}

/// Set `data-run-state` on `<body>` (the automation contract, `docs/url.md`).
pub fn set_run_state(state: &str) {
    if let Some(body) = document().and_then(|d| d.body()) {
        let _ = body.set_attribute("data-run-state", state);
    }
}

/// The current time, RFC 3339 (UTC).
pub fn now_rfc3339() -> String {
    String::from(js_sys::Date::new_0().to_iso_string())
}

/// Offer `text` as a file download (a `blob:` URL: nothing leaves the page).
pub fn download(filename: &str, text: &str, mime: &str) -> Result<(), JsValue> {
    let doc = document().ok_or("no document")?;
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)?;
    let a: web_sys::HtmlAnchorElement = doc.create_element("a")?.unchecked_into();
    a.set_href(&url);
    a.set_download(filename);
    a.click();
    web_sys::Url::revoke_object_url(&url)
}

/// Copy `text` to the clipboard (best effort).
pub fn copy_text(text: &str) {
    if let Some(w) = web_sys::window() {
        let _ = w.navigator().clipboard().write_text(text);
    }
}
