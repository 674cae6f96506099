//! What a request asks its answer to be (`--tools`, `--tool-choice`,
//! `--json-schema`), and the check of what came back: the calls made, each
//! against its tool's JSON schema, or a JSON answer against its own. The check
//! runs after the request's end (its times are already taken), with
//! [jsonschema](https://docs.rs/jsonschema) validators compiled once per run.
//!
//! A problem names the tool and the rule broken, as its place in the schema
//! (`get_weather: /properties/unit/enum`), never the answer's keys or values.

use std::path::Path;

use serde_json::{Value, json};
use tokenscope_measure::openai::{Api, RequestSpec, Tool, ToolChoice};
use tokenscope_measure::record::AnswerCheck;
use tokenscope_measure::tools::ToolCall;

use crate::error::{Error, Result};

/// The tools, the tool choice and the answer's schema of every request of a
/// run, with their validators.
pub struct AnswerContract {
    /// The tools offered.
    pub tools: Vec<Tool>,
    /// Whether the model may, must or must not call one.
    pub tool_choice: Option<ToolChoice>,
    /// The JSON schema the answer's text must follow.
    pub schema: Option<Value>,
    tool_validators: Vec<jsonschema::Validator>,
    schema_validator: Option<jsonschema::Validator>,
}

impl std::fmt::Debug for AnswerContract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerContract")
            .field("tools", &self.tools.len())
            .field("tool_choice", &self.tool_choice)
            .field("schema", &self.schema.is_some())
            .finish()
    }
}

/// `--tools builtin`: two functions of the kind agents call, their arguments
/// with required fields, an enum and a number.
pub fn builtin_tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "get_weather".into(),
            description: "The current weather in a city.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "city": { "type": "string", "description": "The city's name." },
                    "unit": { "type": "string", "enum": ["celsius", "fahrenheit"] },
                },
                "required": ["city", "unit"],
                "additionalProperties": false,
            }),
        },
        Tool {
            name: "search_flights".into(),
            description: "Flights between two airports on a date.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "from": { "type": "string", "description": "IATA code." },
                    "to": { "type": "string", "description": "IATA code." },
                    "date": { "type": "string", "description": "YYYY-MM-DD." },
                    "passengers": { "type": "integer", "minimum": 1, "maximum": 9 },
                },
                "required": ["from", "to", "date", "passengers"],
                "additionalProperties": false,
            }),
        },
    ]
}

/// Read `--tools`: `builtin`, or a JSON file holding an array of tools in
/// chat's shape (`{"type": "function", "function": {...}}`), the Responses
/// API's (`{"type": "function", "name": ...}`) or the Messages API's
/// (`{"name", "input_schema"}`).
pub fn read_tools(arg: &str) -> Result<Vec<Tool>> {
    if arg == "builtin" {
        return Ok(builtin_tools());
    }
    let path = Path::new(arg);
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::file("--tools", path, "cannot read it", e))?;
    parse_tools(&text).map_err(|why| Error::Option(format!("--tools {arg}: {why}")))
}

/// Parse a JSON array of tools (see [`read_tools`]).
pub fn parse_tools(text: &str) -> std::result::Result<Vec<Tool>, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    tokenscope_measure::tools::tools_from_json(&value)
}

/// Read `--json-schema FILE`.
pub fn read_schema(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::file("--json-schema", path, "cannot read it", e))?;
    serde_json::from_str(&text)
        .map_err(|e| Error::Option(format!("--json-schema {}: not JSON ({e})", path.display())))
}

impl AnswerContract {
    /// Compile the schemas of what `api` is asked: an error names the tool or
    /// the option whose schema is not one, or the API that has no such field.
    pub fn new(
        api: Api,
        tools: Vec<Tool>,
        tool_choice: Option<ToolChoice>,
        schema: Option<Value>,
    ) -> Result<Self> {
        if api == Api::Completions && (!tools.is_empty() || schema.is_some()) {
            return Err(Error::Option(
                "--tools and --json-schema need --api chat, responses or messages (the \
                 completions API has no tools or response format)"
                    .into(),
            ));
        }
        if tool_choice.is_some() && tools.is_empty() {
            return Err(Error::Option(
                "--tool-choice needs --tools (builtin, or a file)".into(),
            ));
        }
        if let Some(ToolChoice::Named(name)) = &tool_choice
            && !tools.iter().any(|t| &t.name == name)
        {
            return Err(Error::Option(format!(
                "--tool-choice {name}: no such tool (offered: {})",
                tools
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let tool_validators = tools
            .iter()
            .map(|t| {
                jsonschema::validator_for(&t.parameters).map_err(|e| {
                    Error::Option(format!(
                        "--tools: the parameters of {:?} are not a JSON schema ({})",
                        t.name,
                        e.kind().keyword()
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let schema_validator = schema
            .as_ref()
            .map(|s| {
                jsonschema::validator_for(s).map_err(|e| {
                    Error::Option(format!(
                        "--json-schema: not a JSON schema ({} at {})",
                        e.kind().keyword(),
                        e.schema_path()
                    ))
                })
            })
            .transpose()?;
        Ok(Self {
            tools,
            tool_choice,
            schema,
            tool_validators,
            schema_validator,
        })
    }

    /// Check one answer: its tool calls against the tool choice and their
    /// tools' schemas, or (when it made none) against the choice and the
    /// answer's schema. `cut`: the server stopped it at `max_tokens` (a JSON
    /// text cut there is `cut at max_tokens`, not the model's fault).
    pub fn check(&self, calls: &[ToolCall], text: Option<&str>, cut: bool) -> AnswerCheck {
        let mut check = AnswerCheck {
            tool_calls: calls.len() as u32,
            valid: None,
            problem: None,
        };
        let must_call = matches!(
            self.tool_choice,
            Some(ToolChoice::Required | ToolChoice::Named(_))
        );
        let problem = if !calls.is_empty() {
            match &self.tool_choice {
                Some(ToolChoice::None) => Some("a tool called under tool_choice none".into()),
                Some(ToolChoice::Named(n)) if calls.iter().any(|c| &c.name != n) => {
                    Some("a tool called other than the one named".into())
                }
                _ => calls.iter().find_map(|c| self.call_problem(c, cut)),
            }
        } else if must_call {
            Some("no tool called".into())
        } else if let Some(validator) = &self.schema_validator {
            json_problem(validator, text.unwrap_or_default(), cut)
        } else {
            return check;
        };
        check.valid = Some(problem.is_none());
        check.problem = problem;
        check
    }

    fn call_problem(&self, call: &ToolCall, cut: bool) -> Option<String> {
        let Some(i) = self.tools.iter().position(|t| t.name == call.name) else {
            return Some("a tool not offered".into());
        };
        // An empty argument string is the empty object (chat servers send it
        // for a function with no parameters).
        let args = if call.arguments.trim().is_empty() {
            "{}"
        } else {
            &call.arguments
        };
        json_problem(&self.tool_validators[i], args, cut).map(|p| format!("{}: {p}", call.name))
    }

    /// `spec` asking what every request of the run asks (`contract`: the
    /// run's, `None` for a plain run): the one place the run's requests, its
    /// pre-flight and its template-overhead probe take their tools from.
    pub fn ask(contract: Option<&AnswerContract>, spec: RequestSpec) -> RequestSpec {
        match contract {
            Some(c) => RequestSpec {
                tools: c.tools.clone(),
                tool_choice: c.tool_choice.clone(),
                output_schema: c.schema.clone(),
                ..spec
            },
            None => spec,
        }
    }

    /// What the run's configuration records of it.
    pub fn asked(&self) -> tokenscope_core::model::AnswerAsked {
        tokenscope_core::model::AnswerAsked {
            tools: self.tools.iter().map(|t| t.name.clone()).collect(),
            tool_choice: self.tool_choice.as_ref().map(|c| c.label().to_owned()),
            json_schema: self.schema.is_some(),
        }
    }

    /// Whether answers' text or calls need keeping for the check.
    pub fn keeps_text(&self) -> bool {
        self.schema_validator.is_some()
    }
}

/// Why `text` is not JSON valid against `validator`: `not JSON` (`cut at
/// max_tokens` when the server stopped it there), or the rule broken as its
/// place in the schema (`/properties/unit/enum`: the user's own schema, never
/// a key or a value the model wrote); `None` when it is.
fn json_problem(validator: &jsonschema::Validator, text: &str, cut: bool) -> Option<String> {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return Some(if cut { "cut at max_tokens" } else { "not JSON" }.into());
    };
    validator
        .validate(&value)
        .err()
        .map(|e| e.schema_path().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contract(schema: Option<Value>) -> AnswerContract {
        AnswerContract::new(Api::Chat, builtin_tools(), None, schema).unwrap()
    }

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn calls_are_checked_against_their_tools_schema() {
        let c = contract(None);
        let ok = c.check(
            &[call(
                "get_weather",
                r#"{"city": "Paris", "unit": "celsius"}"#,
            )],
            None,
            false,
        );
        assert_eq!((ok.tool_calls, ok.valid, ok.problem), (1, Some(true), None));
        let cases = [
            (
                call("get_weather", r#"{"city": "Paris", "unit": "kelvin"}"#),
                "get_weather: /properties/unit/enum",
            ),
            (
                call("get_weather", r#"{"city": "Paris"}"#),
                "get_weather: /required",
            ),
            (
                call("get_weather", r#"{"city": "Paris", "unit": "#),
                "get_weather: not JSON",
            ),
            (
                call(
                    "search_flights",
                    r#"{"from": "CDG", "to": "OSL", "date": "2026-12-07", "passengers": 12}"#,
                ),
                "search_flights: /properties/passengers/maximum",
            ),
            (call("delete_everything", "{}"), "a tool not offered"),
        ];
        for (bad, why) in cases {
            let secret = bad.arguments.clone();
            let check = c.check(&[bad], None, false);
            assert_eq!(check.valid, Some(false), "{why}");
            let problem = check.problem.unwrap();
            assert_eq!(problem, why);
            // The answer's values never reach the problem.
            assert!(
                !problem.contains("Paris") && !problem.contains("kelvin"),
                "{secret}"
            );
        }
    }

    #[test]
    fn a_json_answer_is_checked_when_no_tool_was_called() {
        let schema = json!({
            "type": "object",
            "properties": { "name": { "type": "string" }, "age": { "type": "integer" } },
            "required": ["name", "age"],
        });
        let c = contract(Some(schema));
        let text = c.check(&[], Some(r#"{"name": "Ada", "age": 36}"#), false);
        assert_eq!((text.tool_calls, text.valid), (0, Some(true)));
        let wrong = c.check(&[], Some(r#"{"name": "Ada", "age": "36"}"#), false);
        assert_eq!(wrong.problem.as_deref(), Some("/properties/age/type"));
        let broken = c.check(&[], Some(r#"{"name": "Ada", "#), false);
        assert_eq!(broken.problem.as_deref(), Some("not JSON"));
        let cut = c.check(&[], Some(r#"{"name": "Ada", "#), true);
        assert_eq!(cut.problem.as_deref(), Some("cut at max_tokens"));
        // Tools offered and no schema: an answer in text has nothing to check.
        let plain = contract(None).check(&[], Some("It is sunny."), false);
        assert_eq!((plain.tool_calls, plain.valid), (0, None));
    }

    /// The tool choice is part of the contract: a text answer where a call
    /// was required, another tool than the one named, a call under none.
    #[test]
    fn the_tool_choice_is_checked_too() {
        let with =
            |choice| AnswerContract::new(Api::Chat, builtin_tools(), Some(choice), None).unwrap();
        let weather = call("get_weather", r#"{"city": "Oslo", "unit": "celsius"}"#);
        let problem =
            |c: AnswerContract, calls: &[ToolCall]| c.check(calls, Some("text"), false).problem;
        assert_eq!(
            problem(with(ToolChoice::Required), &[]).as_deref(),
            Some("no tool called")
        );
        assert_eq!(
            problem(with(ToolChoice::Required), std::slice::from_ref(&weather)),
            None
        );
        let named = || with(ToolChoice::Named("search_flights".into()));
        assert_eq!(
            problem(named(), std::slice::from_ref(&weather)).as_deref(),
            Some("a tool called other than the one named")
        );
        assert_eq!(problem(named(), &[]).as_deref(), Some("no tool called"));
        assert_eq!(
            problem(with(ToolChoice::None), &[weather]).as_deref(),
            Some("a tool called under tool_choice none")
        );
        let none = with(ToolChoice::None).check(&[], Some("text"), false);
        assert_eq!(none.valid, None, "nothing to check");
    }

    #[test]
    fn bad_options_are_refused_by_name() {
        let e = AnswerContract::new(Api::Completions, builtin_tools(), None, None).unwrap_err();
        assert!(e.to_string().contains("--api chat"), "{e}");
        let e = AnswerContract::new(Api::Chat, Vec::new(), Some(ToolChoice::Required), None)
            .unwrap_err();
        assert!(e.to_string().contains("--tool-choice needs --tools"), "{e}");
        let e = AnswerContract::new(
            Api::Chat,
            builtin_tools(),
            Some(ToolChoice::Named("get_time".into())),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("get_weather, search_flights"), "{e}");
        let e = AnswerContract::new(
            Api::Chat,
            Vec::new(),
            None,
            Some(json!({ "type": "no-such-type" })),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("--json-schema: not a JSON schema"),
            "{e}"
        );
        assert_eq!(
            parse_tools(r#"[{"type": "function", "function": {"parameters": {}}}]"#).unwrap_err(),
            "tool 0 has no \"name\""
        );
        let anthropic =
            parse_tools(r#"[{"name": "f", "input_schema": {"type": "object"}}]"#).unwrap();
        assert_eq!(anthropic[0].parameters["type"], "object");
    }
}
