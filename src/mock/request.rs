//! What a request to one of the APIs asks for: its prompt's text (however its
//! API carries it), `max_tokens`, streaming and usage options, and which
//! headers carried a key (never the key).

use axum::body::Bytes;
use axum::http::{HeaderMap, header};
use tokenscope_measure::openai::Api;

use super::log::ImageSeen;
use super::state::MockState;

/// The headers that carry API keys in some deployments (Azure's `api-key`,
/// gateways' `x-api-key`), in the order looked for.
const API_KEY_HEADERS: [&str; 2] = ["api-key", "x-api-key"];

/// A message's or a system prompt's text: a string, or its parts' `text`s.
fn content_text(content: Option<&serde_json::Value>, text: &mut String) {
    match content {
        Some(serde_json::Value::String(s)) => text.push_str(s),
        Some(serde_json::Value::Array(parts)) => {
            for p in parts {
                if let Some(t) = p.get("text").and_then(|t| t.as_str()) {
                    text.push_str(t);
                    text.push(' ');
                }
            }
        }
        _ => {}
    }
}

/// Messages' contents joined (each followed by a space).
fn messages_text(msgs: &[serde_json::Value], text: &mut String) {
    for m in msgs {
        content_text(m.get("content"), text);
        text.push(' ');
    }
}

/// Text of the prompt: chat messages' contents joined, the completions prompt,
/// the Responses API's `instructions` and `input`, the Messages API's `system`
/// and `messages`.
fn prompt_text(api: Api, v: &serde_json::Value) -> Option<String> {
    let mut text = String::new();
    match api {
        Api::Chat => messages_text(v.get("messages")?.as_array()?, &mut text),
        Api::Completions => match v.get("prompt")? {
            serde_json::Value::String(s) => text.push_str(s),
            serde_json::Value::Array(a) => text.push_str(
                &a.iter()
                    .filter_map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => return None,
        },
        Api::Responses => {
            if v.get("instructions").is_some_and(|i| i.is_string()) {
                content_text(v.get("instructions"), &mut text);
                text.push(' ');
            }
            match v.get("input")? {
                serde_json::Value::String(s) => text.push_str(s),
                serde_json::Value::Array(items) => messages_text(items, &mut text),
                _ => return None,
            }
        }
        Api::Messages => {
            let msgs = v.get("messages")?.as_array()?;
            if v.get("system").is_some() {
                content_text(v.get("system"), &mut text);
                text.push(' ');
            }
            messages_text(msgs, &mut text);
        }
    }
    Some(text)
}

/// The images in a request's messages: chat's `image_url` parts and the
/// Responses API's `input_image` (data URLs), the Messages API's base64
/// `image` blocks. An image that is not a base64 PNG or JPEG is refused, as
/// servers refuse what they cannot decode.
fn images(v: &serde_json::Value, patch_px: u32) -> Result<Vec<ImageSeen>, String> {
    use base64::Engine as _;
    let mut out = Vec::new();
    let turns = v
        .get("messages")
        .or_else(|| v.get("input"))
        .and_then(|m| m.as_array());
    let parts = turns
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("content")?.as_array())
        .flatten();
    for part in parts {
        let data = match part.get("type").and_then(|t| t.as_str()) {
            Some("image_url") => part.pointer("/image_url/url").and_then(|u| u.as_str()),
            Some("input_image") => part.get("image_url").and_then(|u| u.as_str()),
            Some("image") => part.pointer("/source/data").and_then(|d| d.as_str()),
            _ => continue,
        };
        let n = out.len() + 1;
        let data = data.ok_or_else(|| format!("image {n}: no image data"))?;
        let b64 = match data.strip_prefix("data:") {
            Some(url) => url
                .split_once(";base64,")
                .map(|(_, d)| d)
                .ok_or_else(|| format!("image {n}: not a base64 data URL"))?,
            None if part.get("type").and_then(|t| t.as_str()) == Some("image") => data,
            None => return Err(format!("image {n}: only data URLs are served here")),
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| format!("image {n}: not valid base64"))?;
        let (width_px, height_px) = tokenscope_workload::images::dimensions(&bytes)
            .ok_or_else(|| format!("image {n}: not a PNG or JPEG"))?;
        out.push(ImageSeen {
            width_px,
            height_px,
            bytes: bytes.len(),
            tokens: tokenscope_sim::image_tokens(width_px, height_px, patch_px),
        });
    }
    Ok(out)
}

/// The body field that carries a request's prompt.
fn prompt_field(api: Api) -> &'static str {
    match api {
        Api::Chat | Api::Messages => "messages",
        Api::Completions => "prompt",
        Api::Responses => "input",
    }
}

/// What a request asks for.
pub(super) struct Asked {
    pub(super) prompt: String,
    pub(super) max_tokens: u32,
    pub(super) streaming: bool,
    pub(super) include_usage: bool,
    pub(super) request_id: Option<String>,
    pub(super) authorized: bool,
    pub(super) api_key_header: Option<&'static str>,
    /// `logprobs: true` asked, with this many `top_logprobs`.
    pub(super) logprobs: Option<usize>,
    /// `temperature: 0` asked.
    pub(super) greedy: bool,
    /// A completion that echoes its prompt with `logprobs`.
    pub(super) echo: bool,
    /// `return_tokens_as_token_ids: true` asked (vLLM's).
    pub(super) token_ids: bool,
    /// `stream_options.continuous_usage_stats: true` asked (vLLM's): a
    /// running usage in every chunk.
    pub(super) continuous_usage: bool,
    /// The tools offered, in any API's shape.
    pub(super) tools: Vec<tokenscope_measure::openai::Tool>,
    /// `tool_choice`, when given.
    pub(super) tool_choice: Option<tokenscope_measure::openai::ToolChoice>,
    /// The JSON schema the answer must follow, when asked.
    pub(super) output_schema: Option<serde_json::Value>,
    /// The images its messages carried.
    pub(super) images: Vec<ImageSeen>,
}

/// Read a request's body and headers, or say why it is not a request (an HTTP
/// 400 then).
pub(super) fn read_request(
    s: &MockState,
    api: Api,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Asked, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let Some(prompt) = prompt_text(api, &v) else {
        return Err(format!("missing or invalid \"{}\"", prompt_field(api)));
    };
    let max_tokens = v
        .get("max_tokens")
        .or_else(|| v.get("max_completion_tokens"))
        .or_else(|| v.get("max_output_tokens"))
        .and_then(|m| m.as_u64())
        .map_or(s.cfg.default_max_tokens, |m| m.clamp(1, 1 << 20) as u32);
    let streaming = v.get("stream").and_then(|b| b.as_bool()).unwrap_or(false);
    // The Responses and Messages APIs always report usage.
    let include_usage = matches!(api, Api::Responses | Api::Messages)
        || v.get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(|b| b.as_bool())
            .unwrap_or(false);
    let request_id = headers
        .get("x-request-id")
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned);
    let authorized = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer ") && v.len() > 7);
    let api_key_header = API_KEY_HEADERS
        .into_iter()
        .find(|name| headers.get(*name).is_some_and(|v| !v.is_empty()));
    // Chat's `logprobs: true` + `top_logprobs: k`; legacy completions'
    // `logprobs: k`, read with `echo: true` (the prompt's own, teacher-forced).
    let echo = api == Api::Completions && v.get("echo").and_then(|b| b.as_bool()) == Some(true);
    let logprobs = match v.get("logprobs") {
        Some(serde_json::Value::Bool(true)) => Some(
            v.get("top_logprobs")
                .and_then(|k| k.as_u64())
                .map_or(0, |k| k.min(1000) as usize),
        ),
        Some(serde_json::Value::Number(k)) if echo => k.as_u64().map(|k| k.min(1000) as usize),
        _ => None,
    };
    let tools = match v.get("tools") {
        // An empty list offers nothing (servers take it).
        Some(serde_json::Value::Array(t)) if t.is_empty() => Vec::new(),
        Some(t) => tokenscope_measure::tools::tools_from_json(t)
            .map_err(|why| format!("invalid \"tools\": {why}"))?,
        None => Vec::new(),
    };
    Ok(Asked {
        images: images(&v, s.cfg.image_patch_px)?,
        tools,
        tool_choice: v
            .get("tool_choice")
            .and_then(tokenscope_measure::tools::tool_choice_from_json),
        output_schema: tokenscope_measure::tools::output_schema_from_json(&v),
        prompt,
        max_tokens,
        streaming,
        include_usage,
        request_id,
        authorized,
        api_key_header,
        logprobs,
        greedy: v.get("temperature").and_then(|t| t.as_f64()) == Some(0.0),
        echo,
        token_ids: v
            .get("return_tokens_as_token_ids")
            .and_then(|b| b.as_bool())
            == Some(true),
        continuous_usage: v
            .get("stream_options")
            .and_then(|o| o.get("continuous_usage_stats"))
            .and_then(|b| b.as_bool())
            == Some(true),
    })
}
