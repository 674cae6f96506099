//! A level's per-request samples, metric by metric: what [`super::level`]
//! collects, and what a report carries (as histograms) so that shards' levels
//! merge ([`crate::report::merge`]). Both compute the level's summaries, quantile
//! curves, ITL by output position and SLO checks here, the one way.

use std::collections::BTreeMap;

use crate::analyze::slo::Slo;
use crate::model::metric::{self, LevelValue};
use crate::model::{LevelMetrics, PositionBucket, SloCheck};
use tokenscope_stats::stats::{HistogramData, Samples, Summary};

/// The one mapping from a registry key ([`crate::model::metric`]) to the
/// collection that holds its samples: `slots!(self, &)` or `slots!(self, &mut)`.
macro_rules! slots {
    ($s:ident, $($r:tt)+) => {
        [
            (metric::TTFT_MS.key, $($r)+ $s.ttft),
            (metric::TTFT_CACHED_MS.key, $($r)+ $s.ttft_cached),
            (metric::TTFT_UNCACHED_MS.key, $($r)+ $s.ttft_uncached),
            (metric::TPOT_MS.key, $($r)+ $s.tpot),
            (metric::ITL_MS.key, $($r)+ $s.itl),
            (metric::ITL_PER_TOKEN_MS.key, $($r)+ $s.itl_per_token),
            (metric::E2E_MS.key, $($r)+ $s.e2e),
            (metric::TIME_TO_HEADERS_MS.key, $($r)+ $s.headers),
            (metric::TIME_TO_FIRST_BYTE_MS.key, $($r)+ $s.first_byte),
            (metric::DECODE_RATE_TOK_PER_S.key, $($r)+ $s.decode_rate),
            (metric::OUTPUT_TOKENS.key, $($r)+ $s.out_tokens),
            (metric::RENDERED_TTFT_MS.key, $($r)+ $s.rendered),
            (metric::RENDER_DELAY_MS.key, $($r)+ $s.render_delay),
            (metric::MAX_GAP_MS.key, $($r)+ $s.max_gap),
            (metric::TIME_TO_FIRST_ANSWER_MS.key, $($r)+ $s.first_answer),
            (metric::TIME_TO_FIRST_TOOL_CALL_MS.key, $($r)+ $s.first_tool_call),
            (metric::REASONING_TOKENS.key, $($r)+ $s.reasoning),
            (metric::BROWSER_SEND_MS.key, $($r)+ $s.send),
            (metric::BROWSER_DELIVERY_MS.key, $($r)+ $s.delivery),
            (metric::CLIENT_LAG_MS.key, $($r)+ $s.lag),
            (metric::SERVER_TPOT_MS.key, $($r)+ $s.server_tpot),
            (metric::SERVER_PROMPT_MS.key, $($r)+ $s.server_prompt),
            (metric::CONNECTION_SETUP_MS.key, $($r)+ $s.connection_setup),
        ]
    };
}

/// Output-position buckets for ITL: tokens 1-64, 65-256, 257 and on.
pub const POSITION_BUCKETS: [(u64, Option<u64>); 3] = [(1, Some(64)), (65, Some(256)), (257, None)];

/// Points of the quantile curves kept per metric (p0..p100).
pub const QUANTILE_POINTS: usize = 101;

/// One level's samples of every per-request metric (successful requests).
#[derive(Debug, Clone)]
pub struct LevelSamples {
    pub(crate) ttft: Samples,
    pub(crate) ttft_cached: Samples,
    pub(crate) ttft_uncached: Samples,
    pub(crate) tpot: Samples,
    pub(crate) itl: Samples,
    pub(crate) itl_per_token: Samples,
    pub(crate) e2e: Samples,
    pub(crate) headers: Samples,
    pub(crate) first_byte: Samples,
    pub(crate) decode_rate: Samples,
    pub(crate) out_tokens: Samples,
    pub(crate) rendered: Samples,
    pub(crate) render_delay: Samples,
    pub(crate) max_gap: Samples,
    pub(crate) first_answer: Samples,
    pub(crate) first_tool_call: Samples,
    pub(crate) reasoning: Samples,
    pub(crate) send: Samples,
    pub(crate) delivery: Samples,
    pub(crate) lag: Samples,
    pub(crate) server_tpot: Samples,
    pub(crate) server_prompt: Samples,
    pub(crate) connection_setup: Samples,
    /// ITL by output position ([`POSITION_BUCKETS`]).
    pub(crate) positions: Vec<Samples>,
}

/// Samples of a report's level that cannot be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SamplesError {
    /// The level carries no histogram for a metric it has samples of.
    #[error("no histogram of {0} (a report written without --shard carries none)")]
    Missing(String),
    /// A histogram whose count is not its summary's.
    #[error("the histogram of {0} does not match its summary")]
    Mismatch(String),
}

impl LevelSamples {
    /// Empty, each metric exact up to `cap` samples.
    pub fn new(cap: usize) -> Self {
        let s = || Samples::with_cap(cap);
        Self {
            ttft: s(),
            ttft_cached: s(),
            ttft_uncached: s(),
            tpot: s(),
            itl: s(),
            itl_per_token: s(),
            e2e: s(),
            headers: s(),
            first_byte: s(),
            decode_rate: s(),
            out_tokens: s(),
            rendered: s(),
            render_delay: s(),
            max_gap: s(),
            first_answer: s(),
            first_tool_call: s(),
            reasoning: s(),
            send: s(),
            delivery: s(),
            lag: s(),
            server_tpot: s(),
            server_prompt: s(),
            connection_setup: s(),
            positions: POSITION_BUCKETS.iter().map(|_| s()).collect(),
        }
    }

    /// Every collection with its name: its registry key
    /// ([`crate::model::metric`]), or `itl_by_position/<from>` for the
    /// position buckets.
    fn named(&self) -> Vec<(String, &Samples)> {
        let mut out: Vec<(String, &Samples)> = slots!(self, &)
            .into_iter()
            .map(|(n, s)| (n.to_owned(), s))
            .collect();
        for ((from, _), s) in POSITION_BUCKETS.iter().zip(&self.positions) {
            out.push((format!("itl_by_position/{from}"), s));
        }
        out
    }

    fn named_mut(&mut self) -> Vec<&mut Samples> {
        let mut out: Vec<&mut Samples> = slots!(self, &mut).into_iter().map(|(_, s)| s).collect();
        out.extend(self.positions.iter_mut());
        out
    }

    /// The collection of the metric with this key.
    fn by_key(&self, key: &str) -> Option<&Samples> {
        slots!(self, &)
            .into_iter()
            .find(|(k, _)| *k == key)
            .map(|(_, s)| s)
    }

    /// Add all of `other`'s samples.
    pub fn merge(&mut self, other: &LevelSamples) {
        let theirs: Vec<Samples> = other.named().into_iter().map(|(_, s)| s.clone()).collect();
        for (mine, theirs) in self.named_mut().into_iter().zip(&theirs) {
            mine.merge(theirs);
        }
    }

    /// The histograms a report carries, by name (metrics without samples left out).
    pub fn histograms(&self) -> BTreeMap<String, HistogramData> {
        self.named()
            .into_iter()
            .filter(|(_, s)| !s.is_empty())
            .map(|(n, s)| (n, s.histogram_data()))
            .collect()
    }

    /// The samples back from a report's level: its histograms with its summaries'
    /// exact moments.
    pub fn from_report(
        metrics: &LevelMetrics,
        positions: &[PositionBucket],
        histograms: &BTreeMap<String, HistogramData>,
    ) -> Result<Self, SamplesError> {
        let summaries = summaries(metrics, positions);
        let mut out = Self::new(0);
        let names: Vec<String> = out.named().into_iter().map(|(n, _)| n).collect();
        for (slot, name) in out.named_mut().into_iter().zip(names) {
            let Some(summary) = summaries.get(name.as_str()).copied().flatten() else {
                continue;
            };
            if summary.count == 0 {
                continue;
            }
            let data = histograms
                .get(&name)
                .ok_or_else(|| SamplesError::Missing(name.clone()))?;
            *slot = Samples::from_histogram(data, &summary)
                .ok_or_else(|| SamplesError::Mismatch(name.clone()))?;
        }
        Ok(out)
    }

    /// The level's metric summaries.
    pub fn metrics(&self) -> LevelMetrics {
        LevelMetrics {
            ttft_ms: self.ttft.summary(),
            ttft_cached_ms: nonempty(&self.ttft_cached),
            ttft_uncached_ms: nonempty(&self.ttft_uncached),
            tpot_ms: self.tpot.summary(),
            itl_ms: self.itl.summary(),
            itl_per_token_ms: self.itl_per_token.summary(),
            e2e_ms: self.e2e.summary(),
            time_to_headers_ms: self.headers.summary(),
            time_to_first_byte_ms: self.first_byte.summary(),
            decode_rate_tok_per_s: self.decode_rate.summary(),
            output_tokens: self.out_tokens.summary(),
            rendered_ttft_ms: nonempty(&self.rendered),
            render_delay_ms: nonempty(&self.render_delay),
            max_gap_ms: nonempty(&self.max_gap),
            time_to_first_answer_ms: nonempty(&self.first_answer),
            time_to_first_tool_call_ms: nonempty(&self.first_tool_call),
            reasoning_tokens: nonempty(&self.reasoning),
            browser_send_ms: nonempty(&self.send),
            browser_delivery_ms: nonempty(&self.delivery),
            client_lag_ms: nonempty(&self.lag),
            server_tpot_ms: nonempty(&self.server_tpot),
            server_prompt_ms: nonempty(&self.server_prompt),
            connection_setup_ms: nonempty(&self.connection_setup),
        }
    }

    /// The quantile curves the report keeps (p0..p100 of the charted metrics).
    pub fn quantiles(&self) -> BTreeMap<String, Vec<f64>> {
        // Inserted one by one (collecting would sort, in code the page carries).
        let mut out = BTreeMap::new();
        for (name, s) in slots!(self, &)
            .into_iter()
            .filter(|(k, _)| metric::by_key(k).is_some_and(|m| m.curve))
        {
            let curve = s.quantile_curve(QUANTILE_POINTS);
            if !curve.is_empty() {
                out.insert(name.to_owned(), curve);
            }
        }
        out
    }

    /// ITL by output position.
    pub fn positions(&self) -> Vec<PositionBucket> {
        POSITION_BUCKETS
            .iter()
            .zip(&self.positions)
            .map(|((from, to), s)| PositionBucket {
                from: *from,
                to: *to,
                itl_ms: s.summary(),
            })
            .collect()
    }

    /// Each SLO's level percentile and whether it is met.
    pub fn slo_checks(&self, metrics: &LevelMetrics, slos: &[Slo]) -> Vec<SloCheck> {
        slos.iter()
            .map(|slo| {
                let value = self.slo_value(metrics, slo);
                let not_evaluable = slo.not_evaluable(self.slo_samples(metrics, slo));
                SloCheck {
                    slo: slo.label(),
                    value_ms: value,
                    met: not_evaluable.is_none() && value.is_some_and(|v| v <= slo.max_ms),
                    not_evaluable,
                }
            })
            .collect()
    }

    /// How many samples an SLO's percentile is taken over.
    fn slo_samples(&self, m: &LevelMetrics, slo: &Slo) -> u64 {
        slo.metric.metric().summary(m).map_or(0, |s| s.count)
    }

    /// The level's value of an SLO's percentile: from the summaries for the
    /// standard ones, else from the samples.
    fn slo_value(&self, m: &LevelMetrics, slo: &Slo) -> Option<f64> {
        let metric = slo.metric.metric();
        match pct_key(slo.percentile) {
            Some(k) => metric.summary(m).and_then(|s| s.get(k)),
            None => self.by_key(metric.key)?.percentile(slo.percentile / 100.0),
        }
    }
}

/// A report level's summaries by the names [`LevelSamples`] gives its samples.
fn summaries<'a>(
    m: &'a LevelMetrics,
    positions: &'a [PositionBucket],
) -> BTreeMap<String, Option<Summary>> {
    let mut out: BTreeMap<String, Option<Summary>> = metric::METRICS
        .iter()
        .filter(|metric| matches!(metric.level, LevelValue::Summary(_)))
        .map(|metric| (metric.key.to_owned(), metric.summary(m).copied()))
        .collect();
    for p in positions {
        out.insert(format!("itl_by_position/{}", p.from), Some(p.itl_ms));
    }
    out
}

fn nonempty(s: &Samples) -> Option<Summary> {
    (!s.is_empty()).then(|| s.summary())
}

fn pct_key(pct: f64) -> Option<&'static str> {
    tokenscope_stats::stats::QUANTILES
        .iter()
        .find(|(_, q)| (q * 100.0 - pct).abs() < 1e-9)
        .map(|(k, _)| *k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_distribution_of_the_registry_has_its_samples() {
        let samples = LevelSamples::new(0);
        let slots: Vec<&str> = slots!(samples, &).iter().map(|(k, _)| *k).collect();
        let registry: Vec<&str> = metric::METRICS
            .iter()
            .filter(|m| matches!(m.level, LevelValue::Summary(_)))
            .map(|m| m.key)
            .collect();
        assert_eq!(slots, registry);
    }
}
