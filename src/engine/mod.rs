//! The native benchmark engine behind `tokenscope bench`: validated config in,
//! a `tokenscope.client/1` report out.
//!
//! Load is applied level by level. Each level runs its warm-up (recorded in the raw
//! file, flagged, never measured), then its rounds. Closed loop keeps `c` requests
//! in flight; open loop sends on a precomputed schedule whatever the responses
//! (no coordinated omission), and latencies are measured from the scheduled send.
//! Every finished request goes to the raw file at once (flushed), then into the
//! level's accumulator; nothing is computed on the request's own path.

pub mod clock;
pub mod progress;
pub mod raw;
pub mod transport;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokenscope_core::analysis::{LevelAccumulator, LevelOptions, analyze_sweep};
use tokenscope_core::metrics::MetricOptions;
use tokenscope_core::openai::{Api, RequestSpec, request_body};
use tokenscope_core::plan;
use tokenscope_core::prompts::synthetic_prompt;
use tokenscope_core::report::{
    Arrival, CLIENT_SCHEMA, ClientReport, Environment, LevelReport, Load, ReportWarning, RunConfig,
    Source, event_loop_warning, level_warnings,
};
use tokenscope_core::rng::Rng;
use tokenscope_core::slo::Slo;
use tokenscope_core::timeline::RequestRecord;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::clock::Clock;
use self::progress::Progress;
use self::raw::RawWriter;
use self::transport::Target;
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
    },
}

impl LoadPlan {
    fn loads(&self) -> Vec<Load> {
        match self {
            LoadPlan::Concurrency(cs) => cs.iter().map(|&c| Load::Concurrency(c)).collect(),
            LoadPlan::Rate { rates, .. } => rates.iter().map(|&r| Load::Rate(r)).collect(),
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

/// Where prompts come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompts {
    /// Generated prompts of about this many tokens.
    Synthetic {
        /// Approximate tokens.
        tokens: u32,
    },
    /// Prompts read from a JSONL file, used in turn.
    File {
        /// The file, for the report.
        path: PathBuf,
        /// The prompts.
        prompts: Vec<FilePrompt>,
    },
}

/// One prompt from a prompts file.
#[derive(Debug, Clone, PartialEq)]
pub struct FilePrompt {
    /// The text.
    pub prompt: String,
    /// Its own `max_tokens`, if the line gave one.
    pub max_tokens: Option<u32>,
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
    /// Stall threshold, ms.
    pub stall_threshold_ms: f64,
    /// Seed for prompts and arrivals.
    pub seed: u64,
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
}

impl BenchConfig {
    /// The report's record of this configuration (no key).
    pub fn run_config(&self, model: &str) -> RunConfig {
        let (mode, levels, arrival) = match &self.load {
            LoadPlan::Concurrency(cs) => (
                "concurrency",
                cs.iter().map(|&c| f64::from(c)).collect(),
                None,
            ),
            LoadPlan::Rate { rates, arrival } => ("rate", rates.clone(), Some(*arrival)),
        };
        RunConfig {
            url: crate::util::redact_url(&self.base_url),
            api: self.api,
            model: model.to_owned(),
            mode: mode.into(),
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
            warmup_requests: self.warmup.unwrap_or(0),
            input_tokens: match &self.prompts {
                Prompts::Synthetic { tokens } => Some(*tokens),
                Prompts::File { .. } => None,
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
            stall_threshold_ms: self.stall_threshold_ms,
            seed: self.seed,
        }
    }
}

/// Which phase a request belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Warm-up (not measured).
    Warmup,
    /// Measured round (0-based).
    Round(u32),
}

/// A finished request with where it belongs.
#[derive(Debug)]
pub struct Finished {
    /// `x-request-id` sent.
    pub request_id: String,
    /// Phase.
    pub phase: Phase,
    /// The record.
    pub record: RequestRecord,
}

/// Shared state of a run.
struct Ctx {
    cfg: BenchConfig,
    model: String,
    client: reqwest::Client,
    target: Target,
    clock: Clock,
    /// Ctrl-C: send nothing new.
    stop: CancellationToken,
    /// After the grace period: cancel what is in flight.
    cancel: CancellationToken,
    next_index: AtomicU64,
    run_id: String,
}

impl Ctx {
    fn body(&self, index: u64) -> Bytes {
        let (prompt, max_tokens) = match &self.cfg.prompts {
            Prompts::Synthetic { tokens } => (
                synthetic_prompt(*tokens, self.cfg.seed, index),
                self.cfg.max_tokens,
            ),
            Prompts::File { prompts, .. } => {
                let p = &prompts[(index % prompts.len() as u64) as usize];
                (
                    p.prompt.clone(),
                    p.max_tokens.unwrap_or(self.cfg.max_tokens),
                )
            }
        };
        let spec = RequestSpec {
            api: self.cfg.api,
            model: self.model.clone(),
            prompt,
            max_tokens,
            ignore_eos: self.cfg.ignore_eos,
            min_tokens: self.cfg.min_tokens,
            temperature: self.cfg.temperature,
        };
        Bytes::from(serde_json::to_vec(&request_body(&spec)).expect("a JSON value serializes"))
    }

    async fn one(
        &self,
        t_scheduled_ms: Option<f64>,
        phase: Phase,
        body: Bytes,
        index: u64,
    ) -> Finished {
        let request_id = format!("{}-{index}", self.run_id);
        let record = transport::run_request(
            &self.client,
            &self.target,
            body,
            &request_id,
            &self.clock,
            t_scheduled_ms,
            &self.cancel,
        )
        .await;
        Finished {
            request_id,
            phase,
            record,
        }
    }
}

/// The outcome of a run.
#[derive(Debug)]
pub struct RunOutput {
    /// The report.
    pub report: ClientReport,
}

/// What the pre-flight learned.
#[derive(Debug, Clone)]
pub struct Preflight {
    /// The model to use.
    pub model: String,
    /// The HTTP version of the answer.
    pub protocol: Option<String>,
    /// Warnings to carry into the report.
    pub warnings: Vec<ReportWarning>,
}

/// Run a benchmark. `preflight` is the result of [`preflight::check`].
pub async fn run(cfg: BenchConfig, pre: Preflight) -> anyhow::Result<RunOutput> {
    let client = transport::client()?;
    let target = Target {
        url: crate::util::join_url(&cfg.base_url, cfg.api.path()),
        api_key: cfg.api_key.clone(),
        timeout: cfg.timeout,
    };
    let cpu_start = crate::util::process_cpu_s();
    let started_at = crate::util::now_rfc3339();
    let loads = cfg.load.loads();
    let run_id = format!(
        "ts{:x}",
        Rng::new(cfg.seed ^ std::process::id() as u64 ^ now_nanos()).next_u64() & 0xffff_ffff
    );
    let ctx = Arc::new(Ctx {
        model: pre.model.clone(),
        client,
        target,
        clock: Clock::start(),
        stop: CancellationToken::new(),
        cancel: CancellationToken::new(),
        next_index: AtomicU64::new(0),
        run_id,
        cfg,
    });
    let cfg = &ctx.cfg;
    let mut raw = match &cfg.raw {
        Some(path) => Some(RawWriter::create(path, &cfg.run_config(&ctx.model))?),
        None => None,
    };
    spawn_signal_handler(ctx.stop.clone(), ctx.cancel.clone(), cfg.grace);
    let lag_monitor = LagMonitor::spawn();
    let progress = Progress::new(cfg.progress);
    let mut levels: Vec<LevelReport> = Vec::new();
    let mut warmups = Vec::new();
    for (li, load) in loads.iter().enumerate() {
        if ctx.stop.is_cancelled() {
            break;
        }
        let opts = LevelOptions {
            slos: cfg.slos.clone(),
            metric: MetricOptions {
                stall_threshold_ms: cfg.stall_threshold_ms,
            },
            snapshot_interval_ms: cfg.snapshot_interval.map(|d| d.as_secs_f64() * 1000.0),
            sample_cap: cfg.sample_cap,
        };
        let mut acc = LevelAccumulator::new(*load, opts);
        // Warm-up: closed loop at the level's concurrency (rate: ~1 s worth).
        let warm_n = cfg.warmup.unwrap_or(plan::default_warmup(*load));
        let warm_c = plan::warmup_concurrency(*load);
        if warm_n > 0 {
            progress.phase(
                &format!("{} warm-up", load.label()),
                Some(u64::from(warm_n)),
            );
            let mut warm_records = 0;
            run_closed(
                &ctx,
                warm_c,
                Quota::Count(u64::from(warm_n)),
                Phase::Warmup,
                |f| {
                    warm_records += 1;
                    if let Some(w) = raw.as_mut() {
                        w.write(li, *load, &f);
                    }
                    progress.tick(&f.record);
                },
            )
            .await;
            warmups.push(warm_records);
        }
        let level_start = ctx.clock.now_ms();
        acc.set_start(level_start);
        for round in 0..cfg.rounds {
            if ctx.stop.is_cancelled() {
                break;
            }
            let quota = quota_for(cfg, *load, round);
            progress.phase(
                &format!("{} round {}/{}", load.label(), round + 1, cfg.rounds),
                match quota {
                    Quota::Count(n) => Some(n),
                    Quota::For(_) => None,
                },
            );
            let mut sink = |f: Finished| {
                if let Some(w) = raw.as_mut() {
                    w.write(li, *load, &f);
                }
                progress.tick(&f.record);
                if let Phase::Round(r) = f.phase {
                    acc.push(r as usize, &f.record);
                }
            };
            match load {
                Load::Concurrency(c) => {
                    run_closed(&ctx, *c, quota, Phase::Round(round), &mut sink).await;
                }
                Load::Rate(r) => {
                    let arrival = match &cfg.load {
                        LoadPlan::Rate { arrival, .. } => *arrival,
                        LoadPlan::Concurrency(_) => Arrival::Poisson,
                    };
                    run_open(&ctx, *r, arrival, quota, round, &mut sink).await;
                }
            }
        }
        if acc.sent() > 0 {
            levels.push(acc.finish());
            progress.level_done(levels.last().expect("just pushed"));
        }
    }
    progress.finish();
    if let Some(w) = raw.as_mut() {
        w.flush();
    }
    let interrupted = ctx.stop.is_cancelled();
    let lag_summary = lag_monitor.stop().await;
    let mut warnings = pre.warnings;
    warnings.extend(level_warnings(&levels));
    warnings.extend(event_loop_warning(&lag_summary, "client"));
    if levels
        .iter()
        .any(|l| l.metrics.itl_ms.histogram || l.metrics.ttft_ms.histogram)
    {
        warnings.push(ReportWarning {
            kind: "histogram_summaries".into(),
            message: format!(
                "some levels recorded more than {} samples of a metric: their percentiles come from a histogram (3 significant digits) to keep memory flat",
                cfg.sample_cap
            ),
        });
    }
    let sweep = analyze_sweep(&levels, &cfg.slos);
    let mut run_config = cfg.run_config(&ctx.model);
    run_config.warmup_requests = cfg.warmup.unwrap_or_else(|| {
        // Report what the default amounted to (per level, in order).
        warmups.first().copied().unwrap_or(0)
    });
    let report = ClientReport {
        schema: CLIENT_SCHEMA.into(),
        source: Source::Native,
        config: run_config,
        environment: Environment {
            tool_version: env!("CARGO_PKG_VERSION").into(),
            user_agent: None,
            protocol: pre.protocol,
            os: Some(format!(
                "{}-{}",
                std::env::consts::OS,
                std::env::consts::ARCH
            )),
            cpus: std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as u32),
            started_at: Some(started_at),
            client_cpu_s: match (cpu_start, crate::util::process_cpu_s()) {
                (Some(a), Some(b)) => Some(b - a),
                _ => None,
            },
            simulated: false,
            event_loop_lag_ms: Some(lag_summary),
        },
        levels,
        sweep,
        warnings,
        interrupted,
    };
    Ok(RunOutput { report })
}

/// Measures how late a 10 ms timer fires on the client's runtime, all run long.
struct LagMonitor {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<tokenscope_core::stats::Samples>,
}

impl LagMonitor {
    fn spawn() -> Self {
        let stop = CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            let mut samples = tokenscope_core::stats::Samples::with_cap(100_000);
            let period = Duration::from_millis(10);
            loop {
                let start = std::time::Instant::now();
                tokio::select! {
                    () = tokio::time::sleep(period) => {}
                    () = token.cancelled() => break,
                }
                let late = start.elapsed().saturating_sub(period);
                samples.push(late.as_secs_f64() * 1000.0);
            }
            samples
        });
        Self { stop, task }
    }

    async fn stop(self) -> tokenscope_core::stats::Summary {
        self.stop.cancel();
        self.task.await.map(|s| s.summary()).unwrap_or_default()
    }
}

fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// How much a round sends.
#[derive(Debug, Clone, Copy)]
enum Quota {
    /// This many requests.
    Count(u64),
    /// New requests for this long (ms) from the round's start; in-flight ones finish.
    For(f64),
}

fn quota_for(cfg: &BenchConfig, load: Load, round: u32) -> Quota {
    match cfg.per_level {
        PerLevel::Requests(n) => Quota::Count(plan::split(n, cfg.rounds, round)),
        PerLevel::Duration(d) => {
            Quota::For(d.as_secs_f64() * 1000.0 / f64::from(cfg.rounds.max(1)))
        }
        PerLevel::Auto => Quota::Count(plan::default_round_requests(load)),
    }
}

/// Closed loop: `c` workers, each sending its next request when its last one ends.
///
/// With a request count, every body is built before the round starts, so building
/// one request's prompt never delays another's send (a round starts with a burst of
/// `c` sends at once).
async fn run_closed(
    ctx: &Arc<Ctx>,
    c: u32,
    quota: Quota,
    phase: Phase,
    mut sink: impl FnMut(Finished),
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let started = Arc::new(AtomicU64::new(0));
    let prebuilt: Arc<Vec<(u64, Bytes)>> = Arc::new(match quota {
        Quota::Count(n) => (0..n)
            .map(|_| {
                let index = ctx.next_index.fetch_add(1, Ordering::Relaxed);
                (index, ctx.body(index))
            })
            .collect(),
        Quota::For(_) => Vec::new(),
    });
    let deadline_ms = match quota {
        Quota::For(ms) => Some(ctx.clock.now_ms() + ms),
        Quota::Count(_) => None,
    };
    for _ in 0..c {
        let ctx = Arc::clone(ctx);
        let tx = tx.clone();
        let started = Arc::clone(&started);
        let prebuilt = Arc::clone(&prebuilt);
        tokio::spawn(async move {
            loop {
                if ctx.stop.is_cancelled() {
                    break;
                }
                let (index, body) = match quota {
                    Quota::Count(_) => {
                        let k = started.fetch_add(1, Ordering::Relaxed) as usize;
                        match prebuilt.get(k) {
                            Some((index, body)) => (*index, body.clone()),
                            None => break,
                        }
                    }
                    Quota::For(_) => {
                        if deadline_ms.is_some_and(|d| ctx.clock.now_ms() >= d) {
                            break;
                        }
                        let index = ctx.next_index.fetch_add(1, Ordering::Relaxed);
                        (index, ctx.body(index))
                    }
                };
                let f = ctx.one(None, phase, body, index).await;
                if tx.send(f).is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    while let Some(f) = rx.recv().await {
        sink(f);
    }
}

/// Open loop: sends on a schedule at `rate` req/s regardless of responses.
async fn run_open(
    ctx: &Arc<Ctx>,
    rate: f64,
    arrival: Arrival,
    quota: Quota,
    round: u32,
    mut sink: impl FnMut(Finished),
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let ctx2 = Arc::clone(ctx);
    let scheduler = tokio::spawn(async move {
        let ctx = ctx2;
        let mut rng = Rng::for_stream(ctx.cfg.seed, 0xA11 + u64::from(round));
        let start = ctx.clock.now_ms();
        let until = match quota {
            Quota::For(ms) => Some(start + ms),
            Quota::Count(_) => None,
        };
        let mean_gap_ms = 1000.0 / rate;
        let mut t_next = start;
        let mut sent = 0u64;
        loop {
            if let Quota::Count(n) = quota
                && sent >= n
            {
                break;
            }
            if until.is_some_and(|u| t_next >= u) || ctx.stop.is_cancelled() {
                break;
            }
            // Build the body before the scheduled time, so the send is on time.
            let index = ctx.next_index.fetch_add(1, Ordering::Relaxed);
            let body = ctx.body(index);
            tokio::select! {
                () = tokio::time::sleep_until(ctx.clock.instant_at(t_next)) => {}
                () = ctx.stop.cancelled() => break,
            }
            let t_sched = t_next;
            let ctx3 = Arc::clone(&ctx);
            let tx = tx.clone();
            tokio::spawn(async move {
                let f = ctx3
                    .one(Some(t_sched), Phase::Round(round), body, index)
                    .await;
                let _ = tx.send(f);
            });
            sent += 1;
            t_next += match arrival {
                Arrival::Poisson => rng.exponential(mean_gap_ms),
                Arrival::Constant => mean_gap_ms,
            };
        }
    });
    // The scheduler holds the last sender clone until it ends; each request holds one.
    while let Some(f) = rx.recv().await {
        sink(f);
    }
    let _ = scheduler.await;
}

fn spawn_signal_handler(stop: CancellationToken, cancel: CancellationToken, grace: Duration) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        eprintln!(
            "\ninterrupted: no new requests; waiting up to {:.0} s for those in flight (Ctrl-C again to stop now)",
            grace.as_secs_f64()
        );
        stop.cancel();
        tokio::select! {
            () = tokio::time::sleep(grace) => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        cancel.cancel();
    });
}

pub mod preflight;
