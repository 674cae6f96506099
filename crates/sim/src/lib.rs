//! # tokenscope-sim
//!
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
//!   per-step overhead) plus `sum(prompt_tokens) / prefill_tok_per_s` (less the
//!   tokens a request found in the [`prefix`] cache, with `prefix_cache`). Requests
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
//! * An image in the prompt counts [`image_tokens`]: one token per
//!   `image_patch_px`-square patch (Qwen2-VL's 14-pixel patches merged 2x2),
//!   prefilled like the text's.
//!
//! The driver calls [`Engine::submit`] when a request arrives, then loops:
//! [`Engine::start_step`] (returns the step's duration) -> wait -> [`Engine::finish_step`]
//! (returns what to send to whom). [`StreamWriter`] formats the SSE bytes.

pub mod answer;
mod engine;
pub mod exposition;
pub mod prefix;
mod stream;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use engine::{Admission, Emission, Engine, SimRequest};
pub use stream::{
    FaultAction, ImmediateResponse, StreamWriter, answer_words, context_exceeded_body,
    immediate_response,
};

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
    /// The first this many tokens of each chat answer are reasoning
    /// (`delta.reasoning_content`), as a reasoning model's are; 0: none.
    #[serde(default)]
    pub reasoning_tokens: u32,
    /// Keep a prefix cache ([`prefix`]): prompt words an earlier prompt began
    /// with are not prefilled again, and `usage` says how many.
    #[serde(default)]
    pub prefix_cache: bool,
    /// Where a request offers tools and lets the model decide (`auto`), the
    /// share of answers that call one ([`answer::plan`]).
    #[serde(default = "one")]
    pub tool_call_share: f64,
    /// The share of tool calls and JSON answers made to break their schema in
    /// one known way (a required property left out).
    #[serde(default)]
    pub invalid_answer_share: f64,
    /// The side of the square of pixels one image token covers.
    #[serde(default = "patch_px")]
    pub image_patch_px: u32,
    /// Seed.
    pub seed: u64,
}

fn one() -> f64 {
    1.0
}

fn patch_px() -> u32 {
    28
}

/// The tokens an image of `width_px` by `height_px` counts in the prompt: one
/// per `patch_px`-square patch, a part patch counted whole.
pub fn image_tokens(width_px: u32, height_px: u32, patch_px: u32) -> u64 {
    let p = patch_px.max(1);
    u64::from(width_px.div_ceil(p)) * u64::from(height_px.div_ceil(p))
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
            reasoning_tokens: 0,
            prefix_cache: false,
            tool_call_share: 1.0,
            invalid_answer_share: 0.0,
            image_patch_px: patch_px(),
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
        for (name, share) in [
            ("tool-call-share", self.tool_call_share),
            ("invalid-answer-share", self.invalid_answer_share),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return Err(SimConfigError::OutOfRange {
                    name,
                    value: share.to_string(),
                    expected: "a share between 0 and 1",
                });
            }
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

/// Parse a comma-separated fault list (`http_503,reset`), as `tokenscope mock
/// --faults` and the page's `sim_faults` take it. An unknown name is an error
/// naming it and the known ones.
pub fn parse_faults(s: &str) -> Result<Vec<FaultKind>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(|f| {
            FaultKind::parse(f).ok_or_else(|| {
                format!(
                    "unknown fault {f:?} (known: {})",
                    FaultKind::ALL.map(FaultKind::as_str).join(", ")
                )
            })
        })
        .collect()
}

/// A fault list as [`parse_faults`] reads it.
pub fn faults_label(faults: &[FaultKind]) -> String {
    faults
        .iter()
        .map(|f| f.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests;
