//! The simulated server's answers to requests that offer tools or ask for JSON:
//! a value made to follow the schema (or, drawn at `invalid_share`, to break
//! it in one known way), cut into as many pieces as the answer has tokens.

use serde_json::{Map, Value, json};
use tokenscope_measure::openai::{Tool, ToolChoice};
use tokenscope_stats::rng::Rng;

pub use crate::stream::Script;

/// What the answer was, for the server's truth log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Planned {
    /// `tool_call`, `json` or `text`.
    pub kind: &'static str,
    /// The tool called.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Whether it was made to follow its schema.
    pub valid: bool,
}

/// The answer to a request offering `tools` (with `choice`) and asking for
/// `schema`, `tokens` tokens long: a tool call where the choice asks for one
/// (`auto`: drawn at `call_share`), else a JSON answer where a schema is
/// asked, else words. Drawn from `(seed, id)`.
pub fn plan(
    tools: &[Tool],
    choice: Option<&ToolChoice>,
    schema: Option<&Value>,
    tokens: u32,
    (call_share, invalid_share): (f64, f64),
    (seed, id): (u64, u64),
) -> (Script, Planned) {
    let mut rng = Rng::for_stream(seed ^ 0x7001, id);
    let tool = match choice {
        _ if tools.is_empty() => None,
        Some(ToolChoice::None) => None,
        Some(ToolChoice::Named(n)) => tools.iter().find(|t| &t.name == n),
        Some(ToolChoice::Required) => Some(&tools[rng.below(tools.len() as u64) as usize]),
        Some(ToolChoice::Auto) | None => {
            (rng.next_f64() < call_share).then(|| &tools[rng.below(tools.len() as u64) as usize])
        }
    };
    let invalid = rng.next_f64() < invalid_share;
    let (schema, kind) = match (tool, schema) {
        (Some(t), _) => (&t.parameters, "tool_call"),
        (None, Some(s)) => (s, "json"),
        (None, None) => {
            let planned = Planned {
                kind: "text",
                tool: None,
                valid: true,
            };
            return (Script::Words, planned);
        }
    };
    let value = example(schema, &mut rng);
    let text = if invalid {
        broken(schema, value)
    } else {
        value.to_string()
    };
    let pieces = pieces(&text, tokens);
    let planned = Planned {
        kind,
        tool: tool.map(|t| t.name.clone()),
        valid: !invalid,
    };
    let script = match tool {
        Some(t) => Script::ToolCall {
            name: t.name.clone(),
            pieces,
        },
        None => Script::Json(pieces),
    };
    (script, planned)
}

/// A value valid against `schema` (the keywords tools use: `type`,
/// `properties`, `required`, `enum`, `const`, `items`, `minimum`/`maximum`,
/// `minLength`, `anyOf`/`oneOf`).
pub fn example(schema: &Value, rng: &mut Rng) -> Value {
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.is_empty()
    {
        return options[rng.below(options.len() as u64) as usize].clone();
    }
    if let Some(Value::Array(alts)) = schema.get("anyOf").or_else(|| schema.get("oneOf"))
        && let Some(first) = alts.first()
    {
        return example(first, rng);
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts.first().and_then(Value::as_str).unwrap_or("object"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    let number = |rng: &mut Rng| {
        let lo = schema.get("minimum").and_then(Value::as_f64).unwrap_or(0.0);
        let hi = schema
            .get("maximum")
            .and_then(Value::as_f64)
            .unwrap_or(lo + 100.0);
        lo + (hi - lo) * rng.next_f64()
    };
    match kind {
        "object" => {
            let mut map = Map::new();
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (name, sub) in props {
                    map.insert(name.clone(), example(sub, rng));
                }
            }
            Value::Object(map)
        }
        "array" => {
            let item = schema.get("items").cloned().unwrap_or(json!({}));
            let n = schema
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1);
            Value::Array((0..n).map(|_| example(&item, rng)).collect())
        }
        "integer" => json!(number(rng).ceil() as i64),
        "number" => json!((number(rng) * 100.0).round() / 100.0),
        "boolean" => json!(rng.next_f64() < 0.5),
        "null" => Value::Null,
        _ => {
            let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(1) as usize;
            let words = crate::stream::answer_words();
            let mut s = words[rng.below(words.len() as u64) as usize].to_owned();
            while s.len() < min {
                s.push('x');
            }
            json!(s)
        }
    }
}

/// `value` made invalid against `schema` in one known way: without its first
/// required property (an object that has one), else its text cut short (not
/// JSON).
pub fn broken(schema: &Value, value: Value) -> String {
    let first_required = schema
        .get("required")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
        .and_then(Value::as_str);
    match (value, first_required) {
        (Value::Object(mut map), Some(name)) => {
            map.remove(name);
            Value::Object(map).to_string()
        }
        (other, _) => {
            let mut text = other.to_string();
            text.pop();
            if text.is_empty() {
                text.push('{');
            }
            text
        }
    }
}

/// `text` cut into `n` pieces, one per token: as even as its characters allow,
/// spaces after it where it has fewer characters than tokens (JSON allows
/// them).
pub fn pieces(text: &str, n: u32) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let n = n.max(1) as usize;
    if chars.len() < n {
        let mut p: Vec<String> = chars.iter().map(char::to_string).collect();
        p.resize(n, " ".to_owned());
        return p;
    }
    (0..n)
        .map(|i| {
            chars[i * chars.len() / n..(i + 1) * chars.len() / n]
                .iter()
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> Tool {
        Tool {
            name: "get_weather".into(),
            description: String::new(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "city": { "type": "string" },
                    "unit": { "type": "string", "enum": ["celsius", "fahrenheit"] },
                    "days": { "type": "integer", "minimum": 1, "maximum": 7 },
                },
                "required": ["city", "unit"],
            }),
        }
    }

    #[test]
    fn pieces_add_up_to_the_text_one_per_token() {
        for (text, n) in [("{\"a\": 1}", 3), ("{}", 5), ("abc", 1)] {
            let p = pieces(text, n);
            assert_eq!(p.len(), n as usize);
            assert_eq!(p.concat().trim_end(), text);
            assert!(p.iter().all(|s| !s.is_empty()));
        }
    }

    #[test]
    fn the_choice_decides_the_kind_and_the_share_is_drawn() {
        let tools = [weather()];
        let schema = json!({ "type": "object" });
        let kind = |choice: Option<ToolChoice>, s: Option<&Value>, id| {
            plan(&tools, choice.as_ref(), s, 16, (0.5, 0.0), (7, id))
                .1
                .kind
        };
        assert_eq!(kind(Some(ToolChoice::Required), None, 1), "tool_call");
        assert_eq!(kind(Some(ToolChoice::None), Some(&schema), 1), "json");
        assert_eq!(kind(Some(ToolChoice::None), None, 1), "text");
        let called = (0..400)
            .filter(|&id| kind(Some(ToolChoice::Auto), None, id) == "tool_call")
            .count();
        assert!((150..250).contains(&called), "{called} of 400 at 0.5");
        let (script, planned) = plan(&tools, None, None, 4, (1.0, 1.0), (7, 3));
        assert_eq!(planned.tool.as_deref(), Some("get_weather"));
        assert!(!planned.valid);
        let Script::ToolCall { pieces, .. } = script else {
            panic!("{script:?}")
        };
        let v: Value = serde_json::from_str(&pieces.concat()).unwrap();
        assert!(
            v.get("city").is_none(),
            "the first required property is dropped"
        );
    }

    #[test]
    fn examples_follow_their_schema() {
        let mut rng = Rng::new(3);
        for _ in 0..20 {
            let v = example(&weather().parameters, &mut rng);
            assert!(v["city"].is_string());
            assert!(["celsius", "fahrenheit"].contains(&v["unit"].as_str().unwrap()));
            let days = v["days"].as_i64().unwrap();
            assert!((1..=7).contains(&days), "{days}");
        }
        assert_eq!(broken(&json!({ "type": "integer" }), json!(12)), "1");
    }
}
