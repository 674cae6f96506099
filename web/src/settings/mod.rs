//! The page's settings: read from the URL query (the automation contract, see
//! `docs/url.md`), edited in the form, validated into a [`RunPlan`]. The runner
//! reads only the plan: configuration flows one way, settings -> plan -> run.
//!
//! Pure Rust (no browser API), so it is unit-tested natively. The API key is never
//! part of the settings: it is held by the page in memory only, and a `key` or
//! `api_key` in the URL is ignored with a note.

mod gpu;
mod query;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;

pub use gpu::{GpuSettings, View};
pub use query::{form_decode, form_encode};
use tokenscope_core::analyze::slo::Slo;
use tokenscope_core::measure::metrics::DEFAULT_STALL_THRESHOLD_MS;
use tokenscope_core::measure::openai::Api;
use tokenscope_core::parse::{BaseUrl, parse_base_url};
pub use tokenscope_core::report::ReasoningDisplay;
use tokenscope_core::report::{Arrival, Load, LoadMode, RunConfig};
use tokenscope_core::sim::{SimConfig, faults_label, parse_faults};
use tokenscope_core::workload::conversation::Conversation;
use tokenscope_core::workload::plan;
use tokenscope_core::workload::tokens::{InputLength, Tier};

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

/// How the first paint is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PaintMode {
    /// Element Timing where the browser has it, else the animation-frame fallback.
    #[default]
    Auto,
    /// Always the animation-frame fallback (to compare the two on one browser).
    Raf,
}

impl PaintMode {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            PaintMode::Auto => "auto",
            PaintMode::Raf => "raf",
        }
    }
}

/// Where the page streams real endpoints from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NetMode {
    /// `fetch` in a dedicated worker: reads stamped off the main thread (default).
    #[default]
    Worker,
    /// `fetch` on the main thread (to compare; the page's own frames then delay
    /// the stamps of concurrent streams).
    Main,
}

impl NetMode {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            NetMode::Worker => "worker",
            NetMode::Main => "main",
        }
    }
}

/// How the animation-frame fallback reads the paint time (diagnostic setting
/// `paint_fallback`; the default was chosen by comparing each with Element Timing
/// in Chromium, see `docs/web.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PaintFallback {
    /// `performance.now()` inside the first rAF callback after the update (before
    /// that frame's rendering: a lower bound).
    Raf,
    /// `performance.now()` in a task posted from that rAF callback: after the
    /// frame's style, layout and paint.
    #[default]
    RafTask,
    /// `performance.now()` inside the second rAF callback (a frame later: an upper bound).
    DoubleRaf,
}

impl PaintFallback {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            PaintFallback::Raf => "raf",
            PaintFallback::RafTask => "raf_task",
            PaintFallback::DoubleRaf => "double_raf",
        }
    }

    /// Parse a query value.
    pub fn parse(s: &str) -> Option<Self> {
        [
            PaintFallback::Raf,
            PaintFallback::RafTask,
            PaintFallback::DoubleRaf,
        ]
        .into_iter()
        .find(|f| f.as_str() == s.trim())
    }
}

/// How prompts' tokens are counted (`tokenizer`), as `bench --tokenizer`
/// (which also takes a `tokenizer.json`; the page uses the server's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenizerSetting {
    /// The endpoint's `/tokenize` when it has one, else approximate.
    #[default]
    Auto,
    /// The endpoint's `/tokenize`, or the run does not start.
    Server,
    /// One token per word and punctuation mark.
    Approx,
}

impl TokenizerSetting {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenizerSetting::Auto => "auto",
            TokenizerSetting::Server => "server",
            TokenizerSetting::Approx => "approx",
        }
    }

    /// Parse a query value.
    pub fn parse(s: &str) -> Option<Self> {
        [
            TokenizerSetting::Auto,
            TokenizerSetting::Server,
            TokenizerSetting::Approx,
        ]
        .into_iter()
        .find(|t| t.as_str() == s.trim())
    }
}

/// Which `/metrics` the page scrapes during a run (`metrics`: the server view).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum MetricsSetting {
    /// The endpoint's origin + `/metrics` (the simulator's own with no endpoint),
    /// dropped quietly when it does not answer with metrics.
    #[default]
    Auto,
    /// No scraping.
    Off,
    /// This URL, scraped whatever it answers.
    Url(String),
}

impl MetricsSetting {
    /// Parse a query value: `auto`, `none` (`off`), or an `http(s)` URL.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value.trim() {
            "" | "auto" => Ok(MetricsSetting::Auto),
            "none" | "off" | "0" => Ok(MetricsSetting::Off),
            url => Ok(MetricsSetting::Url(metrics_url(url)?)),
        }
    }

    /// The query value.
    pub fn as_query(&self) -> String {
        match self {
            MetricsSetting::Auto => "auto".into(),
            MetricsSetting::Off => "none".into(),
            MetricsSetting::Url(u) => u.clone(),
        }
    }
}

/// A metrics URL as typed: `http(s)://host[:port]/path`, no credentials (the
/// key goes in the key field).
pub fn metrics_url(url: &str) -> Result<String, String> {
    let url = url.trim();
    let shown = tokenscope_core::parse::redact_url(url);
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "{shown:?} is not a URL: expected http://HOST:PORT/metrics"
        ));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!("{shown:?}: the scheme must be http or https"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(format!(
            "{shown:?}: credentials in the URL are not allowed; use the API key field"
        ));
    }
    if authority.is_empty() {
        return Err(format!("{shown:?} has no host"));
    }
    Ok(url.to_owned())
}

/// Everything the form edits (never the API key).
#[derive(Debug, Clone, PartialEq)]
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

/// A file's URL as typed: a path on the page's own site, or an `http(s)` URL
/// without credentials. `what` names the field in the error.
fn site_or_http_url(url: &str, what: &str) -> Result<String, String> {
    let url = url.trim();
    if url.contains("://") {
        metrics_url(url).map_err(|e| format!("{what} {e}"))?;
    } else if url.contains(':') {
        return Err(format!(
            "{what} {:?}: expected a path on this site or an http(s) URL",
            tokenscope_core::parse::redact_url(url)
        ));
    }
    Ok(url.to_owned())
}

/// Parse a duration (`60`, `60s`, `500ms`, `2m`, `1h`: core's parser) in seconds.
pub fn parse_duration_s(s: &str) -> Option<f64> {
    tokenscope_core::parse::parse_duration(s)
        .ok()
        .map(|d| d.as_secs_f64())
}

/// Parse a list of concurrencies (`1,4,16`: core's list parser), each at most
/// [`MAX_CONCURRENCY`].
pub fn parse_concurrency(s: &str) -> Result<Vec<u32>, String> {
    let levels =
        tokenscope_core::parse::parse_u32_list(s).map_err(|e| format!("concurrency: {e}"))?;
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

impl Settings {
    /// Whether the run uses the built-in simulated endpoint.
    pub fn is_simulated(&self) -> bool {
        self.url.trim().is_empty()
    }

    /// The simulator's configuration.
    fn sim_config(&self) -> Result<SimConfig, String> {
        let cfg = SimConfig {
            faults: parse_faults(&self.sim_faults).map_err(|e| format!("sim_faults: {e}"))?,
            seed: self.seed,
            ..self.sim.clone()
        };
        cfg.validate().map_err(|e| format!("sim_{e}"))?;
        Ok(cfg)
    }

    /// The levels and how they load: concurrencies, rates, or a trace.
    fn loads(&self) -> Result<(Vec<Load>, Option<OpenLoop>), String> {
        if !self.trace.trim().is_empty() {
            let url = site_or_http_url(&self.trace, "trace file URL")?;
            for (name, v) in [
                ("trace_speed", self.trace_speed),
                ("trace_token_scale", self.trace_token_scale),
            ] {
                if !(v.is_finite() && v > 0.0) {
                    return Err(format!("{name}: {v} must be more than 0"));
                }
            }
            // The level's rate is the trace's, known once it is read.
            return Ok((
                vec![Load::Rate(1.0)],
                Some(OpenLoop::Trace {
                    url,
                    speed: self.trace_speed,
                    token_scale: self.trace_token_scale,
                }),
            ));
        }
        if !self.rate.trim().is_empty() {
            let rates = tokenscope_core::parse::parse_f64_list(&self.rate)
                .map_err(|e| format!("rate: {e}"))?;
            let (arrival, cv) = tokenscope_core::parse::parse_arrival(&self.arrival)
                .map_err(|e| format!("arrival: {e}"))?;
            return Ok((
                rates.into_iter().map(Load::Rate).collect(),
                Some(OpenLoop::Rate { arrival, cv }),
            ));
        }
        let levels = parse_concurrency(&self.concurrency)?;
        Ok((levels.into_iter().map(Load::Concurrency).collect(), None))
    }

    /// Check everything and build the plan.
    pub fn validate(&self) -> Result<RunPlan, String> {
        let (loads, open_loop) = self.loads()?;
        let slos = Slo::parse_list(&self.slo).map_err(|e| e.to_string())?;
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            return Err("timeout: must be more than 0 seconds".into());
        }
        if !(self.stall_threshold_ms.is_finite() && self.stall_threshold_ms > 0.0) {
            return Err("stall threshold: must be more than 0 ms".into());
        }
        let base = if self.is_simulated() {
            None
        } else {
            let b = parse_base_url(&self.url).map_err(|e| format!("endpoint URL {e}"))?;
            if b.has_credentials {
                return Err(
                    "endpoint URL: credentials in the URL are not allowed; use the API key field"
                        .into(),
                );
            }
            Some(b)
        };
        let base_origin = base.as_ref().map(BaseUrl::origin);
        let conversation = self.conversation_plan(open_loop.is_some())?;
        let tiers = self.tiers(open_loop.as_ref())?;
        Ok(RunPlan {
            base,
            api: self.api,
            model: Some(self.model.trim().to_owned()).filter(|m| !m.is_empty()),
            loads,
            requests: self.requests,
            rounds: self.rounds.max(1),
            warmup: self.warmup,
            max_tokens: tiers[0].max_tokens,
            input_tokens: tiers[0].input.tokens().unwrap_or(1),
            ignore_eos: self.ignore_eos,
            timeout_ms: self.timeout_s * 1000.0,
            slos,
            stall_threshold_ms: self.stall_threshold_ms,
            seed: self.seed,
            paint: self.paint,
            paint_fallback: self.paint_fallback,
            net: self.net,
            request_ids: self.request_ids,
            sim: self.sim_config()?,
            scrape: self.scrape_plan(base_origin.as_deref())?,
            prompts: self.prompts_plan()?,
            reasoning: self.reasoning,
            open_loop,
            tokenizer: self.tokenizer,
            conversation,
            shared_prefix: self.shared_prefix,
            input_of_context: match tiers[0].input {
                InputLength::OfContext(f) => Some(f),
                InputLength::Tokens(_) => None,
            },
            context_window: self.context_window,
            ramp_ms: self.ramp_s.map(|s| s * 1000.0),
            tiers,
        })
    }

    /// The input and output tiers (`input_tokens`, `max_tokens` lists), as
    /// `bench` makes them; several with a trace (whose requests carry their own
    /// lengths) is an error.
    fn tiers(&self, open_loop: Option<&OpenLoop>) -> Result<Vec<Tier>, String> {
        let inputs = InputLength::parse_list(&self.input_tokens)
            .map_err(|e| format!("input_tokens: {e}"))?;
        let outputs = tokenscope_core::parse::parse_u32_list(&self.max_tokens)
            .map_err(|e| format!("max_tokens: {e}"))?;
        if outputs.contains(&0) {
            return Err("max_tokens: 0 must be at least 1".into());
        }
        if inputs.len() > 1
            && !self.prompts.trim().is_empty()
            && let Some(f) = inputs.iter().find(|i| i.tokens().is_none())
        {
            return Err(format!(
                "input_tokens: {} with a prompts file: the tiers that pick the file's prompts are numbers of tokens",
                f.label()
            ));
        }
        let tiers = Tier::grid(&inputs, &outputs);
        if tiers.len() > 1 && matches!(open_loop, Some(OpenLoop::Trace { .. })) {
            return Err("trace: a trace gives every request its own lengths; one input_tokens and one max_tokens at most".into());
        }
        Ok(tiers)
    }

    /// Conversations, when asked: chat, closed loop (as `bench --conversation`).
    fn conversation_plan(&self, open_loop: bool) -> Result<Option<Conversation>, String> {
        if self.conversation.trim().is_empty() {
            return Ok(None);
        }
        let c =
            Conversation::parse(&self.conversation).map_err(|e| format!("conversation: {e}"))?;
        if self.api == Api::Completions {
            return Err("conversation: a conversation's history is a list of chat messages: use the chat API".into());
        }
        if open_loop {
            return Err("conversation: sessions are the concurrency unit (closed loop): clear the rates and the trace".into());
        }
        Ok(Some(c))
    }

    /// The prompts file, when one is set: a relative URL or an `http(s)` one
    /// without credentials.
    fn prompts_plan(&self) -> Result<Option<PromptsPlan>, String> {
        if self.prompts.trim().is_empty() {
            return Ok(None);
        }
        let url = site_or_http_url(&self.prompts, "prompts file URL")?;
        if self.prompts_sample == Some(0) {
            return Err("sample: 0 prompts; give at least 1".into());
        }
        Ok(Some(PromptsPlan {
            url,
            sample: self.prompts_sample,
        }))
    }

    /// What to scrape: the endpoint's origin + `/metrics` by default (the
    /// simulator's own exposition with no endpoint).
    fn scrape_plan(&self, origin: Option<&str>) -> Result<ScrapePlan, String> {
        if !(self.scrape_interval_s.is_finite() && self.scrape_interval_s >= MIN_SCRAPE_INTERVAL_S)
        {
            return Err(format!(
                "scrape interval: at least {MIN_SCRAPE_INTERVAL_S} s"
            ));
        }
        let server = match (&self.metrics, origin) {
            (MetricsSetting::Off, _) => ServerMetricsTarget::Off,
            (MetricsSetting::Url(u), _) => {
                ServerMetricsTarget::Url(metrics_url(u).map_err(|e| format!("metrics URL {e}"))?)
            }
            (MetricsSetting::Auto, None) => ServerMetricsTarget::Simulator,
            (MetricsSetting::Auto, Some(o)) => ServerMetricsTarget::Auto(format!("{o}/metrics")),
        };
        let gpu = match self.gpu_metrics.trim() {
            "" => None,
            u => Some(metrics_url(u).map_err(|e| format!("GPU metrics URL {e}"))?),
        };
        Ok(ScrapePlan {
            server,
            gpu,
            interval_ms: self.scrape_interval_s * 1000.0,
        })
    }
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
                .map(|p| tokenscope_core::parse::redact_url(&p.url)),
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
            sample_cap: Some(tokenscope_core::analyze::stats::DEFAULT_SAMPLE_CAP as u64),
            server_metrics_url: match &self.scrape.server {
                ServerMetricsTarget::Off => None,
                ServerMetricsTarget::Simulator => Some("builtin:simulated/metrics".into()),
                ServerMetricsTarget::Auto(u) | ServerMetricsTarget::Url(u) => {
                    Some(tokenscope_core::parse::redact_url(u))
                }
            },
            distinct_prompts: None,
            gpu_metrics_url: self
                .scrape
                .gpu
                .as_deref()
                .map(tokenscope_core::parse::redact_url),
            scrape_interval_s: self
                .scrape
                .is_on()
                .then_some(self.scrape.interval_ms / 1000.0),
            trace: None,
            tokens: None,
        }
    }
}
