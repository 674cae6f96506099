//! A comparison (`tokenscope compare`) as people read it: per run against the
//! base, what differs between the runs, then per level and metric both values,
//! the change, its 95% interval and the verdict; as text, Markdown or HTML with
//! the runs' charts overlaid.

use std::fmt::Write as _;

use super::charts::{RunCurve, cdf, throughput_latency_runs};
use super::fmt::{escape_html, fmt_ms, fmt_rate};
use super::table::{html_table, markdown_table, text_table};
use crate::analyze::compare::Verdict;
use crate::report::compare::{Cell, CompareRun, Comparison, RunVsBase};

/// A value of `metric` as the tables show it.
pub(crate) fn value(metric: &str, v: f64) -> String {
    if metric.ends_with("_rate") || metric == "goodput_fraction" {
        format!("{:.2}%", v * 100.0)
    } else if metric == "output_tokens_per_s" {
        fmt_rate(v)
    } else {
        fmt_ms(Some(v))
    }
}

/// A change of `metric` (signed).
fn change(metric: &str, v: f64) -> String {
    let sign = if v >= 0.0 { "+" } else { "-" };
    if metric.ends_with("_rate") || metric == "goodput_fraction" {
        format!("{sign}{:.2}pp", v.abs() * 100.0)
    } else {
        format!("{sign}{}", value(metric, v.abs()))
    }
}

pub(crate) fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Better => "better",
        Verdict::Worse => "WORSE",
        Verdict::NoChange => "no change",
        Verdict::Unknown => "(no interval)",
    }
}

/// The table's headers and rows for one run against the base.
pub fn rows(run: &RunVsBase) -> (Vec<String>, Vec<Vec<String>>) {
    let headers = [
        "level",
        "metric",
        "base",
        "new",
        "change",
        "95% interval",
        "verdict",
    ]
    .map(str::to_owned)
    .to_vec();
    let row = |load: &str, c: &Cell| {
        vec![
            load.to_owned(),
            c.metric.clone(),
            value(&c.metric, c.base),
            value(&c.metric, c.new),
            match c.relative {
                Some(r) if !c.metric.ends_with("_rate") && c.metric != "goodput_fraction" => {
                    format!("{} ({:+.1}%)", change(&c.metric, c.diff), r * 100.0)
                }
                _ => change(&c.metric, c.diff),
            },
            c.interval.map_or_else(
                || "-".into(),
                |i| format!("[{}, {}]", change(&c.metric, i.lo), change(&c.metric, i.hi)),
            ),
            verdict_word(c.verdict).to_owned(),
        ]
    };
    let rows = run
        .levels
        .iter()
        .flat_map(|l| l.cells.iter().map(move |c| row(&l.load, c)))
        .collect();
    (headers, rows)
}

/// The lines before a run's table: what differs, unmatched levels, and how the
/// intervals were made.
fn preamble(c: &Comparison, run: &RunVsBase) -> Vec<String> {
    let mut out = vec![format!("{} vs {} (base)", run.name, c.base)];
    for m in &run.mismatches {
        out.push(format!(
            "warning: {} differs: {} (base) vs {}",
            m.field, m.base, m.new
        ));
    }
    for (which, levels) in [
        ("the base", &run.only_in_base),
        (run.name.as_str(), &run.only_in_new),
    ] {
        if !levels.is_empty() {
            out.push(format!("levels only in {which}: {}", levels.join(", ")));
        }
    }
    out.push(if run.intervals {
        format!(
            "95% intervals: latencies by bootstrap over requests ({} resamples, seed {}; a percentile needs 5 samples beyond it: 10 for p50, 100 for p95, 500 for p99), widened to the spread between rounds where both runs have rounds (Welch); throughput over rounds (Welch); rates by Newcombe's score interval. A change is significant when its whole interval lies beyond {}% of the base on one side and Holm's control over the comparison's cells keeps it (5% family-wise)",
            c.resamples,
            c.seed,
            c.min_change * 100.0
        )
    } else {
        "note: no raw file for one of the runs: latencies are compared on the stored summaries, without intervals (give --raw)".into()
    });
    out
}

/// The comparison as terminal text.
pub fn text(c: &Comparison) -> String {
    let mut out = String::new();
    for run in &c.runs {
        for line in preamble(c, run) {
            out.push_str(&line);
            out.push('\n');
        }
        let (h, r) = rows(run);
        out.push_str(&text_table(&h, &r));
        out.push('\n');
    }
    out
}

/// The comparison as Markdown.
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::from("# Comparison\n\n");
    for run in &c.runs {
        let mut lines = preamble(c, run).into_iter();
        if let Some(title) = lines.next() {
            out.push_str(&format!("## {title}\n\n"));
        }
        for line in lines {
            out.push_str(&format!("- {line}\n"));
        }
        let (h, r) = rows(run);
        out.push('\n');
        out.push_str(&markdown_table(&h, &r));
        out.push('\n');
    }
    out
}

/// The comparison as one self-contained HTML document, in the report's style:
/// per run the lines and table of [`text`], then the runs' throughput-latency
/// curves overlaid (knees ringed) and, per level all runs ran, their TTFT and
/// ITL CDFs overlaid. `runs` are the reports compared, base first.
pub fn html(c: &Comparison, runs: &[CompareRun<'_>]) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>tokenscope comparison</title><style>{}</style></head><body><h1>tokenscope comparison</h1>{}</body></html>\n",
        super::combined::CSS,
        html_body(c, runs)
    )
}

/// [`html`]'s body, which the page inlines.
pub fn html_body(c: &Comparison, runs: &[CompareRun<'_>]) -> String {
    let mut o = String::new();
    for run in &c.runs {
        let mut lines = preamble(c, run).into_iter();
        if let Some(title) = lines.next() {
            let _ = write!(o, "<h2>{}</h2><ul class=\"notes\">", escape_html(&title));
        }
        for line in lines {
            let _ = write!(o, "<li>{}</li>", escape_html(&line));
        }
        o.push_str("</ul>");
        let (h, r) = rows(run);
        o.push_str(&html_table(&h, &r));
    }
    o.push_str("<h2>Charts</h2><div class=\"charts\">");
    let curves: Vec<RunCurve<'_>> = runs
        .iter()
        .map(|r| {
            (
                r.name,
                r.report.levels.as_slice(),
                r.report.sweep.knee.as_ref(),
            )
        })
        .collect();
    let mut charts = vec![throughput_latency_runs(&curves)];
    if let Some(base) = runs.first() {
        for level in &base.report.levels {
            let name = level.label();
            let at: Vec<(String, &crate::report::LevelReport)> = runs
                .iter()
                .filter_map(|r| {
                    let l = r.report.levels.iter().find(|l| l.label() == name)?;
                    Some((format!("{} ({name})", r.name), l))
                })
                .collect();
            if at.len() < 2 {
                continue;
            }
            for (metric, label) in [("ttft_ms", "TTFT (ms)"), ("itl_ms", "ITL (ms)")] {
                let series: Vec<(&str, &[f64])> = at
                    .iter()
                    .filter_map(|(n, l)| Some((n.as_str(), l.quantiles.get(metric)?.as_slice())))
                    .collect();
                if series.len() >= 2 {
                    charts.push(cdf(&series, &format!("{label} at {name}")));
                }
            }
        }
    }
    for chart in charts {
        let _ = write!(o, "<div class=\"chart\">{chart}</div>");
    }
    o.push_str("</div>");
    o
}
