//! The streaming wire formats: request bodies, stream chunks, in-stream errors
//! and the stream's end, for OpenAI's `/v1/chat/completions` and
//! `/v1/completions` here, and (read into the same [`Chunk`]s) the Responses API
//! ([`crate::responses`]) and Anthropic's Messages API ([`crate::messages`]).
//! [`parse_event`] reads all four: the two newer APIs name every event.
//!
//! Parsing is tolerant of what real servers send (llama.cpp, vLLM, SGLang, Ollama,
//! hosted APIs): unknown fields are ignored, `null`s are accepted where a field is
//! optional, and a chunk only counts as carrying a token when it carries generated
//! content — text, reasoning text, or a tool-call delta. A role-only delta
//! (`{"role":"assistant"}` / `"content": null`) or an empty string is **not** a token
//! (see the metric definitions in `docs/metrics.md`).

use serde::Deserialize;

use crate::wire::conversation;
pub use crate::wire::{
    Api, ChatMessage, Chunk, ChunkError, CompletionTokensDetails, ImagePart, PromptTokensDetails,
    RequestSpec, ServerTimings, StreamError, StreamItem, Tool, ToolCallDelta, ToolChoice, Usage,
    error_from_value,
};

/// The JSON body of a streaming request. Chat and completions ask for
/// `stream_options.include_usage` so the server reports exact token counts (the
/// Responses and Messages APIs always do).
pub fn request_body(spec: &RequestSpec) -> serde_json::Value {
    let mut body = serde_json::Map::new();
    body.insert("model".into(), spec.model.clone().into());
    match spec.api {
        Api::Chat => {
            let mut messages = Vec::new();
            if let Some(system) = &spec.system {
                messages.push(serde_json::json!({ "role": "system", "content": system }));
            }
            messages.extend(conversation(spec));
            body.insert("messages".into(), messages.into());
        }
        Api::Completions => {
            let prompt = match &spec.system {
                Some(system) => format!("{system} {}", spec.prompt),
                None => spec.prompt.clone(),
            };
            body.insert("prompt".into(), prompt.into());
        }
        Api::Responses => body.extend(crate::responses::request_body(spec)),
        Api::Messages => body.extend(crate::messages::request_body(spec)),
    }
    if matches!(spec.api, Api::Chat | Api::Completions) {
        body.insert("max_tokens".into(), spec.max_tokens.into());
    }
    body.insert("stream".into(), true.into());
    if matches!(spec.api, Api::Chat | Api::Completions) {
        let mut options = serde_json::json!({ "include_usage": true });
        if spec.continuous_usage {
            options["continuous_usage_stats"] = true.into();
        }
        body.insert("stream_options".into(), options);
    }
    if spec.ignore_eos {
        body.insert("ignore_eos".into(), true.into());
    }
    if let Some(min) = spec.min_tokens {
        body.insert("min_tokens".into(), min.into());
    }
    if let Some(t) = spec.temperature {
        body.insert("temperature".into(), t.into());
    }
    if spec.api == Api::Chat {
        crate::tools::insert(spec, &mut body);
    }
    serde_json::Value::Object(body)
}

#[derive(Deserialize)]
struct RawChunk {
    /// The Responses and Messages APIs' event type (a stream read without its
    /// `event:` lines).
    #[serde(rename = "type", default)]
    kind: Option<String>,
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
    index: Option<u32>,
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

/// Interpret one SSE event (its `event:` type and `data`), of any of the four APIs.
///
/// An `event: error` event is an error whatever its data; `[DONE]` (surrounding
/// whitespace allowed) ends the stream; anything else must be a JSON chunk. An
/// event the Responses or Messages API names (by `event:`, or by the data's
/// `type` where a proxy dropped the `event:` lines) is read by that API's rules.
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
    if crate::responses::is_event(event_type) {
        return crate::responses::parse(trimmed);
    }
    if crate::messages::is_event(event_type) {
        return crate::messages::parse(trimmed);
    }
    let raw: RawChunk =
        serde_json::from_str(trimmed).map_err(|e| ChunkError::malformed(e, trimmed))?;
    match raw.kind.as_deref() {
        Some(k) if crate::responses::is_event(k) => return crate::responses::parse(trimmed),
        Some(k) if crate::messages::is_event(k) => return crate::messages::parse(trimmed),
        _ => {}
    }
    if let Some(err) = raw.error {
        return Ok(StreamItem::Error(error_from_value(err)));
    }
    let mut chunk = Chunk {
        usage: raw.usage,
        timings: raw.timings.map(Box::new),
        ..Chunk::default()
    };
    if raw.kind.as_deref() == Some("error") {
        // `{"type": "error", ...}` without `event: error` (a proxy dropped it).
        let value = serde_json::from_str(trimmed).map_err(|e| ChunkError::malformed(e, trimmed))?;
        return Ok(StreamItem::Error(error_from_value(value)));
    }
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
                    let name = f.name.unwrap_or_default();
                    let arguments = f.arguments.unwrap_or_default();
                    if !name.is_empty() || !arguments.is_empty() {
                        chunk.tool_calls.push(ToolCallDelta {
                            index: call.index,
                            name,
                            arguments,
                        });
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
/// They write chat's or completions' events; the Responses and Messages APIs
/// have their own ([`crate::responses::encode`], [`crate::messages::encode`]),
/// and given one of those, these write chat's form.
pub mod encode {
    use super::{Api, Usage};

    /// One streamed content chunk as an SSE event (`data: {...}\n\n`).
    /// `running`: the usage so far, sent in the chunk (vLLM's continuous usage
    /// stats) when given.
    pub fn content_event(
        api: Api,
        id: u64,
        model: &str,
        text: &str,
        created_s: u64,
        running: Option<&Usage>,
    ) -> String {
        let text = serde_json::Value::String(text.to_owned());
        let usage = running.map(usage_field).unwrap_or_default();
        match api {
            Api::Chat | Api::Responses | Api::Messages => format!(
                "data: {{\"id\":\"chatcmpl-{id}\",\"object\":\"chat.completion.chunk\",\"created\":{created_s},\"model\":{model},\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{text}}},\"finish_reason\":null}}]{usage}}}\n\n",
                model = json_str(model)
            ),
            Api::Completions => format!(
                "data: {{\"id\":\"cmpl-{id}\",\"object\":\"text_completion\",\"created\":{created_s},\"model\":{model},\"choices\":[{{\"index\":0,\"text\":{text},\"finish_reason\":null}}]{usage}}}\n\n",
                model = json_str(model)
            ),
        }
    }

    /// `,"usage":{...}`: a usage object as a chunk's field.
    fn usage_field(usage: &Usage) -> String {
        let prompt_tokens = usage.prompt_tokens.unwrap_or(0);
        let completion_tokens = usage.completion_tokens.unwrap_or(0);
        format!(
            ",\"usage\":{{\"prompt_tokens\":{prompt_tokens},\"completion_tokens\":{completion_tokens},\"total_tokens\":{}}}",
            prompt_tokens + completion_tokens
        )
    }

    /// A chat chunk carrying reasoning text (`delta.reasoning_content`, as vLLM's
    /// and SGLang's reasoning parsers and DeepSeek's API send it).
    pub fn reasoning_event(
        id: u64,
        model: &str,
        text: &str,
        created_s: u64,
        running: Option<&Usage>,
    ) -> String {
        let text = serde_json::Value::String(text.to_owned());
        let usage = running.map(usage_field).unwrap_or_default();
        format!(
            "data: {{\"id\":\"chatcmpl-{id}\",\"object\":\"chat.completion.chunk\",\"created\":{created_s},\"model\":{model},\"choices\":[{{\"index\":0,\"delta\":{{\"reasoning_content\":{text}}},\"finish_reason\":null}}]{usage}}}\n\n",
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
            Api::Chat | Api::Responses | Api::Messages => format!(
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
            Api::Chat | Api::Responses | Api::Messages => ("chatcmpl", "chat.completion.chunk"),
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
        assert_eq!(c.tool_calls.len(), 1);
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
            let ev = encode::content_event(api, 1, "m\"x", "a \"quoted\"\n", 0, None);
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
            continuous_usage: false,
            tools: Vec::new(),
            tool_choice: None,
            output_schema: None,
            images: Vec::new(),
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

    /// Images go in the last user message, in each API's own shape.
    #[test]
    fn images_go_in_each_apis_shape() {
        let image = crate::wire::ImagePart {
            media_type: "image/png",
            base64: "iVBORw0KGgo=".into(),
        };
        let spec = |api| RequestSpec {
            system: Some("sys".into()),
            messages: None,
            api,
            model: "m".into(),
            prompt: "look".into(),
            max_tokens: 8,
            ignore_eos: false,
            min_tokens: None,
            temperature: None,
            continuous_usage: false,
            tools: Vec::new(),
            tool_choice: None,
            output_schema: None,
            images: vec![image.clone(), image.clone()],
        };
        let url = "data:image/png;base64,iVBORw0KGgo=";
        let chat = request_body(&spec(Api::Chat));
        let content = &chat["messages"][1]["content"];
        assert_eq!(
            chat["messages"][0]["content"], "sys",
            "the system prompt stays text"
        );
        assert_eq!(
            content[0],
            serde_json::json!({"type": "text", "text": "look"})
        );
        assert_eq!(content[1]["image_url"]["url"], url);
        assert_eq!(content[2]["type"], "image_url");
        let responses = request_body(&spec(Api::Responses));
        let content = &responses["input"][0]["content"];
        assert_eq!(
            content[0],
            serde_json::json!({"type": "input_text", "text": "look"})
        );
        assert_eq!(
            content[1],
            serde_json::json!({"type": "input_image", "image_url": url})
        );
        let messages = request_body(&spec(Api::Messages));
        assert_eq!(messages["system"], "sys");
        let content = &messages["messages"][0]["content"];
        assert_eq!(
            content[0],
            serde_json::json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}),
            "images first"
        );
        assert_eq!(
            content[2],
            serde_json::json!({"type": "text", "text": "look"})
        );
    }
}
