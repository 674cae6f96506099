//! The simulated inference server's model: what `tokenscope mock` serves over HTTP
//! and what the page's built-in demo endpoint runs in the browser. It is a pure,
//! seeded state machine; a driver supplies the clock and the timers.
//!
//! ## The model
//!
//! One engine loop runs **steps**, like a continuous-batching server (vLLM,
//! llama.cpp's server, TGI):
//!
//! * At the start of a step, waiting requests are admitted while the batch has room
//!   (`max_batch`); the rest queue.
//! * A step that admits requests pays their **prefill**: `ttft_ms` (a fixed
//!   per-step overhead) plus `sum(prompt_tokens) / prefill_tok_per_s`. Requests
//!   already decoding wait for it too (prefill interference, as on real servers).
//! * Every step decodes one token for every running request; the decode time grows
//!   with the batch: `itl_ms * (1 + step_growth * (batch - 1))`, plus uniform jitter
//!   in `[-jitter_ms, +jitter_ms]`, plus an optional slow drift
//!   (`itl_growth_ms_per_min`, for soak tests).
//! * A newly admitted request's first token comes at the end of its admission step;
//!   so at concurrency 1, TTFT = `ttft_ms + prompt_tokens / prefill_tok_per_s`, and
//!   ITL = `itl_ms`.
//! * Tokens are sent `tokens_per_chunk` at a time. Every request generates exactly
//!   `max_tokens` tokens (as with `ignore_eos`).
//! * With probability `error_rate` a request gets a fault drawn from `faults`.
//!
//! The driver calls [`Engine::submit`] when a request arrives, then loops:
//! [`Engine::start_step`] (returns the step's duration) -> wait -> [`Engine::finish_step`]
//! (returns what to send to whom). [`StreamWriter`] formats the SSE bytes.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::openai::{Api, encode};
use crate::rng::Rng;

/// A fault the simulator can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// HTTP 429 with `Retry-After`, at once.
    #[serde(rename = "http_429")]
    Http429,
    /// HTTP 503 with `Retry-After`, at once.
    #[serde(rename = "http_503")]
    Http503,
    /// An error object in the stream after some tokens.
    ErrorEvent,
    /// The connection is cut after some tokens.
    Reset,
    /// A chunk of broken JSON after some tokens, then the end.
    Malformed,
    /// The stream stops for `stall_ms` after some tokens, then goes on.
    Stall,
    /// A `200 text/html` error page instead of a stream.
    Html,
    /// The body ends after some tokens without `finish_reason` or `[DONE]`.
    NoDone,
    /// The response headers never come.
    NoHeaders,
}

impl FaultKind {
    /// Every fault.
    pub const ALL: [FaultKind; 9] = [
        FaultKind::Http429,
        FaultKind::Http503,
        FaultKind::ErrorEvent,
        FaultKind::Reset,
        FaultKind::Malformed,
        FaultKind::Stall,
        FaultKind::Html,
        FaultKind::NoDone,
        FaultKind::NoHeaders,
    ];

    /// The fault's name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Http429 => "http_429",
            FaultKind::Http503 => "http_503",
            FaultKind::ErrorEvent => "error_event",
            FaultKind::Reset => "reset",
            FaultKind::Malformed => "malformed",
            FaultKind::Stall => "stall",
            FaultKind::Html => "html",
            FaultKind::NoDone => "no_done",
            FaultKind::NoHeaders => "no_headers",
        }
    }

    /// Parse a name written by [`FaultKind::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        FaultKind::ALL.into_iter().find(|f| f.as_str() == s.trim())
    }

    /// Whether the fault happens before any token (instead of mid-stream).
    pub fn is_immediate(self) -> bool {
        matches!(
            self,
            FaultKind::Http429 | FaultKind::Http503 | FaultKind::Html | FaultKind::NoHeaders
        )
    }
}

/// The simulator's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimConfig {
    /// Model name served.
    pub model: String,
    /// Fixed prefill overhead per step that admits requests, ms.
    pub ttft_ms: f64,
    /// Decode step time at batch 1, ms.
    pub itl_ms: f64,
    /// Prefill speed, prompt tokens per second.
    pub prefill_tok_per_s: f64,
    /// Most requests decoding at once; more wait in a queue.
    pub max_batch: u32,
    /// Step-time growth per extra sequence in the batch (0.03 = +3% each).
    pub step_growth: f64,
    /// Uniform step-time jitter, +/- ms.
    pub jitter_ms: f64,
    /// Tokens per streamed chunk.
    pub tokens_per_chunk: u32,
    /// Probability that a request gets a fault.
    pub error_rate: f64,
    /// The faults drawn from (uniformly) when a request gets one.
    pub faults: Vec<FaultKind>,
    /// How long a `stall` fault holds the stream, ms.
    pub stall_ms: f64,
    /// `Retry-After` seconds sent with 429/503.
    pub retry_after_s: u32,
    /// Slow drift of the step time, ms per minute of engine uptime (soak tests).
    pub itl_growth_ms_per_min: f64,
    /// Longest prompt + output accepted, tokens (HTTP 400 beyond, like llama.cpp).
    pub max_context_tokens: u64,
    /// `max_tokens` when a request gives none.
    pub default_max_tokens: u32,
    /// Seed.
    pub seed: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            model: "tokenscope-sim".into(),
            ttft_ms: 40.0,
            itl_ms: 15.0,
            prefill_tok_per_s: 8000.0,
            max_batch: 16,
            step_growth: 0.03,
            jitter_ms: 1.0,
            tokens_per_chunk: 1,
            error_rate: 0.0,
            faults: vec![FaultKind::Http503],
            stall_ms: 120_000.0,
            retry_after_s: 1,
            itl_growth_ms_per_min: 0.0,
            max_context_tokens: 32_768,
            default_max_tokens: 128,
            seed: 1,
        }
    }
}

/// A configuration the simulator cannot run.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SimConfigError {
    /// A parameter out of range.
    #[error("{name} = {value} is out of range: {expected}")]
    OutOfRange {
        /// The flag's name.
        name: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        expected: &'static str,
    },
}

impl SimConfig {
    /// Check every parameter.
    pub fn validate(&self) -> Result<(), SimConfigError> {
        let positive = |name, v: f64| {
            if v > 0.0 && v.is_finite() {
                Ok(())
            } else {
                Err(SimConfigError::OutOfRange {
                    name,
                    value: v.to_string(),
                    expected: "a positive number",
                })
            }
        };
        let non_negative = |name, v: f64| {
            if v >= 0.0 && v.is_finite() {
                Ok(())
            } else {
                Err(SimConfigError::OutOfRange {
                    name,
                    value: v.to_string(),
                    expected: "zero or more",
                })
            }
        };
        non_negative("ttft-ms", self.ttft_ms)?;
        positive("itl-ms", self.itl_ms)?;
        positive("prefill-tok-per-s", self.prefill_tok_per_s)?;
        non_negative("step-growth", self.step_growth)?;
        non_negative("jitter-ms", self.jitter_ms)?;
        non_negative("stall-ms", self.stall_ms)?;
        non_negative("itl-growth-ms-per-min", self.itl_growth_ms_per_min)?;
        if self.max_batch == 0 {
            return Err(SimConfigError::OutOfRange {
                name: "max-batch",
                value: "0".into(),
                expected: "at least 1",
            });
        }
        if self.tokens_per_chunk == 0 {
            return Err(SimConfigError::OutOfRange {
                name: "tokens-per-chunk",
                value: "0".into(),
                expected: "at least 1",
            });
        }
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(SimConfigError::OutOfRange {
                name: "error-rate",
                value: self.error_rate.to_string(),
                expected: "a probability between 0 and 1",
            });
        }
        if self.error_rate > 0.0 && self.faults.is_empty() {
            return Err(SimConfigError::OutOfRange {
                name: "faults",
                value: "(none)".into(),
                expected: "at least one fault kind when error-rate > 0",
            });
        }
        Ok(())
    }
}

/// A request as the engine sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRequest {
    /// Prompt length, tokens.
    pub prompt_tokens: u64,
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
            prefill_tokens += slot.prompt_tokens;
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

/// Formats one request's stream: the same bytes `tokenscope mock` and the page's
/// simulator send.
#[derive(Debug, Clone)]
pub struct StreamWriter {
    api: Api,
    id: u64,
    model: String,
    include_usage: bool,
    prompt_tokens: u64,
    sent_tokens: u64,
    rng: Rng,
}

/// What the driver does for a mid-stream fault.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultAction {
    /// Send these bytes, then end the body cleanly.
    SendThenEnd(String),
    /// Abort the connection (no clean end of body).
    Reset,
    /// Pause the stream this long, then go on.
    Stall {
        /// Pause, ms.
        ms: f64,
    },
}

const WORDS: &[&str] = &[
    "the",
    "model",
    "streams",
    "tokens",
    "to",
    "a",
    "user",
    "who",
    "waits",
    "for",
    "each",
    "word",
    "on",
    "screen",
    "while",
    "server",
    "batches",
    "requests",
    "and",
    "GPU",
    "reads",
    "weights",
    "from",
    "memory",
    "every",
    "step",
    "of",
    "decode",
    "so",
    "latency",
    "depends",
    "bandwidth",
    "queue",
    "length",
    "prompt",
    "size",
];

impl StreamWriter {
    /// A writer for request `id`.
    pub fn new(
        api: Api,
        id: u64,
        model: &str,
        include_usage: bool,
        prompt_tokens: u64,
        seed: u64,
    ) -> Self {
        Self {
            api,
            id,
            model: model.to_owned(),
            include_usage,
            prompt_tokens,
            sent_tokens: 0,
            rng: Rng::for_stream(seed ^ 0x5eed, id),
        }
    }

    /// Bytes sent right after the headers (the role-only chunk for chat).
    pub fn start(&mut self) -> String {
        match self.api {
            Api::Chat => encode::role_event(self.id, &self.model, 0),
            Api::Completions => String::new(),
        }
    }

    /// One chunk carrying `n` tokens (one word each).
    pub fn tokens(&mut self, n: u32) -> String {
        if n == 0 {
            return String::new();
        }
        let mut text = String::new();
        for _ in 0..n {
            if self.sent_tokens > 0 {
                text.push(' ');
            }
            text.push_str(WORDS[self.rng.below(WORDS.len() as u64) as usize]);
            self.sent_tokens += 1;
        }
        encode::content_event(self.api, self.id, &self.model, &text, 0)
    }

    /// The end of a complete stream: `finish_reason`, usage (when asked) and `[DONE]`.
    pub fn finish(&mut self) -> String {
        let mut out = encode::finish_event(self.api, self.id, &self.model, "length", 0);
        if self.include_usage {
            out.push_str(&encode::usage_event(
                self.api,
                self.id,
                &self.model,
                self.prompt_tokens,
                self.sent_tokens,
                0,
            ));
        }
        out.push_str(encode::DONE_EVENT);
        out
    }

    /// Tokens sent so far.
    pub fn sent_tokens(&self) -> u64 {
        self.sent_tokens
    }

    /// What to do for a mid-stream fault.
    pub fn fault(&mut self, fault: FaultKind, stall_ms: f64) -> FaultAction {
        match fault {
            FaultKind::ErrorEvent => FaultAction::SendThenEnd(format!(
                "{}{}",
                encode::error_event(
                    "simulated failure: the backend is overloaded",
                    "server_error"
                ),
                encode::DONE_EVENT
            )),
            FaultKind::Malformed => FaultAction::SendThenEnd(
                "data: {\"choices\": [ {\"delta\": {\"content\": \"broken\n\n".to_owned(),
            ),
            FaultKind::NoDone => FaultAction::SendThenEnd(String::new()),
            FaultKind::Stall => FaultAction::Stall { ms: stall_ms },
            // Immediate faults never reach the stream; treat them as a reset if they do.
            FaultKind::Reset
            | FaultKind::Http429
            | FaultKind::Http503
            | FaultKind::Html
            | FaultKind::NoHeaders => FaultAction::Reset,
        }
    }
}

/// The response for a fault that happens before any token: status, content type,
/// extra headers and body. `None` for [`FaultKind::NoHeaders`] (never answer).
pub fn immediate_response(fault: FaultKind, retry_after_s: u32) -> Option<ImmediateResponse> {
    match fault {
        FaultKind::Http429 => Some(ImmediateResponse {
            status: 429,
            content_type: "application/json",
            retry_after_s: Some(retry_after_s),
            body: encode::error_body("simulated: too many requests", "rate_limit_exceeded", 429),
        }),
        FaultKind::Http503 => Some(ImmediateResponse {
            status: 503,
            content_type: "application/json",
            retry_after_s: Some(retry_after_s),
            body: encode::error_body("simulated: the server is overloaded", "overloaded", 503),
        }),
        FaultKind::Html => Some(ImmediateResponse {
            status: 200,
            content_type: "text/html; charset=utf-8",
            retry_after_s: None,
            body: "<!doctype html><html><head><title>Gateway error</title></head><body><h1>502 Bad Gateway</h1><p>simulated proxy error page</p></body></html>".into(),
        }),
        _ => None,
    }
}

/// An HTTP answer sent instead of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImmediateResponse {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// `Retry-After`, seconds.
    pub retry_after_s: Option<u32>,
    /// Body.
    pub body: String,
}

/// The HTTP 400 answer for a prompt that does not fit (llama.cpp's wording).
pub fn context_exceeded_body(requested: u64, limit: u64) -> String {
    format!(
        "{{\"error\":{{\"code\":400,\"message\":\"request ({requested} tokens) exceeds the available context size ({limit} tokens)\",\"type\":\"exceed_context_size_error\"}}}}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse;

    fn cfg() -> SimConfig {
        SimConfig {
            jitter_ms: 0.0,
            ..SimConfig::default()
        }
    }

    fn accept(e: &mut Engine, prompt: u64, max: u32) -> u64 {
        match e.submit(SimRequest {
            prompt_tokens: prompt,
            max_tokens: max,
        }) {
            Admission::Accepted { id } => id,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn single_request_timing() {
        let mut e = Engine::new(cfg());
        let id = accept(&mut e, 800, 3);
        // Admission step: ttft 40 + 800 / 8000 s = 140 ms.
        assert_eq!(e.start_step(0.0), Some(140.0));
        let em = e.finish_step();
        assert_eq!(
            em,
            vec![Emission {
                id,
                tokens: 1,
                finished: false,
                fault: None
            }]
        );
        assert_eq!(e.start_step(140.0), Some(15.0));
        e.finish_step();
        assert_eq!(e.start_step(155.0), Some(15.0));
        let em = e.finish_step();
        assert!(em[0].finished);
        assert!(!e.has_work());
        assert_eq!(e.start_step(170.0), None);
    }

    #[test]
    fn batching_queueing_and_step_growth() {
        let mut e = Engine::new(SimConfig {
            max_batch: 2,
            ..cfg()
        });
        for _ in 0..3 {
            accept(&mut e, 0, 10);
        }
        e.start_step(0.0);
        assert_eq!((e.running(), e.waiting()), (2, 1));
        e.finish_step();
        // Two decoding: 15 * (1 + 0.03).
        let ms = e.start_step(40.0).unwrap();
        assert!((ms - 15.45).abs() < 1e-9, "{ms}");
    }

    #[test]
    fn prefill_interferes_with_decoding() {
        let mut e = Engine::new(cfg());
        accept(&mut e, 0, 10);
        e.start_step(0.0);
        e.finish_step();
        accept(&mut e, 8000, 10);
        // 1 decoding (15) + prefill (40 + 1000).
        assert_eq!(e.start_step(40.0), Some(1055.0));
    }

    #[test]
    fn chunks_of_several_tokens() {
        let mut e = Engine::new(SimConfig {
            tokens_per_chunk: 4,
            ..cfg()
        });
        accept(&mut e, 0, 10);
        let mut sent = Vec::new();
        let mut t = 0.0;
        while let Some(ms) = e.start_step(t) {
            t += ms;
            for em in e.finish_step() {
                sent.push((em.tokens, em.finished));
            }
        }
        assert_eq!(sent, vec![(4, false), (4, false), (2, true)]);
    }

    #[test]
    fn faults_are_seeded_and_placed() {
        let mut e = Engine::new(SimConfig {
            error_rate: 1.0,
            faults: vec![FaultKind::Reset],
            ..cfg()
        });
        let id = accept(&mut e, 0, 10);
        let mut t = 0.0;
        let mut got = None;
        let mut tokens = 0;
        while let Some(ms) = e.start_step(t) {
            t += ms;
            for em in e.finish_step() {
                assert_eq!(em.id, id);
                tokens += em.tokens;
                if em.fault.is_some() {
                    got = em.fault;
                }
            }
        }
        assert_eq!(got, Some(FaultKind::Reset));
        assert!(
            (1..=5).contains(&tokens),
            "fault after 1..=max/2 tokens, got {tokens}"
        );
        let mut e = Engine::new(SimConfig {
            error_rate: 1.0,
            faults: vec![FaultKind::Http429],
            ..cfg()
        });
        assert!(matches!(
            e.submit(SimRequest {
                prompt_tokens: 1,
                max_tokens: 1
            }),
            Admission::Fault {
                fault: FaultKind::Http429,
                ..
            }
        ));
    }

    #[test]
    fn context_limit() {
        let mut e = Engine::new(SimConfig {
            max_context_tokens: 100,
            ..cfg()
        });
        assert!(matches!(
            e.submit(SimRequest {
                prompt_tokens: 90,
                max_tokens: 20
            }),
            Admission::ContextExceeded {
                requested: 110,
                limit: 100,
                ..
            }
        ));
    }

    #[test]
    fn cancel_frees_the_slot() {
        let mut e = Engine::new(SimConfig {
            max_batch: 1,
            ..cfg()
        });
        let a = accept(&mut e, 0, 10);
        accept(&mut e, 0, 10);
        e.start_step(0.0);
        e.cancel(a);
        e.finish_step();
        e.start_step(10.0);
        assert_eq!(e.running(), 1);
        assert_eq!(e.waiting(), 0);
    }

    #[test]
    fn writer_output_is_a_valid_stream() {
        for api in [Api::Chat, Api::Completions] {
            let mut w = StreamWriter::new(api, 3, "sim", true, 12, 1);
            let mut s = w.start();
            s += &w.tokens(1);
            s += &w.tokens(2);
            s += &w.finish();
            let mut tl = crate::timeline::RequestTimeline::new(0.0, None);
            tl.on_headers(1.0, 200, Some("text/event-stream"));
            tl.on_read(2.0, s.as_bytes());
            tl.on_end(3.0);
            let r = tl.finish();
            assert!(r.outcome.is_ok(), "{:?}", r.outcome);
            assert_eq!(r.token_events_ms.len(), 2);
            assert_eq!(r.usage.unwrap().completion_tokens, Some(3));
            assert_eq!(r.usage.unwrap().prompt_tokens, Some(12));
        }
    }

    #[test]
    fn malformed_fault_is_malformed() {
        let mut w = StreamWriter::new(Api::Chat, 1, "m", true, 1, 1);
        let FaultAction::SendThenEnd(bytes) = w.fault(FaultKind::Malformed, 0.0) else {
            panic!()
        };
        let events = sse::decode_all(bytes.as_bytes()).unwrap();
        assert!(crate::openai::parse_event("message", &events[0].data).is_err());
    }

    #[test]
    fn fault_names_match_in_json() {
        for f in FaultKind::ALL {
            assert_eq!(serde_json::to_value(f).unwrap(), f.as_str());
        }
    }

    #[test]
    fn validation_names_the_flag() {
        let e = SimConfig {
            error_rate: 1.5,
            ..cfg()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("error-rate = 1.5"), "{e}");
        assert!(
            SimConfig {
                itl_ms: 0.0,
                ..cfg()
            }
            .validate()
            .is_err()
        );
    }
}
