//! A level's per-request samples, metric by metric: what [`super::level`]
//! collects, and what a report carries (as histograms) so that shards' levels
//! merge ([`crate::report::merge`]). Both compute the level's summaries, quantile
//! curves, ITL by output position and SLO checks here, the one way.

use std::collections::BTreeMap;

use crate::analyze::slo::{Slo, SloMetric};
use crate::analyze::stats::{HistogramData, Samples, Summary};
use crate::model::{LevelMetrics, PositionBucket, SloCheck};

/// Output-position buckets for ITL: tokens 1-64, 65-256, 257 and on.
pub const POSITION_BUCKETS: [(u64, Option<u64>); 3] = [(1, Some(64)), (65, Some(256)), (257, None)];

/// Points of the quantile curves kept per metric (p0..p100).
pub const QUANTILE_POINTS: usize = 101;

/// One level's samples of every per-request metric (successful requests).
#[derive(Debug, Clone)]
pub struct LevelSamples {
    pub(crate) ttft: Samples,
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

    /// Every collection with its name: the [`LevelMetrics`] field's, or
    /// `itl_by_position/<from>` for the position buckets.
    fn named(&self) -> Vec<(String, &Samples)> {
        let mut out: Vec<(String, &Samples)> = [
            ("ttft_ms", &self.ttft),
            ("tpot_ms", &self.tpot),
            ("itl_ms", &self.itl),
            ("itl_per_token_ms", &self.itl_per_token),
            ("e2e_ms", &self.e2e),
            ("time_to_headers_ms", &self.headers),
            ("time_to_first_byte_ms", &self.first_byte),
            ("decode_rate_tok_per_s", &self.decode_rate),
            ("output_tokens", &self.out_tokens),
            ("rendered_ttft_ms", &self.rendered),
            ("render_delay_ms", &self.render_delay),
            ("max_gap_ms", &self.max_gap),
            ("time_to_first_answer_ms", &self.first_answer),
            ("reasoning_tokens", &self.reasoning),
            ("browser_send_ms", &self.send),
            ("browser_delivery_ms", &self.delivery),
            ("client_lag_ms", &self.lag),
            ("server_tpot_ms", &self.server_tpot),
            ("server_prompt_ms", &self.server_prompt),
            ("connection_setup_ms", &self.connection_setup),
        ]
        .into_iter()
        .map(|(n, s)| (n.to_owned(), s))
        .collect();
        for ((from, _), s) in POSITION_BUCKETS.iter().zip(&self.positions) {
            out.push((format!("itl_by_position/{from}"), s));
        }
        out
    }

    fn named_mut(&mut self) -> Vec<&mut Samples> {
        let mut out = vec![
            &mut self.ttft,
            &mut self.tpot,
            &mut self.itl,
            &mut self.itl_per_token,
            &mut self.e2e,
            &mut self.headers,
            &mut self.first_byte,
            &mut self.decode_rate,
            &mut self.out_tokens,
            &mut self.rendered,
            &mut self.render_delay,
            &mut self.max_gap,
            &mut self.first_answer,
            &mut self.reasoning,
            &mut self.send,
            &mut self.delivery,
            &mut self.lag,
            &mut self.server_tpot,
            &mut self.server_prompt,
            &mut self.connection_setup,
        ];
        out.extend(self.positions.iter_mut());
        out
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
        for (name, s) in [
            ("ttft_ms", &self.ttft),
            ("tpot_ms", &self.tpot),
            ("itl_ms", &self.itl),
            ("e2e_ms", &self.e2e),
            ("rendered_ttft_ms", &self.rendered),
            ("render_delay_ms", &self.render_delay),
        ] {
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
        let summary = match slo.metric {
            SloMetric::TtftMs => Some(&m.ttft_ms),
            SloMetric::TpotMs => Some(&m.tpot_ms),
            SloMetric::ItlMs => Some(&m.itl_ms),
            SloMetric::E2eMs => Some(&m.e2e_ms),
            SloMetric::RenderedTtftMs => m.rendered_ttft_ms.as_ref(),
            SloMetric::MaxGapMs => m.max_gap_ms.as_ref(),
        };
        summary.map_or(0, |s| s.count)
    }

    /// The level's value of an SLO's percentile: from the summaries for the
    /// standard ones, else from the samples.
    fn slo_value(&self, m: &LevelMetrics, slo: &Slo) -> Option<f64> {
        let (summary, samples) = match slo.metric {
            SloMetric::TtftMs => (Some(&m.ttft_ms), &self.ttft),
            SloMetric::TpotMs => (Some(&m.tpot_ms), &self.tpot),
            SloMetric::ItlMs => (Some(&m.itl_ms), &self.itl),
            SloMetric::E2eMs => (Some(&m.e2e_ms), &self.e2e),
            SloMetric::RenderedTtftMs => (m.rendered_ttft_ms.as_ref(), &self.rendered),
            SloMetric::MaxGapMs => (m.max_gap_ms.as_ref(), &self.max_gap),
        };
        match pct_key(slo.percentile) {
            Some(k) => summary.and_then(|s| s.get(k)),
            None => samples.percentile(slo.percentile / 100.0),
        }
    }
}

/// A report level's summaries by the names [`LevelSamples`] gives its samples.
fn summaries<'a>(
    m: &'a LevelMetrics,
    positions: &'a [PositionBucket],
) -> BTreeMap<String, Option<Summary>> {
    let mut out: BTreeMap<String, Option<Summary>> = [
        ("ttft_ms", Some(m.ttft_ms)),
        ("tpot_ms", Some(m.tpot_ms)),
        ("itl_ms", Some(m.itl_ms)),
        ("itl_per_token_ms", Some(m.itl_per_token_ms)),
        ("e2e_ms", Some(m.e2e_ms)),
        ("time_to_headers_ms", Some(m.time_to_headers_ms)),
        ("time_to_first_byte_ms", Some(m.time_to_first_byte_ms)),
        ("decode_rate_tok_per_s", Some(m.decode_rate_tok_per_s)),
        ("output_tokens", Some(m.output_tokens)),
        ("rendered_ttft_ms", m.rendered_ttft_ms),
        ("render_delay_ms", m.render_delay_ms),
        ("max_gap_ms", m.max_gap_ms),
        ("time_to_first_answer_ms", m.time_to_first_answer_ms),
        ("reasoning_tokens", m.reasoning_tokens),
        ("browser_send_ms", m.browser_send_ms),
        ("browser_delivery_ms", m.browser_delivery_ms),
        ("client_lag_ms", m.client_lag_ms),
        ("server_tpot_ms", m.server_tpot_ms),
        ("server_prompt_ms", m.server_prompt_ms),
        ("connection_setup_ms", m.connection_setup_ms),
    ]
    .into_iter()
    .map(|(n, s)| (n.to_owned(), s))
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
    crate::analyze::stats::QUANTILES
        .iter()
        .find(|(_, q)| (q * 100.0 - pct).abs() < 1e-9)
        .map(|(k, _)| *k)
}
