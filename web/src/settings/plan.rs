//! The validated run ([`RunPlan`]): everything the runner reads, and nothing
//! else; what it loads the endpoint with, what it sends and what it scrapes; and
//! the report's record of it ([`RunPlan::run_config`]).

use tokenscope_core::analyze::slo::Slo;
use tokenscope_core::report::{Arrival, Load, LoadMode, ReasoningDisplay, RunConfig};
use tokenscope_measure::openai::Api;
use tokenscope_measure::parse::BaseUrl;
use tokenscope_sim::SimConfig;
use tokenscope_workload::conversation::Conversation;
use tokenscope_workload::plan;
use tokenscope_workload::tokens::{InputLength, Tier};

use super::choices::{NetMode, PaintFallback, PaintMode, TokenizerSetting};

/// A validated run: everything the runner reads, and nothing else.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPlan {
    /// The endpoint: `None` for the built-in simulator.
    pub base: Option<BaseUrl>,
    /// Endpoint kind.
    pub api: Api,
    /// The model; `None`: the first one the endpoint lists (the simulator's name).
    pub model: Option<String>,
    /// The levels, in order.
    pub loads: Vec<Load>,
    /// Measured requests per level (`None`: the default per round).
    pub requests: Option<u64>,
    /// Rounds per level.
    pub rounds: u32,
    /// Warm-up requests per level (`None`: one per concurrency slot).
    pub warmup: Option<u32>,
    /// This run's `max_tokens` (its tier's).
    pub max_tokens: u32,
    /// This run's prompt length, tokens (its tier's; a fraction of the context
    /// window is resolved before the run: `input_of_context`).
    pub input_tokens: u32,
    /// The input x output tiers, inputs outer (one: no tiers); each runs the
    /// whole sweep and makes its own report ([`RunPlan::for_tier`]).
    pub tiers: Vec<Tier>,
    /// Send `ignore_eos: true`.
    pub ignore_eos: bool,
    /// Ask for a running `usage` in every chunk.
    pub continuous_usage: bool,
    /// Timeout, ms.
    pub timeout_ms: f64,
    /// SLOs.
    pub slos: Vec<Slo>,
    /// Stall threshold, ms.
    pub stall_threshold_ms: f64,
    /// Seed of the prompts.
    pub seed: u64,
    /// How the first paint is measured.
    pub paint: PaintMode,
    /// How the fallback reads the paint time.
    pub paint_fallback: PaintFallback,
    /// Where real endpoints are streamed from.
    pub net: NetMode,
    /// Send an `x-request-id` per request.
    pub request_ids: bool,
    /// The simulator's configuration (used when `base` is `None`).
    pub sim: SimConfig,
    /// What to scrape during the run.
    pub scrape: ScrapePlan,
    /// What the compute costs (`price`).
    pub price: Option<tokenscope_core::model::cost::Price>,
    /// A prompts file to send instead of synthetic prompts.
    pub prompts: Option<PromptsPlan>,
    /// What the stream view shows of reasoning.
    pub reasoning: ReasoningDisplay,
    /// How the levels load the endpoint: closed loop (the loads are
    /// concurrencies), open loop at rates, or a trace replayed.
    pub open_loop: Option<OpenLoop>,
    /// How prompt tokens are counted.
    pub tokenizer: TokenizerSetting,
    /// Sessions of turns instead of single requests (closed loop, chat).
    pub conversation: Option<Conversation>,
    /// Tokens of the system prompt every request begins with.
    pub shared_prefix: Option<u32>,
    /// `input_tokens` as a fraction of the context window, resolved before the run.
    pub input_of_context: Option<f64>,
    /// The context window when the server does not say.
    pub context_window: Option<u64>,
    /// A ramp before each level's measured part, ms (instead of the warm-up).
    pub ramp_ms: Option<f64>,
}

/// Sends on a schedule whatever the responses, latency from the scheduled time.
#[derive(Debug, Clone, PartialEq)]
pub enum OpenLoop {
    /// At each level's rate (the loads), gaps drawn from `arrival`.
    Rate {
        /// The gaps' distribution.
        arrival: Arrival,
        /// Their coefficient of variation (gamma).
        cv: Option<f64>,
    },
    /// A trace file replayed: one level (its mean rate, known once read).
    Trace {
        /// Its URL.
        url: String,
        /// Time compressed by this.
        speed: f64,
        /// Lengths multiplied by this.
        token_scale: f64,
    },
}

/// A prompts file to fetch and send in turn.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptsPlan {
    /// Its URL, as given (relative to the page or absolute).
    pub url: String,
    /// Use this many of its prompts (seeded shuffle).
    pub sample: Option<u64>,
}

/// Whose `/metrics` the run scrapes, and how often.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapePlan {
    /// The server's.
    pub server: ServerMetricsTarget,
    /// A GPU exporter's URL.
    pub gpu: Option<String>,
    /// Between scrapes within a level, ms.
    pub interval_ms: f64,
}

impl ScrapePlan {
    /// Whether anything is scraped.
    pub fn is_on(&self) -> bool {
        self.server != ServerMetricsTarget::Off || self.gpu.is_some()
    }
}

/// Where the server's metrics come from.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerMetricsTarget {
    /// Not scraped.
    Off,
    /// The built-in simulator's own exposition.
    Simulator,
    /// The endpoint's origin + `/metrics`, dropped quietly when it has none.
    Auto(String),
    /// This URL.
    Url(String),
}

impl RunPlan {
    /// The plan of tier `k`: its prompt length and `max_tokens`.
    pub fn for_tier(&self, k: usize) -> RunPlan {
        let mut p = self.clone();
        if let Some(t) = self.tiers.get(k) {
            p.max_tokens = t.max_tokens;
            match t.input {
                InputLength::Tokens(n) => {
                    p.input_tokens = n.max(4);
                    p.input_of_context = None;
                }
                InputLength::OfContext(f) => p.input_of_context = Some(f),
            }
        }
        p
    }

    /// Whether the API key goes with a request to `url`: only on the endpoint's
    /// own origin (a metrics URL elsewhere gets no key).
    pub fn sends_key_to(&self, url: &str) -> bool {
        self.base
            .as_ref()
            .is_some_and(|b| url.starts_with(&format!("{}/", b.origin())))
    }

    /// Warm-up requests before `load` (the user's count, or one per slot; none
    /// with a ramp, which replaces it).
    pub fn warmup_for(&self, load: Load) -> u32 {
        if self.ramp_ms.is_some() {
            return 0;
        }
        self.warmup.unwrap_or_else(|| plan::default_warmup(load))
    }

    /// The report's record of this run (never the key), for `model`.
    pub fn run_config(&self, model: &str) -> RunConfig {
        RunConfig {
            url: self
                .base
                .as_ref()
                .map_or_else(|| "builtin:simulated".into(), BaseUrl::redacted),
            api: self.api,
            model: model.to_owned(),
            mode: match self.open_loop {
                Some(_) => LoadMode::Rate,
                None => LoadMode::Concurrency,
            },
            levels: self.loads.iter().map(Load::value).collect(),
            arrival: match &self.open_loop {
                Some(OpenLoop::Rate { arrival, .. }) => Some(*arrival),
                Some(OpenLoop::Trace { .. }) => Some(Arrival::Trace),
                None => None,
            },
            requests_per_level: self.requests,
            duration_per_level_s: None,
            rounds: self.rounds,
            // The default is per level; the report records the first level's.
            warmup_requests: self.loads.first().map_or(0, |l| self.warmup_for(*l)),
            input_tokens: (self.prompts.is_none()
                && !matches!(self.open_loop, Some(OpenLoop::Trace { .. })))
            .then_some(self.input_tokens),
            label: None,
            prompts_hash: None,
            prompts_file: self
                .prompts
                .as_ref()
                .map(|p| tokenscope_measure::parse::redact_url(&p.url)),
            max_tokens: self.max_tokens,
            ignore_eos: self.ignore_eos,
            min_tokens: None,
            context_window: None,
            arrival_cv: match &self.open_loop {
                Some(OpenLoop::Rate { cv, .. }) => *cv,
                _ => None,
            },
            ramp_s: self.ramp_ms.map(|ms| ms / 1000.0),
            shared_prefix_tokens: self.shared_prefix,
            conversation: self.conversation,
            shard: None,
            reasoning_display: Some(self.reasoning),
            timeout_s: self.timeout_ms / 1000.0,
            slos: self.slos.clone(),
            stall_threshold_ms: self.stall_threshold_ms,
            seed: self.seed,
            snapshot_interval_s: None,
            sample_cap: Some(tokenscope_stats::stats::DEFAULT_SAMPLE_CAP as u64),
            server_metrics_url: match &self.scrape.server {
                ServerMetricsTarget::Off => None,
                ServerMetricsTarget::Simulator => Some("builtin:simulated/metrics".into()),
                ServerMetricsTarget::Auto(u) | ServerMetricsTarget::Url(u) => {
                    Some(tokenscope_measure::parse::redact_url(u))
                }
            },
            distinct_prompts: None,
            gpu_metrics_url: self
                .scrape
                .gpu
                .as_deref()
                .map(tokenscope_measure::parse::redact_url),
            scrape_interval_s: self
                .scrape
                .is_on()
                .then_some(self.scrape.interval_ms / 1000.0),
            trace: None,
            tokens: None,
            price: self.price,
            continuous_usage: self.continuous_usage,
            answer: None,
            slo_classes: Vec::new(),
            images: Vec::new(),
            image_format: None,
        }
    }
}
