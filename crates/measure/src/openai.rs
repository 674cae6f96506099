//! The OpenAI-compatible streaming wire format: request bodies, stream chunks,
//! in-stream errors and `[DONE]`, for both `/v1/chat/completions` and `/v1/completions`.
//!
//! Parsing is tolerant of what real servers send (llama.cpp, vLLM, SGLang, Ollama,
//! hosted APIs): unknown fields are ignored, `null`s are accepted where a field is
//! optional, and a chunk only counts as carrying a token when it carries generated
//! content — text, reasoning text, or a tool-call delta. A role-only delta
//! (`{"role":"assistant"}` / `"content": null`) or an empty string is **not** a token
//! (see the metric definitions in `docs/metrics.md`).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Which endpoint a benchmark talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `POST {base}/chat/completions` with `messages`.
    #[default]
    Chat,
    /// `POST {base}/completions` with `prompt`.
    Completions,
}

impl Api {
    /// Path below the `/v1` base URL.
    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "chat/completions",
            Api::Completions => "completions",
        }
    }

    /// Parse `chat` or `completions`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "chat" => Some(Api::Chat),
            "completions" | "completion" => Some(Api::Completions),
            _ => None,
        }
    }

    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Completions => "completions",
        }
    }
}

/// One chat message a request sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// What a benchmark request asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestSpec {
    /// Endpoint kind.
    pub api: Api,
    /// Model name sent in the body.
    pub model: String,
    /// A system prompt shared by every request (`--shared-prefix`): a system
    /// message before the user's for chat, the prompt's first words for
    /// completions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The prompt (sent as one user message for chat).
    pub prompt: String,
    /// A conversation to send instead of `prompt` to a chat endpoint (a dataset's
    /// `messages`); a completions endpoint gets `prompt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<ChatMessage>>,
    /// `max_tokens`.
    pub max_tokens: u32,
    /// Send `ignore_eos: true` (llama.cpp, vLLM) so every response is `max_tokens` long.
    pub ignore_eos: bool,
    /// Send `min_tokens` (vLLM) with this value.
    pub min_tokens: Option<u32>,
    /// Sampling temperature, when set.
    pub temperature: Option<f64>,
}

/// The JSON body of a streaming request, with `stream_options.include_usage` so the
/// server reports exact token counts.
pub fn request_body(spec: &RequestSpec) -> serde_json::Value {
    let mut body = serde_json::Map::new();
    body.insert("model".into(), spec.model.clone().into());
    match spec.api {
        Api::Chat => {
            let mut messages = Vec::new();
            if let Some(system) = &spec.system {
                messages.push(serde_json::json!({ "role": "system", "content": system }));
            }
            match &spec.messages {
                Some(conversation) => messages.extend(
                    conversation
                        .iter()
                        .map(|m| serde_json::json!({ "role": m.role, "content": m.content })),
                ),
                None => {
                    messages.push(serde_json::json!({ "role": "user", "content": spec.prompt }))
                }
            }
            body.insert("messages".into(), messages.into());
        }
        Api::Completions => {
            let prompt = match &spec.system {
                Some(system) => format!("{system} {}", spec.prompt),
                None => spec.prompt.clone(),
            };
            body.insert("prompt".into(), prompt.into());
        }
    }
    body.insert("max_tokens".into(), spec.max_tokens.into());
    body.insert("stream".into(), true.into());
    body.insert(
        "stream_options".into(),
        serde_json::json!({ "include_usage": true }),
    );
    if spec.ignore_eos {
        body.insert("ignore_eos".into(), true.into());
    }
    if let Some(min) = spec.min_tokens {
        body.insert("min_tokens".into(), min.into());
    }
    if let Some(t) = spec.temperature {
        body.insert("temperature".into(), t.into());
    }
    serde_json::Value::Object(body)
}

/// Token counts reported by the server (`usage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Usage {
    /// Tokens in the prompt.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Tokens generated.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// Of those, the reasoning tokens (`completion_tokens_details.reasoning_tokens`:
    /// OpenAI, vLLM, SGLang with a reasoning parser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
    /// Of the prompt's tokens, those served from the server's prefix cache
    /// (`prompt_tokens_details.cached_tokens`: OpenAI, vLLM, llama.cpp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PromptTokensDetails {
    /// Prompt tokens the server did not compute again (its prefix cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CompletionTokensDetails {
    /// Reasoning tokens among the completion tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// The reasoning tokens the server reported.
    pub fn reasoning_tokens(&self) -> Option<u64> {
        self.completion_tokens_details?.reasoning_tokens
    }

    /// The prompt tokens the server said came from its cache.
    pub fn cached_tokens(&self) -> Option<u64> {
        self.prompt_tokens_details?.cached_tokens
    }
}

/// llama.cpp's own per-request timings, sent in its final chunk (`timings`): the
/// server-side figures to reconcile client measurements against.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct ServerTimings {
    /// Prompt tokens taken from the slot's cache (not evaluated again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_n: Option<u64>,
    /// Prompt tokens evaluated (excluding cached ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_n: Option<u64>,
    /// Prompt evaluation time, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_ms: Option<f64>,
    /// Tokens generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_n: Option<u64>,
    /// Generation time, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ms: Option<f64>,
    /// Generation time per token, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_per_token_ms: Option<f64>,
}

/// An error object sent inside the stream (`data: {"error": {...}}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamError {
    /// The error message.
    pub message: String,
    /// `type` or `code`, whichever the server sent, as text.
    pub code: Option<String>,
}

/// What one SSE event's data means.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// `data: [DONE]`.
    Done,
    /// A `chat.completion.chunk` or `text_completion` chunk.
    Chunk(Chunk),
    /// An error object sent inside the stream.
    Error(StreamError),
}

/// The parts of a stream chunk a benchmark needs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chunk {
    /// Generated text (`delta.content` or `text`) of all choices, concatenated.
    pub content: String,
    /// Reasoning text (`delta.reasoning_content` or `delta.reasoning`).
    pub reasoning: String,
    /// Tool-call deltas that carry a function name or argument text.
    pub tool_call_deltas: u32,
    /// The last non-null `finish_reason`.
    pub finish_reason: Option<String>,
    /// `usage`, when the chunk carries it.
    pub usage: Option<Usage>,
    /// llama.cpp's `timings`, when present.
    pub timings: Option<ServerTimings>,
}

impl Chunk {
    /// Whether this chunk carries generated content (text, reasoning or a tool-call
    /// delta). Role-only and empty deltas do not.
    pub fn carries_token(&self) -> bool {
        !self.content.is_empty() || !self.reasoning.is_empty() || self.tool_call_deltas > 0
    }

    /// Characters of generated text (content + reasoning).
    pub fn text_chars(&self) -> usize {
        self.content.chars().count() + self.reasoning.chars().count()
    }
}

/// Why an event's data could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChunkError {
    /// The data is not valid JSON (or not the JSON a chunk has).
    #[error("malformed stream chunk: {reason} (data starts with {prefix:?})")]
    Malformed {
        /// serde_json's message.
        reason: String,
        /// The first characters of the data, for the error report.
        prefix: String,
    },
}

#[derive(Deserialize)]
struct RawChunk {
    #[serde(default)]
    choices: Option<Vec<RawChoice>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    timings: Option<ServerTimings>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawChoice {
    #[serde(default)]
    delta: Option<RawDelta>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct RawDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<RawToolCall>>,
}

#[derive(Deserialize)]
struct RawToolCall {
    #[serde(default)]
    function: Option<RawFunction>,
}

#[derive(Deserialize)]
struct RawFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

fn prefix(data: &str) -> String {
    data.chars().take(60).collect()
}

/// Interpret one SSE event (its `event:` type and `data`).
///
/// An `event: error` event is an error whatever its data; `[DONE]` (surrounding
/// whitespace allowed) ends the stream; anything else must be a JSON chunk.
pub fn parse_event(event_type: &str, data: &str) -> Result<StreamItem, ChunkError> {
    let trimmed = data.trim();
    if trimmed == "[DONE]" {
        return Ok(StreamItem::Done);
    }
    if trimmed.is_empty() && event_type != "error" {
        // An empty `data:` (a keep-alive some proxies send) carries nothing.
        return Ok(StreamItem::Chunk(Chunk::default()));
    }
    if event_type == "error" {
        return Ok(StreamItem::Error(error_from_value(
            serde_json::from_str::<serde_json::Value>(trimmed)
                .unwrap_or_else(|_| serde_json::Value::String(trimmed.to_owned())),
        )));
    }
    let raw: RawChunk = serde_json::from_str(trimmed).map_err(|e| ChunkError::Malformed {
        reason: e.to_string(),
        prefix: prefix(trimmed),
    })?;
    if let Some(err) = raw.error {
        return Ok(StreamItem::Error(error_from_value(err)));
    }
    let mut chunk = Chunk {
        usage: raw.usage,
        timings: raw.timings,
        ..Chunk::default()
    };
    for choice in raw.choices.unwrap_or_default() {
        if let Some(text) = choice.text {
            chunk.content.push_str(&text);
        }
        if let Some(delta) = choice.delta {
            if let Some(c) = delta.content {
                chunk.content.push_str(&c);
            }
            if let Some(r) = delta.reasoning_content.or(delta.reasoning) {
                chunk.reasoning.push_str(&r);
            }
            for call in delta.tool_calls.unwrap_or_default() {
                if let Some(f) = call.function {
                    let has_name = f.name.is_some_and(|n| !n.is_empty());
                    let has_args = f.arguments.is_some_and(|a| !a.is_empty());
                    if has_name || has_args {
                        chunk.tool_call_deltas += 1;
                    }
                }
            }
        }
        if choice.finish_reason.is_some() {
            chunk.finish_reason = choice.finish_reason;
        }
    }
    Ok(StreamItem::Chunk(chunk))
}

/// Turn an `error` value (object, or plain string) into a [`StreamError`].
pub fn error_from_value(value: serde_json::Value) -> StreamError {
    let obj = match value {
        serde_json::Value::Object(mut map) => match map.remove("error") {
            Some(inner) => inner,
            None => serde_json::Value::Object(map),
        },
        other => other,
    };
    match obj {
        serde_json::Value::Object(map) => {
            let message = map
                .get("message")
                .map(value_text)
                .unwrap_or_else(|| "error".to_owned());
            let code = map
                .get("type")
                .or_else(|| map.get("code"))
                .filter(|v| !v.is_null())
                .map(value_text);
            StreamError { message, code }
        }
        other => StreamError {
            message: value_text(&other),
            code: None,
        },
    }
}

fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The model ids in a `GET /v1/models` answer (OpenAI's `data[].id`; Ollama-style
/// `models[].name` or `.model` when there is no `data`); `None` if none is listed.
pub fn model_ids(models_json: &str) -> Option<Vec<String>> {
    let v: serde_json::Value = serde_json::from_str(models_json).ok()?;
    let list = |key: &str, fields: &[&str]| -> Vec<String> {
        v.get(key)
            .and_then(|d| d.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|m| fields.iter().find_map(|f| m.get(*f)?.as_str()))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut ids = list("data", &["id"]);
    if ids.is_empty() {
        ids = list("models", &["name", "model"]);
    }
    (!ids.is_empty()).then_some(ids)
}

/// The first model id in a `GET /v1/models` answer ([`model_ids`]).
pub fn first_model_id(models_json: &str) -> Option<String> {
    model_ids(models_json)?.into_iter().next()
}

/// Encoders for the wire format: what an OpenAI-compatible server writes. Used by
/// the simulated server (`tokenscope mock`, and the page's built-in simulator).
pub mod encode {
    use super::{Api, Usage};

    /// One streamed content chunk as an SSE event (`data: {...}\n\n`).
    pub fn content_event(api: Api, id: u64, model: &str, text: &str, created_s: u64) -> String {
        let text = serde_json::Value::String(text.to_owned());
        match api {
            Api::Chat => format!(
                "data: {{\"id\":\"chatcmpl-{id}\",\"object\":\"chat.completion.chunk\",\"created\":{created_s},\"model\":{model},\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{text}}},\"finish_reason\":null}}]}}\n\n",
                model = json_str(model)
            ),
            Api::Completions => format!(
                "data: {{\"id\":\"cmpl-{id}\",\"object\":\"text_completion\",\"created\":{created_s},\"model\":{model},\"choices\":[{{\"index\":0,\"text\":{text},\"finish_reason\":null}}]}}\n\n",
                model = json_str(model)
            ),
        }
    }

    /// A chat chunk carrying reasoning text (`delta.reasoning_content`, as vLLM's
    /// and SGLang's reasoning parsers and DeepSeek's API send it).
    pub fn reasoning_event(id: u64, model: &str, text: &str, created_s: u64) -> String {
        let text = serde_json::Value::String(text.to_owned());
        format!(
            "data: {{\"id\":\"chatcmpl-{id}\",\"object\":\"chat.completion.chunk\",\"created\":{created_s},\"model\":{model},\"choices\":[{{\"index\":0,\"delta\":{{\"reasoning_content\":{text}}},\"finish_reason\":null}}]}}\n\n",
            model = json_str(model)
        )
    }

    /// The role-only first chunk chat servers send (not a token).
    pub fn role_event(id: u64, model: &str, created_s: u64) -> String {
        format!(
            "data: {{\"id\":\"chatcmpl-{id}\",\"object\":\"chat.completion.chunk\",\"created\":{created_s},\"model\":{model},\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":null}},\"finish_reason\":null}}]}}\n\n",
            model = json_str(model)
        )
    }

    /// The chunk carrying `finish_reason`.
    pub fn finish_event(api: Api, id: u64, model: &str, reason: &str, created_s: u64) -> String {
        let reason = json_str(reason);
        match api {
            Api::Chat => format!(
                "data: {{\"id\":\"chatcmpl-{id}\",\"object\":\"chat.completion.chunk\",\"created\":{created_s},\"model\":{model},\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":{reason}}}]}}\n\n",
                model = json_str(model)
            ),
            Api::Completions => format!(
                "data: {{\"id\":\"cmpl-{id}\",\"object\":\"text_completion\",\"created\":{created_s},\"model\":{model},\"choices\":[{{\"index\":0,\"text\":\"\",\"finish_reason\":{reason}}}]}}\n\n",
                model = json_str(model)
            ),
        }
    }

    /// The usage chunk (`choices: []`), sent when the request asked for it.
    pub fn usage_event(api: Api, id: u64, model: &str, usage: &Usage, created_s: u64) -> String {
        let (prefix, object) = match api {
            Api::Chat => ("chatcmpl", "chat.completion.chunk"),
            Api::Completions => ("cmpl", "text_completion"),
        };
        let prompt_tokens = usage.prompt_tokens.unwrap_or(0);
        let completion_tokens = usage.completion_tokens.unwrap_or(0);
        let mut details = usage
            .reasoning_tokens()
            .map(|r| format!(",\"completion_tokens_details\":{{\"reasoning_tokens\":{r}}}"))
            .unwrap_or_default();
        if let Some(c) = usage.cached_tokens() {
            details.push_str(&format!(
                ",\"prompt_tokens_details\":{{\"cached_tokens\":{c}}}"
            ));
        }
        format!(
            "data: {{\"id\":\"{prefix}-{id}\",\"object\":\"{object}\",\"created\":{created_s},\"model\":{model},\"choices\":[],\"usage\":{{\"prompt_tokens\":{prompt_tokens},\"completion_tokens\":{completion_tokens},\"total_tokens\":{total}{details}}}}}\n\n",
            model = json_str(model),
            total = prompt_tokens + completion_tokens
        )
    }

    /// An error object sent inside the stream.
    pub fn error_event(message: &str, kind: &str) -> String {
        format!(
            "data: {{\"error\":{{\"message\":{},\"type\":{}}}}}\n\n",
            json_str(message),
            json_str(kind)
        )
    }

    /// The terminator.
    pub const DONE_EVENT: &str = "data: [DONE]\n\n";

    /// An OpenAI-style error body for non-2xx answers.
    pub fn error_body(message: &str, kind: &str, code: u16) -> String {
        format!(
            "{{\"error\":{{\"message\":{},\"type\":{},\"code\":{code}}}}}",
            json_str(message),
            json_str(kind)
        )
    }

    /// `GET /v1/models` answer listing one model, with its context window as
    /// vLLM gives it (`max_model_len`).
    pub fn models_body(model: &str, max_model_len: u64) -> String {
        format!(
            "{{\"object\":\"list\",\"data\":[{{\"id\":{},\"object\":\"model\",\"created\":0,\"owned_by\":\"tokenscope\",\"max_model_len\":{max_model_len}}}]}}",
            json_str(model)
        )
    }

    fn json_str(s: &str) -> String {
        serde_json::Value::String(s.to_owned()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(data: &str) -> Chunk {
        match parse_event("message", data).unwrap() {
            StreamItem::Chunk(c) => c,
            other => panic!("expected a chunk, got {other:?}"),
        }
    }

    #[test]
    fn role_only_and_null_content_is_not_a_token() {
        let c = chunk(
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}"#,
        );
        assert!(!c.carries_token());
        let c = chunk(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#);
        assert!(!c.carries_token());
    }

    #[test]
    fn content_reasoning_and_tool_calls_are_tokens() {
        assert_eq!(
            chunk(r#"{"choices":[{"delta":{"content":"Hi"}}]}"#).content,
            "Hi"
        );
        assert!(chunk(r#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#).carries_token());
        assert!(chunk(r#"{"choices":[{"delta":{"reasoning":"hm"}}]}"#).carries_token());
        let c = chunk(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}"#,
        );
        assert_eq!(c.tool_call_deltas, 1);
        let c = chunk(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}"#,
        );
        assert!(!c.carries_token());
    }

    #[test]
    fn completions_text() {
        assert!(chunk(r#"{"choices":[{"text":" two","finish_reason":null}]}"#).carries_token());
        assert!(!chunk(r#"{"choices":[{"text":"","finish_reason":null}]}"#).carries_token());
    }

    #[test]
    fn usage_chunk_and_timings() {
        let c = chunk(
            r#"{"choices":[],"usage":{"completion_tokens":10,"prompt_tokens":26,"total_tokens":36},"timings":{"prompt_ms":89.9,"predicted_per_token_ms":19.7}}"#,
        );
        assert!(!c.carries_token());
        assert_eq!(c.usage.unwrap().completion_tokens, Some(10));
        assert_eq!(c.timings.unwrap().predicted_per_token_ms, Some(19.7));
        let c = chunk(r#"{"choices":[{"delta":{"content":"x"}}],"usage":null}"#);
        assert_eq!(c.usage, None);
    }

    #[test]
    fn done_and_errors() {
        assert_eq!(
            parse_event("message", " [DONE] ").unwrap(),
            StreamItem::Done
        );
        let e = parse_event(
            "message",
            r#"{"error": {"message": "backend overloaded", "type": "server_error", "code": 503}}"#,
        )
        .unwrap();
        assert_eq!(
            e,
            StreamItem::Error(StreamError {
                message: "backend overloaded".into(),
                code: Some("server_error".into())
            })
        );
        match parse_event("error", "boom").unwrap() {
            StreamItem::Error(e) => assert_eq!(e.message, "boom"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_json_is_an_error() {
        let err = parse_event("message", r#"{"choices": [ {"delta": "#).unwrap_err();
        assert!(err.to_string().contains("malformed stream chunk"));
    }

    #[test]
    fn models_list() {
        let llama = include_str!("../../../tests/fixtures/sse/llama-server-models.json");
        assert_eq!(first_model_id(llama).as_deref(), Some("gemma-3-270m"));
        assert_eq!(
            first_model_id(&encode::models_body("sim", 4096)).as_deref(),
            Some("sim")
        );
        assert_eq!(first_model_id("{}"), None);
        assert_eq!(
            model_ids(r#"{"data":[{"id":"a"},{"id":"b"}]}"#),
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(
            model_ids(r#"{"models":[{"name":"x"},{"model":"y"}]}"#),
            Some(vec!["x".to_owned(), "y".to_owned()])
        );
        assert_eq!(model_ids(r#"{"data":[]}"#), None);
    }

    #[test]
    fn encoded_events_parse_back() {
        for api in [Api::Chat, Api::Completions] {
            let ev = encode::content_event(api, 1, "m\"x", "a \"quoted\"\n", 0);
            let events = crate::sse::decode_all(ev.as_bytes()).unwrap();
            assert_eq!(chunk(&events[0].data).content, "a \"quoted\"\n");
            let usage = Usage {
                prompt_tokens: Some(5),
                completion_tokens: Some(7),
                ..Usage::default()
            };
            let ev = encode::usage_event(api, 1, "m", &usage, 0);
            let events = crate::sse::decode_all(ev.as_bytes()).unwrap();
            assert_eq!(
                chunk(&events[0].data).usage.unwrap().completion_tokens,
                Some(7)
            );
            let ev = encode::finish_event(api, 1, "m", "length", 0);
            let events = crate::sse::decode_all(ev.as_bytes()).unwrap();
            assert_eq!(
                chunk(&events[0].data).finish_reason.as_deref(),
                Some("length")
            );
        }
        let events = crate::sse::decode_all(encode::role_event(1, "m", 0).as_bytes()).unwrap();
        assert!(!chunk(&events[0].data).carries_token());
    }

    #[test]
    fn request_body_shapes() {
        let spec = RequestSpec {
            system: None,
            messages: None,
            api: Api::Completions,
            model: "m".into(),
            prompt: "p".into(),
            max_tokens: 8,
            ignore_eos: true,
            min_tokens: Some(8),
            temperature: None,
        };
        let b = request_body(&spec);
        assert_eq!(b["prompt"], "p");
        assert_eq!(b["ignore_eos"], true);
        assert_eq!(b["min_tokens"], 8);
        assert_eq!(b["stream_options"]["include_usage"], true);
        let b = request_body(&RequestSpec {
            system: None,
            messages: None,
            api: Api::Chat,
            ignore_eos: false,
            min_tokens: None,
            ..spec
        });
        assert_eq!(b["messages"][0]["content"], "p");
        assert!(b.get("ignore_eos").is_none());
    }
}
