//! A level's conversations turn by turn, and what the server's prefix cache
//! served as it said (`--conversation`, `docs/metrics.md#conversations-and-the-prefix-cache`).
//! Part of a level's analysis ([`super::level`]).

use std::collections::BTreeMap;

use crate::model::{PromptCache, TurnReport};
use tokenscope_measure::metrics::RequestMetrics;
use tokenscope_measure::record::RequestRecord;
use tokenscope_stats::stats::Samples;

/// One turn's requests within a level.
#[derive(Debug, Clone)]
struct TurnAcc {
    sent: u64,
    ok: u64,
    ttft: Samples,
    tpot: Samples,
    prompt_tokens: Samples,
    cache: Option<PromptCache>,
}

/// Collects a level's turns and prefix-cache counts.
#[derive(Debug, Clone, Default)]
pub struct TurnsAcc {
    cache: Option<PromptCache>,
    turns: BTreeMap<u32, TurnAcc>,
}

impl TurnsAcc {
    /// Add one request (any outcome), with its metrics; `cap`: exact samples kept.
    pub fn push(&mut self, r: &RequestRecord, m: &RequestMetrics, cap: usize) {
        let prompt = r.usage.and_then(|u| u.prompt_tokens);
        let cached = prompt.zip(r.cached_prompt_tokens());
        if let Some((p, c)) = cached {
            self.cache.get_or_insert_default().add(p, c);
        }
        let Some(turn) = r.turn else {
            return;
        };
        let t = self.turns.entry(turn).or_insert_with(|| TurnAcc {
            sent: 0,
            ok: 0,
            ttft: Samples::with_cap(cap),
            tpot: Samples::with_cap(cap),
            prompt_tokens: Samples::with_cap(cap),
            cache: None,
        });
        t.sent += 1;
        if let Some(p) = prompt {
            t.prompt_tokens.push(p as f64);
        }
        if let Some((p, c)) = cached {
            t.cache.get_or_insert_default().add(p, c);
        }
        if r.outcome.is_ok() {
            t.ok += 1;
            if let Some(v) = m.ttft_ms {
                t.ttft.push(v);
            }
            if let Some(v) = m.tpot_ms {
                t.tpot.push(v);
            }
        }
    }

    /// The level's prefix-cache counts and its turns, first turn first.
    pub fn finish(self) -> (Option<PromptCache>, Vec<TurnReport>) {
        let turns = self
            .turns
            .into_iter()
            .map(|(turn, t)| TurnReport {
                turn,
                sent: t.sent,
                ok: t.ok,
                ttft_ms: t.ttft.summary(),
                tpot_ms: t.tpot.summary(),
                prompt_tokens: (!t.prompt_tokens.is_empty()).then(|| t.prompt_tokens.summary()),
                prompt_cache: t.cache,
            })
            .collect();
        (self.cache, turns)
    }
}
