//! Builders of request records for tests: this crate's unit tests and every crate
//! above it (`tokenscope_core::testing` re-exports them beside its report builders).
//! One place, so a new field of [`RequestRecord`] is added once.

use crate::openai::Usage;
use crate::record::{ErrorKind, Outcome, RequestRecord, TimeoutPhase};

/// A successful streamed request sent at `t0_ms`: its first token `ttft_ms` later,
/// then one token every `itl_ms` (`tokens` in all, each its own event), done 1 ms
/// after the last, with `usage` and `finish_reason: "length"`.
pub fn record(t0_ms: f64, ttft_ms: f64, itl_ms: f64, tokens: u64) -> RequestRecord {
    let events: Vec<f64> = (0..tokens)
        .map(|i| t0_ms + ttft_ms + i as f64 * itl_ms)
        .collect();
    record_with_events(t0_ms, events)
}

/// A successful request sent at `t0_ms` whose content events arrived at `events_ms`.
pub fn record_with_events(t0_ms: f64, events_ms: Vec<f64>) -> RequestRecord {
    let tokens = events_ms.len() as u64;
    let t_done = events_ms.last().map_or(t0_ms + 2.0, |t| t + 1.0);
    RequestRecord {
        t_headers_ms: Some(t0_ms + 1.0),
        status: Some(200),
        t_first_byte_ms: Some(t0_ms + 2.0),
        token_events_ms: events_ms,
        t_done_ms: Some(t_done),
        usage: Some(Usage {
            prompt_tokens: Some(10),
            completion_tokens: Some(tokens),
            completion_tokens_details: None,
            prompt_tokens_details: None,
        }),
        output_chars: tokens * 4,
        done_received: true,
        finish_reason: Some("length".into()),
        ..RequestRecord::sent_at(t0_ms, None)
    }
}

/// A request that failed with `kind` at `t0_ms + 60` after one token at `+50`.
pub fn failed(t0_ms: f64, kind: ErrorKind) -> RequestRecord {
    with_outcome(
        t0_ms,
        Outcome::Error {
            kind,
            message: format!("{kind} (test)"),
        },
    )
}

/// A request whose client timeout fired in `phase`, at `t0_ms + 60`.
pub fn timed_out(t0_ms: f64, phase: TimeoutPhase) -> RequestRecord {
    with_outcome(t0_ms, Outcome::Timeout { phase })
}

fn with_outcome(t0_ms: f64, outcome: Outcome) -> RequestRecord {
    RequestRecord {
        token_events_ms: vec![t0_ms + 50.0],
        event_tokens: Vec::new(),
        t_done_ms: Some(t0_ms + 60.0),
        usage: None,
        done_received: false,
        finish_reason: None,
        outcome,
        ..record(t0_ms, 50.0, 10.0, 1)
    }
}
