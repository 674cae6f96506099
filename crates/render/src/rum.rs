//! Real users' levels (`tokenscope collect --report`): where the painted TTFT
//! went, and how the turns ended, one row per group. The terminal, Markdown and
//! HTML reports show the same table.

use super::fmt::fmt_ms;
use tokenscope_core::report::ClientReport;

/// The table's title.
pub const TITLE: &str = "Real users: where the painted TTFT went (weighted means, ms)";

/// What the parts mean, under the table.
pub const NOTE: &str = "painted = received + main thread + render; received = server + network \
(both over the turns whose stream carried the server's timings). Means add up; \
percentiles do not. Input to fetch: the user's click or key to the request (before the TTFT \
starts; turns a click or key sent). Blocking: long frames' input-blocking time per turn. \
Stalled: a gap between text chunks over 1 s. Hidden: turns while the page was hidden (no \
paint times).";

/// The table: headers and one row per level that has real users' turns; `None`
/// when no level has.
pub fn rum_rows(report: &ClientReport) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let headers = [
        "group",
        "turns",
        "painted p50",
        "painted p95",
        "painted",
        "received",
        "server",
        "network",
        "main thread",
        "render",
        "input to fetch",
        "blocking",
        "stalled",
        "aborted",
        "failed",
        "hidden",
    ]
    .map(str::to_owned)
    .to_vec();
    let pct = |f: f64| format!("{:.1}%", 100.0 * f);
    let rows: Vec<Vec<String>> = report
        .levels
        .iter()
        .filter_map(|l| {
            let r = l.rum.as_ref()?;
            let painted = l.metrics.rendered_ttft_ms.unwrap_or_default();
            let s = r.split;
            let turns = if r.sampled {
                format!("{} (~{:.0})", r.turns_stored, r.turns_weighted)
            } else {
                r.turns_stored.to_string()
            };
            Some(vec![
                l.label(),
                turns,
                fmt_ms(painted.p50),
                fmt_ms(painted.p95),
                fmt_ms(s.map(|s| s.painted_ms)),
                fmt_ms(s.map(|s| s.received_ms)),
                fmt_ms(s.and_then(|s| s.server_ms)),
                fmt_ms(s.and_then(|s| s.network_ms)),
                fmt_ms(s.map(|s| s.main_thread_ms)),
                fmt_ms(s.map(|s| s.render_ms)),
                fmt_ms(r.input_to_fetch_ms),
                fmt_ms(Some(r.blocking_ms)),
                pct(r.stalled_1s_fraction),
                pct(r.aborted_fraction),
                pct(r.error_fraction),
                r.hidden_turns.to_string(),
            ])
        })
        .collect();
    (!rows.is_empty()).then_some((headers, rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_core::rum::report::{ReportOptions, build};
    use tokenscope_core::rum::summary::StoredTurn;

    #[test]
    fn a_row_per_group_whose_parts_add_up() {
        let mut turn = tokenscope_core::testing::rum_turn();
        turn.server_prefill_ms = Some(30.0);
        let turns = [StoredTurn {
            turn,
            browser: "Chrome 131".into(),
        }];
        let report = build(&turns, &ReportOptions::default()).client;
        let (h, rows) = rum_rows(&report).unwrap();
        assert_eq!(rows.len(), 3);
        let col = |name: &str| h.iter().position(|x| x == name).unwrap();
        let num = |name: &str| rows[0][col(name)].parse::<f64>().unwrap();
        assert_eq!(rows[0][0], "all");
        // The test turn: first chunk 41, first DOM 42, first paint 55 ms.
        assert_eq!(
            (
                num("painted"),
                num("server"),
                num("network"),
                num("main thread"),
                num("render")
            ),
            (55.0, 30.0, 11.0, 1.0, 13.0)
        );
        let lab = tokenscope_core::testing::client_report(
            tokenscope_core::model::Source::Native,
            Vec::new(),
        );
        assert!(rum_rows(&lab).is_none());
    }
}
