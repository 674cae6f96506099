//! Exact token counts through a server's tokenizer, without I/O: what to ask
//! `/tokenize`, how to read its answer, and how the words that make exact
//! prompts are found. Both clients use it: `bench --tokenizer` (which also takes
//! a `tokenizer.json`) and the page (`tokenizer=`), each doing its own requests.
//!
//! The contracts (`docs/metrics.md`, "Exact token counts"): llama.cpp's `POST
//! /tokenize {content, add_special: false}` -> `{tokens: [...]}`; vLLM's `POST
//! /tokenize {model, prompt, add_special_tokens: false}` -> `{count, tokens}`.
//!
//! The search: a word of [`vocabulary`] is kept when it is one token at a text's
//! start and one more after "the " ([`probe_texts`], [`single_token_words`]); at
//! least [`MIN_SINGLE_WORDS`] must be, and sample prompts of them must count
//! their words ([`check_prompts`]: words do not merge across spaces). A prompt of
//! `n` such words ([`super::prompts::exact_prompt`]) is then `n` tokens.

use serde::{Deserialize, Serialize};

use super::prompts::{exact_prompt, vocabulary};
use tokenscope_measure::openai::{Api, RequestSpec};

/// Which `/tokenize` contract a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenizeApi {
    /// llama.cpp: `{content}` -> `{tokens}`.
    LlamaCpp,
    /// vLLM (and SGLang): `{model, prompt}` -> `{count, tokens}`.
    Vllm,
}

impl TokenizeApi {
    /// Both, in the order a client tries them.
    pub const ALL: [TokenizeApi; 2] = [TokenizeApi::LlamaCpp, TokenizeApi::Vllm];

    /// The report's `tokens.source`.
    pub fn source(self) -> &'static str {
        match self {
            TokenizeApi::LlamaCpp => "llama.cpp /tokenize",
            TokenizeApi::Vllm => "vLLM /tokenize",
        }
    }

    /// The request body counting `text` (no special tokens).
    pub fn body(self, model: &str, text: &str) -> serde_json::Value {
        match self {
            TokenizeApi::LlamaCpp => serde_json::json!({"content": text, "add_special": false}),
            TokenizeApi::Vllm => {
                serde_json::json!({"model": model, "prompt": text, "add_special_tokens": false})
            }
        }
    }
}

/// What a client sends first to learn whether `/tokenize` speaks a contract: it
/// must count this as [`plausible_detect`] tokens.
pub const DETECT_TEXT: &str = "hello world";

/// Whether `tokens` is a plausible count of [`DETECT_TEXT`].
pub fn plausible_detect(tokens: u64) -> bool {
    (1..=8).contains(&tokens)
}

/// The token count in a `/tokenize` answer: vLLM's `count`, or the length of
/// `tokens` (llama.cpp, vLLM); `None` when it has neither.
pub fn tokens_in(answer: &serde_json::Value) -> Option<u64> {
    answer
        .get("count")
        .and_then(serde_json::Value::as_u64)
        .or_else(|| Some(answer.get("tokens")?.as_array()?.len() as u64))
}

/// The token ids of a `/tokenize` answer: `tokens` as numbers (vLLM,
/// llama.cpp) or as `{id, piece}` objects (llama.cpp's `with_pieces`).
pub fn token_ids(answer: &serde_json::Value) -> Option<Vec<u64>> {
    answer
        .get("tokens")?
        .as_array()?
        .iter()
        .map(|t| t.as_u64().or_else(|| t.get("id")?.as_u64()))
        .collect()
}

/// Fewer single-token words than this and prompts stay approximate.
pub const MIN_SINGLE_WORDS: usize = 16;

/// The texts whose counts decide the single-token words, in order: "the", then
/// for each word of [`vocabulary`] "the {word}" and "{word}".
pub fn probe_texts() -> Vec<String> {
    let mut texts = vec!["the".to_owned()];
    for w in vocabulary() {
        texts.push(format!("the {w}"));
        texts.push((*w).to_owned());
    }
    texts
}

/// The words that are one token at a text's start and after a space, from the
/// counts of [`probe_texts`] (in its order); `None` when fewer than
/// [`MIN_SINGLE_WORDS`] are, or `counts` is not one per text.
pub fn single_token_words(counts: &[u64]) -> Option<Vec<&'static str>> {
    let words = vocabulary();
    if counts.len() != 1 + 2 * words.len() {
        return None;
    }
    let base = counts[0];
    let single: Vec<&'static str> = words
        .iter()
        .zip(counts[1..].chunks_exact(2))
        .filter(|(_, c)| c[0] == base + 1 && c[1] == 1)
        .map(|(w, _)| *w)
        .collect();
    (single.len() >= MIN_SINGLE_WORDS).then_some(single)
}

/// Sample prompts of `single`'s words and the count each must have: a counter
/// that gives another for any of them merges words, and prompts stay approximate.
pub fn check_prompts(single: &[&str]) -> Vec<(String, u64)> {
    [(0u64, 1u64), (1, 17), (2, 64), (3, 257)]
        .into_iter()
        .map(|(i, n)| (exact_prompt(single, n, 0x7E57, i), n))
        .collect()
}

/// Prompt tokens the template-overhead request sends (besides a shared prefix):
/// its `usage.prompt_tokens` minus what it sent is the overhead.
pub const OVERHEAD_PROBE_TOKENS: u64 = 16;

/// The template-overhead request: [`OVERHEAD_PROBE_TOKENS`] of `words` after the
/// run's shared system prompt (`system`), `max_tokens` 1. Its
/// `usage.prompt_tokens` minus what it sent is the overhead.
pub fn overhead_spec(
    api: Api,
    model: &str,
    words: &[&str],
    seed: u64,
    system: Option<String>,
) -> RequestSpec {
    RequestSpec {
        system,
        messages: None,
        api,
        model: model.to_owned(),
        prompt: exact_prompt(words, OVERHEAD_PROBE_TOKENS, seed ^ 0x0EAD, 0),
        max_tokens: 1,
        ignore_eos: false,
        min_tokens: None,
        temperature: None,
        continuous_usage: false,
        tools: Vec::new(),
        tool_choice: None,
        output_schema: None,
        images: Vec::new(),
    }
}

/// The system prompt every request of a run seeded `seed` begins with
/// (`--shared-prefix`, `shared_prefix`): `tokens` of `words` (a tokenizer's
/// single-token words: exactly that many tokens), else of [`vocabulary`]
/// (about one token a word).
pub fn shared_prefix(words: Option<&[&str]>, tokens: u64, seed: u64) -> String {
    exact_prompt(words.unwrap_or(vocabulary()), tokens, seed ^ 0x5AED, 0)
}

/// The server's context window for `model`: vLLM's `max_model_len` in a `GET
/// /v1/models` answer, else llama.cpp's per-slot `n_ctx` in `GET /props`.
pub fn context_window(
    models: Option<&serde_json::Value>,
    props: Option<&serde_json::Value>,
    model: &str,
) -> Option<u64> {
    models
        .and_then(|m| m["data"].as_array())
        .into_iter()
        .flatten()
        .find(|m| m["id"] == model)
        .and_then(|m| m["max_model_len"].as_u64())
        .or_else(|| props?["default_generation_settings"]["n_ctx"].as_u64())
}

/// How long synthetic prompts are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum InputLength {
    /// This many tokens.
    Tokens(u32),
    /// This fraction of the server's context window (`0.75max`), resolved before
    /// the run.
    OfContext(f64),
}

impl InputLength {
    /// Parse `--input-tokens`: `256`, or `0.75max` (a fraction in (0, 1]).
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if let Some(f) = s.strip_suffix("max") {
            let f: f64 = f.trim().parse().map_err(|_| {
                format!("{s:?}: expected a number of tokens or a fraction like 0.75max")
            })?;
            if !(f > 0.0 && f <= 1.0) {
                return Err(format!("{s:?}: the fraction must be in (0, 1]"));
            }
            return Ok(InputLength::OfContext(f));
        }
        match s.parse::<u32>() {
            Ok(0) => Err("0 must be at least 1".into()),
            Ok(n) => Ok(InputLength::Tokens(n)),
            Err(_) => Err(format!(
                "{s:?}: expected a number of tokens or a fraction like 0.75max"
            )),
        }
    }

    /// Parse a comma-separated list of lengths (input tiers).
    pub fn parse_list(s: &str) -> Result<Vec<Self>, String> {
        let v: Vec<Self> = s
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(Self::parse)
            .collect::<Result<_, _>>()?;
        if v.is_empty() {
            return Err(format!("{s:?}: expected a length or a list (64,256,512)"));
        }
        Ok(v)
    }

    /// The tokens of a fraction of a `window`-token context (at least 1).
    pub fn resolve(self, window: u64) -> u32 {
        match self {
            InputLength::Tokens(n) => n,
            InputLength::OfContext(f) => ((window as f64 * f).floor() as u32).max(1),
        }
    }

    /// As typed: `256`, `0.75max`.
    pub fn label(self) -> String {
        match self {
            InputLength::Tokens(n) => n.to_string(),
            InputLength::OfContext(f) => format!("{f}max"),
        }
    }

    /// The tokens, once resolved (a fraction not resolved yet: `None`).
    pub fn tokens(self) -> Option<u32> {
        match self {
            InputLength::Tokens(n) => Some(n),
            InputLength::OfContext(_) => None,
        }
    }
}

/// One input and output tier (`--input-tokens 64,256 --max-tokens 128,256`,
/// the page's `input_tokens` and `max_tokens` lists): the whole sweep runs at
/// each, one report per tier.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tier {
    /// The prompts' length.
    pub input: InputLength,
    /// `max_tokens`.
    pub max_tokens: u32,
}

impl Tier {
    /// Every pair, inputs outer (as both clients run them).
    pub fn grid(inputs: &[InputLength], outputs: &[u32]) -> Vec<Tier> {
        inputs
            .iter()
            .flat_map(|&input| {
                outputs
                    .iter()
                    .map(move |&max_tokens| Tier { input, max_tokens })
            })
            .collect()
    }

    /// `in256-out128` (`in0.75max-out128`), as file names carry it.
    pub fn label(&self) -> String {
        format!("in{}-out{}", self.input.label(), self.max_tokens)
    }
}

/// How far from an input tier a prompts file's prompt may be and still be sent
/// at that tier: 25% of the tier's tokens.
pub const TIER_BAND: f64 = 0.25;

/// The prompts of `lengths` (tokens each) within [`TIER_BAND`] of `tier` tokens,
/// by index; none: the shortest and longest there are, for the error.
pub fn pick_tier(lengths: &[u64], tier: u32) -> Result<Vec<usize>, (u64, u64)> {
    let band = TIER_BAND * f64::from(tier);
    let keep: Vec<usize> = (0..lengths.len())
        .filter(|&i| (lengths[i] as f64 - f64::from(tier)).abs() <= band)
        .collect();
    if keep.is_empty() {
        let lo = lengths.iter().min().copied().unwrap_or(0);
        let hi = lengths.iter().max().copied().unwrap_or(0);
        return Err((lo, hi));
    }
    Ok(keep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::approx_tokens;

    #[test]
    fn tokenize_answers_of_both_contracts() {
        // As tests/fixtures quote them (shared/fixtures/tokenize.md).
        let llama = serde_json::json!({"tokens": [123, 456, 789]});
        assert_eq!(tokens_in(&llama), Some(3));
        let pieces =
            serde_json::json!({"tokens": [{"id": 1, "piece": "a"}, {"id": 2, "piece": "b"}]});
        assert_eq!(tokens_in(&pieces), Some(2));
        let vllm = serde_json::json!({"count": 2, "max_model_len": 4096, "tokens": [1, 2]});
        assert_eq!(tokens_in(&vllm), Some(2));
        assert_eq!(tokens_in(&serde_json::json!({"error": "no"})), None);
        assert_eq!(
            TokenizeApi::LlamaCpp.body("m", "hi"),
            serde_json::json!({"content": "hi", "add_special": false})
        );
        assert_eq!(
            TokenizeApi::Vllm.body("m", "hi"),
            serde_json::json!({"model": "m", "prompt": "hi", "add_special_tokens": false})
        );
    }

    /// A counter where the words of `merged` are two tokens each: they are
    /// left out, the others kept.
    #[test]
    fn single_words_from_counts() {
        let merged = ["time", "world"];
        let count = |t: &str| -> u64 {
            t.split(' ')
                .map(|w| if merged.contains(&w) { 2 } else { 1 })
                .sum()
        };
        let counts: Vec<u64> = probe_texts().iter().map(|t| count(t)).collect();
        let single = single_token_words(&counts).unwrap();
        assert_eq!(single.len(), vocabulary().len() - merged.len());
        assert!(single.iter().all(|w| !merged.contains(w)));
        for (p, n) in check_prompts(&single) {
            assert_eq!(count(&p), n);
            assert_eq!(approx_tokens(&p), n);
        }
        // Too few, or counts that do not match the texts: approximate.
        assert_eq!(single_token_words(&vec![2; counts.len()]), None);
        assert_eq!(single_token_words(&counts[1..]), None);
    }

    #[test]
    fn input_lengths() {
        assert_eq!(InputLength::parse("256"), Ok(InputLength::Tokens(256)));
        assert_eq!(
            InputLength::parse(" 0.75max"),
            Ok(InputLength::OfContext(0.75))
        );
        assert_eq!(InputLength::OfContext(0.75).resolve(4096), 3072);
        assert_eq!(InputLength::OfContext(0.75).label(), "0.75max");
        for bad in ["0", "1.5max", "max", "x"] {
            assert!(InputLength::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tiers_are_every_pair_inputs_outer() {
        let inputs = InputLength::parse_list("64, 0.5max").unwrap();
        let labels: Vec<String> = Tier::grid(&inputs, &[16, 32])
            .iter()
            .map(Tier::label)
            .collect();
        assert_eq!(
            labels,
            [
                "in64-out16",
                "in64-out32",
                "in0.5max-out16",
                "in0.5max-out32"
            ]
        );
    }

    #[test]
    fn prompts_picked_into_a_tier() {
        assert_eq!(pick_tier(&[10, 40, 47, 50, 63, 100], 50), Ok(vec![1, 2, 3]));
        assert_eq!(pick_tier(&[10, 100], 50), Err((10, 100)));
    }

    #[test]
    fn context_window_from_either_server() {
        let models = serde_json::json!({"data": [{"id": "a", "max_model_len": 2048}, {"id": "b"}]});
        let props = serde_json::json!({"default_generation_settings": {"n_ctx": 512}});
        assert_eq!(context_window(Some(&models), Some(&props), "a"), Some(2048));
        assert_eq!(context_window(Some(&models), Some(&props), "b"), Some(512));
        assert_eq!(context_window(Some(&models), None, "b"), None);
        assert_eq!(context_window(None, Some(&props), "x"), Some(512));
    }
}
