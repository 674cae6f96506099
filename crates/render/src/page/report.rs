//! The protocol between the page and its report module (`web-report/`): core's
//! verdict, diagnosis and combined-report renderer compiled to a wasm module of
//! its own, fetched only when the page has a report to analyse.
//!
//! The request carries the client and kernels reports as the JSON text the page
//! already holds (its run's report, a file, its GPU view's report), so the page
//! needs no report serializer for them; the answer is the HTML the page inlines
//! and the self-contained document its "Export combined report" saves.

use serde::{Deserialize, Serialize};

use crate::combined::{self, BodyOptions};
use tokenscope_core::analyze::verdict;
use tokenscope_core::report::ClientReport;
use tokenscope_core::report::combined::{ModelChoice, ReportInput};
use tokenscope_hw::floor::{ModelShape, Quant};
use tokenscope_kernel_report::KernelReport;

/// The model being served, as picked in the page's form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPick {
    /// A model preset's name (`llama-3.1-8b`).
    pub preset: String,
    /// Its weight format.
    pub quant: Quant,
    /// The context at which to evaluate the floor, tokens.
    pub context: u64,
    /// The GPU's memory, bytes: adds the model's KV-cache plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_bytes: Option<u64>,
}

/// What the page asks the report module to render.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportRequest {
    /// The client report (`tokenscope.client/1` JSON).
    pub client_json: String,
    /// A kernels report (`tokenscope.kernels/1` JSON), for the floor comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernels_json: Option<String>,
    /// The model being served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelPick>,
}

/// The rendered analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rendered {
    /// The HTML fragment the page inlines (`render::combined::html_body`, without
    /// the run's own charts: the page draws them above).
    pub body: String,
    /// The self-contained document (`render::combined::html`), as
    /// `tokenscope report` writes it.
    pub html: String,
}

impl ReportRequest {
    /// Read the reports, analyse them and render: what the module does. An
    /// unknown preset leaves the floor comparison out (the page offers only
    /// presets).
    pub fn render(&self) -> Result<Rendered, String> {
        let client = ClientReport::from_json(&self.client_json)
            .map_err(|e| format!("the client report: {e}"))?;
        let kernels = match &self.kernels_json {
            Some(text) => Some(
                KernelReport::from_json(text).map_err(|e| format!("the kernels report: {e}"))?,
            ),
            None => None,
        };
        let model = self.model.as_ref().and_then(|m| {
            Some(ModelChoice {
                gpu_memory_bytes: m.gpu_memory_bytes,
                shape: ModelShape::preset(&m.preset).ok()?,
                quant: m.quant,
                context: m.context.max(1),
            })
        });
        let input = ReportInput {
            clients: vec![client],
            kernels,
            model,
        };
        let c = verdict::analyze(&input);
        let body = combined::html_body(
            &input,
            &c,
            BodyOptions {
                client_charts: false,
            },
        );
        Ok(Rendered {
            body,
            html: combined::html(&input, &c),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_core::testing;

    #[test]
    fn a_request_renders_the_analysis_without_the_runs_own_charts() {
        let levels = (1..=3)
            .map(|c| {
                let recs: Vec<_> = (0..4)
                    .map(|i| testing::record(f64::from(i) * 100.0, 10.0 * f64::from(c), 2.0, 8))
                    .collect();
                testing::level(tokenscope_core::report::Load::Concurrency(c), &recs)
            })
            .collect();
        let client = testing::client_report(tokenscope_core::report::Source::Browser, levels);
        let req = ReportRequest {
            client_json: client.to_json(),
            kernels_json: None,
            model: Some(ModelPick {
                preset: "llama-3.1-8b".into(),
                quant: Quant::Q4_0,
                context: 4096,
                gpu_memory_bytes: Some(80 << 30),
            }),
        };
        let back: ReportRequest =
            serde_json::from_str(&serde_json::to_string(&req).unwrap()).unwrap();
        assert_eq!(back, req);
        let r = req.render().unwrap();
        assert!(r.body.contains("id=\"verdict\""), "{}", r.body);
        // Llama 3.1 8B at 4096 tokens, f16 KV: 512 MiB per sequence.
        assert!(r.body.contains("id=\"kv-plan\""), "{}", r.body);
        assert!(r.body.contains("512.0 MiB"), "{}", r.body);
        assert!(
            !r.body.contains("<svg"),
            "the page draws the run's charts itself"
        );
        assert!(r.html.starts_with("<!doctype html>") && r.html.contains("<svg"));
        let bad = ReportRequest {
            client_json: "{}".into(),
            ..req
        };
        assert!(bad.render().unwrap_err().starts_with("the client report"));
    }
}
