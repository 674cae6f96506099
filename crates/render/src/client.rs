//! The client report rendered: the level table (the CLI's summary, the combined
//! report's level tables), the notes under it, the terminal summary, Markdown and
//! CSV. JSON is [`ClientReport::to_json`]. All read the one model.

use std::fmt::Write as _;

use super::fmt::{fmt_ms, fmt_rate};
use super::table::{markdown_table, text_table};
use tokenscope_core::model::metric::{
    BROWSER_DELIVERY_MS, BROWSER_SEND_MS, CONNECTION_SETUP_MS, E2E_MS, ERROR_RATE, GOODPUT_PER_S,
    ITL_MS, ITL_PER_TOKEN_MS, MAX_GAP_MS, Metric, OUTPUT_TOKENS_PER_S, RENDER_DELAY_MS,
    RENDERED_TTFT_MS, REQUESTS_PER_S, TIME_TO_FIRST_BYTE_MS, TIME_TO_HEADERS_MS, TIMEOUT_RATE,
    TPOT_MS, TTFT_MS,
};
use tokenscope_core::report::{CapacityBound, ClientReport};

/// The summary table: headers and one row per level.
pub fn summary_rows(report: &ClientReport) -> (Vec<String>, Vec<Vec<String>>) {
    level_table(
        report,
        LevelColumns {
            painted: report
                .levels
                .iter()
                .any(|l| l.metrics.rendered_ttft_ms.is_some()),
            render_delay: false,
            delivery: false,
            goodput: report.levels.iter().any(|l| l.goodput_per_s.is_some()),
            health: false,
            knee_marker: false,
        },
    )
}

/// Which optional columns a level table carries (the CLI's summary and the
/// combined report's level table are the same table with different options).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LevelColumns {
    /// Rendered TTFT p50 / p95 (browser reports).
    pub painted: bool,
    /// Render delay p50, after the painted columns.
    pub render_delay: bool,
    /// The browser's delivery delay p50, after the render delay (levels
    /// without it show `-`).
    pub delivery: bool,
    /// Goodput per second (`-` for levels without SLOs).
    pub goodput: bool,
    /// Error and timeout rates and the round-to-round spread of E2E p50.
    pub health: bool,
    /// `(knee)` after the load label of the knee level.
    pub knee_marker: bool,
}

/// One table of a report's levels: headers and one row per level.
pub(crate) fn level_table(
    report: &ClientReport,
    cols: LevelColumns,
) -> (Vec<String>, Vec<Vec<String>>) {
    // The metrics' columns, selected from the registry: distributions at a
    // statistic, then the level's figures.
    let mut dists: Vec<(&Metric, &str)> =
        vec![(&TTFT_MS, "p50"), (&TTFT_MS, "p95"), (&TTFT_MS, "p99")];
    if cols.painted {
        dists.extend([(&RENDERED_TTFT_MS, "p50"), (&RENDERED_TTFT_MS, "p95")]);
    }
    if cols.render_delay {
        dists.push((&RENDER_DELAY_MS, "p50"));
    }
    if cols.delivery {
        dists.push((&BROWSER_DELIVERY_MS, "p50"));
    }
    dists.extend([
        (&TPOT_MS, "p50"),
        (&TPOT_MS, "p95"),
        (&ITL_MS, "p50"),
        (&ITL_MS, "p99"),
        (&E2E_MS, "p50"),
        (&E2E_MS, "p95"),
    ]);
    let mut figures: Vec<&Metric> = vec![&OUTPUT_TOKENS_PER_S, &REQUESTS_PER_S];
    if cols.goodput {
        figures.push(&GOODPUT_PER_S);
    }
    let health: &[&Metric] = if cols.health {
        &[&ERROR_RATE, &TIMEOUT_RATE]
    } else {
        &[]
    };
    let mut headers: Vec<String> = ["load", "sent", "ok", "err", "t/o"]
        .map(String::from)
        .to_vec();
    headers.extend(dists.iter().map(|(m, stat)| format!("{} {stat}", m.column)));
    headers.extend(figures.iter().chain(health).map(|m| m.column.to_owned()));
    if cols.health {
        headers.push("round spread".to_owned());
    }
    let knee = report
        .sweep
        .knee
        .as_ref()
        .filter(|_| cols.knee_marker)
        .map(|k| k.level_index);
    let rows = report
        .levels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut label = l.label();
            if knee == Some(i) {
                label.push_str(" (knee)");
            }
            if let Some(r) = l.reached.filter(|r| r.under_loaded) {
                // Never the load it claims: said where the level is named, with
                // the server's own running count where it was scraped.
                let _ = write!(
                    label,
                    " (under-loaded: {} in flight",
                    r.client_in_flight_max
                );
                if let Some(s) = l.server_running_max() {
                    let _ = write!(label, ", server running max {s:.0}");
                }
                label.push(')');
            }
            let mut row = vec![
                label,
                l.sent.to_string(),
                l.ok.to_string(),
                l.errors.to_string(),
                l.timeouts.to_string(),
            ];
            row.extend(
                dists
                    .iter()
                    .map(|(m, stat)| fmt_ms(m.summary(&l.metrics).and_then(|s| s.get(stat)))),
            );
            row.extend(
                figures
                    .iter()
                    .map(|m| m.figure(l).map(fmt_rate).unwrap_or_else(|| "-".into())),
            );
            row.extend(
                health
                    .iter()
                    .map(|m| format!("{:.1}", 100.0 * m.figure(l).unwrap_or_default())),
            );
            if cols.health {
                let spread = &l.round_spread;
                row.push(
                    spread
                        .e2e_ms_p50
                        .map(|s| {
                            let flag = if spread.rounds_disagree { " !" } else { "" };
                            format!("{:.0}%{flag}", 100.0 * s.relative)
                        })
                        .unwrap_or_else(|| "-".into()),
                );
            }
            row
        })
        .collect();
    (headers, rows)
}

/// Lines under the table: errors by kind, knee, SLO capacity, warnings.
pub fn notes(report: &ClientReport) -> Vec<String> {
    let mut notes = Vec::new();
    for l in &report.levels {
        if !l.error_kinds.is_empty() || !l.timeout_phases.is_empty() {
            let kinds: Vec<String> = l
                .error_kinds
                .iter()
                .map(|(k, n)| format!("{k}: {n}"))
                .chain(
                    l.timeout_phases
                        .iter()
                        .map(|(k, n)| format!("timeout ({k}): {n}")),
                )
                .collect();
            notes.push(format!("{}: {}", l.label(), kinds.join(", ")));
        }
        if l.round_spread.rounds_disagree {
            notes.push(format!(
                "{}: rounds disagree by more than 2x ({}); check warm-up and the environment",
                l.label(),
                l.rounds
                    .iter()
                    .filter(|r| !r.outlier_metrics.is_empty())
                    .map(|r| format!("round {} off on {}", r.round, r.outlier_metrics.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        for d in l.drift.iter().filter(|d| d.flagged) {
            notes.push(format!(
                "{}: {} drifts {:+.2} ms/min (95% CI +/- {:.2}), {:+.0}% over the run",
                l.label(),
                d.metric,
                d.slope_ms_per_min,
                d.slope_ci95_ms_per_min,
                d.change_over_run * 100.0
            ));
        }
    }
    notes.extend(sweep_notes(report));
    notes.extend(super::turns::cache_notes(report));
    notes.extend(super::connection::connection_notes(report));
    if report.levels.iter().any(|l| l.output_tokens_estimated) {
        notes.push(
            "output tokens were counted from stream events (the server sent no usage): estimated"
                .into(),
        );
    }
    for w in &report.warnings {
        notes.push(format!("warning: {}", w.message));
    }
    if report.interrupted {
        notes.push("the run was interrupted: these are the levels that ran".into());
    }
    if report.environment.rebuilt_from_raw {
        notes.push(
            "rebuilt from the raw file alone: the same levels, sweep and warnings as the run; what it does not hold (the environment of a run killed before its end line) is missing".into(),
        );
    }
    notes
}

/// The knee and the SLO capacity, each with how far the levels tested pin it
/// down, and the levels left out of both.
pub fn sweep_notes(report: &ClientReport) -> Vec<String> {
    let mut notes = Vec::new();
    let label = |i: usize| report.levels.get(i).map(|l| l.label()).unwrap_or_default();
    let sweep = &report.sweep;
    match (&sweep.knee, &sweep.knee_not_reached_up_to) {
        (Some(k), _) => notes.push(match k.elasticity_after {
            Some(e) => format!(
                "knee: {} (after it, p95 E2E grows {e:.1}x faster than throughput)",
                label(k.level_index),
            ),
            None => format!(
                "knee: {} (after it, p95 E2E grows while throughput does not)",
                label(k.level_index),
            ),
        }),
        (None, Some(p)) => notes.push(format!(
            "knee: not reached up to {} (latency never grew faster than throughput)",
            label(p.level_index)
        )),
        // Real users' levels are groups, not a sweep: no knee to look for.
        (None, None)
            if report.levels.len() > 1 && report.levels.iter().all(|l| l.group.is_none()) =>
        {
            notes.push(if sweep.left_out.is_empty() {
                // (A report from before the search's reach was said.)
                "knee: not reached (latency never grew faster than throughput)".into()
            } else {
                "knee: not looked for (fewer than two levels loaded as claimed)".into()
            })
        }
        (None, None) => {}
    }
    let slos = report
        .config
        .slos
        .iter()
        .map(tokenscope_core::analyze::slo::Slo::label)
        .collect::<Vec<_>>()
        .join(", ");
    if let Some(c) = &sweep.slo_capacity {
        let (at, bound) = match (&c.bound, &c.failed_at) {
            (Some(CapacityBound::Bracketed), Some(f)) => (
                label(c.level_index),
                format!(", bracketed: {} fails", label(f.level_index)),
            ),
            (Some(_), _) => (
                format!("at least {}", label(c.level_index)),
                ", no level tested failed".to_owned(),
            ),
            // A report from before the bound was said.
            (None, _) => (label(c.level_index), String::new()),
        };
        notes.push(format!(
            "SLO capacity ({}): {at}{bound} ({} tok/s, {} req/s there)",
            c.slos.join(", "),
            fmt_rate(c.output_tokens_per_s),
            fmt_rate(c.requests_per_s)
        ));
    } else if let Some(b) = &sweep.slo_below {
        notes.push(format!(
            "SLO capacity ({slos}): below {}: no level tested met every SLO",
            label(b.level_index)
        ));
    } else if !report.config.slos.is_empty() {
        notes.push(format!(
            "SLO capacity ({slos}): not evaluable: no level's checks could be evaluated (see the warnings)"
        ));
    }
    if !sweep.left_out.is_empty() {
        let names: Vec<String> = sweep.left_out.iter().map(|&i| label(i)).collect();
        notes.push(format!(
            "left out of the knee and the SLO capacity (under-loaded): {}",
            names.join(", ")
        ));
    }
    notes
}

/// The text summary the CLI prints.
pub fn text_summary(report: &ClientReport) -> String {
    let (h, rows) = summary_rows(report);
    let mut out = text_table(&h, &rows);
    out.push_str("(times in ms)\n");
    {
        if let Some((h, rows)) = super::server::resource_rows(report) {
            out.push_str("\nserver, per level:\n");
            out.push_str(&text_table(&h, &rows));
        }
        if let Some((h, rows)) = super::server::stage_rows(report) {
            out.push_str("\nwhere TTFT went (means, ms):\n");
            out.push_str(&text_table(&h, &rows));
        }
        if let Some((h, rows)) = super::cost::cost_rows(report) {
            out.push_str("\nwhat each token cost:\n");
            out.push_str(&text_table(&h, &rows));
            if let Some(note) = super::cost::cost_note(report) {
                let _ = writeln!(out, "{note}");
            }
        }
        if let Some((h, rows)) = super::answers::class_rows(report) {
            out.push_str("\ngoodput per class (the requests whose own values were within their class's bounds):\n");
            out.push_str(&text_table(&h, &rows));
        }
        if let Some((h, rows)) = super::images::image_rows(report) {
            let _ = writeln!(out, "\n{}:", super::images::TITLE);
            out.push_str(&text_table(&h, &rows));
            if let Some(note) = super::images::image_note(report) {
                let _ = writeln!(out, "{note}");
            }
        }
        if let Some((h, rows)) = super::answers::answer_rows(report) {
            out.push_str("\nwhat the answers were:\n");
            out.push_str(&text_table(&h, &rows));
            if let Some(note) = super::answers::answer_note(report) {
                let _ = writeln!(out, "{note}");
            }
        }
        if let Some((h, rows)) = super::turns::turn_rows(report) {
            out.push_str(
                "\nper conversation turn (ms; cached: prompt tokens from the server's cache):\n",
            );
            out.push_str(&text_table(&h, &rows));
        }
        if let Some((h, rows)) = super::rum::rum_rows(report) {
            let _ = writeln!(out, "\n{}:", super::rum::TITLE);
            out.push_str(&text_table(&h, &rows));
            let _ = writeln!(out, "{}", super::rum::NOTE);
        }
    }
    for n in notes(report) {
        out.push_str(&n);
        out.push('\n');
    }
    out
}

/// A Markdown summary: title, configuration, table, notes.
pub fn markdown(report: &ClientReport) -> String {
    let mut out = String::new();
    let c = &report.config;
    let _ = writeln!(out, "# tokenscope: {} ({})\n", c.model, c.url);
    let _ = writeln!(
        out,
        "Source: {:?}; API: {}; {} mode, levels {:?}; {} rounds; max_tokens {}; input {}.\n",
        report.source,
        c.api.as_str(),
        c.mode,
        c.levels,
        c.rounds,
        c.max_tokens,
        c.input_tokens
            .map(|t| format!("~{t} tokens"))
            .or_else(|| c.prompts_file.clone())
            .unwrap_or_else(|| "-".into())
    );
    let (h, rows) = summary_rows(report);
    out.push_str(&markdown_table(&h, &rows));
    out.push_str("\nTimes in ms.\n");
    server_markdown(&mut out, report);
    let notes = notes(report);
    if !notes.is_empty() {
        out.push('\n');
        for n in notes {
            let _ = writeln!(out, "- {n}");
        }
    }
    out
}

/// The server view's sections in Markdown (nothing when no level was scraped).
pub fn server_markdown(out: &mut String, report: &ClientReport) {
    if let Some((h, rows)) = super::server::resource_rows(report) {
        out.push_str("\n### Server, per level\n\n");
        out.push_str(&markdown_table(&h, &rows));
    }
    if let Some((h, rows)) = super::server::stage_rows(report) {
        out.push_str("\n### Where TTFT went (means, ms)\n\n");
        out.push_str(&markdown_table(&h, &rows));
    }
    if let Some((h, rows)) = super::cost::cost_rows(report) {
        out.push_str("\n### What each token cost\n\n");
        out.push_str(&markdown_table(&h, &rows));
        if let Some(note) = super::cost::cost_note(report) {
            let _ = writeln!(out, "\n{note}");
        }
    }
    if let Some((h, rows)) = super::answers::class_rows(report) {
        out.push_str("\n### Goodput per class\n\n");
        out.push_str(&markdown_table(&h, &rows));
    }
    if let Some((h, rows)) = super::images::image_rows(report) {
        let _ = writeln!(out, "\n### {}\n", super::images::TITLE);
        out.push_str(&markdown_table(&h, &rows));
        if let Some(note) = super::images::image_note(report) {
            let _ = writeln!(out, "\n{note}");
        }
    }
    if let Some((h, rows)) = super::answers::answer_rows(report) {
        out.push_str("\n### What the answers were\n\n");
        out.push_str(&markdown_table(&h, &rows));
        if let Some(note) = super::answers::answer_note(report) {
            let _ = writeln!(out, "\n{note}");
        }
    }
    if let Some((h, rows)) = super::turns::turn_rows(report) {
        out.push_str("\n### Per conversation turn (ms)\n\n");
        out.push_str(&markdown_table(&h, &rows));
    }
    if let Some((h, rows)) = super::rum::rum_rows(report) {
        let _ = writeln!(out, "\n### {}\n", super::rum::TITLE);
        out.push_str(&markdown_table(&h, &rows));
        let _ = writeln!(out, "\n{}", super::rum::NOTE);
    }
    if let Some(line) = super::server::source_line(report) {
        let _ = writeln!(out, "\n{line}");
    }
}

/// The level's figures in the CSV, after its counts and window.
const CSV_FIGURES: [&Metric; 5] = [
    &OUTPUT_TOKENS_PER_S,
    &REQUESTS_PER_S,
    &GOODPUT_PER_S,
    &ERROR_RATE,
    &TIMEOUT_RATE,
];

/// The distributions in the CSV, in its columns' order (each at mean, p50,
/// p90, p95, p99).
const CSV_METRICS: [&Metric; 13] = [
    &TTFT_MS,
    &TPOT_MS,
    &ITL_MS,
    &ITL_PER_TOKEN_MS,
    &E2E_MS,
    &TIME_TO_HEADERS_MS,
    &TIME_TO_FIRST_BYTE_MS,
    &RENDERED_TTFT_MS,
    &RENDER_DELAY_MS,
    &MAX_GAP_MS,
    &BROWSER_SEND_MS,
    &BROWSER_DELIVERY_MS,
    &CONNECTION_SETUP_MS,
];

/// One CSV row per level: load, counts, rates, and mean/p50/p90/p95/p99 of each metric.
pub fn csv(report: &ClientReport) -> String {
    let mut header = vec![
        "concurrency",
        "rate_per_s",
        "sent",
        "ok",
        "errors",
        "timeouts",
        "window_s",
    ]
    .into_iter()
    .chain(CSV_FIGURES.map(|m| m.key))
    .map(str::to_owned)
    .collect::<Vec<_>>();
    for m in CSV_METRICS {
        for s in ["mean", "p50", "p90", "p95", "p99"] {
            header.push(format!("{}_{s}", m.key));
        }
    }
    let mut out = header.join(",");
    out.push('\n');
    let num = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_default();
    for l in &report.levels {
        let mut row = vec![
            l.concurrency.map(|c| c.to_string()).unwrap_or_default(),
            num(l.rate_per_s),
            l.sent.to_string(),
            l.ok.to_string(),
            l.errors.to_string(),
            l.timeouts.to_string(),
            num(Some(l.window_s)),
        ];
        row.extend(CSV_FIGURES.map(|m| num(m.figure(l))));
        for m in CSV_METRICS {
            let s = m.summary(&l.metrics);
            for stat in ["mean", "p50", "p90", "p95", "p99"] {
                row.push(num(s.and_then(|s| s.get(stat))));
            }
        }
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_core::analyze::slo::Slo;
    use tokenscope_core::analyze::sweep::analyze_sweep;
    use tokenscope_core::analyze::verdict::sweep_sentences;
    use tokenscope_core::model::{Load, ReachedLoad, SloCheck, Source};
    use tokenscope_core::testing;

    /// Levels at `c` with one SLO check each, met or not, the last `under`
    /// of them under-loaded at 8 in flight.
    fn report(levels: &[(u32, bool)], under: usize) -> ClientReport {
        let slos = Slo::parse_list("ttft_ms:p50<=500").unwrap();
        let n = levels.len();
        let levels = levels
            .iter()
            .enumerate()
            .map(|(i, &(c, met))| {
                let mut l =
                    testing::level(Load::Concurrency(c), &[testing::record(0.0, 10.0, 1.0, 2)]);
                l.reached = Some(ReachedLoad {
                    client_in_flight_max: if i + under >= n { 8 } else { c },
                    client_in_flight_mean: 1.0,
                    under_loaded: i + under >= n,
                });
                l.slo_checks = vec![SloCheck {
                    slo: slos[0].label(),
                    value_ms: Some(10.0),
                    met,
                    not_evaluable: None,
                }];
                l
            })
            .collect();
        let mut r = testing::client_report(Source::Native, levels);
        r.config.slos = slos.clone();
        r.sweep = analyze_sweep(&r.levels, &slos);
        r
    }

    #[test]
    fn capacity_and_knee_say_how_far_the_levels_pin_them() {
        let text = |r: &ClientReport| notes(r).join("\n");
        let r = report(&[(1, true), (8, true), (16, false)], 0);
        let t = text(&r);
        assert!(
            t.contains("SLO capacity (ttft_ms:p50<=500): c=8, bracketed: c=16 fails"),
            "{t}"
        );
        assert!(
            sweep_sentences(&r)[0].contains("8 concurrent users")
                && sweep_sentences(&r)[0].contains("bracketed: c=16 fails"),
            "{:?}",
            sweep_sentences(&r)
        );
        let r = report(&[(8, true)], 0);
        assert!(
            text(&r)
                .contains("SLO capacity (ttft_ms:p50<=500): at least c=8, no level tested failed")
        );
        assert!(sweep_sentences(&r)[0].contains("at least 8 concurrent users"));
        let r = report(&[(1, false), (8, false)], 0);
        assert!(
            text(&r).contains("below c=1: no level tested met every SLO"),
            "{}",
            text(&r)
        );
        // c=16 met the SLO with only 8 in flight: left out, c=8 is a floor.
        let r = report(&[(1, true), (8, true), (16, true)], 1);
        let t = text(&r);
        assert!(t.contains("at least c=8, no level tested failed"), "{t}");
        assert!(
            t.contains("left out of the knee and the SLO capacity (under-loaded): c=16"),
            "{t}"
        );
        let (_, rows) = summary_rows(&r);
        assert_eq!(rows[2][0], "c=16 (under-loaded: 8 in flight)");
        assert!(
            sweep_sentences(&r)
                .iter()
                .any(|s| s.contains("Left out as under-loaded"))
        );
    }
}
