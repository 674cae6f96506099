//! What a run was: its configuration (everything needed to rerun it, never the
//! API key) and its environment (where and with what it ran).

use serde::{Deserialize, Serialize};

use super::is_zero;
use super::load::{Arrival, Load, LoadMode, ReasoningDisplay};
use super::merge::MergeInfo;
use super::transport;
use crate::analyze::slo::Slo;
use tokenscope_measure::openai::Api;
use tokenscope_stats::stats::Summary;

/// How a run counted tokens for the prompts it built (`tokenscope bench
/// --tokenizer`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenCounting {
    /// `server` (the endpoint's `/tokenize`), `file` (a `tokenizer.json`) or
    /// `approx` (one token per word and punctuation mark).
    pub method: String,
    /// Which: `llama.cpp /tokenize`, `vLLM /tokenize`, the file's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Prompts are exactly the requested tokens long by that count (words that
    /// are one token each were found); false: approximate.
    pub exact: bool,
    /// Tokens the server adds around a prompt (chat template, BOS): its
    /// `usage.prompt_tokens` minus the prompt's own count, measured once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_overhead: Option<i64>,
}

/// The trace a run replayed (`tokenscope bench --trace`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceInfo {
    /// The file (its name as given).
    pub file: String,
    /// Its format.
    pub format: tokenscope_workload::trace::TraceFormat,
    /// Requests replayed.
    pub requests: u64,
    /// Time compressed by this factor (`--trace-speed`).
    pub speed: f64,
    /// Every length multiplied by this (`--trace-token-scale`).
    pub token_scale: f64,
    /// Tokens per prefix block, scaled (Mooncake's 512).
    pub block_tokens: u64,
    /// From the first request's arrival to the last's, as replayed, seconds.
    pub span_s: f64,
    /// Lines of the file left out (BurstGPT's failed requests).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped: u64,
}

/// Everything needed to rerun the benchmark (never the API key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunConfig {
    /// Base URL (`.../v1`), without credentials or query string.
    pub url: String,
    /// Endpoint kind.
    pub api: Api,
    /// Model name.
    pub model: String,
    /// `concurrency` or `rate`.
    pub mode: LoadMode,
    /// The levels swept (concurrencies or req/s).
    pub levels: Vec<f64>,
    /// Rate mode's arrival process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<Arrival>,
    /// Measured requests per level (split over the rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_level: Option<u64>,
    /// Measured duration per level, seconds (split over the rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_per_level_s: Option<f64>,
    /// Rounds per level.
    pub rounds: u32,
    /// Warm-up requests before each level (not measured).
    pub warmup_requests: u32,
    /// Approximate prompt length, tokens (synthetic prompts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u32>,
    /// Prompts file, when one was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts_file: Option<String>,
    /// The prompts file's prompt set, as sent ([`tokenscope_workload::dataset::prompts_hash`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts_hash: Option<String>,
    /// What this run is (`bench --label v1.2`): `tokenscope history` orders and
    /// names runs by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `max_tokens` sent.
    pub max_tokens: u32,
    /// `ignore_eos` sent.
    pub ignore_eos: bool,
    /// `min_tokens` sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_tokens: Option<u32>,
    /// Per-request timeout, seconds.
    pub timeout_s: f64,
    /// SLOs given.
    #[serde(default)]
    pub slos: Vec<Slo>,
    /// Stall threshold, ms.
    pub stall_threshold_ms: f64,
    /// Seed of prompt generation and arrivals.
    pub seed: u64,
    /// Long-run snapshot interval, seconds (soak runs); absent: no snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_interval_s: Option<f64>,
    /// Exact samples kept per metric and level before the percentiles come from a
    /// histogram; absent: the default (`stats::DEFAULT_SAMPLE_CAP`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_cap: Option<u64>,
    /// The server's `/metrics` scraped during the run (its URL without query or
    /// credentials); absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics_url: Option<String>,
    /// How many distinct prompts the run cycles through (a prompts file); absent:
    /// every request's prompt is its own (synthetic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinct_prompts: Option<u64>,
    /// The GPU exporter scraped during the run; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_metrics_url: Option<String>,
    /// Every chunk was asked for a running `usage` (`--continuous-usage`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continuous_usage: bool,
    /// Classes of requests held to their own SLOs (`--slo-class`); a request
    /// of another class, or of none, is held to `slos`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_classes: Vec<crate::analyze::slo::SloClass>,
    /// The images each request carried (`--images`), each spec in turn, as
    /// given (`512x512`, `2x1024x768`: text here, which the page reads
    /// without the parser).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
    /// How they were encoded; absent without images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_format: Option<tokenscope_workload::images::ImageFormat>,
    /// What every request asked its answer to be (`--tools`, `--tool-choice`,
    /// `--json-schema`); absent: nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<AnswerAsked>,
    /// What the compute costs (`--price`); absent: no dollar figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<super::cost::Price>,
    /// Seconds between scrapes within a level (besides one at each level's start
    /// and end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_interval_s: Option<f64>,
    /// The trace replayed (its arrivals, lengths and prefix blocks), when one was.
    /// The page's main module writes it (a trace replayed in the page) but does
    /// not read it back (a report it opens keeps its full text for the Analysis
    /// and the export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceInfo>,
    /// How the prompts' tokens were counted (absent: approximately, before this
    /// was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenCounting>,
    /// The server's context window, tokens (given, or read from the server for
    /// an input length given as a fraction of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The gaps' coefficient of variation (`arrival: gamma`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_cv: Option<f64>,
    /// Seconds of load rising linearly before each level's measured part
    /// (instead of its warm-up; not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_s: Option<f64>,
    /// Tokens of the system prompt every request began with (`--shared-prefix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefix_tokens: Option<u32>,
    /// Browser runs: what the page showed of reasoning (the rendered TTFT is
    /// the paint of the first token shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_display: Option<ReasoningDisplay>,
    /// The sessions' shape when the run sent conversations (`--conversation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<tokenscope_workload::conversation::Conversation>,
    /// The run is one shard of a plan split over several load generators
    /// (`bench --shard K/N`): which, and the whole plan's levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<tokenscope_workload::shard::ShardInfo>,
}

/// What every request of a run asked its answer to be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct AnswerAsked {
    /// The names of the tools offered (`--tools`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Whether the model could (`auto`), had to (`required`) or could not
    /// (`none`) call one, or had to call the one named (`--tool-choice`);
    /// absent: the server's default (auto).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
    /// A JSON schema was asked of every answer (`--json-schema`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub json_schema: bool,
}

impl RunConfig {
    /// A configuration of the chat API at `url` with `model` and nothing else set:
    /// no levels, one round, no prompt size, no timeout, no SLOs. The base callers
    /// set what they know on (`RunConfig { levels, ..RunConfig::unset(..) }`).
    pub fn unset(url: String, model: String, mode: LoadMode) -> Self {
        Self {
            url,
            api: Api::Chat,
            model,
            mode,
            levels: Vec::new(),
            arrival: None,
            requests_per_level: None,
            duration_per_level_s: None,
            rounds: 1,
            warmup_requests: 0,
            input_tokens: None,
            prompts_file: None,
            label: None,
            prompts_hash: None,
            max_tokens: 0,
            ignore_eos: false,
            min_tokens: None,
            context_window: None,
            arrival_cv: None,
            ramp_s: None,
            shared_prefix_tokens: None,
            conversation: None,
            shard: None,
            reasoning_display: None,
            timeout_s: 0.0,
            slos: Vec::new(),
            stall_threshold_ms: tokenscope_measure::metrics::DEFAULT_STALL_THRESHOLD_MS,
            seed: 0,
            snapshot_interval_s: None,
            sample_cap: None,
            server_metrics_url: None,
            gpu_metrics_url: None,
            price: None,
            continuous_usage: false,
            answer: None,
            slo_classes: Vec::new(),
            images: Vec::new(),
            image_format: None,
            distinct_prompts: None,
            scrape_interval_s: None,
            trace: None,
            tokens: None,
        }
    }

    /// The load of level `index` of the plan (`levels` read by `mode`).
    pub fn level_load(&self, index: usize) -> Option<Load> {
        let value = *self.levels.get(index)?;
        Some(match self.mode {
            LoadMode::Concurrency => Load::Concurrency(value.round() as u32),
            LoadMode::Rate => Load::Rate(value),
        })
    }
}

/// Where and with what the run was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Environment {
    /// tokenscope's version.
    pub tool_version: String,
    /// The browser's user agent (browser runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// HTTP protocol seen (`http/1.1`, `h2`), when known: the one most
    /// requests' answers came over (each level counts them all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// How the client reached the endpoint: HTTP version asked, TLS, proxy,
    /// extra headers (names; values only where marked public). The page's main
    /// module writes it but does not read it back (a report it opens keeps its
    /// full text for the Analysis and the export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<transport::TransportInfo>,
    /// Operating system and architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// Logical CPUs of the client machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// Wall-clock start of the run (RFC 3339), for comparing runs later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// CPU time the client process used, seconds (user + system).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_s: Option<f64>,
    /// Whether the endpoint is the built-in simulator.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
    /// The client's own event-loop lag during the run: how late a 10 ms timer fired.
    /// High values mean the client, not the server, was the bottleneck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_loop_lag_ms: Option<Summary>,
    /// This report was rebuilt from a raw file (`tokenscope report --raw`), not
    /// written by the run: what the raw file did not record is missing here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rebuilt_from_raw: bool,
    /// This report merges shards' reports (`tokenscope merge`): how many, how,
    /// and how far apart they started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergeInfo>,
}
