//! A history (`tokenscope history`) as people read it: per level and metric,
//! each run's value, its 95% interval and whether it changed from the run
//! before; as text, Markdown, or HTML with a trend chart per series.

use std::fmt::Write as _;

use super::charts::{TrendPoint, trend};
use super::compare::{value, verdict_word};
use super::fmt::escape_html;
use super::table::{html_table, markdown_table, text_table};
use tokenscope_core::report::history::{History, Order};
use tokenscope_stats::compare::Verdict;

/// How a run is named: its label, else its file.
fn run_name(h: &History, i: usize) -> String {
    let r = &h.runs[i];
    r.label.clone().unwrap_or_else(|| r.name.clone())
}

/// The table's headers and rows.
pub fn rows(h: &History) -> (Vec<String>, Vec<Vec<String>>) {
    let headers = [
        "level",
        "metric",
        "run",
        "value",
        "95% interval",
        "vs previous",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut rows = Vec::new();
    for s in &h.series {
        for p in &s.points {
            rows.push(vec![
                s.load.clone(),
                s.metric.clone(),
                run_name(h, p.run),
                value(&s.metric, p.value),
                p.interval.map_or_else(
                    || "-".into(),
                    |i| format!("[{}, {}]", value(&s.metric, i.lo), value(&s.metric, i.hi)),
                ),
                p.vs_previous
                    .map_or_else(|| "-".into(), |v| verdict_word(v).to_owned()),
            ]);
        }
    }
    (headers, rows)
}

/// The lines before the table: the order and the test.
fn preamble(h: &History) -> Vec<String> {
    let order = match h.order {
        Order::Label => "by label (bench --label; numbers compared as numbers)",
        Order::Time => "by start time (no label on every run)",
        Order::Given => "as given (neither a label nor a start time on every run)",
    };
    let mut out = vec![format!("{} runs, ordered {order}", h.runs.len())];
    let without: Vec<&str> = h
        .runs
        .iter()
        .filter(|r| !r.intervals)
        .map(|r| r.name.as_str())
        .collect();
    if !without.is_empty() {
        out.push(format!(
            "no raw file for {}: their percentiles are the stored summaries, without intervals or a test against the run before",
            without.join(", ")
        ));
    }
    out.push(format!(
        "vs previous: the run against the one before it, as tokenscope compare tests them (bootstrap over requests widened to the rounds' spread, Welch over rounds for throughput, Newcombe for rates; significant when the 95% interval lies beyond {}% of the earlier value and Holm's control over the pair's cells keeps it). Each value's own interval: bootstrap over the run's requests, t over its rounds, Wilson for rates",
        h.min_change * 100.0
    ));
    out
}

/// The history as terminal text.
pub fn text(h: &History) -> String {
    let mut out = String::new();
    for line in preamble(h) {
        out.push_str(&line);
        out.push('\n');
    }
    let (hd, r) = rows(h);
    out.push_str(&text_table(&hd, &r));
    out
}

/// The history as Markdown.
pub fn markdown(h: &History) -> String {
    let mut out = String::from("# History\n\n");
    for line in preamble(h) {
        let _ = writeln!(out, "- {line}");
    }
    let (hd, r) = rows(h);
    out.push('\n');
    out.push_str(&markdown_table(&hd, &r));
    out
}

/// The history as one self-contained HTML document: a trend chart per level and
/// metric, then the table.
pub fn html(h: &History) -> String {
    let mut o = String::new();
    o.push_str("<ul class=\"notes\">");
    for line in preamble(h) {
        let _ = write!(o, "<li>{}</li>", escape_html(&line));
    }
    o.push_str("</ul><div class=\"charts\">");
    for s in &h.series {
        let points: Vec<TrendPoint> = (0..h.runs.len())
            .map(|i| {
                let p = s.points.iter().find(|p| p.run == i);
                TrendPoint {
                    run: run_name(h, i),
                    value: p.map(|p| p.value),
                    interval: p.and_then(|p| p.interval.map(|i| (i.lo, i.hi))),
                    change: p.and_then(|p| match p.vs_previous {
                        Some(Verdict::Better) => Some("better"),
                        Some(Verdict::Worse) => Some("worse"),
                        _ => None,
                    }),
                }
            })
            .collect();
        let title = format!("{} at {}", s.metric, s.load);
        let chart = trend(&title, &s.metric, &points);
        let _ = write!(o, "<div class=\"chart\">{chart}</div>");
    }
    o.push_str("</div>");
    let (hd, r) = rows(h);
    o.push_str(&html_table(&hd, &r));
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>tokenscope history</title><style>{}</style></head><body><h1>tokenscope history</h1>{o}</body></html>\n",
        super::combined::CSS
    )
}
