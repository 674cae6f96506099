//! A comparison (`tokenscope compare`) as people read it: per run against the
//! base, what differs between the runs, then per level and metric both values,
//! the change, its 95% interval and the verdict; as text, Markdown or HTML with
//! the runs' charts overlaid.

use std::fmt::Write as _;

use super::charts::{RunCurve, cdf, throughput_latency_runs};
use super::fmt::{escape_html, fmt_ms, fmt_rate};
use super::table::{html_table, markdown_table, text_table};
use tokenscope_core::model::metric::{self, Unit};
use tokenscope_core::report::compare::{
    Cell, CompareRun, Comparison, GateReport, RunVsBase, TermStatus,
};
use tokenscope_core::report::compare_gate::resolution;
use tokenscope_stats::compare::Verdict;

/// The registry's unit of a cell's metric (`ttft_ms:p95`: `ttft_ms`'s; the
/// server's figures, not in the registry: none, shown as ms).
fn unit(metric: &str) -> Option<Unit> {
    let key = metric.split(':').next().unwrap_or(metric);
    metric::by_key(key).map(|m| m.unit)
}

/// Whether a cell's metric is a fraction of the requests (shown in %, changes in pp).
fn fraction(metric: &str) -> bool {
    unit(metric) == Some(Unit::Fraction)
}

/// A value of `metric` as the tables show it.
pub(crate) fn value(metric: &str, v: f64) -> String {
    match unit(metric) {
        Some(Unit::Fraction) => format!("{:.2}%", v * 100.0),
        Some(Unit::TokensPerS | Unit::RequestsPerS) => fmt_rate(v),
        _ => fmt_ms(Some(v)),
    }
}

/// A change of `metric` (signed).
fn change(metric: &str, v: f64) -> String {
    let sign = if v >= 0.0 { "+" } else { "-" };
    if fraction(metric) {
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
                Some(r) if !fraction(&c.metric) => {
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
            "95% intervals: latency percentiles with rounds as a random effect: the requests' sampling by the bootstrap within rounds ({} resamples, seed {}; a percentile needs 5 samples beyond it: 10 for p50, 100 for p95, 500 for p99) plus the variance between rounds beyond that sampling (both runs' rounds, method of moments; Student's t with Satterthwaite's degrees of freedom); throughput over rounds (Welch); rates by Newcombe's score interval. A change is significant when its whole interval lies beyond {}% of the base on one side and Holm's control over the comparison's cells keeps it (5% family-wise)",
            c.resamples,
            c.seed,
            c.min_change * 100.0
        )
    } else {
        "note: no raw file for one of the runs: latencies are compared on the stored summaries, without intervals (give --raw)".into()
    });
    out.extend(unresolved(c, run));
    out
}

/// The line saying which cells' intervals are too wide to resolve the noise
/// floor (`--min-change`), with the first latency median's need: what a "no
/// change" there is worth.
fn unresolved(c: &Comparison, run: &RunVsBase) -> Option<String> {
    if c.min_change <= 0.0 {
        return None;
    }
    let asked = format!("±{}%", c.min_change * 100.0);
    let wide: Vec<(&str, &Cell, String)> = run
        .levels
        .iter()
        .flat_map(|l| l.cells.iter().map(move |x| (l.load.as_str(), x)))
        .filter(|(_, x)| !fraction(&x.metric))
        .filter_map(|(load, x)| {
            let why = resolution(x, c.min_change * x.base.abs(), &asked)?;
            Some((load, x, why))
        })
        .collect();
    let judged = run
        .levels
        .iter()
        .flat_map(|l| &l.cells)
        .filter(|x| x.interval.is_some() && !x.metric.ends_with("_rate"))
        .count();
    let (load, x, why) = wide
        .iter()
        .find(|(_, x, _)| x.metric.ends_with(":p50"))
        .or(wide.first())?;
    Some(format!(
        "{} of {judged} cells cannot resolve the noise floor ({asked}): their \"no change\" says only that any change is within their interval; e.g. {} at {load}: {why}",
        wide.len(),
        x.metric
    ))
}

/// The gate's lines (`--fail-on`): a count, then every term at a level that
/// did not pass plainly (crossed, not evaluable, not resolved) with its reason.
pub fn gate_lines(g: &GateReport) -> Vec<String> {
    let count = |s: TermStatus| g.terms.iter().filter(|t| t.status == s).count();
    let (crossed, not_evaluable) = (count(TermStatus::Crossed), count(TermStatus::NotEvaluable));
    let mut out = vec![format!(
        "gate (--fail-on): {} term(s) at a level: {} crossed, {} passed, {} passed but not resolved, {} not evaluable{}",
        g.terms.len(),
        crossed,
        count(TermStatus::Passed),
        count(TermStatus::Unresolved),
        not_evaluable,
        if crossed > 0 {
            " (exit 1)"
        } else if not_evaluable > 0 && !g.allow_unevaluated {
            " (exit 3; --allow-unevaluated passes them)"
        } else if not_evaluable > 0 {
            " (allowed: --allow-unevaluated)"
        } else {
            ""
        }
    )];
    for t in &g.terms {
        let word = match t.status {
            TermStatus::Passed => continue,
            TermStatus::Crossed => "CROSSED",
            TermStatus::Unresolved => "passed, not resolved",
            TermStatus::NotEvaluable => "not evaluable",
        };
        let value = t.value.map_or(String::new(), |v| {
            if t.term.ends_with('%') && !t.level.starts_with("quality") {
                format!(" ({:+.1}%)", v * 100.0)
            } else {
                format!(" ({v:.4})")
            }
        });
        out.push(format!(
            "{} at {} {}: {word}{value}{}",
            t.term,
            t.run,
            t.level,
            t.reason
                .as_deref()
                .map_or(String::new(), |r| format!(": {r}"))
        ));
    }
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
    if let Some(g) = &c.gate {
        for line in gate_lines(g) {
            out.push_str(&line);
            out.push('\n');
        }
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
    if let Some(g) = &c.gate {
        let mut lines = gate_lines(g).into_iter();
        out.push_str("## Gate\n\n");
        if let Some(first) = lines.next() {
            out.push_str(&format!("{first}\n\n"));
        }
        for line in lines {
            out.push_str(&format!("- {line}\n"));
        }
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
    if let Some(g) = &c.gate {
        let mut lines = gate_lines(g).into_iter();
        if let Some(first) = lines.next() {
            let _ = write!(
                o,
                "<h2>Gate</h2><p>{}</p><ul class=\"notes\">",
                escape_html(&first)
            );
        }
        for line in lines {
            let _ = write!(o, "<li>{}</li>", escape_html(&line));
        }
        o.push_str("</ul>");
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
            let at: Vec<(String, &tokenscope_core::report::LevelReport)> = runs
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
