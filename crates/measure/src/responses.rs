//! The OpenAI Responses API (`POST {base}/responses`): its request body and its
//! stream of named events, read into the same [`Chunk`]s as chat's.
//!
//! Every event names its type twice (`event:` and the data's `type`). What
//! counts as a token: `response.output_text.delta` and `response.refusal.delta`
//! (answer text), `response.reasoning_text.delta` and
//! `response.reasoning_summary_text.delta` (reasoning), a function call's name
//! (`response.output_item.added` with a `function_call` item) and
//! `response.function_call_arguments.delta` (tool-call deltas). The stream ends
//! with `response.completed` or `response.incomplete` (which carry `usage`; no
//! `[DONE]` follows), or fails with `response.failed` or an `error` event.

use serde::Deserialize;

use crate::wire::{
    Chunk, ChunkError, CompletionTokensDetails, PromptTokensDetails, RequestSpec, ServerTimings,
    StreamError, StreamItem, ToolCallDelta, Usage, error_from_value,
};

/// Whether an event type belongs to this API.
pub fn is_event(kind: &str) -> bool {
    kind.starts_with("response.")
}

/// The request body: the system prompt as `instructions`, the conversation (or
/// the prompt as one user message) as `input`, `max_output_tokens`.
pub fn request_body(spec: &RequestSpec) -> serde_json::Map<String, serde_json::Value> {
    let mut body = serde_json::Map::new();
    if let Some(system) = &spec.system {
        body.insert("instructions".into(), system.clone().into());
    }
    body.insert("input".into(), crate::wire::conversation(spec).into());
    body.insert("max_output_tokens".into(), spec.max_tokens.into());
    crate::tools::insert(spec, &mut body);
    body
}

#[derive(Deserialize)]
struct RawEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    delta: Option<serde_json::Value>,
    #[serde(default)]
    item: Option<RawItem>,
    #[serde(default)]
    output_index: Option<u32>,
    #[serde(default)]
    response: Option<RawResponse>,
    /// llama.cpp's own timings, beside `response` in `response.completed`.
    #[serde(default)]
    timings: Option<ServerTimings>,
    #[serde(default)]
    code: Option<serde_json::Value>,
    #[serde(default)]
    message: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawItem {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct RawResponse {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    incomplete_details: Option<RawIncomplete>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawIncomplete {
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_details: Option<RawInputDetails>,
    #[serde(default)]
    output_tokens_details: Option<RawOutputDetails>,
}

#[derive(Deserialize)]
struct RawInputDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct RawOutputDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl From<RawUsage> for Usage {
    fn from(u: RawUsage) -> Self {
        Usage {
            prompt_tokens: u.input_tokens,
            completion_tokens: u.output_tokens,
            completion_tokens_details: u
                .output_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .map(|r| CompletionTokensDetails {
                    reasoning_tokens: Some(r),
                }),
            prompt_tokens_details: u
                .input_tokens_details
                .and_then(|d| d.cached_tokens)
                .map(|c| PromptTokensDetails {
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
    // Read as text only where it is (a delta of another kind, in an event this
    // parser does not count, is no reason to fail the request).
    let delta = raw
        .delta
        .as_ref()
        .and_then(|d| d.as_str())
        .unwrap_or_default()
        .to_owned();
    match raw.kind.as_str() {
        "response.output_text.delta" | "response.refusal.delta" => chunk.content = delta,
        "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
            chunk.reasoning = delta
        }
        "response.function_call_arguments.delta" if !delta.is_empty() => {
            chunk.tool_calls.push(ToolCallDelta {
                index: raw.output_index,
                name: String::new(),
                arguments: delta,
            });
        }
        "response.output_item.added" => {
            if let Some(RawItem {
                kind: Some(kind),
                name: Some(name),
            }) = raw.item
                && kind == "function_call"
                && !name.is_empty()
            {
                chunk.tool_calls.push(ToolCallDelta {
                    index: raw.output_index,
                    name,
                    arguments: String::new(),
                });
            }
        }
        "response.completed" | "response.incomplete" => {
            let response = raw.response.ok_or_else(|| ChunkError::Malformed {
                reason: format!("{} without its response", raw.kind),
                prefix: crate::wire::prefix(data),
            })?;
            chunk.usage = response.usage.map(Usage::from);
            chunk.finish_reason = response
                .incomplete_details
                .and_then(|d| d.reason)
                .or(response.status)
                .or_else(|| Some(raw.kind.trim_start_matches("response.").to_owned()));
            chunk.timings = raw.timings.map(Box::new);
            chunk.ends_stream = true;
        }
        "response.failed" => {
            let err = raw.response.and_then(|r| r.error);
            return Ok(StreamItem::Error(match err {
                Some(e) => error_from_value(e),
                None => StreamError {
                    message: "the response failed".into(),
                    code: None,
                },
            }));
        }
        "error" => {
            return Ok(StreamItem::Error(StreamError {
                message: match raw.message {
                    Some(serde_json::Value::String(s)) => s,
                    Some(other) if !other.is_null() => other.to_string(),
                    _ => "error".into(),
                },
                code: raw.code.filter(|c| !c.is_null()).map(|c| match c {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                }),
            }));
        }
        _ => {}
    }
    Ok(StreamItem::Chunk(chunk))
}

/// What a Responses API server writes (the simulated server's stream).
pub mod encode {
    use crate::wire::Usage;

    fn event(kind: &str, data: serde_json::Value) -> String {
        format!("event: {kind}\ndata: {data}\n\n")
    }

    fn response(id: u64, model: &str, status: &str) -> serde_json::Value {
        serde_json::json!({
            "id": format!("resp_{id}"), "object": "response", "created_at": 0,
            "status": status, "model": model, "output": [],
        })
    }

    /// `response.created`, `response.in_progress`, and the message item and
    /// text part the deltas go to.
    pub fn start(id: u64, model: &str) -> String {
        let mut out = event(
            "response.created",
            serde_json::json!({"type": "response.created", "response": response(id, model, "in_progress")}),
        );
        out.push_str(&event(
            "response.in_progress",
            serde_json::json!({"type": "response.in_progress", "response": response(id, model, "in_progress")}),
        ));
        out
    }

    /// The item a kind of delta goes to opens (`message` for text,
    /// `reasoning` for reasoning), at `output_index`.
    pub fn item_added(id: u64, output_index: u32, reasoning: bool) -> String {
        let item = if reasoning {
            serde_json::json!({"type": "reasoning", "id": format!("rs_{id}"), "summary": []})
        } else {
            serde_json::json!({"type": "message", "id": format!("msg_{id}"), "status": "in_progress", "role": "assistant", "content": []})
        };
        let mut out = event(
            "response.output_item.added",
            serde_json::json!({"type": "response.output_item.added", "output_index": output_index, "item": item}),
        );
        if !reasoning {
            out.push_str(&event(
                "response.content_part.added",
                serde_json::json!({"type": "response.content_part.added", "item_id": format!("msg_{id}"), "output_index": output_index, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
            ));
        }
        out
    }

    /// One text delta.
    pub fn text_delta(id: u64, output_index: u32, text: &str) -> String {
        event(
            "response.output_text.delta",
            serde_json::json!({"type": "response.output_text.delta", "item_id": format!("msg_{id}"), "output_index": output_index, "content_index": 0, "delta": text}),
        )
    }

    /// One reasoning delta (`response.reasoning_text.delta`, as llama.cpp and
    /// vLLM send the model's own reasoning).
    pub fn reasoning_delta(id: u64, output_index: u32, text: &str) -> String {
        event(
            "response.reasoning_text.delta",
            serde_json::json!({"type": "response.reasoning_text.delta", "item_id": format!("rs_{id}"), "output_index": output_index, "content_index": 0, "delta": text}),
        )
    }

    /// The end: the message item done, then `response.incomplete` (stopped at
    /// `max_output_tokens`, the simulator's only stop) with `usage`.
    pub fn finish(id: u64, model: &str, output_index: u32, usage: &Usage) -> String {
        let mut out = event(
            "response.output_item.done",
            serde_json::json!({"type": "response.output_item.done", "output_index": output_index, "item": {"type": "message", "id": format!("msg_{id}"), "status": "incomplete", "role": "assistant"}}),
        );
        let mut resp = response(id, model, "incomplete");
        resp["incomplete_details"] = serde_json::json!({"reason": "max_output_tokens"});
        let mut u = serde_json::json!({
            "input_tokens": usage.prompt_tokens.unwrap_or(0),
            "output_tokens": usage.completion_tokens.unwrap_or(0),
            "total_tokens": usage.prompt_tokens.unwrap_or(0) + usage.completion_tokens.unwrap_or(0),
            "input_tokens_details": {"cached_tokens": usage.cached_tokens().unwrap_or(0)},
        });
        if let Some(r) = usage.reasoning_tokens() {
            u["output_tokens_details"] = serde_json::json!({ "reasoning_tokens": r });
        }
        resp["usage"] = u;
        out.push_str(&event(
            "response.incomplete",
            serde_json::json!({"type": "response.incomplete", "response": resp}),
        ));
        out
    }

    /// An `error` event (the stream ends after it).
    pub fn error(message: &str, code: &str) -> String {
        event(
            "error",
            serde_json::json!({"type": "error", "code": code, "message": message, "param": null}),
        )
    }
}
