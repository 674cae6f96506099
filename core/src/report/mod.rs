//! The report models. This module is the client report (`tokenscope.client/1`):
//! one serde model that every renderer (the terminal table, Markdown, CSV, the
//! HTML report, the page) reads. Beside it: [`warning`] (typed run warnings),
//! [`assemble`] (the one way a client report is put together, live or from a raw
//! file), [`raw`] (`tokenscope.raw/1`), [`kernels`] (`tokenscope.kernels/1`) and
//! [`combined`] (the combined report's analysed form).
//!
//! The committed JSON Schema is `schemas/client.schema.json`; a test checks that
//! what we write validates against it. Readers refuse a document whose major
//! schema version they do not know ([`ClientReport::from_json`]).

pub mod assemble;
pub mod combined;
pub mod compare;
pub mod history;
pub mod kernels;
#[cfg(feature = "server-view")]
pub mod merge;
pub mod raw;
#[cfg(feature = "server-view")]
pub mod server;
pub mod transport;
pub mod warning;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use self::warning::{ReportWarning, WarningKind};
#[cfg(feature = "server-view")]
use crate::analyze::server::view::{ServerLevel, ServerRun};

/// A level's server view in the report: [`ServerLevel`] with the feature
/// `server-view`, else a placeholder that is never present (the page's main
/// module, which neither scrapes nor reads the view, carries none of its code).
#[cfg(feature = "server-view")]
pub type LevelServer = ServerLevel;
/// A level's server view in the report (see the `server-view` build).
#[cfg(not(feature = "server-view"))]
pub type LevelServer = NoServerView;
/// The run's server side in the report ([`ServerRun`] with `server-view`).
#[cfg(feature = "server-view")]
pub type RunServer = ServerRun;
/// The run's server side in the report (see the `server-view` build).
#[cfg(not(feature = "server-view"))]
pub type RunServer = NoServerView;

/// Stands in for the server view in a build without it: it has no value.
#[cfg(not(feature = "server-view"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoServerView {}
use crate::analyze::slo::Slo;
use crate::analyze::stats::{LinearFit, Summary};
use crate::measure::openai::Api;

/// The schema name and version this crate writes.
pub const CLIENT_SCHEMA: &str = "tokenscope.client/1";

/// Who measured. (The default, the native CLI, stands in where a report's
/// source is not read: the page's main module.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The native CLI (`tokenscope bench`).
    #[default]
    Native,
    /// The web page.
    Browser,
}

impl Source {
    /// `native` or `browser`, as in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Native => "native",
            Source::Browser => "browser",
        }
    }
}

/// How load was applied: closed loop (concurrency) or open loop (rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LoadMode {
    /// A fixed number of requests in flight.
    #[default]
    Concurrency,
    /// Requests sent on a schedule.
    Rate,
}

impl LoadMode {
    /// `concurrency` or `rate`, as in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadMode::Concurrency => "concurrency",
            LoadMode::Rate => "rate",
        }
    }
}

impl std::fmt::Display for LoadMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How load was applied at one level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Load {
    /// Closed loop: this many requests in flight at all times.
    Concurrency(u32),
    /// Open loop: requests sent on a schedule at this mean rate (req/s).
    Rate(f64),
}

impl Load {
    /// A short label: `c=8` or `5 req/s`.
    pub fn label(&self) -> String {
        match self {
            Load::Concurrency(c) => format!("c={c}"),
            Load::Rate(r) => {
                // At most two decimals (a trace's mean rate is any number).
                let text = format!("{r:.2}");
                let text = text.trim_end_matches('0').trim_end_matches('.');
                format!("{text} req/s")
            }
        }
    }

    /// The load as a number (concurrency or rate), for charts.
    pub fn value(&self) -> f64 {
        match self {
            Load::Concurrency(c) => f64::from(*c),
            Load::Rate(r) => *r,
        }
    }
}

/// What a browser run's page showed of a reasoning model's answer (`reasoning`):
/// its rendered TTFT is the paint of the first token shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningDisplay {
    /// The reasoning is shown as it streams: the first token of any kind is
    /// painted first.
    #[default]
    Shown,
    /// Only the answer is shown: the first answer token is painted first.
    Hidden,
}

/// Inter-arrival distribution in rate mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// Exponential gaps (a Poisson process).
    #[default]
    Poisson,
    /// Equal gaps.
    Constant,
    /// The arrivals of a replayed trace (`config.trace`).
    Trace,
    /// Gamma-distributed gaps with the coefficient of variation in
    /// `config.arrival_cv` (1: Poisson; above: burstier).
    Gamma,
}

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
    pub format: crate::workload::trace::TraceFormat,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Base URL (`.../v1`), without credentials or query string.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub url: String,
    /// Endpoint kind.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub api: Api,
    /// Model name.
    pub model: String,
    /// `concurrency` or `rate`.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub mode: LoadMode,
    /// The levels swept (concurrencies or req/s).
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub levels: Vec<f64>,
    /// Rate mode's arrival process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub arrival: Option<Arrival>,
    /// Measured requests per level (split over the rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub requests_per_level: Option<u64>,
    /// Measured duration per level, seconds (split over the rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub duration_per_level_s: Option<f64>,
    /// Rounds per level.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub rounds: u32,
    /// Warm-up requests before each level (not measured).
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub warmup_requests: u32,
    /// Approximate prompt length, tokens (synthetic prompts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub input_tokens: Option<u32>,
    /// Prompts file, when one was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub prompts_file: Option<String>,
    /// The prompts file's prompt set, as sent ([`crate::workload::dataset::prompts_hash`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub prompts_hash: Option<String>,
    /// What this run is (`bench --label v1.2`): `tokenscope history` orders and
    /// names runs by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub label: Option<String>,
    /// `max_tokens` sent.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub max_tokens: u32,
    /// `ignore_eos` sent.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub ignore_eos: bool,
    /// `min_tokens` sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub min_tokens: Option<u32>,
    /// Per-request timeout, seconds.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub timeout_s: f64,
    /// SLOs given.
    #[serde(default)]
    pub slos: Vec<Slo>,
    /// Stall threshold, ms.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub stall_threshold_ms: f64,
    /// Seed of prompt generation and arrivals.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub seed: u64,
    /// Long-run snapshot interval, seconds (soak runs); absent: no snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub snapshot_interval_s: Option<f64>,
    /// Exact samples kept per metric and level before the percentiles come from a
    /// histogram; absent: the default (`stats::DEFAULT_SAMPLE_CAP`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub sample_cap: Option<u64>,
    /// The server's `/metrics` scraped during the run (its URL without query or
    /// credentials); absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub server_metrics_url: Option<String>,
    /// How many distinct prompts the run cycles through (a prompts file); absent:
    /// every request's prompt is its own (synthetic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub distinct_prompts: Option<u64>,
    /// The GPU exporter scraped during the run; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub gpu_metrics_url: Option<String>,
    /// Seconds between scrapes within a level (besides one at each level's start
    /// and end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub scrape_interval_s: Option<f64>,
    /// The trace replayed (its arrivals, lengths and prefix blocks), when one was.
    /// The page's main module writes it (a trace replayed in the page) but does
    /// not read it back (a report it opens keeps its full text for the Analysis
    /// and the export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub trace: Option<TraceInfo>,
    /// How the prompts' tokens were counted (absent: approximately, before this
    /// was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub tokens: Option<TokenCounting>,
    /// The server's context window, tokens (given, or read from the server for
    /// an input length given as a fraction of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub context_window: Option<u64>,
    /// The gaps' coefficient of variation (`arrival: gamma`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub arrival_cv: Option<f64>,
    /// Seconds of load rising linearly before each level's measured part
    /// (instead of its warm-up; not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub ramp_s: Option<f64>,
    /// Tokens of the system prompt every request began with (`--shared-prefix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub shared_prefix_tokens: Option<u32>,
    /// Browser runs: what the page showed of reasoning (the rendered TTFT is
    /// the paint of the first token shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub reasoning_display: Option<ReasoningDisplay>,
    /// The sessions' shape when the run sent conversations (`--conversation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub conversation: Option<crate::workload::conversation::Conversation>,
    /// The run is one shard of a plan split over several load generators
    /// (`bench --shard K/N`): which, and the whole plan's levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip))]
    pub shard: Option<crate::workload::shard::ShardInfo>,
}

impl RunConfig {
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
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub tool_version: String,
    /// The browser's user agent (browser runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
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
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub transport: Option<transport::TransportInfo>,
    /// Operating system and architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub os: Option<String>,
    /// Logical CPUs of the client machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub cpus: Option<u32>,
    /// Wall-clock start of the run (RFC 3339), for comparing runs later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// CPU time the client process used, seconds (user + system).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub client_cpu_s: Option<f64>,
    /// Whether the endpoint is the built-in simulator.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
    /// The client's own event-loop lag during the run: how late a 10 ms timer fired.
    /// High values mean the client, not the server, was the bottleneck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub event_loop_lag_ms: Option<Summary>,
    /// This report was rebuilt from a raw file (`tokenscope report --raw`), not
    /// written by the run: what the raw file did not record is missing here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub rebuilt_from_raw: bool,
    /// This report merges shards' reports (`tokenscope merge`): how many, how,
    /// and how far apart they started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg(feature = "server-view")]
    pub merged: Option<merge::MergeInfo>,
}

/// Summaries of every per-request metric at one level (successful requests only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LevelMetrics {
    /// Time to first token.
    pub ttft_ms: Summary,
    /// Time per output token.
    pub tpot_ms: Summary,
    /// Inter-token latency per chunk (all gaps of all requests).
    pub itl_ms: Summary,
    /// Inter-token latency per token.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub itl_per_token_ms: Summary,
    /// End-to-end latency.
    pub e2e_ms: Summary,
    /// Time to response headers.
    pub time_to_headers_ms: Summary,
    /// Time to first body byte.
    pub time_to_first_byte_ms: Summary,
    /// Per-request decode rate, tokens/s.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub decode_rate_tok_per_s: Summary,
    /// Output tokens per request.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub output_tokens: Summary,
    /// User-perceived TTFT (browser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendered_ttft_ms: Option<Summary>,
    /// Render delay (browser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render_delay_ms: Option<Summary>,
    /// A reasoning model's time to its first answer token (requests that
    /// reasoned; TTFT counts the reasoning's first token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub time_to_first_answer_ms: Option<Summary>,
    /// Reasoning tokens per request (requests that reasoned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub reasoning_tokens: Option<Summary>,
    /// Each request's longest gap between tokens (stream smoothness; requests
    /// with at least two content events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub max_gap_ms: Option<Summary>,
    /// The browser's own send delay: from the page's send to its network stack
    /// beginning the request (Resource Timing's `requestStart`; a new
    /// connection's setup included) (browser, where exposed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub browser_send_ms: Option<Summary>,
    /// The browser's own delivery delay: from its network stack having the
    /// response's first bytes (Resource Timing's `responseStart`) to the page's
    /// script having the response (browser, where exposed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub browser_delivery_ms: Option<Summary>,
    /// Actual minus scheduled send (rate mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub client_lag_ms: Option<Summary>,
    /// llama.cpp's own generation time per token, when the server sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub server_tpot_ms: Option<Summary>,
    /// llama.cpp's own prompt evaluation time, when the server sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub server_prompt_ms: Option<Summary>,
    /// Waiting for a connection's setup (DNS, TCP, proxy tunnel, TLS), over the
    /// requests that waited for one (of every outcome that got a connection):
    /// those that opened one, and HTTP/2 streams sent while it was set up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_setup_ms: Option<Summary>,
}

/// A level's requests by the connection they went over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ConnectionCounts {
    /// Requests that opened a new connection.
    pub new: u64,
    /// Requests that went over a connection an earlier request had opened.
    pub reused: u64,
}

/// ITL of the gaps whose later event starts at output positions `from..=to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PositionBucket {
    /// First output position (1-based).
    pub from: u64,
    /// Last output position, `None` for open-ended.
    pub to: Option<u64>,
    /// ITL of the gaps in this range.
    pub itl_ms: Summary,
}

/// What the server's prefix cache served, as the server said per request.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct PromptCache {
    /// Requests whose server said how many prompt tokens came from its cache.
    pub requests: u64,
    /// Their prompt tokens (`usage.prompt_tokens`).
    pub prompt_tokens: u64,
    /// Of those, the cached ones.
    pub cached_tokens: u64,
}

impl PromptCache {
    /// The share of prompt tokens served from the cache (0 to 1).
    pub fn cached_fraction(&self) -> Option<f64> {
        (self.prompt_tokens > 0).then(|| self.cached_tokens as f64 / self.prompt_tokens as f64)
    }

    /// Add one request's counts.
    pub fn add(&mut self, prompt_tokens: u64, cached_tokens: u64) {
        self.requests += 1;
        self.prompt_tokens += prompt_tokens;
        self.cached_tokens += cached_tokens;
    }
}

/// One turn of a level's conversations: the requests that were that turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnReport {
    /// The turn, 1 the first.
    pub turn: u32,
    /// Requests sent as this turn.
    pub sent: u64,
    /// Of those, successful.
    pub ok: u64,
    /// Time to first token of the successful ones.
    pub ttft_ms: Summary,
    /// Their time per output token.
    pub tpot_ms: Summary,
    /// Their prompt tokens (`usage.prompt_tokens`: the whole history sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<Summary>,
    /// What the server's prefix cache served for this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache: Option<PromptCache>,
}

/// Stalls (ITL gaps above the threshold).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StallReport {
    /// The threshold, ms.
    pub threshold_ms: f64,
    /// Gaps above it.
    pub count: u64,
    /// Requests with at least one.
    pub requests: u64,
    /// The longest gap of all, ms.
    pub longest_ms: Option<f64>,
}

/// One round of a level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundReport {
    /// 1-based round number.
    pub round: u32,
    /// Requests sent in the round.
    pub sent: u64,
    /// Successful ones.
    pub ok: u64,
    /// Median TTFT.
    pub ttft_ms_p50: Option<f64>,
    /// Median TPOT.
    pub tpot_ms_p50: Option<f64>,
    /// Median E2E.
    pub e2e_ms_p50: Option<f64>,
    /// Output throughput of the round.
    pub output_tokens_per_s: Option<f64>,
    /// Metrics on which this round is more than 2x off the median of the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outlier_metrics: Vec<String>,
}

/// Round-to-round spread of one figure: `(max - min) / median`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Smallest round value.
    pub min: f64,
    /// Largest round value.
    pub max: f64,
    /// `(max - min) / median` of the round values.
    pub relative: f64,
}

/// Spread between rounds of the key figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RoundSpread {
    /// Of the rounds' TTFT medians.
    pub ttft_ms_p50: Option<Spread>,
    /// Of the rounds' TPOT medians.
    pub tpot_ms_p50: Option<Spread>,
    /// Of the rounds' E2E medians.
    pub e2e_ms_p50: Option<Spread>,
    /// Of the rounds' throughputs.
    pub output_tokens_per_s: Option<Spread>,
    /// Some round is more than 2x off the others.
    pub rounds_disagree: bool,
}

/// Whether a level met one SLO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloCheck {
    /// The SLO (`ttft_ms:p95<=500`).
    pub slo: String,
    /// The level's value of that percentile.
    pub value_ms: Option<f64>,
    /// Whether it is within the bound.
    pub met: bool,
}

/// A per-minute (or per-interval) snapshot of a long run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Interval start, seconds since the level began.
    pub t_s: f64,
    /// Requests finished in the interval.
    pub finished: u64,
    /// Successful ones.
    pub ok: u64,
    /// Median TTFT.
    pub ttft_ms_p50: Option<f64>,
    /// Median TPOT.
    pub tpot_ms_p50: Option<f64>,
    /// 95th percentile TPOT.
    pub tpot_ms_p95: Option<f64>,
    /// Output tokens/s in the interval.
    pub output_tokens_per_s: f64,
}

/// The trend of one metric across a long run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    /// Metric (`tpot_ms`, `ttft_ms`).
    pub metric: String,
    /// Fit of per-request values against their finish time (minutes).
    pub fit: LinearFit,
    /// Slope, ms per minute.
    pub slope_ms_per_min: f64,
    /// Half-width of the slope's 95% confidence interval, ms per minute.
    pub slope_ci95_ms_per_min: f64,
    /// Relative change over the run: `slope * duration / level at start`.
    pub change_over_run: f64,
    /// The slope differs from 0 at 95% and the change over the run is at least 10%.
    pub flagged: bool,
}

/// Results of one load level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelReport {
    /// Closed-loop concurrency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Open-loop rate, req/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// Requests sent in the measured window (warm-up excluded).
    pub sent: u64,
    /// Successful requests.
    pub ok: u64,
    /// Failed requests (every kind, see `error_kinds`).
    pub errors: u64,
    /// Requests that hit the client timeout.
    pub timeouts: u64,
    /// Failures by kind (`http_503`, `reset`, ...).
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub error_kinds: BTreeMap<String, u64>,
    /// Timeouts by phase (`headers`, `first_token`, `stream`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub timeout_phases: BTreeMap<String, u64>,
    /// Measured window: the sum over rounds of (last `t_done` - first `t_send`), seconds.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub window_s: f64,
    /// Output tokens of successful requests per second of window.
    pub output_tokens_per_s: f64,
    /// Successful requests per second of window.
    pub requests_per_s: f64,
    /// `errors / sent`.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub error_rate: f64,
    /// `timeouts / sent`.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub timeout_rate: f64,
    /// Requests/s that met every SLO (when SLOs were given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_per_s: Option<f64>,
    /// Fraction of sent requests that met every SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub goodput_fraction: Option<f64>,
    /// Per-SLO verdicts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub slo_checks: Vec<SloCheck>,
    /// Output tokens of successful requests.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub output_tokens_total: u64,
    /// Some successful request had no `usage`: its tokens were counted from events.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub output_tokens_estimated: bool,
    /// Fraction of content events that shared their read with another.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub shared_read_fraction: f64,
    /// Metric summaries.
    pub metrics: LevelMetrics,
    /// ITL by output position (does decode slow down on long outputs?).
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub itl_by_position: Vec<PositionBucket>,
    /// Stalls.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub stalls: StallReport,
    /// Rounds.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub rounds: Vec<RoundReport>,
    /// Spread between rounds.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub round_spread: RoundSpread,
    /// How first paints were measured (browser): method -> requests.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub paint_methods: BTreeMap<String, u64>,
    /// Successful requests whose TTFT was taken at the browser's network stack
    /// (`responseStart`: their first token came in the response's first bytes).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub ttft_at_network_stack: u64,
    /// Requests by the HTTP version of their answer (`http/1.1`, `h2`), where
    /// known. (Written by the page's main module, not read back: as `transport`.)
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub protocols: BTreeMap<String, u64>,
    /// Requests that opened a new connection and requests that reused one
    /// (where the client knew which).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub connections: Option<ConnectionCounts>,
    /// Quantile curves for CDFs and histograms: metric -> 101 values, the
    /// percentiles p0, p1, ..., p100 (`ttft_ms`, `itl_ms`, `e2e_ms`, `tpot_ms`,
    /// and in the browser `rendered_ttft_ms`, `render_delay_ms`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub quantiles: BTreeMap<String, Vec<f64>>,
    /// A shard's samples, metric by metric, as HdrHistograms (3 significant
    /// digits; [`crate::analyze::stats::HistogramData`]), so that `tokenscope
    /// merge` combines shards exactly within the histogram's precision without
    /// their raw files. Only shards' reports carry them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg(feature = "server-view")]
    pub histograms: BTreeMap<String, crate::analyze::stats::HistogramData>,
    /// Per-minute snapshots (long runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub snapshots: Vec<Snapshot>,
    /// Trends across the run (long runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub drift: Vec<Drift>,
    /// `usage.prompt_tokens` summed over every request sent in the level
    /// (whatever its outcome).
    #[serde(default)]
    #[cfg_attr(not(feature = "server-view"), serde(skip))]
    pub usage_prompt_tokens: u64,
    /// `usage.completion_tokens`, summed the same way.
    #[serde(default)]
    #[cfg_attr(not(feature = "server-view"), serde(skip))]
    pub usage_completion_tokens: u64,
    /// Requests whose prompt the run's tokenizer counted exactly, checked against
    /// their `usage.prompt_tokens` (the count plus the template's overhead).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[cfg_attr(not(feature = "server-view"), serde(skip))]
    pub prompt_tokens_checked: u64,
    /// Of those, the ones whose `usage.prompt_tokens` was something else.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[cfg_attr(not(feature = "server-view"), serde(skip))]
    pub prompt_tokens_differ: u64,
    /// Requests whose generated text the run's local tokenizer counted
    /// (`completion_tokens_counted`) beside a `usage.completion_tokens`.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[cfg_attr(not(feature = "server-view"), serde(skip))]
    pub output_tokens_checked: u64,
    /// Of those, the ones where the two differ (a model's text, tokenized again,
    /// need not be the tokens it generated; a server may count others).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[cfg_attr(not(feature = "server-view"), serde(skip))]
    pub output_tokens_differ: u64,
    /// Requests sent in the level without a `usage`.
    #[serde(default)]
    #[cfg_attr(not(feature = "server-view"), serde(skip))]
    pub requests_without_usage: u64,
    /// The prompt tokens of the level's requests whose server said how many it
    /// took from its prefix cache, and those cached tokens; absent: none said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip))]
    pub prompt_cache: Option<PromptCache>,
    /// Per turn of the level's conversations (`--conversation`), first turn
    /// first; empty outside conversations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(not(feature = "server-view"), serde(skip))]
    pub turns: Vec<TurnReport>,
    /// The level as the server's `/metrics` (and the GPU exporter's) saw it.
    /// Read and written with the feature `server-view`, which the page's main
    /// module goes without (it never scrapes; the code would weigh on its first
    /// load): there the field stays empty, as do the usage sums below.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip))]
    pub server: Option<LevelServer>,
}

impl LevelReport {
    /// The level's server view, if it was scraped.
    #[cfg(feature = "server-view")]
    pub fn server_view(&self) -> Option<&ServerLevel> {
        self.server.as_ref()
    }

    /// The level's load.
    pub fn load(&self) -> Load {
        match (self.concurrency, self.rate_per_s) {
            (Some(c), _) => Load::Concurrency(c),
            (None, Some(r)) => Load::Rate(r),
            (None, None) => Load::Concurrency(0),
        }
    }
}

/// The knee of the throughput-latency curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// Concurrency of the knee level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub concurrency: Option<u32>,
    /// Rate of the knee level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub rate_per_s: Option<f64>,
    /// Index into `levels`.
    pub level_index: usize,
    /// Latency metric used (`e2e_ms.p95`).
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub metric: String,
    /// `ln(latency ratio) / ln(throughput ratio)` on the segment after the knee;
    /// `None` when throughput did not grow at all there (infinite elasticity).
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub elasticity_after: Option<f64>,
    /// How it was found.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub method: String,
}

/// The most load that still meets every SLO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloCapacity {
    /// Concurrency of the highest-throughput level meeting every SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Rate of that level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// Index into `levels`.
    pub level_index: usize,
    /// Output throughput there.
    pub output_tokens_per_s: f64,
    /// Request throughput there.
    pub requests_per_s: f64,
    /// The SLOs checked.
    pub slos: Vec<String>,
}

/// Results across the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SweepReport {
    /// The knee, or null when latency never grew faster than throughput.
    pub knee: Option<Knee>,
    /// SLO capacity, or null (no SLOs, or no level met them).
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub slo_capacity: Option<SloCapacity>,
}

/// The whole client report.
///
/// The page's main module (core without `server-view`) reads back only what it
/// shows of a report it opens or has the report module rebuild: the model, the
/// SLOs, the levels' table and chart figures, the knee and the warnings. Every
/// other field, here and in the nested types, is skipped when it deserializes
/// (`skip_deserializing` in that build; left at its default) so that its reading
/// code stays off the page's first load: the page keeps such a report's text as
/// it was, for the Analysis, the comparison and the export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientReport {
    /// `tokenscope.client/1`.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub schema: String,
    /// Who measured.
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub source: Source,
    /// Everything needed to rerun.
    pub config: RunConfig,
    /// Where it ran.
    pub environment: Environment,
    /// One entry per load level, in the order run.
    pub levels: Vec<LevelReport>,
    /// Knee and SLO capacity.
    pub sweep: SweepReport,
    /// Warnings (client-bound, connection limits, ...).
    #[serde(default)]
    pub warnings: Vec<ReportWarning>,
    /// The run was stopped early (Ctrl-C); the levels hold what ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(not(feature = "server-view"), serde(skip_deserializing))]
    pub interrupted: bool,
    /// What scraping the server's and the GPU's `/metrics` gave, over the run
    /// (feature `server-view`, as `LevelReport::server`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(not(feature = "server-view"), serde(skip))]
    pub server: Option<RunServer>,
}

/// A report that could not be read.
#[derive(Debug, Error)]
pub enum ReportError {
    /// Not JSON, or not the shape of a report.
    #[error("not a tokenscope report: {0}")]
    Json(#[from] serde_json::Error),
    /// A different document, or a major version this build does not know.
    #[error("unsupported schema {found:?}: this tokenscope reads {expected:?} (major version 1)")]
    Schema {
        /// The schema field found.
        found: String,
        /// What is supported.
        expected: &'static str,
    },
}

/// Check a document's `schema` field: same name, a major version we know.
pub fn check_schema(found: &str, expected: &'static str) -> Result<(), ReportError> {
    let (name, version) = expected.split_once('/').expect("schema has a version");
    let ok = found
        .split_once('/')
        .is_some_and(|(n, v)| n == name && v.split('.').next() == version.split('.').next());
    if ok {
        Ok(())
    } else {
        Err(ReportError::Schema {
            found: found.to_owned(),
            expected,
        })
    }
}

impl ClientReport {
    /// The run's server side, if it was scraped.
    #[cfg(feature = "server-view")]
    pub fn server_run(&self) -> Option<&ServerRun> {
        self.server.as_ref()
    }

    /// The lowest-load level with successes (where batch-1 decode is measured).
    pub fn lowest_level(&self) -> Option<&LevelReport> {
        self.levels
            .iter()
            .filter(|l| l.ok > 0)
            .min_by(|a, b| a.load().value().total_cmp(&b.load().value()))
    }

    /// Read a report, refusing unknown schemas or major versions.
    pub fn from_json(text: &str) -> Result<Self, ReportError> {
        /// The schema alone (every other field skipped unread).
        #[derive(Deserialize)]
        struct Schema {
            #[serde(default)]
            schema: Option<String>,
        }
        // Read as the report itself, not through `serde_json::Value`: one set of
        // deserializing code in the page's wasm (the Value path was 2 KB
        // gzipped more there).
        let schema = match serde_json::from_str::<Schema>(text) {
            Ok(head) => head.schema,
            Err(e) if e.is_syntax() || e.is_eof() => return Err(e.into()),
            // JSON, but not an object with a text `schema`.
            Err(_) => None,
        };
        check_schema(schema.as_deref().unwrap_or("(none)"), CLIENT_SCHEMA)?;
        Ok(serde_json::from_str(text)?)
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_check() {
        assert!(check_schema("tokenscope.client/1", CLIENT_SCHEMA).is_ok());
        assert!(check_schema("tokenscope.client/1.2", CLIENT_SCHEMA).is_ok());
        let e = check_schema("tokenscope.client/2", CLIENT_SCHEMA).unwrap_err();
        assert!(e.to_string().contains("tokenscope.client/2"));
        assert!(check_schema("tokenscope.kernels/1", CLIENT_SCHEMA).is_err());
        assert!(ClientReport::from_json("{\"schema\": \"x/1\"}").is_err());
    }

    /// What the page's main module shows of a report it opens reads back whole,
    /// in either build (without `server-view` the rest is skipped).
    #[test]
    fn a_report_reads_back_what_the_page_shows() {
        use crate::testing::{client_report, level, record};
        let records: Vec<_> = (0..8)
            .map(|i| record(f64::from(i) * 10.0, 40.0, 5.0, 12))
            .collect();
        let mut report = client_report(
            Source::Browser,
            vec![
                level(Load::Concurrency(1), &records),
                level(Load::Concurrency(4), &records),
            ],
        );
        report.config.model = "the-model".into();
        report.config.slos = Slo::parse_list("ttft_ms:p95<=500").unwrap();
        report.environment.simulated = true;
        report.environment.protocol = Some("h2".into());
        report.environment.started_at = Some("2026-01-02T03:04:05Z".into());
        report.levels[1].goodput_per_s = Some(3.5);
        report.levels[1].paint_methods.insert("raf".into(), 8);
        report.levels[1].metrics.rendered_ttft_ms = Some(report.levels[1].metrics.ttft_ms);
        report.levels[1].metrics.connection_setup_ms = Some(report.levels[1].metrics.e2e_ms);
        report.sweep.knee = Some(Knee {
            concurrency: Some(4),
            rate_per_s: None,
            level_index: 1,
            metric: "e2e_ms.p95".into(),
            elasticity_after: None,
            method: "test".into(),
        });
        report
            .warnings
            .push(ReportWarning::new(WarningKind::ServerMetrics, "shown"));
        let back = ClientReport::from_json(&report.to_json()).unwrap();
        assert_eq!(back.config.model, report.config.model);
        assert_eq!(back.config.slos, report.config.slos);
        let env = |r: &ClientReport| {
            let e = &r.environment;
            (e.simulated, e.protocol.clone(), e.started_at.clone())
        };
        assert_eq!(env(&back), env(&report));
        assert_eq!(back.warnings, report.warnings);
        assert_eq!(
            back.sweep.knee.map(|k| k.level_index),
            report.sweep.knee.map(|k| k.level_index)
        );
        assert_eq!(back.levels.len(), report.levels.len());
        for (b, r) in back.levels.iter().zip(&report.levels) {
            let shown = |l: &LevelReport| {
                let m = &l.metrics;
                (
                    (
                        l.load(),
                        l.sent,
                        l.ok,
                        l.errors,
                        l.timeouts,
                        l.goodput_per_s,
                    ),
                    (l.output_tokens_per_s, l.requests_per_s),
                    (l.paint_methods.clone(), l.quantiles.clone()),
                    (m.ttft_ms, m.tpot_ms, m.itl_ms, m.e2e_ms),
                    (m.time_to_headers_ms, m.time_to_first_byte_ms),
                    (m.rendered_ttft_ms, m.render_delay_ms, m.connection_setup_ms),
                )
            };
            assert_eq!(shown(b), shown(r));
        }
    }
}
