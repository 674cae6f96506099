//! One answer as the API gave it.
//!
//! Read from an OpenAI-style chat completion (`stream: false`) asked with
//! `logprobs: true, top_logprobs: K`: `choices[0].message.content`, and per
//! generated token `choices[0].logprobs.content[i]`: `token`, `logprob` (natural
//! log) and `top_logprobs` (the K most likely tokens at that position). vLLM,
//! SGLang, llama-server and OpenAI answer in this shape; a server without
//! log-probabilities answers the text alone (the behaviour checks still run).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One alternative at a position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alt {
    /// The token's text.
    pub token: String,
    /// Its natural-log probability.
    pub logprob: f64,
    /// Its id, where the server gave it (SGLang's native scores): what the
    /// candidate can be asked for by id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
}

/// One generated token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// The token's text.
    pub token: String,
    /// Its natural-log probability, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprob: Option<f64>,
    /// The most likely tokens at this position, most likely first (empty when
    /// the server gave none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<Alt>,
}

/// One answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The answer's text.
    pub text: String,
    /// Its tokens with their log-probabilities (empty: the server gave none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub positions: Vec<Position>,
    /// The model the server named in its answer.
    #[serde(default)]
    pub model: String,
}

impl Sample {
    /// Whether every token and alternative is named by id (`token_id:N`,
    /// vLLM's `return_tokens_as_token_ids`).
    pub fn tokens_are_ids(&self) -> bool {
        let id = |t: &str| {
            t.strip_prefix("token_id:")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        !self.positions.is_empty()
            && self
                .positions
                .iter()
                .all(|p| id(&p.token) && p.top.iter().all(|a| id(&a.token)))
    }

    /// Whether the answer carried the top-k alternatives of its tokens.
    pub fn has_top_logprobs(&self) -> bool {
        !self.positions.is_empty() && self.positions.iter().all(|p| !p.top.is_empty())
    }
}

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SampleError {
    /// Not a chat completion.
    #[error("not a chat completion: {0}")]
    Shape(&'static str),
}

/// Read a chat completion (`stream: false`).
pub fn parse_chat_completion(v: &Value) -> Result<Sample, SampleError> {
    let choice = v["choices"]
        .get(0)
        .ok_or(SampleError::Shape("no choices[0]"))?;
    let text = choice["message"]["content"]
        .as_str()
        .ok_or(SampleError::Shape("no choices[0].message.content"))?
        .to_owned();
    let positions = match choice["logprobs"]["content"].as_array() {
        None => Vec::new(),
        Some(list) => list
            .iter()
            .map(|t| {
                let mut top: Vec<Alt> = t["top_logprobs"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| {
                                Some(Alt {
                                    token: x["token"].as_str()?.to_owned(),
                                    logprob: finite(x["logprob"].as_f64()?)?,
                                    id: None,
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                most_likely_first(&mut top);
                Ok(Position {
                    token: t["token"]
                        .as_str()
                        .ok_or(SampleError::Shape("a logprobs entry without its token"))?
                        .to_owned(),
                    logprob: t["logprob"].as_f64().and_then(finite),
                    top,
                })
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(Sample {
        text,
        positions,
        model: v["model"].as_str().unwrap_or_default().to_owned(),
    })
}

/// Alternatives in order, the most likely first.
pub(crate) fn most_likely_first(top: &mut [Alt]) {
    top.sort_by(|a, b| b.logprob.total_cmp(&a.logprob));
}

/// `-inf` (a token the server gives no chance) is kept as a very small log
/// probability; NaN is dropped.
pub(crate) fn finite(x: f64) -> Option<f64> {
    if x.is_nan() { None } else { Some(x.max(-1e4)) }
}

/// The prompts asked: `n` short open-ended requests made from `seed` (no
/// dataset, no licence, no network): the same seed gives the same prompts, so a
/// golden file's answers pair with a later run's.
pub fn probe_prompts(seed: u64, n: usize) -> Vec<String> {
    const TOPICS: [&str; 12] = [
        "the sea",
        "a city at night",
        "bread",
        "a mountain railway",
        "bees",
        "winter",
        "a library",
        "rivers",
        "clocks",
        "a market",
        "the moon",
        "paper",
    ];
    const ASKS: [&str; 6] = [
        "Write three sentences about",
        "Describe",
        "Explain to a child",
        "List five facts about",
        "Tell a short story about",
        "Give an opinion on",
    ];
    let mut rng = tokenscope_stats::rng::Rng::new(seed ^ 0x0a11_7e57);
    (0..n)
        .map(|i| {
            let ask = ASKS[rng.below(ASKS.len() as u64) as usize];
            let topic = TOPICS[rng.below(TOPICS.len() as u64) as usize];
            format!("{ask} {topic}. ({})", i + 1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_by_id_are_told_from_text() {
        let read = |a: &str, b: &str| {
            parse_chat_completion(
                &serde_json::json!({"model": "m", "choices": [{"message": {"content": "x"},
                "logprobs": {"content": [{"token": a, "logprob": -0.1,
                    "top_logprobs": [{"token": b, "logprob": -0.1}]}]}}]}),
            )
            .unwrap()
        };
        assert!(read("token_id:12", "token_id:3").tokens_are_ids());
        // One alternative by text, an empty id, a token that only starts so.
        assert!(!read("token_id:12", "x").tokens_are_ids());
        assert!(!read("token_id:", "token_id:3").tokens_are_ids());
        assert!(!read("token_id:1a", "token_id:3").tokens_are_ids());
    }

    #[test]
    fn reads_a_chat_completion_with_and_without_logprobs() {
        let v = serde_json::json!({"model": "m", "choices": [{"message": {"content": "a b"},
            "logprobs": {"content": [
                {"token": "a", "logprob": -0.1, "top_logprobs": [{"token": "c", "logprob": -3.0}, {"token": "a", "logprob": -0.1}]},
                {"token": " b", "logprob": -0.5, "top_logprobs": [{"token": " b", "logprob": -0.5}]}]}}]});
        let s = parse_chat_completion(&v).unwrap();
        assert_eq!(s.text, "a b");
        assert_eq!(s.positions.len(), 2);
        assert_eq!(
            s.positions[0].top[0].token, "a",
            "sorted, most likely first"
        );
        assert!(s.has_top_logprobs());
        let plain = serde_json::json!({"choices": [{"message": {"content": "x"}}]});
        let s = parse_chat_completion(&plain).unwrap();
        assert!(s.positions.is_empty() && !s.has_top_logprobs());
        assert!(parse_chat_completion(&serde_json::json!({"error": "x"})).is_err());
    }
}
