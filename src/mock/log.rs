//! One request as the mock saw it: a line of its `--log`, the ground truth the
//! fidelity tests compare the client against.

use serde::Serialize;
use tokenscope_sim::FaultKind;

/// One request as the server saw it (a line of `--log`).
#[derive(Debug, Serialize)]
pub struct LogRecord {
    /// Engine id.
    pub id: u64,
    /// The client's `x-request-id`, if it sent one.
    pub request_id: Option<String>,
    /// Whether the request carried a bearer token (never the token itself).
    pub authorized: bool,
    /// The header among `api-key`, `x-api-key` that carried a key, if any (never
    /// the key).
    pub api_key_header: Option<&'static str>,
    /// The request's header names, lowercased and sorted (never a value).
    pub header_names: Vec<String>,
    /// The URL query's parameter names, in order (never a value).
    pub query_names: Vec<String>,
    /// `http/1.1` or `h2`.
    pub protocol: &'static str,
    /// Whether the connection is TLS.
    pub tls: bool,
    /// The connection's number in accept order (1 = first).
    pub connection: u64,
    /// When the connection was accepted (ms since the server started).
    pub t_conn_accepted_ms: f64,
    /// When the connection was ready to serve: after `--connect-delay-ms` and
    /// the TLS handshake (ms since the server started).
    pub t_conn_ready_ms: f64,
    /// `chat`, `completions`, `responses` or `messages`.
    pub api: &'static str,
    /// Prompt tokens (estimated like the client's synthetic prompts).
    pub prompt_tokens: u64,
    /// Of those, found in the prefix cache (`--prefix-cache`; else 0).
    pub cached_tokens: u64,
    /// `max_tokens` asked.
    pub max_tokens: u32,
    /// Request received (ms since the server started).
    pub t_received_ms: f64,
    /// When the engine step that admitted it began: its queueing ended and its
    /// prefill began (none if it never left the queue).
    pub t_scheduled_ms: Option<f64>,
    /// Response headers handed to HTTP.
    pub t_headers_ms: Option<f64>,
    /// When each content chunk was handed to HTTP.
    pub chunk_times_ms: Vec<f64>,
    /// Tokens in each of those chunks.
    pub chunk_tokens: Vec<u32>,
    /// Tokens sent.
    pub completion_tokens: u64,
    /// The images its prompt carried, in order (their tokens are in
    /// `prompt_tokens`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageSeen>,
    /// Where the request offered tools or asked for JSON: what the answer was
    /// (`tool_call`, `json` or `text`), the tool called, and whether it was
    /// made to follow its schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<tokenscope_sim::answer::Planned>,
    /// The fault injected, if any.
    pub fault: Option<FaultKind>,
    /// `completed`, `fault`, `disconnected`, `context_exceeded`.
    pub outcome: &'static str,
    /// When the last byte was handed to HTTP (or the client left).
    pub t_end_ms: f64,
}

/// An image a request carried, as the mock read it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ImageSeen {
    /// Width, pixels (from its header).
    pub width_px: u32,
    /// Height, pixels.
    pub height_px: u32,
    /// Its encoded bytes (decoded from base64).
    pub bytes: usize,
    /// The prompt tokens it counted (`--image-patch-px`).
    pub tokens: u64,
}
