//! The page's settings: read from the URL query (the automation contract, see
//! `docs/url.md`), edited in the form, validated into a [`RunPlan`]. The runner
//! reads only the plan: configuration flows one way, settings -> plan -> run.
//!
//! Pure Rust (no browser API), so it is unit-tested natively. The API key is never
//! part of the settings: it is held by the page in memory only, and a `key` or
//! `api_key` in the URL is ignored with a note.

mod choices;
mod gpu;
mod plan;
mod query;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
mod validate;

pub use choices::{
    MetricsSetting, NetMode, PaintFallback, PaintMode, TokenizerSetting, metrics_url,
};
pub use gpu::{GpuSettings, View};
pub use plan::{OpenLoop, PromptsPlan, RunPlan, ScrapePlan, ServerMetricsTarget};
pub use query::{form_decode, form_encode};
use serde::{Deserialize, Serialize};
pub use tokenscope_core::report::ReasoningDisplay;
use tokenscope_measure::metrics::DEFAULT_STALL_THRESHOLD_MS;
use tokenscope_measure::openai::Api;
use tokenscope_measure::parse::parse_base_url;
use tokenscope_sim::{SimConfig, faults_label};

/// Prompt lengths suggested in the form (any value works, typed or from the URL).
pub const INPUT_TIERS: [(&str, &str); 8] = [
    ("16", "a chat turn"),
    ("64", "64 tokens"),
    ("256", "a short prompt"),
    ("1024", "a document"),
    ("4096", "long context"),
    ("16384", "very long"),
    ("0.75max", "75% of the server's context window"),
    ("64,256,512", "input tiers: a report each"),
];

/// Most concurrent streams the page accepts per level.
pub const MAX_CONCURRENCY: u32 = 256;

/// Everything the form edits (never the API key); the page hands it to the run
/// module as JSON (`services::lazy_run`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Base URL (`http://host:port/v1`); empty: the built-in simulated endpoint.
    pub url: String,
    /// Endpoint kind.
    pub api: Api,
    /// Model; empty: the first one `/v1/models` lists.
    pub model: String,
    /// Concurrency levels, as typed (`1,4,16`).
    pub concurrency: String,
    /// Measured requests per level; `None`: `max(10, 2 x concurrency)` per round.
    pub requests: Option<u64>,
    /// Rounds per level.
    pub rounds: u32,
    /// Warm-up requests per level; `None`: one per concurrency slot.
    pub warmup: Option<u32>,
    /// `max_tokens`, as typed: one, or output tiers (`128,256`).
    pub max_tokens: String,
    /// Prompt length, as typed: tokens (`256`), a fraction of the context
    /// window (`0.75max`), or input tiers (`64,256,512`).
    pub input_tokens: String,
    /// Per-request timeout, seconds.
    pub timeout_s: f64,
    /// SLOs, as typed (`ttft_ms:p95<=500,...`).
    pub slo: String,
    /// Send `ignore_eos: true`.
    pub ignore_eos: bool,
    /// Ask for a running `usage` in every chunk (`continuous_usage`).
    pub continuous_usage: bool,
    /// Stall threshold, ms.
    pub stall_threshold_ms: f64,
    /// Seed of the prompts (and of the simulator).
    pub seed: u64,
    /// How the first paint is measured.
    pub paint: PaintMode,
    /// How the fallback reads the paint time.
    pub paint_fallback: PaintFallback,
    /// Where real endpoints are streamed from.
    pub net: NetMode,
    /// Send an `x-request-id` header per request (turn off for endpoints whose CORS
    /// policy does not allow it).
    pub request_ids: bool,
    /// Start at once (`autorun=1`).
    pub autorun: bool,
    /// The built-in simulator's parameters (`sim_*`): core's [`SimConfig`], whose
    /// defaults are also `tokenscope mock`'s. Its `faults` and `seed` come from
    /// [`Settings::sim_faults`] and [`Settings::seed`] when the plan is made.
    pub sim: SimConfig,
    /// The simulator's faults as typed (`sim_faults`: `http_503,reset`).
    pub sim_faults: String,
    /// The server's `/metrics` scraped during the run (`metrics`).
    pub metrics: MetricsSetting,
    /// A GPU exporter's `/metrics` (dcgm-exporter) scraped too (`gpu_metrics`).
    pub gpu_metrics: String,
    /// What the compute costs, as `bench --price` takes it (`price`; empty:
    /// no dollar figures).
    pub price: String,
    /// Seconds between scrapes within a level (`scrape_interval`), besides one at
    /// each level's start and end.
    pub scrape_interval_s: f64,
    /// A prompts file's URL (`prompts`; relative to the page, or any CORS-open
    /// URL): the CLI's `--prompts` formats, sent in turn instead of synthetic
    /// prompts; empty: synthetic.
    pub prompts: String,
    /// Use this many of its prompts, picked with a seeded shuffle (`sample`).
    pub prompts_sample: Option<u64>,
    /// What the stream view shows of a reasoning model's answer (`reasoning`).
    pub reasoning: ReasoningDisplay,
    /// Open-loop request rates, as typed (`rate=2,4`; req/s): instead of the
    /// concurrency levels when set.
    pub rate: String,
    /// The open loop's arrivals, as typed (`arrival`: poisson, constant,
    /// gamma:CV).
    pub arrival: String,
    /// A trace file's URL to replay (`trace`): one open-loop level, each request
    /// at its own time with its own lengths.
    pub trace: String,
    /// The trace's time compressed by this (`trace_speed`).
    pub trace_speed: f64,
    /// Every length of the trace multiplied by this (`trace_token_scale`).
    pub trace_token_scale: f64,
    /// How prompt tokens are counted (`tokenizer`).
    pub tokenizer: TokenizerSetting,
    /// Conversations, as typed (`conversation`: `turns=N,think=2s`); empty:
    /// single requests.
    pub conversation: String,
    /// Tokens of one system prompt every request begins with (`shared_prefix`).
    pub shared_prefix: Option<u32>,
    /// The server's context window, when it does not say (`context_window`).
    pub context_window: Option<u64>,
    /// Seconds of load rising linearly before each level's measured part,
    /// instead of its warm-up (`ramp`).
    pub ramp_s: Option<f64>,
}

/// The default `scrape_interval`, seconds (as `bench --scrape-interval`).
pub const DEFAULT_SCRAPE_INTERVAL_S: f64 = 1.0;
/// The shortest `scrape_interval`, seconds.
pub const MIN_SCRAPE_INTERVAL_S: f64 = 0.1;

impl Default for Settings {
    fn default() -> Self {
        let sim = SimConfig::default();
        Self {
            url: String::new(),
            api: Api::Chat,
            model: String::new(),
            concurrency: "1,4,16".into(),
            requests: None,
            rounds: 3,
            warmup: None,
            max_tokens: "32".into(),
            input_tokens: "256".into(),
            timeout_s: 60.0,
            slo: String::new(),
            ignore_eos: false,
            continuous_usage: false,
            stall_threshold_ms: DEFAULT_STALL_THRESHOLD_MS,
            seed: 1,
            paint: PaintMode::Auto,
            paint_fallback: PaintFallback::default(),
            net: NetMode::default(),
            request_ids: true,
            autorun: false,
            sim_faults: faults_label(&sim.faults),
            sim,
            metrics: MetricsSetting::Auto,
            gpu_metrics: String::new(),
            price: String::new(),
            scrape_interval_s: DEFAULT_SCRAPE_INTERVAL_S,
            prompts: String::new(),
            prompts_sample: None,
            reasoning: ReasoningDisplay::Shown,
            rate: String::new(),
            arrival: "poisson".into(),
            trace: String::new(),
            trace_speed: 1.0,
            trace_token_scale: 1.0,
            tokenizer: TokenizerSetting::Auto,
            conversation: String::new(),
            shared_prefix: None,
            context_window: None,
            ramp_s: None,
        }
    }
}

/// Parse a duration (`60`, `60s`, `500ms`, `2m`, `1h`: core's parser) in seconds.
pub fn parse_duration_s(s: &str) -> Option<f64> {
    tokenscope_measure::parse::parse_duration(s)
        .ok()
        .map(|d| d.as_secs_f64())
}

/// Parse a list of concurrencies (`1,4,16`: core's list parser), each at most
/// [`MAX_CONCURRENCY`].
pub fn parse_concurrency(s: &str) -> Result<Vec<u32>, String> {
    let levels =
        tokenscope_measure::parse::parse_u32_list(s).map_err(|e| format!("concurrency: {e}"))?;
    match levels.iter().find(|&&c| c > MAX_CONCURRENCY) {
        Some(c) => Err(format!(
            "concurrency: {c} is more than the page runs ({MAX_CONCURRENCY})"
        )),
        None => Ok(levels),
    }
}

/// The base URL as the form keeps it: core's normalized URL when it parses (a
/// pasted `/chat/completions` removed), else the text trimmed (validation then
/// says what is wrong with it).
pub fn normalize_url(url: &str) -> String {
    match parse_base_url(url) {
        Ok(b) => b.url,
        Err(_) => url.trim().to_owned(),
    }
}
