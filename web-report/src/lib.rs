//! # tokenscope-web-report
//!
//! The combined-report analysis in the browser: core's verdict, diagnosis and
//! Markdown/HTML renderer ([`tokenscope_core::analyze::verdict`],
//! [`tokenscope_render::combined`]) compiled to a wasm module of its own,
//! which the page imports only when it has a report to analyse, so none of it
//! weighs on the first load.
//!
//! One export, [`render_report`], talking in the JSON shapes of
//! [`tokenscope_render::page::report`].

mod compare_panel;

use tokenscope_render::page::report::ReportRequest;
use tokenscope_render::page::scrape::{self, TakenScrape};
use wasm_bindgen::prelude::*;

/// Render the analysis a [`ReportRequest`] (JSON) asks for: its
/// [`tokenscope_render::page::report::Rendered`] as JSON, or why it could not.
#[wasm_bindgen]
pub fn render_report(request: &str) -> Result<String, String> {
    render(request)
}

/// Read the page's scrapes (a JSON array of
/// [`TakenScrape`]): a JSON array of [`tokenscope_render::page::scrape::ReadScrape`],
/// each the raw file's line for one scrape.
#[wasm_bindgen]
pub fn read_scrapes(taken: &str) -> Result<String, String> {
    let taken: Vec<TakenScrape> =
        serde_json::from_str(taken).map_err(|e| format!("invalid scrapes: {e}"))?;
    serde_json::to_string(&scrape::read_scrapes(&taken)).map_err(|e| e.to_string())
}

/// The client report (JSON) of a page run that scraped, from its raw file: the
/// server view joined to its levels.
#[wasm_bindgen]
pub fn rebuild_report(raw_jsonl: &str) -> Result<String, String> {
    scrape::rebuild_report(raw_jsonl)
}

/// Read a kernels report file (`tokenscope.kernels/1` JSON): a
/// [`tokenscope_render::page::gpu::KernelsRead`] JSON (its text and what the page
/// shows of it), or why it is not one.
#[wasm_bindgen]
pub fn read_kernels(json: String) -> Result<String, String> {
    let read = tokenscope_render::page::gpu::KernelsView::read(json)?;
    serde_json::to_string(&read).map_err(|e| e.to_string())
}

/// Prepare a prompts file or a trace for the page (a JSON
/// [`tokenscope_render::page::workload::WorkloadRequest`]): the
/// [`tokenscope_render::page::workload::PreparedWorkload`] (every body to send) as
/// JSON, or why the text is not such a file (the CLI's own errors: the line or
/// record and the field).
#[wasm_bindgen]
pub fn prepare_workload(request: &str) -> Result<String, String> {
    let req: tokenscope_render::page::workload::WorkloadRequest = serde_json::from_str(request)
        .map_err(|e| format!("invalid request to the report module: {e}"))?;
    serde_json::to_string(&req.prepare()?).map_err(|e| e.to_string())
}

/// Mount the Compare panel into `host` (see `compare_panel`): `this_run` and
/// `this_raw` are the page's finished run's report and raw file, if any.
#[wasm_bindgen]
pub fn mount_compare(
    host: web_sys::Element,
    this_run: Option<String>,
    this_raw: Option<String>,
) -> Result<(), JsValue> {
    compare_panel::mount(host, this_run, this_raw)
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
    use tokenscope_render::page::report::Rendered;

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
