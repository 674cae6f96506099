//! Builders of records, configurations and reports for tests: this crate's unit
//! tests, its integration tests, the CLI's and the page's. One place, so a new
//! field of [`RequestRecord`] or [`RunConfig`] is added once, not in every test.
//!
//! Every builder gives a valid, boring value; a test changes only the fields it is
//! about, with struct-update syntax or the `with_*` helpers, so what a test depends
//! on is spelled out in the test.

use crate::analyze::level::{LevelAccumulator, LevelOptions};
use crate::measure::openai::Usage;
use crate::measure::record::{ErrorKind, Outcome, RequestRecord, TimeoutPhase};
use crate::model::{
    CLIENT_SCHEMA, ClientReport, Environment, LevelReport, Load, LoadMode, RunConfig, Source,
    SweepReport,
};

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
        t_scheduled_ms: None,
        t_send_ms: t0_ms,
        t_headers_ms: Some(t0_ms + 1.0),
        t_request_start_ms: None,
        t_response_start_ms: None,
        status: Some(200),
        t_first_byte_ms: Some(t0_ms + 2.0),
        token_events_ms: events_ms,
        t_done_ms: Some(t_done),
        t_first_answer_ms: None,
        reasoning_events: 0,
        t_first_paint_ms: None,
        paint_method: None,
        shared_read_events: 0,
        prompt_tokens_sent: None,
        completion_tokens_counted: None,
        turn: None,
        session: None,
        usage: Some(Usage {
            prompt_tokens: Some(10),
            completion_tokens: Some(tokens),
            completion_tokens_details: None,
            prompt_tokens_details: None,
        }),
        server_timings: None,
        output_chars: tokens * 4,
        body_bytes: 0,
        done_received: true,
        finish_reason: Some("length".into()),
        outcome: Outcome::Ok,
        protocol: None,
        connection: None,
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
        t_done_ms: Some(t0_ms + 60.0),
        usage: None,
        done_received: false,
        finish_reason: None,
        outcome,
        ..record(t0_ms, 50.0, 10.0, 1)
    }
}

/// A run configuration: chat against `http://127.0.0.1:1/v1`, model `m`,
/// concurrency `levels`, 1 round, no warm-up, 64 prompt and 16 output tokens.
pub fn run_config(levels: &[u32]) -> RunConfig {
    RunConfig {
        levels: levels.iter().map(|&c| f64::from(c)).collect(),
        input_tokens: Some(64),
        max_tokens: 16,
        timeout_s: 60.0,
        seed: 1,
        ..RunConfig::unset(
            "http://127.0.0.1:1/v1".into(),
            "m".into(),
            LoadMode::Concurrency,
        )
    }
}

/// One level at `load` made from `records` (all in round 1), with default options.
pub fn level(load: Load, records: &[RequestRecord]) -> LevelReport {
    let mut acc = LevelAccumulator::new(load, LevelOptions::default());
    for r in records {
        acc.push(0, r);
    }
    acc.finish()
}

/// A soak at concurrency 1 for `minutes`, one snapshot a minute: requests back to
/// back, each with TTFT 50 ms and `tokens` tokens whose ITL is
/// `20 + grow_ms_per_min x minutes since the start`, alternately `+jitter_ms` and
/// `-jitter_ms`.
pub fn soak_level(minutes: f64, grow_ms_per_min: f64, jitter_ms: f64, tokens: u64) -> LevelReport {
    let mut acc = LevelAccumulator::new(
        Load::Concurrency(1),
        LevelOptions {
            snapshot_interval_ms: Some(60_000.0),
            ..LevelOptions::default()
        },
    );
    acc.set_start(0.0);
    let (mut t, mut i) = (0.0, 0u32);
    while t < minutes * 60_000.0 {
        let jitter = if i.is_multiple_of(2) {
            jitter_ms
        } else {
            -jitter_ms
        };
        let r = record(
            t,
            50.0,
            20.0 + grow_ms_per_min * t / 60_000.0 + jitter,
            tokens,
        );
        t = r.t_done_ms.expect("a finished record");
        acc.push(0, &r);
        i += 1;
    }
    acc.finish()
}

/// A client report from `source` holding `levels` (concurrency levels as found in
/// them), with no sweep analysis and no warnings.
pub fn client_report(source: Source, levels: Vec<LevelReport>) -> ClientReport {
    let loads: Vec<u32> = levels.iter().map(|l| l.concurrency.unwrap_or(1)).collect();
    ClientReport {
        schema: CLIENT_SCHEMA.into(),
        source,
        config: run_config(&loads),
        environment: Environment {
            tool_version: crate::VERSION.into(),
            ..Environment::default()
        },
        levels,
        sweep: SweepReport::default(),
        warnings: Vec::new(),
        interrupted: false,
        server: None,
    }
}

/// Assert that two client reports are the same in everything but `environment`
/// (a report rebuilt from its raw file against the one the run wrote), naming
/// the first field that differs.
pub fn assert_same_but_environment(rebuilt: &ClientReport, measured: &ClientReport) {
    let strip = |r: &ClientReport| {
        let mut v = serde_json::to_value(r).expect("a report serializes");
        v.as_object_mut()
            .expect("a report is an object")
            .remove("environment");
        v
    };
    let (a, b) = (strip(rebuilt), strip(measured));
    if a != b {
        panic!(
            "the rebuilt report differs from the measured one at {}",
            first_difference(&a, &b, String::new())
        );
    }
    let mut r = rebuilt.clone();
    r.environment = measured.environment.clone();
    assert_eq!(&r, measured, "the reports differ beyond their JSON");
}

fn first_difference(a: &serde_json::Value, b: &serde_json::Value, path: String) -> String {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x {
                match y.get(k) {
                    Some(vb) if va != vb => {
                        return first_difference(va, vb, format!("{path}.{k}"));
                    }
                    None => return format!("{path}.{k} (only in the rebuilt one: {va})"),
                    _ => {}
                }
            }
            let extra = y.keys().find(|k| !x.contains_key(*k));
            format!(
                "{path}.{} (only in the measured one)",
                extra.map_or("?", |k| k)
            )
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                if va != vb {
                    return first_difference(va, vb, format!("{path}[{i}]"));
                }
            }
            path
        }
        _ => format!("{path}: rebuilt {a} vs measured {b}"),
    }
}
