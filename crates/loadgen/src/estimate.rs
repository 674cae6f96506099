//! How long a run will take: the plan's work per level ([`LevelWork`]) and the
//! time one request takes, first as the pre-flight's request took it, then as
//! the levels measured so far took it. An estimate, said as one: a server that
//! slows under load makes the later levels longer than the first ones predict.

use tokenscope_core::report::Load;
use tokenscope_workload::conversation::Conversation;
use tokenscope_workload::plan;

use super::config::BenchConfig;
use super::load::{Quota, quota_for};

/// One request's time as measured (the pre-flight's tiny request).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestTime {
    /// Time to the first token, ms.
    pub ttft_ms: f64,
    /// Time per token after the first, ms (0 when one token came).
    pub per_token_ms: f64,
}

impl RequestTime {
    /// A request of `max_tokens` tokens at this speed, ms.
    pub fn e2e_ms(&self, max_tokens: u32) -> f64 {
        self.ttft_ms + self.per_token_ms * f64::from(max_tokens.saturating_sub(1))
    }
}

/// One level's work as planned: its time is `fixed_ms + waves x` the time of
/// one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelWork {
    /// The level's load.
    pub load: Load,
    /// Warm-up requests (0 with a ramp).
    pub warmup: u64,
    /// Measured requests over its rounds (0 when the rounds are timed).
    pub requests: u64,
    /// Time that does not depend on the requests' speed: a ramp, timed
    /// rounds, an open loop's schedule, think times, ms.
    pub fixed_ms: f64,
    /// Request times end to end, one after another, that the level lasts.
    pub waves: f64,
}

impl LevelWork {
    /// The level's time when one request takes `e2e_ms`.
    pub fn ms(&self, e2e_ms: f64) -> f64 {
        self.fixed_ms + self.waves * e2e_ms
    }

    /// The request time that explains a level that took `actual_ms` (none
    /// when its time does not depend on it).
    pub fn e2e_from(&self, actual_ms: f64) -> Option<f64> {
        (self.waves >= 1.0).then(|| ((actual_ms - self.fixed_ms) / self.waves).max(0.0))
    }
}

/// Every level's work in `cfg`'s plan, in order: the same counts the run sends
/// ([`quota_for`], [`plan::default_warmup`]).
pub fn plan_work(cfg: &BenchConfig) -> Vec<LevelWork> {
    cfg.load
        .loads()
        .iter()
        .enumerate()
        .map(|(li, &load)| level_work(cfg, li, load))
        .collect()
}

fn level_work(cfg: &BenchConfig, li: usize, load: Load) -> LevelWork {
    let mut w = LevelWork {
        load,
        warmup: 0,
        requests: 0,
        fixed_ms: 0.0,
        waves: 0.0,
    };
    match cfg.ramp {
        Some(r) => w.fixed_ms += r.as_secs_f64() * 1000.0,
        None => {
            let n = u64::from(cfg.warmup.unwrap_or(plan::default_warmup(load)));
            let c = u64::from(plan::warmup_concurrency(load).max(1));
            w.warmup = n;
            w.waves += n.div_ceil(c) as f64;
        }
    }
    for round in 0..cfg.rounds {
        let quota = quota_for(cfg, load, cfg.plan_load(li, load), round);
        match (load, quota) {
            (_, Quota::For(ms)) => {
                w.fixed_ms += ms;
                w.waves += 1.0;
            }
            (Load::Concurrency(c), Quota::Count(n)) => {
                w.requests += n;
                round_waves(&mut w, c, n, cfg.conversation);
            }
            (Load::Rate(r), Quota::Count(n)) => {
                w.requests += n;
                w.fixed_ms += n as f64 / r.max(f64::MIN_POSITIVE) * 1000.0;
                w.waves += 1.0;
            }
        }
    }
    w
}

/// A closed-loop round of `n` requests at `c`: `n / c` requests one after
/// another (a conversation's sessions: their turns and think times).
fn round_waves(w: &mut LevelWork, c: u32, n: u64, conv: Option<Conversation>) {
    let c = u64::from(c.max(1));
    match conv {
        Some(conv) => {
            let rounds_of_sessions = conv.sessions_for(n).div_ceil(c) as f64;
            let turns = f64::from(conv.turns.max(1));
            w.waves += rounds_of_sessions * turns;
            w.fixed_ms += rounds_of_sessions * (turns - 1.0) * conv.think_ms;
        }
        None => w.waves += n.div_ceil(c) as f64,
    }
}

/// One request's time at load `x` (a concurrency or a rate), from the levels
/// measured so far (`(load, request time)`, in the order run): the line
/// through the last two, never below the last (a server slows as load
/// grows, rarely the other way); the last alone when there is one.
pub fn e2e_at(measured: &[(f64, f64)], x: f64) -> Option<f64> {
    let &(x1, y1) = measured.last()?;
    let Some(&(x0, y0)) = measured.len().checked_sub(2).map(|i| &measured[i]) else {
        return Some(y1);
    };
    if x <= x1 || x1 <= x0 {
        return Some(y1);
    }
    Some((y1 + (y1 - y0) / (x1 - x0) * (x - x1)).max(y1))
}

/// A duration for people: `0.4 s`, `45 s`, `2 min 50 s`, `1 h 5 min`.
pub fn fmt_duration(ms: f64) -> String {
    if ms < 9_950.0 {
        return format!("{:.1} s", ms.max(0.0) / 1000.0);
    }
    let s = (ms / 1000.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 if s.is_multiple_of(60) => format!("{} min", s / 60),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_loop_level_is_its_warm_up_and_its_rounds_in_waves() {
        let mut w = LevelWork {
            load: Load::Concurrency(4),
            warmup: 4,
            requests: 0,
            fixed_ms: 0.0,
            waves: 1.0,
        };
        // Three rounds of 10 at 4 in flight: 3 waves each.
        for _ in 0..3 {
            round_waves(&mut w, 4, 10, None);
        }
        assert_eq!(w.waves, 10.0);
        assert_eq!(w.ms(100.0), 1000.0);
        assert_eq!(w.e2e_from(2000.0), Some(200.0));
    }

    #[test]
    fn a_conversation_waits_its_think_times() {
        let conv = Conversation::parse("turns=3,think=1s").unwrap();
        let mut w = LevelWork {
            load: Load::Concurrency(2),
            warmup: 0,
            requests: 0,
            fixed_ms: 0.0,
            waves: 0.0,
        };
        // 12 requests: 4 sessions, 2 at a time: 2 rounds of 3 turns.
        round_waves(&mut w, 2, 12, Some(conv));
        assert_eq!(w.waves, 6.0);
        assert_eq!(w.fixed_ms, 2.0 * 2.0 * 1000.0);
    }

    #[test]
    fn the_request_time_grows_with_load_as_the_last_two_levels_did() {
        assert_eq!(e2e_at(&[], 8.0), None);
        assert_eq!(e2e_at(&[(1.0, 2000.0)], 8.0), Some(2000.0));
        // 2.7 s at c=8, 3.4 s at c=16: 4.8 s at c=32.
        let m = [(1.0, 2000.0), (8.0, 2700.0), (16.0, 3400.0)];
        assert!((e2e_at(&m, 32.0).unwrap() - 4800.0).abs() < 1e-9);
        // Never below the last level's, nor extrapolated backwards.
        assert_eq!(e2e_at(&[(4.0, 3000.0), (8.0, 2000.0)], 16.0), Some(2000.0));
        assert_eq!(e2e_at(&m, 8.0), Some(3400.0));
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(fmt_duration(400.0), "0.4 s");
        assert_eq!(fmt_duration(9_949.0), "9.9 s");
        assert_eq!(fmt_duration(9_950.0), "10 s");
        assert_eq!(fmt_duration(45_200.0), "45 s");
        assert_eq!(fmt_duration(170_000.0), "2 min 50 s");
        assert_eq!(fmt_duration(120_000.0), "2 min");
        assert_eq!(fmt_duration(3_900_000.0), "1 h 5 min");
    }

    #[test]
    fn a_request_is_its_first_token_and_the_rest() {
        let t = RequestTime {
            ttft_ms: 30.0,
            per_token_ms: 10.0,
        };
        assert_eq!(t.e2e_ms(128), 30.0 + 127.0 * 10.0);
        assert_eq!(t.e2e_ms(0), 30.0);
    }
}
