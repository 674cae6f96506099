//! One request's record: every timestamp the metrics need, how it ended (the
//! error taxonomy), and what the server said about itself. The `--raw` file holds
//! these; every metric is derived from them ([`crate::metrics`]).

use serde::{Deserialize, Serialize};

use crate::openai::{ServerTimings, Usage};

/// Why a request failed (the error taxonomy). Serialized as a short snake_case key,
/// e.g. `http_503`, `reset`, `malformed_chunk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// The server answered with this non-2xx HTTP status.
    Http(u16),
    /// The server refused the prompt (plus `max_tokens`) as longer than its
    /// context window (an HTTP 4xx saying so, in llama.cpp's, vLLM's, SGLang's,
    /// TGI's or OpenAI's words).
    ContextOverflow,
    /// No connection could be made (refused, DNS, TLS).
    Connect,
    /// The connection broke while the body was streaming.
    Reset,
    /// The server sent an error object inside the stream.
    StreamError,
    /// An event's data was not a valid chunk.
    MalformedChunk,
    /// A 2xx answer that is not `text/event-stream`.
    NonSse,
    /// The body ended without `[DONE]` and without a `finish_reason`.
    Truncated,
    /// The stream held invalid UTF-8.
    InvalidUtf8,
    /// An event grew past the decoder's size cap without ending.
    EventTooLarge,
    /// The run was stopped (Ctrl-C) before this request finished.
    Cancelled,
    /// Anything else the transport reported.
    Other,
}

impl ErrorKind {
    /// The key used in reports (`error_kinds`) and raw records.
    pub fn key(&self) -> String {
        match self {
            ErrorKind::Http(status) => format!("http_{status}"),
            other => other.static_key().to_owned(),
        }
    }

    fn static_key(&self) -> &'static str {
        match self {
            ErrorKind::Http(_) => "http",
            ErrorKind::ContextOverflow => "context_overflow",
            ErrorKind::Connect => "connect",
            ErrorKind::Reset => "reset",
            ErrorKind::StreamError => "stream_error",
            ErrorKind::MalformedChunk => "malformed_chunk",
            ErrorKind::NonSse => "non_sse",
            ErrorKind::Truncated => "truncated",
            ErrorKind::InvalidUtf8 => "invalid_utf8",
            ErrorKind::EventTooLarge => "event_too_large",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Other => "other",
        }
    }

    /// Parse a key written by [`ErrorKind::key`].
    pub fn from_key(key: &str) -> Option<Self> {
        if let Some(status) = key.strip_prefix("http_") {
            return status.parse().ok().map(ErrorKind::Http);
        }
        Some(match key {
            "context_overflow" => ErrorKind::ContextOverflow,
            "connect" => ErrorKind::Connect,
            "reset" => ErrorKind::Reset,
            "stream_error" => ErrorKind::StreamError,
            "malformed_chunk" => ErrorKind::MalformedChunk,
            "non_sse" => ErrorKind::NonSse,
            "truncated" => ErrorKind::Truncated,
            "invalid_utf8" => ErrorKind::InvalidUtf8,
            "event_too_large" => ErrorKind::EventTooLarge,
            "cancelled" => ErrorKind::Cancelled,
            "other" => ErrorKind::Other,
            _ => return None,
        })
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.key())
    }
}

impl Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.key())
    }
}

impl<'de> Deserialize<'de> for ErrorKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let key = String::deserialize(d)?;
        ErrorKind::from_key(&key)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown error kind {key:?}")))
    }
}

/// Where a request was when its client timeout fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutPhase {
    /// Before the response headers came.
    Headers,
    /// Headers came, the first token did not.
    FirstToken,
    /// While tokens were streaming.
    Stream,
}

/// How a request ended. Every request ends in exactly one of these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// Completed: `[DONE]` (or a `finish_reason` and a clean end of body).
    Ok,
    /// Failed; `kind` is the taxonomy key, `message` says what happened (never a secret).
    Error {
        /// The class of failure.
        kind: ErrorKind,
        /// A short human-readable detail.
        message: String,
    },
    /// The client's timeout fired.
    Timeout {
        /// Where the request was.
        phase: TimeoutPhase,
    },
}

impl Outcome {
    /// Whether the request succeeded.
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok)
    }
}

/// How the first token's paint time was measured (browser only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaintMethod {
    /// Element Timing `renderTime` of the element holding the first token.
    ElementTiming,
    /// `performance.now()` inside the requestAnimationFrame callback after the DOM update.
    RequestAnimationFrame,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// A first token read at most this long after the response head came in the
/// response's first bytes (ms): the body's first read resolves at once when its
/// bytes were already there as the head was handed over.
pub const WITH_HEAD_MS: f64 = 1.0;

/// Everything recorded about one request: the raw record (`--raw` JSONL) from which
/// every metric is derived. Times are ms on the client's monotonic clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Scheduled send time (open-loop rate mode only): the reference for latencies there,
    /// so a late send is charged to the request (no coordinated omission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_scheduled_ms: Option<f64>,
    /// When the request was handed to the HTTP stack.
    pub t_send_ms: f64,
    /// Response status and headers received.
    pub t_headers_ms: Option<f64>,
    /// Browser only: Resource Timing's `requestStart`, when the browser's network
    /// stack began sending the request (after a new connection's setup); absent
    /// where the browser hides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_request_start_ms: Option<f64>,
    /// Browser only: Resource Timing's `responseStart`, when the browser's network
    /// stack had the response's first bytes (before they reached the page's
    /// script); absent where the browser hides it (a cross-origin endpoint that
    /// sends no `Timing-Allow-Origin`) or did not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_response_start_ms: Option<f64>,
    /// HTTP status.
    pub status: Option<u16>,
    /// First body bytes received.
    pub t_first_byte_ms: Option<f64>,
    /// Arrival time of each content-bearing event (the read that completed it).
    pub token_events_ms: Vec<f64>,
    /// The tokens each of those events carried, where the server said so in
    /// every one of them (a running `usage` in each chunk: vLLM's
    /// `stream_options.continuous_usage_stats`); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_tokens: Vec<u32>,
    /// `[DONE]` received, or the body ended (or the failure time).
    pub t_done_ms: Option<f64>,
    /// The first event carrying answer text or a tool call (after any reasoning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_first_answer_ms: Option<f64>,
    /// The first event carrying a piece of a tool call (its name or arguments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_first_tool_call_ms: Option<f64>,
    /// Tool calls the answer made (`--tools`; 0 for an answer in text).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub tool_calls: u32,
    /// Whether the answer kept to its schemas ([`AnswerCheck::valid`]);
    /// absent when nothing was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_valid: Option<bool>,
    /// Why not, where it did not ([`AnswerCheck::problem`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_problem: Option<String>,
    /// Content events that carried reasoning text.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub reasoning_events: u32,
    /// Browser only: when the first token was painted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_first_paint_ms: Option<f64>,
    /// Browser only: how `t_first_paint_ms` was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paint_method: Option<PaintMethod>,
    /// Content events that arrived in the same read as another content event.
    pub shared_read_events: u32,
    /// The prompt's own tokens as the run's tokenizer counted them when it built
    /// the prompt (`config.tokens`); absent for a prompt it did not count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_sent: Option<u64>,
    /// The generated text's tokens as the run's local tokenizer counted them
    /// (`bench --tokenizer tokenizer.json`), next to `usage.completion_tokens`;
    /// absent when it did not count them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_counted: Option<u64>,
    /// The turn of a conversation this request was (`--conversation`; 1 the
    /// first), absent outside conversations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// The class of request it was (a prompts file line's `class`), for
    /// goodput per class; absent when its prompt gave none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The images its prompt carried (`--images`): `512x512`, `2x1024x768`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<String>,
    /// The conversation it belonged to (numbered from 0 in the run), with `turn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    /// `usage` as the server sent it (the last one seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// llama.cpp's own timings, when it sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<ServerTimings>,
    /// Characters of generated text received.
    pub output_chars: u64,
    /// Body bytes received.
    pub body_bytes: u64,
    /// Whether the stream's end was received: `[DONE]`, or the Responses and
    /// Messages APIs' `response.completed` / `message_stop`.
    pub done_received: bool,
    /// The last `finish_reason` seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// The HTTP version the answer came over, as ALPN names it (`http/1.1`,
    /// `h2`, `h3`; the browser's Resource Timing `nextHopProtocol`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The connection it went over: opened for it (with its setup) or reused;
    /// absent when unknown (no connection was made, or the browser hid it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<ConnectionUse>,
    /// How the request ended.
    pub outcome: Outcome,
}

/// What a request that offered tools or asked for a JSON answer got back,
/// checked after its end (its times are already taken); kept in the record's
/// `tool_calls`, `answer_valid` and `answer_problem`
/// ([`RequestRecord::set_answer`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AnswerCheck {
    /// Tool calls the answer made (0: it answered in text).
    pub tool_calls: u32,
    /// Whether the answer kept to its schemas: every call names a tool offered
    /// and its arguments are valid against that tool's schema; an answer in text
    /// asked to follow a JSON schema parses and is valid against it. Absent
    /// when there was nothing to check (an answer in text to a request that
    /// offered tools and asked for no JSON).
    pub valid: Option<bool>,
    /// Why not, where it was not (`get_weather: /unit: enum`): the tool, the
    /// place in the arguments and the rule broken, never the answer's text.
    pub problem: Option<String>,
}

/// Whether a request opened the connection it went over, and the part of that
/// connection's setup the request waited for. The setup lies between the send
/// and the request leaving (it is part of the request's TTFT). A request that
/// found its connection ready waited for none; HTTP/2 streams sent while their
/// shared connection was being set up waited for the rest of it, though they
/// reuse it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct ConnectionUse {
    /// The request opened this connection (it was the first to use it).
    pub new: bool,
    /// The connection's setup this request waited for: DNS lookup, TCP connect,
    /// proxy tunnel and TLS handshake, ms (all of it for the request that
    /// opened the connection, unless the pool gave that connection to a
    /// request sent after it began).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_ms: Option<f64>,
    /// Of the setup, the DNS lookup, ms (absent for an IP address, or unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_ms: Option<f64>,
    /// Of the setup, the TLS handshake, ms (the browser's Resource Timing
    /// `secureConnectionStart..connectEnd`; the native client times the setup
    /// whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ms: Option<f64>,
}

impl RequestRecord {
    /// Keep what the answer's check found.
    pub fn set_answer(&mut self, check: AnswerCheck) {
        self.tool_calls = check.tool_calls;
        self.answer_valid = check.valid;
        self.answer_problem = check.problem;
    }

    /// What the answer's check found ([`RequestRecord::set_answer`]).
    pub fn answer(&self) -> AnswerCheck {
        AnswerCheck {
            tool_calls: self.tool_calls,
            valid: self.answer_valid,
            problem: self.answer_problem.clone(),
        }
    }

    /// The same request seen on a clock `dt_ms` ahead: every time moved, every
    /// duration kept (shards' records put on one time axis to merge).
    pub fn shift(&mut self, dt_ms: f64) {
        for t in [
            &mut self.t_scheduled_ms,
            &mut self.t_headers_ms,
            &mut self.t_request_start_ms,
            &mut self.t_response_start_ms,
            &mut self.t_first_byte_ms,
            &mut self.t_done_ms,
            &mut self.t_first_answer_ms,
            &mut self.t_first_paint_ms,
        ]
        .into_iter()
        .flatten()
        {
            *t += dt_ms;
        }
        self.t_send_ms += dt_ms;
        for t in &mut self.token_events_ms {
            *t += dt_ms;
        }
    }

    /// The time latencies are measured from: the scheduled send time in rate mode,
    /// else the actual send time.
    pub fn t_reference_ms(&self) -> f64 {
        self.t_scheduled_ms.unwrap_or(self.t_send_ms)
    }

    /// The prompt tokens the server took from its prefix cache, as it said:
    /// `usage.prompt_tokens_details.cached_tokens`, else llama.cpp's
    /// `timings.cache_n`.
    pub fn cached_prompt_tokens(&self) -> Option<u64> {
        self.usage
            .and_then(|u| u.cached_tokens())
            .or_else(|| self.server_timings.and_then(|t| t.cache_n))
    }

    /// First content event's arrival: the read that completed it.
    pub fn t_first_token_ms(&self) -> Option<f64> {
        self.token_events_ms.first().copied()
    }

    /// Whether the first token came in the response's first bytes: its read
    /// resolved within [`WITH_HEAD_MS`] of the response head. Then the browser's
    /// `responseStart` (when known) is when the network stack had the token.
    pub fn first_token_with_head(&self) -> bool {
        match (self.t_headers_ms, self.t_first_token_ms()) {
            (Some(h), Some(f)) => f - h <= WITH_HEAD_MS,
            _ => false,
        }
    }

    /// When the first token reached the client: the browser's `responseStart`
    /// where the token came in the response's first bytes (the network stack had
    /// it then; the page's script got it a delivery delay later), else the read
    /// that completed it.
    pub fn t_first_token_arrival_ms(&self) -> Option<f64> {
        match self.t_response_start_ms {
            Some(rs) if self.first_token_with_head() => Some(rs),
            _ => self.t_first_token_ms(),
        }
    }

    /// Browser only: the browser's own send delay, from the page's send to its
    /// network stack beginning the request (`requestStart`; a new connection's
    /// setup included).
    pub fn browser_send_ms(&self) -> Option<f64> {
        Some(self.t_request_start_ms? - self.t_send_ms)
    }

    /// Browser only: the browser's own delivery delay, from its network stack
    /// having the response's first bytes (`responseStart`) to the page's script
    /// having the response (the head's read).
    pub fn browser_delivery_ms(&self) -> Option<f64> {
        Some(self.t_headers_ms? - self.t_response_start_ms?)
    }

    /// Last content event's arrival.
    pub fn t_last_token_ms(&self) -> Option<f64> {
        self.token_events_ms.last().copied()
    }

    /// A request sent at `t_send_ms` (scheduled at `t_scheduled_ms` in rate
    /// mode) of which nothing else is known yet: every other field empty, its
    /// outcome `ok` until said otherwise.
    pub fn sent_at(t_send_ms: f64, t_scheduled_ms: Option<f64>) -> Self {
        Self {
            t_scheduled_ms,
            t_send_ms,
            t_headers_ms: None,
            t_request_start_ms: None,
            t_response_start_ms: None,
            status: None,
            t_first_byte_ms: None,
            token_events_ms: Vec::new(),
            event_tokens: Vec::new(),
            t_done_ms: None,
            t_first_answer_ms: None,
            t_first_tool_call_ms: None,
            tool_calls: 0,
            answer_valid: None,
            answer_problem: None,
            reasoning_events: 0,
            t_first_paint_ms: None,
            paint_method: None,
            shared_read_events: 0,
            prompt_tokens_sent: None,
            completion_tokens_counted: None,
            turn: None,
            class: None,
            images: None,
            session: None,
            usage: None,
            server_timings: None,
            output_chars: 0,
            body_bytes: 0,
            done_received: false,
            finish_reason: None,
            outcome: Outcome::Ok,
            protocol: None,
            connection: None,
        }
    }

    /// Actual minus scheduled send time (rate mode), ms.
    pub fn client_lag_ms(&self) -> Option<f64> {
        self.t_scheduled_ms.map(|s| self.t_send_ms - s)
    }
}
