//! One request, whatever carries it: the same [`RequestTimeline`] code follows a
//! `fetch` stream and the built-in simulator's stream.
//!
//! The transport only moves bytes, each read stamped with `performance.now()` the
//! moment it resolves (for `fetch`, inside the promise reaction itself, so another
//! stream's processing never delays a stamp), before the bytes are decoded; then
//! [`run_request`] hands `(t, bytes)` to core's timeline (SSE decoding, chunk parsing, first-token detection). A first
//! token goes to the paint probe at once (never batched); later text goes to the
//! per-frame batch.

use std::pin::pin;

use futures_util::future::{Either, select};
use tokenscope_measure::record::ErrorKind;
use tokenscope_measure::timeline::{HeaderVerdict, MAX_ERROR_BODY_BYTES, RequestTimeline};

use super::clock::{CancelToken, now, sleep_ms};
pub use super::exchange::{Body, Head, LocalFuture, Prepared, Read, ResourceTiming};
use super::fetch::FetchTarget;
use super::paint::{Painter, Probe};
use super::sim::SimServer;
use super::worker::WorkerTarget;

/// How long to keep reading after `[DONE]` so the connection can be reused.
const DRAIN_AFTER_DONE_MS: f64 = 500.0;

/// Where requests go.
#[derive(Clone)]
pub enum Transport {
    /// A real endpoint over `fetch` in the network worker (the default).
    Worker(WorkerTarget),
    /// A real endpoint over `fetch` on the page's main thread.
    Fetch(FetchTarget),
    /// The built-in simulator, inside the page.
    Sim(SimServer),
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Worker(t) => f.debug_tuple("Worker").field(&t.url).finish(),
            Transport::Fetch(t) => f.debug_tuple("Fetch").field(&t.url).finish(),
            Transport::Sim(_) => f.write_str("Sim"),
        }
    }
}

/// A request built and ready to go.
pub(super) enum Outgoing {
    Worker(u64, wasm_bindgen::JsValue),
    Fetch(web_sys::RequestInit),
    Sim,
}

impl Transport {
    /// Build what the send needs, before the send is stamped.
    pub(super) fn outgoing(
        &self,
        req: &Prepared,
        abort: &web_sys::AbortController,
    ) -> Result<Outgoing, (ErrorKind, String)> {
        match self {
            Transport::Worker(t) => t.build(req).map(|(id, msg)| Outgoing::Worker(id, msg)),
            Transport::Fetch(t) => t.build(req, abort).map(Outgoing::Fetch),
            Transport::Sim(_) => Ok(Outgoing::Sim),
        }
    }

    /// Send the request: `on_sent` gets the send stamp (taken right before the
    /// request goes to the HTTP stack); resolves when the response head arrives
    /// (or the request failed before it).
    pub(super) async fn open(
        &self,
        req: &Prepared,
        out: &Outgoing,
        on_sent: &mut dyn FnMut(f64),
    ) -> Result<(f64, Head, Box<dyn Body>), (ErrorKind, String)> {
        match (self, out) {
            (Transport::Worker(t), Outgoing::Worker(id, msg)) => t
                .open(*id, msg, on_sent)
                .await
                .map(|(t, h, b)| (t, h, Box::new(b) as Box<dyn Body>)),
            (Transport::Fetch(t), Outgoing::Fetch(init)) => {
                on_sent(now());
                t.open(init)
                    .await
                    .map(|(t, h, b)| (t, h, Box::new(b) as Box<dyn Body>))
            }
            (Transport::Sim(s), _) => {
                on_sent(now());
                s.open(req)
                    .await
                    .map(|(h, b)| (now(), h, Box::new(b) as Box<dyn Body>))
            }
            _ => {
                on_sent(now());
                Err((
                    ErrorKind::Other,
                    "request built for another transport".into(),
                ))
            }
        }
    }

    /// Whether this is the built-in simulator.
    pub fn is_simulated(&self) -> bool {
        matches!(self, Transport::Sim(_))
    }

    /// The endpoint URL (real transports).
    pub fn url(&self) -> Option<&str> {
        match self {
            Transport::Worker(t) => Some(&t.url),
            Transport::Fetch(t) => Some(&t.url),
            Transport::Sim(_) => None,
        }
    }

    /// The HTTP protocol seen (`http/1.1`, `h2`), when the browser tells.
    pub fn protocol(&self) -> Option<String> {
        match self {
            Transport::Worker(t) => t.worker.protocol(),
            Transport::Fetch(t) => super::browser::protocol_of(&t.url),
            Transport::Sim(_) => None,
        }
    }
}

/// The page's own work per request: time in core's decoder and parser per read.
#[derive(Debug, Clone, Default)]
pub struct ParseCost {
    /// ms from each read's stamp to the timeline being updated.
    pub per_read_ms: Vec<f64>,
}

/// How long a finished request waits for the browser's Resource Timing entry
/// (it is made when the response ends, and reaches the page a little later).
const TIMING_WAIT_MS: f64 = 1000.0;

/// Where a request's Resource Timing comes from, once the browser has made its
/// entry.
#[derive(Debug)]
pub enum TimingSource {
    /// The network worker reports it ([`super::worker`]).
    Worker(super::worker::NetWorker, u64),
    /// This page's own entries: the one for `url` that started with the send.
    Page {
        /// The request's URL.
        url: String,
        /// The send stamp.
        t_send_ms: f64,
    },
}

impl TimingSource {
    /// The request's Resource Timing: `None` when the browser made no entry in
    /// time.
    pub async fn settle(self) -> Option<ResourceTiming> {
        match self {
            TimingSource::Worker(w, id) => w.resource_timing(id, TIMING_WAIT_MS).await,
            TimingSource::Page { url, t_send_ms } => {
                let deadline = now() + TIMING_WAIT_MS;
                loop {
                    if let Some(found) = super::browser::resource_timing_of(&url, t_send_ms) {
                        return Some(found);
                    }
                    if now() >= deadline {
                        return None;
                    }
                    sleep_ms(20.0).await;
                }
            }
        }
    }
}

/// A finished request, before its paint is known.
#[derive(Debug)]
pub struct Sent {
    /// The record (paint not yet applied).
    pub timeline: RequestTimeline,
    /// The first token's paint probe, when a token came.
    pub probe: Option<Probe>,
    /// Parse cost of this request's reads.
    pub parse: ParseCost,
    /// Where its Resource Timing will come from (real endpoints).
    pub timing: Option<TimingSource>,
}

/// Send one request and follow it to its end. Every outcome (success, each failure
/// kind, timeout, cancellation) is a record; nothing is dropped.
pub async fn run_request(
    transport: &Transport,
    req: &Prepared,
    painter: Option<(&Painter, usize)>,
    timeout_ms: f64,
    cancel: &CancelToken,
) -> Sent {
    if let Some((p, lane)) = painter {
        p.begin(lane, &req.request_id);
    }
    // Everything the send needs is built first: the send is stamped right before
    // the request goes to the browser's HTTP stack.
    let abort = web_sys::AbortController::new().ok();
    let outgoing = match &abort {
        Some(a) => transport.outgoing(req, a),
        None => Err((ErrorKind::Other, "AbortController is unavailable".into())),
    };
    let timer = sleep_ms(timeout_ms);
    let t_start = now();
    // Created by the transport's send stamp.
    let mut timeline: Option<RequestTimeline> = None;
    let mut probe = None;
    let mut parse = ParseCost::default();
    enum End {
        Finished,
        Timeout,
        Cancelled,
    }
    let mut timing = match (transport, &outgoing) {
        (Transport::Worker(t), Ok(Outgoing::Worker(id, _))) => {
            Some(TimingSource::Worker(t.worker.clone(), *id))
        }
        (Transport::Fetch(t), Ok(Outgoing::Fetch(_))) => Some(TimingSource::Page {
            url: t.url.clone(),
            t_send_ms: 0.0,
        }),
        _ => None,
    };
    let end = {
        let drive = pin!(drive(
            transport,
            req,
            outgoing,
            painter,
            &mut timeline,
            &mut probe,
            &mut parse
        ));
        let timer = pin!(timer);
        let stop = pin!(cancel.cancelled());
        match select(drive, select(timer, stop)).await {
            Either::Left(_) => End::Finished,
            Either::Right((Either::Left(_), _)) => End::Timeout,
            Either::Right((Either::Right(_), _)) => End::Cancelled,
        }
    };
    let mut tl = timeline.unwrap_or_else(|| new_timeline(t_start, req));
    if let Some(TimingSource::Page { t_send_ms, .. }) = &mut timing {
        *t_send_ms = tl.record().t_send_ms;
    }
    match end {
        End::Finished => {}
        End::Timeout => {
            tl.on_timeout(now());
            if let Some(a) = &abort {
                a.abort();
            }
        }
        End::Cancelled => {
            tl.on_cancel(now());
            if let Some(a) = &abort {
                a.abort();
            }
        }
    }
    Sent {
        timeline: tl,
        probe,
        parse,
        timing,
    }
}

fn new_timeline(t_send: f64, req: &Prepared) -> RequestTimeline {
    RequestTimeline::new(t_send, req.t_scheduled_ms)
        .keep_text(true)
        .keep_answer(req.keep_answer)
        .hide_reasoning(req.hide_reasoning)
}

async fn drive(
    transport: &Transport,
    req: &Prepared,
    outgoing: Result<Outgoing, (ErrorKind, String)>,
    painter: Option<(&Painter, usize)>,
    timeline: &mut Option<RequestTimeline>,
    probe: &mut Option<Probe>,
    parse: &mut ParseCost,
) {
    let opened = {
        let mut on_sent = |t: f64| {
            timeline.get_or_insert_with(|| new_timeline(t, req));
        };
        match outgoing {
            Ok(out) => transport.open(req, &out, &mut on_sent).await,
            Err(e) => {
                on_sent(now());
                Err(e)
            }
        }
    };
    let tl = timeline.get_or_insert_with(|| new_timeline(now(), req));
    let (t, head, mut body) = match opened {
        Ok(x) => x,
        Err((kind, msg)) => {
            tl.on_transport_error(now(), kind, msg);
            return;
        }
    };
    match tl.on_headers(t, head.status, head.content_type.as_deref()) {
        HeaderVerdict::Stream => {
            let mut shown = 0usize;
            loop {
                // The stamp was taken as the read resolved: before copying,
                // decoding or parsing, and before any other stream's processing.
                let (t, read) = body.read().await;
                match read {
                    Read::Bytes(bytes) => {
                        // Parse cost only: `t` may be the worker's stamp, taken
                        // before the bytes crossed to this thread.
                        let t_parse = now();
                        let summary = tl.on_read(t, &bytes);
                        parse.per_read_ms.push(now() - t_parse);
                        if summary.token_events > 0
                            && let Some((p, lane)) = painter
                        {
                            let text = tl.text();
                            let new = text.get(shown..).unwrap_or_default();
                            // The first token shown: the first of any kind, or
                            // (reasoning hidden) the first answer text.
                            let first = if req.hide_reasoning {
                                probe.is_none() && !new.is_empty()
                            } else {
                                summary.first_token
                            };
                            if first {
                                // Never batched: the probe goes into the DOM now.
                                *probe = Some(p.first_token(lane, new));
                            } else if !new.is_empty() || probe.is_some() {
                                p.append(lane, new);
                            }
                            shown = text.len();
                        }
                        if summary.finished {
                            drain(body.as_mut()).await;
                            tl.on_end(now());
                            return;
                        }
                    }
                    Read::End => {
                        tl.on_end(t);
                        return;
                    }
                    Read::Error(kind, msg) => {
                        tl.on_transport_error(t, kind, format!("while streaming: {msg}"));
                        return;
                    }
                }
            }
        }
        HeaderVerdict::ErrorBody => {
            let mut read_bytes = 0usize;
            loop {
                let (t, read) = body.read().await;
                match read {
                    Read::Bytes(bytes) => {
                        tl.on_error_body(t, &bytes);
                        read_bytes += bytes.len();
                        if read_bytes >= MAX_ERROR_BODY_BYTES {
                            body.cancel();
                            tl.on_end(t);
                            return;
                        }
                    }
                    Read::End | Read::Error(..) => {
                        tl.on_end(t);
                        return;
                    }
                }
            }
        }
    }
}

/// Read what is left after `[DONE]` (normally just the end of the body), briefly,
/// so the connection can be reused; then let go.
async fn drain(body: &mut dyn Body) {
    let deadline = now() + DRAIN_AFTER_DONE_MS;
    loop {
        let left = deadline - now();
        if left <= 0.0 {
            body.cancel();
            return;
        }
        let read = {
            let read = pin!(body.read());
            match select(read, pin!(sleep_ms(left))).await {
                Either::Left(((_, r), _)) => Some(r),
                Either::Right(_) => None,
            }
        };
        match read {
            Some(Read::Bytes(_)) => {}
            Some(Read::End | Read::Error(..)) => return,
            None => {
                body.cancel();
                return;
            }
        }
    }
}
