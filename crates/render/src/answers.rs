//! What the answers were, per level and per class of request: where requests
//! offered tools or asked for JSON (`--tools`, `--json-schema`), the share that
//! called a tool, the time to the first tool-call delta, and the share valid
//! against its schema; where they had classes (`--slo-class`), each class's
//! share that met its own SLOs.

use tokenscope_core::report::ClientReport;

type Table = (Vec<String>, Vec<Vec<String>>);

fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!(
            "{:.0}% ({part}/{whole})",
            100.0 * part as f64 / whole as f64
        )
    }
}

/// One row per level with answers checked; `None` when no level has any.
pub fn answer_rows(report: &ClientReport) -> Option<Table> {
    let headers = [
        "load",
        "called a tool",
        "first tool call p50",
        "valid",
        "most frequent problem",
    ];
    let tools = report
        .config
        .answer
        .as_ref()
        .is_some_and(|a| !a.tools.is_empty());
    let rows: Vec<Vec<String>> = report
        .levels
        .iter()
        .filter_map(|l| {
            let a = l.answers.as_ref()?;
            Some(vec![
                l.label(),
                if tools {
                    share(a.called_tool, a.requests)
                } else {
                    "-".into()
                },
                l.metrics
                    .time_to_first_tool_call_ms
                    .as_ref()
                    .and_then(|s| s.p50)
                    .map_or_else(|| "-".into(), |p| format!("{p:.1} ms")),
                share(a.valid, a.checked),
                a.problems
                    .first()
                    .map_or_else(|| "-".into(), |p| format!("{} ({})", p.problem, p.count)),
            ])
        })
        .collect();
    (!rows.is_empty()).then(|| (headers.map(str::to_owned).to_vec(), rows))
}

/// What the table counts, said under it.
pub fn answer_note(report: &ClientReport) -> Option<String> {
    let asked = report.config.answer.as_ref()?;
    let mut what = Vec::new();
    if !asked.tools.is_empty() {
        what.push(format!(
            "each tool call against its tool's schema (tools: {})",
            asked.tools.join(", ")
        ));
    }
    if asked.json_schema {
        what.push("each answer in text against --json-schema".into());
    }
    Some(format!(
        "answers: successful requests, checked after their end: {}; valid: of the answers checked",
        what.join("; ")
    ))
}

/// One row per level and class of request (`--slo-class`): the share whose
/// own values were within its class's bounds (goodput: a request is judged,
/// never a percentile of the class); `None` when no request had a class.
pub fn class_rows(report: &ClientReport) -> Option<Table> {
    let headers = ["load", "class", "its bounds", "sent", "each within them"];
    let rows: Vec<Vec<String>> = report
        .levels
        .iter()
        .flat_map(|l| {
            l.classes.iter().map(|c| {
                vec![
                    l.label(),
                    c.class.clone(),
                    if c.slos.is_empty() {
                        "none".into()
                    } else {
                        c.slos.join(", ")
                    },
                    c.sent.to_string(),
                    share(c.met, c.sent),
                ]
            })
        })
        .collect();
    (!rows.is_empty()).then(|| (headers.map(str::to_owned).to_vec(), rows))
}
