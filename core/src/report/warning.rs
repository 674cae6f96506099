//! The warnings a run draws from its figures: the event loop running late, sends
//! running late in rate mode, levels where nothing succeeded, prompt token counts
//! that differ, percentiles from histograms. The warning types are the result
//! model's ([`crate::model::warning`]), re-exported here.

use crate::model::LevelReport;
pub use crate::model::{ReportWarning, WarningKind};
use tokenscope_stats::stats::Summary;

/// Event-loop lag above which a run's numbers are called client-bound (p99, ms):
/// the native client's runtime and the page's main thread alike.
pub const LAG_THRESHOLD_MS: f64 = 10.0;

/// The `client_bound` warning when the event loop's lag p99 passes
/// [`LAG_THRESHOLD_MS`]; `who` names the loop ("client", "page").
pub fn event_loop_warning(lag: &Summary, who: &str) -> Option<ReportWarning> {
    let p99 = lag.p99.filter(|p| *p > LAG_THRESHOLD_MS)?;
    Some(ReportWarning {
        kind: WarningKind::ClientBound,
        message: format!(
            "the {who}'s event loop ran late (p99 {p99:.1} ms, max {:.1} ms, threshold {LAG_THRESHOLD_MS} ms): timings include the {who}'s own delays; use fewer concurrent streams or a faster machine",
            lag.max.unwrap_or(p99)
        ),
    })
}

/// Warnings drawn from the levels: sends running late in rate mode (the client,
/// not the server, limited the level) and levels where nothing succeeded.
pub fn level_warnings(levels: &[LevelReport]) -> Vec<ReportWarning> {
    let mut out = Vec::new();
    for l in levels {
        if let (Some(rate), Some(lag)) = (l.rate_per_s, &l.metrics.client_lag_ms) {
            let gap_ms = 1000.0 / rate;
            let p95 = lag.p95.unwrap_or(0.0);
            if p95 > LAG_THRESHOLD_MS.max(0.1 * gap_ms) {
                out.push(ReportWarning {
                    kind: WarningKind::ClientBound,
                    message: format!(
                        "{}: sends ran late (client lag p95 {:.1} ms, max {:.1} ms): the client, not the server, limited this level",
                        l.label(),
                        p95,
                        lag.max.unwrap_or(p95)
                    ),
                });
            }
        }
        if l.prompt_tokens_differ > 0 {
            out.push(ReportWarning::new(
                WarningKind::PromptTokensDiffer,
                format!(
                    "{}: {} of {} requests' usage.prompt_tokens are not their prompt's counted tokens plus the template's overhead: the server counts differently than the tokenizer used (config.tokens)",
                    l.label(),
                    l.prompt_tokens_differ,
                    l.prompt_tokens_checked
                ),
            ));
        }
        if l.ok == 0 && l.sent > 0 {
            out.push(ReportWarning {
                kind: WarningKind::NoSuccess,
                message: format!("{}: none of {} requests succeeded", l.label(), l.sent),
            });
        }
        if let (Some(c), Some(r)) = (l.concurrency, l.reached.filter(|r| r.under_loaded)) {
            out.push(ReportWarning::new(
                WarningKind::UnderLoaded,
                format!(
                    "{}: the client never had {c} requests in flight (at most {}, {:.1} on average): this level measured a lower load, and the knee, the SLO capacity and the verdict leave it out (send at least {c} requests per round)",
                    l.label(),
                    r.client_in_flight_max,
                    r.client_in_flight_mean
                ),
            ));
        }
        for check in &l.slo_checks {
            if let Some(why) = &check.not_evaluable {
                out.push(ReportWarning::new(
                    WarningKind::SloNotEvaluable,
                    format!("{}: SLO {} not evaluable: {why}", l.label(), check.slo),
                ));
            }
        }
    }
    out
}

/// The `histogram_summaries` warning when some level's percentiles come from a
/// histogram because more than `sample_cap` samples of a metric were recorded.
pub fn histogram_warning(levels: &[LevelReport], sample_cap: usize) -> Option<ReportWarning> {
    levels
        .iter()
        .any(|l| l.metrics.itl_ms.histogram || l.metrics.ttft_ms.histogram)
        .then(|| {
            ReportWarning::new(
                WarningKind::HistogramSummaries,
                format!(
                    "some levels recorded more than {sample_cap} samples of a metric: their percentiles come from a histogram (3 significant digits) to keep memory flat"
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_loop_lag_past_the_threshold_is_a_warning() {
        let lag = |p99: f64| Summary {
            p99: Some(p99),
            max: Some(p99 + 5.0),
            ..Summary::default()
        };
        assert_eq!(event_loop_warning(&lag(LAG_THRESHOLD_MS), "page"), None);
        assert_eq!(event_loop_warning(&Summary::default(), "page"), None);
        let w = event_loop_warning(&lag(25.0), "page").unwrap();
        assert_eq!(w.kind, WarningKind::ClientBound);
        assert!(
            w.message
                .starts_with("the page's event loop ran late (p99 25.0 ms, max 30.0 ms"),
            "{}",
            w.message
        );
    }
}
