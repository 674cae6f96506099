//! The fault matrix: `tokenscope bench` against `tokenscope mock` injecting each
//! fault into about half the requests. For every request, the client's
//! classification is checked against the fault the server logged for that very
//! request (joined by `x-request-id`); tokens received before a fault are kept;
//! `sent = ok + errors + timeouts` holds exactly; the run carries on.

use crate::common;

use common::{Mock, check_faults_against_log, raw_requests, run, text};

fn matrix(fault: &str) {
    let mock = Mock::start(&[
        "--error-rate",
        "0.5",
        "--faults",
        fault,
        "--itl-ms",
        "4",
        "--ttft-ms",
        "5",
        "--stall",
        "20s",
        "--seed",
        "3",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.jsonl");
    let out = dir.path().join("r.json");
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--model",
        "tokenscope-sim",
        "--no-preflight",
        "--concurrency",
        "3",
        "--requests",
        "12",
        "--rounds",
        "2",
        "--warmup",
        "0",
        "--max-tokens",
        "12",
        "--input-tokens",
        "8",
        "--timeout",
        "1500ms",
        "--quiet",
        "--raw",
        raw.to_str().unwrap(),
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "{fault}: the run completes: {}",
        text(&o)
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let level = &report["levels"][0];
    let (sent, ok, errors, timeouts) = (
        level["sent"].as_u64().unwrap(),
        level["ok"].as_u64().unwrap(),
        level["errors"].as_u64().unwrap(),
        level["timeouts"].as_u64().unwrap(),
    );
    assert_eq!(sent, 12, "{fault}");
    assert_eq!(sent, ok + errors + timeouts, "{fault}: nothing unaccounted");

    let records = raw_requests(&raw);
    assert_eq!(records.len(), 12, "{fault}: one raw line per request");
    let server = mock.log_records(12);
    let seen = check_faults_against_log(fault, &records, &server);
    assert!(
        seen.keys().all(|f| f == fault),
        "{fault}: only this fault was injected: {seen:?}"
    );
    let faulted = seen.values().sum::<u32>();
    assert!(
        faulted > 0 && faulted < 12,
        "{fault}: about half faulted, got {faulted}"
    );
    let kinds: u64 = level["error_kinds"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(kinds, errors, "{fault}: every error has a kind");
}

#[test]
fn http_429() {
    matrix("http_429");
}
#[test]
fn http_503() {
    matrix("http_503");
}
#[test]
fn error_event_midstream() {
    matrix("error_event");
}
#[test]
fn connection_reset_midstream() {
    matrix("reset");
}
#[test]
fn malformed_chunk() {
    matrix("malformed");
}
#[test]
fn stall_longer_than_the_timeout() {
    matrix("stall");
}
#[test]
fn html_error_page() {
    matrix("html");
}
#[test]
fn body_ends_without_done() {
    matrix("no_done");
}
#[test]
fn headers_never_come() {
    matrix("no_headers");
}

/// A bench run against the mock with `fault_args`, its exit code, stderr and
/// report (always written, whatever the code).
fn failing_run(fault_args: &[&str], extra: &[&str]) -> (i32, String, serde_json::Value) {
    let mut args = vec!["--itl-ms", "2", "--ttft-ms", "5", "--seed", "3"];
    args.extend_from_slice(fault_args);
    let mock = Mock::start(&args);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let mut bench = vec![
        "bench",
        "--url",
        &mock.url,
        "--model",
        "tokenscope-sim",
        "--no-preflight",
        "--concurrency",
        "1,2",
        "--requests",
        "12",
        "--warmup",
        "0",
        "--max-tokens",
        "6",
        "--input-tokens",
        "8",
        "--server-metrics",
        "none",
        "--quiet",
        "--json",
        out.to_str().unwrap(),
    ];
    bench.extend_from_slice(extra);
    let o = run(&bench);
    let report = serde_json::from_slice(&std::fs::read(&out).unwrap_or_else(|e| {
        panic!(
            "the report is written whatever the exit code ({e}): {}",
            text(&o)
        )
    }))
    .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        report,
    )
}

/// Every request answered with a `200 text/html` page (no event stream): the
/// run failed as a run, and says so with exit 4 after writing its report (it
/// exited 0 before).
#[test]
fn a_run_in_which_nothing_succeeded_exits_4() {
    let (code, stderr, report) = failing_run(&["--error-rate", "1", "--faults", "html"], &[]);
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("none of its 24 measured requests succeeded (non_sse: 24)"),
        "{stderr}"
    );
    let levels = report["levels"].as_array().unwrap();
    assert!(levels.iter().all(|l| l["ok"] == 0 && l["errors"] == 12));
}

/// `--max-error-rate`: a level whose errors pass it exits 4 (each level judged
/// on its own); under it, the same failures are data and the run exits 0.
#[test]
fn max_error_rate_fails_the_run_above_it_only() {
    let faults = ["--error-rate", "0.5", "--faults", "http_503"];
    let (code, stderr, report) = failing_run(&faults, &["--max-error-rate", "5%"]);
    assert_eq!(code, 4, "{stderr}");
    let worst = report["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| common::f(&l["error_rate"]))
        .fold(0.0, f64::max);
    assert!(worst > 0.05, "the mock failed about half: {worst}");
    assert!(stderr.contains("--max-error-rate 5%: c="), "{stderr}");
    // The same failures under a looser bound (as a fraction): exit 0.
    let (code, stderr, _) = failing_run(&faults, &["--max-error-rate", "0.95"]);
    assert_eq!(code, 0, "{stderr}");
    // A bad bound is bad input, before anything is sent.
    let o = run(&[
        "bench",
        "--url",
        "http://127.0.0.1:1/v1",
        "--max-error-rate",
        "5",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--max-error-rate"), "{}", text(&o));
}
