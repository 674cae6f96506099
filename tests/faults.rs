//! The fault matrix: `tokenscope bench` against `tokenscope mock` injecting each
//! fault into about half the requests. For every request, the client's
//! classification is checked against the fault the server logged for that very
//! request (joined by `x-request-id`); tokens received before a fault are kept;
//! `sent = ok + errors + timeouts` holds exactly; the run carries on.

mod common;

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
        "--out",
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
