//! Prompt datasets (`bench --prompts FILE`): your own prompts instead of synthetic
//! ones. Two shapes are read, recognised from the text:
//!
//! - JSON Lines, one prompt per line: `{"prompt": "..."}` (or `"text"`), or
//!   `{"messages": [{"role": "user", "content": "..."}, ...]}` (a conversation
//!   sent as it is to a chat endpoint), each with an optional `max_tokens`;
//! - ShareGPT (`ShareGPT_V3_unfiltered_cleaned_split.json` and its kind): a JSON
//!   array of `{"id", "conversations": [{"from": "human" | "gpt" | "system",
//!   "value"}]}` (or one such object, or one per line). Each record's first human
//!   turn is the prompt (after its system turn, if any); records without one are
//!   skipped and counted.
//!
//! Problems name the line (JSON Lines) or the record (ShareGPT) and the field.
//! [`Dataset::sample`] picks `n` prompts with a seeded shuffle.

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use tokenscope_measure::openai::ChatMessage;
use tokenscope_stats::rng::Rng;

/// One prompt of a dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetPrompt {
    /// The text a completions endpoint gets (a conversation's contents joined).
    pub prompt: String,
    /// The conversation a chat endpoint gets, when the line gave one.
    pub messages: Option<Vec<ChatMessage>>,
    /// Its own `max_tokens`, when the line gave one.
    pub max_tokens: Option<u32>,
    /// The class of request it is (`"class": "summarize"`), for goodput per
    /// class (`--slo-class`); absent when the line gave none.
    pub class: Option<String>,
}

/// The prompt set's fingerprint (`config.prompts_hash`): FNV-1a 64 over each
/// prompt's text and `max_tokens`, in order, as 16 hex digits. Two runs with the
/// same hash sent the same prompts (`tokenscope compare` checks it); a file
/// renamed keeps it, a prompt changed changes it.
pub fn prompts_hash(prompts: &[DatasetPrompt]) -> String {
    let mut h = tokenscope_stats::rng::Fnv1a::new();
    for p in prompts {
        h.eat(p.prompt.as_bytes());
        h.eat(&[0xff]);
        h.eat(&p.max_tokens.map_or(u32::MAX, |m| m).to_le_bytes());
        h.eat(&[0xfe]);
    }
    format!("{:016x}", h.value())
}

/// The dataset shapes read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatasetFormat {
    /// One JSON object per line.
    Jsonl,
    /// ShareGPT conversations.
    Sharegpt,
}

/// A dataset read from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// Its shape.
    pub format: DatasetFormat,
    /// Its prompts, in the file's order.
    pub prompts: Vec<DatasetPrompt>,
    /// Records left out (ShareGPT records without a human turn).
    pub skipped: usize,
}

/// A dataset that cannot be read.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum DatasetError {
    /// No prompt in it.
    #[error("the file holds no prompts")]
    Empty,
    /// A line or record that is wrong.
    #[error("{place}: {reason}")]
    Bad {
        /// `line 4` or `record 12`.
        place: String,
        /// What is wrong.
        reason: String,
    },
}

fn bad(place: String, reason: impl Into<String>) -> DatasetError {
    DatasetError::Bad {
        place,
        reason: reason.into(),
    }
}

impl Dataset {
    /// Read a dataset's text.
    pub fn parse(text: &str) -> Result<Dataset, DatasetError> {
        let trimmed = text.trim_start();
        if trimmed.starts_with('[') {
            let records: Vec<serde_json::Value> = serde_json::from_str(trimmed)
                .map_err(|e| bad(format!("line {}", e.line()), format!("not JSON ({e})")))?;
            return sharegpt(records.iter().enumerate().map(|(i, r)| (i + 1, r)));
        }
        let lines: Vec<(usize, serde_json::Value)> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l.trim())
                    .map(|v| (i + 1, v))
                    .map_err(|e| bad(format!("line {}", i + 1), format!("not JSON ({e})")))
            })
            .collect::<Result<_, _>>()
            .or_else(|e| {
                // One pretty-printed ShareGPT record spans many lines.
                serde_json::from_str::<serde_json::Value>(trimmed)
                    .map(|v| vec![(1, v)])
                    .map_err(|_| e)
            })?;
        if lines.iter().any(|(_, v)| v.get("conversations").is_some()) {
            return sharegpt(lines.iter().map(|(i, v)| (*i, v)));
        }
        let prompts = lines
            .iter()
            .map(|(line, v)| jsonl_prompt(*line, v))
            .collect::<Result<Vec<_>, _>>()?;
        finish(DatasetFormat::Jsonl, prompts, 0)
    }

    /// `n` prompts picked with a seeded shuffle (all of them, reordered, when
    /// the dataset has fewer).
    pub fn sample(&self, n: usize, seed: u64) -> Vec<DatasetPrompt> {
        let mut order: Vec<usize> = (0..self.prompts.len()).collect();
        let mut rng = Rng::for_stream(seed, 0xDA7A);
        for i in 0..order.len().saturating_sub(1) {
            let j = i + rng.below((order.len() - i) as u64) as usize;
            order.swap(i, j);
        }
        order
            .into_iter()
            .take(n)
            .map(|i| self.prompts[i].clone())
            .collect()
    }
}

fn finish(
    format: DatasetFormat,
    prompts: Vec<DatasetPrompt>,
    skipped: usize,
) -> Result<Dataset, DatasetError> {
    if prompts.is_empty() {
        return Err(DatasetError::Empty);
    }
    Ok(Dataset {
        format,
        prompts,
        skipped,
    })
}

fn max_tokens_of(place: &str, v: &serde_json::Value) -> Result<Option<u32>, DatasetError> {
    match v.get("max_tokens") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(m) => m
            .as_u64()
            .and_then(|m| u32::try_from(m).ok())
            .filter(|&m| m > 0)
            .map(Some)
            .ok_or_else(|| {
                bad(
                    place.to_owned(),
                    format!("max_tokens: {m} is not a positive whole number"),
                )
            }),
    }
}

fn jsonl_prompt(line: usize, v: &serde_json::Value) -> Result<DatasetPrompt, DatasetError> {
    let place = format!("line {line}");
    let max_tokens = max_tokens_of(&place, v)?;
    let class = match v.get("class") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(c)) if !c.trim().is_empty() => Some(c.trim().to_owned()),
        Some(_) => return Err(bad(place, "class: expected a non-empty string")),
    };
    if let Some(p) = v.get("prompt").or_else(|| v.get("text")) {
        let prompt = p
            .as_str()
            .ok_or_else(|| bad(place.clone(), "prompt: not a string"))?;
        return Ok(DatasetPrompt {
            prompt: prompt.to_owned(),
            messages: None,
            max_tokens,
            class,
        });
    }
    let Some(messages) = v.get("messages") else {
        return Err(bad(
            place,
            "expected an object with a \"prompt\" string or a \"messages\" list",
        ));
    };
    let messages: Vec<ChatMessage> = serde_json::from_value(messages.clone()).map_err(|e| {
        bad(
            place.clone(),
            format!("messages: expected [{{\"role\", \"content\"}}, ...] ({e})"),
        )
    })?;
    if messages.is_empty() {
        return Err(bad(place, "messages: the list is empty"));
    }
    Ok(DatasetPrompt {
        prompt: joined(&messages),
        messages: Some(messages),
        max_tokens,
        class,
    })
}

fn joined(messages: &[ChatMessage]) -> String {
    messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn sharegpt<'a>(
    records: impl Iterator<Item = (usize, &'a serde_json::Value)>,
) -> Result<Dataset, DatasetError> {
    let mut prompts = Vec::new();
    let mut skipped = 0;
    for (n, r) in records {
        let place = format!("record {n}");
        let turns = r
            .get("conversations")
            .and_then(|c| c.as_array())
            .ok_or_else(|| bad(place.clone(), "conversations: missing or not a list"))?;
        let mut messages = Vec::new();
        for t in turns {
            let from = t.get("from").and_then(|f| f.as_str()).unwrap_or("");
            let value = t
                .get("value")
                .and_then(|v| v.as_str())
                .ok_or_else(|| bad(place.clone(), "conversations[].value: missing"))?;
            let role = match from {
                "system" => "system",
                "human" | "user" => "user",
                _ => continue,
            };
            messages.push(ChatMessage {
                role: role.into(),
                content: value.to_owned(),
            });
            if role == "user" {
                break;
            }
        }
        if messages.last().is_none_or(|m| m.role != "user") {
            skipped += 1;
            continue;
        }
        prompts.push(DatasetPrompt {
            prompt: joined(&messages),
            messages: Some(messages),
            max_tokens: None,
            class: None,
        });
    }
    finish(DatasetFormat::Sharegpt, prompts, skipped)
}

#[cfg(test)]
mod hash_tests {
    use super::*;

    #[test]
    fn the_prompt_sets_hash_follows_its_prompts() {
        let p = |t: &str, m: Option<u32>| DatasetPrompt {
            prompt: t.into(),
            messages: None,
            max_tokens: m,
            class: None,
        };
        let a = [p("one two", None), p("three", Some(4))];
        assert_eq!(prompts_hash(&a), prompts_hash(&a.clone()));
        assert_eq!(prompts_hash(&a).len(), 16);
        for other in [
            vec![p("one two", None), p("three", Some(5))],
            vec![p("one two", None), p("three!", Some(4))],
            vec![p("three", Some(4)), p("one two", None)],
            vec![p("one", None), p("two three", Some(4))],
        ] {
            assert_ne!(prompts_hash(&a), prompts_hash(&other), "{other:?}");
        }
        // FNV-1a 64's offset basis for no prompt.
        assert_eq!(prompts_hash(&[]), "cbf29ce484222325");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_prompts_and_conversations() {
        let d = Dataset::parse(
            "{\"prompt\": \"hello\"}\n\n{\"text\": \"hi\", \"max_tokens\": 7}\n\
             {\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"why?\"}]}\n",
        )
        .unwrap();
        assert_eq!(d.format, DatasetFormat::Jsonl);
        assert_eq!(d.prompts.len(), 3);
        assert_eq!(d.prompts[1].max_tokens, Some(7));
        let conv = &d.prompts[2];
        assert_eq!(conv.prompt, "be brief\nwhy?");
        assert_eq!(conv.messages.as_ref().unwrap()[1].role, "user");
        assert_eq!(conv.class, None);
        let classed = Dataset::parse("{\"prompt\": \"a\", \"class\": \"chat\"}\n").unwrap();
        assert_eq!(classed.prompts[0].class.as_deref(), Some("chat"));
        let e = Dataset::parse("{\"prompt\": \"a\", \"class\": 3}\n").unwrap_err();
        assert_eq!(e.to_string(), "line 1: class: expected a non-empty string");
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let e = |t: &str| Dataset::parse(t).unwrap_err().to_string();
        assert_eq!(e("{\"prompt\": 3}\n"), "line 1: prompt: not a string");
        assert!(e("{\"prompt\": \"a\"}\n{oops\n").starts_with("line 2: not JSON"));
        assert!(e("{\"prompt\": \"a\", \"max_tokens\": -1}\n").starts_with("line 1: max_tokens"));
        assert!(e("{\"messages\": []}\n").contains("the list is empty"));
        assert!(e("{\"question\": \"a\"}\n").contains("\"prompt\" string or a \"messages\" list"));
        assert_eq!(Dataset::parse("\n").unwrap_err(), DatasetError::Empty);
        assert!(e("[{\"id\": 1}]").starts_with("record 1: conversations"));
    }

    #[test]
    fn samples_are_seeded() {
        let text: String = (0..20)
            .map(|i| format!("{{\"prompt\": \"p{i}\"}}\n"))
            .collect();
        let d = Dataset::parse(&text).unwrap();
        let a = d.sample(5, 1);
        assert_eq!(a.len(), 5);
        assert_eq!(a, d.sample(5, 1));
        assert_ne!(a, d.sample(5, 2));
        let mut all: Vec<String> = d.sample(100, 3).into_iter().map(|p| p.prompt).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 20, "every prompt once");
    }
}
