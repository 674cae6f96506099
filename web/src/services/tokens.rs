//! Exact prompt lengths in the page (`tokenizer`), as `bench --tokenizer server`
//! makes them: the endpoint's own `/tokenize` (core's [`tokens`]: llama.cpp's
//! contract, then vLLM's), the words that are one token each found before the
//! run, the template's overhead measured with one request; and the context
//! window an `input_tokens=0.75max` resolves against. Everything here is sent
//! before the first level starts. The built-in simulator counts one token a word.

use tokenscope_core::report::TokenCounting;
use tokenscope_measure::openai::request_body;
use tokenscope_workload::tokens::{self, TokenizeApi};

use super::clock::CancelToken;
use super::fetch::FetchTarget;
use super::transport::{Prepared, Transport, run_request};
use crate::settings::{RunPlan, TokenizerSetting};

/// How the run's prompts are sized.
#[derive(Debug, Clone, Default)]
pub struct PageTokens {
    /// The report's record (`config.tokens`).
    pub counting: Option<TokenCounting>,
    /// The words that are one token each (exact prompts), or none.
    pub words: Option<Vec<&'static str>>,
    /// The system prompt every request begins with, and its tokens.
    pub prefix: Option<(String, u64)>,
}

/// The endpoint's `/tokenize` and its contract.
struct Counter<'a> {
    url: String,
    api: TokenizeApi,
    model: &'a str,
    key: &'a super::fetch::Auth,
}

impl Counter<'_> {
    async fn count(&self, text: &str) -> Result<u64, String> {
        let body = self.api.body(self.model, text).to_string();
        let answer = FetchTarget::text(&self.url, self.key, Some(&body)).await?;
        serde_json::from_str(&answer)
            .ok()
            .and_then(|v| tokens::tokens_in(&v))
            .ok_or_else(|| "/tokenize answered without a token list".into())
    }
}

/// Set up the run's prompts: find the words of exact prompts through the
/// endpoint's `/tokenize` (unless `tokenizer=approx` or the simulator answers),
/// measure the template's overhead, and build the shared prefix. `tokenizer=server`
/// on an endpoint without `/tokenize` stops the run before it starts.
pub async fn prepare(
    plan: &RunPlan,
    transport: &Transport,
    model: &str,
    key: &super::fetch::Auth,
    cancel: &CancelToken,
) -> Result<PageTokens, String> {
    let counter = match (&plan.base, plan.tokenizer) {
        (Some(base), TokenizerSetting::Auto | TokenizerSetting::Server) => {
            let url = format!("{}/tokenize", base.origin());
            let mut found = None;
            for api in TokenizeApi::ALL {
                let c = Counter {
                    url: url.clone(),
                    api,
                    model,
                    key,
                };
                if c.count(tokens::DETECT_TEXT)
                    .await
                    .is_ok_and(tokens::plausible_detect)
                {
                    found = Some(c);
                    break;
                }
            }
            if found.is_none() && plan.tokenizer == TokenizerSetting::Server {
                return Err(format!(
                    "tokenizer=server: {} answers neither llama.cpp's nor vLLM's /tokenize contract (llama-server and vLLM serve it); use tokenizer=approx",
                    tokenscope_measure::parse::redact_url(&url)
                ));
            }
            found
        }
        _ => None,
    };
    let mut words = None;
    if let Some(c) = &counter {
        let mut counts = Vec::new();
        for text in tokens::probe_texts() {
            counts.push(
                c.count(&text)
                    .await
                    .map_err(|e| format!("tokenizer: {e}"))?,
            );
        }
        if let Some(single) = tokens::single_token_words(&counts) {
            let mut exact = true;
            for (p, n) in tokens::check_prompts(&single) {
                exact &= c.count(&p).await.map_err(|e| format!("tokenizer: {e}"))? == n;
            }
            words = exact.then_some(single);
        }
    }
    let prefix = plan.shared_prefix.map(|n| {
        let n = u64::from(n);
        (tokens::shared_prefix(words.as_deref(), n, plan.seed), n)
    });
    let template_overhead = match &words {
        Some(w) => template_overhead(plan, transport, model, w, prefix.as_ref(), cancel).await,
        None => None,
    };
    let counting = plan.base.as_ref().map(|_| TokenCounting {
        method: if counter.is_some() {
            "server"
        } else {
            "approx"
        }
        .into(),
        source: counter.as_ref().map(|c| c.api.source().into()),
        exact: words.is_some(),
        template_overhead,
    });
    Ok(PageTokens {
        counting,
        words,
        prefix,
    })
}

/// Tokens the server adds around a prompt: one request of
/// [`tokens::OVERHEAD_PROBE_TOKENS`] tokens (and the shared prefix), its
/// `usage.prompt_tokens` minus what it sent; `None` without a usage.
async fn template_overhead(
    plan: &RunPlan,
    transport: &Transport,
    model: &str,
    words: &[&str],
    prefix: Option<&(String, u64)>,
    cancel: &CancelToken,
) -> Option<i64> {
    let system = prefix.map(|p| p.0.clone());
    let spec = tokens::overhead_spec(plan.api, model, words, plan.seed, system);
    let req = Prepared {
        request_id: "tokenscope-template".into(),
        body: request_body(&spec).to_string(),
        api: plan.api,
        prompt_tokens: tokens::OVERHEAD_PROBE_TOKENS,
        max_tokens: 1,
        hide_reasoning: false,
        t_scheduled_ms: None,
        keep_answer: false,
        prompt_tokens_sent: None,
        turn: None,
    };
    let sent = run_request(transport, &req, None, plan.timeout_ms, cancel).await;
    let used = sent.timeline.finish().usage?.prompt_tokens?;
    Some(used as i64 - (tokens::OVERHEAD_PROBE_TOKENS + prefix.map_or(0, |p| p.1)) as i64)
}

/// The context window `input_tokens=0.75max` resolves against: `context_window`
/// as given, the simulator's, or the server's (vLLM's `/v1/models`
/// `max_model_len`, llama.cpp's `/props` `n_ctx`); an error naming what is
/// missing when none says.
pub async fn context_window(
    plan: &RunPlan,
    model: &str,
    key: &super::fetch::Auth,
) -> Result<u64, String> {
    if let Some(w) = plan.context_window {
        return Ok(w);
    }
    let Some(base) = &plan.base else {
        return Ok(plan.sim.max_context_tokens);
    };
    let get = |url: String| async move {
        let text = FetchTarget::get_text(&url, key).await.ok()?;
        serde_json::from_str::<serde_json::Value>(&text).ok()
    };
    let models = get(base.endpoint("models")).await;
    let props = get(format!("{}/props", base.origin())).await;
    tokens::context_window(models.as_ref(), props.as_ref(), model).ok_or_else(|| {
        "input_tokens as a fraction of the context: the server does not say its context window (vLLM's /v1/models max_model_len, llama.cpp's /props n_ctx); give context_window".into()
    })
}
