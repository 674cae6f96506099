//! Real users' turns summarised per group (all, each route, each browser family):
//! weighted quantiles of TTFT as received and as painted, the render delay between
//! them, stalls and outcomes. Each turn counts as many times as its weight (the
//! inverse of its sampling probability), so a 10% sample with every slow, failed
//! and aborted turn kept estimates the same distribution as all turns.

use serde::Serialize;

use super::{Outcome, Turn};
use tokenscope_stats::stats::weighted_quantile;

/// A stored turn with what the collector added.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTurn {
    /// The turn as the probe sent it.
    pub turn: Turn,
    /// The browser's family and major version ([`super::browser_family`]).
    pub browser: String,
}

/// Quantiles of one figure, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Quantiles {
    /// Turns with the figure, weighted.
    pub n: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// One group's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupSummary {
    /// `all`, `route /v1/chat/completions` or `browser Chrome 131`.
    pub group: String,
    /// Turns stored.
    pub turns: u64,
    /// Turns they stand for (sum of weights).
    pub weighted_turns: f64,
    /// TTFT as received (first text chunk).
    pub ttft_received_ms: Option<Quantiles>,
    /// TTFT as painted (the frame after the first DOM change).
    pub ttft_painted_ms: Option<Quantiles>,
    /// Painted less received.
    pub render_delay_ms: Option<Quantiles>,
    /// Longest gap between text chunks.
    pub longest_gap_ms: Option<Quantiles>,
    /// Share of turns (weighted) with a gap over 1 s.
    pub stalled_1s_fraction: f64,
    /// Weighted shares of complete, aborted and failed turns.
    pub complete_fraction: f64,
    /// Aborted.
    pub aborted_fraction: f64,
    /// Failed.
    pub error_fraction: f64,
    /// Turns during which the page was hidden (no paint times).
    pub hidden: u64,
}

fn quantiles(turns: &[&StoredTurn], f: impl Fn(&Turn) -> Option<f64>) -> Option<Quantiles> {
    let mut v: Vec<(f64, f64)> = turns
        .iter()
        .filter_map(|t| Some((f(&t.turn)?, t.turn.weight)))
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    Some(Quantiles {
        n: v.iter().map(|p| p.1).sum(),
        p50: weighted_quantile(&v, 0.50),
        p90: weighted_quantile(&v, 0.90),
        p95: weighted_quantile(&v, 0.95),
        p99: weighted_quantile(&v, 0.99),
    })
}

/// The summary of one group of turns.
pub fn summarise(group: &str, turns: &[&StoredTurn]) -> GroupSummary {
    let total: f64 = turns.iter().map(|t| t.turn.weight).sum();
    let share = |pred: &dyn Fn(&Turn) -> bool| {
        if total > 0.0 {
            turns
                .iter()
                .filter(|t| pred(&t.turn))
                .map(|t| t.turn.weight)
                .sum::<f64>()
                / total
        } else {
            0.0
        }
    };
    GroupSummary {
        group: group.into(),
        turns: turns.len() as u64,
        weighted_turns: total,
        ttft_received_ms: quantiles(turns, |t| t.ms.first_chunk),
        ttft_painted_ms: quantiles(turns, |t| t.ms.first_paint),
        render_delay_ms: quantiles(turns, Turn::render_delay_ms),
        longest_gap_ms: quantiles(turns, |t| (t.chunks > 1).then_some(t.longest_gap_ms)),
        stalled_1s_fraction: share(&|t| t.stalls_1000 > 0),
        complete_fraction: share(&|t| t.outcome == Outcome::Complete),
        aborted_fraction: share(&|t| t.outcome == Outcome::Aborted),
        error_fraction: share(&|t| t.outcome == Outcome::Error),
        hidden: turns.iter().filter(|t| t.turn.hidden).count() as u64,
    }
}

/// Most routes and most browsers summarised on their own (the ones with the most
/// turns); the rest are in `all` only.
pub const MAX_GROUPS: usize = 50;

/// All turns, then each route, then each browser family (each sorted by name; at
/// most [`MAX_GROUPS`] of each, those with the most turns).
pub fn summarise_all(turns: &[StoredTurn]) -> Vec<GroupSummary> {
    groups(turns)
        .iter()
        .map(|(name, group)| summarise(name, group))
        .collect()
}

/// The groups a collector reports: `all`, then `route R` for each route, then
/// `browser B` for each browser family (each kind sorted by name; at most
/// [`MAX_GROUPS`] of each, those with the most turns).
pub fn groups(turns: &[StoredTurn]) -> Vec<(String, Vec<&StoredTurn>)> {
    use std::collections::BTreeMap;
    let mut out = vec![("all".to_owned(), turns.iter().collect())];
    let mut routes: BTreeMap<&str, Vec<&StoredTurn>> = BTreeMap::new();
    let mut browsers: BTreeMap<&str, Vec<&StoredTurn>> = BTreeMap::new();
    for t in turns {
        routes.entry(&t.turn.route).or_default().push(t);
        browsers.entry(&t.browser).or_default().push(t);
    }
    for (kind, by_name) in [("route", routes), ("browser", browsers)] {
        let mut largest: Vec<(&str, Vec<&StoredTurn>)> = by_name.into_iter().collect();
        largest.sort_by_key(|(_, g)| std::cmp::Reverse(g.len()));
        largest.truncate(MAX_GROUPS);
        largest.sort_by(|a, b| a.0.cmp(b.0));
        out.extend(
            largest
                .into_iter()
                .map(|(name, g)| (format!("{kind} {name}"), g)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_stats::rng::Rng;

    fn stored(first_chunk: f64, paint: f64, weight: f64) -> StoredTurn {
        let mut turn = crate::testing::rum_turn();
        turn.ms.first_chunk = Some(first_chunk);
        turn.ms.first_dom = Some(first_chunk);
        turn.ms.first_paint = Some(paint);
        turn.ms.last_chunk = Some(paint + 100.0);
        turn.ms.last_paint = Some(paint + 110.0);
        turn.weight = weight;
        StoredTurn {
            turn,
            browser: "Chrome 131".into(),
        }
    }

    /// 10,000 turns, a 10% sample of the ordinary ones at weight 10 and every slow
    /// one kept at weight 1: the sample's p50 and p95 estimate the whole's.
    #[test]
    fn a_tail_keeping_sample_estimates_the_whole() {
        let mut rng = Rng::new(7);
        let mut all = Vec::new();
        let mut sample = Vec::new();
        for _ in 0..10_000 {
            // Log-normal-ish TTFT: most near 500 ms, a tail past 2 s.
            let x = 500.0 * (0.6 * rng.normal()).exp();
            let t = stored(x, x + 16.0, 1.0);
            let slow = x + 16.0 >= 2000.0;
            if slow {
                sample.push(t.clone());
            } else if rng.next_f64() < 0.1 {
                sample.push(stored(x, x + 16.0, 10.0));
            }
            all.push(t);
        }
        let truth = summarise_all(&all)[0].ttft_painted_ms.unwrap();
        let est = summarise_all(&sample)[0].ttft_painted_ms.unwrap();
        // About 1,000 ordinary turns in the sample: the p50's standard error is
        // about 2.5%, the p95's (a tail kept in full) smaller.
        assert!(
            (est.p50 / truth.p50 - 1.0).abs() < 0.08,
            "{est:?} vs {truth:?}"
        );
        assert!(
            (est.p95 / truth.p95 - 1.0).abs() < 0.08,
            "{est:?} vs {truth:?}"
        );
        assert!((est.n / truth.n - 1.0).abs() < 0.1, "{est:?} vs {truth:?}");
    }

    #[test]
    fn groups_are_all_then_routes_then_browsers() {
        let mut a = stored(100.0, 120.0, 1.0);
        a.turn.route = "/b".into();
        let mut b = stored(200.0, 230.0, 1.0);
        b.browser = "Firefox 133".into();
        let s = summarise_all(&[a, b]);
        let names: Vec<&str> = s.iter().map(|g| g.group.as_str()).collect();
        assert_eq!(
            names,
            [
                "all",
                "route /b",
                "route /v1/chat/completions",
                "browser Chrome 131",
                "browser Firefox 133"
            ]
        );
        assert_eq!(s[0].render_delay_ms.unwrap().p99, 30.0);
    }
}
