//! The page's benchmark run: levels, warm-up, rounds, closed loop; the same plan as
//! the native client (`core::workload::plan`), the same recorder and report
//! assembly (`core::report::assemble`), the same report (`tokenscope.client/1`,
//! `"source": "browser"`). It reads only the validated [`RunPlan`].
//!
//! Each level: warm-up requests (kept in the raw records, never measured), then the
//! rounds, each keeping `c` requests in flight. A finished request is handed on at
//! once and the worker sends its next one; the request's record is completed with
//! its first-paint time when the paint is known (a few frames later) and only then
//! given to the recorder, so waiting for a paint never changes the load. Everything
//! computed from records is computed by core.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use futures_util::future::join_all;
use tokenscope_core::analyze::server::scrape::ScrapeTarget;
use tokenscope_core::analyze::stats::{Samples, Summary};
use tokenscope_core::measure::openai::first_model_id;
use tokenscope_core::page::scrape::TakenScrape;
use tokenscope_core::page::workload::{PreparedWorkload, WorkloadFile, WorkloadRequest};
use tokenscope_core::report::assemble::RunRecorder;
use tokenscope_core::report::raw::{Phase, RawEvent, RawLine};
use tokenscope_core::report::transport::{HeaderInfo, TransportInfo};
use tokenscope_core::report::{
    ClientReport, Environment, LevelReport, Load, ReportWarning, Source, WarningKind,
};
use tokenscope_core::workload::conversation::{Conversation, History};
use tokenscope_core::workload::plan;
use tokenscope_core::workload::tokens::InputLength;

use tokenscope_core::measure::record::{ErrorKind, Outcome};
use tokenscope_core::page::transport::{MIXED_CONTENT, is_mixed_content};
use tokenscope_core::parse::redact_url;

use super::browser;
use super::clock::{CancelToken, now, sleep_ms};
use super::fetch::{Auth, FetchTarget};
use super::paint::Painter;
pub use super::records::{PageEntry, PageRaw, PageRecord, raw_jsonl};
use super::requests::Requests;
use super::scrape::{self, Scraper};
use super::sim::{SimLog, SimServer};
use super::tokens::{self, PageTokens};
use super::transport::{Prepared, Transport, run_request};
use super::watch::{self, LagMonitor};
use super::worker::{NetWorker, WorkerTarget};
use crate::settings::{NetMode, OpenLoop, RunPlan, ServerMetricsTarget};

/// Finished requests after which an unreported protocol is taken as unknown.
const PROTOCOL_CHECKS: u32 = 4;

/// How often the live table is refreshed, ms.
const LIVE_EVERY_MS: f64 = 1000.0;

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
    /// The raw file (for a `tokenscope.raw/1.2` export).
    pub raw: PageRaw,
    /// The simulator's own log (simulated runs).
    pub sim_log: Option<Vec<SimLog>>,
    /// The report's JSON when it carries what this module does not read (the
    /// server view of a run that scraped `/metrics`, joined by the report module);
    /// `None`: `report.to_json()` is the whole report.
    pub report_json: Option<String>,
}

/// A run to make.
#[derive(Clone)]
pub struct RunInput {
    /// The validated plan: the only configuration the run reads.
    pub plan: RunPlan,
    /// The API key and extra headers (memory only).
    pub auth: Auth,
    /// The stream view and paint probe.
    pub painter: Painter,
    /// The stop signal.
    pub cancel: CancelToken,
    /// The network worker's script (`net-worker.js`), when the page has it: real
    /// endpoints are then streamed off the main thread.
    pub worker_url: Option<String>,
    /// How the prompts are sized, once found: the tiers of one run share it
    /// (the server's tokenizer is probed once).
    pub tokens: Rc<RefCell<Option<PageTokens>>>,
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
    transport: Transport,
    /// What is sent, request by request.
    requests: Requests,
    recorder: RefCell<RunRecorder>,
    records: RefCell<Vec<PageRecord>>,
    entries: RefCell<Vec<PageEntry>>,
    overhead: RefCell<Overhead>,
    pending_paints: Cell<usize>,
    first_done: Cell<bool>,
    protocol_checks: Cell<u32>,
    protocol: RefCell<Option<String>>,
    on_event: Box<dyn Fn(RunEvent)>,
    total_finished: Cell<u64>,
    /// Scraping `/metrics` (when the plan asks for it and the report module loaded).
    scraper: RefCell<Option<Rc<Scraper>>>,
    /// The run's scrapes, in order: taken (text kept) until the report module
    /// reads them into raw lines at a level's end.
    scrapes: RefCell<Vec<ScrapeSlot>>,
}

/// One scrape of the run.
#[derive(Debug)]
enum ScrapeSlot {
    /// Taken, not read yet.
    Taken(TakenScrape),
    /// Read: the raw file's line (`None`: the report module could not read it).
    Read(Option<String>),
}

impl Ctx {
    fn emit(&self, e: RunEvent) {
        (self.on_event)(e);
    }

    /// Where phase `run` stands: `finished` of `planned` requests.
    fn progress(&self, run: &PhaseRun, finished: u64, planned: u64) {
        self.emit(RunEvent::Progress(Progress {
            level: run.level,
            levels: self.input.plan.loads.len(),
            phase: run.label.clone(),
            finished,
            planned,
            total_finished: self.total_finished.get(),
        }));
    }

    fn event(&self, e: RawEvent) {
        self.entries.borrow_mut().push(PageEntry::Event(e));
    }

    fn warn(&self, kind: WarningKind, message: String) {
        let w = ReportWarning::new(kind, message);
        self.emit(RunEvent::Warning(w.clone()));
        let e = self.recorder.borrow_mut().warn(w);
        self.event(e);
    }

    /// A scrape taken: into the raw file's order, read later.
    fn scraped(&self, t: TakenScrape) {
        let mut scrapes = self.scrapes.borrow_mut();
        self.entries
            .borrow_mut()
            .push(PageEntry::Scrape(scrapes.len()));
        scrapes.push(ScrapeSlot::Taken(t));
    }

    /// Scrape every target now (a level's start or end), if scraping.
    async fn scrape_now(&self) {
        let scraper = self.scraper.borrow().clone();
        if let Some(s) = scraper {
            s.now().await;
        }
    }

    /// Have the report module read the scrapes taken so far (between levels:
    /// parsing never runs while a level is measured).
    async fn read_scrapes(&self) {
        let (at, taken): (Vec<usize>, Vec<TakenScrape>) = self
            .scrapes
            .borrow()
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                ScrapeSlot::Taken(t) => Some((i, t.clone())),
                ScrapeSlot::Read(_) => None,
            })
            .unzip();
        if taken.is_empty() {
            return;
        }
        let read = super::report::read_scrapes(&taken).await;
        let mut scrapes = self.scrapes.borrow_mut();
        match read {
            Ok(lines) => {
                for (i, r) in at.into_iter().zip(lines) {
                    scrapes[i] = ScrapeSlot::Read(Some(r.line));
                }
            }
            Err(e) => {
                for i in at {
                    scrapes[i] = ScrapeSlot::Read(None);
                }
                drop(scrapes);
                self.warn(
                    WarningKind::ServerMetrics,
                    format!("the report module could not read the scrapes ({e}): the server view is incomplete"),
                );
            }
        }
    }

    /// A finished request (its paint known): to the recorder and the records.
    fn finished(&self, page: PageRecord) {
        self.recorder.borrow_mut().record(&page.line);
        let mut records = self.records.borrow_mut();
        self.entries
            .borrow_mut()
            .push(PageEntry::Request(records.len()));
        records.push(page);
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
        let max_c = self
            .input
            .plan
            .loads
            .iter()
            .map(|l| l.value() as u32)
            .max()
            .unwrap_or(1);
        let (proto, warning) = watch::protocol(seen, url, max_c);
        if let Some(p) = proto {
            *self.protocol.borrow_mut() = Some(p.clone());
            self.emit(RunEvent::Protocol(p));
        }
        if let Some(w) = warning {
            self.warn(w.kind, w.message);
        }
    }
}

/// Run the benchmark. `on_event` sees progress as it happens.
pub async fn run(
    mut input: RunInput,
    on_event: impl Fn(RunEvent) + 'static,
) -> Result<RunOutput, String> {
    let started_at = browser::now_rfc3339();
    browser::grow_resource_timing_buffer();
    let run_tag = browser::run_tag();
    let plan = &input.plan;
    let (transport, model) = match &plan.base {
        None => {
            let sim = SimServer::new(plan.sim.clone());
            let model = plan
                .model
                .clone()
                .unwrap_or_else(|| sim.config().model.clone());
            (Transport::Sim(sim), model)
        }
        Some(base) => {
            let model = match &plan.model {
                Some(m) => m.clone(),
                None => {
                    let url = base.endpoint("models");
                    let text = match FetchTarget::get_text(&url, &input.auth).await {
                        Ok(t) => t,
                        Err(e) => {
                            return Err(explain_no_response(&url, plan, &input.auth)
                                .await
                                .unwrap_or_else(|| {
                                    format!("could not list the models: {e}; type the model name")
                                }));
                        }
                    };
                    first_model_id(&text).ok_or_else(|| {
                        format!("{} lists no model; type the model name", base.redacted())
                    })?
                }
            };
            let url = base.endpoint(plan.api.path());
            let transport = match (&input.worker_url, plan.net) {
                (Some(worker), NetMode::Worker) => Transport::Worker(WorkerTarget {
                    worker: NetWorker::start(worker)?,
                    url,
                    auth: input.auth.clone(),
                    send_request_id: plan.request_ids,
                }),
                _ => Transport::Fetch(FetchTarget {
                    url,
                    auth: input.auth.clone(),
                    send_request_id: plan.request_ids,
                }),
            };
            (transport, model)
        }
    };
    // Exact prompts (the server's tokenizer), the shared prefix, and a prompt
    // length given as a fraction of the context window: settled before anything
    // is measured.
    let cached = input.tokens.borrow().clone();
    let page_tokens = match cached {
        Some(t) => t,
        None => {
            let key = &input.auth;
            let t = tokens::prepare(plan, &transport, &model, key, &input.cancel).await?;
            *input.tokens.borrow_mut() = Some(t.clone());
            t
        }
    };
    let mut context_window = None;
    if let Some(f) = plan.input_of_context {
        let window = tokens::context_window(plan, &model, &input.auth).await?;
        context_window = Some(window);
        input.plan.input_tokens = InputLength::OfContext(f).resolve(window);
    }
    let plan = &input.plan;
    // A prompts file or a trace: every body built by the report module. A trace's
    // level is its mean rate, its requests its count, replayed once.
    let workload = load_workload(plan, &model, &page_tokens).await?;
    if let Some((_, rate)) = workload.as_ref().and_then(|w| w.trace.as_ref()) {
        let n = workload.as_ref().map_or(0, |w| w.requests.len() as u64);
        let p = &mut input.plan;
        p.loads = vec![Load::Rate(*rate)];
        p.rounds = 1;
        p.warmup = Some(0);
        p.requests = Some(n);
        // The trace's output lengths are the answers' lengths.
        p.ignore_eos = true;
    }
    let plan = &input.plan;
    on_event(RunEvent::Started {
        simulated: transport.is_simulated(),
        model: model.clone(),
        run_tag: run_tag.clone(),
    });
    let scraping = scrape_setup(plan, &transport, &input.auth).await;
    let mut config = plan.run_config(&model);
    if !scraping.server {
        config.server_metrics_url = None;
    }
    if scraping.targets.is_empty() {
        config.gpu_metrics_url = None;
        config.scrape_interval_s = None;
    }
    match workload.as_ref().map(|w| (w.requests.len(), &w.trace)) {
        Some((_, Some((info, _)))) => config.trace = Some(info.clone()),
        Some((n, None)) => {
            config.distinct_prompts = Some(n as u64);
            config.prompts_hash = workload.as_ref().and_then(|w| w.prompts_hash.clone());
        }
        None => {}
    }
    config.tokens = page_tokens.counting.clone();
    config.context_window = context_window;
    let recorder = RunRecorder::new(Source::Browser, config);
    let ctx = Rc::new(Ctx {
        transport,
        requests: Requests::new(plan, &model, &run_tag, workload, page_tokens),
        recorder: RefCell::new(recorder),
        records: RefCell::new(Vec::new()),
        entries: RefCell::new(Vec::new()),
        overhead: RefCell::new(Overhead::default()),
        pending_paints: Cell::new(0),
        first_done: Cell::new(false),
        protocol_checks: Cell::new(0),
        protocol: RefCell::new(None),
        on_event: Box::new(on_event),
        total_finished: Cell::new(0),
        scraper: RefCell::new(None),
        scrapes: RefCell::new(Vec::new()),
        input,
    });
    for w in scraping.notes {
        ctx.warn(w.kind, w.message);
    }
    if !scraping.targets.is_empty() {
        for t in scraping.first {
            ctx.scraped(t);
        }
        let weak = Rc::downgrade(&ctx);
        let scraper = Rc::new(Scraper::new(
            scraping.targets,
            ctx.input.plan.scrape.interval_ms,
            Box::new(move |t| {
                if let Some(ctx) = weak.upgrade() {
                    ctx.scraped(t);
                }
            }),
        ));
        scraper.start_periodic();
        *ctx.scraper.borrow_mut() = Some(scraper);
    }
    if ctx.transport.is_simulated() {
        ctx.warn(
            WarningKind::SimulatedEndpoint,
            "the built-in simulated endpoint answered, inside the page (no network): the figures measure the simulator model and this browser's rendering, not a server".into(),
        );
    }
    let hidden = Rc::new(Cell::new(!browser::page_visible()));
    let lag = LagMonitor::start(Rc::clone(&hidden));
    ctx.input.painter.take_cost();
    run_levels(&ctx).await;
    if let Some(why) = no_response_cause(&ctx).await {
        if let Some(s) = ctx.scraper.borrow_mut().take() {
            s.stop();
        }
        return Err(why);
    }
    if let Some(s) = ctx.scraper.borrow_mut().take() {
        s.stop();
    }
    ctx.read_scrapes().await;
    let lag_summary = lag.stop();
    let interrupted = ctx.input.cancel.is_cancelled();
    end_warnings(&ctx, hidden.get(), &lag_summary);
    let environment = Environment {
        tool_version: tokenscope_core::VERSION.into(),
        user_agent: browser::user_agent(),
        protocol: ctx.protocol.borrow().clone(),
        // Names only: the values (and the key) are never written.
        transport: (!ctx.transport.is_simulated()).then(|| TransportInfo {
            http_version: "auto".into(),
            headers: ctx
                .input
                .auth
                .headers
                .iter()
                .map(|(name, _)| HeaderInfo {
                    name: name.clone(),
                    value: None,
                })
                .collect(),
            api_key_header: ctx.input.auth.key_header.clone(),
            ..TransportInfo::default()
        }),
        cpus: browser::cpus(),
        started_at: Some(started_at),
        simulated: ctx.transport.is_simulated(),
        event_loop_lag_ms: Some(lag_summary),
        ..Environment::default()
    };
    ctx.event(RawEvent::end(&environment, interrupted));
    let raw = PageRaw {
        header: ctx.recorder.borrow().raw_header(),
        entries: ctx.entries.borrow().clone(),
        scrapes: ctx
            .scrapes
            .borrow()
            .iter()
            .map(|s| match s {
                ScrapeSlot::Read(line) => line.clone(),
                ScrapeSlot::Taken(_) => None,
            })
            .collect(),
    };
    let mut report = ctx
        .recorder
        .borrow()
        .clone()
        .finish(environment, interrupted);
    // A run that scraped: its report with the server view, rebuilt from its raw
    // file by the report module (the code that joins the view lives there).
    // So is one whose conversations' turns, prefix cache or counted prompts the
    // report module analyses.
    let rebuild = raw.scrapes.iter().any(Option::is_some)
        || ctx.input.plan.conversation.is_some()
        || ctx.requests.counts_prompts();
    let report_json = if rebuild {
        let text = raw_jsonl(&raw, &ctx.records.borrow());
        match super::report::rebuild_report(&text).await {
            Ok(json) => match ClientReport::from_json(&json) {
                Ok(r) => {
                    report = r;
                    Some(json)
                }
                Err(e) => {
                    report.warnings.push(ReportWarning::new(
                        WarningKind::ServerMetrics,
                        format!("the server view could not be joined to the report: {e}"),
                    ));
                    None
                }
            },
            Err(e) => {
                report.warnings.push(ReportWarning::new(
                    WarningKind::ServerMetrics,
                    format!("the server view could not be joined to the report: {e}"),
                ));
                None
            }
        }
    } else {
        None
    };
    let sim_log = match &ctx.transport {
        Transport::Sim(s) => Some(s.log()),
        Transport::Fetch(_) | Transport::Worker(_) => None,
    };
    let records = ctx.records.borrow().clone();
    Ok(RunOutput {
        report,
        records,
        raw,
        sim_log,
        report_json,
    })
}

/// The plan's prompts file or trace: fetched (the key never goes with it), then
/// read by the report module with the CLI's parsers, which builds every body.
/// A file that cannot be fetched or read stops the run before it starts, naming
/// the file, the line and the field.
async fn load_workload(
    plan: &RunPlan,
    model: &str,
    tokens: &PageTokens,
) -> Result<Option<PreparedWorkload>, String> {
    let (what, url, file) = match (&plan.open_loop, &plan.prompts) {
        (
            Some(OpenLoop::Trace {
                url,
                speed,
                token_scale,
            }),
            _,
        ) => (
            "trace file",
            url,
            WorkloadFile::Trace {
                speed: *speed,
                token_scale: *token_scale,
                limit: plan.requests,
            },
        ),
        (_, Some(p)) => (
            "prompts file",
            &p.url,
            WorkloadFile::Prompts { sample: p.sample },
        ),
        _ => return Ok(None),
    };
    let shown = tokenscope_core::parse::redact_url(url);
    let text = FetchTarget::get_text(url, &Auth::default())
        .await
        .map_err(|e| format!("{what} {shown}: {e}"))?;
    let request = WorkloadRequest {
        name: shown.clone(),
        text,
        file,
        seed: plan.seed,
        api: plan.api,
        model: model.to_owned(),
        max_tokens: plan.max_tokens,
        ignore_eos: plan.ignore_eos,
        words: tokens
            .words
            .iter()
            .flatten()
            .map(|w| (*w).to_owned())
            .collect(),
        system: tokens.prefix.clone(),
        // Input tiers pick the file's prompts by length.
        tier: plan
            .tiers
            .iter()
            .any(|t| t.input != plan.tiers[0].input)
            .then_some(plan.input_tokens),
    };
    let w = super::report::prepare_workload(&request)
        .await
        .map_err(|e| format!("{what} {shown}: {e}"))?;
    if plan.conversation.is_some() && w.requests.iter().any(|r| r.prompt.is_none()) {
        return Err(format!(
            "conversation: {shown} holds whole conversations ({{\"messages\": ...}}); a conversation takes prompts ({{\"prompt\": ...}}), one per turn"
        ));
    }
    Ok(Some(w))
}

/// Why no request got a response, when the page can tell (the browser says only
/// "Failed to fetch"): the endpoint is mixed content, or its CORS preflight
/// refuses the extra headers. `None` when some request got a response, or the
/// cause is not one of these.
async fn no_response_cause(ctx: &Ctx) -> Option<String> {
    let none_answered = {
        let records = ctx.records.borrow();
        !records.is_empty()
            && records.iter().all(|r| {
                matches!(
                    &r.line.record.outcome,
                    Outcome::Error {
                        kind: ErrorKind::Connect,
                        ..
                    }
                )
            })
    };
    let url = ctx.transport.url()?;
    if !none_answered {
        return None;
    }
    explain_no_response(url, &ctx.input.plan, &ctx.input.auth).await
}

/// Why `url` gave no response: mixed content, or (with extra headers, or the key
/// in its own header) a CORS preflight that does not allow them, found by one
/// request the browser sends without a preflight (`GET {base}/models`, no
/// headers): if that answers, the endpoint is there and the headers are refused.
pub async fn explain_no_response(url: &str, plan: &RunPlan, auth: &Auth) -> Option<String> {
    if is_mixed_content(&browser::location_base(), url) {
        return Some(format!(
            "no response from {}: {MIXED_CONTENT}",
            redact_url(url)
        ));
    }
    let mut names: Vec<String> = auth.headers.iter().map(|(n, _)| n.clone()).collect();
    if auth.key.is_some()
        && let Some(h) = &auth.key_header
    {
        names.insert(0, h.clone());
    }
    let probe = plan.base.as_ref()?.endpoint("models");
    if names.is_empty()
        || FetchTarget::get_text(&probe, &Auth::default())
            .await
            .is_err_and(|e| e.starts_with("no response"))
    {
        return None;
    }
    Some(format!(
        "no response from {}: the endpoint answers a request without extra headers, but its CORS preflight does not allow the header(s) {}: its Access-Control-Allow-Headers must list them",
        redact_url(url),
        names.join(", ")
    ))
}

/// What the run scrapes, set up before it starts.
struct ScrapeSetup {
    /// The targets to scrape (none: no scraping).
    targets: Vec<scrape::Target>,
    /// Their first scrapes, taken before the run.
    first: Vec<TakenScrape>,
    /// The server's metrics are among them.
    server: bool,
    /// What to say about it.
    notes: Vec<ReportWarning>,
}

/// The plan's scrape targets, each scraped once: an `auto` server URL that does
/// not answer with metrics is dropped (said once, as `bench` does). Scraping
/// needs the report module (it reads the text): when it does not load, nothing
/// is scraped and the report says why.
async fn scrape_setup(plan: &RunPlan, transport: &Transport, auth: &Auth) -> ScrapeSetup {
    let mut out = ScrapeSetup {
        targets: Vec::new(),
        first: Vec::new(),
        server: false,
        notes: Vec::new(),
    };
    if !plan.scrape.is_on() {
        return out;
    }
    if let Err(e) = super::report::module().await {
        out.notes.push(ReportWarning::new(
            WarningKind::ServerMetrics,
            format!("the server view needs the page's report module, which did not load ({e}): nothing was scraped"),
        ));
        return out;
    }
    let url_source = |url: &str| scrape::Source::Url {
        url: url.to_owned(),
        auth: if plan.sends_key_to(url) {
            auth.clone()
        } else {
            auth.without_key()
        },
    };
    let mut wanted = Vec::new();
    match (&plan.scrape.server, transport) {
        (ServerMetricsTarget::Simulator, Transport::Sim(sim)) => {
            wanted.push((ScrapeTarget::Server, scrape::Source::Sim(sim.clone()), None));
        }
        (ServerMetricsTarget::Auto(u), _) => {
            wanted.push((ScrapeTarget::Server, url_source(u), Some(u.clone())));
        }
        (ServerMetricsTarget::Url(u), _) => {
            wanted.push((ScrapeTarget::Server, url_source(u), None));
        }
        _ => {}
    }
    if let Some(u) = &plan.scrape.gpu {
        wanted.push((ScrapeTarget::Gpu, url_source(u), None));
    }
    for (target, source, auto) in wanted {
        let t = scrape::Target { target, source };
        let first = scrape::take(&t).await;
        if let Some(url) = auto {
            let why = match super::report::read_scrapes(std::slice::from_ref(&first)).await {
                Ok(read) => read.into_iter().next().and_then(|r| r.error),
                Err(e) => Some(e),
            };
            if let Some(why) = why {
                out.notes.push(ReportWarning::new(
                    WarningKind::ServerMetricsOff,
                    format!(
                        "no server metrics at {} ({why}): the server view is off (the metrics setting names another URL)",
                        tokenscope_core::parse::redact_url(&url)
                    ),
                ));
                continue;
            }
        }
        out.server |= target == ScrapeTarget::Server;
        out.first.push(first);
        out.targets.push(t);
    }
    out
}

/// Every level: its warm-up, then its rounds.
async fn run_levels(ctx: &Rc<Ctx>) {
    let plan = &ctx.input.plan;
    for (li, load) in plan.loads.iter().copied().enumerate() {
        if ctx.input.cancel.is_cancelled() {
            break;
        }
        let c = match load {
            Load::Concurrency(c) => c,
            Load::Rate(_) => OPEN_LOOP_LANES as u32,
        };
        ctx.input.painter.set_lanes(c as usize);
        let warm_n = plan.warmup_for(load);
        if let Some(ramp_ms) = plan.ramp_ms {
            run_ramp(ctx, li, load, ramp_ms).await;
        } else if warm_n > 0 {
            let phase = PhaseRun {
                level: li,
                load,
                concurrency: plan::warmup_concurrency(load),
                requests: u64::from(warm_n),
                phase: Phase::Warmup,
                label: format!("{} warm-up", load.label()),
            };
            run_closed(ctx, &phase).await;
        }
        let e = ctx.recorder.borrow_mut().start_level(li, load, now());
        ctx.event(e);
        ctx.scrape_now().await;
        for round in 0..plan.rounds {
            if ctx.input.cancel.is_cancelled() {
                break;
            }
            let phase = PhaseRun {
                level: li,
                load,
                concurrency: c,
                requests: plan::round_requests(plan.requests, plan.rounds, round, load),
                phase: Phase::Round(round),
                label: format!("{} round {}/{}", load.label(), round + 1, plan.rounds),
            };
            match (load, &plan.open_loop, plan.conversation) {
                (Load::Rate(rate), Some(open), _) => run_open(ctx, &phase, rate, open, round).await,
                (_, _, Some(conv)) => run_sessions(ctx, &phase, conv).await,
                _ => run_closed(ctx, &phase).await,
            }
        }
        ctx.scrape_now().await;
        let ended = ctx
            .recorder
            .borrow_mut()
            .end_level()
            .map(|(e, level)| (e, level.is_some()));
        let mut settled = false;
        if let Some((e, level)) = ended {
            ctx.event(e);
            settled = level;
        }
        ctx.read_scrapes().await;
        if settled {
            let levels = ctx.recorder.borrow().levels().to_vec();
            ctx.emit(RunEvent::Levels {
                levels,
                settled: true,
            });
        }
    }
}

/// The page's own checks once the run is over ([`watch`]): paints not measured,
/// a hidden page, its event loop's lag, its own costs.
fn end_warnings(ctx: &Ctx, hidden: bool, lag: &Summary) {
    let unpainted = watch::unpainted(&ctx.records.borrow());
    if !ctx.transport.is_simulated()
        && let Some(w) = watch::delivery_unmeasured(&ctx.records.borrow())
    {
        ctx.warn(w.kind, w.message);
    }
    let cost = ctx.input.painter.take_cost();
    let overhead = ctx.overhead.borrow();
    let own = watch::PageCosts {
        parse_per_read: overhead.parse_per_read.summary(),
        reads: overhead.reads,
        events: overhead.events,
        insert: Summary::from_samples(&cost.insert_ms),
        frame: Summary::from_samples(&cost.frame_ms),
        batched_events: cost.batched_events,
    };
    drop(overhead);
    for w in watch::end_warnings(unpainted, hidden, lag, &own) {
        ctx.warn(w.kind, w.message);
    }
}

/// One phase of a level (warm-up or a round).
#[derive(Clone)]
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
async fn run_closed(ctx: &Rc<Ctx>, run: &PhaseRun) {
    let queue = RefCell::new(VecDeque::from(ctx.requests.prepare(run.requests)));
    let finished = Cell::new(0u64);
    let last_live = Cell::new(now());
    let measured = matches!(run.phase, Phase::Round(_));
    let progress = |finished: u64| ctx.progress(run, finished, run.requests);
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
                    ctx.input.plan.timeout_ms,
                    &ctx.input.cancel,
                )
                .await;
                after_send(ctx, run, sent, &req, lane);
                finished.set(finished.get() + 1);
                live(ctx, last_live, measured, || progress(finished.get()));
            }
        }
    });
    join_all(workers).await;
    end_phase(ctx, measured, || progress(finished.get())).await;
}

/// A ramp before a level's measured part (`ramp`), as `bench --ramp`: never
/// measured (warm-up records), the rate rising linearly from 0 to the level's or
/// the concurrency from 1 to the level's ([`plan::ramp_send_ms`],
/// [`plan::ramp_join_ms`]).
async fn run_ramp(ctx: &Rc<Ctx>, level: usize, load: Load, ramp_ms: f64) {
    let run = PhaseRun {
        level,
        load,
        concurrency: 0,
        requests: 0,
        phase: Phase::Warmup,
        label: format!("{} ramp", load.label()),
    };
    ctx.progress(&run, 0, 0);
    let (start, timeout) = (now(), ctx.input.plan.timeout_ms);
    let end = start + ramp_ms;
    let cancelled = || ctx.input.cancel.is_cancelled();
    match load {
        Load::Rate(rate) => {
            let in_flight = Rc::new(Cell::new(0u64));
            for k in 1u64.. {
                let t = start + plan::ramp_send_ms(k, rate, ramp_ms);
                if t >= end || cancelled() {
                    break;
                }
                let mut req = ctx.requests.next(None);
                let wait = t - now();
                if wait > 0.0 {
                    sleep_ms(wait).await;
                }
                req.t_scheduled_ms = Some(t);
                in_flight.set(in_flight.get() + 1);
                let (ctx, run, in_flight) = (Rc::clone(ctx), run.clone(), Rc::clone(&in_flight));
                wasm_bindgen_futures::spawn_local(async move {
                    let sent =
                        run_request(&ctx.transport, &req, None, timeout, &ctx.input.cancel).await;
                    after_send(&ctx, &run, sent, &req, OPEN_LOOP_LANES);
                    in_flight.set(in_flight.get() - 1);
                });
            }
            while in_flight.get() > 0 {
                sleep_ms(10.0).await;
            }
        }
        Load::Concurrency(c) => {
            let workers = (0..c).map(|i| {
                let run = &run;
                async move {
                    let join_at = start + plan::ramp_join_ms(i, c, ramp_ms);
                    sleep_ms((join_at - now()).max(0.0)).await;
                    let lane = i as usize;
                    while now() < end && !cancelled() {
                        let req = ctx.requests.next(None);
                        let painter = Some((&ctx.input.painter, lane));
                        let sent =
                            run_request(&ctx.transport, &req, painter, timeout, &ctx.input.cancel)
                                .await;
                        after_send(ctx, run, sent, &req, lane);
                    }
                }
            });
            join_all(workers).await;
        }
    }
    end_phase(ctx, false, || {}).await;
}

/// Conversations (`conversation`), as `bench --conversation` runs them: `c`
/// sessions at once, each sending its turns one after another (the history and
/// a new user message, after the think time from the last answer's end), whole
/// sessions enough for the round's requests. A failed turn ends its session.
async fn run_sessions(ctx: &Rc<Ctx>, run: &PhaseRun, conv: Conversation) {
    let sessions = conv.sessions_for(run.requests);
    let planned = sessions * u64::from(conv.turns);
    let started = Cell::new(0u64);
    let finished = Cell::new(0u64);
    let last_live = Cell::new(now());
    let progress = |finished: u64| ctx.progress(run, finished, planned);
    progress(0);
    let cancelled = || ctx.input.cancel.is_cancelled();
    let workers = (0..run.concurrency.min(sessions as u32)).map(|lane| {
        let (started, finished, last_live, progress) = (&started, &finished, &last_live, &progress);
        async move {
            let lane = lane as usize;
            'sessions: while !cancelled() && started.get() < sessions {
                started.set(started.get() + 1);
                let session = ctx.requests.new_session();
                let mut history = History::default();
                for turn in 1..=conv.turns {
                    if turn > 1 && conv.think_ms > 0.0 {
                        sleep_ms(conv.think_ms).await;
                    }
                    if cancelled() {
                        break 'sessions;
                    }
                    let req = ctx.requests.next(Some((&mut history, session, turn)));
                    let painter = Some((&ctx.input.painter, lane));
                    let timeout = ctx.input.plan.timeout_ms;
                    let mut sent =
                        run_request(&ctx.transport, &req, painter, timeout, &ctx.input.cancel)
                            .await;
                    let answer = sent.timeline.take_answer();
                    let ok = sent.timeline.record().outcome.is_ok();
                    after_send(ctx, run, sent, &req, lane);
                    finished.set(finished.get() + 1);
                    live(ctx, last_live, true, || progress(finished.get()));
                    match answer {
                        Some(a) if ok => history.answered(a),
                        _ => break,
                    }
                }
            }
        }
    });
    join_all(workers).await;
    end_phase(ctx, true, || progress(finished.get())).await;
}

/// A response done: the page's costs counted, the protocol checked, and its
/// record completed once its paint is known ([`finalize`]).
fn after_send(
    ctx: &Rc<Ctx>,
    run: &PhaseRun,
    sent: super::transport::Sent,
    req: &Prepared,
    lane: usize,
) {
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
        req.request_id.clone(),
        Where {
            level: run.level,
            load: run.load,
            phase: run.phase,
            lane,
            prompt_tokens_sent: req.prompt_tokens_sent,
            turn: req.turn,
        },
    ));
    ctx.total_finished.set(ctx.total_finished.get() + 1);
}

/// The live view, at most every [`LIVE_EVERY_MS`]: progress, and a measured
/// level's figures so far.
fn live(ctx: &Rc<Ctx>, last_live: &Cell<f64>, measured: bool, progress: impl Fn()) {
    if now() - last_live.get() < LIVE_EVERY_MS {
        return;
    }
    last_live.set(now());
    progress();
    if measured {
        // The live snapshot (a clone of the level's samples, sorted for
        // percentiles) runs as its own task once this stream yields, not inline
        // between a response and the next send.
        let ctx = Rc::clone(ctx);
        wasm_bindgen_futures::spawn_local(async move {
            let levels = ctx.recorder.borrow().levels_so_far();
            ctx.emit(RunEvent::Levels {
                levels,
                settled: false,
            });
        });
    }
}

/// A phase's sends are done: wait for their paints, then show where it stands.
async fn end_phase(ctx: &Rc<Ctx>, measured: bool, progress: impl Fn()) {
    while ctx.pending_paints.get() > 0 {
        sleep_ms(10.0).await;
    }
    progress();
    if measured {
        let levels = ctx.recorder.borrow().levels_so_far();
        ctx.emit(RunEvent::Levels {
            levels,
            settled: false,
        });
    }
}

/// Stream lanes on screen in an open-loop level: a request sent while all are
/// busy streams unpainted (counted in the `unpainted` note).
const OPEN_LOOP_LANES: usize = 16;

/// Open loop: every request sent at its scheduled time whatever the responses
/// (a rate's gaps from `core::workload::plan`, as the native client draws them;
/// a trace's own times), its latencies from that time (no coordinated
/// omission; the lag between schedule and send is `client_lag_ms`). Bodies are
/// built before the round starts.
async fn run_open(ctx: &Rc<Ctx>, run: &PhaseRun, rate: f64, open: &OpenLoop, round: u32) {
    let reqs = ctx.requests.prepare(run.requests);
    let finished = Rc::new(Cell::new(0u64));
    let in_flight = Rc::new(Cell::new(0u64));
    let last_live = Rc::new(Cell::new(now()));
    let measured = matches!(run.phase, Phase::Round(_));
    let free: Rc<RefCell<Vec<usize>>> = Rc::new(RefCell::new((0..OPEN_LOOP_LANES).rev().collect()));
    let progress = {
        let (ctx, run) = (Rc::clone(ctx), run.clone());
        move |finished: u64| ctx.progress(&run, finished, run.requests)
    };
    progress(0);
    let mut rng = plan::arrival_stream(ctx.input.plan.seed, round);
    let start = now();
    let mut t_next = start;
    for (k, mut req) in reqs.into_iter().enumerate() {
        if ctx.input.cancel.is_cancelled() {
            break;
        }
        let wait = t_next - now();
        if wait > 0.0 {
            sleep_ms(wait).await;
        }
        req.t_scheduled_ms = Some(t_next);
        let lane = free.borrow_mut().pop();
        in_flight.set(in_flight.get() + 1);
        let (ctx2, run2, free, finished, in_flight, last_live, progress) = (
            Rc::clone(ctx),
            run.clone(),
            Rc::clone(&free),
            Rc::clone(&finished),
            Rc::clone(&in_flight),
            Rc::clone(&last_live),
            progress.clone(),
        );
        wasm_bindgen_futures::spawn_local(async move {
            let painter = lane.map(|l| (&ctx2.input.painter, l));
            let sent = run_request(
                &ctx2.transport,
                &req,
                painter,
                ctx2.input.plan.timeout_ms,
                &ctx2.input.cancel,
            )
            .await;
            after_send(
                &ctx2,
                &run2,
                sent,
                &req,
                // Without a lane it streamed unshown: its lane is past the last.
                lane.unwrap_or(OPEN_LOOP_LANES),
            );
            if let Some(l) = lane {
                free.borrow_mut().push(l);
            }
            finished.set(finished.get() + 1);
            in_flight.set(in_flight.get() - 1);
            live(&ctx2, &last_live, measured, || progress(finished.get()));
        });
        t_next = match open {
            OpenLoop::Trace { .. } => match ctx.requests.due_ms(k + 1) {
                Some(t_ms) => start + t_ms,
                None => break,
            },
            OpenLoop::Rate { arrival, cv } => {
                t_next + plan::arrival_gap_ms(&mut rng, rate, *arrival, *cv)
            }
        };
    }
    while in_flight.get() > 0 {
        sleep_ms(10.0).await;
    }
    end_phase(ctx, measured, || progress(finished.get())).await;
}

/// Where a finished request belongs.
#[derive(Debug, Clone, Copy)]
struct Where {
    level: usize,
    load: Load,
    phase: Phase,
    lane: usize,
    /// The prompt's counted tokens, when counted.
    prompt_tokens_sent: Option<u64>,
    /// A conversation's (session, turn).
    turn: Option<(u64, u32)>,
}

/// Complete a record with its paint (once known) and hand it on.
async fn finalize(ctx: Rc<Ctx>, sent: super::transport::Sent, request_id: String, at: Where) {
    let paint = match sent.probe {
        Some(p) => Some(p.settle().await),
        None => None,
    };
    let mut tl = sent.timeline;
    if let Some((t, method)) = paint.and_then(|p| p.time) {
        tl.on_first_paint(t, method);
    }
    if let Some(timing) = sent.timing
        && let Some(rt) = timing.settle().await
    {
        tl.on_resource_timing(rt.request_start_ms, rt.response_start_ms);
        tl.on_transport(rt.protocol, rt.connection);
    }
    let mut record = tl.finish();
    record.prompt_tokens_sent = at.prompt_tokens_sent;
    if let Some((session, turn)) = at.turn {
        record.session = Some(session);
        record.turn = Some(turn);
    }
    ctx.finished(PageRecord {
        line: RawLine::new(request_id, at.level, at.load, at.phase, record),
        lane: at.lane,
        paint_inserted_ms: paint.map(|p| p.inserted_ms),
        paint_fallback_ms: paint.and_then(|p| p.fallback_ms),
    });
    ctx.pending_paints
        .set(ctx.pending_paints.get().saturating_sub(1));
}
