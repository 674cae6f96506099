//! The engine loop: admission into a batch of at most `max_batch`, the queue
//! beyond it, prefill steps that stall the batch, decode steps that slow as the
//! batch grows, and the faults drawn per request (see the module docs of
//! [`crate`]).

use std::collections::VecDeque;

use super::{FaultKind, SimConfig};
use tokenscope_stats::rng::Rng;

/// A request as the engine sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRequest {
    /// Prompt length, tokens.
    pub prompt_tokens: u64,
    /// Of those, the ones found in the prefix cache (not prefilled).
    pub cached_tokens: u64,
    /// Tokens to generate.
    pub max_tokens: u32,
}

/// What happened to a submitted request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Queued for the engine under this id.
    Accepted {
        /// The request's id.
        id: u64,
    },
    /// Answered at once with a fault (HTTP error, HTML page, no headers).
    Fault {
        /// The request's id (for the log).
        id: u64,
        /// The fault.
        fault: FaultKind,
    },
    /// Prompt + output exceed the context: HTTP 400.
    ContextExceeded {
        /// The request's id (for the log).
        id: u64,
        /// Prompt + max tokens asked.
        requested: u64,
        /// The limit.
        limit: u64,
    },
}

/// What the driver must send for one request after a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emission {
    /// Request id.
    pub id: u64,
    /// Content tokens to send now (one chunk), possibly 0.
    pub tokens: u32,
    /// The request has generated all its tokens: send the finish, usage and `[DONE]`.
    pub finished: bool,
    /// A mid-stream fault to perform after the tokens.
    pub fault: Option<FaultKind>,
}

#[derive(Debug, Clone)]
struct Slot {
    id: u64,
    prompt_tokens: u64,
    /// Prompt tokens to prefill (not cached).
    prefill_tokens: u64,
    max_tokens: u32,
    generated: u32,
    pending: u32,
    fault: Option<(FaultKind, u32)>,
}

/// The engine: queue, batch and step timing.
#[derive(Debug, Clone)]
pub struct Engine {
    cfg: SimConfig,
    rng: Rng,
    next_id: u64,
    waiting: VecDeque<Slot>,
    running: Vec<Slot>,
    /// Requests admitted by the current step (they get their first token at its end).
    admitted: Vec<usize>,
    t_start_ms: Option<f64>,
}

impl Engine {
    /// A new, idle engine.
    pub fn new(cfg: SimConfig) -> Self {
        let rng = Rng::new(cfg.seed);
        Self {
            cfg,
            rng,
            next_id: 0,
            waiting: VecDeque::new(),
            running: Vec::new(),
            admitted: Vec::new(),
            t_start_ms: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Requests decoding now.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Requests waiting for a batch slot.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Tokens the running requests hold in the KV cache (prompt plus generated).
    pub fn kv_tokens(&self) -> u64 {
        self.running
            .iter()
            .map(|s| s.prompt_tokens + u64::from(s.generated))
            .sum()
    }

    /// Whether a step has work to do.
    pub fn has_work(&self) -> bool {
        !self.running.is_empty() || !self.waiting.is_empty()
    }

    /// A request arrived.
    pub fn submit(&mut self, req: SimRequest) -> Admission {
        let id = self.next_id;
        self.next_id += 1;
        let requested = req.prompt_tokens + u64::from(req.max_tokens);
        if requested > self.cfg.max_context_tokens {
            return Admission::ContextExceeded {
                id,
                requested,
                limit: self.cfg.max_context_tokens,
            };
        }
        let mut fault = None;
        if self.cfg.error_rate > 0.0 && self.rng.next_f64() < self.cfg.error_rate {
            let kind = self.cfg.faults[self.rng.below(self.cfg.faults.len() as u64) as usize];
            if kind.is_immediate() {
                return Admission::Fault { id, fault: kind };
            }
            let half = (req.max_tokens / 2).max(1);
            let after = 1 + self.rng.below(u64::from(half)) as u32;
            fault = Some((kind, after.min(req.max_tokens.max(1))));
        }
        self.waiting.push_back(Slot {
            id,
            prompt_tokens: req.prompt_tokens,
            prefill_tokens: req.prompt_tokens.saturating_sub(req.cached_tokens),
            max_tokens: req.max_tokens.max(1),
            generated: 0,
            pending: 0,
            fault,
        });
        Admission::Accepted { id }
    }

    /// The client went away: free the request's slot.
    pub fn cancel(&mut self, id: u64) {
        self.waiting.retain(|s| s.id != id);
        if let Some(pos) = self.running.iter().position(|s| s.id == id) {
            self.running.remove(pos);
            self.admitted.retain(|&i| i != pos);
            for i in &mut self.admitted {
                if *i > pos {
                    *i -= 1;
                }
            }
        }
    }

    /// Begin a step at `now_ms`: admit waiting requests, and return how long the step
    /// takes (ms), or `None` when there is nothing to do.
    pub fn start_step(&mut self, now_ms: f64) -> Option<f64> {
        let t0 = *self.t_start_ms.get_or_insert(now_ms);
        self.admitted.clear();
        let mut prefill_tokens = 0u64;
        while self.running.len() < self.cfg.max_batch as usize {
            let Some(slot) = self.waiting.pop_front() else {
                break;
            };
            prefill_tokens += slot.prefill_tokens;
            self.admitted.push(self.running.len());
            self.running.push(slot);
        }
        if self.running.is_empty() {
            return None;
        }
        let decoding = self.running.len() - self.admitted.len();
        let mut ms = 0.0;
        if decoding > 0 {
            let drift = self.cfg.itl_growth_ms_per_min * (now_ms - t0) / 60_000.0;
            ms += self.cfg.itl_ms * (1.0 + self.cfg.step_growth * (decoding as f64 - 1.0)) + drift;
        }
        if !self.admitted.is_empty() {
            ms += self.cfg.ttft_ms + prefill_tokens as f64 * 1000.0 / self.cfg.prefill_tok_per_s;
        }
        if self.cfg.jitter_ms > 0.0 {
            ms += (self.rng.next_f64() * 2.0 - 1.0) * self.cfg.jitter_ms;
        }
        Some(ms.max(0.05))
    }

    /// End the step: every running request got one token. Returns what to send.
    pub fn finish_step(&mut self) -> Vec<Emission> {
        let per_chunk = self.cfg.tokens_per_chunk;
        let mut out = Vec::with_capacity(self.running.len());
        let mut keep = Vec::with_capacity(self.running.len());
        for mut slot in self.running.drain(..) {
            slot.generated += 1;
            slot.pending += 1;
            let finished = slot.generated >= slot.max_tokens;
            let fault = slot
                .fault
                .filter(|(_, after)| slot.generated >= *after)
                .map(|(k, _)| k);
            if finished || fault.is_some() || slot.pending >= per_chunk {
                out.push(Emission {
                    id: slot.id,
                    tokens: slot.pending,
                    finished: finished && fault.is_none(),
                    fault,
                });
                slot.pending = 0;
            }
            // A stall holds the stream but the request keeps its slot and goes on.
            let gone = finished || fault.is_some_and(|f| f != FaultKind::Stall);
            if fault == Some(FaultKind::Stall) {
                slot.fault = None;
            }
            if !gone {
                keep.push(slot);
            }
        }
        self.running = keep;
        self.admitted.clear();
        out
    }
}
