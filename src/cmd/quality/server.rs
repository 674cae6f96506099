//! The two servers over HTTP: what each can do (a probe), and every prompt's
//! answer at a concurrency.

use std::time::Duration;

use anyhow::Context as _;
use futures_util::{StreamExt, stream};
use serde_json::{Value, json};
use tokenscope_core::parse::{parse_base_url, redact_url};
use tokenscope_core::quality::measure::{PairFigures, compare};
use tokenscope_core::quality::report::Capabilities;
use tokenscope_core::quality::sample::{Sample, parse_chat_completion};
use tokenscope_core::quality::tasks::Task;
use tokenscope_core::quality::teacher;
use tokenscope_core::workload::tokens::{self, TokenizeApi};

use crate::util::Secret;

/// One server over HTTP.
pub(super) struct Server {
    chat_url: String,
    completions_url: String,
    tokenize_url: String,
    models_url: String,
    pub(super) shown: String,
    key: Option<Secret>,
    client: reqwest::Client,
}

impl Server {
    pub(super) fn new(url: &str, key: Option<&str>, timeout: f64) -> anyhow::Result<Server> {
        let base = parse_base_url(url).map_err(|e| anyhow::anyhow!("{e}"))?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs_f64(timeout))
            .build()?;
        Ok(Server {
            chat_url: base.endpoint("chat/completions"),
            completions_url: base.endpoint("completions"),
            tokenize_url: format!("{}/tokenize", base.origin()),
            models_url: base.endpoint("models"),
            shown: redact_url(url),
            key: key.map(|k| Secret::new(k.to_owned())),
            client,
        })
    }

    async fn post(&self, body: &Value) -> anyhow::Result<Value> {
        self.post_to(&self.chat_url, body).await
    }

    async fn post_to(&self, url: &str, body: &Value) -> anyhow::Result<Value> {
        let mut req = self.client.post(url).json(body);
        if let Some(k) = &self.key {
            req = req.bearer_auth(k.expose());
        }
        // reqwest's errors name the URL, query and all: never shown.
        let resp = req
            .send()
            .await
            .map_err(reqwest::Error::without_url)
            .with_context(|| format!("{}: no answer", self.shown))?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        // (The body is the server's; a key in the URL never reaches it.)
        if status.as_u16() == 401 || status.as_u16() == 403 {
            anyhow::bail!(
                "{} answered {status}: it wants a key (the candidate's: --api-key or TOKENSCOPE_API_KEY; the reference's: TOKENSCOPE_REF_API_KEY)",
                self.shown
            );
        }
        if !status.is_success() {
            anyhow::bail!("{} answered {status}", self.shown);
        }
        serde_json::from_str(&text)
            .with_context(|| format!("{}: the answer is not JSON", self.shown))
    }

    pub(super) async fn first_model(&self) -> anyhow::Result<String> {
        let mut req = self.client.get(&self.models_url);
        if let Some(k) = &self.key {
            req = req.bearer_auth(k.expose());
        }
        let v: Value = req
            .send()
            .await
            .map_err(reqwest::Error::without_url)
            .with_context(|| format!("{}: no answer to /models", self.shown))?
            .json()
            .await
            .map_err(reqwest::Error::without_url)
            .with_context(|| format!("{}: /models is not JSON", self.shown))?;
        v["data"][0]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow::anyhow!("{}: /models lists no model (give --model)", self.shown))
    }
}

/// What to ask.
pub(super) struct Ask {
    pub(super) model: String,
    pub(super) max_tokens: u32,
    pub(super) top: Option<u32>,
}

impl Ask {
    fn body(&self, prompt: &str) -> Value {
        let mut b = json!({
            "model": self.model, "stream": false, "temperature": 0, "max_tokens": self.max_tokens,
            "messages": [{"role": "user", "content": prompt}],
        });
        if let Some(k) = self.top {
            b["logprobs"] = json!(true);
            b["top_logprobs"] = json!(k);
        }
        b
    }
}

/// What the server can do: a one-token request with top-k log-probabilities,
/// and without them when that is refused.
pub(super) async fn probe(server: &Server, model: &str, top: u32) -> Capabilities {
    let ask = Ask {
        model: model.to_owned(),
        max_tokens: 1,
        top: Some(top),
    };
    let with = server.post(&ask.body("Say hello.")).await;
    let read = |v: anyhow::Result<Value>| v.ok().and_then(|v| parse_chat_completion(&v).ok());
    match read(with) {
        Some(s) => Capabilities {
            chat: true,
            top_logprobs: s.has_top_logprobs(),
            prompt_logprobs: false,
            model: s.model,
        },
        None => {
            let plain = Ask { top: None, ..ask };
            match read(server.post(&plain.body("Say hello.")).await) {
                Some(s) => Capabilities {
                    chat: true,
                    top_logprobs: false,
                    prompt_logprobs: false,
                    model: s.model,
                },
                None => Capabilities::default(),
            }
        }
    }
}

/// Every prompt's answer, `concurrency` at a time, in prompt order; a prompt
/// whose request failed is `None` (and said on stderr, once per error kind).
pub(super) async fn answers(
    server: &Server,
    ask: &Ask,
    prompts: &[String],
    concurrency: u32,
) -> Vec<Option<Sample>> {
    in_order(prompts, concurrency, "a request", |p| async move {
        server.post(&ask.body(p)).await.and_then(|v| {
            parse_chat_completion(&v).map_err(|e| anyhow::anyhow!("{}: {e}", server.shown))
        })
    })
    .await
}

/// `ask` of each item, `concurrency` at a time, the results in the items'
/// order; a failure is `None`, said on stderr once per kind (`what` failed).
async fn in_order<'a, T, F, Fut>(
    items: &'a [String],
    concurrency: u32,
    what: &str,
    ask: F,
) -> Vec<Option<T>>
where
    T: Clone,
    F: Fn(&'a String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let results: Vec<(usize, anyhow::Result<T>)> = stream::iter(items.iter().enumerate())
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
                if said.insert(format!("{e:#}")) {
                    eprintln!("quality: {what} failed: {e:#}");
                }
            }
        }
    }
    out
}

/// Each task's output text (`None`: the request failed).
pub(super) async fn task_outputs(
    server: &Server,
    ask: &Ask,
    tasks: &[Task],
    concurrency: u32,
) -> Vec<Option<String>> {
    if tasks.is_empty() {
        return Vec::new();
    }
    let prompts: Vec<String> = tasks.iter().map(|t| t.prompt.clone()).collect();
    eprintln!("quality: {} tasks, concurrency {concurrency}", tasks.len());
    answers(server, ask, &prompts, concurrency)
        .await
        .into_iter()
        .map(|s| s.map(|s| s.text))
        .collect()
}

/// Pairs where both sides answered.
pub(super) fn paired(
    reference: &[Option<Sample>],
    candidate: &[Option<Sample>],
    seed: u64,
) -> PairFigures {
    let (r, c): (Vec<Sample>, Vec<Sample>) = reference
        .iter()
        .zip(candidate)
        .filter_map(|(a, b)| Some((a.clone()?, b.clone()?)))
        .unzip();
    compare(&r, &c, seed)
}

/// A completion that echoes `text` with each token's log-probability and top
/// `top` (teacher forcing), one generated token after it.
fn echo_body(model: &str, text: &str, top: u32) -> Value {
    json!({
        "model": model, "prompt": text, "max_tokens": 1, "temperature": 0,
        "echo": true, "logprobs": top,
    })
}

/// Whether the server scores a prompt's own tokens (`echo` with `logprobs` on
/// its completions API).
pub(super) async fn probe_echo(server: &Server, model: &str, top: u32) -> bool {
    let text = "The harbour wakes before the town.";
    let Ok(v) = server
        .post_to(&server.completions_url, &echo_body(model, text, top))
        .await
    else {
        return false;
    };
    teacher::parse_echo(&v, text).is_ok_and(|s| {
        s.positions.len() >= 2
            && s.positions
                .iter()
                .all(|p| p.logprob.is_some() && !p.top.is_empty())
    })
}

/// Each chunk scored by the server (`None`: the request failed), `concurrency`
/// at a time, in order.
pub(super) async fn score(
    server: &Server,
    model: &str,
    top: u32,
    chunks: &[String],
    concurrency: u32,
) -> Vec<Option<Sample>> {
    in_order(
        chunks,
        concurrency,
        "a teacher-forced request",
        |text| async move {
            server
                .post_to(&server.completions_url, &echo_body(model, text, top))
                .await
                .and_then(|v| {
                    teacher::parse_echo(&v, text)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", server.shown))
                })
        },
    )
    .await
}

/// The server's token ids of `text` through `/tokenize` at its origin
/// (llama.cpp's contract, then vLLM's and SGLang's); `None` without one.
pub(super) async fn token_ids(server: &Server, model: &str, text: &str) -> Option<Vec<u64>> {
    for kind in TokenizeApi::ALL {
        if let Ok(v) = server
            .post_to(&server.tokenize_url, &kind.body(model, text))
            .await
            && let Some(ids) = tokens::token_ids(&v).filter(|ids| !ids.is_empty())
        {
            return Some(ids);
        }
    }
    None
}
