//! The bytes a simulated request's stream carries: the role, content, finish,
//! usage and `[DONE]` events, the mid-stream faults, and the answers sent instead
//! of a stream.

use super::FaultKind;
use tokenscope_measure::openai::{
    Api, CompletionTokensDetails, PromptTokensDetails, ServerTimings, Usage, encode,
};
use tokenscope_measure::{messages, responses, tools};
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
    /// Tokens to send as reasoning before the answer (not for completions).
    reasoning: u64,
    /// A running `usage` in every chunk (chat and completions: vLLM's
    /// `stream_options.continuous_usage_stats`).
    continuous_usage: bool,
    /// The Responses API's output item or the Messages API's content block
    /// open now (its index, and whether it holds reasoning).
    open: Option<(u32, bool)>,
    /// What the answer's tokens carry after any reasoning: words, a JSON
    /// text's pieces, or a tool call's.
    script: Script,
    /// The script's pieces sent so far.
    pieces_sent: usize,
    /// The tool call's index, once its first piece is sent.
    tool_index: Option<u32>,
    rng: Rng,
}

/// What a simulated answer's tokens (after any reasoning) carry.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Script {
    /// Words (every plain request).
    #[default]
    Words,
    /// A JSON text, one piece per token.
    Json(Vec<String>),
    /// One call of the tool named, its arguments one piece per token.
    ToolCall {
        /// The tool's name.
        name: String,
        /// The arguments' JSON text in pieces.
        pieces: Vec<String>,
    },
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
            open: None,
            continuous_usage: false,
            script: Script::Words,
            pieces_sent: 0,
            tool_index: None,
            rng: Rng::for_stream(seed ^ 0x5eed, id),
        }
    }

    /// Say in `usage` that `cached` of the prompt's tokens came from the prefix
    /// cache (`prompt_tokens_details.cached_tokens`).
    pub fn with_cached(mut self, cached: Option<u64>) -> Self {
        self.cached_tokens = cached;
        self
    }

    /// Send a running `usage` in every chunk (chat and completions: vLLM's
    /// `stream_options.continuous_usage_stats`).
    pub fn with_continuous_usage(mut self, yes: bool) -> Self {
        self.continuous_usage = yes;
        self
    }

    /// The answer (after any reasoning) carries this script's pieces, one per
    /// token, instead of words ([`crate::answer::plan`]; not for completions).
    pub fn with_script(mut self, script: Script) -> Self {
        if self.api != Api::Completions {
            self.script = script;
        }
        self
    }

    /// The answer's first `n` tokens are reasoning (`delta.reasoning_content`,
    /// the Responses API's `response.reasoning_text.delta`, the Messages API's
    /// `thinking_delta`; a completions stream has no such field and sends them
    /// as text).
    pub fn with_reasoning(mut self, n: u32) -> Self {
        if self.api != Api::Completions {
            self.reasoning = u64::from(n);
        }
        self
    }

    /// Bytes sent right after the headers (the role-only chunk for chat, the
    /// response's creation, the message's start with the prompt's usage).
    pub fn start(&mut self) -> String {
        match self.api {
            Api::Chat => encode::role_event(self.id, &self.model, 0),
            Api::Completions => String::new(),
            Api::Responses => responses::encode::start(self.id, &self.model),
            Api::Messages => messages::encode::start(
                self.id,
                &self.model,
                self.prompt_tokens,
                self.cached_tokens,
            ),
        }
    }

    /// For the APIs made of items or blocks: close the open one if it holds the
    /// other kind, and open one of this kind.
    fn open(&mut self, reasoning: bool, out: &mut String) {
        if self.open.is_some_and(|(_, r)| r == reasoning) {
            return;
        }
        let index = match self.open.take() {
            Some((i, _)) => {
                if self.api == Api::Messages {
                    out.push_str(&messages::encode::block_stop(i));
                }
                i + 1
            }
            None => 0,
        };
        out.push_str(&match self.api {
            Api::Responses => responses::encode::item_added(self.id, index, reasoning),
            _ => messages::encode::block_start(index, reasoning),
        });
        self.open = Some((index, reasoning));
    }

    /// One event carrying `text` (reasoning or answer) in this writer's API;
    /// `sent`: the tokens sent once it is.
    fn text_event(&mut self, reasoning: bool, text: &str, sent: u64) -> String {
        let running = self.continuous_usage.then(|| Usage {
            prompt_tokens: Some(self.prompt_tokens),
            completion_tokens: Some(sent),
            ..Usage::default()
        });
        match self.api {
            Api::Chat | Api::Completions if reasoning => {
                encode::reasoning_event(self.id, &self.model, text, 0, running.as_ref())
            }
            Api::Chat | Api::Completions => {
                encode::content_event(self.api, self.id, &self.model, text, 0, running.as_ref())
            }
            Api::Responses | Api::Messages => {
                let mut out = String::new();
                self.open(reasoning, &mut out);
                let (index, _) = self.open.unwrap_or((0, reasoning));
                out.push_str(&match (self.api, reasoning) {
                    (Api::Responses, true) => {
                        responses::encode::reasoning_delta(self.id, index, text)
                    }
                    (Api::Responses, false) => responses::encode::text_delta(self.id, index, text),
                    _ => messages::encode::delta(index, reasoning, text),
                });
                out
            }
        }
    }

    /// One chunk carrying `n` tokens (one word each): reasoning while the
    /// answer's reasoning lasts, then text (one event of each when a chunk
    /// straddles the two).
    pub fn tokens(&mut self, n: u32) -> String {
        let (mut reasoning, mut text) = (String::new(), String::new());
        for _ in 0..n {
            let scripted = match &self.script {
                Script::Json(p) | Script::ToolCall { pieces: p, .. }
                    if self.sent_tokens >= self.reasoning =>
                {
                    Some(p.get(self.pieces_sent).map_or(" ", String::as_str))
                }
                _ => None,
            };
            if let Some(piece) = scripted {
                text.push_str(piece);
                self.pieces_sent += 1;
                self.sent_tokens += 1;
                continue;
            }
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
            let sent = self.sent_tokens.min(self.reasoning);
            out.push_str(&self.text_event(true, &reasoning, sent));
        }
        if !text.is_empty() {
            let sent = self.sent_tokens;
            match &self.script {
                Script::ToolCall { name, .. } => {
                    let name = name.clone();
                    out.push_str(&self.tool_event(&name, &text));
                }
                _ => out.push_str(&self.text_event(false, &text, sent)),
            }
        }
        out
    }

    /// One event carrying a piece of the tool call's arguments, its name in
    /// the first (the Responses API's function-call item and the Messages
    /// API's tool-use block opened first).
    fn tool_event(&mut self, name: &str, piece: &str) -> String {
        let mut out = String::new();
        let first = self.tool_index.is_none();
        let index = match (self.tool_index, self.api) {
            (Some(i), _) => i,
            (None, Api::Chat | Api::Completions) => 0,
            (None, _) => match self.open.take() {
                Some((i, _)) => {
                    if self.api == Api::Messages {
                        out.push_str(&messages::encode::block_stop(i));
                    }
                    i + 1
                }
                None => 0,
            },
        };
        self.tool_index = Some(index);
        match self.api {
            Api::Chat | Api::Completions => out.push_str(&tools::encode::chat_delta(
                self.id,
                &self.model,
                index,
                first.then_some(name),
                piece,
            )),
            Api::Responses => {
                if first {
                    out.push_str(&tools::encode::responses_item(self.id, index, name));
                }
                out.push_str(&tools::encode::responses_delta(self.id, index, piece));
            }
            Api::Messages => {
                if first {
                    out.push_str(&tools::encode::messages_block(self.id, index, name));
                }
                out.push_str(&tools::encode::messages_delta(index, piece));
            }
        }
        if self.api != Api::Chat {
            self.open = Some((index, false));
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
    /// before `[DONE]` when given (chat and completions).
    pub fn finish_with(&mut self, timings: Option<ServerTimings>) -> String {
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
        match self.api {
            Api::Responses => {
                let index = self.open.map_or(0, |(i, _)| i);
                return responses::encode::finish(self.id, &self.model, index, &usage);
            }
            Api::Messages => {
                let mut out = self
                    .open
                    .take()
                    .map(|(i, _)| messages::encode::block_stop(i))
                    .unwrap_or_default();
                out.push_str(&messages::encode::finish(&usage));
                return out;
            }
            Api::Chat | Api::Completions => {}
        }
        let mut out = encode::finish_event(self.api, self.id, &self.model, "length", 0);
        if self.include_usage {
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
            FaultKind::ErrorEvent => {
                let message = "simulated failure: the backend is overloaded";
                FaultAction::SendThenEnd(match self.api {
                    Api::Responses => responses::encode::error(message, "server_error"),
                    Api::Messages => messages::encode::error(message, "overloaded_error"),
                    Api::Chat | Api::Completions => format!(
                        "{}{}",
                        encode::error_event(message, "server_error"),
                        encode::DONE_EVENT
                    ),
                })
            }
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
