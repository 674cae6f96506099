//! `tokenscope bench`: benchmark an OpenAI-compatible streaming endpoint.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use tokenscope_core::analyze::slo::Slo;
use tokenscope_core::measure::openai::Api;
use tokenscope_core::parse::parse_arrival;
use tokenscope_core::render;
use tokenscope_core::render::tiers;
use tokenscope_core::report::{ClientReport, TraceInfo};
use tokenscope_core::workload::conversation::Conversation;
use tokenscope_core::workload::shard::Shard;
use tokenscope_core::workload::tokens::Tier;
use tokenscope_core::workload::trace::Trace;

use crate::engine::tokenize::TokenizerChoice;
use crate::engine::{self, BenchConfig, InputLength, LoadPlan, PerLevel, Prompts};
use crate::util::{
    Secret, parse_base_url, parse_duration, parse_duration_or_zero, parse_f64_list, parse_u32_list,
};
use tokenscope_core::workload::dataset::{Dataset, DatasetPrompt};

/// Endpoint kind on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ApiArg {
    /// POST /chat/completions
    Chat,
    /// POST /completions
    Completions,
}

/// Benchmark an OpenAI-compatible streaming endpoint: TTFT, TPOT, ITL, E2E,
/// throughput, errors and goodput across load levels.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
  tokenscope bench --url http://127.0.0.1:8000/v1
  tokenscope bench --url http://127.0.0.1:8080/v1 --api completions --concurrency 1,4 \\
      --input-tokens 512 --max-tokens 128 --ignore-eos --slo ttft_ms:p95<=500,tpot_ms:p95<=50 \\
      --out report.json --raw requests.jsonl
  tokenscope bench --url https://api.example.com/v1 --model m --rate 1,2,4 --duration 60s

The API key comes from --api-key, TOKENSCOPE_API_KEY or OPENAI_API_KEY, and is never printed.")]
pub struct BenchArgs {
    /// Base URL of the API, e.g. http://127.0.0.1:8000/v1 (a URL without a path gets /v1).
    #[arg(long, value_name = "URL")]
    pub url: String,

    /// Which endpoint to call.
    #[arg(long, value_enum, default_value = "chat")]
    pub api: ApiArg,

    /// Model name (default: the first model listed by GET /models).
    #[arg(long)]
    pub model: Option<String>,

    /// API key (prefer the environment variables: a flag shows in `ps`).
    #[arg(long, env = "TOKENSCOPE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    #[command(flatten)]
    pub http: super::http_args::HttpArgs,

    /// Closed-loop concurrency levels: requests kept in flight.
    #[arg(
        long,
        value_name = "N,N,..",
        conflicts_with = "rate",
        allow_hyphen_values = true
    )]
    pub concurrency: Option<String>,

    /// Open-loop request rates (req/s): sends on schedule whatever the responses.
    #[arg(long, value_name = "R,R,..", allow_hyphen_values = true)]
    pub rate: Option<String>,

    /// Inter-arrival distribution in rate mode: poisson (exponential gaps),
    /// constant, or gamma:CV (gamma gaps with that coefficient of variation:
    /// gamma:1 is Poisson, gamma:2 bursty, gamma:0.5 regular).
    #[arg(
        long,
        default_value = "poisson",
        value_name = "poisson|constant|gamma:CV",
        requires = "rate"
    )]
    pub arrival: String,

    /// Measured requests per level, split over the rounds
    /// (default: per round max(10, 2 x concurrency); rate: 10 s worth).
    #[arg(long, value_name = "N", conflicts_with = "duration")]
    pub requests: Option<u64>,

    /// Measured time per level, split over the rounds (e.g. 60s, 30m): soak mode.
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,

    /// Rounds per level (their spread is reported; a round 2x off is flagged)
    /// [default: 3].
    #[arg(long, value_name = "N")]
    pub rounds: Option<u32>,

    /// Warm-up requests before each level, not measured (default: one per
    /// concurrency slot; rate mode: about one second's worth).
    #[arg(long, value_name = "N")]
    pub warmup: Option<u32>,

    /// Instead of the warm-up, raise the load linearly for this long before each
    /// level's measured part (rate from 0, concurrency from 1), not measured.
    #[arg(long, value_name = "DURATION", conflicts_with_all = ["warmup", "trace"])]
    pub ramp: Option<String>,

    /// Length of the synthetic prompts, tokens (exact with a tokenizer, see
    /// --tokenizer), or a fraction of the server's context window: `0.75max`
    /// (long context; the window from vLLM's /v1/models max_model_len,
    /// llama.cpp's /props n_ctx per slot, or --context-window). Several
    /// (64,256,512) are input tiers: the whole sweep runs at each, one report
    /// per tier (see --max-tokens). With --prompts: each tier sends the file's
    /// prompts within 25% of its length (by --tokenizer's count) [default: 256].
    #[arg(long, value_name = "N|Fmax,..")]
    pub input_tokens: Option<String>,

    /// Begin every request with the same system prompt of this many tokens (a
    /// system message for chat, the prompt's first words for completions): what a
    /// server's prefix cache can reuse.
    #[arg(long, value_name = "TOKENS")]
    pub shared_prefix: Option<u32>,

    /// Run conversations: sessions of N turns, each turn sending the history so
    /// far (the user's messages and the server's own answers) after the user's
    /// think time. Sessions are the concurrency unit (closed loop, chat API);
    /// each turn's user message is a prompt as --input-tokens or --prompts
    /// makes it. The report gives TTFT and TPOT per turn and the prompt tokens
    /// the server served from its cache.
    #[arg(
        long,
        value_name = "turns=N,think=DURATION",
        conflicts_with_all = ["rate", "trace"]
    )]
    pub conversation: Option<String>,

    /// The server's context window, tokens, when it does not say (for
    /// --input-tokens 0.75max).
    #[arg(long, value_name = "TOKENS")]
    pub context_window: Option<u64>,

    /// Your own prompts: JSON Lines ({"prompt": "..."} or {"messages": [{"role",
    /// "content"}, ...]}, each with an optional "max_tokens"), or ShareGPT JSON
    /// (each record's first human turn). Used in turn, request after request.
    #[arg(long, value_name = "FILE")]
    pub prompts: Option<PathBuf>,

    /// Use N prompts of the file, picked with a seeded shuffle (--seed).
    #[arg(long, value_name = "N", requires = "prompts")]
    pub sample: Option<usize>,

    /// Replay a request trace as it was recorded: Mooncake JSONL (timestamp ms,
    /// input_length, output_length, hash_ids: prompts sharing leading ids share
    /// those 512-token prefix blocks), Azure LLM trace CSV or BurstGPT CSV. Each
    /// request is sent at its time (open loop; latencies from the scheduled time),
    /// with a prompt of its input length and max_tokens = its output length
    /// (ignore_eos). One level, one round; --requests N replays the first N.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["concurrency", "rate", "prompts", "duration", "warmup", "rounds"]
    )]
    pub trace: Option<PathBuf>,

    /// Replay the trace this many times faster (2: half the gaps).
    #[arg(long, default_value_t = 1.0, value_name = "F", requires = "trace")]
    pub trace_speed: f64,

    /// Multiply every length in the trace (and its prefix block) by this, for a
    /// small server or a test (0.05: a 6758-token prompt becomes 338).
    #[arg(long, default_value_t = 1.0, value_name = "F", requires = "trace")]
    pub trace_token_scale: f64,

    /// How prompt tokens are counted, so prompts are exactly --input-tokens long:
    /// `server` (the endpoint's /tokenize: llama.cpp, vLLM), a Hugging Face
    /// tokenizer.json, or `approx` (one token per word) [default: server when
    /// the endpoint has /tokenize, else approx].
    #[arg(long, value_name = "server|FILE|approx")]
    pub tokenizer: Option<String>,

    /// max_tokens of each request. Several (128,256,512) are output tiers: the
    /// whole sweep runs at each (and at each input tier), one report per tier,
    /// its files named with the tier (report.in256-out128.json).
    #[arg(long, default_value = "128", value_name = "N,..")]
    pub max_tokens: String,

    /// Send ignore_eos: true (llama.cpp, vLLM) so every answer is max_tokens long.
    #[arg(long)]
    pub ignore_eos: bool,

    /// Send min_tokens (vLLM).
    #[arg(long, value_name = "N")]
    pub min_tokens: Option<u32>,

    /// Sampling temperature to send.
    #[arg(long)]
    pub temperature: Option<f64>,

    /// Per-request timeout (e.g. 60s, 500ms).
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,

    /// SLOs for goodput and capacity, e.g. ttft_ms:p95<=500,tpot_ms:p95<=50.
    #[arg(long, value_name = "SLOS")]
    pub slo: Option<String>,

    /// An ITL gap longer than this counts as a stall (stream smoothness: each
    /// request's longest gap is reported, and max_gap_ms is an SLO key).
    #[arg(
        long,
        alias = "stall-gap",
        default_value = "250ms",
        value_name = "DURATION"
    )]
    pub stall_threshold: String,

    /// Seed of the synthetic prompts and the arrival schedule.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// What this run is (a version, a config), stored in the report:
    /// `tokenscope history` orders and names runs by it.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,

    /// Snapshot interval for long runs (per-interval figures and a drift check).
    #[arg(long, value_name = "DURATION")]
    pub snapshot_interval: Option<String>,

    /// Skip the pre-flight request (e.g. against a server injecting faults).
    #[arg(long)]
    pub no_preflight: bool,

    /// After Ctrl-C, how long to wait for requests in flight.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub grace: String,

    /// Write the report JSON (tokenscope.client/1) here.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// Append one JSON line per finished request here, as each finishes.
    #[arg(long, value_name = "FILE")]
    pub raw: Option<PathBuf>,

    /// Write a CSV summary (one row per level) here.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,

    /// Write a Markdown summary here.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// The server's Prometheus metrics, scraped during the run for the server view
    /// (queue, batch, KV cache, server-side TTFT and stages): `auto` (the
    /// endpoint's origin + /metrics, dropped quietly when not there), a URL, or `none`.
    #[arg(long, default_value = "auto", value_name = "auto|URL|none")]
    pub server_metrics: String,

    /// A GPU exporter's metrics URL (NVIDIA dcgm-exporter), scraped the same way.
    #[arg(long, value_name = "URL")]
    pub gpu_metrics: Option<String>,

    /// Time between scrapes within a level (each level is also scraped at its
    /// start and end).
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub scrape_interval: String,

    /// Send the API key to metrics URLs on another host too (by default it goes
    /// only to the endpoint's own origin).
    #[arg(long)]
    pub metrics_send_key: bool,

    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,

    /// Run the K-th (0-based) of N equal parts of this plan, for N load
    /// generators together: each level's concurrency or rate, the request
    /// counts and the prompts split between the shards (docs/scale.md). Each
    /// shard writes its own report; `tokenscope merge` makes them one.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,

    /// Start the first level at this wall-clock time (RFC 3339, e.g.
    /// 2026-12-03T14:05:00Z), after the setup, so shards on several machines
    /// line up.
    #[arg(
        long,
        value_name = "TIME",
        requires = "shard",
        conflicts_with = "start_after"
    )]
    pub start_at: Option<String>,

    /// Start the first level this long after now (e.g. 30s), for shards
    /// started together (a Kubernetes Job's pods).
    #[arg(long, value_name = "DURATION", requires = "shard")]
    pub start_after: Option<String>,

    /// Serve live Prometheus metrics at http://ADDR/metrics while the run goes on
    /// (TTFT, TPOT, ITL, E2E histograms; requests by outcome, tokens, in-flight,
    /// the level; labelled by level and shard: docs/scale.md lists them).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,

    /// After the run, keep /metrics up until it is scraped once more (so the
    /// scraper sees the final counts), at most this long (0: stop at once).
    #[arg(
        long,
        default_value = "15s",
        value_name = "DURATION",
        requires = "metrics_listen"
    )]
    pub metrics_linger: String,

    /// Push the same series to this Prometheus remote-write endpoint (e.g.
    /// http://prometheus:9090/api/v1/write) every --remote-write-interval and
    /// once at the end: for runs shorter than a scrape interval. A refused push
    /// is counted and said in the report; the run goes on.
    #[arg(long, value_name = "URL")]
    pub prometheus_remote_write: Option<String>,

    /// Time between remote-write pushes.
    #[arg(
        long,
        default_value = "5s",
        value_name = "DURATION",
        requires = "prometheus_remote_write"
    )]
    pub remote_write_interval: String,

    /// Exact samples kept per metric and level; past it, percentiles come from an
    /// HdrHistogram (3 significant digits) so memory stays flat on long runs.
    #[arg(long, default_value_t = tokenscope_core::analyze::stats::DEFAULT_SAMPLE_CAP, hide = true)]
    pub sample_cap: usize,
}

fn flag<T>(name: &str, r: Result<T, String>) -> anyhow::Result<T> {
    r.map_err(|e| anyhow::anyhow!("--{name}: {e}"))
}

/// Read `--prompts`: JSON Lines of prompts or conversations, or ShareGPT
/// (`core::workload::dataset`), `--sample N` of them picked with `--seed`.
pub fn read_prompts(
    path: &Path,
    sample: Option<usize>,
    seed: u64,
) -> anyhow::Result<Vec<DatasetPrompt>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--prompts {}: cannot read the file", path.display()))?;
    let dataset =
        Dataset::parse(&text).map_err(|e| anyhow::anyhow!("--prompts {}: {e}", path.display()))?;
    if dataset.skipped > 0 {
        eprintln!(
            "note: --prompts {}: {} records without a human turn left out",
            path.display(),
            dataset.skipped
        );
    }
    Ok(match sample {
        Some(n) => dataset.sample(n, seed),
        None => dataset.prompts,
    })
}

impl BenchArgs {
    /// The load levels: `--rate` (open loop) or `--concurrency` (closed loop,
    /// default 1,4,8,16,32).
    fn load_plan(&self) -> anyhow::Result<LoadPlan> {
        if let Some(path) = &self.trace {
            return self.trace_plan(path);
        }
        Ok(match (&self.concurrency, &self.rate) {
            (_, Some(r)) => {
                let (arrival, cv) = flag("arrival", parse_arrival(&self.arrival))?;
                LoadPlan::Rate {
                    rates: flag("rate", parse_f64_list(r))?,
                    arrival,
                    cv,
                }
            }
            (Some(c), None) => LoadPlan::Concurrency(flag("concurrency", parse_u32_list(c))?),
            (None, None) => LoadPlan::Concurrency(vec![1, 4, 8, 16, 32]),
        })
    }

    /// `--trace`: the file read and checked, scaled and sped up as asked.
    fn trace_plan(&self, path: &Path) -> anyhow::Result<LoadPlan> {
        for (name, v) in [
            ("trace-speed", self.trace_speed),
            ("trace-token-scale", self.trace_token_scale),
        ] {
            if !(v.is_finite() && v > 0.0) {
                anyhow::bail!("--{name}: {v} must be more than 0");
            }
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--trace {}: cannot read the file", path.display()))?;
        let trace =
            Trace::parse(&text).map_err(|e| anyhow::anyhow!("--trace {}: {e}", path.display()))?;
        let limit = self.requests.map(|n| n as usize);
        if limit == Some(0) {
            anyhow::bail!("--requests: 0 must be at least 1");
        }
        let replay = trace.replay(self.trace_speed, self.trace_token_scale, limit);
        for s in &replay.skipped {
            eprintln!("note: --trace {}: left out {s}", path.display());
        }
        let info = TraceInfo {
            file: path.display().to_string(),
            format: replay.format,
            requests: replay.requests.len() as u64,
            speed: self.trace_speed,
            token_scale: self.trace_token_scale,
            block_tokens: replay.block_tokens,
            span_s: replay.span_ms() / 1000.0,
            skipped: replay.skipped.len() as u64,
        };
        Ok(LoadPlan::Trace {
            trace: std::sync::Arc::new(replay),
            info,
        })
    }

    /// Rounds per level (a trace is replayed once).
    fn rounds(&self) -> u32 {
        if self.trace.is_some() {
            1
        } else {
            self.rounds.unwrap_or(3)
        }
    }

    /// How much each level measures: `--requests` (at least one per round),
    /// `--duration`, or the default.
    fn per_level(&self, load: &LoadPlan) -> anyhow::Result<PerLevel> {
        if let LoadPlan::Trace { trace, .. } = load {
            return Ok(PerLevel::Requests(trace.requests.len() as u64));
        }
        let rounds = self.rounds();
        if rounds == 0 {
            anyhow::bail!("--rounds: 0 must be at least 1");
        }
        Ok(match (self.requests, &self.duration) {
            (Some(0), _) => anyhow::bail!("--requests: 0 must be at least 1"),
            (Some(n), _) if n < u64::from(rounds) => anyhow::bail!(
                "--requests: {n} is fewer than --rounds {rounds}: each round needs at least one request"
            ),
            (Some(n), _) => PerLevel::Requests(n),
            (None, Some(d)) => PerLevel::Duration(flag("duration", parse_duration(d))?),
            (None, None) => PerLevel::Auto,
        })
    }

    /// Say so when a round sends fewer requests than a level's concurrency: that
    /// level never has them all in flight.
    fn warn_thin_rounds(&self, per_level: &PerLevel, load: &LoadPlan) {
        if let (PerLevel::Requests(n), LoadPlan::Concurrency(cs)) = (per_level, load) {
            let rounds = self.rounds();
            let per_round = n / u64::from(rounds);
            if let Some(c) = cs.iter().find(|&&c| u64::from(c) > per_round) {
                eprintln!(
                    "warning: --requests {n} over {rounds} rounds sends {per_round} per round, fewer than concurrency {c}: that level never has {c} requests in flight (use --requests {} or more)",
                    u64::from(*c) * u64::from(rounds)
                );
            }
        }
    }

    /// Validate everything before anything is sent.
    pub fn into_config(self) -> anyhow::Result<(Plan, Outputs)> {
        let (base_url, url_note) = flag("url", parse_base_url(&self.url))?;
        if let Some(note) = url_note {
            eprintln!("note: --url: {note}");
        }
        let api_key = self
            .api_key
            .clone()
            .filter(|k| !k.is_empty())
            .or_else(|| {
                std::env::var("OPENAI_API_KEY")
                    .ok()
                    .filter(|k| !k.is_empty())
            })
            .map(Secret::new);
        let http = self
            .http
            .clone()
            .into_options(&base_url, &|name| std::env::var(name).ok())?;
        if http.insecure {
            eprintln!(
                "WARNING: --insecure: the server's certificate is NOT verified; anyone on the path could have answered. The report says so."
            );
        }
        if let Some(p) = &http.proxy {
            eprintln!(
                "note: requests go through the proxy {} (from {})",
                p.display(),
                p.from
            );
        }
        let load = self.load_plan()?;
        let per_level = self.per_level(&load)?;
        let outputs_tiers = flag("max-tokens", parse_u32_list(&self.max_tokens))?;
        let inputs = flag(
            "input-tokens",
            InputLength::parse_list(self.input_tokens.as_deref().unwrap_or("256")),
        )?;
        // A prompts file's prompts are picked into the tiers asked (by length).
        let pick_by_length = self.prompts.is_some() && self.input_tokens.is_some();
        if pick_by_length && let Some(f) = inputs.iter().find(|i| i.tokens().is_none()) {
            anyhow::bail!(
                "--input-tokens: {:?} with --prompts: the tiers that pick the file's prompts are numbers of tokens",
                f.label()
            );
        }
        let tiers = Tier::grid(&inputs, &outputs_tiers);
        if tiers.len() > 1 && self.trace.is_some() {
            anyhow::bail!(
                "--trace: a trace gives every request its own lengths; one --input-tokens and one --max-tokens at most"
            );
        }
        if outputs_tiers.len() > 1 && self.prompts.is_some() {
            eprintln!(
                "note: --max-tokens: a prompt's own max_tokens in --prompts wins over the tier's"
            );
        }
        let (input, max_tokens) = (tiers[0].input, tiers[0].max_tokens);
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            anyhow::bail!("--temperature: {t} must be between 0 and 2");
        }
        let prompts = match &self.prompts {
            Some(path) => Prompts::File {
                path: path.clone(),
                prompts: read_prompts(path, self.sample, self.seed)?,
            },
            None => Prompts::Synthetic { tokens: input },
        };
        self.warn_thin_rounds(&per_level, &load);
        let slos = match &self.slo {
            Some(s) => Slo::parse_list(s).map_err(|e| anyhow::anyhow!("--slo: {e}"))?,
            None => Vec::new(),
        };
        let timeout = flag("timeout", parse_duration(&self.timeout))?;
        let stall = flag("stall-threshold", parse_duration(&self.stall_threshold))?;
        let snapshot_interval = match (&self.snapshot_interval, &per_level) {
            (Some(s), _) => Some(flag("snapshot-interval", parse_duration(s))?),
            (None, PerLevel::Duration(d)) if *d >= Duration::from_secs(180) => {
                Some(Duration::from_secs(60))
            }
            (None, _) => None,
        };
        let grace = flag("grace", parse_duration(&self.grace))?;
        let server_metrics = flag(
            "server-metrics",
            server_metrics(&self.server_metrics, &base_url),
        )?;
        let gpu_metrics = match &self.gpu_metrics {
            Some(u) => Some(flag("gpu-metrics", metrics_url(u))?),
            None => None,
        };
        let scrape_interval = flag("scrape-interval", parse_duration(&self.scrape_interval))?;
        if scrape_interval < Duration::from_millis(100) {
            anyhow::bail!(
                "--scrape-interval: {} is under 100ms: scraping that often would load the server it measures",
                self.scrape_interval
            );
        }
        for (name, path) in [
            ("out", &self.out),
            ("csv", &self.csv),
            ("markdown", &self.markdown),
            ("raw", &self.raw),
        ] {
            if let Some(p) = path {
                check_writable(name, p)?;
            }
        }
        let (rounds, tracing) = (self.rounds(), self.trace.is_some());
        let tokenizer = TokenizerChoice::parse(self.tokenizer.as_deref().unwrap_or("auto"));
        if let TokenizerChoice::File(path) = &tokenizer {
            engine::tokenize::check_file(path)?;
        }
        let conversation = match &self.conversation {
            Some(c) => Some(flag("conversation", Conversation::parse(c))?),
            None => None,
        };
        if conversation.is_some() {
            if matches!(self.api, ApiArg::Completions) {
                anyhow::bail!(
                    "--conversation: a conversation's history is a list of chat messages: use --api chat"
                );
            }
            if let Prompts::File { path, prompts } = &prompts
                && prompts.iter().any(|p| p.messages.is_some())
            {
                anyhow::bail!(
                    "--conversation: {} holds whole conversations ({{\"messages\": ...}}); --conversation takes prompts ({{\"prompt\": ...}}), one per turn",
                    path.display()
                );
            }
        }
        let cfg = BenchConfig {
            base_url,
            api: match self.api {
                ApiArg::Chat => Api::Chat,
                ApiArg::Completions => Api::Completions,
            },
            model: self.model,
            api_key,
            http,
            load,
            per_level,
            rounds,
            // A trace is replayed as recorded: nothing before it.
            warmup: if tracing { Some(0) } else { self.warmup },
            prompts,
            max_tokens,
            // A trace's output lengths are the answers' lengths.
            ignore_eos: self.ignore_eos || tracing,
            min_tokens: self.min_tokens,
            temperature: self.temperature,
            timeout,
            slos,
            stall_threshold_ms: stall.as_secs_f64() * 1000.0,
            seed: self.seed,
            label: self.label.clone(),
            snapshot_interval,
            preflight: !self.no_preflight,
            grace,
            raw: self.raw,
            progress: !self.quiet,
            sample_cap: self.sample_cap.max(1),
            server_metrics,
            gpu_metrics,
            scrape_interval,
            metrics_send_key: self.metrics_send_key,
            tokenizer,
            tokens: None,
            context_window: self.context_window,
            shared_prefix: match self.shared_prefix {
                Some(0) => anyhow::bail!("--shared-prefix: 0 must be at least 1"),
                n => n,
            },
            ramp: match &self.ramp {
                Some(r) => Some(flag("ramp", parse_duration(r))?),
                None => None,
            },
            conversation,
            prompt_tier: None,
            metrics_listen: self.metrics_listen,
            metrics_linger: flag(
                "metrics-linger",
                parse_duration_or_zero(&self.metrics_linger),
            )?,
            remote_write: match &self.prometheus_remote_write {
                Some(u) => {
                    let url = reqwest::Url::parse(u)
                        .ok()
                        .filter(|u| matches!(u.scheme(), "http" | "https"))
                        .ok_or_else(|| {
                            anyhow::anyhow!(
                                "--prometheus-remote-write: not an http(s) URL (e.g. http://127.0.0.1:9090/api/v1/write)"
                            )
                        })?;
                    let every = flag(
                        "remote-write-interval",
                        parse_duration(&self.remote_write_interval),
                    )?;
                    anyhow::ensure!(
                        every >= Duration::from_millis(100),
                        "--remote-write-interval: {} is under 100ms",
                        self.remote_write_interval
                    );
                    Some((url, every))
                }
                None => None,
            },
            shard: None,
            start_at: match (&self.start_at, &self.start_after) {
                (Some(t), _) => Some((
                    flag("start-at", tokenscope_core::parse::rfc3339_ms(t))?,
                    t.clone(),
                )),
                (None, Some(d)) => {
                    let at = crate::util::unix_ms()
                        + flag("start-after", parse_duration(d))?.as_secs_f64() * 1000.0;
                    Some((at, crate::util::rfc3339_of_ms(at)))
                }
                (None, None) => None,
            },
        };
        let cfg = match &self.shard {
            Some(s) => {
                let shard = flag("shard", Shard::parse(s).map_err(|e| e.to_string()))?;
                cfg.split(shard)
                    .map_err(|e| anyhow::anyhow!("--shard {s}: {e}"))?
            }
            None => cfg,
        };
        let outputs = Outputs {
            out: self.out,
            csv: self.csv,
            markdown: self.markdown,
        };
        Ok((
            Plan {
                cfg,
                tiers,
                synthetic: self.prompts.is_none(),
                pick_by_length,
            },
            outputs,
        ))
    }
}

/// What `bench` runs: the configuration at each tier, in turn.
#[derive(Debug)]
pub struct Plan {
    /// The first tier's configuration; the others differ only in prompt length
    /// and `max_tokens`.
    pub cfg: BenchConfig,
    /// The input x output tiers (one: no tiers).
    pub tiers: Vec<Tier>,
    /// Synthetic prompts (a tier's input length applies).
    synthetic: bool,
    /// A prompts file whose prompts each tier picks by length.
    pick_by_length: bool,
}

impl Plan {
    /// The configuration at tier `i`, with its raw file named for the tier when
    /// there are several.
    pub fn tier_config(&self, i: usize) -> BenchConfig {
        let t = self.tiers[i];
        let mut cfg = self.cfg.clone();
        cfg.max_tokens = t.max_tokens;
        if self.synthetic {
            cfg.prompts = Prompts::Synthetic { tokens: t.input };
        }
        if self.pick_by_length {
            cfg.prompt_tier = t.input.tokens();
        }
        if self.tiers.len() > 1 {
            cfg.raw = cfg.raw.map(|p| tier_path(&p, &t));
        }
        cfg
    }
}

/// `report.json` -> `report.in256-out128.json`.
fn tier_path(path: &Path, tier: &Tier) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{}.{}", tier.label(), ext.to_string_lossy()),
        None => format!("{stem}.{}", tier.label()),
    };
    path.with_file_name(name)
}

/// `--server-metrics`: `auto` (the endpoint's origin + `/metrics`), `none`, or a URL.
fn server_metrics(s: &str, base: &reqwest::Url) -> Result<engine::scrape::ServerMetrics, String> {
    use engine::scrape::ServerMetrics;
    match s.trim() {
        "auto" => {
            let mut u = base.clone();
            u.set_path("/metrics");
            u.set_query(None);
            Ok(ServerMetrics::Auto(u))
        }
        "none" | "off" => Ok(ServerMetrics::Off),
        url => metrics_url(url).map(ServerMetrics::Url),
    }
}

/// A metrics URL: http(s) with a host; a bare origin gets `/metrics`.
fn metrics_url(s: &str) -> Result<reqwest::Url, String> {
    let mut u = reqwest::Url::parse(s.trim()).map_err(|e| {
        format!(
            "{:?} is not auto, none or a URL ({e})",
            tokenscope_core::parse::redact_url(s)
        )
    })?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return Err(format!(
            "{} is not an http(s) URL",
            tokenscope_core::parse::redact_url(s)
        ));
    }
    if u.path() == "/" {
        u.set_path("/metrics");
    }
    Ok(u)
}

/// Refuse an output path whose folder does not exist, before the run.
fn check_writable(name: &str, path: &Path) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        anyhow::bail!(
            "--{name} {}: the folder {} does not exist",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Where the report goes.
#[derive(Debug, Default, Clone)]
pub struct Outputs {
    /// JSON.
    pub out: Option<PathBuf>,
    /// CSV.
    pub csv: Option<PathBuf>,
    /// Markdown.
    pub markdown: Option<PathBuf>,
}

impl Outputs {
    /// The same outputs, named for `tier`.
    fn for_tier(&self, tier: &Tier) -> Self {
        let name = |p: &Option<PathBuf>| p.as_deref().map(|p| tier_path(p, tier));
        Self {
            out: name(&self.out),
            csv: name(&self.csv),
            markdown: name(&self.markdown),
        }
    }

    /// The files written, for the closing lines.
    fn paths(&self) -> Vec<&Path> {
        [&self.out, &self.csv, &self.markdown]
            .into_iter()
            .filter_map(|p| p.as_deref())
            .collect()
    }

    /// Write every requested export.
    pub fn write(&self, report: &ClientReport) -> anyhow::Result<()> {
        if let Some(p) = &self.out {
            std::fs::write(p, report.to_json() + "\n")
                .with_context(|| format!("--out {}: cannot write", p.display()))?;
        }
        if let Some(p) = &self.csv {
            std::fs::write(p, render::client::csv(report))
                .with_context(|| format!("--csv {}: cannot write", p.display()))?;
        }
        if let Some(p) = &self.markdown {
            std::fs::write(p, render::client::markdown(report))
                .with_context(|| format!("--markdown {}: cannot write", p.display()))?;
        }
        Ok(())
    }
}

/// Run the subcommand: the sweep at each tier in turn, each tier's report
/// written as soon as it ends.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let (plan, outputs) = args.into_config()?;
    let rt = super::runtime()?;
    let pre = rt.block_on(async {
        let pre = engine::preflight::check(&plan.cfg).await?;
        if plan.cfg.progress {
            eprintln!(
                "benchmarking {} ({}) at {}",
                pre.model,
                plan.cfg.api.as_str(),
                crate::util::redact_url(&plan.cfg.base_url)
            );
        }
        anyhow::Ok(pre)
    })?;
    let tiered = plan.tiers.len() > 1;
    let mut done = Vec::new();
    for (i, tier) in plan.tiers.iter().enumerate() {
        if tiered {
            println!(
                "\n== tier {}/{}: input {}, max_tokens {} ==",
                i + 1,
                plan.tiers.len(),
                match tier.input {
                    InputLength::Tokens(n) => format!("{n} tokens"),
                    InputLength::OfContext(f) => format!("{f} of the context window"),
                },
                tier.max_tokens
            );
        }
        let cfg = plan.tier_config(i);
        let report =
            rt.block_on(async { anyhow::Ok(engine::run(cfg, pre.clone()).await?.report) })?;
        // Exports first (a failing terminal must not lose the files), then the table.
        let out = if tiered {
            outputs.for_tier(tier)
        } else {
            outputs.clone()
        };
        out.write(&report)?;
        print!("{}", render::client::text_summary(&report));
        if tiered {
            for p in out.paths() {
                println!("wrote {}", p.display());
            }
        }
        let interrupted = report.interrupted;
        done.push((*tier, report));
        if interrupted {
            break;
        }
    }
    if tiered {
        print!("{}", tier_summary(&done));
    }
    Ok(if done.iter().any(|(_, r)| r.interrupted) {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// The tiers side by side ([`tiers::tier_rows`]).
fn tier_summary(done: &[(Tier, ClientReport)]) -> String {
    let labelled: Vec<(String, &ClientReport)> = done.iter().map(|(t, r)| (t.label(), r)).collect();
    let (headers, rows) = tiers::tier_rows(&labelled);
    format!(
        "\nall tiers (ms):\n{}",
        tokenscope_core::render::table::text_table(&headers, &rows)
    )
}
