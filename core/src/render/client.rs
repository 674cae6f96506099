//! The client report rendered: the level table (the CLI's summary, the combined
//! report's level tables), the notes under it, the terminal summary, Markdown and
//! CSV. JSON is [`ClientReport::to_json`]. All read the one model.

use std::fmt::Write as _;

use super::fmt::{fmt_ms, fmt_rate};
use super::table::{markdown_table, text_table};
use crate::analyze::stats::Summary;
use crate::report::{CapacityBound, ClientReport, LevelReport};

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
    let mut headers: Vec<&str> = vec![
        "load", "sent", "ok", "err", "t/o", "TTFT p50", "TTFT p95", "TTFT p99",
    ];
    if cols.painted {
        headers.extend(["painted p50", "painted p95"]);
    }
    if cols.render_delay {
        headers.push("render delay p50");
    }
    if cols.delivery {
        headers.push("browser delivery p50");
    }
    headers.extend([
        "TPOT p50",
        "TPOT p95",
        "ITL p50",
        "ITL p99",
        "E2E p50",
        "E2E p95",
        "out tok/s",
        "req/s",
    ]);
    if cols.goodput {
        headers.push("goodput/s");
    }
    if cols.health {
        headers.extend(["err %", "t/o %", "round spread"]);
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
            let m = &l.metrics;
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
                #[cfg(feature = "server-view")]
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
                fmt_ms(m.ttft_ms.p50),
                fmt_ms(m.ttft_ms.p95),
                fmt_ms(m.ttft_ms.p99),
            ];
            if cols.painted {
                let r = m.rendered_ttft_ms.unwrap_or_default();
                row.extend([fmt_ms(r.p50), fmt_ms(r.p95)]);
            }
            if cols.render_delay {
                row.push(fmt_ms(m.render_delay_ms.unwrap_or_default().p50));
            }
            if cols.delivery {
                row.push(fmt_ms(m.browser_delivery_ms.unwrap_or_default().p50));
            }
            row.extend([
                fmt_ms(m.tpot_ms.p50),
                fmt_ms(m.tpot_ms.p95),
                fmt_ms(m.itl_ms.p50),
                fmt_ms(m.itl_ms.p99),
                fmt_ms(m.e2e_ms.p50),
                fmt_ms(m.e2e_ms.p95),
                fmt_rate(l.output_tokens_per_s),
                fmt_rate(l.requests_per_s),
            ]);
            if cols.goodput {
                row.push(l.goodput_per_s.map(fmt_rate).unwrap_or_else(|| "-".into()));
            }
            if cols.health {
                let spread = &l.round_spread;
                row.extend([
                    format!("{:.1}", 100.0 * l.error_rate),
                    format!("{:.1}", 100.0 * l.timeout_rate),
                    spread
                        .e2e_ms_p50
                        .map(|s| {
                            let flag = if spread.rounds_disagree { " !" } else { "" };
                            format!("{:.0}%{flag}", 100.0 * s.relative)
                        })
                        .unwrap_or_else(|| "-".into()),
                ]);
            }
            row
        })
        .collect();
    (headers.into_iter().map(str::to_owned).collect(), rows)
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
    #[cfg(feature = "server-view")]
    notes.extend(super::turns::cache_notes(report));
    #[cfg(feature = "server-view")]
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
        .map(crate::analyze::slo::Slo::label)
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
    #[cfg(feature = "server-view")]
    {
        if let Some((h, rows)) = super::server::resource_rows(report) {
            out.push_str("\nserver, per level:\n");
            out.push_str(&text_table(&h, &rows));
        }
        if let Some((h, rows)) = super::server::stage_rows(report) {
            out.push_str("\nwhere TTFT went (means, ms):\n");
            out.push_str(&text_table(&h, &rows));
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
    #[cfg(feature = "server-view")]
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
#[cfg(feature = "server-view")]
pub fn server_markdown(out: &mut String, report: &ClientReport) {
    if let Some((h, rows)) = super::server::resource_rows(report) {
        out.push_str("\n### Server, per level\n\n");
        out.push_str(&markdown_table(&h, &rows));
    }
    if let Some((h, rows)) = super::server::stage_rows(report) {
        out.push_str("\n### Where TTFT went (means, ms)\n\n");
        out.push_str(&markdown_table(&h, &rows));
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

const CSV_METRICS: [&str; 13] = [
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "itl_per_token_ms",
    "e2e_ms",
    "time_to_headers_ms",
    "time_to_first_byte_ms",
    "rendered_ttft_ms",
    "render_delay_ms",
    "max_gap_ms",
    "browser_send_ms",
    "browser_delivery_ms",
    "connection_setup_ms",
];

fn level_metric<'a>(l: &'a LevelReport, name: &str) -> Option<&'a Summary> {
    let m = &l.metrics;
    match name {
        "ttft_ms" => Some(&m.ttft_ms),
        "tpot_ms" => Some(&m.tpot_ms),
        "itl_ms" => Some(&m.itl_ms),
        "itl_per_token_ms" => Some(&m.itl_per_token_ms),
        "e2e_ms" => Some(&m.e2e_ms),
        "time_to_headers_ms" => Some(&m.time_to_headers_ms),
        "time_to_first_byte_ms" => Some(&m.time_to_first_byte_ms),
        "rendered_ttft_ms" => m.rendered_ttft_ms.as_ref(),
        "render_delay_ms" => m.render_delay_ms.as_ref(),
        "max_gap_ms" => m.max_gap_ms.as_ref(),
        "browser_send_ms" => m.browser_send_ms.as_ref(),
        "browser_delivery_ms" => m.browser_delivery_ms.as_ref(),
        "connection_setup_ms" => m.connection_setup_ms.as_ref(),
        _ => None,
    }
}

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
        "output_tokens_per_s",
        "requests_per_s",
        "goodput_per_s",
        "error_rate",
        "timeout_rate",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect::<Vec<_>>();
    for m in CSV_METRICS {
        for s in ["mean", "p50", "p90", "p95", "p99"] {
            header.push(format!("{m}_{s}"));
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
            num(Some(l.output_tokens_per_s)),
            num(Some(l.requests_per_s)),
            num(l.goodput_per_s),
            num(Some(l.error_rate)),
            num(Some(l.timeout_rate)),
        ];
        for m in CSV_METRICS {
            let s = level_metric(l, m);
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
    use crate::analyze::slo::Slo;
    use crate::analyze::sweep::analyze_sweep;
    use crate::analyze::verdict::sweep_sentences;
    use crate::model::{Load, ReachedLoad, SloCheck, Source};
    use crate::testing;

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
