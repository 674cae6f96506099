//! The open loop sends on time. Latency in open loop is measured from each request's
//! scheduled time, so a send that leaves late adds its lateness to every figure of
//! that request. Checked against the server's own log: the mock stamps each
//! request's arrival on its clock, so `received - scheduled` is a constant (the
//! clocks' offset plus the loopback and the server's own path) plus the client's
//! lateness; its excess over the fastest request is the send lag as the server saw it.
//!
//! A binary of its own, not a module of `tests/e2e/`: it measures the sender's
//! lateness, so it needs the machine to itself (beside the end-to-end binary's
//! other tests its bounds failed on all three tries of a rate).

mod common;

use common::{Mock, f, raw_requests, run, text};

/// `(p50, p95, p99)` of values (nearest rank).
fn percentiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
    (at(0.5), at(0.95), at(0.99))
}

#[test]
fn open_loop_sends_on_schedule_by_the_servers_log() {
    // One-token answers at once: connections go back to the pool quickly, so the
    // lag measured is the sender's, not the wait for a connection.
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "1", "--jitter-ms", "0"]);
    let dir = tempfile::tempdir().unwrap();
    // Up to three tries per rate: a loaded host's stray preemption of the
    // sender or of the mock does not strike every try; a late scheduler is late
    // every time.
    for (rate, n) in [("20", 60), ("200", 300)] {
        for attempt in 1..=3 {
            if on_time(&mock, dir.path(), rate, n, attempt == 3) {
                break;
            }
            eprintln!("rate {rate}/s: try {attempt} over the bounds, once more");
        }
    }
}

/// One open-loop run at `rate` for `n` requests against `mock`: whether the
/// send lag is within the bounds (`last`: assert them instead).
fn on_time(mock: &Mock, dir: &std::path::Path, rate: &str, n: usize, last: bool) -> bool {
    {
        let raw = dir.join(format!("raw-{rate}.jsonl"));
        let _ = std::fs::remove_file(&raw);
        let o = run(&[
            "bench",
            "--url",
            &mock.url,
            "--rate",
            rate,
            "--arrival",
            "constant",
            "--requests",
            &n.to_string(),
            "--warmup",
            "5",
            "--max-tokens",
            "1",
            "--input-tokens",
            "16",
            "--raw",
            raw.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o));
        let sent: Vec<serde_json::Value> = raw_requests(&raw)
            .into_iter()
            .filter(|r| r["t_scheduled_ms"].is_number())
            .collect();
        assert_eq!(sent.len(), n, "rate {rate}");
        let ids: Vec<String> = sent
            .iter()
            .map(|r| r["request_id"].as_str().unwrap().to_owned())
            .collect();
        let log = mock.log_records_for(&ids);
        let received = |id: &str| {
            log.iter()
                .find(|s| s["request_id"] == id)
                .map(|s| f(&s["t_received_ms"]))
                .unwrap_or_else(|| panic!("{id} not in the server's log"))
        };
        let d: Vec<f64> = sent
            .iter()
            .map(|r| received(r["request_id"].as_str().unwrap()) - f(&r["t_scheduled_ms"]))
            .collect();
        let floor = d.iter().copied().fold(f64::INFINITY, f64::min);
        let (server_p50, server_p95, server_p99) =
            percentiles(d.iter().map(|x| x - floor).collect());
        let (client_p50, client_p95, client_p99) = percentiles(
            sent.iter()
                .map(|r| f(&r["t_send_ms"]) - f(&r["t_scheduled_ms"]))
                .collect(),
        );
        eprintln!(
            "rate {rate}/s: send lag by the server's log p50 {server_p50:.3} ms, p95 \
             {server_p95:.3} ms, p99 {server_p99:.3} ms; by the client's own stamp p50 \
             {client_p50:.3} ms, p95 {client_p95:.3} ms, p99 {client_p99:.3} ms"
        );
        // On an idle 2-core machine the p99s are about 0.1-0.3 ms (docs/metrics.md,
        // "Open loop"); the bounds here leave room for a loaded machine's stray
        // preemption (p50 by the server's log: 0.28 and 0.61 ms on CI hosts,
        // 0.72-0.80 ms on this 2-core machine idle, the mock's own wake-up
        // included; p95 up to 1.7 ms), and the medians still fail the
        // millisecond-timer scheduler this replaced (p50 1.3 ms, p99 2.6 ms at
        // 20/s). The client's own stamp is the tight check, as before: p50
        // under 0.25 ms, p95 under 1 ms (measured 0.09-0.42 ms).
        assert!(
            sent.iter()
                .all(|r| f(&r["t_send_ms"]) >= f(&r["t_scheduled_ms"])),
            "never early"
        );
        let within = server_p50 < 1.0 && server_p95 < 2.0 && client_p50 < 0.25 && client_p95 < 1.0;
        if last {
            assert!(
                server_p50 < 1.0,
                "rate {rate}: p50 {server_p50} ms by the server's log"
            );
            assert!(
                server_p95 < 2.0,
                "rate {rate}: p95 {server_p95} ms by the server's log"
            );
            assert!(
                client_p50 < 0.25 && client_p95 < 1.0,
                "rate {rate}: {client_p50} / {client_p95} ms"
            );
        }
        within
    }
}
