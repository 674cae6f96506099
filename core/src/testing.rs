//! Builders of records, configurations and reports for tests: this crate's unit
//! tests, its integration tests, the CLI's and the page's. One place, so a new
//! field of [`RequestRecord`] or [`RunConfig`] is added once, not in every test.
//!
//! Every builder gives a valid, boring value; a test changes only the fields it is
//! about, with struct-update syntax or the `with_*` helpers, so what a test depends
//! on is spelled out in the test.

use crate::analyze::level::{LevelAccumulator, LevelOptions};
use crate::model::{
    CLIENT_SCHEMA, ClientReport, Environment, LevelReport, Load, LoadMode, RunConfig, Source,
    SweepReport,
};
use crate::rum::{Outcome as TurnOutcome, Turn, TurnTimes};
use tokenscope_measure::record::RequestRecord;
pub use tokenscope_measure::testing::{failed, record, record_with_events, timed_out};

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

/// A real user's complete turn as the probe sends it: 20 chunks, first paint at
/// 55 ms, last at 410 ms.
pub fn rum_turn() -> Turn {
    Turn {
        route: "/v1/chat/completions".into(),
        started_unix_ms: 1.7e12,
        ms: TurnTimes {
            headers: Some(40.0),
            first_byte: Some(41.0),
            first_chunk: Some(41.0),
            first_dom: Some(42.0),
            first_paint: Some(55.0),
            last_chunk: Some(400.0),
            last_paint: Some(410.0),
            last_byte: Some(401.0),
        },
        chunks: 20,
        events: 22,
        chars: 300,
        paints: 18,
        chunks_merged: 2,
        stalls_250: 0,
        stalls_500: 0,
        stalls_1000: 0,
        longest_gap_ms: 30.0,
        longest_paint_gap_ms: 33.0,
        outcome: TurnOutcome::Complete,
        error_kind: None,
        hidden: false,
        restored: false,
        paint_method: "raf+task".into(),
        output_tokens: Some(20),
        input_tokens: None,
        clamped: 0,
        chunk_ms: Vec::new(),
        server_prefill_ms: None,
        input_to_fetch_ms: None,
        long_frames: 0,
        blocking_ms: 0.0,
        weight: 1.0,
    }
}
