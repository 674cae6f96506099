//! The page's comparison: the report module's side of `tokenscope compare`.
//! The page hands over the files the user opened (and its own run), by name and
//! text; reports are paired with their raw files by name as the CLI finds them
//! beside a report ([`raw_names`]), and compared by the CLI's code
//! ([`tokenscope_core::report::compare::compare`]) into its JSON and HTML.

use serde::{Deserialize, Serialize};

use crate as render;
use tokenscope_core::report::ClientReport;
use tokenscope_core::report::compare::{CompareOptions, CompareRun, compare};
use tokenscope_core::report::raw::{self, RawFile};
use tokenscope_kernel_report::KernelReport;

/// The names a report's raw file goes by beside it: `X.json` -> `X.raw.jsonl`,
/// then `X.jsonl`.
pub fn raw_names(report: &str) -> [String; 2] {
    let stem = report.strip_suffix(".json").unwrap_or(report);
    [format!("{stem}.raw.jsonl"), format!("{stem}.jsonl")]
}

/// The name a report's kernels report goes by beside it: `X.json` ->
/// `X.kernels.json`.
pub fn kernels_name(report: &str) -> String {
    companion_name(report, "kernels")
}

/// The name a report's quality report goes by beside it: `X.json` ->
/// `X.quality.json` (`bench --quality --out X.json` writes it).
pub fn quality_name(report: &str) -> String {
    companion_name(report, "quality")
}

fn companion_name(report: &str, kind: &str) -> String {
    format!(
        "{}.{kind}.json",
        report.strip_suffix(".json").unwrap_or(report)
    )
}

/// A file as the page read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedText {
    /// Its name (`base.json`, `base.jsonl`).
    pub name: String,
    /// Its text.
    pub text: String,
}

/// What to compare (reports, their raw files `X.jsonl`, their kernels reports
/// `X.kernels.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRequest {
    /// Reports (`.json`) and raw files (`.jsonl`), in any order: reports are
    /// compared in name order after `base`, each with the raw file of its name.
    pub files: Vec<NamedText>,
    /// The base: the name of a report among `files`; the first by name if absent.
    #[serde(default)]
    pub base: Option<String>,
    /// The noise floor (a fraction; 0.02 by default, as the CLI's).
    #[serde(default)]
    pub min_change: Option<f64>,
}

/// The comparison as the page shows and exports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRendered {
    /// `tokenscope.compare/1`, pretty-printed as the CLI writes it.
    pub json: String,
    /// The HTML fragment the page inlines: `render::compare::html_body`, the
    /// JSON in a hidden `#compare-json` (the automation contract) and an
    /// `#compare-export` link that downloads the document.
    pub body: String,
    /// The self-contained HTML document (`render::compare::html`).
    pub html: String,
    /// The text table (`render::compare::text`).
    pub text: String,
}

impl CompareRequest {
    /// Compare, or say which file is wrong and why.
    pub fn render(&self) -> Result<CompareRendered, String> {
        let mut reports: Vec<(&str, ClientReport)> = Vec::new();
        let is_report = |n: &str| !n.ends_with(".jsonl") && !n.ends_with(".kernels.json");
        for f in self.files.iter().filter(|f| is_report(&f.name)) {
            let r = ClientReport::from_json(&f.text).map_err(|e| format!("{}: {e}", f.name))?;
            reports.push((&f.name, r));
        }
        reports.sort_by(|a, b| a.0.cmp(b.0));
        if let Some(base) = &self.base {
            let i = reports
                .iter()
                .position(|r| r.0 == base)
                .ok_or_else(|| format!("the base {base} is not among the reports"))?;
            let b = reports.remove(i);
            reports.insert(0, b);
        }
        if reports.len() < 2 {
            return Err(format!(
                "a comparison needs two reports or more (.json); got {}",
                reports.len()
            ));
        }
        let mut raws: Vec<Option<RawFile>> = Vec::new();
        for (name, _) in &reports {
            let names = raw_names(name);
            let raw = names
                .iter()
                .find_map(|n| self.files.iter().find(|f| f.name == *n))
                .map(|f| raw::parse(&f.text).map_err(|e| format!("{}: {e}", f.name)))
                .transpose()?;
            raws.push(raw);
        }
        let mut kernels = Vec::new();
        for (name, _) in &reports {
            let k = self
                .files
                .iter()
                .find(|f| f.name == kernels_name(name))
                .map(|f| KernelReport::from_json(&f.text).map_err(|e| format!("{}: {e}", f.name)))
                .transpose()?;
            kernels.push(k);
        }
        let runs: Vec<CompareRun<'_>> = reports
            .iter()
            .zip(&raws)
            .zip(&kernels)
            .map(|(((name, report), raw), kernels)| CompareRun {
                name,
                report,
                raw: raw.as_ref(),
                kernels: kernels.as_ref(),
            })
            .collect();
        let opts = CompareOptions {
            min_change: self
                .min_change
                .unwrap_or(CompareOptions::default().min_change),
            ..CompareOptions::default()
        };
        let c = compare(&runs, &opts);
        let json = serde_json::to_string_pretty(&c).map_err(|e| e.to_string())? + "\n";
        let html = render::compare::html(&c, &runs);
        let body = format!(
            "<p><a id=\"compare-export\" download=\"tokenscope-compare.html\" href=\"data:text/html;charset=utf-8,{}\">Export comparison (HTML)</a></p>{}<pre id=\"compare-json\" hidden>{}</pre>",
            percent_encode(&html),
            render::compare::html_body(&c, &runs),
            render::fmt::escape_html(&json)
        );
        Ok(CompareRendered {
            json,
            body,
            html,
            text: render::compare::text(&c),
        })
    }
}

/// `text` for a `data:` URL: every byte but unreserved ones as `%XX`.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_pair_with_their_raw_files_by_name() {
        assert_eq!(raw_names("a.json"), ["a.raw.jsonl", "a.jsonl"]);
        let native = include_str!("../../../../tests/fixtures/reports/native.json");
        let file = |name: &str, text: &str| NamedText {
            name: name.into(),
            text: text.into(),
        };
        let req = CompareRequest {
            files: vec![file("b.json", native), file("a.json", native)],
            base: Some("b.json".into()),
            min_change: None,
        };
        let out = req.render().unwrap();
        let c: serde_json::Value = serde_json::from_str(&out.json).unwrap();
        assert_eq!(c["base"], "b.json");
        assert_eq!(c["runs"][0]["name"], "a.json");
        assert_eq!(c["runs"][0]["intervals"], false);
        assert!(out.body.contains("runs overlaid") && out.html.starts_with("<!doctype html>"));
        assert!(
            out.body
                .contains("<pre id=\"compare-json\" hidden>{\n  &quot;schema&quot;")
        );
        assert_eq!(percent_encode("a <b>é"), "a%20%3Cb%3E%C3%A9");
        // A file that is not a report, a raw file that is not one: named.
        let bad = CompareRequest {
            files: vec![file("a.json", native), file("x.json", "{")],
            base: None,
            min_change: None,
        };
        assert!(bad.render().unwrap_err().starts_with("x.json: "));
        let bad = CompareRequest {
            files: vec![
                file("a.json", native),
                file("b.json", native),
                file("a.jsonl", "nope"),
            ],
            base: None,
            min_change: None,
        };
        assert!(bad.render().unwrap_err().starts_with("a.jsonl: "));
        // Kernels reports beside them (X.kernels.json): the adapters compared.
        let kernels = include_str!("../../../../tests/fixtures/reports/kernels-lavapipe.json");
        let mut h200: serde_json::Value = serde_json::from_str(kernels).unwrap();
        h200["adapter"]["name"] = "NVIDIA H200".into();
        let req = CompareRequest {
            files: vec![
                file("a.json", native),
                file("b.json", native),
                file("a.kernels.json", kernels),
                file("b.kernels.json", &h200.to_string()),
            ],
            base: None,
            min_change: None,
        };
        let c: serde_json::Value = serde_json::from_str(&req.render().unwrap().json).unwrap();
        let m = &c["runs"][0]["mismatches"];
        assert!(
            m.as_array()
                .unwrap()
                .iter()
                .any(|m| m["field"] == "kernels.adapter"
                    && m["new"].as_str().unwrap().starts_with("NVIDIA H200")),
            "{m}"
        );
        let one = CompareRequest {
            files: vec![file("a.json", native)],
            base: None,
            min_change: None,
        };
        assert!(one.render().unwrap_err().contains("two reports"));
    }
}
