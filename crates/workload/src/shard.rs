//! One of N equal parts of a run's plan (`bench --shard K/N`), so that N load
//! generators together apply the plan's load and their reports merge into the
//! report one client would have written (`tokenscope_core::report::merge`).
//!
//! How the plan is split (docs/scale.md says the same):
//! - a concurrency `c`: shard `k` runs `floor(c / N)` workers, plus one when
//!   `k < c mod N` (the remainder goes to the lowest indices);
//! - a rate `r`: `r / N` each, from the shard's own arrival stream (the sum of N
//!   independent Poisson streams of rate `r / N` is a Poisson stream of rate `r`;
//!   N copies of one stream would arrive in bursts of N);
//! - request counts (per level, warm-up) split as concurrencies are;
//! - prompts partitioned: shard `k` sends the prompts-file prompts whose index is
//!   `k mod N`, generated prompts numbered `local · N + k`, a trace's requests
//!   whose index is `k mod N` at their own times: no request twice.
//!
//! Every level must give each shard at least one worker (or request): a shard
//! with nothing to do at a level would have no level to merge.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Shard `index` (0-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 0-based, below `count` (Kubernetes' `JOB_COMPLETION_INDEX`).
    pub index: u32,
    /// How many shards the plan is split into.
    pub count: u32,
}

/// A `--shard` value that is not `K/N` with `0 <= K < N`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShardError {
    /// Not two numbers around a slash.
    #[error("{0:?} is not K/N (e.g. 0/4: the first of 4 shards, K from 0 to N-1)")]
    Syntax(String),
    /// `K >= N` or `N = 0`.
    #[error("shard {index}/{count}: K must be below N (K counts from 0)")]
    Range {
        /// K.
        index: u32,
        /// N.
        count: u32,
    },
    /// A level or count too small to give every shard a part.
    #[error("{what} {value} cannot be split over {count} shards: each needs at least 1")]
    TooSmall {
        /// What was split (`concurrency`, `requests per level`).
        what: &'static str,
        /// Its value.
        value: u64,
        /// N.
        count: u32,
    },
}

impl Shard {
    /// The whole plan: one shard of one.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Parse `K/N`.
    pub fn parse(s: &str) -> Result<Self, ShardError> {
        let syntax = || ShardError::Syntax(s.to_owned());
        let (k, n) = s.trim().split_once('/').ok_or_else(syntax)?;
        let index: u32 = k.trim().parse().map_err(|_| syntax())?;
        let count: u32 = n.trim().parse().map_err(|_| syntax())?;
        if count == 0 || index >= count {
            return Err(ShardError::Range { index, count });
        }
        Ok(Self { index, count })
    }

    /// `K/N`.
    pub fn label(&self) -> String {
        format!("{}/{}", self.index, self.count)
    }

    /// This shard's part of `n` (workers or requests): `floor(n / N)`, plus one
    /// for the first `n mod N` shards. The parts sum to `n`.
    pub fn part(&self, n: u64) -> u64 {
        let count = u64::from(self.count);
        n / count + u64::from(u64::from(self.index) < n % count)
    }

    /// [`Shard::part`], refusing an `n` that would leave any shard of the plan
    /// (not only this one) with nothing: every shard must have every level.
    pub fn part_of(&self, what: &'static str, n: u64) -> Result<u64, ShardError> {
        if n < u64::from(self.count) {
            return Err(ShardError::TooSmall {
                what,
                value: n,
                count: self.count,
            });
        }
        Ok(self.part(n))
    }

    /// This shard's rate: `r / N`.
    pub fn rate(&self, r: f64) -> f64 {
        r / f64::from(self.count)
    }

    /// The plan-wide number of this shard's `local`-th request.
    pub fn global_index(&self, local: u64) -> u64 {
        local * u64::from(self.count) + u64::from(self.index)
    }

    /// Whether item `i` of a partitioned list (a trace's requests) is this shard's.
    pub fn owns(&self, i: usize) -> bool {
        i % self.count as usize == self.index as usize
    }

    /// The prompts-file prompt of this shard's `local`-th request among `len`
    /// prompts: cycling through its own (indices `k mod N`). `None` when the file
    /// has fewer prompts than shards.
    pub fn prompt_index(&self, local: u64, len: usize) -> Option<usize> {
        let own = self.prompts_owned(len);
        (own > 0).then(|| self.index as usize + self.count as usize * (local % own as u64) as usize)
    }

    /// How many of `len` prompts are this shard's (every `count`-th from its
    /// index): the length of the cycle its requests send them in.
    pub fn prompts_owned(&self, len: usize) -> usize {
        let (k, n) = (self.index as usize, self.count as usize);
        len.saturating_sub(k).div_ceil(n)
    }

    /// The seed of this shard's random streams (arrivals): the run's seed for
    /// the whole plan, a distinct one per shard otherwise.
    pub fn stream_seed(&self, seed: u64) -> u64 {
        if self.count == 1 {
            seed
        } else {
            tokenscope_stats::rng::Rng::for_stream(seed, 0x5A4D_0000 + u64::from(self.index))
                .next_u64()
        }
    }
}

/// A shard's record of the plan it is part of (`config.shard` in its report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardInfo {
    /// 0-based shard index.
    pub index: u32,
    /// Shards in the plan.
    pub count: u32,
    /// The whole plan's levels (concurrencies or req/s); the report's
    /// `config.levels` are this shard's parts of them.
    pub plan_levels: Vec<f64>,
    /// The whole plan's measured requests per level, when a count was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_requests_per_level: Option<u64>,
    /// Wall-clock time of the shard's run clock's zero, ms since the Unix epoch:
    /// what aligns shards' times when their raw files merge.
    pub clock_origin_unix_ms: f64,
    /// The common start the shard waited for (RFC 3339), if one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
}

impl ShardInfo {
    /// The shard.
    pub fn shard(&self) -> Shard {
        Shard {
            index: self.index,
            count: self.count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_refuse() {
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(Shard::parse(" 0 / 1 "), Ok(Shard::WHOLE));
        assert!(matches!(Shard::parse("4/4"), Err(ShardError::Range { .. })));
        assert!(matches!(Shard::parse("0/0"), Err(ShardError::Range { .. })));
        for bad in ["", "3", "a/4", "1/-4", "1/4/5"] {
            assert!(
                matches!(Shard::parse(bad), Err(ShardError::Syntax(_))),
                "{bad}"
            );
        }
        assert!(
            Shard::parse("4/4")
                .unwrap_err()
                .to_string()
                .contains("from 0")
        );
    }

    #[test]
    fn parts_sum_to_the_whole_with_the_remainder_first() {
        for n in [0u64, 1, 5, 16, 17, 1001] {
            for count in 1..=7u32 {
                let parts: Vec<u64> = (0..count)
                    .map(|index| Shard { index, count }.part(n))
                    .collect();
                assert_eq!(parts.iter().sum::<u64>(), n, "{n} over {count}");
                assert!(parts.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 1));
            }
        }
        let s = Shard { index: 3, count: 4 };
        assert_eq!(s.part(18), 4);
        assert_eq!(Shard { index: 1, count: 4 }.part(18), 5);
        assert!(matches!(
            s.part_of("concurrency", 3),
            Err(ShardError::TooSmall {
                value: 3,
                count: 4,
                ..
            })
        ));
    }

    #[test]
    fn no_request_twice() {
        let count = 4;
        let mut seen = std::collections::BTreeSet::new();
        for index in 0..count {
            let s = Shard { index, count };
            for local in 0..50 {
                assert!(seen.insert(s.global_index(local)));
            }
        }
        assert_eq!(seen.len(), 200);
        assert_eq!(*seen.last().unwrap(), 199);
        // Prompts: each shard cycles through its own, together all of them.
        let len = 10;
        let mut used = vec![Vec::new(); count as usize];
        for index in 0..count {
            let s = Shard { index, count };
            for local in 0..12 {
                let p = s.prompt_index(local, len).unwrap();
                assert_eq!(p % 4, index as usize);
                used[index as usize].push(p);
            }
        }
        assert_eq!(&used[0][..4], &[0, 4, 8, 0]);
        assert_eq!(&used[3][..3], &[3, 7, 3]);
        let mut all: Vec<usize> = used.concat();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(Shard { index: 3, count: 4 }.prompt_index(0, 3), None);
        assert_eq!(Shard::WHOLE.prompt_index(7, 5), Some(2));
        assert!(
            (0..9)
                .filter(|&i| Shard { index: 1, count: 4 }.owns(i))
                .eq([1, 5])
        );
    }

    #[test]
    fn the_whole_plan_keeps_its_seed_and_shards_get_their_own() {
        assert_eq!(Shard::WHOLE.stream_seed(42), 42);
        let seeds: std::collections::BTreeSet<u64> = (0..8)
            .map(|index| Shard { index, count: 8 }.stream_seed(42))
            .collect();
        assert_eq!(seeds.len(), 8);
        assert!(!seeds.contains(&42));
        assert_eq!(
            Shard { index: 2, count: 8 }.stream_seed(42),
            Shard { index: 2, count: 8 }.stream_seed(42)
        );
    }
}
