//! The validated benchmark configuration (what `tokenscope bench`'s flags become)
//! and the report's record of it.

use std::path::PathBuf;
use std::time::Duration;

use tokenscope_core::analyze::slo::Slo;
use tokenscope_core::report::{Arrival, Load, LoadMode, RunConfig, TraceInfo};
use tokenscope_measure::openai::Api;
use tokenscope_workload::dataset::DatasetPrompt;
use tokenscope_workload::plan;
use tokenscope_workload::shard::{Shard, ShardError, ShardInfo};
use tokenscope_workload::trace::Trace;

use super::scrape::ServerMetrics;
use crate::util::Secret;

/// How load is applied.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadPlan {
    /// Closed loop at each concurrency.
    Concurrency(Vec<u32>),
    /// Open loop at each rate (req/s).
    Rate {
        /// Rates, req/s.
        rates: Vec<f64>,
        /// Inter-arrival distribution.
        arrival: Arrival,
        /// The gaps' coefficient of variation (`Arrival::Gamma`).
        cv: Option<f64>,
    },
    /// A trace replayed as recorded: one open-loop level at the trace's mean
    /// rate, each request at its own time with its own lengths.
    Trace {
        /// The trace as replayed (sped up and scaled).
        trace: std::sync::Arc<Trace>,
        /// The report's record of it.
        info: TraceInfo,
    },
}

impl LoadPlan {
    /// The levels, in order.
    pub fn loads(&self) -> Vec<Load> {
        match self {
            LoadPlan::Concurrency(cs) => cs.iter().map(|&c| Load::Concurrency(c)).collect(),
            LoadPlan::Rate { rates, .. } => rates.iter().map(|&r| Load::Rate(r)).collect(),
            LoadPlan::Trace { trace, .. } => vec![Load::Rate(trace.mean_rate_per_s())],
        }
    }
}

/// How much each level measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PerLevel {
    /// This many measured requests, split over the rounds.
    Requests(u64),
    /// This long, split over the rounds.
    Duration(Duration),
    /// The default: per round `max(10, 2 x concurrency)` requests (rate: 10 s worth, at least 10).
    Auto,
}

pub use tokenscope_workload::tokens::InputLength;

/// Where prompts come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompts {
    /// Generated prompts of this length.
    Synthetic {
        /// Tokens, or a fraction of the context window.
        tokens: InputLength,
    },
    /// Prompts read from a JSONL file, used in turn.
    File {
        /// The file, for the report.
        path: PathBuf,
        /// The prompts.
        prompts: Vec<DatasetPrompt>,
    },
}

/// A validated benchmark configuration.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Base URL (`.../v1`).
    pub base_url: reqwest::Url,
    /// Endpoint kind.
    pub api: Api,
    /// Model (None: the first from `GET /models`).
    pub model: Option<String>,
    /// API key.
    pub api_key: Option<Secret>,
    /// How to reach the endpoint: TLS, HTTP version, proxy, extra headers.
    pub http: crate::http_client::HttpOptions,
    /// Load.
    pub load: LoadPlan,
    /// Requests or duration per level.
    pub per_level: PerLevel,
    /// Rounds per level.
    pub rounds: u32,
    /// Warm-up requests per level (None: one per concurrency slot, or 1 s of rate).
    pub warmup: Option<u32>,
    /// Prompts.
    pub prompts: Prompts,
    /// `max_tokens`.
    pub max_tokens: u32,
    /// Send `ignore_eos`.
    pub ignore_eos: bool,
    /// Send `min_tokens`.
    pub min_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// SLOs.
    pub slos: Vec<Slo>,
    /// Classes of requests held to their own SLOs (`--slo-class`).
    pub slo_classes: Vec<tokenscope_core::analyze::slo::SloClass>,
    /// The images each request carries (`--images`), each spec in turn;
    /// empty: none.
    pub images: Vec<tokenscope_workload::images::ImageSpec>,
    /// How they are encoded (`--image-format`).
    pub image_format: tokenscope_workload::images::ImageFormat,
    /// Stall threshold, ms.
    pub stall_threshold_ms: f64,
    /// Seed for prompts and arrivals.
    pub seed: u64,
    /// What this run is (`--label v1.2`), recorded in the report.
    pub label: Option<String>,
    /// Snapshot interval for long runs.
    pub snapshot_interval: Option<Duration>,
    /// Send a pre-flight request before the run.
    pub preflight: bool,
    /// How long Ctrl-C waits for in-flight requests.
    pub grace: Duration,
    /// Raw JSONL output.
    pub raw: Option<PathBuf>,
    /// Show a progress bar.
    pub progress: bool,
    /// Exact samples kept per metric and level before switching to a histogram.
    pub sample_cap: usize,
    /// The server's `/metrics` to scrape.
    pub server_metrics: ServerMetrics,
    /// The GPU exporter to scrape.
    pub gpu_metrics: Option<reqwest::Url>,
    /// Ask for a running `usage` in every chunk (`--continuous-usage`).
    pub continuous_usage: bool,
    /// The tools offered and the JSON schema asked of every answer, with
    /// their validators (`--tools`, `--tool-choice`, `--json-schema`).
    pub answer: Option<std::sync::Arc<crate::answer::AnswerContract>>,
    /// What the compute costs (`--price`).
    pub price: Option<tokenscope_core::model::cost::Price>,
    /// Time between scrapes within a level.
    pub scrape_interval: Duration,
    /// Send the API key to metrics URLs on another origin than the endpoint's.
    pub metrics_send_key: bool,
    /// How prompt tokens are counted (`--tokenizer`).
    pub tokenizer: TokenizerChoice,
    /// How they were counted, once the run has set its tokenizer up.
    pub tokens: Option<tokenscope_core::report::TokenCounting>,
    /// The server's context window: given (`--context-window`), or read from
    /// the server for `--input-tokens 0.75max`.
    pub context_window: Option<u64>,
    /// A linear ramp before each level instead of its warm-up (`--ramp`).
    pub ramp: Option<Duration>,
    /// One system prompt of this many tokens before every request's prompt
    /// (`--shared-prefix`).
    pub shared_prefix: Option<u32>,
    /// Sessions of several turns, each sending the history so far
    /// (`--conversation`; closed loop: sessions are the concurrency unit).
    pub conversation: Option<tokenscope_workload::conversation::Conversation>,
    /// This run is one shard of a plan split over several load generators
    /// (`--shard K/N`): the load, counts, prompts and trace here are already
    /// its parts.
    pub shard: Option<ShardPlan>,
    /// Start the first level at this wall-clock time (`--start-at`,
    /// `--start-after`): ms since the Unix epoch, and as given.
    pub start_at: Option<(f64, String)>,
    /// Serve live Prometheus metrics here while the run goes on (`--metrics-listen`).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// After the run, keep serving them until scraped once more, at most this long.
    pub metrics_linger: Duration,
    /// Push the same series to this Prometheus remote-write URL, every
    /// interval (`--prometheus-remote-write`).
    pub remote_write: Option<(reqwest::Url, Duration)>,
    /// Send only the prompts file's prompts within 25% of this many tokens (an
    /// input tier of `--input-tokens` with `--prompts`:
    /// [`tokenscope_workload::tokens::pick_tier`]).
    pub prompt_tier: Option<u32>,
}

/// A shard's part of a plan ([`tokenscope_workload::shard`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ShardPlan {
    /// Which shard.
    pub shard: Shard,
    /// The whole plan's levels (concurrencies or req/s).
    pub plan_levels: Vec<f64>,
    /// The whole plan's measured requests per level, when a count was given.
    pub plan_requests: Option<u64>,
    /// Wall-clock time of the run clock's zero, ms since the Unix epoch (set
    /// when the run starts).
    pub clock_origin_unix_ms: f64,
}

impl BenchConfig {
    /// This run's part of the plan: the load, the counts and the trace split
    /// as [`tokenscope_workload::shard`] says; an error names a level or
    /// count too small to give every shard a part.
    pub fn split(mut self, shard: Shard) -> Result<Self, ShardError> {
        let plan_levels: Vec<f64> = self.load.loads().iter().map(|l| l.value()).collect();
        let plan_requests = match self.per_level {
            PerLevel::Requests(n) => Some(n),
            _ => None,
        };
        self.load = match self.load {
            LoadPlan::Concurrency(cs) => LoadPlan::Concurrency(
                cs.iter()
                    .map(|&c| shard.part_of("concurrency", u64::from(c)).map(|p| p as u32))
                    .collect::<Result<_, _>>()?,
            ),
            LoadPlan::Rate { rates, arrival, cv } => LoadPlan::Rate {
                rates: rates.iter().map(|&r| shard.rate(r)).collect(),
                arrival,
                cv,
            },
            LoadPlan::Trace { trace, mut info } => {
                let mut part = Trace::clone(&trace);
                part.requests = trace
                    .requests
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| shard.owns(*i))
                    .map(|(_, r)| r.clone())
                    .collect();
                if part.requests.is_empty() {
                    return Err(ShardError::TooSmall {
                        what: "a trace of requests",
                        value: trace.requests.len() as u64,
                        count: shard.count,
                    });
                }
                info.requests = part.requests.len() as u64;
                LoadPlan::Trace {
                    trace: std::sync::Arc::new(part),
                    info,
                }
            }
        };
        if let PerLevel::Requests(n) = self.per_level {
            self.per_level = PerLevel::Requests(shard.part_of("requests per level", n)?);
        }
        self.warmup = self.warmup.map(|w| shard.part(u64::from(w)) as u32);
        if let Prompts::File { prompts, .. } = &self.prompts
            && prompts.len() < shard.count as usize
        {
            return Err(ShardError::TooSmall {
                what: "a prompts file of prompts",
                value: prompts.len() as u64,
                count: shard.count,
            });
        }
        self.shard = Some(ShardPlan {
            shard,
            plan_levels,
            plan_requests,
            clock_origin_unix_ms: 0.0,
        });
        Ok(self)
    }

    /// The measured requests of the level at `load` when a count was asked:
    /// raised to what a closed-loop level needs ([`plan::level_requests`]).
    pub fn level_requests(&self, load: Load) -> Option<u64> {
        let PerLevel::Requests(n) = self.per_level else {
            return None;
        };
        let turns = self.conversation.map_or(1, |c| c.turns);
        Some(plan::level_requests(n, self.rounds, load, turns))
    }

    /// The levels whose asked request count was raised, said once: `None` when
    /// every level sends what was asked.
    pub fn raised_requests(&self) -> Option<String> {
        let PerLevel::Requests(n) = self.per_level else {
            return None;
        };
        let raised: Vec<String> = self
            .load
            .loads()
            .into_iter()
            .filter_map(|l| {
                let m = self.level_requests(l)?;
                (m > n).then(|| format!("{} sends {m}", l.label()))
            })
            .collect();
        if raised.is_empty() {
            return None;
        }
        let per_round = if self.conversation.is_some() {
            "concurrency x turns x rounds"
        } else {
            "concurrency x rounds"
        };
        Some(format!(
            "--requests {n} over {} rounds is fewer than a round needs to have every worker busy: {} ({per_round}), so that each level has its concurrency in flight",
            self.rounds,
            raised.join(", ")
        ))
    }

    /// The fewest requests per level the SLOs' percentiles need (0 without SLOs).
    pub fn slo_min_requests(&self) -> u64 {
        self.slos.iter().map(Slo::min_requests).max().unwrap_or(0)
    }

    /// The shard (the whole plan when not sharded).
    pub fn shard_or_whole(&self) -> Shard {
        self.shard.as_ref().map_or(Shard::WHOLE, |s| s.shard)
    }

    /// The whole plan's load at level `level` (this run's own when not sharded).
    pub fn plan_load(&self, level: usize, load: Load) -> Load {
        match (&self.shard, load) {
            (Some(s), Load::Concurrency(_)) => {
                Load::Concurrency(s.plan_levels.get(level).map_or(1, |v| *v as u32))
            }
            (Some(s), Load::Rate(_)) => {
                Load::Rate(s.plan_levels.get(level).copied().unwrap_or(1.0))
            }
            (None, l) => l,
        }
    }

    /// The report's record of this configuration (no key).
    pub fn run_config(&self, model: &str) -> RunConfig {
        let (mode, levels, arrival) = match &self.load {
            LoadPlan::Concurrency(cs) => (
                LoadMode::Concurrency,
                cs.iter().map(|&c| f64::from(c)).collect(),
                None,
            ),
            LoadPlan::Rate { rates, arrival, .. } => {
                (LoadMode::Rate, rates.clone(), Some(*arrival))
            }
            LoadPlan::Trace { trace, .. } => (
                LoadMode::Rate,
                vec![trace.mean_rate_per_s()],
                Some(Arrival::Trace),
            ),
        };
        RunConfig {
            url: crate::util::redact_url(&self.base_url),
            api: self.api,
            model: model.to_owned(),
            mode,
            levels,
            arrival,
            requests_per_level: match self.per_level {
                PerLevel::Requests(n) => Some(n),
                _ => None,
            },
            duration_per_level_s: match self.per_level {
                PerLevel::Duration(d) => Some(d.as_secs_f64()),
                _ => None,
            },
            rounds: self.rounds,
            // The default is per level; the report records the first level's
            // (none with a ramp: it replaces the warm-up).
            warmup_requests: if self.ramp.is_some() {
                0
            } else {
                self.warmup.unwrap_or_else(|| {
                    self.load
                        .loads()
                        .first()
                        .map_or(0, |l| plan::default_warmup(*l))
                })
            },
            input_tokens: match (&self.prompts, &self.load) {
                (_, LoadPlan::Trace { .. }) => None,
                (Prompts::File { .. }, _) => self.prompt_tier,
                (Prompts::Synthetic { tokens }, _) => tokens.tokens(),
            },
            label: self.label.clone(),
            prompts_hash: match &self.prompts {
                Prompts::File { prompts, .. } => {
                    Some(tokenscope_workload::dataset::prompts_hash(prompts))
                }
                Prompts::Synthetic { .. } => None,
            },
            prompts_file: match &self.prompts {
                Prompts::File { path, .. } => Some(path.display().to_string()),
                Prompts::Synthetic { .. } => None,
            },
            max_tokens: self.max_tokens,
            ignore_eos: self.ignore_eos,
            min_tokens: self.min_tokens,
            timeout_s: self.timeout.as_secs_f64(),
            slos: self.slos.clone(),
            slo_classes: self.slo_classes.clone(),
            images: self.images.iter().map(ToString::to_string).collect(),
            image_format: (!self.images.is_empty()).then_some(self.image_format),
            stall_threshold_ms: self.stall_threshold_ms,
            seed: self.seed,
            snapshot_interval_s: self.snapshot_interval.map(|d| d.as_secs_f64()),
            sample_cap: Some(self.sample_cap as u64),
            server_metrics_url: match &self.server_metrics {
                ServerMetrics::Auto(u) | ServerMetrics::Url(u) => Some(crate::util::redact_url(u)),
                ServerMetrics::Off => None,
            },
            gpu_metrics_url: self.gpu_metrics.as_ref().map(crate::util::redact_url),
            price: self.price,
            continuous_usage: self.continuous_usage,
            answer: self.answer.as_ref().map(|a| a.asked()),
            distinct_prompts: match &self.prompts {
                Prompts::File { prompts, .. } => Some(prompts.len() as u64),
                Prompts::Synthetic { .. } => None,
            },
            scrape_interval_s: (self.server_metrics != ServerMetrics::Off
                || self.gpu_metrics.is_some())
            .then_some(self.scrape_interval.as_secs_f64()),
            trace: match &self.load {
                LoadPlan::Trace { info, .. } => Some(info.clone()),
                _ => None,
            },
            tokens: self.tokens.clone(),
            context_window: self.context_window,
            ramp_s: self.ramp.map(|d| d.as_secs_f64()),
            shared_prefix_tokens: self.shared_prefix,
            conversation: self.conversation,
            shard: self.shard.as_ref().map(|s| ShardInfo {
                index: s.shard.index,
                count: s.shard.count,
                plan_levels: s.plan_levels.clone(),
                plan_requests_per_level: s.plan_requests,
                clock_origin_unix_ms: s.clock_origin_unix_ms,
                start_at: self.start_at.as_ref().map(|(_, text)| text.clone()),
            }),
            reasoning_display: None,
            arrival_cv: match &self.load {
                LoadPlan::Rate { cv, .. } => *cv,
                _ => None,
            },
        }
    }
}

/// What `--tokenizer` asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenizerChoice {
    /// The endpoint's `/tokenize` when it has one, else approximate (the default).
    Auto,
    /// The endpoint's `/tokenize`, or an error.
    Server,
    /// A `tokenizer.json`.
    File(PathBuf),
    /// One token per word and punctuation mark.
    Approx,
}

impl TokenizerChoice {
    /// Parse `--tokenizer`'s value.
    pub fn parse(s: &str) -> Self {
        match s.trim() {
            "" | "auto" => TokenizerChoice::Auto,
            "server" => TokenizerChoice::Server,
            "approx" => TokenizerChoice::Approx,
            path => TokenizerChoice::File(PathBuf::from(path)),
        }
    }
}
