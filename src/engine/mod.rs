//! The native benchmark engine behind `tokenscope bench`: validated config in,
//! a `tokenscope.client/1` report out.
//!
//! Load is applied level by level. Each level runs its warm-up (recorded in the raw
//! file, flagged, never measured), then its rounds ([`load`]: closed or open loop).
//! Every finished request goes to the raw file at once (flushed), then into core's
//! [`RunRecorder`], which also assembles the report; the raw file holds the same
//! steps, so `tokenscope report --raw` rebuilds the same report. Nothing is
//! computed on the request's own path.

pub mod clock;
mod config;
pub mod http;
mod load;
mod pacer;
pub mod preflight;
pub mod progress;
pub mod proxy;
pub mod raw;
pub mod scrape;
pub mod tokenize;
pub mod transport;

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokenscope_core::measure::openai::{RequestSpec, request_body};
use tokenscope_core::measure::record::RequestRecord;
use tokenscope_core::report::assemble::RunRecorder;
use tokenscope_core::report::raw::{Phase, RawEntry, RawEvent, RawLine};
use tokenscope_core::report::server::ScrapeLog;
use tokenscope_core::report::warning::event_loop_warning;
use tokenscope_core::report::{Arrival, ClientReport, Environment, Load, ReportWarning, Source};
use tokenscope_core::rng::Rng;
use tokenscope_core::workload::conversation::History;
use tokenscope_core::workload::plan;
use tokenscope_core::workload::prompts::{
    block_prompt, exact_prompt, synthetic_prompt, vocabulary,
};
use tokio_util::sync::CancellationToken;

use self::clock::Clock;
pub use self::config::{BenchConfig, InputLength, LoadPlan, PerLevel, Prompts};
use self::load::{Quota, Schedule, quota_for, run_closed, run_open, run_ramp, run_sessions};
use self::progress::Progress;
use self::raw::RawWriter;
use self::scrape::{Endpoint, Scraper, ServerMetrics};
use self::transport::Target;
use crate::live::remote_write::RemoteWriter;
use crate::live::{Live, LiveLabels};
use tokenscope_core::analyze::level::LevelOptions;
use tokenscope_core::analyze::server::scrape::{ScrapeRecord, ScrapeTarget};
use tokenscope_core::measure::metrics::{MetricOptions, RequestMetrics};
use tokenscope_core::report::WarningKind;

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

impl Finished {
    /// Its raw line, in level `level` at `load`.
    fn into_line(self, level: usize, load: Load) -> RawLine {
        RawLine::new(self.request_id, level, load, self.phase, self.record)
    }
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
    /// The next conversation's number.
    next_session: AtomicU64,
    run_id: String,
    /// How prompts are sized: the tokenizer's single-token words (exact) and
    /// each prompts-file prompt's count.
    tokens: tokenize::Prompting,
    /// Live metrics (`--metrics-listen`, `--prometheus-remote-write`), and the
    /// level under way (its in-flight requests are counted there).
    live: Option<(Arc<Live>, Mutex<Load>)>,
}

/// A request's body, built before its send, with its prompt's counted tokens.
#[derive(Debug, Clone)]
pub(crate) struct Body {
    bytes: Bytes,
    prompt_tokens: Option<u64>,
}

impl Ctx {
    fn body(&self, index: u64) -> Body {
        let (spec, counted) = self.spec(index);
        Body::of(&spec, counted)
    }

    /// The body of a conversation's next turn: the history so far and the user's
    /// new message (request `index`'s prompt), which the history keeps. Only the
    /// first turn's prompt is counted (later ones carry the server's answers).
    fn turn_body(&self, index: u64, history: &mut History) -> Body {
        let (mut spec, counted) = self.spec(index);
        let first = history.next_turn() == 1;
        spec.messages = Some(history.ask(std::mem::take(&mut spec.prompt)));
        Body::of(&spec, counted.filter(|_| first))
    }

    /// Request `index`'s spec and its prompt's counted tokens.
    fn spec(&self, index: u64) -> (RequestSpec, Option<u64>) {
        let words = self.tokens.words.as_deref();
        // A shard's requests are numbered plan-wide (no prompt twice across shards).
        let shard = self.cfg.shard_or_whole();
        let global = shard.global_index(index);
        let traced = match &self.cfg.load {
            LoadPlan::Trace { trace, .. } => trace
                .requests
                .get(index as usize)
                .map(|r| (r, trace.block_tokens)),
            _ => None,
        };
        let mut messages = None;
        let (prompt, max_tokens, counted) = match (&self.cfg.prompts, traced) {
            // A trace's request: its own lengths, its prefix blocks shared.
            (_, Some((r, block))) => (
                block_prompt(
                    words.unwrap_or(vocabulary()),
                    &r.hash_ids,
                    block,
                    r.input_tokens,
                    self.cfg.seed,
                    global,
                ),
                u32::try_from(r.output_tokens).unwrap_or(u32::MAX),
                words.map(|_| r.input_tokens),
            ),
            (Prompts::Synthetic { tokens }, None) => {
                // Resolved before the run (a fraction of the context: `prepare`).
                let tokens = tokens.tokens().unwrap_or(1);
                match words {
                    Some(w) => (
                        exact_prompt(w, u64::from(tokens), self.cfg.seed, global),
                        self.cfg.max_tokens,
                        Some(u64::from(tokens)),
                    ),
                    None => (
                        synthetic_prompt(tokens, self.cfg.seed, global),
                        self.cfg.max_tokens,
                        None,
                    ),
                }
            }
            (Prompts::File { prompts, .. }, None) => {
                // Checked before the run: every shard has a prompt of its own.
                let i = shard.prompt_index(index, prompts.len()).unwrap_or(0);
                let p = &prompts[i];
                messages.clone_from(&p.messages);
                (
                    p.prompt.clone(),
                    p.max_tokens.unwrap_or(self.cfg.max_tokens),
                    self.tokens.file_counts.get(i).copied().flatten(),
                )
            }
        };
        let prefix = self.tokens.prefix.as_ref();
        let counted = counted.map(|c| c + prefix.map_or(0, |p| p.1));
        let spec = RequestSpec {
            system: prefix.map(|p| p.0.clone()),
            messages,
            api: self.cfg.api,
            model: self.model.clone(),
            prompt,
            max_tokens,
            ignore_eos: self.cfg.ignore_eos,
            min_tokens: self.cfg.min_tokens,
            temperature: self.cfg.temperature,
        };
        (spec, counted)
    }

    async fn one(
        &self,
        t_scheduled_ms: Option<f64>,
        phase: Phase,
        body: Body,
        index: u64,
    ) -> Finished {
        self.send(t_scheduled_ms, phase, body, index, None).await.0
    }

    /// Send one request; a conversation's turn (`turn`: session, turn) also
    /// gives back the answer's text.
    async fn send(
        &self,
        t_scheduled_ms: Option<f64>,
        phase: Phase,
        body: Body,
        index: u64,
        turn: Option<(u64, u32)>,
    ) -> (Finished, Option<String>) {
        let request_id = format!("{}-{index}", self.run_id);
        if let Some((live, load)) = &self.live {
            live.request_started(
                *load
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
        }
        let counter = self.tokens.output_counter.as_deref();
        let send = transport::Send {
            request_id: &request_id,
            t_scheduled_ms,
            keep_answer: turn.is_some(),
            keep_text: counter.is_some(),
        };
        let (mut record, texts) = transport::exchange(
            &self.client,
            &self.target,
            body.bytes,
            &self.clock,
            send,
            &self.cancel,
        )
        .await;
        record.prompt_tokens_sent = body.prompt_tokens;
        record.session = turn.map(|t| t.0);
        record.turn = turn.map(|t| t.1);
        // The answer counted by the local tokenizer, after the request's end
        // (its times are already taken).
        if let (Some(c), Some(text)) = (counter, &texts.generated)
            && record.outcome.is_ok()
        {
            record.completion_tokens_counted = c.count(text).await.ok();
        }
        let f = Finished {
            request_id,
            phase,
            record,
        };
        (f, texts.answer)
    }
}

impl Body {
    fn of(spec: &RequestSpec, prompt_tokens: Option<u64>) -> Self {
        Self {
            bytes: Bytes::from(
                serde_json::to_vec(&request_body(spec)).expect("a JSON value serializes"),
            ),
            prompt_tokens,
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
pub async fn run(mut cfg: BenchConfig, pre: Preflight) -> anyhow::Result<RunOutput> {
    let tracker = http::ConnTracker::default();
    let client = cfg.http.client(cfg.api_key.as_ref(), Some(&tracker))?;
    let target = Target {
        url: crate::util::join_url(&cfg.base_url, cfg.api.path()),
        timeout: cfg.timeout,
        connections: Some(tracker),
    };
    // Bound first: a port in use stops the run before anything is sent.
    let live = Live::new(LiveLabels {
        shard: cfg.shard.as_ref().map(|s| (s.shard.index, s.shard.count)),
        label: cfg.label.clone(),
    });
    let listener = match cfg.metrics_listen {
        Some(addr) => {
            let (task, bound) = crate::live::server::serve(addr, Arc::clone(&live)).await?;
            eprintln!("live metrics at http://{bound}/metrics");
            Some(task)
        }
        None => None,
    };
    let remote = match &cfg.remote_write {
        Some((url, every)) => Some(RemoteWriter::spawn(
            url.clone(),
            *every,
            Arc::clone(&live),
            scrape::client(&cfg.http)?,
        )),
        None => None,
    };
    let live = (listener.is_some() || remote.is_some()).then_some(live);
    let clock = Clock::start();
    if let Some(s) = cfg.shard.as_mut() {
        s.clock_origin_unix_ms = crate::util::unix_ms() - clock.now_ms();
    }
    let scrape_http = scrape::client(&cfg.http)?;
    let (endpoints, first_scrapes, scrape_notes) =
        scrape_endpoints(&mut cfg, &scrape_http, &clock).await;
    let cpu_start = crate::util::process_cpu_s();
    let started_at = crate::util::now_rfc3339();
    let loads = cfg.load.loads();
    let run_id = format!(
        "ts{:x}",
        Rng::new(cfg.seed ^ std::process::id() as u64 ^ now_nanos()).next_u64() & 0xffff_ffff
    );
    // Its own client, as the pre-flight's: the measured streams start on
    // connections nothing else has used.
    let setup_client = cfg.http.client(cfg.api_key.as_ref(), None)?;
    tokenize::resolve_input_length(&mut cfg, &setup_client, &pre.model).await?;
    let mut tokens = tokenize::prepare(&cfg, &setup_client, &target, &pre.model).await?;
    cfg.tokens = Some(tokens.counting.clone());
    if let Some(tier) = cfg.prompt_tier {
        tokenize::pick_tier(&mut cfg, &mut tokens, tier)?;
    }
    let ctx = Arc::new(Ctx {
        tokens,
        model: pre.model.clone(),
        client,
        target,
        clock,
        stop: CancellationToken::new(),
        cancel: CancellationToken::new(),
        next_index: AtomicU64::new(0),
        next_session: AtomicU64::new(0),
        run_id,
        live: live.clone().map(|l| (l, Mutex::new(Load::Concurrency(1)))),
        cfg,
    });
    let cfg = &ctx.cfg;
    let rec = RunRecorder::new(Source::Native, cfg.run_config(&ctx.model));
    let raw = match &cfg.raw {
        Some(path) => Some(RawWriter::create(path, &rec.raw_header())?),
        None => None,
    };
    let metric_opts = LevelOptions::from_config(rec.config()).metric;
    let run = Arc::new(Mutex::new(Recording {
        rec,
        raw,
        scrapes: ScrapeLog::default(),
        live: live.clone().map(|l| (l, metric_opts)),
    }));
    let insecure = cfg.http.insecure.then(|| {
        ReportWarning::new(
            WarningKind::TlsNotVerified,
            "--insecure: the server's TLS certificate was NOT verified; anyone on the path could have answered these requests",
        )
    });
    for w in pre.warnings.into_iter().chain(scrape_notes).chain(insecure) {
        lock(&run).warn(w);
    }
    for s in first_scrapes {
        scrape::Recorder::scrape(&mut *lock(&run), s);
    }
    let scraper = (!endpoints.is_empty()).then(|| {
        Scraper::spawn(
            scrape_http,
            endpoints,
            cfg.scrape_interval,
            ctx.clock,
            run.clone(),
        )
    });
    spawn_signal_handler(ctx.stop.clone(), ctx.cancel.clone(), cfg.grace);
    if let Some((at_ms, text)) = &cfg.start_at
        && let Some(w) = wait_for_start(*at_ms, text, &ctx.stop).await
    {
        lock(&run).warn(w);
    }
    let lag_monitor = LagMonitor::spawn(live.clone());
    let progress = Progress::new(cfg.progress);
    for (li, load) in loads.iter().enumerate() {
        if ctx.stop.is_cancelled() {
            break;
        }
        run_level(&ctx, li, *load, &run, scraper.as_ref(), &progress).await;
    }
    progress.finish();
    if let Some(s) = scraper {
        s.stop().await;
    }
    let interrupted = ctx.stop.is_cancelled();
    let lag_summary = lag_monitor.stop().await;
    let mut run = Arc::try_unwrap(run)
        .map_err(|_| anyhow::anyhow!("the scraper still holds the run"))?
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a thread panicked while recording"))?;
    if let Some(w) = event_loop_warning(&lag_summary, "client") {
        run.warn(w);
    }
    if let Some(r) = remote {
        let stats = r.stop().await;
        if stats.failures > 0 {
            run.warn(ReportWarning::new(
                WarningKind::RemoteWrite,
                format!(
                    "{} of {} pushes to the remote-write endpoint failed (the run went on; the report has every figure): {}",
                    stats.failures,
                    stats.pushes + stats.failures,
                    stats.first_error.as_deref().unwrap_or("no error kept")
                ),
            ));
        }
    }
    if let (Some(task), Some(l)) = (listener, &live) {
        if !cfg.metrics_linger.is_zero() {
            eprintln!(
                "live metrics: waiting up to {:.0} s for a last scrape of the final counts",
                cfg.metrics_linger.as_secs_f64()
            );
        }
        crate::live::server::linger(task, l, cfg.metrics_linger).await;
    }
    let environment = Environment {
        tool_version: env!("CARGO_PKG_VERSION").into(),
        user_agent: None,
        protocol: pre.protocol,
        transport: Some(cfg.http.info(cfg.base_url.scheme() == "https")),
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
        rebuilt_from_raw: false,
        merged: None,
    };
    run.log(RawEntry::Event(RawEvent::end(&environment, interrupted)));
    let mut report = run.rec.finish(environment, interrupted);
    run.scrapes.attach(&mut report);
    Ok(RunOutput { report })
}

/// The targets to scrape, from `--server-metrics` and `--gpu-metrics`. Each is
/// scraped once first: an `auto` server URL that does not answer with metrics is
/// dropped (said once in the report), and the config then records no URL. The
/// key goes only to the endpoint's own origin, unless `--metrics-send-key`.
async fn scrape_endpoints(
    cfg: &mut BenchConfig,
    http: &reqwest::Client,
    clock: &Clock,
) -> (Vec<Endpoint>, Vec<ScrapeRecord>, Vec<ReportWarning>) {
    let key_for = |url: &reqwest::Url| {
        (cfg.metrics_send_key || url.origin() == cfg.base_url.origin())
            .then(|| cfg.api_key.clone())
            .flatten()
    };
    let mut wanted = Vec::new();
    match &cfg.server_metrics {
        ServerMetrics::Auto(u) => wanted.push((ScrapeTarget::Server, u.clone(), true)),
        ServerMetrics::Url(u) => wanted.push((ScrapeTarget::Server, u.clone(), false)),
        ServerMetrics::Off => {}
    }
    if let Some(u) = &cfg.gpu_metrics {
        wanted.push((ScrapeTarget::Gpu, u.clone(), false));
    }
    let (mut endpoints, mut first, mut notes) = (Vec::new(), Vec::new(), Vec::new());
    for (target, url, auto) in wanted {
        let ep = Endpoint {
            target,
            api_key: key_for(&url),
            url,
        };
        let s = scrape::scrape_once(http, &ep, clock).await;
        if auto && !s.ok() {
            notes.push(ReportWarning::new(
                WarningKind::ServerMetricsOff,
                format!(
                    "no server metrics at {} ({}): the server view is off (--server-metrics URL names another)",
                    crate::util::redact_url(&ep.url),
                    s.error.as_deref().unwrap_or("no answer")
                ),
            ));
            cfg.server_metrics = ServerMetrics::Off;
            continue;
        }
        first.push(s);
        endpoints.push(ep);
    }
    (endpoints, first, notes)
}

fn lock(run: &Mutex<Recording>) -> MutexGuard<'_, Recording> {
    // A panic elsewhere while recording leaves the data as it was: keep going.
    run.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The run's record as it happens: core's recorder (which makes the report) and
/// the raw file (which gets every step as it happens).
struct Recording {
    rec: RunRecorder,
    raw: Option<RawWriter>,
    /// The scrapes, attributed to levels, joined to the report at the end.
    scrapes: ScrapeLog,
    /// Live metrics, and how a request's metrics are computed (as the report does).
    live: Option<(Arc<Live>, MetricOptions)>,
}

impl Recording {
    fn log(&mut self, entry: RawEntry) {
        if let Some(w) = self.raw.as_mut() {
            w.write(&entry);
        }
    }

    fn warn(&mut self, w: ReportWarning) {
        let e = self.rec.warn(w);
        self.log(RawEntry::Event(e));
    }

    fn finished(&mut self, f: Finished, level: usize, load: Load) {
        if let Some((live, opts)) = &self.live {
            let m = RequestMetrics::from_record(&f.record, opts);
            live.request_finished(load, f.phase != Phase::Warmup, &f.record, &m);
        }
        let line = f.into_line(level, load);
        self.rec.record(&line);
        self.log(RawEntry::Request(Box::new(line)));
    }
}

impl scrape::Recorder for Recording {
    fn scrape(&mut self, s: ScrapeRecord) {
        let e = self.scrapes.scrape(s);
        self.log(e);
    }
}

/// One level: its warm-up (closed loop at the level's concurrency; rate: about
/// one second's worth), then its rounds.
async fn run_level(
    ctx: &Arc<Ctx>,
    li: usize,
    load: Load,
    run: &Mutex<Recording>,
    scraper: Option<&Scraper>,
    progress: &Progress,
) {
    let cfg = &ctx.cfg;
    if let Some((live, current)) = &ctx.live {
        *current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = load;
        live.level_started(li, load);
    }
    let warm_n = cfg.warmup.unwrap_or(plan::default_warmup(load));
    if let Some(ramp) = cfg.ramp {
        // The ramp replaces the warm-up: load rising to the level's, not measured.
        progress.phase(&format!("{} ramp", load.label()), None);
        run_ramp(ctx, load, ramp.as_secs_f64() * 1000.0, |f| {
            progress.tick(&f.record);
            lock(run).finished(f, li, load);
        })
        .await;
    } else if warm_n > 0 {
        progress.phase(
            &format!("{} warm-up", load.label()),
            Some(u64::from(warm_n)),
        );
        let quota = Quota::Count(u64::from(warm_n));
        let warm_c = plan::warmup_concurrency(load);
        run_closed(ctx, warm_c, quota, Phase::Warmup, |f| {
            progress.tick(&f.record);
            lock(run).finished(f, li, load);
        })
        .await;
    }
    {
        let mut r = lock(run);
        let t_ms = ctx.clock.now_ms();
        let e = r.rec.start_level(li, load, t_ms);
        r.scrapes.level_started(li, t_ms);
        r.log(RawEntry::Event(e));
    }
    if let Some(s) = scraper {
        s.now().await;
    }
    for round in 0..cfg.rounds {
        if ctx.stop.is_cancelled() {
            break;
        }
        let quota = quota_for(cfg, load, cfg.plan_load(li, load), round);
        progress.phase(
            &format!("{} round {}/{}", load.label(), round + 1, cfg.rounds),
            match (quota, cfg.conversation) {
                (Quota::Count(n), Some(conv)) => Some(conv.sessions_for(n) * u64::from(conv.turns)),
                (Quota::Count(n), None) => Some(n),
                (Quota::For(_), _) => None,
            },
        );
        let mut sink = |f: Finished| {
            progress.tick(&f.record);
            lock(run).finished(f, li, load);
        };
        match load {
            Load::Concurrency(c) => match cfg.conversation {
                Some(conv) => {
                    run_sessions(ctx, c, conv, quota, Phase::Round(round), &mut sink).await;
                }
                None => run_closed(ctx, c, quota, Phase::Round(round), &mut sink).await,
            },
            Load::Rate(rate) => {
                let schedule = match &cfg.load {
                    LoadPlan::Rate { arrival, cv, .. } => Schedule::Rate {
                        rate,
                        arrival: *arrival,
                        cv: *cv,
                    },
                    LoadPlan::Trace { trace, .. } => Schedule::Trace(Arc::clone(trace)),
                    LoadPlan::Concurrency(_) => Schedule::Rate {
                        rate,
                        arrival: Arrival::Poisson,
                        cv: None,
                    },
                };
                run_open(ctx, schedule, quota, round, &mut sink).await;
            }
        }
    }
    if let Some(s) = scraper {
        s.now().await;
    }
    let mut r = lock(run);
    if let Some((e, level)) = r.rec.end_level() {
        if let Some(level) = level {
            progress.level_done(level);
        }
        r.log(RawEntry::Event(e));
    }
    r.scrapes.level_ended();
}

/// Wait for the common start (`--start-at`): the first level starts then, so
/// shards on several machines line up. A start already past is said in the
/// report and the run starts at once; Ctrl-C stops the wait.
async fn wait_for_start(
    at_unix_ms: f64,
    text: &str,
    stop: &CancellationToken,
) -> Option<ReportWarning> {
    let wait_ms = at_unix_ms - crate::util::unix_ms();
    if wait_ms <= 0.0 {
        return Some(ReportWarning::new(
            WarningKind::ClientBound,
            format!(
                "the common start {text} had passed {:.1} s before this run was ready: its levels start late against the others'",
                -wait_ms / 1000.0
            ),
        ));
    }
    eprintln!(
        "waiting {:.1} s for the common start {text}",
        wait_ms / 1000.0
    );
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs_f64(wait_ms / 1000.0)) => {}
        () = stop.cancelled() => {}
    }
    None
}

/// Measures how late a 10 ms timer fires on the client's runtime, all run long.
struct LagMonitor {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<tokenscope_core::analyze::stats::Samples>,
}

impl LagMonitor {
    fn spawn(live: Option<Arc<Live>>) -> Self {
        let stop = CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            let mut samples = tokenscope_core::analyze::stats::Samples::with_cap(100_000);
            let period = Duration::from_millis(10);
            loop {
                let start = std::time::Instant::now();
                tokio::select! {
                    () = tokio::time::sleep(period) => {}
                    () = token.cancelled() => break,
                }
                let late = start.elapsed().saturating_sub(period);
                samples.push(late.as_secs_f64() * 1000.0);
                if let Some(l) = &live {
                    l.event_loop_lag_ms(late.as_secs_f64() * 1000.0);
                }
            }
            samples
        });
        Self { stop, task }
    }

    async fn stop(self) -> tokenscope_core::analyze::stats::Summary {
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
