//! The page's benchmark run: levels, warm-up, rounds, closed loop; the same plan as
//! the native client (`tokenscope_workload::plan`), the same recorder and report
//! assembly (`core::report::assemble`), the same report (`tokenscope.client/1`,
//! `"source": "browser"`). It reads only the validated
//! [`RunPlan`](crate::settings::RunPlan).
//!
//! Each level: warm-up requests (kept in the raw records, never measured), then the
//! rounds, each keeping `c` requests in flight. A finished request is handed on at
//! once and the worker sends its next one; the request's record is completed with
//! its first-paint time when the paint is known (a few frames later) and only then
//! given to the recorder, so waiting for a paint never changes the load. Everything
//! computed from records is computed by core.
//!
//! [`run`] is here: it sets the run up and assembles its report. What is settled
//! before it starts is in `setup`, the loop over levels and rounds in `levels`,
//! the record keeping in `record`, what a run takes and gives in `io`.

mod io;
mod levels;
mod record;
mod setup;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use tokenscope_core::report::assemble::RunRecorder;
use tokenscope_core::report::raw::RawEvent;
use tokenscope_core::report::transport::{HeaderInfo, TransportInfo};
use tokenscope_core::report::{
    ClientReport, Environment, Load, ReportWarning, Source, WarningKind,
};
use tokenscope_measure::openai::first_model_id;
use tokenscope_workload::tokens::InputLength;

pub use io::{Progress, RunEvent, RunInput, RunOutput};
use levels::run_levels;
use record::{Ctx, Overhead, ScrapeSlot, end_warnings};
pub use setup::explain_no_response;
use setup::{load_workload, no_response_cause, scrape_setup};

use super::browser;
use super::fetch::FetchTarget;
pub use super::records::{PageEntry, PageRaw, PageRecord, raw_jsonl};
use super::requests::Requests;
use super::scrape::Scraper;
use super::sim::SimServer;
use super::tokens;
use super::transport::Transport;
use super::watch::LagMonitor;
use super::worker::{NetWorker, WorkerTarget};
use crate::settings::NetMode;

/// Run the benchmark. `on_event` sees progress as it happens.
pub async fn run(
    mut input: RunInput,
    on_event: impl Fn(RunEvent) + 'static,
) -> Result<RunOutput, String> {
    let started_at = browser::now_rfc3339();
    browser::grow_resource_timing_buffer();
    let run_tag = browser::run_tag();
    if input.plan.api == tokenscope_measure::openai::Api::Messages {
        input.auth = std::mem::take(&mut input.auth).for_messages_api();
    }
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
