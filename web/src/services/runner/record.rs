//! The run's record keeping: what its workers share ([`Ctx`]: the recorder, the
//! records and the raw file's entries in order, the scrapes, the page's own
//! costs), and each finished request's record, completed with its paint and its
//! Resource Timing once known and only then given to the recorder
//! ([`after_send`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use tokenscope_core::report::assemble::RunRecorder;
use tokenscope_core::report::raw::{Phase, RawEvent, RawLine};
use tokenscope_core::report::{Load, ReportWarning, WarningKind};
use tokenscope_render::page::scrape::TakenScrape;
use tokenscope_stats::stats::{Samples, Summary};

use super::io::{Progress, RunEvent, RunInput};
use crate::services::exchange::Prepared;
use crate::services::records::{PageEntry, PageRecord};
use crate::services::report;
use crate::services::requests::Requests;
use crate::services::scrape::Scraper;
use crate::services::transport::{Sent, Transport};
use crate::services::watch;

/// Finished requests after which an unreported protocol is taken as unknown.
const PROTOCOL_CHECKS: u32 = 4;

/// The page's own costs over a run, ms.
#[derive(Debug, Default)]
pub(super) struct Overhead {
    parse_per_read: Samples,
    reads: u64,
    events: u64,
}

/// Everything a run's workers share.
pub(super) struct Ctx {
    pub(super) input: RunInput,
    pub(super) transport: Transport,
    /// What is sent, request by request.
    pub(super) requests: Requests,
    pub(super) recorder: RefCell<RunRecorder>,
    pub(super) records: RefCell<Vec<PageRecord>>,
    pub(super) entries: RefCell<Vec<PageEntry>>,
    pub(super) overhead: RefCell<Overhead>,
    pub(super) pending_paints: Cell<usize>,
    pub(super) first_done: Cell<bool>,
    pub(super) protocol_checks: Cell<u32>,
    pub(super) protocol: RefCell<Option<String>>,
    pub(super) on_event: Box<dyn Fn(RunEvent)>,
    pub(super) total_finished: Cell<u64>,
    /// Scraping `/metrics` (when the plan asks for it and the report module loaded).
    pub(super) scraper: RefCell<Option<Rc<Scraper>>>,
    /// The run's scrapes, in order: taken (text kept) until the report module
    /// reads them into raw lines at a level's end.
    pub(super) scrapes: RefCell<Vec<ScrapeSlot>>,
}

/// One scrape of the run.
#[derive(Debug)]
pub(super) enum ScrapeSlot {
    /// Taken, not read yet.
    Taken(TakenScrape),
    /// Read: the raw file's line (`None`: the report module could not read it).
    Read(Option<String>),
}

impl Ctx {
    pub(super) fn emit(&self, e: RunEvent) {
        (self.on_event)(e);
    }

    /// Where phase `run` stands: `finished` of `planned` requests.
    pub(super) fn progress(&self, run: &PhaseRun, finished: u64, planned: u64) {
        self.emit(RunEvent::Progress(Progress {
            level: run.level,
            levels: self.input.plan.loads.len(),
            phase: run.label.clone(),
            finished,
            planned,
            total_finished: self.total_finished.get(),
        }));
    }

    pub(super) fn event(&self, e: RawEvent) {
        self.entries.borrow_mut().push(PageEntry::Event(e));
    }

    pub(super) fn warn(&self, kind: WarningKind, message: String) {
        let w = ReportWarning::new(kind, message);
        self.emit(RunEvent::Warning(w.clone()));
        let e = self.recorder.borrow_mut().warn(w);
        self.event(e);
    }

    /// A scrape taken: into the raw file's order, read later.
    pub(super) fn scraped(&self, t: TakenScrape) {
        let mut scrapes = self.scrapes.borrow_mut();
        self.entries
            .borrow_mut()
            .push(PageEntry::Scrape(scrapes.len()));
        scrapes.push(ScrapeSlot::Taken(t));
    }

    /// Scrape every target now (a level's start or end), if scraping.
    pub(super) async fn scrape_now(&self) {
        let scraper = self.scraper.borrow().clone();
        if let Some(s) = scraper {
            s.now().await;
        }
    }

    /// Have the report module read the scrapes taken so far (between levels:
    /// parsing never runs while a level is measured).
    pub(super) async fn read_scrapes(&self) {
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
        let read = report::read_scrapes(&taken).await;
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

/// One phase of a level (warm-up or a round).
#[derive(Clone)]
pub(super) struct PhaseRun {
    pub(super) level: usize,
    pub(super) load: Load,
    pub(super) concurrency: u32,
    pub(super) requests: u64,
    pub(super) phase: Phase,
    pub(super) label: String,
}

/// A response done: the page's costs counted, the protocol checked, and its
/// record completed once its paint is known ([`finalize`]).
pub(super) fn after_send(ctx: &Rc<Ctx>, run: &PhaseRun, sent: Sent, req: &Prepared, lane: usize) {
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
async fn finalize(ctx: Rc<Ctx>, sent: Sent, request_id: String, at: Where) {
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

/// The page's own checks once the run is over ([`watch`]): paints not measured,
/// a hidden page, its event loop's lag, its own costs.
pub(super) fn end_warnings(ctx: &Ctx, hidden: bool, lag: &Summary) {
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
