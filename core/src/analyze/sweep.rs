//! Across the levels of a sweep: the knee of the throughput-latency curve and the
//! SLO capacity, each from the levels that were the load they claim.
//!
//! ## Levels left out
//!
//! A closed-loop level whose client never had its concurrency in flight
//! ([`crate::analyze::in_flight`]: under-loaded) measured a lower load than its
//! label says: neither the knee nor the SLO capacity uses it (`left_out`).
//!
//! ## The knee
//!
//! For consecutive levels `i -> i+1` with output throughput `X` and p95 E2E latency
//! `L`, the *elasticity* is `ln(L[i+1] / L[i]) / ln(X[i+1] / X[i])` (infinite when
//! throughput did not grow). The knee is the first level `i` after which latency
//! grows faster than throughput in relative terms (elasticity > 1) by a margin that
//! is not noise (`L` grows by at least 10%). Past it, added load buys queueing, not
//! throughput: it is the most load one can promise. With no knee, the highest
//! level it was looked for up to is kept (`not reached up to c=32`).
//!
//! ## SLO capacity
//!
//! A level *meets* the SLOs when every SLO check was evaluated and is within its
//! bound and at most 1% of requests failed or timed out; it *fails* them when an
//! evaluated check is out of bounds or more than 1% failed; otherwise (a check
//! not evaluable, none failed) it says nothing. The capacity is the
//! highest-throughput level that meets them: **bracketed** when a higher level
//! tested fails them (the capacity lies between), else only a **floor** (no level
//! above it failed: at least this much). When no level meets them, the lowest
//! level that fails them is a **ceiling** (`slo_below`: below it).

use crate::analyze::slo::Slo;
use crate::model::{CapacityBound, Knee, LevelReport, LoadPoint, SloCapacity, SweepReport};

/// Knee and SLO capacity across the levels of a sweep.
pub fn analyze_sweep(levels: &[LevelReport], slos: &[Slo]) -> SweepReport {
    let knee = find_knee(levels);
    let knee_not_reached_up_to = match &knee {
        Some(_) => None,
        None => {
            let points = knee_points(levels);
            (points.len() >= 2 && levels.iter().all(|l| l.group.is_none()))
                .then(|| point(levels, points[points.len() - 1].0))
        }
    };
    let (slo_capacity, slo_below) = capacity(levels, slos);
    SweepReport {
        knee,
        slo_capacity,
        slo_below,
        knee_not_reached_up_to,
        left_out: levels
            .iter()
            .enumerate()
            .filter(|(_, l)| l.under_loaded())
            .map(|(i, _)| i)
            .collect(),
    }
}

/// Minimum relative latency growth for a knee (noise guard).
const KNEE_MIN_LATENCY_GROWTH: f64 = 0.10;

/// Level `i` as a point of the sweep.
fn point(levels: &[LevelReport], i: usize) -> LoadPoint {
    LoadPoint {
        level_index: i,
        concurrency: levels[i].concurrency,
        rate_per_s: levels[i].rate_per_s,
    }
}

/// The levels the knee is looked for among: loaded as claimed, with successes
/// and a p95 E2E: (index, throughput, p95 E2E).
fn knee_points(levels: &[LevelReport]) -> Vec<(usize, f64, f64)> {
    levels
        .iter()
        .enumerate()
        .filter(|(_, l)| l.ok > 0 && !l.under_loaded())
        .filter_map(|(i, l)| Some((i, l.output_tokens_per_s, l.metrics.e2e_ms.p95?)))
        .collect()
}

/// The knee of the throughput-latency curve (see the module docs).
pub fn find_knee(levels: &[LevelReport]) -> Option<Knee> {
    let points = knee_points(levels);
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

/// What a level says of the SLOs (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SloState {
    Meets,
    Fails,
    Silent,
}

fn slo_state(l: &LevelReport) -> SloState {
    if l.sent == 0 || l.slo_checks.is_empty() || l.under_loaded() {
        return SloState::Silent;
    }
    let failed = l.error_rate + l.timeout_rate > 0.01
        || l.slo_checks
            .iter()
            .any(|c| c.not_evaluable.is_none() && !c.met);
    if failed {
        SloState::Fails
    } else if l.ok > 0 && l.slo_checks.iter().all(|c| c.met) {
        SloState::Meets
    } else {
        SloState::Silent
    }
}

/// Whether level `b` is a higher load than level `a` (of the same kind).
fn higher(a: &LevelReport, b: &LevelReport) -> bool {
    let same_kind = a.concurrency.is_some() == b.concurrency.is_some();
    same_kind && b.load().value() > a.load().value()
}

/// The highest-throughput level meeting every SLO, bracketed or a floor; or,
/// when none does, the lowest level failing them (a ceiling).
pub fn capacity(levels: &[LevelReport], slos: &[Slo]) -> (Option<SloCapacity>, Option<LoadPoint>) {
    if slos.is_empty() {
        return (None, None);
    }
    let states: Vec<SloState> = levels.iter().map(slo_state).collect();
    let lowest = |it: &mut dyn Iterator<Item = usize>| {
        it.min_by(|&a, &b| {
            levels[a]
                .load()
                .value()
                .total_cmp(&levels[b].load().value())
        })
    };
    let best = (0..levels.len())
        .filter(|&i| states[i] == SloState::Meets)
        .max_by(|&a, &b| {
            levels[a]
                .output_tokens_per_s
                .total_cmp(&levels[b].output_tokens_per_s)
        });
    let Some(i) = best else {
        let below = lowest(&mut (0..levels.len()).filter(|&i| states[i] == SloState::Fails));
        return (None, below.map(|i| point(levels, i)));
    };
    let l = &levels[i];
    let failed_at = lowest(
        &mut (0..levels.len()).filter(|&j| states[j] == SloState::Fails && higher(l, &levels[j])),
    )
    .map(|j| point(levels, j));
    let cap = SloCapacity {
        concurrency: l.concurrency,
        rate_per_s: l.rate_per_s,
        level_index: i,
        output_tokens_per_s: l.output_tokens_per_s,
        requests_per_s: l.requests_per_s,
        slos: slos.iter().map(Slo::label).collect(),
        bound: Some(if failed_at.is_some() {
            CapacityBound::Bracketed
        } else {
            CapacityBound::Floor
        }),
        failed_at,
    };
    (Some(cap), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::level::{LevelAccumulator, LevelOptions};
    use crate::model::{Load, ReachedLoad, SloCheck};
    use crate::testing;

    fn level(load: u32, tput: f64, e2e_p95: f64) -> LevelReport {
        let mut acc = LevelAccumulator::new(Load::Concurrency(load), LevelOptions::default());
        acc.push(0, &testing::record(0.0, 10.0, 1.0, 2));
        let mut l = acc.finish();
        // Figures set by hand: loaded as claimed unless a test says otherwise.
        l.reached = None;
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

    /// Levels with one SLO check each on their p95 E2E (bound 1500 ms).
    fn checked(levels: &mut [LevelReport], slos: &[Slo]) {
        for l in levels {
            let v = l.metrics.e2e_ms.p95.unwrap();
            l.slo_checks = vec![SloCheck {
                slo: slos[0].label(),
                value_ms: Some(v),
                met: v <= 1500.0,
                not_evaluable: None,
            }];
        }
    }

    fn under_load(l: &mut LevelReport, max: u32) {
        l.reached = Some(ReachedLoad {
            client_in_flight_max: max,
            client_in_flight_mean: f64::from(max),
            under_loaded: true,
        });
    }

    #[test]
    fn slo_capacity_picks_the_best_passing_level() {
        let slos = Slo::parse_list("e2e_ms:p95<=1500").unwrap();
        let mut levels = vec![
            level(1, 50.0, 1000.0),
            level(8, 370.0, 1150.0),
            level(32, 720.0, 2800.0),
        ];
        checked(&mut levels, &slos);
        let cap = capacity(&levels, &slos).0.unwrap();
        assert_eq!(cap.concurrency, Some(8));
        assert_eq!(cap.bound, Some(CapacityBound::Bracketed));
        assert_eq!(cap.failed_at.unwrap().concurrency, Some(32));
        assert_eq!(capacity(&levels, &[]), (None, None));
        levels[1].error_rate = 0.05;
        let cap = capacity(&levels, &slos).0.unwrap();
        assert_eq!(cap.concurrency, Some(1));
        // c=8 now fails (5% failed): the lowest failure above c=1.
        assert_eq!(cap.failed_at.unwrap().concurrency, Some(8));
    }

    #[test]
    fn capacity_is_bracketed_a_floor_or_a_ceiling() {
        let slos = Slo::parse_list("e2e_ms:p95<=1500").unwrap();
        // Every level passed: only a floor.
        let mut levels = vec![level(1, 50.0, 1000.0), level(8, 370.0, 1150.0)];
        checked(&mut levels, &slos);
        let (cap, below) = capacity(&levels, &slos);
        let cap = cap.unwrap();
        assert_eq!(
            (cap.concurrency, cap.bound, cap.failed_at),
            (Some(8), Some(CapacityBound::Floor), None)
        );
        assert_eq!(below, None);
        // One level that passed: a floor too.
        let (cap, _) = capacity(&levels[1..], &slos);
        assert_eq!(cap.unwrap().bound, Some(CapacityBound::Floor));
        // None passed: below the lowest level that failed.
        let mut levels = vec![level(4, 50.0, 1600.0), level(8, 60.0, 3000.0)];
        checked(&mut levels, &slos);
        let (cap, below) = capacity(&levels, &slos);
        assert_eq!(cap, None);
        assert_eq!(below.unwrap().concurrency, Some(4));
        // A check not evaluable: the level says nothing either way.
        let mut levels = vec![level(1, 50.0, 1000.0), level(8, 370.0, 1150.0)];
        checked(&mut levels, &slos);
        levels[1].slo_checks[0].met = false;
        levels[1].slo_checks[0].not_evaluable = Some("24 successful requests".into());
        let cap = capacity(&levels, &slos).0.unwrap();
        assert_eq!(
            (cap.concurrency, cap.bound),
            (Some(1), Some(CapacityBound::Floor))
        );
    }

    #[test]
    fn under_loaded_levels_give_no_capacity_and_no_knee() {
        let slos = Slo::parse_list("e2e_ms:p95<=1500").unwrap();
        // c=16 and c=32 had only 8 in flight: c=16 "passed" (it measured c=8
        // again) and c=32 too; neither may be the capacity or bracket it.
        let mut levels = vec![
            level(1, 50.0, 1000.0),
            level(8, 370.0, 1150.0),
            level(16, 380.0, 1300.0),
            level(32, 385.0, 1450.0),
        ];
        checked(&mut levels, &slos);
        under_load(&mut levels[2], 8);
        under_load(&mut levels[3], 8);
        let sweep = analyze_sweep(&levels, &slos);
        let cap = sweep.slo_capacity.unwrap();
        assert_eq!(
            (cap.concurrency, cap.bound),
            (Some(8), Some(CapacityBound::Floor))
        );
        assert_eq!(sweep.left_out, vec![2, 3]);
        // The knee is looked for up to c=8 only.
        assert_eq!(sweep.knee, None);
        assert_eq!(sweep.knee_not_reached_up_to.unwrap().concurrency, Some(8));
        // Loaded as claimed, the same figures have a knee at c=8 (latency +13%
        // for throughput +3%) and every level passed: at least c=32.
        let mut full = levels.clone();
        for l in &mut full {
            l.reached = None;
        }
        let sweep = analyze_sweep(&full, &slos);
        assert_eq!(sweep.knee.unwrap().concurrency, Some(8));
        assert_eq!(sweep.slo_capacity.unwrap().concurrency, Some(32));
        // An under-loaded level that failed brackets nothing either.
        let mut levels = vec![level(1, 50.0, 1000.0), level(16, 60.0, 3000.0)];
        checked(&mut levels, &slos);
        under_load(&mut levels[1], 8);
        let sweep = analyze_sweep(&levels, &slos);
        assert_eq!(
            sweep.slo_capacity.unwrap().bound,
            Some(CapacityBound::Floor)
        );
        assert_eq!(sweep.knee_not_reached_up_to, None, "one level left");
    }

    #[test]
    fn open_loop_capacity_brackets_with_rates() {
        let slos = Slo::parse_list("e2e_ms:p95<=1500").unwrap();
        let mut levels: Vec<LevelReport> = [(2.0, 1000.0), (4.0, 1200.0), (8.0, 2000.0)]
            .iter()
            .map(|&(r, e2e)| {
                let mut l = level(1, r * 10.0, e2e);
                l.concurrency = None;
                l.rate_per_s = Some(r);
                l
            })
            .collect();
        checked(&mut levels, &slos);
        let cap = capacity(&levels, &slos).0.unwrap();
        assert_eq!(cap.rate_per_s, Some(4.0));
        assert_eq!(cap.failed_at.unwrap().rate_per_s, Some(8.0));
    }
}
