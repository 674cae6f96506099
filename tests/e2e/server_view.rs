//! The report's server view against ground truth: a bench run scrapes the mock's
//! `/metrics` (its own connection, at each level's start and end and every
//! second), and each level's server-side histograms, stage split and token
//! check are compared with the mock's `--log` of what it really did. Then the
//! bad cases: no `/metrics`, a 401, garbage, a scrape that hangs; the key's
//! handling on another host.

use crate::common;

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use common::{Mock, assert_schema, read_jsonl, run, text};
use serde_json::Value;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

#[test]
fn each_levels_server_view_is_what_the_mock_did() {
    let mock = Mock::start(&["--ttft-ms", "30", "--itl-ms", "5", "--max-batch", "2"]);
    let dir = tempfile::tempdir().unwrap();
    let (out, raw, md) = (
        dir.path().join("r.json"),
        dir.path().join("raw.jsonl"),
        dir.path().join("r.md"),
    );
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "1,4",
        "--requests",
        "12",
        "--rounds",
        "1",
        "--max-tokens",
        "16",
        "--input-tokens",
        "64",
        "--scrape-interval",
        "200ms",
        "--quiet",
        "--json",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("where TTFT went"), "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_schema("client.schema.json", &report, "the report");
    assert!(
        report["config"]["server_metrics_url"]
            .as_str()
            .unwrap()
            .ends_with("/metrics")
    );
    let lines = read_jsonl(&raw);
    let n_requests = lines
        .iter()
        .filter(|l| l.get("request_id").is_some())
        .count();
    let log = mock.log_records(n_requests);
    let by_id: HashMap<&str, &Value> = log
        .iter()
        .filter_map(|r| Some((r["request_id"].as_str()?, r)))
        .collect();
    // A scrape line for every scrape, each level's first one after its start.
    assert!(lines.iter().filter(|l| l["event"] == "scrape").count() >= 4);
    for (li, level) in report["levels"].as_array().unwrap().iter().enumerate() {
        let server = &level["server"];
        assert_eq!(server["engine"], "vllm", "{server}");
        assert_eq!(server["failed_scrapes"], 0);
        // The level's measured requests, as the mock logged them.
        let mut client_ttft = Vec::new();
        let (mut ttft, mut queue, mut prefill, mut tokens, mut prompt) =
            (Vec::new(), Vec::new(), Vec::new(), 0.0, 0.0);
        for l in lines
            .iter()
            .filter(|l| l.get("request_id").is_some() && l["level"] == li && l["warmup"] == false)
        {
            let rec = by_id[l["request_id"].as_str().unwrap()];
            assert_eq!(rec["outcome"], "completed");
            let first = f(&rec["chunk_times_ms"][0]);
            let received = f(&rec["t_received_ms"]);
            let scheduled = f(&rec["t_scheduled_ms"]);
            ttft.push(first - received);
            queue.push(scheduled - received);
            prefill.push(first - scheduled);
            tokens += f(&rec["completion_tokens"]);
            prompt += f(&rec["prompt_tokens"]);
            client_ttft.push(f(&l["token_events_ms"][0]) - f(&l["t_send_ms"]));
        }
        assert_eq!(ttft.len(), 12);
        let st = &server["stages"];
        let close = |what: &str, got: &Value, want: f64| {
            let got = f(got);
            assert!(
                (got - want).abs() < 1.0,
                "level {li} {what}: report {got} ms, the mock's log {want} ms"
            );
        };
        assert_eq!(f(&st["server_requests"]), 12.0);
        close("server TTFT", &st["server_ttft_ms"], mean(&ttft));
        close("queue", &st["queue_ms"], mean(&queue));
        close("prefill", &st["prefill_ms"], mean(&prefill));
        close("client TTFT", &st["client_ttft_ms"], mean(&client_ttft));
        let gap: Vec<f64> = client_ttft.iter().zip(&ttft).map(|(c, s)| c - s).collect();
        close("network + client", &st["network_and_client_ms"], mean(&gap));
        // The token cross-check: the engine's counters over the level are the
        // usage the client received, which is what the mock sent.
        let t = &server["tokens"];
        assert_eq!(t["agrees"], true, "{t}");
        assert_eq!(f(&t["server_generated"]), tokens);
        assert_eq!(f(&t["client_completion"]), tokens);
        assert_eq!(f(&t["server_prompt"]), prompt);
        // The server's TTFT histogram over the level counted these 12 requests.
        let h = server["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["series"] == "ttft_seconds")
            .unwrap();
        assert_eq!(f(&h["histogram"]["count"]), 12.0);
        assert!((f(&h["histogram"]["mean"]) * 1000.0 - mean(&ttft)).abs() < 1e-6);
    }
    // Four clients on two slots: the mock's queue shows at c=4, not at c=1.
    let waiting = |li: usize| {
        report["levels"][li]["server"]["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["series"] == "requests_waiting")
            .map(|s| f(&s["max"]))
            .unwrap()
    };
    assert_eq!(waiting(0), 0.0);
    assert!(waiting(1) >= 1.0, "{}", waiting(1));
    // The run's timeline: a point per successful scrape.
    let timeline = report["server"]["timeline"].as_array().unwrap();
    assert!(timeline.len() >= 4);
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains("### Where TTFT went"), "{md}");
    // The HTML report draws the server over the run.
    let html = dir.path().join("r.html");
    let o = run(&[
        "report",
        "--client",
        out.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("Requests on the server over the run"));
    assert!(html.contains("<h3 id=\"stages\">"));
}

/// A `/metrics` server that answers badly in one way, and notes whether a key
/// came with the requests.
struct BadMetrics {
    url: String,
    saw_key: Arc<Mutex<bool>>,
}

fn bad_metrics(answer: &'static str) -> BadMetrics {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    let saw_key = Arc::new(Mutex::new(false));
    let seen = saw_key.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(s.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                    if line.to_ascii_lowercase().starts_with("authorization:") {
                        *seen.lock().unwrap() = true;
                    }
                    if line == "\r\n" {
                        break;
                    }
                    line.clear();
                }
                let reply = match answer {
                    "401" => "HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n".to_owned(),
                    "hang" => {
                        std::thread::sleep(std::time::Duration::from_secs(30));
                        return;
                    }
                    _ => {
                        let body = "<html><body>Not the metrics you want</body></html>\n";
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        )
                    }
                };
                let _ = s.write_all(reply.as_bytes());
            });
        }
    });
    BadMetrics { url, saw_key }
}

fn bench_with(mock: &Mock, extra: &[&str], key: Option<&str>) -> (std::process::Output, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let mut cmd = std::process::Command::new(common::bin());
    cmd.args([
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "2",
        "--requests",
        "6",
        "--rounds",
        "1",
        "--max-tokens",
        "8",
        "--quiet",
        "--json",
        out.to_str().unwrap(),
    ])
    .args(extra)
    .env_remove("OPENAI_API_KEY")
    .env_remove("TOKENSCOPE_API_KEY");
    if let Some(k) = key {
        cmd.env("TOKENSCOPE_API_KEY", k);
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    if let Some(k) = key {
        assert!(!text.contains(k), "the key reached the report");
        assert!(!String::from_utf8_lossy(&o.stdout).contains(k));
        assert!(!String::from_utf8_lossy(&o.stderr).contains(k));
    }
    (o, serde_json::from_str(&text).unwrap())
}

fn warnings(r: &Value, kind: &str) -> Vec<String> {
    r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] == kind)
        .map(|w| w["message"].as_str().unwrap().to_owned())
        .collect()
}

fn measured_everything(r: &Value) {
    let l = &r["levels"][0];
    assert_eq!((l["sent"].as_u64(), l["ok"].as_u64()), (Some(6), Some(6)));
}

#[test]
fn no_metrics_at_the_endpoint_is_one_quiet_line_and_the_run_goes_on() {
    let mock = Mock::start(&["--no-metrics", "--itl-ms", "2"]);
    let (_, r) = bench_with(&mock, &[], None);
    measured_everything(&r);
    let off = warnings(&r, "server_metrics_off");
    assert_eq!(off.len(), 1, "{:?}", r["warnings"]);
    assert!(off[0].contains("HTTP 404"), "{}", off[0]);
    assert!(r["levels"][0].get("server").is_none());
    assert!(r.get("server").is_none());
    assert!(r["config"].get("server_metrics_url").is_none());
    // `none`: not even tried.
    let (_, r) = bench_with(&mock, &["--server-metrics", "none"], None);
    assert!(warnings(&r, "server_metrics_off").is_empty());
}

#[test]
fn a_401_garbage_or_a_hang_is_counted_and_said_and_nothing_measured_is_lost() {
    let mock = Mock::start(&["--itl-ms", "2"]);
    for (answer, reason) in [
        ("401", "HTTP 401 (no key was sent"),
        ("garbage", "no known engine's metric names"),
        ("hang", "no answer within 3 s"),
    ] {
        let bad = bad_metrics(answer);
        let (_, r) = bench_with(
            &mock,
            &["--server-metrics", &bad.url],
            Some("sk-test-secret-123"),
        );
        measured_everything(&r);
        let w = warnings(&r, "server_metrics");
        assert_eq!(w.len(), 1, "{answer}: {:?}", r["warnings"]);
        assert!(w[0].contains(reason), "{answer}: {}", w[0]);
        let s = &r["server"]["targets"][0];
        assert_eq!(s["scrapes"], s["failed"], "{answer}: every scrape failed");
        // The key goes only to the endpoint's origin.
        assert!(
            !*bad.saw_key.lock().unwrap(),
            "{answer}: the key went to another host"
        );
        if answer == "garbage" {
            assert!(f(&s["skipped_lines"]) >= 1.0);
        }
    }
    // Asked to, the key goes there too (and is still never written).
    let bad = bad_metrics("401");
    let (_, r) = bench_with(
        &mock,
        &["--server-metrics", &bad.url, "--metrics-send-key"],
        Some("sk-test-secret-123"),
    );
    assert!(*bad.saw_key.lock().unwrap());
    assert!(warnings(&r, "server_metrics")[0].contains("the key sent was refused"));
}

#[test]
fn bad_metrics_flags_are_refused_before_anything_is_sent() {
    for (args, says) in [
        (
            vec!["--server-metrics", "ftp://x/metrics"],
            "--server-metrics",
        ),
        (
            vec!["--server-metrics", "nonsense"],
            "is not auto, none or a URL",
        ),
        (vec!["--gpu-metrics", "::"], "--gpu-metrics"),
        (vec!["--scrape-interval", "10ms"], "under 100ms"),
    ] {
        let mut a = vec!["bench", "--url", "http://127.0.0.1:9/v1"];
        a.extend(args);
        let o = run(&a);
        assert!(!o.status.success());
        assert!(text(&o).contains(says), "{}", text(&o));
    }
}

/// What each token costs against the mock's truth: a simulated GPU drawing
/// 250 W (`--gpu-watts`, its energy counter exact to the millijoule) gives each
/// level's energy, which must be the counter's increase between the level's
/// first and last GPU scrapes and 250 W over the time between them by the
/// client's clock; per-token prices charge each request's usage, which must be
/// what the mock's log says it served (prompt, cached and answer tokens).
#[test]
fn what_each_token_costs_is_what_the_mock_served() {
    let mock = Mock::start(&[
        "--ttft-ms",
        "20",
        "--itl-ms",
        "5",
        "--gpu-watts",
        "250",
        "--prefix-cache",
    ]);
    let gpu = format!("{}/gpu/metrics", mock.url.trim_end_matches("/v1"));
    let dir = tempfile::tempdir().unwrap();
    let (out, raw) = (dir.path().join("r.json"), dir.path().join("raw.jsonl"));
    let prices = "input_per_mtok=3,cached_input_per_mtok=0.3,output_per_mtok=15";
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "1,4",
        "--requests",
        "12",
        "--rounds",
        "1",
        "--max-tokens",
        "16",
        "--input-tokens",
        "64",
        "--shared-prefix",
        "32",
        "--gpu-metrics",
        &gpu,
        "--scrape-interval",
        "200ms",
        "--price",
        prices,
        "--json",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("what each token cost"), "{stdout}");
    assert!(stdout.contains("energy counter"), "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_schema("client.schema.json", &report, "the report");
    assert_eq!(report["config"]["price"]["basis"], "tokens");
    let lines = read_jsonl(&raw);
    let n_requests = lines
        .iter()
        .filter(|l| l.get("request_id").is_some())
        .count();
    let log = mock.log_records(n_requests);
    let by_id: HashMap<&str, &Value> = log
        .iter()
        .filter_map(|r| Some((r["request_id"].as_str()?, r)))
        .collect();
    let energy_counter = |l: &Value| -> Option<(f64, f64)> {
        (l["event"] == "scrape" && l["target"] == "gpu").then(|| {
            // The raw file keeps the series in their units: joules.
            let j = l["values"]["gpu_energy_joules"].as_f64();
            (
                f(&l["t_ms"]),
                j.unwrap_or_else(|| panic!("no energy counter: {l}")),
            )
        })
    };
    let mut level_starts: Vec<f64> = lines
        .iter()
        .filter(|l| l["event"] == "level_start")
        .map(|l| f(&l["t_ms"]))
        .collect();
    level_starts.push(f64::INFINITY);
    for (li, level) in report["levels"].as_array().unwrap().iter().enumerate() {
        let cost = &level["cost"];
        assert_eq!(cost["energy_source"], "counter", "{cost}");
        // The level's GPU scrapes: from its start to the next level's.
        let scrapes: Vec<(f64, f64)> = lines
            .iter()
            .filter_map(energy_counter)
            .filter(|(t, _)| *t >= level_starts[li] && *t < level_starts[li + 1])
            .collect();
        assert!(scrapes.len() >= 2, "level {li}: {scrapes:?}");
        let (first, last) = (scrapes[0], *scrapes.last().unwrap());
        let joules = f(&cost["energy_j"]);
        assert!(
            (joules - (last.1 - first.1)).abs() < 1e-6,
            "level {li}: {joules} J, the counter rose {} J",
            last.1 - first.1
        );
        // 250 W over the time between those scrapes by the client's clock: the
        // two clocks agree within the scrapes' own latency.
        let truth = 250.0 * (last.0 - first.0) / 1000.0;
        assert!(
            (joules - truth).abs() < 0.02 * truth + 2.5,
            "level {li}: {joules} J against 250 W x {:.1} ms",
            last.0 - first.0
        );
        let tokens = f(&level["output_tokens_total"]);
        assert!((f(&cost["joules_per_output_token"]) - joules / tokens).abs() < 1e-9);
        assert!((f(&cost["output_tokens_per_joule"]) - tokens / joules).abs() < 1e-9);
        // Dollars: every request of the level (warm-up left out) as the mock served it.
        let mut usd = 0.0;
        let mut billed = 0.0;
        for l in lines
            .iter()
            .filter(|l| l.get("request_id").is_some() && l["level"] == li && l["warmup"] == false)
        {
            let rec = by_id[l["request_id"].as_str().unwrap()];
            let (p, c, out) = (
                f(&rec["prompt_tokens"]),
                f(&rec["cached_tokens"]),
                f(&rec["completion_tokens"]),
            );
            usd += ((p - c) * 3.0 + c * 0.3 + out * 15.0) / 1e6;
            billed += 1.0;
        }
        assert!(
            (f(&cost["usd"]) - usd).abs() < 1e-12,
            "level {li}: {cost}, the mock served ${usd}"
        );
        assert!((f(&cost["usd_per_request"]) - usd / billed).abs() < 1e-12);
        assert!(
            (f(&cost["usd_per_million_output_tokens"]) - usd / (16.0 * billed) * 1e6).abs() < 1e-9
        );
    }
    // GPU-hour pricing: 2 GPUs at $3.60/h over each level's window, per
    // successful request and output token.
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "2",
        "--requests",
        "8",
        "--rounds",
        "1",
        "--max-tokens",
        "16",
        "--price",
        "gpu_hour=3.6,gpus=2",
        "--quiet",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let level = &report["levels"][0];
    let cost = &level["cost"];
    let usd = 3.6 * 2.0 * f(&level["window_s"]) / 3600.0;
    assert!((f(&cost["usd"]) - usd).abs() < 1e-12, "{cost}");
    assert!((f(&cost["usd_per_request"]) - usd / 8.0).abs() < 1e-12);
    assert!((f(&cost["usd_per_million_output_tokens"]) - usd / (8.0 * 16.0) * 1e6).abs() < 1e-9);
    assert!(cost.get("energy_j").is_none(), "no GPU exporter: {cost}");
    // A price that does not read stops the run before anything is sent.
    let o = run(&["bench", "--url", &mock.url, "--price", "gpu_hour=abc"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("--price: gpu_hour=\"abc\": not a number"),
        "{}",
        text(&o)
    );
}
