//! Long runs (soak): per-interval snapshots of a level and the drift of TTFT and
//! TPOT across them (a least-squares slope, flagged when it is significant at 95%
//! and worth at least 10% over the run).

use std::collections::BTreeMap;

use crate::model::metric::{TPOT_MS, TTFT_MS};
use crate::model::{Drift, Snapshot};
use tokenscope_stats::stats::{self, LinearFit};

#[derive(Debug, Clone, Default)]
pub(crate) struct SnapAcc {
    pub(crate) finished: u64,
    pub(crate) ok: u64,
    pub(crate) ttft: Vec<f64>,
    pub(crate) tpot: Vec<f64>,
    pub(crate) tokens: u64,
}

pub(crate) fn snapshots(acc: &BTreeMap<u64, SnapAcc>, interval_ms: Option<f64>) -> Vec<Snapshot> {
    let Some(iv) = interval_ms else {
        return Vec::new();
    };
    acc.iter()
        .map(|(idx, s)| Snapshot {
            t_s: *idx as f64 * iv / 1000.0,
            finished: s.finished,
            ok: s.ok,
            ttft_ms_p50: stats::median(&s.ttft),
            tpot_ms_p50: stats::median(&s.tpot),
            tpot_ms_p95: stats::percentile(&s.tpot, 0.95),
            output_tokens_per_s: s.tokens as f64 / (iv / 1000.0),
        })
        .collect()
}

/// Fit each snapshot median against time; flag a trend that is significant at 95%
/// and changes the metric by at least 10% over the run.
pub(crate) fn drift(snaps: &[Snapshot]) -> Vec<Drift> {
    type Getter = fn(&Snapshot) -> Option<f64>;
    let metrics: [(&str, Getter); 2] = [
        (TPOT_MS.key, |s| s.tpot_ms_p50),
        (TTFT_MS.key, |s| s.ttft_ms_p50),
    ];
    let mut out = Vec::new();
    for (name, get) in metrics {
        let pts: Vec<(f64, f64)> = snaps
            .iter()
            .filter_map(|s| get(s).map(|v| (s.t_s / 60.0, v)))
            .collect();
        let Some(fit) = LinearFit::fit(&pts) else {
            continue;
        };
        let t0 = pts.first().map_or(0.0, |p| p.0);
        let t1 = pts.last().map_or(0.0, |p| p.0);
        let start = fit.intercept + fit.slope * t0;
        let change = if start.abs() > 0.0 {
            fit.slope * (t1 - t0) / start
        } else {
            0.0
        };
        out.push(Drift {
            metric: name.to_owned(),
            slope_ms_per_min: fit.slope,
            slope_ci95_ms_per_min: fit.slope_ci95(),
            change_over_run: change,
            flagged: fit.significant() && change.abs() >= 0.10,
            fit,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::testing;

    #[test]
    fn drift_is_flagged_only_when_there_is_a_trend() {
        let run = |grow: f64| testing::soak_level(20.0, grow, 1.0, 20);
        let flat = run(0.0);
        assert!(flat.snapshots.len() >= 19);
        let tpot = flat.drift.iter().find(|d| d.metric == "tpot_ms").unwrap();
        assert!(!tpot.flagged, "{tpot:?}");
        let growing = run(2.0); // +2 ms per minute: 20 -> 60 ms over 20 minutes
        let tpot = growing
            .drift
            .iter()
            .find(|d| d.metric == "tpot_ms")
            .unwrap();
        assert!(tpot.flagged, "{tpot:?}");
        assert!((tpot.slope_ms_per_min - 2.0).abs() < 0.2, "{tpot:?}");
    }
}
