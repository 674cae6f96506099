//! Across the levels of a sweep: the knee of the throughput-latency curve and the
//! SLO capacity.
//!
//! ## The knee
//!
//! For consecutive levels `i -> i+1` with output throughput `X` and p95 E2E latency
//! `L`, the *elasticity* is `ln(L[i+1] / L[i]) / ln(X[i+1] / X[i])` (infinite when
//! throughput did not grow). The knee is the first level `i` after which latency
//! grows faster than throughput in relative terms (elasticity > 1) by a margin that
//! is not noise (`L` grows by at least 10%). Past it, added load buys queueing, not
//! throughput: it is the most load one can promise.
//!
//! ## SLO capacity
//!
//! The highest-throughput level at which every SLO's percentile is within its
//! bound and at most 1% of requests failed or timed out.

use crate::analyze::slo::Slo;
use crate::model::{Knee, LevelReport, SloCapacity, SweepReport};

/// Knee and SLO capacity across the levels of a sweep.
pub fn analyze_sweep(levels: &[LevelReport], slos: &[Slo]) -> SweepReport {
    SweepReport {
        knee: find_knee(levels),
        slo_capacity: slo_capacity(levels, slos),
    }
}

/// Minimum relative latency growth for a knee (noise guard).
const KNEE_MIN_LATENCY_GROWTH: f64 = 0.10;

/// The knee of the throughput-latency curve (see the module docs).
pub fn find_knee(levels: &[LevelReport]) -> Option<Knee> {
    let points: Vec<(usize, f64, f64)> = levels
        .iter()
        .enumerate()
        .filter(|(_, l)| l.ok > 0)
        .filter_map(|(i, l)| Some((i, l.output_tokens_per_s, l.metrics.e2e_ms.p95?)))
        .collect();
    for w in points.windows(2) {
        let (i, x0, l0) = w[0];
        let (_, x1, l1) = w[1];
        if l0 <= 0.0 || x0 <= 0.0 {
            continue;
        }
        let lat_ratio = l1 / l0;
        if lat_ratio < 1.0 + KNEE_MIN_LATENCY_GROWTH {
            continue;
        }
        let thr_ratio = x1 / x0;
        let elasticity = if thr_ratio <= 1.0 {
            f64::INFINITY
        } else {
            lat_ratio.ln() / thr_ratio.ln()
        };
        if elasticity > 1.0 {
            let level = &levels[i];
            return Some(Knee {
                concurrency: level.concurrency,
                rate_per_s: level.rate_per_s,
                level_index: i,
                metric: "e2e_ms.p95".into(),
                elasticity_after: elasticity.is_finite().then_some(elasticity),
                method: "first level after which p95 E2E latency grows faster than output throughput: ln(L[i+1]/L[i]) / ln(X[i+1]/X[i]) > 1, with L growing by at least 10%".into(),
            });
        }
    }
    None
}

/// The highest-throughput level meeting every SLO with at most 1% failures.
pub fn slo_capacity(levels: &[LevelReport], slos: &[Slo]) -> Option<SloCapacity> {
    if slos.is_empty() {
        return None;
    }
    levels
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            l.ok > 0
                && l.error_rate + l.timeout_rate <= 0.01
                && !l.slo_checks.is_empty()
                && l.slo_checks.iter().all(|c| c.met)
        })
        .max_by(|a, b| a.1.output_tokens_per_s.total_cmp(&b.1.output_tokens_per_s))
        .map(|(i, l)| SloCapacity {
            concurrency: l.concurrency,
            rate_per_s: l.rate_per_s,
            level_index: i,
            output_tokens_per_s: l.output_tokens_per_s,
            requests_per_s: l.requests_per_s,
            slos: slos.iter().map(Slo::label).collect(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::level::{LevelAccumulator, LevelOptions};
    use crate::model::{Load, SloCheck};
    use crate::testing;

    fn level(load: u32, tput: f64, e2e_p95: f64) -> LevelReport {
        let mut acc = LevelAccumulator::new(Load::Concurrency(load), LevelOptions::default());
        acc.push(0, &testing::record(0.0, 10.0, 1.0, 2));
        let mut l = acc.finish();
        l.output_tokens_per_s = tput;
        l.metrics.e2e_ms.p95 = Some(e2e_p95);
        l
    }

    #[test]
    fn knee_where_latency_outgrows_throughput() {
        let levels = vec![
            level(1, 50.0, 1000.0),
            level(4, 190.0, 1050.0),
            level(8, 370.0, 1150.0),
            level(16, 700.0, 1400.0),
            level(32, 720.0, 2800.0),
        ];
        let knee = find_knee(&levels).unwrap();
        assert_eq!(knee.concurrency, Some(16));
        assert!(knee.elasticity_after.unwrap() > 1.0);
        // Linear scaling everywhere: no knee.
        let levels = vec![
            level(1, 50.0, 1000.0),
            level(4, 200.0, 1020.0),
            level(8, 400.0, 1040.0),
        ];
        assert!(find_knee(&levels).is_none());
        // Latency growing faster than throughput from the start.
        let levels = vec![level(1, 50.0, 1000.0), level(4, 60.0, 4000.0)];
        assert_eq!(find_knee(&levels).unwrap().concurrency, Some(1));
        // Throughput flat: infinite elasticity, stored as None (JSON has no infinity).
        let levels = vec![level(1, 50.0, 1000.0), level(4, 50.0, 4000.0)];
        let knee = find_knee(&levels).unwrap();
        assert_eq!(knee.elasticity_after, None);
    }

    #[test]
    fn slo_capacity_picks_the_best_passing_level() {
        let slos = Slo::parse_list("e2e_ms:p95<=1500").unwrap();
        let mut levels = vec![
            level(1, 50.0, 1000.0),
            level(8, 370.0, 1150.0),
            level(32, 720.0, 2800.0),
        ];
        for l in &mut levels {
            let v = l.metrics.e2e_ms.p95.unwrap();
            l.slo_checks = vec![SloCheck {
                slo: slos[0].label(),
                value_ms: Some(v),
                met: v <= 1500.0,
            }];
        }
        let cap = slo_capacity(&levels, &slos).unwrap();
        assert_eq!(cap.concurrency, Some(8));
        assert!(slo_capacity(&levels, &[]).is_none());
        levels[1].error_rate = 0.05;
        assert_eq!(slo_capacity(&levels, &slos).unwrap().concurrency, Some(1));
    }
}
