//! The simulated servers' answers with log-probabilities (`tokenscope mock`
//! over HTTP, the page's Quality view in the browser): a chat request that asks `logprobs` (or
//! `temperature: 0`) is answered (`stream: false`) with the greedy decode of the seeded toy
//! language model ([`ToyLm`]) for its prompt (the messages' text, as the mock
//! reads it, without trailing space: one user message is its content), and each token's log-probability
//! and top-k, as vLLM or OpenAI answer (`choices[0].logprobs.content`). The
//! model's distributions are stated exactly, so the quality tests know the true
//! KL divergence, top-1 agreement and divergence points of two mocks
//! (`--lm-perturb` moves one's logits by a known amount). A built-in task
//! (`tokenscope_quality::tasks`, known by its tag) is answered `ANSWER: ...`, right
//! for the share `--lm-tasks-right` says, on a set its seed fixes. A
//! completion with `echo: true` and `logprobs: k` has its prompt read by the
//! toy tokenizer ([`ToyLm::tokenize`]) and scored token by token (teacher
//! forcing), as vLLM answers it: `tokens`, `token_logprobs`, `top_logprobs`,
//! `text_offset`, the first token without a log-probability.

use super::tasks;
use super::toy_lm::ToyLm;
use serde_json::{Value, json};

/// How a simulated server answers requests for log-probabilities.
#[derive(Debug, Clone, Copy)]
pub struct LmServe {
    /// The model.
    pub lm: ToyLm,
    /// Give log-probabilities (`false`: a server without them; the text is the
    /// model's all the same).
    pub logprobs: bool,
    /// Share of the built-in tasks answered right (`--lm-tasks-right`).
    pub tasks_right: f64,
    /// The mock's seed (which tasks those are).
    pub seed: u64,
    /// Salt of `/tokenize`'s ids (`--tokenizer-seed`): another salt, another
    /// tokenizer.
    pub tokenizer_seed: u64,
    /// Noise on the logits of a request that shared the engine with others
    /// (`--lm-batch-noise`): 0, batch-invariant.
    pub batch_noise: f64,
    /// Name tokens by id when asked (vLLM's `return_tokens_as_token_ids`:
    /// `token_id:N`, N the word's index in the vocabulary).
    pub token_ids: bool,
    /// Score an `echo`ed prompt on the completions API (vLLM); `false`: only
    /// through [`generate`] (SGLang, whose OpenAI server computes no prompt
    /// log-probabilities).
    pub echo_logprobs: bool,
    /// Serve SGLang's native `/generate` ([`generate`]); `false`: a server
    /// without it (vLLM, llama-server).
    pub native_generate: bool,
}

impl LmServe {
    /// How a request is answered that ran `batched` (beside others) or alone:
    /// a batch-variant server's model moves in a batch.
    pub fn in_batch(&self, batched: bool) -> LmServe {
        if !batched || self.batch_noise == 0.0 {
            return *self;
        }
        let lm = self.lm;
        LmServe {
            lm: lm.perturbed(
                (lm.perturb.powi(2) + self.batch_noise.powi(2)).sqrt(),
                lm.perturb_seed ^ 0xba7c_4ed0,
            ),
            ..*self
        }
    }
}

/// `/tokenize`'s ids for `text`: one per word (its letters) and per
/// punctuation mark, as the simulator counts prompts
/// (`workload::prompts::approx_tokens`), each a salted hash of its text.
pub fn token_ids(text: &str, salt: u64) -> Vec<u64> {
    let id = |piece: &str| {
        let mut h = tokenscope_stats::rng::Fnv1a::seeded(salt);
        h.eat(piece.as_bytes());
        h.value() % 100_000
    };
    let mut ids = Vec::new();
    for word in text.split_whitespace() {
        let letters: String = word.chars().filter(|c| !c.is_ascii_punctuation()).collect();
        if !letters.is_empty() {
            ids.push(id(&letters));
        }
        ids.extend(
            word.chars()
                .filter(char::is_ascii_punctuation)
                .map(|c| id(c.encode_utf8(&mut [0; 4]))),
        );
    }
    ids
}

/// `n` greedy tokens of `prompt`'s answer: its text, and when asked (`top`:
/// `top_logprobs`, at most the vocabulary) the `logprobs` object, its tokens
/// named by id when `by_id` is asked of a server that can.
pub fn answer(serve: &LmServe, prompt: &str, n: usize, top: usize, by_id: bool) -> (String, Value) {
    let name = |i: usize, pos: usize| {
        if by_id && serve.token_ids {
            format!("token_id:{i}")
        } else {
            ToyLm::token_text(i, pos)
        }
    };
    // A built-in task: its answer, right for the share the mock was told.
    if let Some((task_seed, index)) = tasks::tag_of(prompt) {
        let t = tasks::task(task_seed, index);
        let right = tasks::simulated_right(serve.seed, task_seed, index, serve.tasks_right);
        let a = if right {
            t.answer.clone()
        } else {
            tasks::wrong_answer(&t)
        };
        return (format!("Working it out.\nANSWER: {a}"), Value::Null);
    }
    let top = (top > 0 && serve.logprobs).then_some(top);
    let lm = serve.lm;
    let mut state = lm.start(prompt);
    let mut text = String::new();
    let mut content = Vec::with_capacity(n);
    for pos in 0..n {
        let lp = lm.logprobs(state);
        let t = crate::toy_lm::argmax(&lp);
        let token = ToyLm::token_text(t, pos);
        text.push_str(&token);
        if let Some(k) = top {
            let top: Vec<Value> = most_likely(&lp)
                .iter()
                .take(k.min(lp.len()))
                .map(|&i| json!({"token": name(i, pos), "logprob": lp[i], "bytes": null}))
                .collect();
            content.push(
                json!({"token": name(t, pos), "logprob": lp[t], "bytes": null, "top_logprobs": top}),
            );
        }
        state = ToyLm::next(state, t);
    }
    let logprobs = if top.is_some() {
        json!({ "content": content })
    } else {
        Value::Null
    };
    (text, logprobs)
}

/// A completion with `echo` and `logprobs: k`: `prompt` read by the toy
/// tokenizer and scored token by token from the text's start state, then `n`
/// greedy tokens after it; the text (the prompt and the answer) and the
/// legacy `logprobs` object (null from a server without log-probabilities).
pub fn echo(serve: &LmServe, prompt: &str, n: usize, k: usize) -> (String, Value) {
    let lm = serve.lm;
    let top_of = |lp: &[f64], pos: usize| {
        let map: serde_json::Map<String, Value> = most_likely(lp)
            .iter()
            .take(k.clamp(1, lp.len()))
            .map(|&i| (ToyLm::token_text(i, pos), json!(lp[i])))
            .collect();
        Value::Object(map)
    };
    let (mut tokens, mut lps, mut tops, mut offsets) = (vec![], vec![], vec![], vec![]);
    let mut text = String::new();
    let mut state = lm.text_start();
    let prompt_tokens = lm.tokenize(prompt);
    for (pos, (token, id)) in prompt_tokens.iter().enumerate() {
        let lp = lm.logprobs(state);
        offsets.push(json!(text.len()));
        text.push_str(token);
        tokens.push(json!(token));
        if pos == 0 {
            lps.push(Value::Null);
            tops.push(Value::Null);
        } else {
            lps.push(json!(lp[*id]));
            tops.push(top_of(&lp, pos));
        }
        state = ToyLm::next(state, *id);
    }
    for i in 0..n {
        let pos = prompt_tokens.len() + i;
        let lp = lm.logprobs(state);
        let t = crate::toy_lm::argmax(&lp);
        let token = ToyLm::token_text(t, pos);
        offsets.push(json!(text.len()));
        text.push_str(&token);
        tokens.push(json!(token));
        lps.push(json!(lp[t]));
        tops.push(top_of(&lp, pos));
        state = ToyLm::next(state, t);
    }
    let logprobs = if serve.logprobs {
        json!({"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets})
    } else {
        Value::Null
    };
    (text, logprobs)
}

/// SGLang's native `/generate` with `return_logprob` from
/// `logprob_start_len: 0` and `top_logprobs_num: k`: `prompt` read by the toy
/// tokenizer and scored token by token as [`echo`] scores it, then one greedy
/// token; `meta_info`'s `input_token_logprobs` (`[logprob, id, text]`, the
/// first without a log-probability), `input_top_logprobs` and the output's;
/// with `ids` (`token_ids_logprob`), `input_token_ids_logprobs`: those ids'
/// entries at each token (ids outside the vocabulary left out).
/// Without log-probabilities (a server without them) the lists are absent.
pub fn generate(serve: &LmServe, prompt: &str, k: usize, ids: &[u64]) -> Value {
    let lm = serve.lm;
    let entry =
        |lp: Option<f64>, id: usize, pos: usize| json!([lp, id, ToyLm::token_text(id, pos)]);
    let top_of = |lp: &[f64], pos: usize| -> Value {
        most_likely(lp)
            .iter()
            .take(k.clamp(1, lp.len()))
            .map(|&i| entry(Some(lp[i]), i, pos))
            .collect()
    };
    let (mut input, mut input_top, mut input_ids) = (Vec::new(), Vec::new(), Vec::new());
    let mut state = lm.text_start();
    let prompt_tokens = lm.tokenize(prompt);
    for (pos, (piece, id)) in prompt_tokens.iter().enumerate() {
        let lp = lm.logprobs(state);
        // The prompt's own piece as its text, as `echo` names it.
        if pos == 0 {
            input.push(json!([null, id, piece]));
            input_top.push(Value::Null);
            input_ids.push(Value::Null);
        } else {
            input.push(json!([lp[*id], id, piece]));
            input_top.push(top_of(&lp, pos));
            let asked: Vec<Value> = ids
                .iter()
                .filter_map(|&i| usize::try_from(i).ok().filter(|i| *i < lp.len()))
                .map(|i| entry(Some(lp[i]), i, pos))
                .collect();
            input_ids.push(json!(asked));
        }
        state = ToyLm::next(state, *id);
    }
    let pos = prompt_tokens.len();
    let lp = lm.logprobs(state);
    let t = super::toy_lm::argmax(&lp);
    let mut meta = json!({"prompt_tokens": pos, "completion_tokens": 1});
    if serve.logprobs {
        meta["input_token_logprobs"] = json!(input);
        meta["input_top_logprobs"] = json!(input_top);
        if !ids.is_empty() {
            meta["input_token_ids_logprobs"] = json!(input_ids);
        }
        meta["output_token_logprobs"] = json!([entry(Some(lp[t]), t, pos)]);
        meta["output_top_logprobs"] = json!([top_of(&lp, pos)]);
    }
    json!({"text": ToyLm::token_text(t, pos), "meta_info": meta})
}

/// Token ids by log-probability, the most likely first (the lowest id on a tie).
fn most_likely(lp: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..lp.len()).collect();
    order.sort_by(|a, b| lp[*b].total_cmp(&lp[*a]).then(a.cmp(b)));
    order
}
