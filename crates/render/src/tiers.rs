//! The tiers side by side (`bench --input-tokens 64,256 --max-tokens 128,256`, the
//! page's tier lists): per tier and level, TTFT, TPOT, E2E and throughput, with
//! each tier's knee. The CLI prints it as text, the page as a table.

use super::fmt::{fmt_ms, fmt_rate};
use tokenscope_core::report::ClientReport;

/// The table's headers and rows for `done` (each tier's label and report).
pub fn tier_rows(done: &[(String, &ClientReport)]) -> (Vec<String>, Vec<Vec<String>>) {
    let headers = [
        "tier",
        "load",
        "ok",
        "TTFT p50",
        "TTFT p95",
        "TPOT p50",
        "E2E p95",
        "out tok/s",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut rows = Vec::new();
    for (tier, r) in done {
        let knee = r.sweep.knee.as_ref().map(|k| k.level_index);
        for (i, l) in r.levels.iter().enumerate() {
            let m = &l.metrics;
            let load = l.label();
            rows.push(vec![
                tier.clone(),
                if knee == Some(i) {
                    format!("{load} (knee)")
                } else {
                    load
                },
                l.ok.to_string(),
                fmt_ms(m.ttft_ms.p50),
                fmt_ms(m.ttft_ms.p95),
                fmt_ms(m.tpot_ms.p50),
                fmt_ms(m.e2e_ms.p95),
                fmt_rate(l.output_tokens_per_s),
            ]);
        }
    }
    (headers, rows)
}
