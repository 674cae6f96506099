//! # tokenscope-report-view
//!
//! The combined-report analysis in the browser: core's verdict, diagnosis and
//! Markdown/HTML renderer ([`tokenscope_core::analyze::verdict`],
//! [`tokenscope_core::render::combined`]) compiled to a wasm module of its own,
//! which the page imports only when it has a report to analyse, so none of it
//! weighs on the first load.
//!
//! One export, [`render_report`], talking in the JSON shapes of
//! [`tokenscope_core::page::report`].

use tokenscope_core::page::report::ReportRequest;
use wasm_bindgen::prelude::*;

/// Render the analysis a [`ReportRequest`] (JSON) asks for: its
/// [`tokenscope_core::page::report::Rendered`] as JSON, or why it could not.
#[wasm_bindgen]
pub fn render_report(request: &str) -> Result<String, String> {
    render(request)
}

fn render(request: &str) -> Result<String, String> {
    let req: ReportRequest = serde_json::from_str(request)
        .map_err(|e| format!("invalid request to the report module: {e}"))?;
    let out = req.render()?;
    serde_json::to_string(&out).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_core::page::report::Rendered;

    #[test]
    fn a_bad_request_is_an_error_naming_it() {
        let e = render("{").unwrap_err();
        assert!(e.starts_with("invalid request to the report module"), "{e}");
        let e = render(r#"{"client_json": "{}"}"#).unwrap_err();
        assert!(e.starts_with("the client report"), "{e}");
        let native = include_str!("../../tests/fixtures/reports/native.json");
        let req = serde_json::json!({ "client_json": native }).to_string();
        let out: Rendered = serde_json::from_str(&render(&req).unwrap()).unwrap();
        assert!(out.body.contains("id=\"diagnosis\""));
    }
}
