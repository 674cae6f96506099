//! Rounds of a level: each round's medians and throughput, the spread between
//! rounds, and the rounds that are outliers.
//!
//! With 3 or more rounds, a round is flagged on a figure (TTFT/TPOT/E2E median,
//! throughput) when it is more than 2x above or below the median of all rounds (the
//! median, unlike the mean of the others, is not dragged by the outlier itself)
//! (and, for latencies, at least 2 ms away from it, so sub-millisecond noise is not
//! flagged). With 2 rounds the level is flagged when one is more than 2x the other.

use crate::model::{RoundReport, RoundSpread, Spread};
use tokenscope_stats::stats;

/// Minimum latency difference for a round to count as an outlier, ms.
const ROUND_OUTLIER_FLOOR_MS: f64 = 2.0;

#[derive(Debug, Clone, Default)]
pub(crate) struct RoundAcc {
    pub(crate) sent: u64,
    pub(crate) ok: u64,
    pub(crate) ttft: Vec<f64>,
    pub(crate) tpot: Vec<f64>,
    pub(crate) e2e: Vec<f64>,
    pub(crate) tokens: u64,
    pub(crate) t_first_send: Option<f64>,
    pub(crate) t_last_done: Option<f64>,
}

pub(crate) fn analyze_rounds(rounds: &[RoundAcc]) -> (Vec<RoundReport>, RoundSpread) {
    let mut reports: Vec<RoundReport> = rounds
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let window_s = match (r.t_first_send, r.t_last_done) {
                (Some(a), Some(b)) if b > a => Some((b - a) / 1000.0),
                _ => None,
            };
            RoundReport {
                round: i as u32 + 1,
                sent: r.sent,
                ok: r.ok,
                ttft_ms_p50: stats::median(&r.ttft),
                tpot_ms_p50: stats::median(&r.tpot),
                e2e_ms_p50: stats::median(&r.e2e),
                output_tokens_per_s: window_s.map(|w| r.tokens as f64 / w),
                outlier_metrics: Vec::new(),
            }
        })
        .collect();
    type Getter = fn(&RoundReport) -> Option<f64>;
    let figures: [(&str, Getter, f64); 4] = [
        ("ttft_ms_p50", |r| r.ttft_ms_p50, ROUND_OUTLIER_FLOOR_MS),
        ("tpot_ms_p50", |r| r.tpot_ms_p50, ROUND_OUTLIER_FLOOR_MS),
        ("e2e_ms_p50", |r| r.e2e_ms_p50, ROUND_OUTLIER_FLOOR_MS),
        ("output_tokens_per_s", |r| r.output_tokens_per_s, 0.0),
    ];
    let mut spread = RoundSpread::default();
    for (name, get, floor) in figures {
        let values: Vec<(usize, f64)> = reports
            .iter()
            .enumerate()
            .filter_map(|(i, r)| get(r).map(|v| (i, v)))
            .collect();
        let vals: Vec<f64> = values.iter().map(|v| v.1).collect();
        let s = spread_of(&vals);
        match name {
            "ttft_ms_p50" => spread.ttft_ms_p50 = s,
            "tpot_ms_p50" => spread.tpot_ms_p50 = s,
            "e2e_ms_p50" => spread.e2e_ms_p50 = s,
            _ => spread.output_tokens_per_s = s,
        }
        if values.len() == 2 {
            let (a, b) = (vals[0], vals[1]);
            let (lo, hi) = (a.min(b), a.max(b));
            if hi > 2.0 * lo && hi - lo > floor {
                spread.rounds_disagree = true;
            }
        } else if values.len() >= 3 {
            let Some(m) = stats::median(&vals) else {
                continue;
            };
            for &(i, v) in &values {
                if (v > 2.0 * m || v < 0.5 * m) && (v - m).abs() > floor {
                    reports[i].outlier_metrics.push(name.to_owned());
                    spread.rounds_disagree = true;
                }
            }
        }
    }
    (reports, spread)
}

fn spread_of(values: &[f64]) -> Option<Spread> {
    if values.len() < 2 {
        return None;
    }
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let med = stats::median(values)?;
    Some(Spread {
        min,
        max,
        relative: if med != 0.0 { (max - min) / med } else { 0.0 },
    })
}

#[cfg(test)]
mod tests {
    use crate::analyze::level::{LevelAccumulator, LevelOptions};
    use crate::model::Load;
    use crate::testing;

    #[test]
    fn round_outliers() {
        let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
        for (round, ttft) in [(0, 100.0), (1, 105.0), (2, 400.0)] {
            acc.push(
                round,
                &testing::record(f64::from(round as u32) * 10_000.0, ttft, 10.0, 5),
            );
        }
        let l = acc.finish();
        assert_eq!(l.rounds.len(), 3);
        // The slow round is also a throughput outlier (same tokens over a longer window).
        assert_eq!(
            l.rounds[2].outlier_metrics,
            vec!["ttft_ms_p50", "e2e_ms_p50", "output_tokens_per_s"]
        );
        assert!(l.rounds[0].outlier_metrics.is_empty());
        assert!(l.round_spread.rounds_disagree);
        let s = l.round_spread.ttft_ms_p50.unwrap();
        assert_eq!((s.min, s.max), (100.0, 400.0));
        // Sub-millisecond differences never flag.
        let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
        for (round, ttft) in [(0, 0.3), (1, 0.4), (2, 1.1)] {
            acc.push(
                round,
                &testing::record(f64::from(round as u32) * 10_000.0, ttft, 10.0, 5),
            );
        }
        assert!(!acc.finish().round_spread.rounds_disagree);
    }
}
