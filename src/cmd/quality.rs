//! `tokenscope quality`: is the candidate server still the same model as the
//! reference? The same seeded prompts to both at temperature 0 with top-k
//! log-probabilities; behaviour and distribution compared token by token
//! (`core::quality`), at each concurrency; the reference against itself as the
//! noise floor; a golden file to keep a reference; a CI gate.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use futures_util::{StreamExt, stream};
use serde_json::{Value, json};
use tokenscope_core::parse::{parse_base_url, parse_u32_list, redact_url};
use tokenscope_core::quality::golden::{GOLDEN_SCHEMA, Golden};
use tokenscope_core::quality::measure::{PairFigures, compare};
use tokenscope_core::quality::report::{
    Capabilities, Gate, QualityLevel, QualityReport, SCHEMA, Side,
};
use tokenscope_core::quality::sample::{Sample, parse_chat_completion, probe_prompts};
use tokenscope_core::quality::tasks::{Task, builtin, compare_tasks, import_jsonl};

use crate::util::Secret;

/// Compare a candidate server with a reference, token by token, over the chat
/// API: greedy exact match and where answers diverge (any server), and where
/// both give top-k log-probabilities, llama.cpp's distribution figures (KLD,
/// same top p, Δp, perplexity ratio; exact or a lower bound). docs/quality.md.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
  tokenscope quality --ref http://old:8000/v1 --cand http://new:8000/v1
  tokenscope quality --ref http://old:8000/v1 --save-golden golden.json
  tokenscope quality --ref golden.json --cand http://new:8000/v1 --concurrency 1,16 --fail-on 'kld_mean:>0.01,exact_match:<90%'

Exit status: 0; 1 when --fail-on is crossed; 2 on an error, or when the two
servers do not share tokens (another tokenizer or model: nothing to compare).
The report is written before either.")]
pub struct QualityArgs {
    /// The reference: a base URL (`http://host:port/v1`) or a golden file.
    #[arg(long = "ref", value_name = "URL|FILE")]
    pub reference: String,

    /// The candidate's base URL (none: only --save-golden the reference).
    #[arg(long = "cand", value_name = "URL")]
    pub candidate: Option<String>,

    /// Model (default: the first each server's /models lists).
    #[arg(long)]
    pub model: Option<String>,

    /// The candidate's model, when its name differs.
    #[arg(long)]
    pub cand_model: Option<String>,

    /// Prompts (seeded, built in).
    #[arg(long, default_value_t = 32)]
    pub prompts: usize,

    /// Tokens per answer.
    #[arg(long, default_value_t = 64)]
    pub max_tokens: u32,

    /// Alternatives asked per token (OpenAI allows up to 20).
    #[arg(long, default_value_t = 20)]
    pub top_logprobs: u32,

    /// The candidate's concurrency levels: the same prompts at each (1 is
    /// the unloaded answer; higher levels show batching's effect).
    #[arg(long, default_value = "1")]
    pub concurrency: String,

    /// Built-in tasks with one right answer each (arithmetic, counting,
    /// sorting, reversal, dates, JSON), graded exactly: accuracy, flips, McNemar.
    /// 0: none.
    #[arg(long, default_value_t = 24)]
    pub tasks: usize,

    /// Tasks from a GSM8K- or MMLU-style JSONL file instead of the built-in ones.
    #[arg(long, value_name = "FILE")]
    pub tasks_file: Option<PathBuf>,

    /// Tokens per task answer (room to work it out).
    #[arg(long, default_value_t = 256)]
    pub task_max_tokens: u32,

    /// Seed of the prompts and the bootstrap.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Per-request timeout, seconds.
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,

    /// Keep the reference's answers (its top-k per token) in this file, for
    /// later runs with --ref FILE.
    #[arg(long, value_name = "FILE")]
    pub save_golden: Option<PathBuf>,

    /// Write the report (`tokenscope.quality/1` JSON) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Exit 1 when a level crosses one of these: `METRIC:>N` or `METRIC:<N[%]`,
    /// METRIC one of kld_mean, kld_p99, same_top_p, exact_match, delta_p_rms,
    /// ppl_ratio, accuracy, accuracy_drop, flips (a share: `flips:>2%`).
    #[arg(long, value_name = "THRESHOLDS")]
    pub fail_on: Option<String>,

    /// API key for both servers (never printed).
    #[arg(long, env = "TOKENSCOPE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
}

/// One server over HTTP.
struct Server {
    chat_url: String,
    models_url: String,
    shown: String,
    key: Option<Secret>,
    client: reqwest::Client,
}

impl Server {
    fn new(url: &str, key: Option<&str>, timeout: f64) -> anyhow::Result<Server> {
        let base = parse_base_url(url).map_err(|e| anyhow::anyhow!("{e}"))?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs_f64(timeout))
            .build()?;
        Ok(Server {
            chat_url: base.endpoint("chat/completions"),
            models_url: base.endpoint("models"),
            shown: redact_url(url),
            key: key.map(|k| Secret::new(k.to_owned())),
            client,
        })
    }

    async fn post(&self, body: &Value) -> anyhow::Result<Value> {
        let mut req = self.client.post(&self.chat_url).json(body);
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
        if !status.is_success() {
            anyhow::bail!("{} answered {status}", self.shown);
        }
        serde_json::from_str(&text)
            .with_context(|| format!("{}: the answer is not JSON", self.shown))
    }

    async fn first_model(&self) -> anyhow::Result<String> {
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
struct Ask {
    model: String,
    max_tokens: u32,
    top: Option<u32>,
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
async fn probe(server: &Server, model: &str, top: u32) -> Capabilities {
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
            model: s.model,
        },
        None => {
            let plain = Ask { top: None, ..ask };
            match read(server.post(&plain.body("Say hello.")).await) {
                Some(s) => Capabilities {
                    chat: true,
                    top_logprobs: false,
                    model: s.model,
                },
                None => Capabilities::default(),
            }
        }
    }
}

/// Every prompt's answer, `concurrency` at a time, in prompt order; a prompt
/// whose request failed is `None` (and said on stderr, once per error kind).
async fn answers(
    server: &Server,
    ask: &Ask,
    prompts: &[String],
    concurrency: u32,
) -> Vec<Option<Sample>> {
    let results: Vec<(usize, anyhow::Result<Sample>)> = stream::iter(prompts.iter().enumerate())
        .map(|(i, p)| async move {
            let r = server.post(&ask.body(p)).await.and_then(|v| {
                parse_chat_completion(&v).map_err(|e| anyhow::anyhow!("{}: {e}", server.shown))
            });
            (i, r)
        })
        .buffer_unordered(concurrency.max(1) as usize)
        .collect()
        .await;
    let mut out = vec![None; prompts.len()];
    let mut said = std::collections::BTreeSet::new();
    for (i, r) in results {
        match r {
            Ok(s) => out[i] = Some(s),
            Err(e) => {
                if said.insert(format!("{e:#}")) {
                    eprintln!("quality: a request failed: {e:#}");
                }
            }
        }
    }
    out
}

/// Each task's output text (`None`: the request failed).
async fn task_outputs(
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
fn paired(reference: &[Option<Sample>], candidate: &[Option<Sample>], seed: u64) -> PairFigures {
    let (r, c): (Vec<Sample>, Vec<Sample>) = reference
        .iter()
        .zip(candidate)
        .filter_map(|(a, b)| Some((a.clone()?, b.clone()?)))
        .unzip();
    compare(&r, &c, seed)
}

/// Run `tokenscope quality`.
pub fn run(args: QualityArgs) -> anyhow::Result<ExitCode> {
    let gates = match &args.fail_on {
        Some(s) => Gate::parse_list(s).map_err(|e| anyhow::anyhow!("--fail-on {e}"))?,
        None => Vec::new(),
    };
    let levels =
        parse_u32_list(&args.concurrency).map_err(|e| anyhow::anyhow!("--concurrency {e}"))?;
    if args.prompts == 0 || args.max_tokens == 0 {
        anyhow::bail!("--prompts and --max-tokens must be at least 1");
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        anyhow::bail!("--timeout {}: must be more than 0 seconds", args.timeout);
    }
    let rt = super::runtime()?;
    let report = rt.block_on(measure(&args, &levels))?;
    let Some(report) = report else {
        return Ok(ExitCode::SUCCESS);
    };
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("--json {}: cannot write", path.display()))?;
    }
    print!("{}", tokenscope_core::render::quality::text(&report));
    // Servers that do not share tokens: nothing here means anything.
    if let Some(l) = report
        .levels
        .iter()
        .find(|l| l.figures.token_overlap.is_some_and(|o| o < 0.5))
    {
        eprintln!(
            "quality: the reference and the candidate share no top token at the first position for {:.0}% of the prompts: another tokenizer or another model. The figures above compare nothing.",
            (1.0 - l.figures.token_overlap.unwrap_or(0.0)) * 100.0
        );
        return Ok(ExitCode::from(2));
    }
    // A gate on a figure no level measured cannot pass or fail: say so.
    if let Some(g) = gates
        .iter()
        .find(|g| report.levels.iter().all(|l| g.value_of(l).is_none()))
    {
        eprintln!(
            "quality: --fail-on {}: measured at no level ({}); the gate cannot be checked",
            g.metric,
            if report.not_run.is_empty() {
                "no answer carried it".to_owned()
            } else {
                report.not_run.join("; ")
            }
        );
        return Ok(ExitCode::from(2));
    }
    let mut crossed = false;
    for l in &report.levels {
        for g in &gates {
            if let Some(v) = g.crossed(l) {
                crossed = true;
                eprintln!(
                    "fail-on: concurrency {} {}: {v:.6} {} {}",
                    l.concurrency,
                    g.metric,
                    if g.above { ">" } else { "<" },
                    g.value
                );
            }
        }
    }
    Ok(if crossed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Measure; `None` when there was only a golden file to save.
async fn measure(args: &QualityArgs, levels: &[u32]) -> anyhow::Result<Option<QualityReport>> {
    let key = args.api_key.as_deref();
    let golden = golden_at(&args.reference)?;
    if golden.is_some() && args.save_golden.is_some() {
        anyhow::bail!(
            "--save-golden: the reference is already a golden file ({})",
            args.reference
        );
    }
    let prompts = match &golden {
        Some(g) => g.prompts.clone(),
        None => probe_prompts(args.seed, args.prompts),
    };
    let (max_tokens, top_k) = match &golden {
        Some(g) => (g.max_tokens, g.top_logprobs),
        None => (args.max_tokens, args.top_logprobs),
    };
    let mut not_run = Vec::new();
    let tasks: Vec<Task> = match (&golden, &args.tasks_file) {
        (Some(g), _) => g.tasks.clone(),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--tasks-file {}: cannot read", path.display()))?;
            import_jsonl(&text)
                .map_err(|e| anyhow::anyhow!("--tasks-file {}: {e}", path.display()))?
        }
        (None, None) => builtin(args.seed, args.tasks),
    };
    let task_max_tokens = golden
        .as_ref()
        .map_or(args.task_max_tokens, |g| g.task_max_tokens);
    if tasks.is_empty() {
        not_run.push("tasks: none asked".to_owned());
    }
    // The reference: a golden file, or a server asked twice (the noise floor).
    let (reference_side, reference, self_check, reference_tasks) = match golden {
        Some(g) => {
            let caps = Capabilities {
                chat: true,
                top_logprobs: g.samples.iter().all(Sample::has_top_logprobs),
                model: g.model.clone(),
            };
            if g.self_check.is_none() {
                not_run.push(
                    "self-consistency: the golden file kept no self-check (the candidate is judged against perfect agreement)"
                        .to_owned(),
                );
            }
            let side = Side {
                source: args.reference.clone(),
                capabilities: caps,
            };
            let outputs: Vec<Option<String>> = g.task_outputs.into_iter().map(Some).collect();
            (
                side,
                g.samples.into_iter().map(Some).collect::<Vec<_>>(),
                g.self_check,
                outputs,
            )
        }
        None => {
            let server = Server::new(&args.reference, key, args.timeout)?;
            let model = match &args.model {
                Some(m) => m.clone(),
                None => server.first_model().await?,
            };
            let caps = probe(&server, &model, top_k).await;
            if !caps.chat {
                anyhow::bail!("{}: no chat completion could be read from it", server.shown);
            }
            let ask = Ask {
                model,
                max_tokens,
                top: caps.top_logprobs.then_some(top_k),
            };
            eprintln!("quality: the reference, {} prompts, twice", prompts.len());
            let first = answers(&server, &ask, &prompts, 1).await;
            let second = answers(&server, &ask, &prompts, 1).await;
            let self_check = paired(&first, &second, args.seed);
            let task_ask = Ask {
                model: ask.model.clone(),
                max_tokens: task_max_tokens,
                top: None,
            };
            let outputs = task_outputs(&server, &task_ask, &tasks, 1).await;
            if let Some(path) = &args.save_golden {
                let kept = Kept {
                    self_check: &self_check,
                    samples: &first,
                    tasks: &tasks,
                    task_outputs: &outputs,
                    task_max_tokens,
                };
                save_golden(path, &server, &ask, top_k, &caps, &prompts, &kept)?;
            }
            let side = Side {
                source: server.shown.clone(),
                capabilities: caps,
            };
            (side, first, Some(self_check), outputs)
        }
    };
    let Some(cand_url) = &args.candidate else {
        if args.save_golden.is_none() {
            anyhow::bail!("nothing to compare: give --cand URL (or --save-golden FILE)");
        }
        return Ok(None);
    };
    let server = Server::new(cand_url, key, args.timeout)?;
    let model = match args.cand_model.as_ref().or(args.model.as_ref()) {
        Some(m) => m.clone(),
        None => server.first_model().await?,
    };
    let caps = probe(&server, &model, top_k).await;
    if !caps.chat {
        anyhow::bail!("{}: no chat completion could be read from it", server.shown);
    }
    let both_top = caps.top_logprobs && reference_side.capabilities.top_logprobs;
    if !both_top {
        let who = if caps.top_logprobs {
            "the reference"
        } else {
            "the candidate"
        };
        not_run.push(format!(
            "distribution (KLD, same top p, Δp, perplexity ratio): {who} gave no top-k log-probabilities"
        ));
    }
    let ask = Ask {
        model,
        max_tokens,
        top: caps.top_logprobs.then_some(top_k),
    };
    let mut out = Vec::new();
    for &c in levels {
        eprintln!(
            "quality: the candidate, {} prompts, concurrency {c}",
            prompts.len()
        );
        let cand = answers(&server, &ask, &prompts, c).await;
        let task_ask = Ask {
            model: ask.model.clone(),
            max_tokens: task_max_tokens,
            top: None,
        };
        let cand_tasks = task_outputs(&server, &task_ask, &tasks, c).await;
        out.push(QualityLevel {
            concurrency: c,
            figures: paired(&reference, &cand, args.seed),
            tasks: (!tasks.is_empty())
                .then(|| compare_tasks(&tasks, &reference_tasks, &cand_tasks)),
        });
    }
    let mut report = QualityReport {
        schema: SCHEMA.to_owned(),
        tool_version: tokenscope_core::VERSION.to_owned(),
        reference: reference_side,
        candidate: Side {
            source: server.shown.clone(),
            capabilities: caps,
        },
        prompts: prompts.len(),
        max_tokens,
        top_logprobs: top_k,
        self_check,
        levels: out,
        not_run,
        verdict: Vec::new(),
    };
    report.write_verdict();
    Ok(Some(report))
}

/// The reference as a golden file, when `s` names one.
fn golden_at(s: &str) -> anyhow::Result<Option<Golden>> {
    if s.contains("://") {
        return Ok(None);
    }
    if !Path::new(s).is_file() {
        anyhow::bail!("--ref {s}: neither an http(s) URL nor a golden file");
    }
    let text = std::fs::read_to_string(s).with_context(|| format!("--ref {s}: cannot read"))?;
    Golden::parse(&text)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("--ref {s}: {e}"))
}

/// What a golden file keeps of the reference's answers.
struct Kept<'a> {
    self_check: &'a PairFigures,
    samples: &'a [Option<Sample>],
    tasks: &'a [Task],
    task_outputs: &'a [Option<String>],
    task_max_tokens: u32,
}

fn save_golden(
    path: &Path,
    server: &Server,
    ask: &Ask,
    top_k: u32,
    caps: &Capabilities,
    prompts: &[String],
    kept: &Kept<'_>,
) -> anyhow::Result<()> {
    let missing = kept.samples.iter().filter(|s| s.is_none()).count()
        + kept.task_outputs.iter().filter(|s| s.is_none()).count();
    if missing > 0 {
        anyhow::bail!(
            "--save-golden: {missing} of the reference's {} answers failed; a golden file needs them all",
            kept.samples.len() + kept.task_outputs.len()
        );
    }
    let g = Golden {
        schema: GOLDEN_SCHEMA.to_owned(),
        model: caps.model.clone(),
        source: server.shown.clone(),
        max_tokens: ask.max_tokens,
        top_logprobs: if caps.top_logprobs { top_k } else { 0 },
        prompts: prompts.to_vec(),
        samples: kept.samples.iter().flatten().cloned().collect(),
        tasks: kept.tasks.to_vec(),
        task_outputs: kept.task_outputs.iter().flatten().cloned().collect(),
        task_max_tokens: kept.task_max_tokens,
        self_check: Some(kept.self_check.clone()),
    };
    std::fs::write(path, serde_json::to_string(&g)?)
        .with_context(|| format!("--save-golden {}: cannot write", path.display()))?;
    eprintln!(
        "quality: the reference's answers kept in {}",
        path.display()
    );
    Ok(())
}
