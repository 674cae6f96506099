//! The run plan both clients follow (native CLI and page): how many requests each
//! round of a level sends, and how many warm-up requests come first.

use crate::load::{Arrival, Load};
use tokenscope_stats::rng::Rng;

/// Round `round`'s share of `n` requests over `rounds` rounds (the first rounds
/// take the remainder), so a level sends exactly `n`.
pub fn split(n: u64, rounds: u32, round: u32) -> u64 {
    let rounds = u64::from(rounds.max(1));
    n / rounds + u64::from(u64::from(round) < n % rounds)
}

/// Requests in one round when the user gave no count: `max(10, 2 x concurrency)`,
/// or in rate mode ten seconds' worth (at least 10).
pub fn default_round_requests(load: Load) -> u64 {
    match load {
        Load::Concurrency(c) => u64::from(c).saturating_mul(2).max(10),
        Load::Rate(r) => (r * 10.0).ceil().max(10.0) as u64,
    }
}

/// The requests a level measures when `requests` per level were asked: a
/// closed-loop level needs at least `concurrency x rounds` (a conversation
/// level `x turns` more), so that each round has every worker busy; fewer would
/// never put its concurrency in flight and the level would measure a lower load.
/// An open-loop level sends what was asked.
pub fn level_requests(requests: u64, rounds: u32, load: Load, turns: u32) -> u64 {
    match load {
        Load::Concurrency(c) => requests.max(
            u64::from(c)
                .saturating_mul(u64::from(rounds.max(1)))
                .saturating_mul(u64::from(turns.max(1))),
        ),
        Load::Rate(_) => requests,
    }
}

/// Requests in one round when the user gave no count but SLOs are checked:
/// the default, or enough for `need` requests over the level's `rounds` (the
/// fewest its SLOs' percentiles need: `Slo::min_requests`).
pub fn default_round_requests_for(load: Load, rounds: u32, need: u64) -> u64 {
    default_round_requests(load).max(need.div_ceil(u64::from(rounds.max(1))))
}

/// Requests in round `round` of a level: `requests_per_level` split over the rounds,
/// or the default.
pub fn round_requests(requests_per_level: Option<u64>, rounds: u32, round: u32, load: Load) -> u64 {
    match requests_per_level {
        Some(n) => split(level_requests(n, rounds, load, 1), rounds, round),
        None => default_round_requests(load),
    }
}

/// Warm-up requests before a level when the user gave none: one per concurrency
/// slot (so the batch fills once), or about one second's worth in rate mode.
pub fn default_warmup(load: Load) -> u32 {
    match load {
        Load::Concurrency(c) => c,
        Load::Rate(r) => r.ceil().max(1.0) as u32,
    }
}

/// How many requests the warm-up keeps in flight.
pub fn warmup_concurrency(load: Load) -> u32 {
    match load {
        Load::Concurrency(c) => c,
        Load::Rate(r) => r.ceil().max(1.0) as u32,
    }
}

/// The arrivals of round `round` of an open-loop level: the random stream both
/// clients draw the gaps from (so a seed gives the same schedule in each).
pub fn arrival_stream(seed: u64, round: u32) -> Rng {
    Rng::for_stream(seed, 0xA11 + u64::from(round))
}

/// The gap to the next send at `rate` req/s: exponential (Poisson arrivals),
/// gamma with coefficient of variation `cv`, or constant.
pub fn arrival_gap_ms(rng: &mut Rng, rate: f64, arrival: Arrival, cv: Option<f64>) -> f64 {
    let mean_gap_ms = 1000.0 / rate;
    match arrival {
        Arrival::Poisson => rng.exponential(mean_gap_ms),
        Arrival::Gamma => rng.gamma_gap(mean_gap_ms, cv.unwrap_or(1.0)),
        Arrival::Constant | Arrival::Trace => mean_gap_ms,
    }
}

/// A ramp at `rate` req/s over `ramp_ms` (`--ramp`, the page's `ramp`): the
/// rate rises linearly from 0, so `N(t) = rate · t² / (2 · ramp)` requests have
/// gone by `t`; the `k`-th (from 1) is due `sqrt(2 · ramp · k / rate)` ms after
/// the ramp's start. Due at or after `ramp_ms`: the ramp is over.
pub fn ramp_send_ms(k: u64, rate: f64, ramp_ms: f64) -> f64 {
    (2.0 * ramp_ms * k as f64 * 1000.0 / rate).sqrt()
}

/// A ramp to concurrency `c` over `ramp_ms`: worker `i` (from 0) joins `ramp · i
/// / c` ms after the ramp's start and sends closed loop until it ends.
pub fn ramp_join_ms(i: u32, c: u32, ramp_ms: f64) -> f64 {
    ramp_ms * f64::from(i) / f64::from(c.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ramp's sends: the rate at the ramp's end is the level's (the gap
    /// between the last two sends is about 1/rate), and about rate · T / 2
    /// requests go in a ramp of T.
    #[test]
    fn ramps_rise_linearly_to_the_level() {
        let (rate, ramp_ms) = (10.0, 4000.0);
        let sends: Vec<f64> = (1..)
            .map(|k| ramp_send_ms(k, rate, ramp_ms))
            .take_while(|&t| t < ramp_ms)
            .collect();
        assert_eq!(
            sends.len(),
            19,
            "rate · T / 2 = 20, the 20th due at the end"
        );
        let last_gap = sends[18] - sends[17];
        assert!((last_gap - 100.0).abs() < 5.0, "{last_gap}");
        assert_eq!(
            (0..4)
                .map(|i| ramp_join_ms(i, 4, 1000.0))
                .collect::<Vec<_>>(),
            [0.0, 250.0, 500.0, 750.0]
        );
    }

    #[test]
    fn splits_add_up() {
        assert_eq!(
            (0..3).map(|r| split(20, 3, r)).collect::<Vec<_>>(),
            [7, 7, 6]
        );
        assert_eq!((0..3).map(|r| split(2, 3, r)).sum::<u64>(), 2);
        assert_eq!(round_requests(None, 3, 0, Load::Concurrency(32)), 64);
        assert_eq!(round_requests(None, 3, 0, Load::Concurrency(1)), 10);
        assert_eq!(round_requests(None, 3, 0, Load::Rate(2.5)), 25);
        assert_eq!(default_warmup(Load::Rate(0.5)), 1);
    }

    #[test]
    fn a_closed_loop_level_gets_every_worker_busy_each_round() {
        // 24 over 3 rounds at c=16: 8 a round would never have 16 in flight.
        assert_eq!(level_requests(24, 3, Load::Concurrency(16), 1), 48);
        assert_eq!(level_requests(24, 3, Load::Concurrency(8), 1), 24);
        assert_eq!(level_requests(24, 3, Load::Concurrency(4), 2), 24);
        assert_eq!(level_requests(24, 3, Load::Concurrency(8), 2), 48);
        assert_eq!(level_requests(5, 3, Load::Rate(100.0), 1), 5);
        assert_eq!(
            (0..3)
                .map(|r| round_requests(Some(24), 3, r, Load::Concurrency(16)))
                .collect::<Vec<_>>(),
            [16, 16, 16]
        );
        // An SLO's p95 needs 100 requests: 34 a round over 3 rounds.
        assert_eq!(default_round_requests_for(Load::Concurrency(1), 3, 100), 34);
        assert_eq!(
            default_round_requests_for(Load::Concurrency(64), 3, 100),
            128
        );
    }
}
