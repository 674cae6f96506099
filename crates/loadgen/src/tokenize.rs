//! Counting tokens as the server does (`bench --tokenizer`), so that synthetic
//! and trace prompts are exactly the requested length.
//!
//! - `server`: the endpoint's own tokenizer, `POST {origin}/tokenize`: llama.cpp's
//!   `{content, add_special: false}` -> `{tokens: [...]}`, or vLLM's `{model,
//!   prompt, add_special_tokens: false}` -> `{count, tokens}`
//!   (`tests/fixtures` quote both contracts: `docs/metrics.md`, "Exact token
//!   counts");
//! - a `tokenizer.json` (Hugging Face `tokenizers`, encoded without special
//!   tokens);
//! - `approx`: one token per word and punctuation mark.
//!
//! With a real tokenizer, the words that are one token each after a space are
//! found once ([`single_token_words`]); a prompt of `n` of them is then `n` tokens
//! (checked on a sample before the run). What the server adds around a prompt
//! (the chat template, BOS) is measured once from `usage` and recorded; each
//! request's counted prompt is checked against its `usage` in the report.

use std::path::{Path, PathBuf};

use tokenscope_core::report::TokenCounting;
use tokenscope_measure::openai::{RequestSpec, request_body as completion_body};
use tokenscope_workload::prompts::approx_tokens;
use tokenscope_workload::tokens::{self, TokenizeApi};

use super::clock::Clock;
use super::config::{BenchConfig, InputLength, Prompts, TokenizerChoice};
use super::transport::{Target, run_request};
use crate::error::{Error, Result};

/// A token counter.
pub enum Counter {
    /// The endpoint's `/tokenize`.
    Server {
        /// The HTTP client.
        client: reqwest::Client,
        /// `{origin}/tokenize`.
        url: reqwest::Url,
        /// The model (vLLM needs it).
        model: String,
        /// The contract.
        kind: TokenizeApi,
    },
    /// A `tokenizer.json`.
    File {
        /// The tokenizer.
        tokenizer: Box<tokenizers::Tokenizer>,
        /// Its path, for the report.
        path: PathBuf,
    },
    /// Words and punctuation marks.
    Approx,
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (method, source) = self.describe();
        write!(f, "Counter({method}, {source:?})")
    }
}

/// Load a `tokenizer.json`: the tokenizer, or a sentence naming the file.
pub fn load_file(path: &Path) -> Result<Counter, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the file ({e})"))?;
    let tokenizer = tokenizers::Tokenizer::from_bytes(text.as_bytes())
        .map_err(|e| format!("not a Hugging Face tokenizer.json ({e})"))?;
    Ok(Counter::File {
        tokenizer: Box::new(tokenizer),
        path: path.to_owned(),
    })
}

impl Counter {
    /// `(method, source)` as the report records them.
    pub fn describe(&self) -> (&'static str, Option<String>) {
        match self {
            Counter::Server { kind, .. } => ("server", Some(kind.source().into())),
            Counter::File { path, .. } => ("file", Some(path.display().to_string())),
            Counter::Approx => ("approx", None),
        }
    }

    /// Tokens of `text` (no special tokens).
    pub async fn count(&self, text: &str) -> Result<u64, String> {
        match self {
            Counter::Approx => Ok(approx_tokens(text)),
            Counter::File { tokenizer, .. } => tokenizer
                .encode(text, false)
                .map(|e| e.len() as u64)
                .map_err(|e| format!("the tokenizer failed: {e}")),
            Counter::Server {
                client,
                url,
                model,
                kind,
            } => server_count(client, url, model, *kind, text).await,
        }
    }
}

/// An answer's tokens by the run's counter: all of them, and each event's
/// where a `tokenizer.json` gave them.
#[derive(Debug, Default)]
pub struct AnswerCount {
    /// Tokens of the whole text.
    pub tokens: Option<u64>,
    /// Each event's tokens ([`tokens_per_event`]), when asked and a
    /// `tokenizer.json` counted.
    pub per_event: Option<Vec<u32>>,
}

/// Count an answer's `text` after its request's end: a `tokenizer.json` encodes
/// it once, on a blocking thread (not on the runtime's, where other requests'
/// reads are stamped), for the whole count and, given `ends` (where each
/// event's text ends), each event's; another counter counts the whole only.
pub async fn count_answer(
    counter: &std::sync::Arc<Counter>,
    text: String,
    ends: Option<Vec<usize>>,
) -> AnswerCount {
    if let Counter::File { .. } = counter.as_ref() {
        let counter = std::sync::Arc::clone(counter);
        let counted = tokio::task::spawn_blocking(move || {
            let Counter::File { tokenizer, .. } = counter.as_ref() else {
                return AnswerCount::default();
            };
            let Ok(encoding) = tokenizer.encode(text.as_str(), false) else {
                return AnswerCount::default();
            };
            AnswerCount {
                tokens: Some(encoding.len() as u64),
                per_event: ends
                    .and_then(|e| tokens_per_event(encoding.get_offsets(), text.len(), &e)),
            }
        })
        .await;
        return counted.unwrap_or_default();
    }
    AnswerCount {
        tokens: counter.count(&text).await.ok(),
        per_event: None,
    }
}

/// Each event's tokens: the tokens (by their byte `offsets` in a text
/// `text_len` long), each given to the event its first byte came in (`ends`:
/// where each event's text ends); `None` when the text and the events do not
/// match.
pub fn tokens_per_event(
    offsets: &[(usize, usize)],
    text_len: usize,
    ends: &[usize],
) -> Option<Vec<u32>> {
    if ends.last() != Some(&text_len) {
        return None;
    }
    let mut counts = vec![0u32; ends.len()];
    for &(start, _) in offsets {
        let event = ends.partition_point(|&end| end <= start);
        if let Some(c) = counts.get_mut(event) {
            *c += 1;
        }
    }
    // No token at all (no text): nothing counted, the events are spread.
    counts.iter().any(|&c| c > 0).then_some(counts)
}

async fn server_count(
    client: &reqwest::Client,
    url: &reqwest::Url,
    model: &str,
    kind: TokenizeApi,
    text: &str,
) -> Result<u64, String> {
    // The key (and the extra headers) are the client's own: same origin.
    let req = client.post(url.clone()).json(&kind.body(model, text));
    let resp = req
        .send()
        .await
        .map_err(|e| format!("/tokenize: {}", super::transport::strip_url(&e)))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("/tokenize answered HTTP {}", status.as_u16()));
    }
    let v: serde_json::Value = resp
        .json()
        .await
        .map_err(|e| format!("/tokenize answered something other than JSON ({e})"))?;
    tokens::tokens_in(&v).ok_or_else(|| "/tokenize answered without a token list".into())
}

/// The endpoint's `/tokenize` (at `origin`), if it has one: llama.cpp's contract
/// first, then vLLM's. Each must count "hello world" as a small positive number.
pub async fn detect_server(
    client: &reqwest::Client,
    origin: &reqwest::Url,
    model: &str,
) -> Option<Counter> {
    let url = origin.join("/tokenize").ok()?;
    for kind in TokenizeApi::ALL {
        if let Ok(n) = server_count(client, &url, model, kind, tokens::DETECT_TEXT).await
            && tokens::plausible_detect(n)
        {
            return Some(Counter::Server {
                client: client.clone(),
                url,
                model: model.to_owned(),
                kind,
            });
        }
    }
    None
}

/// How a run sizes its prompts, set up before it starts.
#[derive(Debug, Clone)]
pub struct Prompting {
    /// The report's record.
    pub counting: TokenCounting,
    /// The words that are one token each (exact prompts), or none (approximate).
    pub words: Option<Vec<&'static str>>,
    /// Each prompts-file prompt's count (exact counters only).
    pub file_counts: Vec<Option<u64>>,
    /// The system prompt every request begins with (`--shared-prefix`), and its
    /// tokens (exactly that many with an exact counter).
    pub prefix: Option<(String, u64)>,
    /// A `tokenizer.json`, which also counts each answer's text
    /// (`completion_tokens_counted`): locally, so counting loads neither the
    /// server being measured nor the measured path. The server's `/tokenize`
    /// counts prompts only.
    pub output_counter: Option<std::sync::Arc<Counter>>,
}

/// Set up `--tokenizer` for a run against `target` with `model`: the counter, the
/// single-token words, each prompts-file prompt's count, and the template's
/// overhead (one tiny request). An explicit choice that cannot work is an error
/// before anything is measured; the default falls back to approximate with a note.
pub async fn prepare(
    cfg: &BenchConfig,
    client: &reqwest::Client,
    target: &Target,
    model: &str,
) -> Result<Prompting> {
    let origin = cfg
        .base_url
        .join("/")
        .map_err(|e| Error::Internal(e.to_string()))?;
    let counter = match &cfg.tokenizer {
        TokenizerChoice::Auto => match detect_server(client, &origin, model).await {
            Some(c) => c,
            None => {
                if cfg.progress {
                    eprintln!(
                        "note: the endpoint has no /tokenize: prompt lengths are approximate (one token per word); --tokenizer tokenizer.json counts them exactly"
                    );
                }
                Counter::Approx
            }
        },
        TokenizerChoice::Server => detect_server(client, &origin, model)
            .await
            .ok_or_else(|| {
                Error::Option(format!(
                    "--tokenizer server: {}tokenize answers neither llama.cpp's nor vLLM's contract (llama-server and vLLM serve it); give a tokenizer.json or approx",
                    crate::util::redact_url(&origin)
                ))
            })?,
        TokenizerChoice::File(path) => {
            load_file(path).map_err(|e| Error::Option(format!("--tokenizer {}: {e}", path.display())))?
        }
        TokenizerChoice::Approx => Counter::Approx,
    };
    let words = single_token_words(&counter)
        .await
        .map_err(|e| Error::Option(format!("--tokenizer: {e}")))?;
    let (method, source) = counter.describe();
    if words.is_none() && !matches!(counter, Counter::Approx) && cfg.progress {
        eprintln!(
            "note: the tokenizer ({}) has too few single-token words among the prompt vocabulary: prompt lengths are approximate",
            source.as_deref().unwrap_or(method)
        );
    }
    let mut file_counts = Vec::new();
    if let (Prompts::File { prompts, .. }, Some(_)) = (&cfg.prompts, &words) {
        for p in prompts {
            // A conversation's template wraps each message: only plain prompts
            // are checked against usage.
            file_counts.push(match &p.messages {
                Some(_) => None,
                None => Some(
                    counter
                        .count(&p.prompt)
                        .await
                        .map_err(|e| Error::Option(format!("--tokenizer: {e}")))?,
                ),
            });
        }
    }
    let prefix = cfg.shared_prefix.map(|n| {
        let n = u64::from(n);
        (tokens::shared_prefix(words.as_deref(), n, cfg.seed), n)
    });
    let template_overhead = match &words {
        Some(w) => template_overhead(cfg, client, target, model, w, prefix.as_ref()).await,
        None => None,
    };
    let output_counter = match counter {
        c @ Counter::File { .. } if words.is_some() => Some(std::sync::Arc::new(c)),
        _ => None,
    };
    Ok(Prompting {
        output_counter,
        counting: TokenCounting {
            method: method.into(),
            source,
            exact: words.is_some(),
            template_overhead,
        },
        words,
        file_counts,
        prefix,
    })
}

/// Keep the prompts file's prompts within [`tokenscope_workload::tokens::TIER_BAND`] of `tier`
/// tokens (by the run's counter: exact where it counted the prompt, else one
/// token per word), with their counts. None there is an error naming the tier
/// and the lengths the file has.
pub fn pick_tier(cfg: &mut BenchConfig, tokens: &mut Prompting, tier: u32) -> Result<()> {
    let Prompts::File { path, prompts } = &mut cfg.prompts else {
        return Ok(());
    };
    let lengths: Vec<u64> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            tokens
                .file_counts
                .get(i)
                .copied()
                .flatten()
                .unwrap_or_else(|| approx_tokens(&p.prompt))
        })
        .collect();
    let keep = tokenscope_workload::tokens::pick_tier(&lengths, tier).map_err(|(lo, hi)| {
        Error::Option(format!(
            "--input-tokens {tier}: no prompt of --prompts {} is within 25% of {tier} tokens (its prompts are {lo} to {hi} tokens)",
            path.display()
        ))
    })?;
    *prompts = keep.iter().map(|&i| prompts[i].clone()).collect();
    if !tokens.file_counts.is_empty() {
        tokens.file_counts = keep.iter().map(|&i| tokens.file_counts[i]).collect();
    }
    if cfg.progress {
        eprintln!(
            "input tier {tier}: {} prompts of {} within 25% of {tier} tokens",
            keep.len(),
            lengths.len()
        );
    }
    Ok(())
}

/// Tokens the server adds around a prompt: one request with a 16-token prompt
/// (and `max_tokens` 1; with the run's shared system prompt, if any), its
/// `usage.prompt_tokens` minus what it sent. `None` when the server sends no
/// usage or the request fails.
async fn template_overhead(
    cfg: &BenchConfig,
    client: &reqwest::Client,
    target: &Target,
    model: &str,
    words: &[&str],
    prefix: Option<&(String, u64)>,
) -> Option<i64> {
    const N: u64 = tokens::OVERHEAD_PROBE_TOKENS;
    let sent = N + prefix.map_or(0, |p| p.1);
    // With the run's tools and schema: a server renders tools into the prompt,
    // so they are part of the overhead every request pays.
    let spec = RequestSpec {
        temperature: cfg.temperature,
        ..tokens::overhead_spec(cfg.api, model, words, cfg.seed, prefix.map(|p| p.0.clone()))
    };
    let spec = crate::answer::AnswerContract::ask(cfg.answer.as_deref(), spec);
    let body = serde_json::to_vec(&completion_body(&spec)).ok()?;
    let record = run_request(
        client,
        target,
        body.into(),
        "tokenscope-template",
        &Clock::start(),
        None,
        &tokio_util::sync::CancellationToken::new(),
    )
    .await;
    let used = record.usage?.prompt_tokens?;
    Some(used as i64 - sent as i64)
}

/// The server's context window for `model`: vLLM's `max_model_len` in
/// `/v1/models`, or llama.cpp's per-slot `n_ctx` in `/props`.
pub async fn context_window(
    client: &reqwest::Client,
    base: &reqwest::Url,
    model: &str,
) -> Option<u64> {
    let get = |url: reqwest::Url| {
        let req = client.get(url);
        async move {
            let resp = req.send().await.ok()?;
            if !resp.status().is_success() {
                return None;
            }
            resp.json::<serde_json::Value>().await.ok()
        }
    };
    let models = get(crate::util::join_url(base, "models")).await;
    let props = match base.join("/props") {
        Ok(url) => get(url).await,
        Err(_) => None,
    };
    tokens::context_window(models.as_ref(), props.as_ref(), model)
}

/// Resolve `--input-tokens 0.75max` against the server's context window (or
/// `--context-window`): an error naming what is missing when neither says.
pub async fn resolve_input_length(
    cfg: &mut BenchConfig,
    client: &reqwest::Client,
    model: &str,
) -> Result<()> {
    let Prompts::Synthetic {
        tokens: InputLength::OfContext(fraction),
    } = cfg.prompts
    else {
        return Ok(());
    };
    let window = match cfg.context_window {
        Some(w) => w,
        None => context_window(client, &cfg.base_url, model)
            .await
            .ok_or_else(|| {
                Error::Option(format!(
                    "--input-tokens {fraction}max: the server does not say its context window (vLLM's /v1/models max_model_len, llama.cpp's /props n_ctx); give --context-window N"
                ))
            })?,
    };
    let tokens = InputLength::OfContext(fraction).resolve(window);
    if u64::from(tokens) + u64::from(cfg.max_tokens) > window && cfg.progress {
        eprintln!(
            "note: --input-tokens {fraction}max is {tokens} tokens of a {window}-token context: with --max-tokens {} the requests do not fit (the server refuses them: context_overflow)",
            cfg.max_tokens
        );
    }
    cfg.context_window = Some(window);
    cfg.prompts = Prompts::Synthetic {
        tokens: InputLength::Tokens(tokens),
    };
    Ok(())
}

/// Read and check a `--tokenizer` file before anything is sent.
pub fn check_file(path: &Path) -> Result<()> {
    load_file(path)
        .map(|_| ())
        .map_err(|e| Error::Option(format!("--tokenizer {}: {e}", path.display())))
}

/// The vocabulary's words that are one token each, checked on sample prompts
/// ([`tokens::single_token_words`], [`tokens::check_prompts`]). `None` when too
/// few are, or a sample prompt does not count its words: then prompts are
/// approximate.
pub async fn single_token_words(counter: &Counter) -> Result<Option<Vec<&'static str>>, String> {
    if matches!(counter, Counter::Approx) {
        return Ok(None);
    }
    let mut counts = Vec::new();
    for text in tokens::probe_texts() {
        counts.push(counter.count(&text).await?);
    }
    let Some(single) = tokens::single_token_words(&counts) else {
        return Ok(None);
    };
    for (p, n) in tokens::check_prompts(&single) {
        if counter.count(&p).await? != n {
            return Ok(None);
        }
    }
    Ok(Some(single))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_choices() {
        assert_eq!(TokenizerChoice::parse("server"), TokenizerChoice::Server);
        assert_eq!(TokenizerChoice::parse(""), TokenizerChoice::Auto);
        assert_eq!(
            TokenizerChoice::parse("./tok.json"),
            TokenizerChoice::File("./tok.json".into())
        );
    }

    #[test]
    fn each_token_goes_to_the_event_its_first_byte_came_in() {
        // "Hello world!" in events "Hel" | "lo wor" | "ld!", tokens
        // "Hello" " world" "!": the first two begin in event 0 and 1.
        let offsets = [(0, 5), (5, 11), (11, 12)];
        assert_eq!(
            tokens_per_event(&offsets, 12, &[3, 9, 12]),
            Some(vec![1, 1, 1])
        );
        assert_eq!(
            tokens_per_event(&offsets, 12, &[9, 10, 12]),
            Some(vec![2, 0, 1])
        );
        // Events that do not end where the text does: no count.
        assert_eq!(tokens_per_event(&offsets, 12, &[3, 9]), None);
        // No text (events of a tool call's arguments only): no count, the
        // events are spread rather than each counted as none.
        assert_eq!(tokens_per_event(&[], 0, &[0, 0, 0]), None);
    }
}
