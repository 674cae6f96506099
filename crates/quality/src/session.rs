//! The checks' conversation with one server, over whatever carries requests: the
//! CLI's HTTP client, the page's `fetch`, the page's simulator. What to ask
//! (chat at temperature 0 with top-k log-probabilities, completions with `echo`
//! for teacher forcing, `/tokenize`, `/models`), what each answer means, and
//! every prompt's answer at a concurrency, in prompt order. The carrier is a
//! [`Transport`]; nothing here does I/O itself.

use std::future::Future;

use futures_util::{StreamExt as _, stream};
use serde_json::{Value, json};

use super::measure::{PairFigures, compare};
use super::report::Capabilities;
use super::sample::{Sample, parse_chat_completion};
use super::tasks::Task;
use super::teacher;
use tokenscope_measure::parse::{parse_base_url, redact_url};
use tokenscope_workload::tokens::{self, TokenizeApi};

/// What carries the requests, and where progress is said.
pub trait Transport {
    /// POST `body` as JSON to `url`; the answer's JSON, or what went wrong in
    /// words that name neither a key nor the URL's query.
    fn post(&self, url: &str, body: &Value) -> impl Future<Output = Result<Value, String>>;
    /// GET `url`'s JSON, likewise.
    fn get(&self, url: &str) -> impl Future<Output = Result<Value, String>>;
    /// A line of progress or a failure (once per kind), for the user.
    fn say(&self, line: &str);
}

/// One server: where its APIs are, what it is called in reports (the URL
/// without credentials or query), and what carries requests to it.
pub struct Server<T> {
    chat_url: String,
    completions_url: String,
    tokenize_url: String,
    generate_url: String,
    models_url: String,
    /// The URL as shown.
    pub shown: String,
    /// The carrier.
    pub transport: T,
}

impl<T: Transport> Server<T> {
    /// The server at base `url` (`http://host:port` or `.../v1`).
    pub fn new(url: &str, transport: T) -> Result<Server<T>, String> {
        let base = parse_base_url(url)?;
        Ok(Server {
            chat_url: base.endpoint("chat/completions"),
            completions_url: base.endpoint("completions"),
            tokenize_url: format!("{}/tokenize", base.origin()),
            generate_url: format!("{}/generate", base.origin()),
            models_url: base.endpoint("models"),
            shown: redact_url(url),
            transport,
        })
    }

    async fn chat(&self, body: &Value) -> Result<Value, String> {
        self.transport.post(&self.chat_url, body).await
    }

    /// The first model `/models` lists.
    pub async fn first_model(&self) -> Result<String, String> {
        let v = self
            .transport
            .get(&self.models_url)
            .await
            .map_err(|e| format!("{e} (asking /models)"))?;
        v["data"][0]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| {
                format!(
                    "{}: /models lists no model (name one: --model, or the page's model)",
                    self.shown
                )
            })
    }

    /// What the server can do: a one-token request with top-k
    /// log-probabilities, and without them when that is refused.
    pub async fn probe(&self, model: &str, top: u32) -> Capabilities {
        let ask = Ask {
            model: model.to_owned(),
            max_tokens: 1,
            top: Some(top),
            token_ids: false,
        };
        let read = |v: Result<Value, String>| v.ok().and_then(|v| parse_chat_completion(&v).ok());
        if let Some(s) = read(self.chat(&ask.body("Say hello.")).await) {
            // Tokens by id: asked, and every token (and alternative) so named.
            let by_id = Ask {
                token_ids: true,
                ..ask.clone()
            };
            let token_ids = read(self.chat(&by_id.body("Say hello.")).await)
                .is_some_and(|s| s.has_top_logprobs() && s.tokens_are_ids());
            return Capabilities {
                chat: true,
                top_logprobs: s.has_top_logprobs(),
                prompt_logprobs: false,
                prompt_logprobs_via: None,
                token_ids,
                model: s.model,
            };
        }
        let plain = Ask { top: None, ..ask };
        match read(self.chat(&plain.body("Say hello.")).await) {
            Some(s) => Capabilities {
                chat: true,
                top_logprobs: false,
                prompt_logprobs: false,
                prompt_logprobs_via: None,
                token_ids: false,
                model: s.model,
            },
            None => Capabilities::default(),
        }
    }

    /// Every prompt's answer, `concurrency` at a time, in prompt order; a
    /// prompt whose request failed is `None` (said once per kind of failure).
    pub async fn answers(
        &self,
        ask: &Ask,
        prompts: &[String],
        concurrency: u32,
    ) -> Vec<Option<Sample>> {
        self.in_order(prompts, concurrency, "a request", |p| async move {
            let v = self.chat(&ask.body(p)).await?;
            parse_chat_completion(&v).map_err(|e| format!("{}: {e}", self.shown))
        })
        .await
    }

    /// Each task's output text (`None`: the request failed).
    pub async fn task_outputs(
        &self,
        ask: &Ask,
        tasks: &[Task],
        concurrency: u32,
    ) -> Vec<Option<String>> {
        if tasks.is_empty() {
            return Vec::new();
        }
        let prompts: Vec<String> = tasks.iter().map(|t| t.prompt.clone()).collect();
        self.transport.say(&format!(
            "quality: {} tasks, concurrency {concurrency}",
            tasks.len()
        ));
        self.answers(ask, &prompts, concurrency)
            .await
            .into_iter()
            .map(|s| s.map(|s| s.text))
            .collect()
    }

    /// How the server scores a prompt's own tokens, if it does: `prefer`
    /// (the other server's route, so both read the text alike) first, then
    /// SGLang's native `/generate` (whose scores carry token ids), then `echo`
    /// with `logprobs` on the completions API (vLLM).
    pub async fn prompt_scoring(
        &self,
        model: &str,
        top: u32,
        prefer: Option<Scoring>,
    ) -> Option<Scoring> {
        let text = "The harbour wakes before the town.";
        let mut order = vec![Scoring::Generate, Scoring::Echo];
        if let Some(p) = prefer {
            order.retain(|h| *h != p);
            order.insert(0, p);
        }
        for how in order {
            let scored = self
                .score_one(how, model, top, text, &[])
                .await
                .is_ok_and(|s| {
                    s.positions.len() >= 2
                        && s.positions
                            .iter()
                            .all(|p| p.logprob.is_some() && !p.top.is_empty())
                });
            if scored {
                return Some(how);
            }
        }
        None
    }

    async fn score_one(
        &self,
        how: Scoring,
        model: &str,
        top: u32,
        text: &str,
        ids: &[u64],
    ) -> Result<Sample, String> {
        let read = |r: Result<Sample, super::sample::SampleError>| {
            r.map_err(|e| format!("{}: {e}", self.shown))
        };
        match how {
            Scoring::Echo => {
                let v = self
                    .transport
                    .post(&self.completions_url, &echo_body(model, text, top))
                    .await?;
                read(teacher::parse_echo(&v, text))
            }
            Scoring::Generate => {
                let v = self
                    .transport
                    .post(&self.generate_url, &generate_body(text, top, ids))
                    .await?;
                read(teacher::parse_generate(&v))
            }
        }
    }

    /// Each chunk scored by the server `how` it scores prompts (`None`: the
    /// request failed), `concurrency` at a time, in order; through
    /// `/generate`, each chunk's `ids` (the reference's) asked for too.
    pub async fn score(
        &self,
        how: Scoring,
        model: &str,
        top: u32,
        chunks: &[(String, Vec<u64>)],
        concurrency: u32,
    ) -> Vec<Option<Sample>> {
        self.in_order(
            chunks,
            concurrency,
            "a teacher-forced request",
            |(text, ids)| async move { self.score_one(how, model, top, text, ids).await },
        )
        .await
    }

    /// The server's token ids of `text` through `/tokenize` at its origin
    /// (llama.cpp's contract, then vLLM's and SGLang's); `None` without one.
    pub async fn token_ids(&self, model: &str, text: &str) -> Option<Vec<u64>> {
        for kind in TokenizeApi::ALL {
            if let Ok(v) = self
                .transport
                .post(&self.tokenize_url, &kind.body(model, text))
                .await
                && let Some(ids) = tokens::token_ids(&v).filter(|ids| !ids.is_empty())
            {
                return Some(ids);
            }
        }
        None
    }

    /// `ask` of each item, `concurrency` at a time, the results in the items'
    /// order; a failure is `None`, said once per kind (`what` failed).
    async fn in_order<'a, I, O, F, Fut>(
        &self,
        items: &'a [I],
        concurrency: u32,
        what: &str,
        ask: F,
    ) -> Vec<Option<O>>
    where
        O: Clone,
        F: Fn(&'a I) -> Fut,
        Fut: Future<Output = Result<O, String>>,
    {
        let results: Vec<(usize, Result<O, String>)> = stream::iter(items.iter().enumerate())
            .map(|(i, item)| {
                let fut = ask(item);
                async move { (i, fut.await) }
            })
            .buffer_unordered(concurrency.max(1) as usize)
            .collect()
            .await;
        let mut out = vec![None; items.len()];
        let mut said = std::collections::BTreeSet::new();
        for (i, r) in results {
            match r {
                Ok(s) => out[i] = Some(s),
                Err(e) => {
                    if said.insert(e.clone()) {
                        self.transport.say(&format!("quality: {what} failed: {e}"));
                    }
                }
            }
        }
        out
    }
}

/// What to ask: greedy (temperature 0), `max_tokens`, top-`top`
/// log-probabilities when `Some`.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The model asked for.
    pub model: String,
    /// Tokens per answer.
    pub max_tokens: u32,
    /// Top-k log-probabilities asked for.
    pub top: Option<u32>,
    /// Tokens named by id (vLLM's `return_tokens_as_token_ids`).
    pub token_ids: bool,
}

impl Ask {
    /// The chat request for `prompt`.
    pub fn body(&self, prompt: &str) -> Value {
        let mut b = json!({
            "model": self.model, "stream": false, "temperature": 0, "max_tokens": self.max_tokens,
            "messages": [{"role": "user", "content": prompt}],
        });
        if let Some(k) = self.top {
            b["logprobs"] = json!(true);
            b["top_logprobs"] = json!(k);
        }
        if self.token_ids {
            b["return_tokens_as_token_ids"] = json!(true);
        }
        b
    }
}

/// A completion that echoes `text` with each token's log-probability and top
/// `top` (teacher forcing), one generated token after it.
pub fn echo_body(model: &str, text: &str, top: u32) -> Value {
    json!({
        "model": model, "prompt": text, "max_tokens": 1, "temperature": 0,
        "echo": true, "logprobs": top,
    })
}

/// How a server scores a prompt's own tokens (teacher forcing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scoring {
    /// Completions with `echo` and `logprobs` (vLLM).
    Echo,
    /// SGLang's native `/generate` with `return_logprob` from
    /// `logprob_start_len: 0` (its OpenAI server computes no prompt
    /// log-probabilities).
    Generate,
}

impl Scoring {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scoring::Echo => "echo",
            Scoring::Generate => "generate",
        }
    }

    /// The route named `name` in a report.
    pub fn of_name(name: &str) -> Option<Scoring> {
        [Scoring::Echo, Scoring::Generate]
            .into_iter()
            .find(|s| s.name() == name)
    }
}

/// SGLang's native request scoring `text`'s own tokens with the top `top`,
/// each token's text included, one generated token after it; `ids` (the
/// reference's top ids) asked for at every token too (`token_ids_logprob`).
pub fn generate_body(text: &str, top: u32, ids: &[u64]) -> Value {
    let mut b = json!({
        "text": text,
        "sampling_params": {"max_new_tokens": 1, "temperature": 0},
        "return_logprob": true, "logprob_start_len": 0, "top_logprobs_num": top,
        "return_text_in_logprobs": true,
    });
    if !ids.is_empty() {
        b["token_ids_logprob"] = json!(ids);
    }
    b
}

/// Behaviour and distribution over the pairs where both sides answered.
pub fn paired(
    reference: &[Option<Sample>],
    candidate: &[Option<Sample>],
    seed: u64,
) -> PairFigures {
    let (r, c): (Vec<Sample>, Vec<Sample>) = reference
        .iter()
        .zip(candidate)
        .filter_map(|(a, b)| Some((a.clone()?, b.clone()?)))
        .unzip();
    let mut figures = compare(&r, &c, seed);
    // Chat answers are never asked for the other side's ids.
    if let Some(d) = figures.distribution.as_mut() {
        d.kld.reference_top_k = false;
    }
    figures
}
