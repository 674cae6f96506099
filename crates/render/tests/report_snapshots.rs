//! Snapshots of the combined report on fixed inputs (reports recorded once from real
//! runs: the native client against `tokenscope mock`, the kernels on lavapipe):
//! the Markdown whole, the HTML by its structure. A change in either is a change a
//! reviewer should see. Update with `INSTA_UPDATE=always cargo test --test report_snapshots`.

use tokenscope_core::analyze::verdict;
use tokenscope_core::report::ClientReport;
use tokenscope_core::report::combined::{ModelChoice, ReportInput};
use tokenscope_hw::floor::{ModelShape, Quant};
use tokenscope_kernel_report::KernelReport;
use tokenscope_render::combined;

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../../tests/fixtures/reports/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn input() -> ReportInput {
    ReportInput {
        clients: vec![ClientReport::from_json(&fixture("native.json")).unwrap()],
        kernels: Some(KernelReport::from_json(&fixture("kernels-lavapipe.json")).unwrap()),
        model: Some(ModelChoice {
            gpu_memory_bytes: None,
            shape: ModelShape::preset("gemma-3-270m").unwrap(),
            quant: Quant::Q4_0,
            context: 1024,
        }),
    }
}

/// The HTML's skeleton: headings, findings, figures, tables with their row counts.
fn structure(html: &str) -> String {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let end = rest.find('>').unwrap_or(rest.len());
        let tag = &rest[..end];
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        match name.as_str() {
            "h1" | "h2" | "h3" => {
                let close = format!("</{name}>");
                let text_end = rest.find(&close).unwrap_or(end);
                let text = &rest[end + 1..text_end];
                out.push(format!("{name}: {text}"));
            }
            "figure" => out.push("figure".into()),
            "svg" => out.push("  svg".into()),
            "table" => {
                let close = rest.find("</table>").unwrap_or(rest.len());
                let rows = rest[..close].matches("<tr>").count();
                out.push(format!("table: {rows} rows"));
            }
            "div" if tag.contains("class=\"finding\"") => {
                let rule = tag
                    .split("data-rule=\"")
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .unwrap_or("?");
                out.push(format!("finding: {rule}"));
            }
            _ => {}
        }
    }
    out.join("\n")
}

#[test]
fn markdown_snapshot() {
    let input = input();
    let analysis = verdict::analyze(&input);
    insta::assert_snapshot!(combined::markdown(&input, &analysis));
}

#[test]
fn html_structure_snapshot() {
    let input = input();
    let analysis = verdict::analyze(&input);
    let html = combined::html(&input, &analysis);
    insta::assert_snapshot!(structure(&html));
}

#[test]
fn the_analysis_of_the_fixtures() {
    let input = input();
    let a = verdict::analyze(&input);
    // The simulator's TPOT is far below lavapipe's floor: the report must call that
    // impossible rather than print a ratio as if it meant something.
    assert!(
        a.verdict
            .iter()
            .any(|v| v.contains("below the floor at read bw")),
        "{:#?}",
        a.verdict
    );
    assert!(
        a.verdict
            .iter()
            .any(|v| v.starts_with("Capacity at your SLO")),
        "{:#?}",
        a.verdict
    );
    assert!(a.floor.is_some());
}
