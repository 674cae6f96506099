//! The data every API's wire format reads into and is built from: which API,
//! what a request asks for, the server's `usage` and `timings`, and what one
//! stream event means ([`StreamItem`], [`Chunk`]). At the bottom of the wire
//! modules: [`crate::openai`] (chat and completions, and the parser of all
//! four), [`crate::responses`] and [`crate::messages`] build on it.

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
    /// `POST {base}/responses` with `input` (OpenAI's Responses API).
    Responses,
    /// `POST {base}/messages` with `messages` (Anthropic's Messages API).
    Messages,
}

impl Api {
    /// Path below the `/v1` base URL.
    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "chat/completions",
            Api::Completions => "completions",
            Api::Responses => "responses",
            Api::Messages => "messages",
        }
    }

    /// Every API, in the order the CLI and the page list them.
    pub const ALL: [Api; 4] = [Api::Chat, Api::Completions, Api::Responses, Api::Messages];

    /// Parse `chat`, `completions`, `responses` or `messages`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "chat" => Some(Api::Chat),
            "completions" | "completion" => Some(Api::Completions),
            "responses" => Some(Api::Responses),
            "messages" => Some(Api::Messages),
            _ => None,
        }
    }

    /// Whether requests carry a conversation (a list of messages), not one prompt.
    pub fn takes_messages(self) -> bool {
        self != Api::Completions
    }

    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Completions => "completions",
            Api::Responses => "responses",
            Api::Messages => "messages",
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
    /// Ask for a running `usage` in every chunk (vLLM's
    /// `stream_options.continuous_usage_stats`; chat and completions): each
    /// event's own token count, for ITL per token.
    #[serde(default)]
    pub continuous_usage: bool,
    /// Tools offered to the model (`--tools`), sent in the API's own shape.
    /// (Not in the spec's own JSON, which only the page reads: it sends none.)
    #[serde(skip)]
    pub tools: Vec<Tool>,
    /// Which tool the model may or must call (`--tool-choice`); the server's
    /// default (auto) when absent.
    #[serde(skip)]
    pub tool_choice: Option<ToolChoice>,
    /// A JSON schema the answer must follow (`--json-schema`: structured
    /// output, the API's `response_format` or its equivalent).
    #[serde(skip)]
    pub output_schema: Option<serde_json::Value>,
    /// Images sent with the prompt (`--images`), in the last user message in
    /// the API's own shape (chat's `image_url`, the Responses API's
    /// `input_image`, the Messages API's base64 `image` blocks).
    #[serde(skip)]
    pub images: Vec<ImagePart>,
}

/// An image in a prompt: its media type and its bytes in base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImagePart {
    /// `image/png` or `image/jpeg`.
    pub media_type: &'static str,
    /// The encoded image, base64 (standard alphabet, padded).
    pub base64: String,
}

impl ImagePart {
    /// The image as a `data:` URL (chat and the Responses API carry it so).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.base64)
    }
}

/// A function the model may call: its name, what it does, and the JSON schema
/// of its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The function's name.
    pub name: String,
    /// What it does (for the model).
    pub description: String,
    /// The JSON schema its arguments follow.
    pub parameters: serde_json::Value,
}

/// Whether the model may, must or must not call a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (every API's default).
    Auto,
    /// The model must call one of the tools.
    Required,
    /// The model must not call any.
    None,
    /// The model must call this one.
    Named(String),
}

impl ToolChoice {
    /// Parse `auto`, `required`, `none`, or a tool's name.
    pub fn parse(s: &str) -> Self {
        match s.trim() {
            "auto" => ToolChoice::Auto,
            "required" | "any" => ToolChoice::Required,
            "none" => ToolChoice::None,
            name => ToolChoice::Named(name.to_owned()),
        }
    }

    /// `auto`, `required`, `none`, or the tool's name.
    pub fn label(&self) -> &str {
        match self {
            ToolChoice::Auto => "auto",
            ToolChoice::Required => "required",
            ToolChoice::None => "none",
            ToolChoice::Named(name) => name,
        }
    }
}

/// One stream event's piece of a tool call: its name (when this event names
/// it) and the piece of its arguments' JSON text it carries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolCallDelta {
    /// Which call of the answer (chat's `index`, the Responses API's
    /// `output_index`, the Messages API's content block `index`); absent
    /// where the server left it out (the call under way, or a new one when
    /// this delta names one and the call under way has its name).
    pub index: Option<u32>,
    /// The function's name, in the event that names it.
    pub name: String,
    /// A piece of the arguments' JSON text.
    pub arguments: String,
}

/// The conversation a request sends, without the system prompt: a dataset's
/// `messages`, or the prompt as one user message.
pub(crate) fn conversation(spec: &RequestSpec) -> Vec<serde_json::Value> {
    let mut turns: Vec<serde_json::Value> = match &spec.messages {
        Some(conversation) => conversation
            .iter()
            .map(|m| serde_json::json!({ "role": m.role, "content": m.content }))
            .collect(),
        None => vec![serde_json::json!({ "role": "user", "content": spec.prompt })],
    };
    if !spec.images.is_empty()
        && let Some(last) = turns.iter_mut().rev().find(|m| m["role"] == "user")
    {
        let text = last["content"].take();
        last["content"] = with_images(spec.api, text, &spec.images);
    }
    turns
}

/// A user message's content: its text and `images`, as `api` carries them
/// (the Messages API puts images first, as Anthropic advises).
fn with_images(api: Api, text: serde_json::Value, images: &[ImagePart]) -> serde_json::Value {
    use serde_json::json;
    let mut parts: Vec<serde_json::Value> = images
        .iter()
        .map(|i| match api {
            Api::Responses => json!({ "type": "input_image", "image_url": i.data_url() }),
            Api::Messages => json!({
                "type": "image",
                "source": { "type": "base64", "media_type": i.media_type, "data": i.base64 },
            }),
            Api::Chat | Api::Completions => {
                json!({ "type": "image_url", "image_url": { "url": i.data_url() } })
            }
        })
        .collect();
    let text = match api {
        Api::Responses => json!({ "type": "input_text", "text": text }),
        _ => json!({ "type": "text", "text": text }),
    };
    if api == Api::Messages {
        parts.push(text);
    } else {
        parts.insert(0, text);
    }
    parts.into()
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

    /// This usage with `later`'s figures where it has them: the Messages API
    /// sends the prompt's counts first and the output's at the end.
    pub fn merged(self, later: Usage) -> Usage {
        Usage {
            prompt_tokens: later.prompt_tokens.or(self.prompt_tokens),
            completion_tokens: later.completion_tokens.or(self.completion_tokens),
            completion_tokens_details: later
                .completion_tokens_details
                .or(self.completion_tokens_details),
            prompt_tokens_details: later.prompt_tokens_details.or(self.prompt_tokens_details),
        }
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
    pub tool_calls: Vec<ToolCallDelta>,
    /// The last non-null `finish_reason`.
    pub finish_reason: Option<String>,
    /// `usage`, when the chunk carries it.
    pub usage: Option<Usage>,
    /// llama.cpp's `timings`, when present (boxed: once a stream, where every
    /// other event is a chunk).
    pub timings: Option<Box<ServerTimings>>,
    /// The event that ends a complete stream in the APIs that have no `[DONE]`
    /// (`response.completed`, `message_stop`).
    pub ends_stream: bool,
    /// The event belongs to an API whose complete stream always ends with its
    /// own end event (the Responses and Messages APIs): without that event the
    /// stream is cut short, whatever `finish_reason` said.
    pub needs_end_event: bool,
}

impl Chunk {
    /// Whether this chunk carries generated content (text, reasoning or a tool-call
    /// delta). Role-only and empty deltas do not.
    pub fn carries_token(&self) -> bool {
        !self.content.is_empty() || !self.reasoning.is_empty() || !self.tool_calls.is_empty()
    }

    /// Characters of generated text (content + reasoning).
    pub fn text_chars(&self) -> usize {
        self.content.chars().count() + self.reasoning.chars().count()
    }
}

impl ChunkError {
    pub(crate) fn malformed(e: serde_json::Error, data: &str) -> Self {
        ChunkError::Malformed {
            reason: e.to_string(),
            prefix: prefix(data),
        }
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

pub(crate) fn prefix(data: &str) -> String {
    data.chars().take(60).collect()
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
            // `type` (OpenAI's kind, Anthropic's), or `code` where `type` only
            // says that this is an error (the Responses API's `error` event).
            let code = map
                .get("type")
                .filter(|t| t.as_str() != Some("error"))
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
