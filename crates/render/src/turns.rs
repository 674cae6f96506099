//! Conversations in the report: TTFT and TPOT per turn, and what the server's
//! prefix cache served (the history a turn resends, a shared system prompt).

use super::fmt::fmt_ms;
use tokenscope_core::report::{ClientReport, PromptCache};

fn cached_pct(c: Option<&PromptCache>) -> String {
    c.and_then(PromptCache::cached_fraction)
        .map_or_else(|| "-".into(), |f| format!("{:.0}%", 100.0 * f))
}

/// One row per level and turn, when the run sent conversations.
pub fn turn_rows(report: &ClientReport) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let headers = [
        "load",
        "turn",
        "sent",
        "ok",
        "prompt tok p50",
        "cached",
        "TTFT p50",
        "TTFT p95",
        "TPOT p50",
    ];
    let rows: Vec<Vec<String>> = report
        .levels
        .iter()
        .flat_map(|l| {
            l.turns.iter().map(move |t| {
                vec![
                    l.label(),
                    t.turn.to_string(),
                    t.sent.to_string(),
                    t.ok.to_string(),
                    t.prompt_tokens
                        .and_then(|s| s.p50)
                        .map_or_else(|| "-".into(), |p| format!("{p:.0}")),
                    cached_pct(t.prompt_cache.as_ref()),
                    fmt_ms(t.ttft_ms.p50),
                    fmt_ms(t.ttft_ms.p95),
                    fmt_ms(t.tpot_ms.p50),
                ]
            })
        })
        .collect();
    (!rows.is_empty()).then(|| (headers.map(str::to_owned).to_vec(), rows))
}

/// One line per level whose server said what its prefix cache served.
pub fn cache_notes(report: &ClientReport) -> Vec<String> {
    report
        .levels
        .iter()
        .filter_map(|l| {
            let c = l.prompt_cache?;
            let f = c.cached_fraction()?;
            let mut line = format!(
                "{}: the server served {:.0}% of prompt tokens from its prefix cache ({} of {}, as {} of {} requests said)",
                l.label(),
                100.0 * f,
                c.cached_tokens,
                c.prompt_tokens,
                c.requests,
                l.sent
            );
            let split = |s: Option<&tokenscope_stats::stats::Summary>| {
                s.filter(|s| s.count > 0)
                    .map(|s| format!("{} ({} requests)", fmt_ms(s.p50), s.count))
            };
            let m = &l.metrics;
            match (split(m.ttft_cached_ms.as_ref()), split(m.ttft_uncached_ms.as_ref())) {
                (Some(c), Some(u)) => line.push_str(&format!(
                    "; TTFT p50 {c} ms with half the prompt or more cached, {u} ms with less"
                )),
                (Some(c), None) => line.push_str(&format!(
                    "; TTFT p50 {c} ms, every request with half its prompt or more cached"
                )),
                _ => {}
            }
            Some(line)
        })
        .collect()
}
