//! `tokenscope bench` as a user meets it: bad input gets one clear line and a
//! non-zero exit before anything runs; once a run starts, failures are data; the
//! report validates against the committed schema.

use crate::common;

use common::{Mock, run, text};

fn stderr_line(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).trim().to_owned()
}

fn assert_fails_with(args: &[&str], needle: &str) {
    let o = run(args);
    assert!(!o.status.success(), "expected failure: {}", text(&o));
    let err = stderr_line(&o);
    assert!(
        err.contains(needle),
        "stderr {err:?} should name {needle:?}"
    );
    assert!(
        err.lines().filter(|l| l.starts_with("error")).count() == 1,
        "one error line: {err:?}"
    );
    assert!(o.stdout.is_empty(), "no partial run output: {}", text(&o));
}

#[test]
fn unreachable_endpoint_fails_before_the_run() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    assert_fails_with(
        &["bench", "--url", &url, "--requests", "3"],
        "cannot reach http://127.0.0.1",
    );
}

#[test]
fn invalid_flags_name_the_flag_and_value() {
    assert_fails_with(&["bench", "--url", "not a url"], "--url");
    assert_fails_with(
        &["bench", "--url", "ftp://x/v1"],
        "scheme must be http or https",
    );
    assert_fails_with(
        &[
            "bench",
            "--url",
            "http://127.0.0.1:1",
            "--concurrency",
            "1,0",
        ],
        "--concurrency: \"0\"",
    );
    assert_fails_with(
        &["bench", "--url", "http://127.0.0.1:1", "--rate", "-2"],
        "--rate",
    );
    assert_fails_with(
        &["bench", "--url", "http://127.0.0.1:1", "--requests", "0"],
        "--requests: 0",
    );
    assert_fails_with(
        &[
            "bench",
            "--url",
            "http://127.0.0.1:1",
            "--slo",
            "latency:p95<=3",
        ],
        "unknown metric \"latency\"",
    );
    assert_fails_with(
        &["bench", "--url", "http://127.0.0.1:1", "--timeout", "soon"],
        "--timeout",
    );
    assert_fails_with(
        &[
            "bench",
            "--url",
            "http://127.0.0.1:1",
            "--json",
            "/nonexistent-dir/r.json",
        ],
        "--json /nonexistent-dir/r.json: the folder /nonexistent-dir does not exist",
    );
    // clap's own errors are one line too.
    let o = run(&[
        "bench",
        "--url",
        "http://x",
        "--concurrency",
        "1",
        "--rate",
        "2",
    ]);
    assert!(!o.status.success());
}

#[test]
fn prompts_file_with_a_broken_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("prompts.jsonl");
    std::fs::write(&p, "{\"prompt\": \"hello\"}\n{\"prompt\": \"broken\"\n").unwrap();
    assert_fails_with(
        &[
            "bench",
            "--url",
            "http://127.0.0.1:1",
            "--prompts",
            p.to_str().unwrap(),
        ],
        &format!("--prompts {}: line 2: not JSON", p.display()),
    );
}

#[test]
fn datasets_of_conversations_and_sharegpt_are_sent_as_chat_messages() {
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = tempfile::tempdir().unwrap();
    // A conversation line, a plain prompt with its own max_tokens, and ShareGPT.
    let jsonl = dir.path().join("prompts.jsonl");
    std::fs::write(
        &jsonl,
        "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"why is the sky blue\"}]}\n\
         {\"prompt\": \"one two three four\", \"max_tokens\": 3}\n",
    )
    .unwrap();
    let sharegpt = format!(
        "{}/tests/fixtures/traces/sharegpt-v3-record0-as-quoted.json",
        env!("CARGO_MANIFEST_DIR")
    );
    for (file, n) in [(jsonl.to_str().unwrap().to_owned(), 4u64), (sharegpt, 2)] {
        let raw = dir.path().join("raw.jsonl");
        let o = run(&[
            "bench",
            "--url",
            &mock.url,
            "--prompts",
            &file,
            "--concurrency",
            "1",
            "--requests",
            &n.to_string(),
            "--rounds",
            "1",
            "--warmup",
            "0",
            "--max-tokens",
            "5",
            "--server-metrics",
            "none",
            "--raw",
            raw.to_str().unwrap(),
            "-q",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            common::raw_requests(&raw)
                .iter()
                .all(|r| r["outcome"]["status"] == "ok")
        );
        // The prompt set's fingerprint, as core defines it, for compare's check.
        let header: serde_json::Value = serde_json::from_str(
            std::fs::read_to_string(&raw)
                .unwrap()
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        let d =
            tokenscope_workload::dataset::Dataset::parse(&std::fs::read_to_string(&file).unwrap())
                .unwrap();
        let expected = tokenscope_workload::dataset::prompts_hash(&d.prompts);
        assert_eq!(header["config"]["prompts_hash"], expected.as_str());
    }
    // The mock counted every message of a conversation, and the plain prompt's
    // own max_tokens was sent.
    let log = mock.log_records(6);
    let prompts: Vec<u64> = log
        .iter()
        .filter_map(|r| r["prompt_tokens"].as_u64())
        .collect();
    assert!(
        prompts.contains(&7),
        "be brief + why is the sky blue: {prompts:?}"
    );
    assert!(
        log.iter()
            .any(|r| r["prompt_tokens"] == 4 && r["max_tokens"] == 3),
        "{log:?}"
    );
    // --sample picks from the file with the seed; the same seed, the same picks.
    let pick = |seed: &str| {
        let raw = dir.path().join("s.jsonl");
        let o = run(&[
            "bench",
            "--url",
            &mock.url,
            "--prompts",
            jsonl.to_str().unwrap(),
            "--sample",
            "1",
            "--seed",
            seed,
            "--concurrency",
            "1",
            "--requests",
            "2",
            "--rounds",
            "1",
            "--warmup",
            "0",
            "--server-metrics",
            "none",
            "--raw",
            raw.to_str().unwrap(),
            "-q",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        common::raw_requests(&raw)[0]["usage"]["prompt_tokens"].clone()
    };
    assert_eq!(pick("5"), pick("5"));
}

#[test]
fn non_sse_and_http_error_pages_fail_the_preflight() {
    let html = Mock::start(&["--error-rate", "1", "--faults", "html"]);
    assert_fails_with(
        &["bench", "--url", &html.url, "--requests", "3"],
        "did not answer with an event stream",
    );
    let mock = Mock::start(&[]);
    // A wrong path: the server answers 404.
    let wrong = mock.url.replace("/v1", "/nope");
    assert_fails_with(
        &["bench", "--url", &wrong, "--model", "m", "--requests", "3"],
        "HTTP 404",
    );
}

#[test]
fn failures_during_a_run_are_data_and_the_report_validates() {
    let mock = Mock::start(&[
        "--error-rate",
        "0.3",
        "--faults",
        "http_503,reset,error_event",
        "--itl-ms",
        "2",
        "--seed",
        "7",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let csv = dir.path().join("r.csv");
    let md = dir.path().join("r.md");
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "1,4",
        "--requests",
        "24",
        "--max-tokens",
        "8",
        "--input-tokens",
        "16",
        "--slo",
        "ttft_ms:p95<=500,tpot_ms:p95<=50",
        // 24 requests cannot carry a p95 (exit 3 otherwise): said, allowed.
        "--allow-unevaluated",
        "--quiet",
        "--json",
        out.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("TTFT p50"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    common::assert_schema("client.schema.json", &report, "the report");
    let mut failures = 0;
    for level in report["levels"].as_array().unwrap() {
        let (sent, ok, errs, tos) = (
            level["sent"].as_u64().unwrap(),
            level["ok"].as_u64().unwrap(),
            level["errors"].as_u64().unwrap(),
            level["timeouts"].as_u64().unwrap(),
        );
        assert_eq!(sent, 24);
        assert_eq!(sent, ok + errs + tos);
        let kinds: u64 = level["error_kinds"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(kinds, errs, "every error has a kind");
        for k in level["error_kinds"].as_object().unwrap().keys() {
            assert!(
                ["http_503", "reset", "stream_error"].contains(&k.as_str()),
                "unexpected kind {k}"
            );
        }
        assert!(level["goodput_per_s"].as_f64().is_some());
        failures += errs;
    }
    assert!(failures > 0, "a 30% fault rate produced failures");
    // The API key never appears, and no key field exists.
    assert!(report["config"].get("api_key").is_none());
    assert!(std::fs::read_to_string(&csv).unwrap().lines().count() == 3);
    assert!(std::fs::read_to_string(&md).unwrap().contains("| load |"));
    // Our own reader takes what we wrote.
    assert_eq!(report["schema"], "tokenscope.client/1");
}

#[test]
fn help_explains_the_flags() {
    let o = run(&["bench", "--help"]);
    assert!(o.status.success());
    let h = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--concurrency",
        "--rate",
        "--slo",
        "--raw",
        "--ignore-eos",
        "TOKENSCOPE_API_KEY",
    ] {
        assert!(h.contains(flag), "--help mentions {flag}");
    }
}

#[test]
fn calibrate_compares_the_client_with_its_server_and_prices_its_cpu() {
    // calibrate starts the simulated server as a child process (`tokenscope mock`,
    // pinned apart from the client where there are 2 CPUs), joins what the client
    // measured to the server's log, gap by gap, and prices the client's CPU per
    // token from its own process's CPU time.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("calibrate.json");
    let o = run(&[
        "calibrate",
        "--levels",
        "1,4",
        "--max-tokens",
        "12",
        "--itl-ms",
        "5",
        "--bound-ms",
        "50",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
    ]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("1 ") || l.starts_with("4 "))
        .collect();
    assert_eq!(rows.len(), 2, "one row per level: {out}");
    for row in rows {
        let cols: Vec<&str> = row.split_whitespace().collect();
        let gaps: u64 = cols[1].parse().unwrap();
        assert!(gaps > 0, "gaps joined to the server's log: {row}");
        let tokens_per_s: f64 = cols[7].parse().unwrap();
        assert!(tokens_per_s > 0.0, "tokens/s parsed: {row}");
    }
    assert!(
        out.contains("largest concurrency with ITL p99 error under 50 ms on this machine: 4"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("pinned: client on CPU ") || l.starts_with("not pinned")),
        "says what was pinned: {out}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "tokenscope.calibrate/1");
    assert_eq!(doc["faithful_concurrency"], 4);
    let levels = doc["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for l in levels {
        // 4 warm-up + 16 measured (c=4), or 1 + 16 (c=1), requests of 12 tokens each,
        // plus none from preflight (not in the raw records).
        let tokens = l["tokens"].as_u64().unwrap();
        assert!(tokens >= 16 * 12, "{l}");
        assert_eq!(l["events"], l["tokens"], "one token per event: {l}");
        let (cpu, wall) = (
            l["client_cpu_s"].as_f64().unwrap(),
            l["wall_s"].as_f64().unwrap(),
        );
        assert!(wall > 0.0 && cpu >= 0.0, "{l}");
        let per_token = cpu * 1e6 / tokens as f64;
        assert!(
            (l["cpu_us_per_token"].as_f64().unwrap() - per_token).abs() < 1e-6,
            "{l}"
        );
    }
    // With CPU time read (10 ms ticks: a level this small may read 0), the line
    // gives the capacity per core as tokens per client CPU-second.
    let line = out
        .lines()
        .find(|l| l.starts_with("faithful capacity: "))
        .unwrap_or_else(|| panic!("a capacity line: {out}"));
    match doc["capacity_per_core"].as_object() {
        Some(k) => {
            let last = &levels[1];
            let expect = last["tokens"].as_f64().unwrap() / last["client_cpu_s"].as_f64().unwrap();
            assert!((k["tokens_per_s"].as_f64().unwrap() - expect).abs() < 1e-6 * expect);
            assert!(
                line.contains("per client core at ITL p99 error < 50 ms"),
                "{line}"
            );
            assert!(line.contains("CPU-us per token"), "{line}");
        }
        None => assert!(line.contains("not measured"), "{line}"),
    }
}

#[test]
fn mock_binds_loopback_unless_told_and_warns_when_told() {
    use std::io::{BufRead as _, Read as _};
    let first_line_and_stderr = |args: &[&str]| {
        let mut child = std::process::Command::new(common::bin())
            .args(["mock", "--port", "0"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (line, err)
    };
    let (line, err) = first_line_and_stderr(&[]);
    assert!(
        line.starts_with("tokenscope mock listening on http://127.0.0.1:"),
        "{line}"
    );
    assert!(!err.contains("reachable from the network"), "{err}");
    let (line, err) = first_line_and_stderr(&["--host", "0.0.0.0"]);
    assert!(
        line.starts_with("tokenscope mock listening on http://0.0.0.0:"),
        "{line}"
    );
    assert!(
        err.contains("warning: bound to 0.0.0.0: reachable from the network"),
        "{err}"
    );
}

#[test]
fn a_pasted_endpoint_path_is_removed_and_said() {
    // The page strips a pasted `/chat/completions`; the CLI does the same (core's
    // one parser) and says what it did. The query is kept and sent.
    let mock = Mock::start(&["--itl-ms", "2", "--ttft-ms", "2"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let pasted = format!("{}/chat/completions?api-version=2024-02-01", mock.url);
    let o = run(&[
        "bench",
        "--url",
        &pasted,
        "--concurrency",
        "1",
        "--requests",
        "2",
        "--rounds",
        "1",
        "--max-tokens",
        "4",
        "--quiet",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("note: --url: removed the endpoint path /chat/completions"),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(
        report["config"]["url"], mock.url,
        "the base, without the query"
    );
    assert_eq!(report["levels"][0]["ok"], 2);
}

#[test]
fn mock_can_write_the_head_with_the_first_token() {
    // Servers that write nothing before the first body bytes (Go's net/http)
    // send the head with the first token; `mock --head-with-first-token` does.
    for held in [false, true] {
        let args: &[&str] = if held {
            &["--ttft-ms", "60", "--head-with-first-token"]
        } else {
            &["--ttft-ms", "60"]
        };
        let mock = Mock::start(args);
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("raw.jsonl");
        let o = run(&[
            "bench",
            "--url",
            &mock.url,
            "--requests",
            "4",
            "--warmup",
            "0",
            "--rounds",
            "1",
            "--max-tokens",
            "4",
            "--server-metrics",
            "none",
            "--raw",
            raw.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o));
        for s in mock.log_records(4) {
            let head_to_token = common::f(&s["chunk_times_ms"][0]) - common::f(&s["t_headers_ms"]);
            if held {
                assert!((0.0..5.0).contains(&head_to_token), "{s}");
            } else {
                assert!(head_to_token > 50.0, "the head goes out at once: {s}");
            }
        }
        for r in common::raw_requests(&raw) {
            let head_to_token = common::f(&r["token_events_ms"][0]) - common::f(&r["t_headers_ms"]);
            if held {
                // Together (hyper may hand the body a task hop later on a busy host).
                assert!(head_to_token < 20.0, "the client got them together: {r}");
            } else {
                assert!(head_to_token > 50.0, "{r}");
            }
        }
    }
}

#[test]
fn long_context_prompts_resolve_against_the_window_and_overflow_is_classified() {
    // The mock says its window in /v1/models (vLLM's max_model_len) and refuses
    // a prompt + max_tokens beyond it with llama.cpp's words.
    let mock = Mock::start(&["--max-context", "400", "--ttft-ms", "5", "--itl-ms", "2"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let bench = |input: &str, extra: &[&str], code: i32| {
        let mut args = vec![
            "bench",
            "--url",
            &mock.url,
            "--concurrency",
            "1",
            "--requests",
            "3",
            "--rounds",
            "1",
            "--warmup",
            "0",
            "--max-tokens",
            "8",
            "--server-metrics",
            "none",
            "--input-tokens",
            input,
            "--json",
            out.to_str().unwrap(),
            "-q",
        ];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(code), "{}", text(&o));
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        r
    };
    // 75% of 400: 300 tokens, exact by the mock's /tokenize; every request fits.
    let r = bench("0.75max", &[], 0);
    assert_eq!(r["config"]["context_window"], 400);
    assert_eq!(r["config"]["input_tokens"], 300);
    assert_eq!(r["levels"][0]["ok"], 3);
    assert_eq!(r["levels"][0]["usage_prompt_tokens"], 900);
    // The whole window plus max_tokens does not fit: refused, counted as such;
    // nothing succeeded, so the run failed as a run (exit 4, the report written).
    let r = bench("1max", &[], 4);
    let level = &r["levels"][0];
    assert_eq!(level["errors"], 3, "{level}");
    assert_eq!(level["error_kinds"]["context_overflow"], 3, "{level}");
    // --context-window for a server that does not say (here: overriding it).
    let r = bench("0.5max", &["--context-window", "200"], 0);
    assert_eq!(r["config"]["input_tokens"], 100);
    // Bad values are one line before anything runs.
    for (value, want) in [
        ("1.5max", "in (0, 1]"),
        ("lots", "expected a number of tokens"),
    ] {
        let o = run(&["bench", "--url", &mock.url, "--input-tokens", value]);
        assert_eq!(o.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(want),
            "{}",
            text(&o)
        );
    }
}

#[test]
fn stalls_and_longest_gaps_match_the_gaps_the_mock_injected() {
    // Every request stalls once for 400 ms mid-stream (the mock's `stall` fault),
    // then completes: each request's longest gap is that stall, counted once.
    let mock = Mock::start(&[
        "--error-rate",
        "1",
        "--faults",
        "stall",
        "--stall",
        "400ms",
        "--ttft-ms",
        "5",
        "--itl-ms",
        "5",
        "--jitter-ms",
        "0",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let (out, raw) = (dir.path().join("r.json"), dir.path().join("raw.jsonl"));
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--no-preflight",
        "--concurrency",
        "2",
        "--requests",
        "4",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--max-tokens",
        "12",
        "--stall-gap",
        "250ms",
        "--slo",
        "max_gap_ms:p95<=300",
        "--allow-unevaluated",
        "--server-metrics",
        "none",
        "--tokenizer",
        "approx",
        "--json",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let level = &report["levels"][0];
    assert_eq!(level["ok"], 4, "{level}");
    assert_eq!(
        level["stalls"]["count"], 4,
        "one stall per request: {level}"
    );
    assert_eq!(level["stalls"]["requests"], 4);
    // Request by request: the client's longest gap is the mock's (its log's
    // chunk times), within a few ms of delivery.
    let log: std::collections::HashMap<String, serde_json::Value> = mock
        .log_records(4)
        .into_iter()
        .map(|r| (r["request_id"].as_str().unwrap().to_owned(), r))
        .collect();
    let longest = |times: &[serde_json::Value]| {
        times
            .windows(2)
            .map(|w| w[1].as_f64().unwrap() - w[0].as_f64().unwrap())
            .fold(0.0_f64, f64::max)
    };
    for r in common::raw_requests(&raw) {
        let ours = longest(r["token_events_ms"].as_array().unwrap());
        let theirs = longest(
            log[r["request_id"].as_str().unwrap()]["chunk_times_ms"]
                .as_array()
                .unwrap(),
        );
        assert!(theirs >= 400.0, "the mock stalled 400 ms: {theirs}");
        assert!(
            (ours - theirs).abs() < 5.0,
            "client {ours} vs server {theirs}"
        );
    }
    let max_gap = &level["metrics"]["max_gap_ms"];
    assert_eq!(max_gap["count"], 4);
    assert!(common::f(&max_gap["p50"]) >= 400.0, "{max_gap}");
    // The SLO on smoothness: no request met it; 4 requests cannot carry the
    // level's p95, which is said rather than judged.
    assert_eq!(level["goodput_per_s"], 0.0, "{level}");
    assert_eq!(level["slo_checks"][0]["met"], false, "{level}");
    assert!(
        level["slo_checks"][0]["not_evaluable"]
            .as_str()
            .is_some_and(|w| w.starts_with("4 successful requests: a p95 needs 100")),
        "{level}"
    );
    assert_eq!(level["slo_checks"][0]["slo"], "max_gap_ms:p95<=300");
}

#[test]
fn gamma_arrivals_have_the_burstiness_asked() {
    let mock = Mock::start(&["--max-batch", "256", "--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let cv_of = |arrival: &str| {
        let raw = dir
            .path()
            .join(format!("{}.jsonl", arrival.replace(':', "_")));
        let out = dir.path().join("r.json");
        let o = run(&[
            "bench",
            "--url",
            &mock.url,
            "--rate",
            "100",
            "--arrival",
            arrival,
            "--requests",
            "300",
            "--rounds",
            "1",
            "--warmup",
            "0",
            "--max-tokens",
            "2",
            "--input-tokens",
            "8",
            "--server-metrics",
            "none",
            "--raw",
            raw.to_str().unwrap(),
            "--json",
            out.to_str().unwrap(),
            "-q",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let mut t: Vec<f64> = common::raw_requests(&raw)
            .iter()
            .map(|r| common::f(&r["t_scheduled_ms"]))
            .collect();
        t.sort_by(f64::total_cmp);
        let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        (mean, sd / mean, report)
    };
    let (mean, cv, report) = cv_of("gamma:2");
    assert_eq!(report["config"]["arrival"], "gamma");
    assert_eq!(report["config"]["arrival_cv"], 2.0);
    assert!((mean - 10.0).abs() < 2.5, "mean gap {mean} ms at 100/s");
    assert!((1.4..2.6).contains(&cv), "gamma:2 gave a CV of {cv}");
    let (_, cv, _) = cv_of("constant");
    assert!(cv < 1e-9, "constant gaps: {cv}");
    let (_, cv, _) = cv_of("poisson");
    assert!((0.75..1.25).contains(&cv), "poisson: {cv}");
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--rate",
        "1",
        "--arrival",
        "gamma:0",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--arrival"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_ramp_raises_the_load_linearly_before_the_measured_part() {
    let mock = Mock::start(&["--max-batch", "64", "--ttft-ms", "2", "--itl-ms", "2"]);
    let dir = tempfile::tempdir().unwrap();
    let run_ramp = |load: &[&str]| {
        let raw = dir.path().join("raw.jsonl");
        let mut args = vec![
            "bench",
            "--url",
            &mock.url,
            "--ramp",
            "1s",
            "--requests",
            "8",
            "--rounds",
            "1",
            "--max-tokens",
            "4",
            "--input-tokens",
            "8",
            "--server-metrics",
            "none",
            "--raw",
            raw.to_str().unwrap(),
            "-q",
        ];
        args.extend_from_slice(load);
        let o = run(&args);
        assert!(o.status.success(), "{}", text(&o));
        let lines = common::read_jsonl(&raw);
        assert_eq!(lines[0]["config"]["ramp_s"], 1.0);
        common::raw_requests(&raw)
    };
    // Rate 40/s: the ramp sends sqrt(2 T k / r) apart, about r T / 2 = 20 requests,
    // their gaps shrinking; none is measured.
    let reqs = run_ramp(&["--rate", "40"]);
    let mut ramp: Vec<f64> = reqs
        .iter()
        .filter(|r| r["warmup"] == true)
        .map(|r| common::f(&r["t_scheduled_ms"]))
        .collect();
    ramp.sort_by(f64::total_cmp);
    assert_eq!(
        ramp.len(),
        19,
        "k = 1..19 fall within the ramp (k = 20 is its end)"
    );
    // t_k = sqrt(2 T k / r) with T = 1000 ms and r = 0.04 per ms.
    let t0 = ramp[0] - (2.0 * 1000.0 / 0.04_f64).sqrt();
    for (k, t) in ramp.iter().enumerate() {
        let want = (2.0 * 1000.0 * (k + 1) as f64 / 0.04).sqrt();
        assert!(
            (t - t0 - want).abs() < 1e-6,
            "send {k} at {} ms, want {want}",
            t - t0
        );
    }
    assert_eq!(reqs.iter().filter(|r| r["warmup"] == false).count(), 8);
    // Concurrency 4: workers join at 0, 250, 500 and 750 ms.
    let reqs = run_ramp(&["--concurrency", "4"]);
    let mut sends: Vec<f64> = reqs
        .iter()
        .filter(|r| r["warmup"] == true)
        .map(|r| common::f(&r["t_send_ms"]))
        .collect();
    sends.sort_by(f64::total_cmp);
    let t0 = sends[0];
    // In flight over time: at most one worker before 250 ms, at most two before 500.
    let before = |ms: f64| sends.iter().filter(|t| **t - t0 < ms).count();
    assert!(before(240.0) >= 1);
    let in_first_quarter: Vec<f64> = sends.iter().filter(|t| **t - t0 < 240.0).copied().collect();
    assert!(
        in_first_quarter.windows(2).all(|w| w[1] - w[0] > 5.0),
        "one worker: sends follow each other's ends: {in_first_quarter:?}"
    );
    assert!(sends.last().unwrap() - t0 < 1000.0, "the ramp ends at 1 s");
    assert_eq!(reqs.iter().filter(|r| r["warmup"] == false).count(), 8);
}

#[test]
fn a_shared_prefix_begins_every_request_with_the_same_system_prompt() {
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = tempfile::tempdir().unwrap();
    for api in ["chat", "completions"] {
        let (out, raw) = (
            dir.path().join("r.json"),
            dir.path().join(format!("{api}.jsonl")),
        );
        let o = run(&[
            "bench",
            "--url",
            &mock.url,
            "--api",
            api,
            "--shared-prefix",
            "50",
            "--input-tokens",
            "20",
            "--concurrency",
            "2",
            "--requests",
            "4",
            "--rounds",
            "1",
            "--warmup",
            "0",
            "--max-tokens",
            "2",
            "--json",
            out.to_str().unwrap(),
            "--raw",
            raw.to_str().unwrap(),
            "-q",
        ]);
        assert!(o.status.success(), "{api}: {}", text(&o));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(report["config"]["shared_prefix_tokens"], 50);
        assert_eq!(report["config"]["tokens"]["template_overhead"], 0, "{api}");
        let level = &report["levels"][0];
        assert_eq!(level["prompt_tokens_checked"], 4, "{api}: {level}");
        assert!(level["prompt_tokens_differ"].is_null(), "{api}: {level}");
        for r in common::raw_requests(&raw) {
            assert_eq!(r["prompt_tokens_sent"], 70, "{api}: {r}");
            assert_eq!(r["usage"]["prompt_tokens"], 70, "{api}: {r}");
        }
    }
    let o = run(&["bench", "--url", &mock.url, "--shared-prefix", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn a_reasoning_models_first_answer_token_is_timed_against_the_mocks_log() {
    // Five reasoning tokens (delta.reasoning_content), then the answer. Timing on
    // a shared 2-core host: a run that misses the 1 ms bound is repeated after a
    // pause (three at most); one whole run must meet it.
    let mock = Mock::start(&[
        "--reasoning-tokens",
        "5",
        "--ttft-ms",
        "20",
        "--itl-ms",
        "6",
        "--jitter-ms",
        "0",
    ]);
    let mut outcome = reasoning_run(&mock);
    for attempt in 2..=3 {
        let Err(e) = &outcome else { break };
        eprintln!("attempt {} missed ({e}); repeating", attempt - 1);
        std::thread::sleep(std::time::Duration::from_secs(5));
        outcome = reasoning_run(&mock);
    }
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

/// One run against the reasoning mock: every check panics but the timing bound,
/// which is returned.
fn reasoning_run(mock: &Mock) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let (out, raw) = (dir.path().join("r.json"), dir.path().join("raw.jsonl"));
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "1",
        "--requests",
        "6",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--max-tokens",
        "12",
        "--server-metrics",
        "none",
        "--json",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let m = &report["levels"][0]["metrics"];
    assert_eq!(m["reasoning_tokens"]["count"], 6);
    assert_eq!(m["reasoning_tokens"]["min"], 5.0);
    assert_eq!(m["reasoning_tokens"]["max"], 5.0);
    assert!(common::f(&m["time_to_first_answer_ms"]["p50"]) > common::f(&m["ttft_ms"]["p50"]));
    // The log also holds the pre-flight's requests: wait for all six of the run's.
    let ids: Vec<String> = common::raw_requests(&raw)
        .iter()
        .map(|r| r["request_id"].as_str().unwrap().to_owned())
        .collect();
    let log: std::collections::HashMap<String, serde_json::Value> = mock
        .log_records_for(&ids)
        .into_iter()
        .filter(|r| r["request_id"].is_string())
        .map(|r| (r["request_id"].as_str().unwrap().to_owned(), r))
        .collect();
    let mut diffs = Vec::new();
    for r in common::raw_requests(&raw) {
        assert_eq!(r["reasoning_events"], 5, "{r}");
        assert_eq!(
            r["usage"]["completion_tokens_details"]["reasoning_tokens"],
            5
        );
        let s = &log[r["request_id"].as_str().unwrap()];
        let chunks = s["chunk_times_ms"].as_array().unwrap();
        // One token a chunk: the sixth chunk is the first answer token.
        let server = common::f(&chunks[5]) - common::f(&s["t_received_ms"]);
        let client = common::f(&r["t_first_answer_ms"]) - common::f(&r["t_send_ms"]);
        let ttft = common::f(&r["token_events_ms"][0]) - common::f(&r["t_send_ms"]);
        assert!(
            client > ttft + 20.0,
            "the answer comes after the reasoning: {client} vs {ttft}"
        );
        assert!(
            client >= server - 0.05,
            "the client saw the answer before it was sent"
        );
        diffs.push(client - server);
    }
    let med = common::median(&diffs);
    eprintln!("time to first answer token, client minus the mock's log: median {med:.3} ms");
    if med < 1.0 {
        Ok(())
    } else {
        Err(format!("median {med:.3} ms over 1 ms: {diffs:?}"))
    }
}

/// Input and output tiers: the sweep runs at each pair, one report (and raw
/// file) per tier named for it; every request of a tier had the tier's prompt
/// length and max_tokens as the mock counted them, and the run ends with the
/// tiers side by side.
#[test]
fn input_and_output_tiers_run_the_sweep_at_each_and_name_their_files() {
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let (out, raw) = (dir.path().join("r.json"), dir.path().join("raw.jsonl"));
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--input-tokens",
        "16,48",
        "--max-tokens",
        "3,7",
        "--concurrency",
        "1,2",
        "--requests",
        "4",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--ignore-eos",
        "--json",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("all tiers"), "{stdout}");
    let log: std::collections::HashMap<String, serde_json::Value> = mock
        .log_records(4 * 2 * 4)
        .into_iter()
        .map(|r| (r["request_id"].as_str().unwrap().to_owned(), r))
        .collect();
    for (input, max_tokens) in [(16, 3), (16, 7), (48, 3), (48, 7)] {
        let tier = format!("in{input}-out{max_tokens}");
        assert!(stdout.contains(&tier), "{stdout}");
        let path = dir.path().join(format!("r.{tier}.json"));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        common::assert_schema("client.schema.json", &report, &tier);
        assert_eq!(report["config"]["input_tokens"], input, "{tier}");
        assert_eq!(report["config"]["max_tokens"], max_tokens, "{tier}");
        assert_eq!(report["levels"].as_array().unwrap().len(), 2, "{tier}");
        let lines = common::raw_requests(&dir.path().join(format!("raw.{tier}.jsonl")));
        assert_eq!(lines.len(), 8, "{tier}");
        for l in lines {
            let server = &log[l["request_id"].as_str().unwrap()];
            assert_eq!(server["prompt_tokens"], input, "{tier}: {server}");
            assert_eq!(server["max_tokens"], max_tokens, "{tier}: {server}");
            assert_eq!(l["usage"]["completion_tokens"], max_tokens, "{tier}");
        }
    }
    assert!(
        !out.exists(),
        "with tiers, every file is named for its tier"
    );
    // The tiers' reports make one combined report.
    let mut a = vec!["report".to_owned(), "--client".to_owned()];
    for (i, m) in [(16, 3), (16, 7), (48, 3), (48, 7)] {
        a.push(
            dir.path()
                .join(format!("r.in{i}-out{m}.json"))
                .display()
                .to_string(),
        );
    }
    a.extend(["--markdown".into(), "-".into()]);
    let o = run(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    assert_eq!(md.matches("## Levels (native client").count(), 4, "{md}");
    for (args, says) in [
        (vec!["--max-tokens", "3,0"], "--max-tokens"),
        (vec!["--input-tokens", "16,x"], "--input-tokens"),
    ] {
        let mut a = vec!["bench", "--url", &mock.url];
        a.extend(args.iter().copied());
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
    }
}

/// Input tiers pick a prompts file's prompts by length: each tier sends the
/// prompts within 25% of its length (the server's own count: the mock's
/// /tokenize), as the mock's log shows; a tier no prompt fits is one clear line.
#[test]
fn input_tiers_pick_a_prompts_files_prompts_by_length() {
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let words = |n: usize, w: &str| vec![w; n].join(" ");
    let mut lines = String::new();
    for (n, w) in [
        (10, "alpha"),
        (11, "beta"),
        (9, "gamma"),
        (40, "delta"),
        (44, "eps"),
        (100, "zeta"),
    ] {
        lines.push_str(&serde_json::json!({ "prompt": words(n, w) }).to_string());
        lines.push('\n');
    }
    let prompts = dir.path().join("p.jsonl");
    std::fs::write(&prompts, lines).unwrap();
    let out = dir.path().join("r.json");
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--prompts",
        prompts.to_str().unwrap(),
        "--input-tokens",
        "10,40",
        "--concurrency",
        "1",
        "--requests",
        "4",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--max-tokens",
        "2",
        "--json",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    // The measured requests (max_tokens 2; the pre-flight's and the template
    // check's ask for 1).
    let log: Vec<serde_json::Value> = mock
        .log_records(11)
        .into_iter()
        .filter(|r| r["max_tokens"] == 2)
        .collect();
    assert_eq!(log.len(), 8);
    for (tier, distinct) in [(10, 3), (40, 2)] {
        let path = dir.path().join(format!("r.in{tier}-out2.json"));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(report["config"]["input_tokens"], tier);
        assert_eq!(report["config"]["distinct_prompts"], distinct, "{tier}");
        assert!(report["config"]["prompts_file"].is_string());
    }
    // The mock's count of every prompt sent: the first 4 in the 10 tier, the
    // next 4 in the 40 tier.
    let counts: Vec<u64> = log
        .iter()
        .map(|r| r["prompt_tokens"].as_u64().unwrap())
        .collect();
    assert!(
        counts[..4].iter().all(|c| (9..=11).contains(c)),
        "{counts:?}"
    );
    assert!(
        counts[4..].iter().all(|c| (40..=44).contains(c)),
        "{counts:?}"
    );
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--prompts",
        prompts.to_str().unwrap(),
        "--input-tokens",
        "500",
        "--requests",
        "1",
        "--rounds",
        "1",
        "-q",
    ]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("--input-tokens 500") && t.contains("within 25%") && t.contains("9 to 100"),
        "{t}"
    );
}

/// The most spans `(start, end)` open at once (an end at a start does not overlap).
fn most_at_once(spans: &[(f64, f64)]) -> usize {
    let mut events: Vec<(f64, i32)> = spans.iter().flat_map(|&(a, b)| [(a, 1), (b, -1)]).collect();
    events.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    let (mut open, mut most) = (0, 0);
    for (_, d) in events {
        open += d;
        most = most.max(open);
    }
    most as usize
}

/// A closed-loop level is the load it claims, or it is left out. `--requests 24`
/// over 3 rounds gives c=16 8 requests a round (never 16 in flight; main
/// concluded "SLO capacity c=16" from it): the level is raised to 48 and that is
/// said. Each level's reached load is what the mock's own log shows in flight.
/// The same raw file with c=16 cut back to 8 a round (what main sent), rebuilt,
/// marks c=16 under-loaded and leaves it out of the capacity and the knee.
#[test]
fn a_level_is_the_load_it_claims_or_is_left_out() {
    let mock = Mock::start(&["--ttft-ms", "20", "--itl-ms", "5"]);
    let dir = tempfile::tempdir().unwrap();
    let (out, raw) = (dir.path().join("r.json"), dir.path().join("raw.jsonl"));
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "1,8,16",
        "--requests",
        "24",
        "--max-tokens",
        "8",
        "--input-tokens",
        "16",
        "--slo",
        "ttft_ms:p50<=500",
        "--server-metrics",
        "none",
        "--quiet",
        "--json",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        stderr.matches("c=16 sends 48").count(),
        1,
        "said once: {stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    common::assert_schema("client.schema.json", &report, "the report");
    let levels = report["levels"].as_array().unwrap();
    let sent: Vec<u64> = levels.iter().map(|l| l["sent"].as_u64().unwrap()).collect();
    assert_eq!(sent, [24, 24, 48], "c=16 raised to 16 a round");
    assert!(
        report["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "requests_raised"),
        "{}",
        report["warnings"]
    );
    // The client's in-flight maximum is the concurrency, and the mock's log
    // (each measured request from its arrival to its last byte) shows the same.
    let records = common::raw_requests(&raw);
    let log = mock.log_records(records.len());
    for (i, c) in [1usize, 8, 16].into_iter().enumerate() {
        let reached = &levels[i]["reached"];
        assert_eq!(reached["client_in_flight_max"], c, "c={c}: {reached}");
        assert!(reached.get("under_loaded").is_none(), "c={c}: {reached}");
        let ids: Vec<&str> = records
            .iter()
            .filter(|r| r["level"] == i && r["warmup"] == false)
            .map(|r| r["request_id"].as_str().unwrap())
            .collect();
        let spans: Vec<(f64, f64)> = log
            .iter()
            .filter(|s| ids.contains(&s["request_id"].as_str().unwrap_or("")))
            .map(|s| (common::f(&s["t_received_ms"]), common::f(&s["t_end_ms"])))
            .collect();
        assert_eq!(spans.len(), ids.len(), "c={c}: every request in the log");
        assert_eq!(most_at_once(&spans), c, "c={c}: in flight at the mock");
        let mean = common::f(&reached["client_in_flight_mean"]);
        assert!(mean > 0.0 && mean <= c as f64, "c={c}: mean {mean}");
    }
    assert!(
        report["sweep"].get("left_out").is_none(),
        "{}",
        report["sweep"]
    );
    let cap = &report["sweep"]["slo_capacity"];
    assert_eq!(
        (cap["concurrency"].as_u64(), cap["bound"].as_str()),
        (Some(16), Some("floor"))
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("SLO capacity (ttft_ms:p50<=500): at least c=16, no level tested failed"),
        "{stdout}"
    );

    // What main ran: c=16 with 8 a round (the first 8 sent of each round).
    let lines = common::read_jsonl(&raw);
    let mut kept = Vec::new();
    for round in 1..=3 {
        let mut of_round: Vec<&serde_json::Value> = lines
            .iter()
            .filter(|l| l["level"] == 2 && l["round"] == round)
            .collect();
        assert_eq!(of_round.len(), 16);
        of_round.sort_by(|a, b| common::f(&a["t_send_ms"]).total_cmp(&common::f(&b["t_send_ms"])));
        kept.extend(of_round[..8].iter().map(|l| l["request_id"].clone()));
    }
    let cut: String = lines
        .iter()
        .filter(|l| {
            !(l["level"] == 2 && l.get("round").is_some()) || kept.contains(&l["request_id"])
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let (cut_raw, rebuilt) = (
        dir.path().join("cut.jsonl"),
        dir.path().join("rebuilt.json"),
    );
    std::fs::write(&cut_raw, cut).unwrap();
    let o = run(&[
        "report",
        "--raw",
        cut_raw.to_str().unwrap(),
        "--client-out",
        rebuilt.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&rebuilt).unwrap()).unwrap();
    common::assert_schema("client.schema.json", &r, "the rebuilt report");
    let c16 = &r["levels"][2];
    assert_eq!(c16["sent"], 24);
    assert_eq!(c16["reached"]["client_in_flight_max"], 8, "{c16}");
    assert_eq!(c16["reached"]["under_loaded"], true, "{c16}");
    assert_eq!(r["sweep"]["left_out"], serde_json::json!([2]));
    // c=16 met the SLO, yet the capacity is c=8's: at least, nothing above tested.
    assert_eq!(c16["slo_checks"][0]["met"], true, "{c16}");
    let cap = &r["sweep"]["slo_capacity"];
    assert_eq!(
        (cap["concurrency"].as_u64(), cap["bound"].as_str()),
        (Some(8), Some("floor"))
    );
    assert!(
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "under_loaded"),
        "{}",
        r["warnings"]
    );
}

/// Every `--slo` check is evaluated or said not to be: a p95 of 24 requests
/// exits 3 with the reason and the fix, the report written and saying the same;
/// `--allow-unevaluated` exits 0 and still says it. Without `--requests` the
/// levels send what the percentile needs, and the check is evaluated.
#[test]
fn an_slo_check_that_cannot_be_evaluated_exits_3() {
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let bench = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "--url",
            &mock.url,
            "--concurrency",
            "4",
            "--max-tokens",
            "4",
            "--input-tokens",
            "8",
            "--slo",
            "ttft_ms:p95<=500",
            "--server-metrics",
            "none",
            "--quiet",
            "--json",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = run(&args);
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        (o, r)
    };
    let why = "24 successful requests: a p95 needs 100 (run --requests 100 or more)";
    let (o, r) = bench(&["--requests", "24"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!("c=4: ttft_ms:p95<=500: {why}")),
        "{stderr}"
    );
    assert!(stderr.contains("--allow-unevaluated"), "{stderr}");
    common::assert_schema("client.schema.json", &r, "the report");
    let check = &r["levels"][0]["slo_checks"][0];
    assert_eq!(check["not_evaluable"], why, "{check}");
    assert_eq!(check["met"], false, "{check}");
    assert!(r["sweep"]["slo_capacity"].is_null(), "{}", r["sweep"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("not evaluable"), "{stdout}");
    // Allowed: exit 0, still said.
    let (o, _) = bench(&["--requests", "24", "--allow-unevaluated"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("could not be evaluated"));
    // No count given: each level sends what a p95 needs (34 a round), said.
    let (o, r) = bench(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("each level sends at least 100"),
        "{}",
        text(&o)
    );
    assert_eq!(r["levels"][0]["sent"], 102);
    let check = &r["levels"][0]["slo_checks"][0];
    assert!(check.get("not_evaluable").is_none(), "{check}");
    assert_eq!(check["met"], true, "{check}");
}

/// The run's results folder: the one folder `parent` holds.
fn only_folder(parent: &std::path::Path) -> std::path::PathBuf {
    let dirs: Vec<_> = std::fs::read_dir(parent)
        .unwrap_or_else(|e| panic!("{}: {e}", parent.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "one results folder: {dirs:?}");
    dirs[0].clone()
}

/// The first run as a user meets it: the plan and an estimate before
/// sending, one line per level with the time left (no terminal here), the
/// verdict's sentences and the files written at the end; the results kept in
/// a results folder that `report` and `compare` read (the raw file beside the
/// report under the name they look for).
#[test]
fn a_first_run_says_its_plan_and_keeps_its_results() {
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "2"]);
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let bench = || {
        run(&[
            "bench",
            "--url",
            &mock.url,
            "--concurrency",
            "1,2",
            "--requests",
            "4",
            "--rounds",
            "2",
            "--max-tokens",
            "6",
            "--ignore-eos",
            "--results-dir",
            runs.to_str().unwrap(),
        ])
    };
    let o = bench();
    assert!(o.status.success(), "{}", text(&o));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    // Before sending: the plan, and the estimate said as one.
    assert!(
        stderr.contains("plan: 2 levels (c=1, c=2), 2 rounds each; 4 measured requests per level, 1 to 2 warm-up requests first"),
        "{stderr}"
    );
    assert!(stderr.contains("max_tokens 6"), "{stderr}");
    let estimate = stderr
        .lines()
        .find(|l| l.starts_with("estimate: about "))
        .unwrap_or_else(|| panic!("no estimate: {stderr}"));
    assert!(
        estimate.contains("for 11 requests")
            && estimate.contains("as long as the pre-flight's short one")
            && estimate.contains("at max_tokens 6"),
        "{estimate}"
    );
    // Each level's line (not a terminal: no bar): the estimate refined while
    // levels remain, and no "about 0 s left" once the sweep is over.
    let level_line = |l: &str| {
        stderr
            .lines()
            .find(|s| s.starts_with(l))
            .unwrap_or_else(|| panic!("no {l:?}: {stderr}"))
    };
    let first = level_line("level 1/2 (c=1) done in");
    assert!(
        first.contains(" elapsed, about ") && first.ends_with(" left"),
        "{first}"
    );
    let last = level_line("level 2/2 (c=2) done in");
    assert!(
        last.ends_with(" elapsed") && !last.contains("about"),
        "{last}"
    );
    assert_eq!(
        stderr.lines().filter(|l| l.contains(" done in ")).count(),
        2,
        "one line per level, not per request: {stderr}"
    );
    // The results folder and its files, each named on stdout.
    let folder = only_folder(&runs);
    let name = folder.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.len() == "2026-12-06T07-41-55Z".len() && name.ends_with('Z') && !name.contains(':'),
        "{name}"
    );
    let (report, raw, md) = (
        folder.join("report.json"),
        folder.join("report.raw.jsonl"),
        folder.join("report.md"),
    );
    for p in [&report, &raw, &md] {
        assert!(p.is_file(), "{} missing", p.display());
        assert!(
            stdout.contains(&format!("wrote {}", p.display())),
            "{} not named: {stdout}",
            p.display()
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    common::assert_schema("client.schema.json", &json, "the results folder's report");
    let measured = common::raw_requests(&raw)
        .into_iter()
        .filter(|l| l["warmup"] != true)
        .count();
    assert_eq!(measured, 8, "the raw file holds every measured request");
    // The verdict's sentences, as core makes them of the report written.
    let parsed = tokenscope_core::report::ClientReport::from_json(
        &std::fs::read_to_string(&report).unwrap(),
    )
    .unwrap();
    let verdict = tokenscope_core::analyze::verdict::analyze(
        &tokenscope_core::report::combined::ReportInput {
            clients: vec![parsed],
            kernels: None,
            model: None,
        },
    )
    .verdict;
    assert!(!verdict.is_empty());
    for v in &verdict {
        assert!(stdout.contains(v.as_str()), "{v:?} not printed: {stdout}");
    }
    // `report` reads the folder's report (and its raw file alone), `compare`
    // two folders' reports with their raw files found beside them.
    let o = run(&[
        "report",
        "--client",
        report.to_str().unwrap(),
        "--markdown",
        "-",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&["report", "--raw", raw.to_str().unwrap(), "--markdown", "-"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = bench();
    assert!(o.status.success(), "{}", text(&o));
    let mut folders: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path().join("report.json"))
        .collect();
    folders.sort();
    assert_eq!(folders.len(), 2, "a second run, a second folder");
    let cmp = dir.path().join("cmp.json");
    let o = run(&[
        "compare",
        folders[0].to_str().unwrap(),
        folders[1].to_str().unwrap(),
        "--json",
        cmp.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let cmp = std::fs::read_to_string(&cmp).unwrap();
    assert!(
        !text(&o).contains("no raw file"),
        "compare found the raw files beside the reports: {}",
        text(&o)
    );
    let cmp: serde_json::Value = serde_json::from_str(&cmp).unwrap();
    assert!(
        cmp.to_string().contains("\"intervals\":true"),
        "the raw files were read: {cmp}"
    );
}

/// Where the results go without flags: `tokenscope-results/` in the working
/// folder (or `TOKENSCOPE_RESULTS_DIR`); `--no-save` writes nothing and says
/// so; beside an output flag both are refused.
#[test]
fn results_are_kept_by_default_and_no_save_says_nothing_was_saved() {
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let cwd = tempfile::tempdir().unwrap();
    let bench = |extra: &[&str]| {
        std::process::Command::new(common::bin())
            .args([
                "bench",
                "--url",
                &mock.url,
                "--concurrency",
                "1",
                "--requests",
                "2",
                "--rounds",
                "1",
                "--max-tokens",
                "3",
                "-q",
            ])
            .args(extra)
            .current_dir(cwd.path())
            .env_remove("TOKENSCOPE_RESULTS_DIR")
            .env_remove("TOKENSCOPE_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .output()
            .unwrap()
    };
    let o = bench(&[]);
    assert!(o.status.success(), "{}", text(&o));
    let folder = only_folder(&cwd.path().join("tokenscope-results"));
    assert!(folder.join("report.json").is_file(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("tokenscope compare OTHER/report.json"),
        "{}",
        text(&o)
    );
    std::fs::remove_dir_all(cwd.path().join("tokenscope-results")).unwrap();

    let o = bench(&["--no-save"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("nothing was saved (--no-save)"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read_dir(cwd.path()).unwrap().count(),
        0,
        "--no-save wrote nothing"
    );
    for (a, b) in [
        ("--no-save", "--json"),
        ("--results-dir", "--raw"),
        ("--results-dir", "--no-save"),
    ] {
        let mut args = vec![a];
        if a == "--results-dir" {
            args.push("r");
        }
        args.extend([b, "x.json"]);
        if b == "--no-save" {
            args.pop();
        }
        let o = bench(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("cannot be used with"),
            "{args:?}: {}",
            text(&o)
        );
    }
    assert_eq!(std::fs::read_dir(cwd.path()).unwrap().count(), 0);
}

/// A wrong base path: `/models` and the completion route both 404. The error
/// says the base path is probably wrong, names the URL tried (without its
/// query) and the base that answers, instead of asking for a model.
#[test]
fn a_wrong_base_path_is_named_as_such() {
    let mock = Mock::start(&[]);
    let origin = mock.url.trim_end_matches("/v1");
    let wrong = format!("{origin}/wrong/v1?key=sekrit");
    for extra in [&[][..], &["--model", "m"][..]] {
        let mut args = vec!["bench", "--url", &wrong, "--requests", "3"];
        args.extend(extra);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", text(&o));
        let err = stderr_line(&o);
        assert!(
            err.contains("base path of --url is probably wrong")
                && err.contains(&format!("GET {origin}/wrong/v1/models"))
                && err.contains(&format!("try --url {origin}/v1")),
            "{extra:?}: {err}"
        );
        assert!(!err.contains("pass --model"), "{err}");
        assert!(!err.contains("sekrit"), "the query is redacted: {err}");
    }
}

/// A negative number is the flag's value, refused by the flag's own check,
/// not "unexpected argument '-1'".
#[test]
fn negative_numbers_get_the_flags_own_error() {
    let url = "http://127.0.0.1:1/v1";
    for (flag, says) in [
        (
            "--max-tokens",
            "--max-tokens: \"-1\" is not a positive whole number",
        ),
        (
            "--concurrency",
            "--concurrency: \"-1\" is not a positive whole number",
        ),
        ("--input-tokens", "--input-tokens"),
        (
            "--requests",
            "'--requests <N>': expected a positive whole number",
        ),
        (
            "--rounds",
            "'--rounds <N>': expected a positive whole number",
        ),
        (
            "--warmup",
            "'--warmup <N>': expected a whole number, 0 or more",
        ),
        ("--temperature", "--temperature: -1 must be between 0 and 2"),
    ] {
        let o = run(&["bench", "--url", url, flag, "-1"]);
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", text(&o));
        let err = stderr_line(&o);
        assert!(err.contains(says), "{flag}: {err}");
        assert!(!err.contains("unexpected argument"), "{flag}: {err}");
    }
}

/// `--out`, the old spelling of `--json` (bench) and `--html` (report), keeps
/// working for one release: the same files, and a note naming the new flag;
/// both spellings at once are refused.
#[test]
fn the_old_out_spelling_still_writes_with_a_note() {
    let mock = Mock::start(&["--ttft-ms", "2", "--itl-ms", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "1",
        "--requests",
        "3",
        "--max-tokens",
        "4",
        "--out",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(json.is_file());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(
            "note: --out is now --json (the same file); --out keeps working until the next release"
        ),
        "{}",
        text(&o)
    );
    let html = dir.path().join("r.html");
    let o = run(&[
        "report",
        "--client",
        json.to_str().unwrap(),
        "--out",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        std::fs::read_to_string(&html)
            .unwrap()
            .starts_with("<!doctype html>")
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("note: --out is now --html"));
    let o = run(&[
        "bench", "--url", &mock.url, "--out", "a.json", "--json", "b.json",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--json"), "{}", text(&o));
}
