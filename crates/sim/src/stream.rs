//! The bytes a simulated request's stream carries: the role, content, finish,
//! usage and `[DONE]` events, the mid-stream faults, and the answers sent instead
//! of a stream.

use super::FaultKind;
use tokenscope_measure::openai::{
    Api, CompletionTokensDetails, PromptTokensDetails, ServerTimings, Usage, encode,
};
use tokenscope_stats::rng::Rng;

/// Formats one request's stream: the same bytes `tokenscope mock` and the page's
/// simulator send.
#[derive(Debug, Clone)]
pub struct StreamWriter {
    api: Api,
    id: u64,
    model: String,
    include_usage: bool,
    prompt_tokens: u64,
    /// Prompt tokens the prefix cache served, when the simulator keeps one.
    cached_tokens: Option<u64>,
    sent_tokens: u64,
    /// Tokens to send as reasoning before the answer (chat only).
    reasoning: u64,
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

/// The words the simulator's answers are made of, a token each (its `usage`
/// counts them).
pub fn answer_words() -> &'static [&'static str] {
    WORDS
}

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
            cached_tokens: None,
            sent_tokens: 0,
            reasoning: 0,
            rng: Rng::for_stream(seed ^ 0x5eed, id),
        }
    }

    /// Say in `usage` that `cached` of the prompt's tokens came from the prefix
    /// cache (`prompt_tokens_details.cached_tokens`).
    pub fn with_cached(mut self, cached: Option<u64>) -> Self {
        self.cached_tokens = cached;
        self
    }

    /// The answer's first `n` tokens are reasoning (`delta.reasoning_content`;
    /// a completions stream has no such field and sends them as text).
    pub fn with_reasoning(mut self, n: u32) -> Self {
        if self.api == Api::Chat {
            self.reasoning = u64::from(n);
        }
        self
    }

    /// Bytes sent right after the headers (the role-only chunk for chat).
    pub fn start(&mut self) -> String {
        match self.api {
            Api::Chat => encode::role_event(self.id, &self.model, 0),
            Api::Completions => String::new(),
        }
    }

    /// One chunk carrying `n` tokens (one word each): reasoning while the
    /// answer's reasoning lasts, then text (one event of each when a chunk
    /// straddles the two).
    pub fn tokens(&mut self, n: u32) -> String {
        let (mut reasoning, mut text) = (String::new(), String::new());
        for _ in 0..n {
            let into = if self.sent_tokens < self.reasoning {
                &mut reasoning
            } else {
                &mut text
            };
            if !into.is_empty() || (self.sent_tokens > 0 && self.sent_tokens != self.reasoning) {
                into.push(' ');
            }
            into.push_str(WORDS[self.rng.below(WORDS.len() as u64) as usize]);
            self.sent_tokens += 1;
        }
        let mut out = String::new();
        if !reasoning.is_empty() {
            out.push_str(&encode::reasoning_event(
                self.id,
                &self.model,
                &reasoning,
                0,
            ));
        }
        if !text.is_empty() {
            out.push_str(&encode::content_event(
                self.api,
                self.id,
                &self.model,
                &text,
                0,
            ));
        }
        out
    }

    /// Reasoning tokens sent so far.
    pub fn reasoning_sent(&self) -> u64 {
        self.sent_tokens.min(self.reasoning)
    }

    /// The end of a complete stream: `finish_reason`, usage (when asked) and `[DONE]`.
    pub fn finish(&mut self) -> String {
        self.finish_with(None)
    }

    /// [`Self::finish`], with llama.cpp's `timings` in a chunk of their own
    /// before `[DONE]` when given.
    pub fn finish_with(&mut self, timings: Option<ServerTimings>) -> String {
        let mut out = encode::finish_event(self.api, self.id, &self.model, "length", 0);
        if self.include_usage {
            let usage = Usage {
                prompt_tokens: Some(self.prompt_tokens),
                completion_tokens: Some(self.sent_tokens),
                completion_tokens_details: (self.reasoning > 0).then(|| CompletionTokensDetails {
                    reasoning_tokens: Some(self.reasoning_sent()),
                }),
                prompt_tokens_details: self.cached_tokens.map(|c| PromptTokensDetails {
                    cached_tokens: Some(c),
                }),
            };
            out.push_str(&encode::usage_event(
                self.api,
                self.id,
                &self.model,
                &usage,
                0,
            ));
        }
        if let Some(t) = timings {
            out.push_str(&format!(
                "data: {{\"choices\":[],\"timings\":{}}}\n\n",
                serde_json::to_string(&t).expect("timings serialize")
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
