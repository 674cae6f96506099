//! What is settled before a run starts, and why a run got no response: the
//! prompts file or trace, read by the report module ([`load_workload`]); the
//! `/metrics` targets, each scraped once ([`scrape_setup`]); and the cause of a
//! run that no request was answered ([`explain_no_response`]).

use tokenscope_core::analyze::server::scrape::ScrapeTarget;
use tokenscope_core::report::{ReportWarning, WarningKind};
use tokenscope_measure::parse::redact_url;
use tokenscope_measure::record::{ErrorKind, Outcome};
use tokenscope_render::page::scrape::TakenScrape;
use tokenscope_render::page::transport::{MIXED_CONTENT, is_mixed_content};
use tokenscope_render::page::workload::{PreparedWorkload, WorkloadFile, WorkloadRequest};

use super::record::Ctx;
use crate::services::browser;
use crate::services::fetch::{Auth, FetchTarget};
use crate::services::report;
use crate::services::scrape;
use crate::services::tokens::PageTokens;
use crate::services::transport::Transport;
use crate::settings::{OpenLoop, RunPlan, ServerMetricsTarget};

/// The plan's prompts file or trace: fetched (the key never goes with it), then
/// read by the report module with the CLI's parsers, which builds every body.
/// A file that cannot be fetched or read stops the run before it starts, naming
/// the file, the line and the field.
pub(super) async fn load_workload(
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
    let shown = tokenscope_measure::parse::redact_url(url);
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
    let w = report::prepare_workload(&request)
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
pub(super) async fn no_response_cause(ctx: &Ctx) -> Option<String> {
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
pub(super) struct ScrapeSetup {
    /// The targets to scrape (none: no scraping).
    pub(super) targets: Vec<scrape::Target>,
    /// Their first scrapes, taken before the run.
    pub(super) first: Vec<TakenScrape>,
    /// The server's metrics are among them.
    pub(super) server: bool,
    /// What to say about it.
    pub(super) notes: Vec<ReportWarning>,
}

/// The plan's scrape targets, each scraped once: an `auto` server URL that does
/// not answer with metrics is dropped (said once, as `bench` does). Scraping
/// needs the report module (it reads the text): when it does not load, nothing
/// is scraped and the report says why.
pub(super) async fn scrape_setup(
    plan: &RunPlan,
    transport: &Transport,
    auth: &Auth,
) -> ScrapeSetup {
    let mut out = ScrapeSetup {
        targets: Vec::new(),
        first: Vec::new(),
        server: false,
        notes: Vec::new(),
    };
    if !plan.scrape.is_on() {
        return out;
    }
    if let Err(e) = report::module().await {
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
            let why = match report::read_scrapes(std::slice::from_ref(&first)).await {
                Ok(read) => read.into_iter().next().and_then(|r| r.error),
                Err(e) => Some(e),
            };
            if let Some(why) = why {
                out.notes.push(ReportWarning::new(
                    WarningKind::ServerMetricsOff,
                    format!(
                        "no server metrics at {} ({why}): the server view is off (the metrics setting names another URL)",
                        tokenscope_measure::parse::redact_url(&url)
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
