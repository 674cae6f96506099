//! Anthropic's Messages API (`POST {base}/messages`): its request body and its
//! stream of named events, read into the same [`Chunk`]s as chat's.
//!
//! What counts as a token: a `content_block_delta` whose delta is `text_delta`
//! (answer text), `thinking_delta` (reasoning) or `input_json_delta` (a tool
//! call's arguments), and a `tool_use` block's start (its name). `usage` comes in
//! two parts: `message_start` has the prompt's (`input_tokens` are those *not*
//! read from the cache: the prompt is `input_tokens + cache_read_input_tokens +
//! cache_creation_input_tokens`), `message_delta` the output's. The stream ends
//! with `message_stop`; an `error` event fails it; `ping` carries nothing.

use serde::Deserialize;

use crate::wire::{
    Chunk, ChunkError, PromptTokensDetails, RequestSpec, StreamItem, ToolCallDelta, Usage,
    error_from_value,
};

/// The header that carries the API key (where there is one), unless the user
/// names another.
pub const KEY_HEADER: &str = "x-api-key";
/// The header naming the API's version, which every request carries.
pub const VERSION_HEADER: &str = "anthropic-version";
/// Its value, unless the user sends their own.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The header with which Anthropic's API answers a browser's cross-origin
/// requests (CORS); the page sends it with the value `true`.
pub const BROWSER_ACCESS_HEADER: &str = "anthropic-dangerous-direct-browser-access";

/// Whether an event type belongs to this API.
pub fn is_event(kind: &str) -> bool {
    matches!(
        kind,
        "message_start"
            | "message_delta"
            | "message_stop"
            | "content_block_start"
            | "content_block_delta"
            | "content_block_stop"
            | "ping"
    )
}

/// The request body: the system prompt (and a conversation's system messages) as
/// `system`, the rest as `messages`, `max_tokens`.
pub fn request_body(spec: &RequestSpec) -> serde_json::Map<String, serde_json::Value> {
    let mut body = serde_json::Map::new();
    let (system, turns): (Vec<serde_json::Value>, Vec<serde_json::Value>) =
        crate::wire::conversation(spec)
            .into_iter()
            .partition(|m| m["role"] == "system");
    let system: Vec<&str> = spec
        .system
        .as_deref()
        .into_iter()
        .chain(system.iter().filter_map(|m| m["content"].as_str()))
        .collect();
    if !system.is_empty() {
        body.insert("system".into(), system.join("\n\n").into());
    }
    body.insert("messages".into(), turns.into());
    body.insert("max_tokens".into(), spec.max_tokens.into());
    crate::tools::insert(spec, &mut body);
    body
}

#[derive(Deserialize)]
struct RawEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    message: Option<RawMessage>,
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    content_block: Option<RawBlock>,
    #[serde(default)]
    delta: Option<RawDelta>,
    #[serde(default)]
    usage: Option<RawUsage>,
}

#[derive(Deserialize)]
struct RawMessage {
    #[serde(default)]
    usage: Option<RawUsage>,
}

#[derive(Deserialize)]
struct RawBlock {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct RawDelta {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

impl RawUsage {
    /// `output`: whether this usage's `output_tokens` is the answer's count
    /// (`message_delta`), not `message_start`'s placeholder.
    fn into_usage(self, output: bool) -> Usage {
        let prompt = self.input_tokens.map(|i| {
            i + self.cache_read_input_tokens.unwrap_or(0)
                + self.cache_creation_input_tokens.unwrap_or(0)
        });
        Usage {
            prompt_tokens: prompt,
            completion_tokens: self.output_tokens.filter(|_| output),
            completion_tokens_details: None,
            prompt_tokens_details: self.cache_read_input_tokens.map(|c| PromptTokensDetails {
                cached_tokens: Some(c),
            }),
        }
    }
}

/// Read one event's data.
pub fn parse(data: &str) -> Result<StreamItem, ChunkError> {
    let raw: RawEvent = serde_json::from_str(data).map_err(|e| ChunkError::malformed(e, data))?;
    let mut chunk = Chunk {
        needs_end_event: true,
        ..Chunk::default()
    };
    match raw.kind.as_str() {
        "message_start" => {
            chunk.usage = raw
                .message
                .and_then(|m| m.usage)
                .map(|u| u.into_usage(false));
        }
        "content_block_start" => {
            if let Some(block) = raw.content_block {
                match block.kind.as_deref() {
                    Some("tool_use") => {
                        if let Some(name) = block.name.filter(|n| !n.is_empty()) {
                            chunk.tool_calls.push(ToolCallDelta {
                                index: raw.index,
                                name,
                                arguments: String::new(),
                            });
                        }
                    }
                    Some("text") => chunk.content = block.text.unwrap_or_default(),
                    _ => {}
                }
            }
        }
        "content_block_delta" => {
            if let Some(d) = raw.delta {
                match d.kind.as_deref() {
                    Some("text_delta") => chunk.content = d.text.unwrap_or_default(),
                    Some("thinking_delta") => chunk.reasoning = d.thinking.unwrap_or_default(),
                    Some("input_json_delta") => {
                        if let Some(piece) = d.partial_json.filter(|j| !j.is_empty()) {
                            chunk.tool_calls.push(ToolCallDelta {
                                index: raw.index,
                                name: String::new(),
                                arguments: piece,
                            });
                        }
                    }
                    _ => {}
                }
            }
        }
        "message_delta" => {
            chunk.finish_reason = raw.delta.and_then(|d| d.stop_reason);
            chunk.usage = raw.usage.map(|u| u.into_usage(true));
        }
        "message_stop" => chunk.ends_stream = true,
        "error" => {
            let value: serde_json::Value =
                serde_json::from_str(data).map_err(|e| ChunkError::malformed(e, data))?;
            return Ok(StreamItem::Error(error_from_value(value)));
        }
        _ => {}
    }
    Ok(StreamItem::Chunk(chunk))
}

/// What a Messages API server writes (the simulated server's stream).
pub mod encode {
    use crate::wire::Usage;

    fn event(kind: &str, data: serde_json::Value) -> String {
        format!("event: {kind}\ndata: {data}\n\n")
    }

    /// `message_start`, with the prompt's usage (cached tokens apart).
    pub fn start(id: u64, model: &str, prompt_tokens: u64, cached_tokens: Option<u64>) -> String {
        let mut usage = serde_json::json!({
            "input_tokens": prompt_tokens - cached_tokens.unwrap_or(0).min(prompt_tokens),
            "output_tokens": 0,
        });
        if let Some(c) = cached_tokens {
            usage["cache_read_input_tokens"] = c.into();
            usage["cache_creation_input_tokens"] = 0.into();
        }
        event(
            "message_start",
            serde_json::json!({"type": "message_start", "message": {
                "id": format!("msg_{id}"), "type": "message", "role": "assistant", "content": [],
                "model": model, "stop_reason": null, "stop_sequence": null, "usage": usage,
            }}),
        )
    }

    /// A content block opens: `thinking` (reasoning) or `text`.
    pub fn block_start(index: u32, thinking: bool) -> String {
        let block = if thinking {
            serde_json::json!({"type": "thinking", "thinking": ""})
        } else {
            serde_json::json!({"type": "text", "text": ""})
        };
        event(
            "content_block_start",
            serde_json::json!({"type": "content_block_start", "index": index, "content_block": block}),
        )
    }

    /// One delta of the open block.
    pub fn delta(index: u32, thinking: bool, text: &str) -> String {
        let delta = if thinking {
            serde_json::json!({"type": "thinking_delta", "thinking": text})
        } else {
            serde_json::json!({"type": "text_delta", "text": text})
        };
        event(
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": index, "delta": delta}),
        )
    }

    /// The open block closes.
    pub fn block_stop(index: u32) -> String {
        event(
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": index}),
        )
    }

    /// `message_delta` (stopped at `max_tokens`, the simulator's only stop, with
    /// the output's usage) and `message_stop`.
    pub fn finish(usage: &Usage) -> String {
        let mut out = event(
            "message_delta",
            serde_json::json!({"type": "message_delta",
                "delta": {"stop_reason": "max_tokens", "stop_sequence": null},
                "usage": {"output_tokens": usage.completion_tokens.unwrap_or(0)}}),
        );
        out.push_str(&event(
            "message_stop",
            serde_json::json!({"type": "message_stop"}),
        ));
        out
    }

    /// An `error` event (the stream ends after it).
    pub fn error(message: &str, kind: &str) -> String {
        event(
            "error",
            serde_json::json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }
}
