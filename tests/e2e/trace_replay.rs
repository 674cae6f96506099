//! `tokenscope bench --trace`: public request traces replayed against the mock, each
//! request at its own time with its own lengths, checked against the mock's log
//! (what it received, when, and how many prompt tokens it counted) and the raw
//! file (the schedule). Traces: `tests/fixtures/traces/` (sources in SOURCES.md).

use crate::common;

use std::collections::HashMap;

use common::{Mock, assert_schema, f, raw_requests, run, text};
use serde_json::Value;

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/traces/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn trace_lines(name: &str) -> Vec<Value> {
    std::fs::read_to_string(fixture(name))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A length scaled as `--trace-token-scale` scales it.
fn scaled(n: &Value, scale: f64) -> u64 {
    ((n.as_u64().unwrap() as f64 * scale).round() as u64).max(1)
}

#[test]
fn a_mooncake_trace_is_replayed_on_time_with_its_lengths() {
    let (n, speed, scale) = (60usize, 10.0, 0.02);
    let mock = Mock::start(&["--max-batch", "32", "--ttft-ms", "20", "--itl-ms", "5"]);
    let dir = tempfile::tempdir().unwrap();
    let (raw, out) = (dir.path().join("raw.jsonl"), dir.path().join("report.json"));
    let name = "mooncake-conversation_trace-head200.jsonl";
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--trace",
        &fixture(name),
        "--trace-speed",
        "10",
        "--trace-token-scale",
        "0.02",
        "--requests",
        &n.to_string(),
        "--raw",
        raw.to_str().unwrap(),
        "--json",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_schema("client.schema.json", &report, "the trace run's report");
    let cfg = &report["config"];
    assert_eq!(cfg["arrival"], "trace");
    assert_eq!(
        cfg["ignore_eos"], true,
        "the trace's output lengths are kept"
    );
    let t = &cfg["trace"];
    assert_eq!(t["format"], "mooncake");
    assert_eq!(t["requests"], n as u64);
    assert_eq!((f(&t["speed"]), f(&t["token_scale"])), (speed, scale));
    assert_eq!(t["block_tokens"], 10, "512 x 0.02");
    let level = &report["levels"][0];
    assert_eq!(
        (level["sent"].as_u64(), level["ok"].as_u64()),
        (Some(n as u64), Some(n as u64))
    );

    // The schedule is the trace's, request by request (sped up 10x), and every
    // request carried its own lengths: the mock counted exactly the prompt tokens
    // asked and got the trace's output length as max_tokens.
    let trace = trace_lines(name);
    let mut sent = raw_requests(&raw);
    sent.sort_by_key(|r| {
        r["request_id"]
            .as_str()
            .unwrap()
            .rsplit('-')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    });
    assert_eq!(sent.len(), n);
    let log: HashMap<String, Value> = mock
        .log_records(n)
        .into_iter()
        .map(|r| (r["request_id"].as_str().unwrap().to_owned(), r))
        .collect();
    let t0 = f(&sent[0]["t_scheduled_ms"]);
    let mut lags = Vec::new();
    for (r, line) in sent.iter().zip(&trace) {
        let at = f(&r["t_scheduled_ms"]) - t0;
        let want = f(&line["timestamp"]) / speed;
        assert!(
            (at - want).abs() < 1e-6,
            "scheduled at {at} ms, the trace says {want}"
        );
        lags.push(f(&r["t_send_ms"]) - f(&r["t_scheduled_ms"]));
        let s = &log[r["request_id"].as_str().unwrap()];
        assert_eq!(
            s["prompt_tokens"].as_u64(),
            Some(scaled(&line["input_length"], scale)),
            "{s}"
        );
        assert_eq!(
            s["max_tokens"].as_u64(),
            Some(scaled(&line["output_length"], scale)),
            "{s}"
        );
        assert_eq!(r["usage"]["completion_tokens"], s["max_tokens"]);
    }
    // Send lag: how late each request left against its scheduled time (reported
    // per level as client_lag_ms). Loose here (a loaded 2-core host); the figure
    // is printed.
    lags.sort_by(f64::total_cmp);
    let p99 = lags[(lags.len() * 99 / 100).min(lags.len() - 1)];
    eprintln!(
        "trace replay send lag: p50 {:.2} ms, p99 {p99:.2} ms; report client_lag_ms p99 {}",
        lags[lags.len() / 2],
        level["metrics"]["client_lag_ms"]["p99"]
    );
    assert!(p99 < 25.0, "send lag p99 {p99} ms");
    assert_eq!(level["metrics"]["client_lag_ms"]["count"], n as u64);
}

#[test]
fn azure_and_burstgpt_traces_replay_their_times_and_lengths() {
    let mock = Mock::start(&["--max-batch", "64", "--ttft-ms", "5", "--itl-ms", "2"]);
    let dir = tempfile::tempdir().unwrap();
    for (name, n, speed, scale, format) in [
        (
            "azure-llm-2023-code-head200.csv",
            20usize,
            2.0,
            0.01,
            "azure",
        ),
        (
            "burstgpt-sample-rows-as-quoted.csv",
            3,
            100.0,
            0.05,
            "burstgpt",
        ),
    ] {
        let raw = dir.path().join(format!("{format}.jsonl"));
        let o = run(&[
            "bench",
            "--url",
            &mock.url,
            "--trace",
            &fixture(name),
            "--trace-speed",
            &speed.to_string(),
            "--trace-token-scale",
            &scale.to_string(),
            "--requests",
            &n.to_string(),
            "--raw",
            raw.to_str().unwrap(),
            "--server-metrics",
            "none",
            "-q",
        ]);
        assert!(o.status.success(), "{format}: {}", text(&o));
        let header = &common::read_jsonl(&raw)[0];
        assert_eq!(header["config"]["trace"]["format"], format);
        let mut sent = raw_requests(&raw);
        assert_eq!(sent.len(), n, "{format}");
        sent.sort_by(|a, b| f(&a["t_scheduled_ms"]).total_cmp(&f(&b["t_scheduled_ms"])));
        let t0 = f(&sent[0]["t_scheduled_ms"]);
        let gaps: Vec<f64> = sent.iter().map(|r| f(&r["t_scheduled_ms"]) - t0).collect();
        match format {
            // BurstGPT's rows at 5, 45 and 118 s, 100x faster. The times are
            // the level's start plus the trace's offset, so a float's last bit
            // may differ from the offset itself.
            "burstgpt" => assert!(
                gaps.iter()
                    .zip([0.0, 400.0, 1130.0])
                    .all(|(g, want)| (g - want).abs() < 1e-6)
                    && gaps.len() == 3,
                "{gaps:?}"
            ),
            // Azure's first two requests 52 ms apart, 2x faster.
            _ => assert!((gaps[1] - 26.0).abs() < 1e-6, "{gaps:?}"),
        }
        assert!(
            sent.iter().all(|r| r["outcome"]["status"] == "ok"),
            "{format}"
        );
    }
}

#[test]
fn bad_traces_are_one_line_naming_the_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"timestamp\": 10, \"input_length\": 5, \"output_length\": 2}\n{\"timestamp\": 4, \"input_length\": 5, \"output_length\": 2}\n",
    )
    .unwrap();
    let missing = dir.path().join("missing.csv");
    std::fs::write(
        &missing,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,12\n",
    )
    .unwrap();
    let cases = [
        (
            bad.to_str().unwrap().to_owned(),
            "line 2: timestamp goes backwards",
        ),
        (
            missing.to_str().unwrap().to_owned(),
            "line 2: GeneratedTokens: missing",
        ),
        (
            dir.path().join("none.jsonl").to_str().unwrap().to_owned(),
            "cannot read the file",
        ),
    ];
    for (path, want) in cases {
        let o = run(&["bench", "--url", "http://127.0.0.1:1/v1", "--trace", &path]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("--trace {path}")) && err.contains(want),
            "{err}"
        );
        assert!(o.stdout.is_empty());
    }
    // A trace with a flag it replaces is refused before anything runs.
    let o = run(&[
        "bench",
        "--url",
        "http://127.0.0.1:1/v1",
        "--trace",
        &fixture("burstgpt-sample-rows-as-quoted.csv"),
        "--concurrency",
        "4",
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--concurrency"),
        "{}",
        text(&o)
    );
}
