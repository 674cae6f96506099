//! Teacher-forced scoring: both servers read the same fixed text as a prompt
//! and give, for each of its tokens, the log-probability and top-k they gave it
//! (OpenAI's legacy completions with `echo` and `logprobs`: vLLM; SGLang's
//! native `/generate` with `return_logprob` from `logprob_start_len: 0`, its
//! OpenAI server computing no prompt log-probabilities). Every position is then scored on both sides, as llama.cpp's
//! `--kl-divergence` scores a text, rather than the generated positions up to
//! where two greedy answers part.
//!
//! llama.cpp's rule for context: of a chunk of `n` tokens only the second half
//! is scored (tokens `n/2 + 1 ..`), so each scored token sees more than `n/2`
//! before it. [`scored`] applies it; the chunk bootstrap of [`super::measure`] then
//! resamples chunks.

use serde_json::Value;

use super::measure::{Distribution, compare};
use super::sample::{Alt, Position, Sample, SampleError, finite, most_likely_first};

/// The built-in text: plain prose written for this tool (no licence, no
/// benchmark it could leak into), cut into [`chunks`].
pub const TEXT: &str = "The harbour wakes before the town. Long before the first bus climbs the hill, the fishing boats come in under a sky that is still more grey than blue, and the men on the quay sort the catch by lamplight into boxes of ice. Gulls wait on the roofs of the sheds. A baker two streets back has been at work since three, and the smell of bread drifts down to the water, where it mixes with salt and diesel and the cold smell of the sea itself. \
By seven the market hall is open. The stalls are set out in the same order every day: fish near the door, where the floor can be washed down; then vegetables, then cheese and eggs, then a man who sells knives and will sharpen yours while you wait. People who have shopped here for forty years nod to one another and complain about the prices, which have always been too high. Children on their way to school are sent in for a loaf and come out with a loaf and a bag of sweets. \
The town was built on trade. Its merchants once sent wool across the sea and brought back wine, timber and news, and the tall houses along the river still carry their names carved above the doors. When the river silted up and the big ships went elsewhere, the town grew quiet and stayed quiet for a hundred years. Then the railway came, and with it visitors who wanted nothing more than to sit by the water and watch the boats, and the town learned a new trade without quite admitting it. \
In winter the visitors leave and the town becomes itself again. The cafes close early. Storms come in from the west and throw stones onto the promenade, and the council sends a man with a tractor to push them back. The library is warm and busy; the school puts on a play; the choir practises on Thursday evenings in the hall behind the church, and anyone who walks past can hear them through the windows, going over the same four bars until they are right. \
Spring arrives late and all at once. One week the hills are brown and the next they are green, and the lambs in the fields above the town stand about looking surprised. The boats are painted. The cafes put their tables out, although it is still too cold to sit at them. Somebody always swims on the first of May, and the local paper always prints a photograph, and the photograph always looks like the one from the year before.";

/// Words per chunk of the built-in text (about 60-80 tokens each).
pub const CHUNK_WORDS: usize = 60;

/// The text whose `/tokenize` ids show whether two servers share a
/// tokenizer: the built-in text's first chunk.
pub fn tokenizer_probe() -> String {
    chunks(TEXT, CHUNK_WORDS, 1).remove(0)
}

/// `text` cut into chunks of `words` whitespace-separated words (the last
/// kept when at least half as long), at most `max` of them.
pub fn chunks(text: &str, words: usize, max: usize) -> Vec<String> {
    let all: Vec<&str> = text.split_whitespace().collect();
    all.chunks(words.max(2))
        .filter(|c| c.len() * 2 >= words.max(2))
        .take(max)
        .map(|c| c.join(" "))
        .collect()
}

/// One chunk as the server scored it, from a completions answer with `echo`
/// and `logprobs` (`choices[0].logprobs`: `tokens`, `token_logprobs`,
/// `top_logprobs` as `{token: logprob}`, `text_offset`): the prompt's tokens,
/// the first one (no context, no log-probability; a BOS where the server adds
/// one) left out. The prompt's tokens are all but the answer's last
/// `usage.completion_tokens`; without `usage`, those that start (in
/// characters, as `text_offset` counts) inside `prompt`.
pub fn parse_echo(v: &Value, prompt: &str) -> Result<Sample, SampleError> {
    let lp = &v["choices"][0]["logprobs"];
    let tokens = lp["tokens"]
        .as_array()
        .ok_or(SampleError::Shape("no choices[0].logprobs.tokens"))?;
    let token_lps = lp["token_logprobs"].as_array();
    let tops = lp["top_logprobs"].as_array();
    let offsets = lp["text_offset"].as_array();
    let texts: Vec<&str> = tokens
        .iter()
        .map(|t| {
            t.as_str()
                .ok_or(SampleError::Shape("a token that is not text"))
        })
        .collect::<Result<_, _>>()?;
    let in_prompt = match v["usage"]["completion_tokens"].as_u64() {
        Some(g) if (g as usize) < texts.len() => texts.len() - g as usize,
        _ => {
            let prompt_chars = prompt.chars().count();
            let mut offset = 0usize;
            texts
                .iter()
                .enumerate()
                .take_while(|(i, t)| {
                    let start = offsets
                        .and_then(|o| o.get(*i))
                        .and_then(Value::as_u64)
                        .map_or(offset, |o| o as usize);
                    offset = start + t.chars().count();
                    start < prompt_chars
                })
                .count()
        }
    };
    let mut positions = Vec::new();
    for (i, token) in texts.iter().enumerate().take(in_prompt).skip(1) {
        let mut top: Vec<Alt> = tops
            .and_then(|t| t.get(i))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| {
                        Some(Alt {
                            token: k.clone(),
                            logprob: finite(v.as_f64()?)?,
                            id: None,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        most_likely_first(&mut top);
        positions.push(Position {
            token: (*token).to_owned(),
            logprob: token_lps
                .and_then(|l| l.get(i))
                .and_then(Value::as_f64)
                .and_then(finite),
            top,
        });
    }
    Ok(Sample {
        text: String::new(),
        positions,
        model: v["model"].as_str().unwrap_or_default().to_owned(),
    })
}

/// One chunk as the server scored it, from SGLang's native `/generate` with
/// `return_logprob`, `logprob_start_len: 0`, `top_logprobs_num` and
/// `return_text_in_logprobs` (`meta_info.input_token_logprobs`: `[logprob,
/// id, text]` per prompt token, the first without a log-probability;
/// `input_top_logprobs`: a list of such per token): the prompt's tokens, the
/// first left out as in [`parse_echo`]. A token without its text is named
/// by id (`token_id:N`). The ids the request named (`token_ids_logprob`:
/// `input_token_ids_logprobs`, the same entries per token) join each
/// position's list, so the list holds the reference's top k that were asked.
pub fn parse_generate(v: &Value) -> Result<Sample, SampleError> {
    let meta = &v["meta_info"];
    let tokens = meta["input_token_logprobs"]
        .as_array()
        .ok_or(SampleError::Shape("no meta_info.input_token_logprobs"))?;
    let tops = meta["input_top_logprobs"].as_array();
    let asked = meta["input_token_ids_logprobs"].as_array();
    // `[logprob, id, text]`: the text, else the id.
    let name = |e: &Value| -> Option<String> {
        match e.get(2).and_then(Value::as_str) {
            Some(t) => Some(t.to_owned()),
            None => e.get(1)?.as_u64().map(|id| format!("token_id:{id}")),
        }
    };
    let mut positions = Vec::new();
    for (i, entry) in tokens.iter().enumerate().skip(1) {
        let token = name(entry).ok_or(SampleError::Shape(
            "an input_token_logprobs entry without a token",
        ))?;
        let list = |l: Option<&Vec<Value>>| -> Vec<Alt> {
            l.and_then(|t| t.get(i))
                .and_then(Value::as_array)
                .map(|alts| {
                    alts.iter()
                        .filter_map(|a| {
                            Some(Alt {
                                token: name(a)?,
                                logprob: finite(a.get(0)?.as_f64()?)?,
                                id: a.get(1).and_then(Value::as_u64),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut top = list(tops);
        // (By id where both carry one: two ids of one text are two tokens.)
        for a in list(asked) {
            let listed = top.iter().any(|t| match (t.id, a.id) {
                (Some(x), Some(y)) => x == y,
                _ => t.token == a.token,
            });
            if !listed {
                top.push(a);
            }
        }
        most_likely_first(&mut top);
        positions.push(Position {
            token,
            logprob: entry.get(0).and_then(Value::as_f64).and_then(finite),
            top,
        });
    }
    Ok(Sample {
        text: String::new(),
        positions,
        model: String::new(),
    })
}

/// llama.cpp's context rule (`perplexity`, `kl_divergence`): of a chunk of
/// `n` tokens (the first, unscored, included) the logits from position `n/2`
/// on are scored, predicting tokens `n/2 + 1 ..= n - 1`: `n - 1 - n/2` of them.
pub fn scored(mut sample: Sample) -> Sample {
    let n = sample.positions.len() + 1;
    // Position p holds token p + 1.
    sample
        .positions
        .drain(..(n / 2).min(sample.positions.len()));
    sample
}

/// Whether two servers cut every chunk into the same tokens (else their
/// positions do not line up, and teacher-forcing compares nothing).
pub fn same_tokens(a: &[Sample], b: &[Sample]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.positions.len() == y.positions.len()
                && x.positions
                    .iter()
                    .zip(&y.positions)
                    .all(|(p, q)| p.token == q.token)
        })
}

/// The teacher-forced distribution of `candidate` against `reference` (the
/// same chunks, in order, with the same tokens): each chunk's second half
/// scored ([`scored`]), the chunks resampled for the interval. `None` when
/// no position carried top-k lists on both sides.
pub fn distribution(reference: &[Sample], candidate: &[Sample], seed: u64) -> Option<Distribution> {
    let r: Vec<Sample> = reference.iter().cloned().map(scored).collect();
    let c: Vec<Sample> = candidate.iter().cloned().map(scored).collect();
    compare(&r, &c, seed).distribution
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_text_cuts_into_whole_chunks() {
        let c = chunks(TEXT, CHUNK_WORDS, 100);
        assert!(c.len() >= 6, "{}", c.len());
        assert!(c.iter().all(|x| x.split(' ').count() >= CHUNK_WORDS / 2));
        assert_eq!(
            chunks("a b c d e", 4, 9),
            ["a b c d"],
            "a short tail dropped"
        );
        assert_eq!(
            chunks("a b c d e f", 4, 9),
            ["a b c d", "e f"],
            "half a chunk kept"
        );
        assert_eq!(chunks(TEXT, CHUNK_WORDS, 2).len(), 2);
    }

    #[test]
    fn a_generate_answer_reads_as_the_prompts_positions() {
        // SGLang's /generate for "Hi there you": the first token unscored.
        let v = json!({"text": ".", "meta_info": {
            "input_token_logprobs": [[null, 1, "Hi"], [-1.5, 7, " there"], [-0.25, 9, " you"]],
            "input_top_logprobs": [null,
                [[-0.5, 8, " here"], [-1.5, 7, " there"]],
                [[-0.25, 9, " you"]]],
            "output_token_logprobs": [[-2.0, 4, "."]]}});
        let s = parse_generate(&v).unwrap();
        assert_eq!(s.positions.len(), 2);
        assert_eq!(s.positions[0].token, " there");
        assert_eq!(s.positions[0].logprob, Some(-1.5));
        assert_eq!(s.positions[0].top[0].token, " here");
        assert_eq!(s.positions[1].top.len(), 1);
        // Without the text (no return_text_in_logprobs): tokens by id.
        let bare = json!({"meta_info": {
            "input_token_logprobs": [[null, 1], [-1.5, 7]],
            "input_top_logprobs": [null, [[-1.5, 7]]]}});
        let s = parse_generate(&bare).unwrap();
        assert_eq!(s.positions[0].token, "token_id:7");
        assert_eq!(s.positions[0].top[0].token, "token_id:7");
        assert!(parse_generate(&json!({"text": "x"})).is_err());
    }

    #[test]
    fn an_echo_answer_reads_as_the_prompts_positions() {
        // "Hi there you" then one generated token.
        let v = json!({"model": "m", "choices": [{"text": "Hi there you.", "logprobs": {
            "tokens": ["Hi", " there", " you", "."],
            "token_logprobs": [null, -1.5, -0.25, -2.0],
            "top_logprobs": [null, {" there": -1.5, " here": -0.5}, {" you": -0.25}, {".": -2.0}],
            "text_offset": [0, 2, 8, 12]
        }}]});
        let s = parse_echo(&v, "Hi there you").unwrap();
        assert_eq!(
            s.positions.len(),
            2,
            "the first and the generated token left out"
        );
        assert_eq!(s.positions[0].token, " there");
        assert_eq!(s.positions[0].logprob, Some(-1.5));
        assert_eq!(
            s.positions[0].top[0].token, " here",
            "sorted, most likely first"
        );
        // Without offsets, the tokens' own lengths place them.
        let mut w = v.clone();
        w["choices"][0]["logprobs"]
            .as_object_mut()
            .unwrap()
            .remove("text_offset");
        assert_eq!(parse_echo(&w, "Hi there you").unwrap(), s);
        // `usage` says how many were generated: a BOS before the prompt (its
        // offsets past the text's) changes nothing.
        let bos = json!({"choices": [{"logprobs": {
            "tokens": ["<s>", "Hi", " there", " you", "."],
            "token_logprobs": [null, -3.0, -1.5, -0.25, -2.0],
            "top_logprobs": [null, {"Hi": -3.0}, {" there": -1.5}, {" you": -0.25}, {".": -2.0}],
            "text_offset": [0, 3, 5, 11, 15]
        }}], "usage": {"prompt_tokens": 4, "completion_tokens": 1}});
        let tokens: Vec<String> = parse_echo(&bos, "Hi there you")
            .unwrap()
            .positions
            .into_iter()
            .map(|p| p.token)
            .collect();
        assert_eq!(tokens, ["Hi", " there", " you"]);
        // Nothing generated: every token is the prompt's; a count past the
        // answer's tokens is not believed (the offsets decide).
        let mut none = bos.clone();
        none["usage"]["completion_tokens"] = json!(0);
        assert_eq!(
            parse_echo(&none, "Hi there you").unwrap().positions.len(),
            4
        );
        let mut past = v.clone();
        past["usage"] = json!({"completion_tokens": 9});
        assert_eq!(parse_echo(&past, "Hi there you").unwrap(), s);
        // Characters, not bytes: "é" is one.
        let accent = json!({"choices": [{"logprobs": {
            "tokens": ["Café", " au", " lait", "."],
            "token_logprobs": [null, -1.0, -1.0, -1.0],
            "top_logprobs": [null, {" au": -1.0}, {" lait": -1.0}, {".": -1.0}],
            "text_offset": [0, 4, 7, 12]
        }}]});
        assert_eq!(
            parse_echo(&accent, "Café au lait").unwrap().positions.len(),
            2
        );
        assert!(parse_echo(&json!({"choices": [{}]}), "abc").is_err());
    }

    #[test]
    fn only_the_second_half_of_a_chunk_is_scored() {
        let pos = |t: &str| Position {
            token: t.into(),
            logprob: Some(-1.0),
            top: Vec::new(),
        };
        // 8 prompt tokens: positions hold tokens 1..=7; llama.cpp scores the
        // logits from position 4, predicting tokens 5..=7.
        let s = Sample {
            text: String::new(),
            positions: (1..8).map(|i| pos(&i.to_string())).collect(),
            model: String::new(),
        };
        let kept = scored(s.clone());
        let tokens: Vec<&str> = kept.positions.iter().map(|p| p.token.as_str()).collect();
        assert_eq!(tokens, ["5", "6", "7"]);
        assert!(same_tokens(
            std::slice::from_ref(&s),
            std::slice::from_ref(&s)
        ));
        assert!(!same_tokens(std::slice::from_ref(&s), &[kept]));
    }
}
