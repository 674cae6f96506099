//! # tokenscope-loadgen
//!
//! The native load generator behind `tokenscope bench`: validated config in, a
//! `tokenscope.client/1` report out; with the one HTTP client factory every
//! native request goes through ([`http_client`]), the live figures a run serves
//! and pushes ([`live`]), and the small helpers they share ([`util`]).
//!
//! Load is applied level by level. Each level runs its warm-up (recorded in the raw
//! file, flagged, never measured), then its rounds ([`load`]: closed or open loop).
//! Every finished request goes to the raw file at once (flushed), then into core's
//! [`RunRecorder`], which also assembles the report; the raw file holds the same
//! steps, so `tokenscope report --raw` rebuilds the same report. Nothing is
//! computed on the request's own path. What stops a run is an [`Error`] that says
//! whose the fault is: an option, a file, the endpoint, or the run itself.

pub mod answer;
pub mod clock;
mod config;
pub mod error;
pub mod estimate;
pub mod http;
pub mod http_client;
mod level;
pub mod live;
mod load;
mod pacer;
pub mod preflight;
pub mod progress;
pub mod raw;
mod request;
pub mod scrape;
pub mod tokenize;
pub mod transport;
pub mod util;

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokenscope_core::report::assemble::RunRecorder;
use tokenscope_core::report::raw::{RawEntry, RawEvent};
use tokenscope_core::report::server::ScrapeLog;
use tokenscope_core::report::warning::event_loop_warning;
use tokenscope_core::report::{ClientReport, Environment, Load, ReportWarning, Source};
use tokenscope_stats::rng::Rng;
use tokio_util::sync::CancellationToken;

use self::clock::Clock;
pub use self::config::{BenchConfig, InputLength, LoadPlan, PerLevel, Prompts, TokenizerChoice};
pub use self::error::{Error, Result};
use self::level::{LagMonitor, Recording, lock, run_level};
use self::progress::Progress;
use self::raw::RawWriter;
use self::request::Ctx;
use self::scrape::{Endpoint, Scraper, ServerMetrics};
use self::transport::Target;
use crate::http_client::ClientRole;
use crate::live::remote_write::RemoteWriter;
use crate::live::{Live, LiveLabels};
use tokenscope_core::analyze::level::LevelOptions;
use tokenscope_core::analyze::server::scrape::{ScrapeRecord, ScrapeTarget};
use tokenscope_core::report::WarningKind;

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
    /// How long its streamed request took (none when it was skipped or
    /// failed): the base of the run's time estimate.
    pub timing: Option<estimate::RequestTime>,
}

/// Run a benchmark. `preflight` is the result of [`preflight::check`].
pub async fn run(mut cfg: BenchConfig, pre: Preflight) -> Result<RunOutput> {
    let tracker = http::ConnTracker::default();
    let client = cfg.http.client_with(
        ClientRole::Endpoint {
            api_key: cfg.api_key.as_ref(),
            timeout: None,
        },
        |b| http::tracked(b, &tracker),
    )?;
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
    let setup_client = cfg.http.client(ClientRole::Endpoint {
        api_key: cfg.api_key.as_ref(),
        timeout: None,
    })?;
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
    let raised = cfg
        .raised_requests()
        .map(|m| ReportWarning::new(WarningKind::RequestsRaised, m));
    for w in pre
        .warnings
        .into_iter()
        .chain(scrape_notes)
        .chain(insecure)
        .chain(raised)
    {
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
    let progress = Progress::new(
        cfg.progress,
        estimate::plan_work(cfg),
        pre.timing.map(|t| t.e2e_ms(cfg.max_tokens)),
    );
    for (li, load) in loads.iter().enumerate() {
        if ctx.stop.is_cancelled() {
            break;
        }
        progress.level_started(li);
        run_level(&ctx, li, *load, &run, scraper.as_ref(), &progress).await;
    }
    progress.finish();
    if let Some(s) = scraper {
        s.stop().await;
    }
    let interrupted = ctx.stop.is_cancelled();
    let lag_summary = lag_monitor.stop().await;
    let mut run = Arc::try_unwrap(run)
        .map_err(|_| Error::Internal("the scraper still holds the run".into()))?
        .into_inner()
        .map_err(|_| Error::Internal("a thread panicked while recording".into()))?;
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
