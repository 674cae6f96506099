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

use crate::model::metric::{self, Metric};
use tokenscope_measure::metrics::RequestMetrics;
use tokenscope_stats::compare::min_samples;

/// A metric an SLO can bound: a registry entry whose `slo` is set
/// ([`crate::model::metric::gateable`]); serialized as its key (`ttft_ms`).
#[derive(Clone, Copy)]
pub struct SloMetric(&'static Metric);

impl SloMetric {
    /// The registry's entry.
    pub fn metric(self) -> &'static Metric {
        self.0
    }

    /// The metric's name (`ttft_ms`, ...).
    pub fn as_str(self) -> &'static str {
        self.0.key
    }

    /// Parse a metric name: a gateable metric's key, with or without `_ms`, or
    /// an alias (`e2el`).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        metric::gateable().find(|m| m.slo_named(s)).map(SloMetric)
    }

    /// The gateable metrics' keys, for messages (`ttft_ms, tpot_ms, ...`).
    pub fn known() -> String {
        metric::gateable()
            .map(|m| m.key)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl PartialEq for SloMetric {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
    }
}

impl Eq for SloMetric {}

impl std::hash::Hash for SloMetric {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.key.hash(state);
    }
}

impl std::fmt::Debug for SloMetric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.key)
    }
}

impl Serialize for SloMetric {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.key)
    }
}

impl<'de> Deserialize<'de> for SloMetric {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let key = std::borrow::Cow::<'de, str>::deserialize(d)?;
        metric::gateable()
            .find(|m| m.key == key)
            .map(SloMetric)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown SLO metric {key:?} (known: {})",
                    SloMetric::known()
                ))
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

/// One class of a mixed workload and the SLOs its requests are held to
/// (`--slo-class summarize=ttft_ms:p95<=3000`): a prompts file's lines name
/// their class (`"class": "summarize"`); a request of a class without its own
/// SLOs is held to the run's (`--slo`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloClass {
    /// The class's name, as the prompts file gives it.
    pub class: String,
    /// Its SLOs.
    pub slos: Vec<Slo>,
}

impl SloClass {
    /// Parse `NAME=SLO,SLO,...`.
    pub fn parse(s: &str) -> Result<SloClass, SloError> {
        let (name, list) = s
            .split_once('=')
            .ok_or_else(|| SloError::Class { item: s.to_owned() })?;
        let slos = Slo::parse_list(list)?;
        if name.trim().is_empty() || slos.is_empty() {
            return Err(SloError::Class { item: s.to_owned() });
        }
        Ok(SloClass {
            class: name.trim().to_owned(),
            slos,
        })
    }

    /// The SLOs a request of `class` is held to: its class's own, else `run`'s.
    pub fn slos_for<'a>(classes: &'a [SloClass], class: Option<&str>, run: &'a [Slo]) -> &'a [Slo] {
        class
            .and_then(|c| classes.iter().find(|k| k.class == c))
            .map_or(run, |k| &k.slos)
    }
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
        "SLO {item:?}: unknown metric {metric:?} (known: {})",
        SloMetric::known()
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
    /// A class without its name or SLOs.
    #[error(
        "SLO class {item:?}: expected NAME=METRIC:PERCENTILE<=BOUND,..., e.g. summarize=ttft_ms:p95<=3000"
    )]
    Class {
        /// The offending item.
        item: String,
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
        let metric = self.metric.metric();
        let what = if metric.per_gap() {
            "gaps between tokens"
        } else {
            "successful requests"
        };
        Some(match n {
            0 => format!(
                "no successful request measured {}{}",
                metric.key,
                metric.absent.map(|a| format!(" ({a})")).unwrap_or_default()
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
        let value = self
            .metric
            .metric()
            .request_value(m, self.percentile / 100.0);
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
                    metric: SloMetric::parse("ttft").unwrap(),
                    percentile: 95.0,
                    max_ms: 500.0
                },
                Slo {
                    metric: SloMetric::parse("tpot_ms").unwrap(),
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
    fn every_gateable_metric_is_parsed_and_checked() {
        use crate::model::metric::{METRICS, gateable};
        use tokenscope_measure::metrics::{MetricOptions, RequestMetrics};
        // Every value 20 ms or more: ttft, tpot, each gap, the longest gap, the
        // paint (e2e: 80).
        let record = crate::testing::record(0.0, 20.0, 20.0, 4);
        let mut full = RequestMetrics::from_record(&record, &MetricOptions::default());
        full.rendered_ttft_ms = Some(20.0);
        let mut empty = full.clone();
        empty.ttft_ms = None;
        empty.tpot_ms = None;
        empty.e2e_ms = None;
        empty.rendered_ttft_ms = None;
        empty.longest_gap_ms = None;
        empty.gaps.clear();
        assert_eq!(
            SloMetric::known(),
            "ttft_ms, tpot_ms, itl_ms, e2e_ms, rendered_ttft_ms, max_gap_ms"
        );
        for m in gateable() {
            let slo = Slo::parse(&format!("{}:p50<=10", m.key)).unwrap();
            assert_eq!(slo.metric.as_str(), m.key);
            assert_eq!(slo.label(), format!("{}:p50<=10", m.key));
            let json = serde_json::to_string(&slo).unwrap();
            assert_eq!(serde_json::from_str::<Slo>(&json).unwrap(), slo);
            // A request without the metric meets it; one above the bound does not.
            assert!(slo.request_meets(&empty), "{}", m.key);
            assert!(
                !slo.request_meets(&full),
                "{} is not read per request",
                m.key
            );
            assert!(
                Slo::parse(&format!("{}:p50<=1000", m.key))
                    .unwrap()
                    .request_meets(&full)
            );
        }
        for m in METRICS.iter().filter(|m| m.slo.is_none()) {
            assert!(Slo::parse(&format!("{}<=10", m.key)).is_err(), "{}", m.key);
        }
    }

    #[test]
    fn a_class_holds_its_requests_to_its_own_slos() {
        let chat = SloClass::parse("chat=ttft_ms:p95<=500,tpot_ms:p50<=50").unwrap();
        assert_eq!(chat.class, "chat");
        assert_eq!(chat.slos.len(), 2);
        let run = Slo::parse_list("ttft_ms:p95<=2000").unwrap();
        let classes = [chat.clone()];
        assert_eq!(
            SloClass::slos_for(&classes, Some("chat"), &run),
            &chat.slos[..]
        );
        assert_eq!(
            SloClass::slos_for(&classes, Some("summarize"), &run),
            &run[..]
        );
        assert_eq!(SloClass::slos_for(&classes, None, &run), &run[..]);
        for bad in ["chat", "=ttft_ms<=5", "chat="] {
            let e = SloClass::parse(bad).unwrap_err();
            assert!(e.to_string().contains("NAME=METRIC"), "{bad}: {e}");
        }
        assert!(matches!(
            SloClass::parse("chat=latency<=5"),
            Err(SloError::UnknownMetric { .. })
        ));
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
