//! Service-level objectives: `ttft_ms:p95<=500,tpot_ms:p95<=50`.
//!
//! Each SLO names a metric, a percentile and an upper bound. A **level meets** an SLO
//! when that percentile of the metric over the level's successful requests is at or
//! below the bound. A **request meets** the SLOs (for goodput) when its own value of
//! every metric is at or below every bound; for `itl_ms` a request's value is the
//! same percentile of its own gaps. A metric a request does not have (TPOT of a
//! one-token answer, a paint time natively) does not count against it.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::analyze::compare::min_samples;
use crate::analyze::stats::percentile;
use crate::measure::metrics::RequestMetrics;

/// A metric an SLO can bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SloMetric {
    /// Time to first token.
    TtftMs,
    /// Time per output token.
    TpotMs,
    /// Inter-token latency.
    ItlMs,
    /// End-to-end latency.
    E2eMs,
    /// User-perceived (painted) TTFT, browser only.
    RenderedTtftMs,
    /// A request's longest gap between tokens (stream smoothness).
    MaxGapMs,
}

impl SloMetric {
    /// All metrics, for error messages.
    pub const ALL: [SloMetric; 6] = [
        SloMetric::TtftMs,
        SloMetric::TpotMs,
        SloMetric::ItlMs,
        SloMetric::E2eMs,
        SloMetric::RenderedTtftMs,
        SloMetric::MaxGapMs,
    ];

    /// The metric's name (`ttft_ms`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            SloMetric::TtftMs => "ttft_ms",
            SloMetric::TpotMs => "tpot_ms",
            SloMetric::ItlMs => "itl_ms",
            SloMetric::E2eMs => "e2e_ms",
            SloMetric::RenderedTtftMs => "rendered_ttft_ms",
            SloMetric::MaxGapMs => "max_gap_ms",
        }
    }

    /// Parse a metric name; `ttft`, `tpot`, `itl`, `e2e` are accepted without `_ms`.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let s = s.strip_suffix("_ms").unwrap_or(s);
        Some(match s {
            "ttft" => SloMetric::TtftMs,
            "tpot" => SloMetric::TpotMs,
            "itl" => SloMetric::ItlMs,
            "e2e" | "e2el" => SloMetric::E2eMs,
            "rendered_ttft" => SloMetric::RenderedTtftMs,
            "max_gap" => SloMetric::MaxGapMs,
            _ => return None,
        })
    }
}

/// One objective: `metric:percentile<=bound`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// The metric bounded.
    pub metric: SloMetric,
    /// The percentile, 0..100 (e.g. 95.0 for p95, 50.0 for p50).
    pub percentile: f64,
    /// The bound, ms.
    pub max_ms: f64,
}

/// An SLO string that could not be read.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SloError {
    /// The item has no `<=`.
    #[error("SLO {item:?}: expected METRIC:PERCENTILE<=BOUND, e.g. ttft_ms:p95<=500")]
    Syntax {
        /// The offending item.
        item: String,
    },
    /// Unknown metric.
    #[error(
        "SLO {item:?}: unknown metric {metric:?} (known: ttft_ms, tpot_ms, itl_ms, e2e_ms, rendered_ttft_ms, max_gap_ms)"
    )]
    UnknownMetric {
        /// The offending item.
        item: String,
        /// The metric name given.
        metric: String,
    },
    /// Bad percentile.
    #[error("SLO {item:?}: percentile {percentile:?} must be like p50, p95, p99, p99.9")]
    BadPercentile {
        /// The offending item.
        item: String,
        /// The percentile given.
        percentile: String,
    },
    /// Bad bound.
    #[error("SLO {item:?}: bound {bound:?} must be a positive number of milliseconds")]
    BadBound {
        /// The offending item.
        item: String,
        /// The bound given.
        bound: String,
    },
}

impl Slo {
    /// Parse a comma-separated list such as `ttft_ms:p95<=500,tpot_ms:p95<=50`.
    /// The percentile may be omitted (`ttft_ms<=500` means p95).
    pub fn parse_list(s: &str) -> Result<Vec<Slo>, SloError> {
        s.split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .map(Slo::parse)
            .collect()
    }

    /// Parse one item.
    pub fn parse(item: &str) -> Result<Slo, SloError> {
        let (lhs, bound) = item.split_once("<=").ok_or_else(|| SloError::Syntax {
            item: item.to_owned(),
        })?;
        let (metric_s, pct_s) = match lhs.split_once(':') {
            Some((m, p)) => (m.trim(), Some(p.trim())),
            None => (lhs.trim(), None),
        };
        let metric = SloMetric::parse(metric_s).ok_or_else(|| SloError::UnknownMetric {
            item: item.to_owned(),
            metric: metric_s.to_owned(),
        })?;
        let percentile = match pct_s {
            None => 95.0,
            Some(p) => {
                let num = p.strip_prefix('p').or_else(|| p.strip_prefix('P'));
                let value = num.and_then(|n| {
                    // p999 means 99.9 (as in the report's keys).
                    if n == "999" {
                        Some(99.9)
                    } else {
                        n.parse::<f64>().ok()
                    }
                });
                match value {
                    Some(v) if v > 0.0 && v <= 100.0 => v,
                    _ => {
                        return Err(SloError::BadPercentile {
                            item: item.to_owned(),
                            percentile: p.to_owned(),
                        });
                    }
                }
            }
        };
        let bound_s = bound.trim().trim_end_matches("ms").trim();
        let max_ms = match bound_s.parse::<f64>() {
            Ok(v) if v > 0.0 && v.is_finite() => v,
            _ => {
                return Err(SloError::BadBound {
                    item: item.to_owned(),
                    bound: bound.trim().to_owned(),
                });
            }
        };
        Ok(Slo {
            metric,
            percentile,
            max_ms,
        })
    }

    /// The SLO written back in its canonical form.
    pub fn label(&self) -> String {
        format!(
            "{}:p{}<={}",
            self.metric.as_str(),
            fmt_num(self.percentile),
            fmt_num(self.max_ms)
        )
    }

    /// Why a level's `n` samples of the metric cannot carry this SLO's
    /// percentile, with the fix; `None` when they can. A percentile needs
    /// [`min_samples`] of them (the rule `compare` gives its intervals: with
    /// fewer, the percentile is one of the last few samples).
    pub fn not_evaluable(&self, n: u64) -> Option<String> {
        let need = self.min_requests();
        if n >= need {
            return None;
        }
        let what = match self.metric {
            SloMetric::ItlMs => "gaps between tokens",
            _ => "successful requests",
        };
        Some(match n {
            0 => format!(
                "no successful request measured {}{}",
                self.metric.as_str(),
                if self.metric == SloMetric::RenderedTtftMs {
                    " (a paint time: measured in the browser only)"
                } else {
                    ""
                }
            ),
            _ => format!(
                "{n} {what}: a p{} needs {need} (run --requests {need} or more)",
                fmt_num(self.percentile)
            ),
        })
    }

    /// The fewest samples this SLO's percentile needs ([`min_samples`]).
    pub fn min_requests(&self) -> u64 {
        min_samples(self.percentile / 100.0) as u64
    }

    /// Whether one request meets this SLO (true when the request lacks the metric).
    pub fn request_meets(&self, m: &RequestMetrics) -> bool {
        let value = match self.metric {
            SloMetric::TtftMs => m.ttft_ms,
            SloMetric::TpotMs => m.tpot_ms,
            SloMetric::E2eMs => m.e2e_ms,
            SloMetric::RenderedTtftMs => m.rendered_ttft_ms,
            SloMetric::MaxGapMs => m.longest_gap_ms,
            SloMetric::ItlMs => {
                let gaps: Vec<f64> = m.gaps.iter().map(|g| g.ms).collect();
                percentile(&gaps, self.percentile / 100.0)
            }
        };
        value.is_none_or(|v| v <= self.max_ms)
    }
}

fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_contract_example() {
        let slos = Slo::parse_list("ttft_ms:p95<=500,tpot_ms:p95<=50").unwrap();
        assert_eq!(
            slos,
            vec![
                Slo {
                    metric: SloMetric::TtftMs,
                    percentile: 95.0,
                    max_ms: 500.0
                },
                Slo {
                    metric: SloMetric::TpotMs,
                    percentile: 95.0,
                    max_ms: 50.0
                }
            ]
        );
        assert_eq!(slos[0].label(), "ttft_ms:p95<=500");
        assert_eq!(Slo::parse("e2e:p99.9<=2000ms").unwrap().percentile, 99.9);
        assert_eq!(Slo::parse("itl_ms:p999<=80").unwrap().percentile, 99.9);
        assert_eq!(Slo::parse("ttft<=100").unwrap().percentile, 95.0);
    }

    #[test]
    fn a_percentile_of_too_few_samples_is_not_evaluable() {
        let p95 = Slo::parse("ttft_ms:p95<=500").unwrap();
        assert_eq!(p95.min_requests(), 100);
        assert_eq!(
            p95.not_evaluable(24).as_deref(),
            Some("24 successful requests: a p95 needs 100 (run --requests 100 or more)")
        );
        assert_eq!(p95.not_evaluable(100), None);
        let p50 = Slo::parse("tpot_ms:p50<=50").unwrap();
        assert_eq!(p50.not_evaluable(10), None);
        assert!(p50.not_evaluable(9).is_some());
        let paint = Slo::parse("rendered_ttft_ms:p50<=50").unwrap();
        assert!(paint.not_evaluable(0).unwrap().contains("browser only"));
    }

    #[test]
    fn errors_name_the_offending_part() {
        let e = Slo::parse_list("ttft_ms:p95<=500,latency:p95<=3").unwrap_err();
        assert!(e.to_string().contains("unknown metric \"latency\""), "{e}");
        let e = Slo::parse("ttft_ms:q95<=5").unwrap_err();
        assert!(e.to_string().contains("\"q95\""), "{e}");
        let e = Slo::parse("ttft_ms:p95<=-5").unwrap_err();
        assert!(e.to_string().contains("\"-5\""), "{e}");
        assert!(matches!(
            Slo::parse("ttft_ms:p95=5"),
            Err(SloError::Syntax { .. })
        ));
    }
}
