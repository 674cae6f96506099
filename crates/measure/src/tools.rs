//! Tool calls and structured output: the request fields each API names them by
//! (`tools`, `tool_choice`, `response_format` and their equivalents), the calls an
//! answer's tool-call deltas add up to, and the events a server streams them in
//! (the simulated server's).
//!
//! | | chat | Responses API | Messages API |
//! |---|---|---|---|
//! | a tool | `{type: function, function: {name, description, parameters}}` | `{type: function, name, description, parameters}` | `{name, description, input_schema}` |
//! | must call | `tool_choice: "required"` | `"required"` | `{type: "any"}` |
//! | a JSON answer | `response_format: {type: json_schema, json_schema: {name, schema, strict}}` | `text: {format: {type: json_schema, name, schema, strict}}` | `output_format: {type: json_schema, schema}` |
//!
//! The completions API has neither (a request for them is refused before the run).

use serde_json::{Map, Value, json};

use crate::wire::{Api, RequestSpec, Tool, ToolCallDelta, ToolChoice};

/// The name a JSON answer's schema is sent under where the API wants one.
pub const SCHEMA_NAME: &str = "answer";

/// Insert the tools, the tool choice and the answer's schema a request asks
/// for into its body, in the API's own shape.
pub(crate) fn insert(spec: &RequestSpec, body: &mut Map<String, Value>) {
    let api = spec.api;
    if !spec.tools.is_empty() {
        let tools: Vec<Value> = spec
            .tools
            .iter()
            .map(|t| match api {
                Api::Messages => json!({
                    "name": t.name, "description": t.description, "input_schema": t.parameters,
                }),
                Api::Responses => json!({
                    "type": "function", "name": t.name, "description": t.description,
                    "parameters": t.parameters,
                }),
                Api::Chat | Api::Completions => json!({
                    "type": "function",
                    "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters,
                    },
                }),
            })
            .collect();
        body.insert("tools".into(), tools.into());
    }
    if let Some(choice) = &spec.tool_choice {
        let value = match (api, choice) {
            (Api::Messages, ToolChoice::Auto) => json!({ "type": "auto" }),
            (Api::Messages, ToolChoice::Required) => json!({ "type": "any" }),
            (Api::Messages, ToolChoice::None) => json!({ "type": "none" }),
            (Api::Messages, ToolChoice::Named(n)) => json!({ "type": "tool", "name": n }),
            (_, ToolChoice::Auto) => "auto".into(),
            (_, ToolChoice::Required) => "required".into(),
            (_, ToolChoice::None) => "none".into(),
            (Api::Responses, ToolChoice::Named(n)) => json!({ "type": "function", "name": n }),
            (_, ToolChoice::Named(n)) => {
                json!({ "type": "function", "function": { "name": n } })
            }
        };
        body.insert("tool_choice".into(), value);
    }
    if let Some(schema) = &spec.output_schema {
        match api {
            Api::Messages => {
                body.insert(
                    "output_format".into(),
                    json!({ "type": "json_schema", "schema": schema }),
                );
            }
            Api::Responses => {
                body.insert(
                    "text".into(),
                    json!({ "format": {
                        "type": "json_schema", "name": SCHEMA_NAME, "schema": schema, "strict": true,
                    }}),
                );
            }
            Api::Chat | Api::Completions => {
                body.insert(
                    "response_format".into(),
                    json!({ "type": "json_schema", "json_schema": {
                        "name": SCHEMA_NAME, "schema": schema, "strict": true,
                    }}),
                );
            }
        }
    }
}

/// The tools of a JSON array in any API's shape: chat's (`{"type":
/// "function", "function": {...}}`), the Responses API's (`{"type":
/// "function", "name": ...}`) or the Messages API's (`{"name",
/// "input_schema"}`). An error says which tool is not one.
pub fn tools_from_json(value: &Value) -> Result<Vec<Tool>, String> {
    let Value::Array(items) = value else {
        return Err("expected a JSON array of tools".into());
    };
    if items.is_empty() {
        return Err("the array holds no tool".into());
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let f = item.get("function").unwrap_or(item);
            let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
            if name.is_empty() {
                return Err(format!("tool {i} has no \"name\""));
            }
            Ok(Tool {
                name: name.to_owned(),
                description: f
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                parameters: f
                    .get("parameters")
                    .or_else(|| f.get("input_schema"))
                    .cloned()
                    .unwrap_or_else(|| json!({ "type": "object" })),
            })
        })
        .collect()
}

/// A request body's `tool_choice`, in any API's shape (`None`: absent).
pub fn tool_choice_from_json(value: &Value) -> Option<ToolChoice> {
    if let Some(s) = value.as_str() {
        return Some(ToolChoice::parse(s));
    }
    let kind = value.get("type").and_then(Value::as_str)?;
    let name = value
        .get("name")
        .or_else(|| value.get("function").and_then(|f| f.get("name")))
        .and_then(Value::as_str);
    Some(match (kind, name) {
        ("function" | "tool", Some(n)) => ToolChoice::Named(n.to_owned()),
        (other, _) => ToolChoice::parse(other),
    })
}

/// The JSON schema a request body asks its answer to follow, in any API's
/// shape (`response_format`, `text.format`, `output_format`).
pub fn output_schema_from_json(body: &Value) -> Option<Value> {
    let format = body
        .get("response_format")
        .or_else(|| body.get("text").and_then(|t| t.get("format")))
        .or_else(|| body.get("output_format"))?;
    if format.get("type").and_then(Value::as_str) != Some("json_schema") {
        return None;
    }
    format
        .get("json_schema")
        .and_then(|j| j.get("schema"))
        .or_else(|| format.get("schema"))
        .cloned()
}

/// One tool call of an answer, put together from its deltas.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolCall {
    /// The function's name.
    pub name: String,
    /// Its arguments' JSON text, as streamed.
    pub arguments: String,
}

/// The calls an answer's tool-call deltas add up to, in the order their
/// indices first came.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolCalls {
    calls: Vec<(Option<u32>, ToolCall)>,
}

impl ToolCalls {
    /// Add one delta to its call: the call of its index; without one, the
    /// call under way, or a new call when the delta names one and the call
    /// under way already has its name.
    pub fn add(&mut self, delta: &ToolCallDelta) {
        let found = match delta.index {
            Some(k) => self.calls.iter().position(|(i, _)| *i == Some(k)),
            None => self
                .calls
                .len()
                .checked_sub(1)
                .filter(|&last| delta.name.is_empty() || self.calls[last].1.name.is_empty()),
        };
        let i = match found {
            Some(i) => i,
            None => {
                self.calls.push((delta.index, ToolCall::default()));
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[i].1;
        // A name repeated in every delta of its call (some servers do) is
        // the same name, not more of it.
        if delta.name != call.name {
            call.name.push_str(&delta.name);
        }
        call.arguments.push_str(&delta.arguments);
    }

    /// The calls, in order.
    pub fn into_calls(self) -> Vec<ToolCall> {
        self.calls.into_iter().map(|(_, c)| c).collect()
    }
}

/// The events a server streams a tool call's pieces in (the simulated
/// server's): `name` in the first piece's event, beside its arguments.
pub mod encode {
    use super::*;

    /// A chat chunk carrying one piece of call `index`'s arguments (and its
    /// name, id and type in the first).
    pub fn chat_delta(id: u64, model: &str, index: u32, name: Option<&str>, piece: &str) -> String {
        let call = match name {
            Some(name) => json!({
                "index": index, "id": format!("call_{id}_{index}"), "type": "function",
                "function": { "name": name, "arguments": piece },
            }),
            None => json!({ "index": index, "function": { "arguments": piece } }),
        };
        let chunk = json!({
            "id": format!("chatcmpl-{id}"), "object": "chat.completion.chunk", "created": 0,
            "model": model,
            "choices": [{ "index": 0, "delta": { "tool_calls": [call] }, "finish_reason": null }],
        });
        format!("data: {chunk}\n\n")
    }

    /// The Responses API's `function_call` output item at `output_index`.
    pub fn responses_item(id: u64, output_index: u32, name: &str) -> String {
        let data = json!({
            "type": "response.output_item.added", "output_index": output_index,
            "item": {
                "type": "function_call", "id": format!("fc_{id}_{output_index}"),
                "call_id": format!("call_{id}_{output_index}"), "name": name, "arguments": "",
                "status": "in_progress",
            },
        });
        format!("event: response.output_item.added\ndata: {data}\n\n")
    }

    /// A piece of the Responses API's function-call arguments.
    pub fn responses_delta(id: u64, output_index: u32, piece: &str) -> String {
        let data = json!({
            "type": "response.function_call_arguments.delta", "output_index": output_index,
            "item_id": format!("fc_{id}_{output_index}"), "delta": piece,
        });
        format!("event: response.function_call_arguments.delta\ndata: {data}\n\n")
    }

    /// The Messages API's `tool_use` block start at `index`.
    pub fn messages_block(id: u64, index: u32, name: &str) -> String {
        let data = json!({
            "type": "content_block_start", "index": index,
            "content_block": {
                "type": "tool_use", "id": format!("toolu_{id}_{index}"), "name": name, "input": {},
            },
        });
        format!("event: content_block_start\ndata: {data}\n\n")
    }

    /// A piece of the Messages API's tool input (`input_json_delta`).
    pub fn messages_delta(index: u32, piece: &str) -> String {
        let data = json!({
            "type": "content_block_delta", "index": index,
            "delta": { "type": "input_json_delta", "partial_json": piece },
        });
        format!("event: content_block_delta\ndata: {data}\n\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::{StreamItem, parse_event, request_body};
    use crate::wire::Tool;

    fn spec(api: Api) -> RequestSpec {
        RequestSpec {
            api,
            model: "m".into(),
            system: None,
            prompt: "p".into(),
            messages: None,
            max_tokens: 8,
            ignore_eos: false,
            min_tokens: None,
            temperature: None,
            continuous_usage: false,
            tools: vec![Tool {
                name: "get_weather".into(),
                description: "the weather".into(),
                parameters: json!({ "type": "object", "properties": { "city": { "type": "string" } } }),
            }],
            tool_choice: Some(ToolChoice::Required),
            output_schema: Some(json!({ "type": "object" })),
            images: Vec::new(),
        }
    }

    #[test]
    fn each_api_gets_tools_and_schema_in_its_own_shape() {
        let chat = request_body(&spec(Api::Chat));
        assert_eq!(chat["tools"][0]["function"]["name"], "get_weather");
        assert_eq!(chat["tool_choice"], "required");
        assert_eq!(
            chat["response_format"]["json_schema"]["schema"]["type"],
            "object"
        );
        let responses = request_body(&spec(Api::Responses));
        assert_eq!(responses["tools"][0]["name"], "get_weather");
        assert_eq!(responses["tools"][0]["type"], "function");
        assert_eq!(responses["text"]["format"]["type"], "json_schema");
        let messages = request_body(&spec(Api::Messages));
        assert_eq!(
            messages["tools"][0]["input_schema"]["properties"]["city"]["type"],
            "string"
        );
        assert_eq!(messages["tool_choice"]["type"], "any");
        assert_eq!(messages["output_format"]["type"], "json_schema");
        let named = request_body(&RequestSpec {
            tool_choice: Some(ToolChoice::Named("get_weather".into())),
            ..spec(Api::Chat)
        });
        assert_eq!(named["tool_choice"]["function"]["name"], "get_weather");
        let plain = request_body(&RequestSpec {
            tools: Vec::new(),
            tool_choice: None,
            output_schema: None,
            ..spec(Api::Chat)
        });
        assert!(plain.get("tools").is_none() && plain.get("response_format").is_none());
    }

    /// What a request sends reads back as what was asked, in every API.
    #[test]
    fn a_server_reads_back_what_each_api_sent() {
        for api in [Api::Chat, Api::Responses, Api::Messages] {
            for choice in [
                ToolChoice::Auto,
                ToolChoice::Required,
                ToolChoice::None,
                ToolChoice::Named("get_weather".into()),
            ] {
                let sent = RequestSpec {
                    tool_choice: Some(choice.clone()),
                    ..spec(api)
                };
                let body = request_body(&sent);
                assert_eq!(
                    tools_from_json(&body["tools"]).unwrap(),
                    sent.tools,
                    "{api:?}"
                );
                assert_eq!(tool_choice_from_json(&body["tool_choice"]), Some(choice));
                assert_eq!(output_schema_from_json(&body), sent.output_schema);
            }
        }
        assert_eq!(
            tools_from_json(&json!([{ "function": {} }])).unwrap_err(),
            "tool 0 has no \"name\""
        );
        assert!(tools_from_json(&json!({})).is_err());
    }

    /// A server that leaves the index out: each named delta starts a call,
    /// the argument pieces after it are that call's.
    #[test]
    fn deltas_without_an_index_follow_the_call_under_way() {
        let delta = |name: &str, arguments: &str| ToolCallDelta {
            index: None,
            name: name.into(),
            arguments: arguments.into(),
        };
        let mut calls = ToolCalls::default();
        for d in [
            delta("get_weather", ""),
            delta("", "{\"city\": "),
            delta("", "\"Oslo\"}"),
            delta("get_time", "{}"),
        ] {
            calls.add(&d);
        }
        let calls = calls.into_calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(calls[0].arguments, "{\"city\": \"Oslo\"}");
        assert_eq!(
            (calls[1].name.as_str(), calls[1].arguments.as_str()),
            ("get_time", "{}")
        );
    }

    #[test]
    fn a_name_repeated_in_every_delta_of_its_call_is_one_name() {
        let mut calls = ToolCalls::default();
        for arguments in ["{\"city\": ", "\"Oslo\"}"] {
            calls.add(&ToolCallDelta {
                index: Some(0),
                name: "get_weather".into(),
                arguments: arguments.into(),
            });
        }
        let calls = calls.into_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(calls[0].arguments, "{\"city\": \"Oslo\"}");
    }

    /// Every API's tool-call events, split into pieces, add up to the same
    /// calls: two of them, the second's pieces between the first's.
    #[test]
    fn the_deltas_of_each_api_add_up_to_the_calls() {
        let a = r#"{"city": "Paris"}"#;
        let b = r#"{"city": "Oslo"}"#;
        let streams = [
            encode::chat_delta(1, "m", 0, Some("get_weather"), &a[..5])
                + &encode::chat_delta(1, "m", 1, Some("get_time"), &b[..3])
                + &encode::chat_delta(1, "m", 0, None, &a[5..])
                + &encode::chat_delta(1, "m", 1, None, &b[3..]),
            encode::responses_item(1, 0, "get_weather")
                + &encode::responses_delta(1, 0, &a[..5])
                + &encode::responses_item(1, 1, "get_time")
                + &encode::responses_delta(1, 1, &b[..3])
                + &encode::responses_delta(1, 0, &a[5..])
                + &encode::responses_delta(1, 1, &b[3..]),
            encode::messages_block(1, 0, "get_weather")
                + &encode::messages_delta(0, &a[..5])
                + &encode::messages_block(1, 1, "get_time")
                + &encode::messages_delta(1, &b[..3])
                + &encode::messages_delta(0, &a[5..])
                + &encode::messages_delta(1, &b[3..]),
        ];
        for stream in streams {
            let mut calls = ToolCalls::default();
            for e in &crate::sse::decode_all(stream.as_bytes()).unwrap() {
                let Ok(StreamItem::Chunk(c)) = parse_event(&e.event, &e.data) else {
                    panic!("{e:?}");
                };
                assert!(c.carries_token());
                c.tool_calls.iter().for_each(|d| calls.add(d));
            }
            assert_eq!(
                calls.into_calls(),
                vec![
                    ToolCall {
                        name: "get_weather".into(),
                        arguments: a.into()
                    },
                    ToolCall {
                        name: "get_time".into(),
                        arguments: b.into()
                    }
                ],
                "{stream}"
            );
        }
    }
}
