//! The page's benchmark run: levels, warm-up, rounds, closed loop; the same plan as
//! the native client (`core::plan`), the same analysis (`core::analysis`), the same
//! report (`tokenscope.client/1`, `"source": "browser"`).
//!
//! Each level: warm-up requests (kept in the raw records, never measured), then the
//! rounds, each keeping `c` requests in flight. A finished request is handed on at
//! once and the worker sends its next one; the request's record is completed with
//! its first-paint time when the paint is known (a few frames later) and only then
//! pushed into the level's accumulator, so waiting for a paint never changes the
//! load. Everything computed from records is computed by core.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use futures_util::future::join_all;
use serde::Serialize;
use tokenscope_core::analysis::{LevelAccumulator, LevelOptions, analyze_sweep};
use tokenscope_core::metrics::MetricOptions;
use tokenscope_core::openai::{RequestSpec, first_model_id, request_body};
use tokenscope_core::plan;
use tokenscope_core::prompts::{approx_tokens, synthetic_prompt};
use tokenscope_core::raw::{RAW_SCHEMA, RawHeader, RawLine};
use tokenscope_core::report::{
    CLIENT_SCHEMA, ClientReport, Environment, LevelReport, Load, ReportWarning, RunConfig, Source,
};
use tokenscope_core::stats::{Samples, Summary};
use tokenscope_core::timeline::Outcome;

use super::browser;
use super::clock::{CancelToken, now, sleep_ms};
use super::fetch::FetchTarget;
use super::paint::Painter;
use super::sim::{SimLog, SimServer};
use super::transport::{Prepared, Transport, run_request};
use super::worker::{NetWorker, WorkerTarget};
use crate::settings::{NetMode, RunPlan, Settings};

/// Browsers open at most this many HTTP/1.1 connections per host; more requests
/// queue inside the browser, not at the server.
pub const HTTP1_CONNECTIONS_PER_HOST: u32 = 6;

/// Finished requests after which an unreported protocol is taken as unknown.
const PROTOCOL_CHECKS: u32 = 4;

/// How often the live table is refreshed, ms.
const LIVE_EVERY_MS: f64 = 1000.0;

/// One finished request as the page keeps it: a `tokenscope.raw/1` line plus what
/// only the page knows.
#[derive(Debug, Clone, Serialize)]
pub struct PageRecord {
    /// The raw line (request id, level, round, warm-up flag, the record).
    #[serde(flatten)]
    pub line: RawLine,
    /// Which on-screen lane (concurrency slot) showed it.
    pub lane: usize,
    /// When the first-token element was inserted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paint_inserted_ms: Option<f64>,
    /// The animation-frame fallback's reading, kept even when Element Timing gave
    /// the paint time (to compare the two methods on one browser).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paint_fallback_ms: Option<f64>,
}

/// Where the run is.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Progress {
    /// 0-based level index.
    pub level: usize,
    /// Levels in the run.
    pub levels: usize,
    /// `c=4 warm-up`, `c=4 round 2/3`.
    pub phase: String,
    /// Requests finished in this phase.
    pub finished: u64,
    /// Requests planned in this phase.
    pub planned: u64,
    /// Requests finished in the whole run (warm-up included).
    pub total_finished: u64,
}

/// What the runner tells the page as it goes.
#[derive(Debug, Clone)]
pub enum RunEvent {
    /// The run began.
    Started {
        /// Against the built-in simulator.
        simulated: bool,
        /// The model used.
        model: String,
        /// The run's id (prefix of every request id).
        run_tag: String,
    },
    /// Progress.
    Progress(Progress),
    /// The protocol seen (`http/1.1`, `h2`).
    Protocol(String),
    /// A warning, as soon as it is known.
    Warning(ReportWarning),
    /// The levels so far: finished ones and a live snapshot of the current one.
    Levels {
        /// The levels.
        levels: Vec<LevelReport>,
        /// Every level in it is finished (charts are redrawn only then: drawing
        /// during a level would load the page it measures).
        settled: bool,
    },
}

/// What a run produces.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// The report.
    pub report: ClientReport,
    /// Every request, warm-up included.
    pub records: Vec<PageRecord>,
    /// The raw header (for a `tokenscope.raw/1` export).
    pub raw_header: RawHeader,
    /// The simulator's own log (simulated runs).
    pub sim_log: Option<Vec<SimLog>>,
}

/// A run to make.
#[derive(Clone)]
pub struct RunInput {
    /// The settings.
    pub settings: Settings,
    /// The API key (memory only).
    pub api_key: Option<String>,
    /// The stream view and paint probe.
    pub painter: Painter,
    /// The stop signal.
    pub cancel: CancelToken,
    /// The network worker's script (`net-worker.js`), when the page has it: real
    /// endpoints are then streamed off the main thread.
    pub worker_url: Option<String>,
}

/// The page's own costs over a run, ms.
#[derive(Debug, Default)]
struct Overhead {
    parse_per_read: Samples,
    reads: u64,
    events: u64,
}

/// Everything a run's workers share.
struct Ctx {
    input: RunInput,
    plan: RunPlan,
    transport: Transport,
    model: String,
    run_tag: String,
    next_index: Cell<u64>,
    records: RefCell<Vec<PageRecord>>,
    overhead: RefCell<Overhead>,
    pending_paints: Cell<usize>,
    first_done: Cell<bool>,
    protocol_checks: Cell<u32>,
    protocol: RefCell<Option<String>>,
    warnings: RefCell<Vec<ReportWarning>>,
    on_event: Box<dyn Fn(RunEvent)>,
    total_finished: Cell<u64>,
}

/// Which phase a request belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Warmup,
    Round(u32),
}

impl Ctx {
    /// Build `n` requests (bodies before the round starts: building one never
    /// delays a send).
    fn prepare(&self, n: u64) -> Vec<Prepared> {
        let s = &self.input.settings;
        (0..n)
            .map(|_| {
                let index = self.next_index.get();
                self.next_index.set(index + 1);
                let spec = RequestSpec {
                    api: s.api,
                    model: self.model.clone(),
                    prompt: synthetic_prompt(s.input_tokens, s.seed, index),
                    max_tokens: s.max_tokens,
                    ignore_eos: s.ignore_eos,
                    min_tokens: None,
                    temperature: None,
                };
                Prepared {
                    request_id: format!("web-{}-{index}", self.run_tag),
                    prompt_tokens: approx_tokens(&spec.prompt).max(1),
                    body: serde_json::to_string(&request_body(&spec))
                        .expect("a JSON value serializes"),
                    api: s.api,
                    max_tokens: s.max_tokens,
                }
            })
            .collect()
    }

    fn emit(&self, e: RunEvent) {
        (self.on_event)(e);
    }

    fn warn(&self, kind: &str, message: String) {
        let w = ReportWarning {
            kind: kind.into(),
            message,
        };
        self.emit(RunEvent::Warning(w.clone()));
        self.warnings.borrow_mut().push(w);
    }

    /// After each finished request until it is known: which protocol carried the
    /// requests, and whether the browser's per-host connection limit applies.
    fn check_protocol(&self) {
        if self.first_done.get() {
            return;
        }
        let Some(url) = self.transport.url() else {
            self.first_done.set(true);
            return;
        };
        let seen = self.transport.protocol();
        let n = self.protocol_checks.get() + 1;
        self.protocol_checks.set(n);
        // The browser may report the protocol only once a response has ended
        // (Resource Timing): look a few times before concluding it will not.
        if seen.is_none() && n < PROTOCOL_CHECKS {
            return;
        }
        self.first_done.set(true);
        // Browsers speak only HTTP/1.1 in clear text (no h2c).
        let proto = seen
            .clone()
            .or_else(|| url.starts_with("http://").then(|| "http/1.1".to_owned()));
        let max_c = self
            .plan
            .loads
            .iter()
            .map(|l| l.value() as u32)
            .max()
            .unwrap_or(1);
        match &proto {
            Some(p) => {
                *self.protocol.borrow_mut() = Some(p.clone());
                self.emit(RunEvent::Protocol(p.clone()));
                if (p == "http/1.1" || p == "http/1.0") && max_c > HTTP1_CONNECTIONS_PER_HOST {
                    self.warn(
                        "http1_connection_limit",
                        format!(
                            "the endpoint speaks {p}{}: a browser opens at most {HTTP1_CONNECTIONS_PER_HOST} connections per host, so at concurrency above {HTTP1_CONNECTIONS_PER_HOST} (up to {max_c} here) the extra requests queue inside the browser, not at the server, and their latencies include that wait; serve the endpoint over HTTPS with HTTP/2, or keep the page's concurrency at {HTTP1_CONNECTIONS_PER_HOST} or less",
                            if seen.is_none() {
                                " (clear-text http: browsers never use HTTP/2 there)"
                            } else {
                                ""
                            }
                        ),
                    );
                }
            }
            None if max_c > HTTP1_CONNECTIONS_PER_HOST => self.warn(
                "protocol_unknown",
                format!(
                    "the browser did not say which protocol the endpoint uses (it sends no Timing-Allow-Origin header); if it is HTTP/1.1, requests beyond {HTTP1_CONNECTIONS_PER_HOST} per host (up to {max_c} here) queue inside the browser"
                ),
            ),
            None => {}
        }
    }
}

/// Run the benchmark. `on_event` sees progress as it happens.
pub async fn run(
    input: RunInput,
    on_event: impl Fn(RunEvent) + 'static,
) -> Result<RunOutput, String> {
    let settings = input.settings.clone();
    let plan = settings.validate()?;
    let started_at = browser::now_rfc3339();
    browser::grow_resource_timing_buffer();
    let run_tag = browser::run_tag();
    let (transport, model) = match &plan.base_url {
        None => {
            let sim = SimServer::new(plan.sim.clone());
            let model = if settings.model.is_empty() {
                sim.config().model.clone()
            } else {
                settings.model.clone()
            };
            (Transport::Sim(sim), model)
        }
        Some(base) => {
            let model = if settings.model.is_empty() {
                let text = FetchTarget::get_models(base, input.api_key.as_deref())
                    .await
                    .map_err(|e| format!("could not list the models: {e}; type the model name"))?;
                first_model_id(&text)
                    .ok_or_else(|| format!("{base}/models lists no model; type the model name"))?
            } else {
                settings.model.clone()
            };
            let url = format!("{base}/{}", settings.api.path());
            let transport = match (&input.worker_url, settings.net) {
                (Some(worker), NetMode::Worker) => Transport::Worker(WorkerTarget {
                    worker: NetWorker::start(worker)?,
                    url,
                    api_key: input.api_key.clone(),
                    send_request_id: settings.request_ids,
                }),
                _ => Transport::Fetch(FetchTarget {
                    url,
                    api_key: input.api_key.clone(),
                    send_request_id: settings.request_ids,
                }),
            };
            (transport, model)
        }
    };
    on_event(RunEvent::Started {
        simulated: transport.is_simulated(),
        model: model.clone(),
        run_tag: run_tag.clone(),
    });
    let ctx = Rc::new(Ctx {
        input,
        plan,
        transport,
        model,
        run_tag,
        next_index: Cell::new(0),
        records: RefCell::new(Vec::new()),
        overhead: RefCell::new(Overhead::default()),
        pending_paints: Cell::new(0),
        first_done: Cell::new(false),
        protocol_checks: Cell::new(0),
        protocol: RefCell::new(None),
        warnings: RefCell::new(Vec::new()),
        on_event: Box::new(on_event),
        total_finished: Cell::new(0),
    });
    if ctx.transport.is_simulated() {
        ctx.warn(
            "simulated_endpoint",
            "the built-in simulated endpoint answered, inside the page (no network): the figures measure the simulator model and this browser's rendering, not a server".into(),
        );
    }
    let hidden = Rc::new(Cell::new(!browser::page_visible()));
    let lag = LagMonitor::start(Rc::clone(&hidden));
    ctx.input.painter.take_cost();
    let mut levels: Vec<LevelReport> = Vec::new();
    let mut warmup_used: Option<u32> = None;
    for (li, load) in ctx.plan.loads.clone().into_iter().enumerate() {
        if ctx.input.cancel.is_cancelled() {
            break;
        }
        let Load::Concurrency(c) = load else {
            continue;
        };
        ctx.input.painter.set_lanes(c as usize);
        let opts = LevelOptions {
            slos: ctx.plan.slos.clone(),
            metric: MetricOptions {
                stall_threshold_ms: settings.stall_threshold_ms,
            },
            ..LevelOptions::default()
        };
        let acc = Rc::new(RefCell::new(LevelAccumulator::new(load, opts)));
        let warm_n = settings
            .warmup
            .unwrap_or_else(|| plan::default_warmup(load));
        warmup_used.get_or_insert(warm_n);
        if warm_n > 0 {
            let phase = PhaseRun {
                level: li,
                load,
                concurrency: plan::warmup_concurrency(load),
                requests: u64::from(warm_n),
                phase: Phase::Warmup,
                label: format!("{} warm-up", load.label()),
            };
            run_closed(&ctx, &phase, None, &levels).await;
        }
        acc.borrow_mut().set_start(now());
        for round in 0..settings.rounds {
            if ctx.input.cancel.is_cancelled() {
                break;
            }
            let phase = PhaseRun {
                level: li,
                load,
                concurrency: c,
                requests: plan::round_requests(settings.requests, settings.rounds, round, load),
                phase: Phase::Round(round),
                label: format!("{} round {}/{}", load.label(), round + 1, settings.rounds),
            };
            run_closed(&ctx, &phase, Some(&acc), &levels).await;
        }
        let report = acc.borrow().clone().finish();
        if report.sent > 0 {
            levels.push(report);
            ctx.emit(RunEvent::Levels {
                levels: levels.clone(),
                settled: true,
            });
        }
    }
    let lag_summary = lag.stop();
    let interrupted = ctx.input.cancel.is_cancelled();
    // Warnings drawn from the run.
    for w in tokenscope_core::report::level_warnings(&levels) {
        ctx.warn(&w.kind, w.message);
    }
    let unpainted = ctx
        .records
        .borrow()
        .iter()
        .filter(|r| {
            !r.line.warmup
                && r.line.record.outcome == Outcome::Ok
                && !r.line.record.token_events_ms.is_empty()
                && r.line.record.t_first_paint_ms.is_none()
        })
        .count();
    if unpainted > 0 {
        ctx.warn(
            "paint_unmeasured",
            format!("{unpainted} successful requests have no first-paint time (the page was hidden, or their text was never painted)"),
        );
    }
    if hidden.get() {
        ctx.warn(
            "page_hidden",
            "the page was hidden during the run: browsers throttle timers in hidden tabs and paint nothing, so paint times and timings from then are not representative; keep the tab visible".into(),
        );
    }
    if let Some(w) = tokenscope_core::report::event_loop_warning(&lag_summary, "page") {
        ctx.warn(&w.kind, w.message);
    }
    let cost = ctx.input.painter.take_cost();
    let overhead = ctx.overhead.borrow();
    let parse = overhead.parse_per_read.summary();
    let insert = Summary::from_samples(&cost.insert_ms);
    let frame = Summary::from_samples(&cost.frame_ms);
    let ms = tokenscope_core::export::fmt_ms;
    ctx.warn(
        "page_overhead",
        format!(
            "the page's own work (measured, not subtracted): decoding and parsing {} ms per read at p50 ({} at p99) over {} reads carrying {} token events; first-token insertion {} ms at p50 ({} at p99, {} requests); batched text updates {} ms per frame at p50 ({} at p99, {} frames, {} lane updates)",
            ms(parse.p50),
            ms(parse.p99),
            overhead.reads,
            overhead.events,
            ms(insert.p50),
            ms(insert.p99),
            insert.count,
            ms(frame.p50),
            ms(frame.p99),
            frame.count,
            cost.batched_events
        ),
    );
    drop(overhead);
    let config = settings.run_config(&ctx.plan, &ctx.model, warmup_used.unwrap_or(0));
    let report = ClientReport {
        schema: CLIENT_SCHEMA.into(),
        source: Source::Browser,
        sweep: analyze_sweep(&levels, &ctx.plan.slos),
        config: config.clone(),
        environment: Environment {
            tool_version: tokenscope_core::VERSION.into(),
            user_agent: browser::user_agent(),
            protocol: ctx.protocol.borrow().clone(),
            cpus: browser::cpus(),
            started_at: Some(started_at),
            simulated: ctx.transport.is_simulated(),
            event_loop_lag_ms: Some(lag_summary),
            ..Environment::default()
        },
        levels,
        warnings: ctx.warnings.borrow().clone(),
        interrupted,
    };
    let sim_log = match &ctx.transport {
        Transport::Sim(s) => Some(s.log()),
        Transport::Fetch(_) | Transport::Worker(_) => None,
    };
    let records = ctx.records.borrow().clone();
    Ok(RunOutput {
        report,
        records,
        raw_header: raw_header(config),
        sim_log,
    })
}

/// The `tokenscope.raw/1` header of a browser run.
pub fn raw_header(config: RunConfig) -> RawHeader {
    RawHeader {
        schema: RAW_SCHEMA.into(),
        tool_version: tokenscope_core::VERSION.into(),
        source: Source::Browser,
        config,
    }
}

/// The records as a `tokenscope.raw/1` JSONL file (header, then one line each).
pub fn raw_jsonl(header: &RawHeader, records: &[PageRecord]) -> String {
    let mut out = serde_json::to_string(header).unwrap_or_default();
    out.push('\n');
    for r in records {
        out.push_str(&serde_json::to_string(r).unwrap_or_default());
        out.push('\n');
    }
    out
}

/// One phase of a level (warm-up or a round).
struct PhaseRun {
    level: usize,
    load: Load,
    concurrency: u32,
    requests: u64,
    phase: Phase,
    label: String,
}

/// Closed loop: `concurrency` workers, each sending its next request when its last
/// one ends, until the phase's requests are all sent; then wait for their paints.
async fn run_closed(
    ctx: &Rc<Ctx>,
    run: &PhaseRun,
    acc: Option<&Rc<RefCell<LevelAccumulator>>>,
    done_levels: &[LevelReport],
) {
    let queue = RefCell::new(VecDeque::from(ctx.prepare(run.requests)));
    let finished = Cell::new(0u64);
    let last_live = Cell::new(now());
    let progress = |finished: u64| {
        ctx.emit(RunEvent::Progress(Progress {
            level: run.level,
            levels: ctx.plan.loads.len(),
            phase: run.label.clone(),
            finished,
            planned: run.requests,
            total_finished: ctx.total_finished.get(),
        }));
    };
    progress(0);
    let workers = (0..run.concurrency.min(run.requests as u32)).map(|lane| {
        let queue = &queue;
        let finished = &finished;
        let last_live = &last_live;
        let progress = &progress;
        async move {
            let lane = lane as usize;
            loop {
                if ctx.input.cancel.is_cancelled() {
                    break;
                }
                let Some(req) = queue.borrow_mut().pop_front() else {
                    break;
                };
                let sent = run_request(
                    &ctx.transport,
                    &req,
                    Some((&ctx.input.painter, lane)),
                    ctx.plan.timeout_ms,
                    &ctx.input.cancel,
                )
                .await;
                {
                    let mut o = ctx.overhead.borrow_mut();
                    o.reads += sent.parse.per_read_ms.len() as u64;
                    o.events += sent.timeline.record().token_events_ms.len() as u64;
                    for ms in &sent.parse.per_read_ms {
                        o.parse_per_read.push(*ms);
                    }
                }
                ctx.check_protocol();
                ctx.pending_paints.set(ctx.pending_paints.get() + 1);
                wasm_bindgen_futures::spawn_local(finalize(
                    Rc::clone(ctx),
                    sent,
                    req.request_id,
                    Where {
                        level: run.level,
                        load: run.load,
                        phase: run.phase,
                        lane,
                    },
                    acc.cloned(),
                ));
                finished.set(finished.get() + 1);
                ctx.total_finished.set(ctx.total_finished.get() + 1);
                if now() - last_live.get() >= LIVE_EVERY_MS {
                    last_live.set(now());
                    progress(finished.get());
                    if let Some(acc) = acc {
                        // The live snapshot (a clone of the level's samples, sorted
                        // for percentiles) runs as its own task once this stream
                        // yields, not inline between a response and the next send.
                        let (ctx, acc) = (Rc::clone(ctx), Rc::clone(acc));
                        let mut levels = done_levels.to_vec();
                        wasm_bindgen_futures::spawn_local(async move {
                            levels.push(acc.borrow().clone().finish());
                            ctx.emit(RunEvent::Levels {
                                levels,
                                settled: false,
                            });
                        });
                    }
                }
            }
        }
    });
    join_all(workers).await;
    while ctx.pending_paints.get() > 0 {
        sleep_ms(10.0).await;
    }
    progress(finished.get());
    if let Some(acc) = acc {
        let mut levels = done_levels.to_vec();
        levels.push(acc.borrow().clone().finish());
        ctx.emit(RunEvent::Levels {
            levels,
            settled: false,
        });
    }
}

/// Where a finished request belongs.
#[derive(Debug, Clone, Copy)]
struct Where {
    level: usize,
    load: Load,
    phase: Phase,
    lane: usize,
}

/// Complete a record with its paint (once known) and hand it on.
async fn finalize(
    ctx: Rc<Ctx>,
    sent: super::transport::Sent,
    request_id: String,
    at: Where,
    acc: Option<Rc<RefCell<LevelAccumulator>>>,
) {
    let paint = match sent.probe {
        Some(p) => Some(p.settle().await),
        None => None,
    };
    let mut tl = sent.timeline;
    if let Some((t, method)) = paint.and_then(|p| p.time) {
        tl.on_first_paint(t, method);
    }
    let record = tl.finish();
    if let (Phase::Round(r), Some(acc)) = (at.phase, &acc) {
        acc.borrow_mut().push(r as usize, &record);
    }
    let (concurrency, rate_per_s) = match at.load {
        Load::Concurrency(c) => (Some(c), None),
        Load::Rate(r) => (None, Some(r)),
    };
    ctx.records.borrow_mut().push(PageRecord {
        line: RawLine {
            request_id,
            level: at.level,
            concurrency,
            rate_per_s,
            round: match at.phase {
                Phase::Round(r) => Some(r + 1),
                Phase::Warmup => None,
            },
            warmup: at.phase == Phase::Warmup,
            record,
        },
        lane: at.lane,
        paint_inserted_ms: paint.map(|p| p.inserted_ms),
        paint_fallback_ms: paint.and_then(|p| p.fallback_ms),
    });
    ctx.pending_paints
        .set(ctx.pending_paints.get().saturating_sub(1));
}

/// Measures how late a 10 ms timer fires on the page's event loop, all run long
/// (as the native client does on its runtime), and whether the page was hidden.
struct LagMonitor {
    stop: Rc<Cell<bool>>,
    samples: Rc<RefCell<Samples>>,
}

impl LagMonitor {
    fn start(hidden: Rc<Cell<bool>>) -> Self {
        let stop = Rc::new(Cell::new(false));
        let samples = Rc::new(RefCell::new(Samples::with_cap(100_000)));
        let (s, out) = (Rc::clone(&stop), Rc::clone(&samples));
        wasm_bindgen_futures::spawn_local(async move {
            const PERIOD_MS: f64 = 10.0;
            while !s.get() {
                let start = now();
                sleep_ms(PERIOD_MS).await;
                if !browser::page_visible() {
                    hidden.set(true);
                }
                out.borrow_mut().push((now() - start - PERIOD_MS).max(0.0));
            }
        });
        Self { stop, samples }
    }

    fn stop(self) -> Summary {
        self.stop.set(true);
        self.samples.borrow().summary()
    }
}
