//! What the page watches about itself and the endpoint during a run, each turned
//! into a typed warning: the protocol carrying the requests (and HTTP/1.1's
//! six-connection limit), its event loop's lag and whether it was hidden,
//! successful requests without a paint time, and its own measured costs.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use tokenscope_core::report::warning::event_loop_warning;
use tokenscope_core::report::{ReportWarning, WarningKind};
use tokenscope_measure::record::Outcome;
use tokenscope_stats::fmt::fmt_ms;
use tokenscope_stats::stats::{Samples, Summary};

use super::browser;
use super::clock::{now, sleep_ms};
use super::records::PageRecord;

/// Browsers open at most this many HTTP/1.1 connections per host; more requests
/// queue inside the browser, not at the server.
pub const HTTP1_CONNECTIONS_PER_HOST: u32 = 6;

/// The protocol carrying a run's requests to `url` (`seen`: what the browser
/// reported, if anything) and the warning it calls for at concurrency up to
/// `max_c`. Browsers speak only HTTP/1.1 in clear text (no h2c).
pub fn protocol(
    seen: Option<String>,
    url: &str,
    max_c: u32,
) -> (Option<String>, Option<ReportWarning>) {
    let told = seen.is_some();
    let proto = seen.or_else(|| url.starts_with("http://").then(|| "http/1.1".to_owned()));
    let warning = match &proto {
        Some(p) if (p == "http/1.1" || p == "http/1.0") && max_c > HTTP1_CONNECTIONS_PER_HOST => {
            Some(ReportWarning::new(
                WarningKind::Http1ConnectionLimit,
                format!(
                    "the endpoint speaks {p}{}: a browser opens at most {HTTP1_CONNECTIONS_PER_HOST} connections per host, so at concurrency above {HTTP1_CONNECTIONS_PER_HOST} (up to {max_c} here) the extra requests queue inside the browser, not at the server, and their latencies include that wait; serve the endpoint over HTTPS with HTTP/2, or keep the page's concurrency at {HTTP1_CONNECTIONS_PER_HOST} or less",
                    if told {
                        ""
                    } else {
                        " (clear-text http: browsers never use HTTP/2 there)"
                    }
                ),
            ))
        }
        None if max_c > HTTP1_CONNECTIONS_PER_HOST => Some(ReportWarning::new(
            WarningKind::ProtocolUnknown,
            format!(
                "the browser did not say which protocol the endpoint uses (it sends no Timing-Allow-Origin header); if it is HTTP/1.1, requests beyond {HTTP1_CONNECTIONS_PER_HOST} per host (up to {max_c} here) queue inside the browser"
            ),
        )),
        _ => None,
    };
    (proto, warning)
}

/// Measured successful requests with a token but no first-paint time.
pub fn unpainted(records: &[PageRecord]) -> usize {
    records
        .iter()
        .filter(|r| {
            !r.line.warmup
                && r.line.record.outcome == Outcome::Ok
                && !r.line.record.token_events_ms.is_empty()
                && r.line.record.t_first_paint_ms.is_none()
        })
        .count()
}

/// When no measured successful request got a `responseStart` from the browser:
/// the note saying so (a cross-origin endpoint must send `Timing-Allow-Origin`).
pub fn delivery_unmeasured(records: &[PageRecord]) -> Option<ReportWarning> {
    let measured = records
        .iter()
        .filter(|r| !r.line.warmup && r.line.record.outcome == Outcome::Ok);
    let (mut ok, mut timed) = (0usize, 0usize);
    for r in measured {
        ok += 1;
        timed += usize::from(r.line.record.t_response_start_ms.is_some());
    }
    (ok > 0 && timed == 0).then(|| {
        ReportWarning::new(
            WarningKind::DeliveryUnmeasured,
            "the browser did not say when its network stack had the responses (Resource Timing's responseStart; a cross-origin endpoint must send Timing-Allow-Origin for it): the browser's own delivery delay is not measured, and TTFT is when the page's script had the first token",
        )
    })
}

/// The page's own costs over a run, ms.
#[derive(Debug, Clone, Default)]
pub struct PageCosts {
    /// Decoding and parsing, per read.
    pub parse_per_read: Summary,
    /// Reads.
    pub reads: u64,
    /// Token events they carried.
    pub events: u64,
    /// First-token insertion.
    pub insert: Summary,
    /// Batched text updates, per frame.
    pub frame: Summary,
    /// Lane updates in those frames.
    pub batched_events: u64,
}

/// The warnings of a run's end: paints not measured, a hidden page, the event
/// loop's lag, and the page's own costs (informational).
pub fn end_warnings(
    unpainted: usize,
    hidden: bool,
    lag: &Summary,
    own: &PageCosts,
) -> Vec<ReportWarning> {
    let mut out = Vec::new();
    if unpainted > 0 {
        out.push(ReportWarning::new(
            WarningKind::PaintUnmeasured,
            format!("{unpainted} successful requests have no first-paint time (the page was hidden, or their text was never painted)"),
        ));
    }
    if hidden {
        out.push(ReportWarning::new(
            WarningKind::PageHidden,
            "the page was hidden during the run: browsers throttle timers in hidden tabs and paint nothing, so paint times and timings from then are not representative; keep the tab visible",
        ));
    }
    out.extend(event_loop_warning(lag, "page"));
    out.push(ReportWarning::new(
        WarningKind::PageOverhead,
        format!(
            "the page's own work (measured, not subtracted): decoding and parsing {} ms per read at p50 ({} at p99) over {} reads carrying {} token events; first-token insertion {} ms at p50 ({} at p99, {} requests); batched text updates {} ms per frame at p50 ({} at p99, {} frames, {} lane updates)",
            fmt_ms(own.parse_per_read.p50),
            fmt_ms(own.parse_per_read.p99),
            own.reads,
            own.events,
            fmt_ms(own.insert.p50),
            fmt_ms(own.insert.p99),
            own.insert.count,
            fmt_ms(own.frame.p50),
            fmt_ms(own.frame.p99),
            own.frame.count,
            own.batched_events
        ),
    ));
    out
}

/// Measures how late a 10 ms timer fires on the page's event loop, all run long
/// (as the native client does on its runtime), and whether the page was hidden.
pub struct LagMonitor {
    stop: Rc<Cell<bool>>,
    samples: Rc<RefCell<Samples>>,
}

impl LagMonitor {
    pub fn start(hidden: Rc<Cell<bool>>) -> Self {
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

    pub fn stop(self) -> Summary {
        self.stop.set(true);
        self.samples.borrow().summary()
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[test]
    fn http1_beyond_six_streams_is_a_warning_and_h2_is_not() {
        let (p, w) = protocol(None, "http://127.0.0.1:8000/v1/chat/completions", 8);
        assert_eq!(p.as_deref(), Some("http/1.1"));
        let w = w.unwrap();
        assert_eq!(w.kind, WarningKind::Http1ConnectionLimit);
        assert!(w.message.contains("clear-text http"), "{}", w.message);
        let (_, w) = protocol(Some("h2".into()), "https://h/v1/chat/completions", 64);
        assert!(w.is_none());
        let (_, w) = protocol(Some("http/1.1".into()), "https://h/v1", 6);
        assert!(w.is_none(), "six streams fit");
        let (p, w) = protocol(None, "https://h/v1", 16);
        assert_eq!(p, None);
        assert_eq!(w.unwrap().kind, WarningKind::ProtocolUnknown);
    }

    #[test]
    fn end_warnings_say_what_was_seen() {
        let lag = Summary {
            p99: Some(40.0),
            max: Some(50.0),
            ..Summary::default()
        };
        let kinds: Vec<WarningKind> = end_warnings(3, true, &lag, &PageCosts::default())
            .iter()
            .map(|w| w.kind)
            .collect();
        assert_eq!(
            kinds,
            [
                WarningKind::PaintUnmeasured,
                WarningKind::PageHidden,
                WarningKind::ClientBound,
                WarningKind::PageOverhead
            ]
        );
        let quiet = end_warnings(0, false, &Summary::default(), &PageCosts::default());
        assert_eq!(quiet.len(), 1, "only the page's own costs");
    }
}
