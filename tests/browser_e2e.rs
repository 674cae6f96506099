//! The web page end to end, in headless Chromium driven over WebDriver
//! (chromedriver + fantoccini), through the page's URL automation contract
//! (`docs/web.md`): settings in the query, `autorun=1`, `data-run-state`,
//! `#report-json`, `#records-json`, `#run-error`.
//!
//! Needs the built page (`scripts/build-web.sh`; `scripts/test.sh` builds it
//! first) and `chromium` + `chromedriver` (`scripts/setup.sh`). Screenshots of the
//! finished runs are written under `target/browser-e2e/`.

#[path = "common/chromium.rs"]
mod chromium;
mod common;

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use chromium::{Browser, Serve, repo};
use common::{Mock, assert_schema, bin, check_faults_against_log, f, free_port, median};
use serde_json::Value;

/// One browser at a time: the timing checks should not share two cores with a
/// second Chromium.
static BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn json_of(text: &str, what: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{what} is not JSON ({e}): {text:.300}"))
}

fn validate_schema(report: &Value) {
    assert_schema("client.schema.json", report, "the page's report");
}

/// Every level accounts for every request: sent = ok + errors + timeouts = asked.
fn check_accounting(report: &Value, per_level: u64) {
    let levels = report["levels"].as_array().unwrap();
    assert!(!levels.is_empty(), "the report has levels");
    for l in levels {
        let sent = l["sent"].as_u64().unwrap();
        let sum = l["ok"].as_u64().unwrap()
            + l["errors"].as_u64().unwrap()
            + l["timeouts"].as_u64().unwrap();
        assert_eq!(sent, sum, "sent = ok + errors + timeouts");
        assert_eq!(sent, per_level, "every request of the level was sent");
    }
}

fn warning_kinds(report: &Value) -> Vec<String> {
    report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["kind"].as_str().unwrap().to_owned())
        .collect()
}

async fn lock() -> tokio::sync::MutexGuard<'static, ()> {
    BROWSER.lock().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn page_measures_ttft_and_paint_against_server_truth() {
    let _one = lock().await;
    let mock = Mock::start(&["--ttft-ms", "40", "--itl-ms", "15", "--jitter-ms", "1"]);
    let serve = Serve::start(&[]);
    let browser = Browser::start(&["--disable-gpu"]).await;
    // A first run on the page's own simulator warms the browser up (wasm compiled
    // and tiered up, caches filled), as a person's second run would be: the
    // comparison below is about the measurement, not about a cold start.
    let warm = format!(
        "{}?concurrency=2&requests=8&rounds=1&warmup=0&max_tokens=8&autorun=1",
        serve.url
    );
    assert_eq!(browser.run(&warm, Duration::from_secs(60)).await, "done");
    // The timing checks run on a 2-core machine shared with builds and other
    // guests, where load comes in bursts that hold a browser process off the CPU
    // for milliseconds, for seconds to minutes: a run that misses them is
    // repeated after a 10 s pause (eight attempts at most, each printed); the
    // bounds are met by one whole run, never by mixing them.
    let mut outcome = measured_run(&browser, &mock, &serve, 1).await;
    for attempt in 2..=8 {
        let Err(e) = &outcome else { break };
        eprintln!(
            "attempt {} missed the timing checks ({e}); repeating the run",
            attempt - 1
        );
        tokio::time::sleep(Duration::from_secs(10)).await;
        outcome = measured_run(&browser, &mock, &serve, attempt).await;
    }
    browser.close().await;
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn page_times_a_first_token_sent_with_the_head_at_the_network_stack() {
    let _one = lock().await;
    let mock = Mock::start(&[
        "--ttft-ms",
        "40",
        "--itl-ms",
        "15",
        "--jitter-ms",
        "1",
        "--head-with-first-token",
    ]);
    let serve = Serve::start(&[]);
    let browser = Browser::start(&["--disable-gpu"]).await;
    let warm = format!(
        "{}?concurrency=2&requests=8&rounds=1&warmup=0&max_tokens=8&metrics=none&autorun=1",
        serve.url
    );
    assert_eq!(browser.run(&warm, Duration::from_secs(60)).await, "done");
    // Timing on a shared 2-core host: a missed bound repeats the run after a pause
    // (eight attempts at most); one whole run must meet it.
    let mut outcome = head_run(&browser, &mock, &serve).await;
    for attempt in 2..=8 {
        let Err(e) = &outcome else { break };
        eprintln!("attempt {} missed ({e}); repeating the run", attempt - 1);
        tokio::time::sleep(Duration::from_secs(10)).await;
        outcome = head_run(&browser, &mock, &serve).await;
    }
    browser.close().await;
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

/// A run against a mock that writes each stream's head with its first token: the
/// page's TTFT is then the network stack's time of the token (Resource Timing's
/// `responseStart`): the server's own plus the browser's send, at the median request.
async fn head_run(browser: &Browser, mock: &Mock, serve: &Serve) -> Result<(), String> {
    let per_level = 16u64;
    let url = format!(
        "{}?url={}&concurrency=1,2&requests={per_level}&rounds=1&warmup=2&max_tokens=6&input_tokens=32&metrics=none&autorun=1",
        serve.url, mock.url
    );
    let state = browser.run(&url, Duration::from_secs(120)).await;
    assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
    let report = json_of(&browser.text_of("report-json").await, "#report-json");
    validate_schema(&report);
    let records = json_of(&browser.text_of("records-json").await, "#records-json");
    let server = mock.log_records(1);
    let by_id: HashMap<&str, &Value> = server
        .iter()
        .filter_map(|s| Some((s["request_id"].as_str()?, s)))
        .collect();
    let mut missed = Vec::new();
    for (li, level) in report["levels"].as_array().unwrap().iter().enumerate() {
        let c = level["concurrency"].as_u64().unwrap();
        let (mut page, mut read, mut unsent, mut with_head) = (vec![], vec![], vec![], 0usize);
        for r in records.as_array().unwrap() {
            if r["warmup"] == true || r["level"].as_u64() != Some(li as u64) {
                continue;
            }
            let s = by_id[r["request_id"].as_str().unwrap()];
            // The server wrote the head and the first chunk together (one task
            // hop apart on a busy host; a host busier still misses this run, which
            // is repeated).
            let apart = f(&s["chunk_times_ms"][0]) - f(&s["t_headers_ms"]);
            assert!(apart >= 0.0, "{s}");
            if apart >= 5.0 {
                missed.push(format!(
                    "c={c}: the server wrote a head and its first token {apart:.1} ms apart"
                ));
            }
            let server_ttft = f(&s["chunk_times_ms"][0]) - f(&s["t_received_ms"]);
            let t_send = f(&r["t_send_ms"]);
            let first_read = f(&r["token_events_ms"][0]);
            let rs = r["t_response_start_ms"]
                .as_f64()
                .unwrap_or_else(|| panic!("no responseStart: {r}"));
            // The browser's send: fetch() to its network stack's requestStart.
            let send = r["t_request_start_ms"]
                .as_f64()
                .unwrap_or_else(|| panic!("no requestStart: {r}"))
                - t_send;
            if first_read - f(&r["t_headers_ms"]) <= 1.0 {
                with_head += 1;
                page.push(rs - t_send - server_ttft);
                unsent.push(rs - t_send - send - server_ttft);
            } else {
                page.push(first_read - t_send - server_ttft);
            }
            read.push(first_read - t_send - server_ttft);
        }
        let counted = level["ttft_at_network_stack"].as_u64().unwrap_or(0) as usize;
        assert_eq!(counted, with_head, "c={c}: the report counts them");
        let (err, read_err) = (median(&page), median(&read));
        eprintln!(
            "c={c}: {with_head} of {} first tokens came with the head; the page's TTFT exceeds the server's by {err:.2} ms at the median (from the read, as before: {read_err:.2} ms; at the network stack less the browser's send: {:.2} ms)",
            page.len(),
            if unsent.is_empty() {
                f64::NAN
            } else {
                median(&unsent)
            }
        );
        if with_head * 4 < page.len() * 3 {
            missed.push(format!(
                "c={c}: only {with_head} of {} first tokens were read with their head",
                page.len()
            ));
        }
        // The whole gap holds the browser's send (2 ms on a busy host): bounded
        // loosely; the network stack's time of the token, the send taken out,
        // tightly.
        if !(0.0..=6.0).contains(&err) {
            missed.push(format!(
                "c={c}: the page's TTFT is {err:.3} ms off the server's (> 6 ms)"
            ));
        }
        if !unsent.is_empty() && !(-0.5..=1.5).contains(&median(&unsent)) {
            missed.push(format!(
                "c={c}: the send taken out, the page's TTFT at the network stack is {:.3} ms off the server's (not within -0.5..1.5 ms)",
                median(&unsent)
            ));
        }
    }
    if missed.is_empty() {
        Ok(())
    } else {
        Err(missed.join("; "))
    }
}

/// Per level, ms: each head's delivery, each TTFT error left once the browser's
/// own times are taken out, and each request's send.
type BrowserTimes = (Vec<f64>, Vec<f64>, Vec<f64>);

/// One measured sweep against `tokenscope mock`, checked against its log. Every
/// check panics except the two a loaded host can make a run miss, the TTFT
/// agreement and a paint within 100 ms of its token: those are returned (so the
/// whole run can be repeated).
async fn measured_run(
    browser: &Browser,
    mock: &Mock,
    serve: &Serve,
    attempt: u32,
) -> Result<(), String> {
    let (levels, per_level, warmup, max_tokens) = ([1u32, 2], 24u64, 4u64, 12u64);
    let url = format!(
        "{}?url={}&api=chat&concurrency=1,2&requests={per_level}&rounds=2&warmup={warmup}&max_tokens={max_tokens}&input_tokens=32&seed=3&autorun=1",
        serve.url, mock.url
    );
    let state = browser.run(&url, Duration::from_secs(120)).await;
    let error = browser.text_of("run-error").await;
    assert_eq!(state, "done", "run failed: {error}");
    let name = match attempt {
        1 => "finished-run".to_owned(),
        n => format!("finished-run-{n}"),
    };
    let shot = browser.screenshot(&name).await;
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);
    let report = json_of(&browser.text_of("report-json").await, "#report-json");
    let records = json_of(&browser.text_of("records-json").await, "#records-json");
    let (resources, origin) = (browser.resources().await, browser.origin().await);
    // The streams went through the network worker: the page's own thread fetched
    // no completion.
    assert!(
        !resources.iter().any(|r| r.contains("/chat/completions")),
        "completions were fetched on the main thread"
    );

    // The report: the contract's shape, the committed schema, every request counted.
    assert_eq!(report["schema"], "tokenscope.client/1");
    assert_eq!(report["source"], "browser");
    assert!(
        report["environment"]["simulated"].is_null() || report["environment"]["simulated"] == false
    );
    assert_eq!(report["environment"]["protocol"], "http/1.1");
    assert_eq!(
        report["config"]["model"], "tokenscope-sim",
        "the model came from /v1/models"
    );
    assert!(!report.to_string().contains("api_key"));
    validate_schema(&report);
    assert_eq!(report["levels"].as_array().unwrap().len(), levels.len());
    check_accounting(&report, per_level);
    for l in report["levels"].as_array().unwrap() {
        assert_eq!(
            l["ok"].as_u64().unwrap(),
            per_level,
            "no request failed: {l}"
        );
        assert_eq!(
            l["paint_methods"]["element_timing"].as_u64(),
            Some(per_level),
            "Chromium paints are timed with Element Timing"
        );
        for m in [
            "rendered_ttft_ms",
            "render_delay_ms",
            "browser_send_ms",
            "browser_delivery_ms",
        ] {
            assert_eq!(l["metrics"][m]["count"].as_u64(), Some(per_level), "{m}");
        }
        // The page scraped the mock's /metrics (the endpoint's origin, by default):
        // the level's server view, its TTFT split with the browser's stages, and
        // the engine's token counter equal to the usage the page received.
        let server = &l["server"];
        assert_eq!(server["engine"], "vllm", "{server}");
        assert_eq!(server["failed_scrapes"], 0, "{server}");
        let stages = &server["stages"];
        assert_eq!(
            stages["server_requests"].as_f64(),
            Some(per_level as f64),
            "{stages}"
        );
        for k in [
            "paint_ms",
            "browser_send_ms",
            "browser_delivery_ms",
            "queue_ms",
            "prefill_ms",
        ] {
            assert!(stages[k].is_number(), "{k}: {stages}");
        }
        assert_eq!(server["tokens"]["agrees"], true, "{server}");
        assert_eq!(
            server["tokens"]["client_completion"].as_u64(),
            Some(per_level * max_tokens)
        );
    }
    assert_eq!(
        report["config"]["server_metrics_url"],
        format!("{}/metrics", mock.url.trim_end_matches("/v1"))
    );
    assert!(report["server"]["timeline"].as_array().unwrap().len() >= 4);
    let kinds = warning_kinds(&report);
    assert!(kinds.contains(&"page_overhead".to_owned()), "{kinds:?}");
    assert!(
        !kinds.contains(&"http1_connection_limit".to_owned()),
        "c <= 6: {kinds:?}"
    );

    // The records: every request once, warm-up included, each in the server's log.
    let records = records.as_array().unwrap();
    let expected = levels.len() as u64 * (per_level + warmup);
    assert_eq!(records.len() as u64, expected, "every request has a record");
    let server = mock.log_records(expected as usize);
    let by_id: HashMap<&str, &Value> = server
        .iter()
        .filter_map(|s| Some((s["request_id"].as_str()?, s)))
        .collect();
    let mut ids = std::collections::HashSet::new();
    let (mut delays, mut fallback_minus_et) = (vec![], vec![]);
    // Per level: the browser's send of each request (the worker's fetch() to its
    // network stack sending it), its delivery of each response head (network
    // stack to the worker), and the part of each TTFT error left once both are
    // taken out.
    let mut delivery: std::collections::BTreeMap<u64, BrowserTimes> = Default::default();
    let mut late_paints: Vec<String> = Vec::new();
    // Per level: the page's TTFTs and the server's (request received to first
    // chunk handed to HTTP), request by request.
    let mut per_level: std::collections::BTreeMap<u64, (Vec<f64>, Vec<f64>)> = Default::default();
    for r in records {
        let id = r["request_id"].as_str().unwrap();
        assert!(ids.insert(id), "request id {id} used twice");
        let s = by_id
            .get(id)
            .unwrap_or_else(|| panic!("request {id} is missing from the server log"));
        assert_eq!(r["outcome"]["status"], "ok", "{r}");
        let t_send = f(&r["t_send_ms"]);
        let first = f(&r["token_events_ms"][0]);
        let paint = f(&r["t_first_paint_ms"]);
        assert_eq!(r["paint_method"], "element_timing", "{id}");
        let ttft = first - t_send;
        let rendered = paint - t_send;
        let delay = paint - first;
        assert!(
            rendered >= ttft,
            "{id}: rendered TTFT {rendered} < TTFT {ttft}"
        );
        // A paint follows its token, within 100 ms. A paint before its token is a
        // bug; one held back 100 ms or more (a loaded host can hold a frame) misses
        // this run, which is repeated like a missed TTFT agreement.
        assert!(delay >= 0.0, "{id}: render delay {delay} ms < 0");
        if delay >= 100.0 {
            late_paints.push(format!("{id}: render delay {delay:.1} ms (>= 100)"));
        }
        assert_eq!(
            r["usage"]["completion_tokens"].as_u64(),
            Some(max_tokens),
            "{id}"
        );
        if r["warmup"] == true {
            continue;
        }
        delays.push(delay);
        let level = per_level
            .entry(r["concurrency"].as_u64().unwrap())
            .or_insert_with(|| (vec![], vec![]));
        level.0.push(ttft);
        let server_ttft = f(&s["chunk_times_ms"][0]) - f(&s["t_received_ms"]);
        level.1.push(server_ttft);
        // The mock sends Timing-Allow-Origin: the browser tells when its network
        // stack had each response, before the worker's stamp of the head.
        let response_start = r["t_response_start_ms"].as_f64().unwrap_or_else(|| {
            panic!("{id}: no responseStart although the endpoint allows timing: {r}")
        });
        let head_delivery = f(&r["t_headers_ms"]) - response_start;
        assert!(
            head_delivery >= -0.05,
            "{id}: the worker had the head {head_delivery} ms before the network stack"
        );
        assert!(
            response_start >= t_send,
            "{id}: responseStart precedes the send"
        );
        let request_start = r["t_request_start_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("{id}: no requestStart: {r}"));
        let send = request_start - t_send;
        assert!(
            send >= -0.05,
            "{id}: the request left before the page sent it"
        );
        assert!(request_start <= response_start, "{id}: {r}");
        let d = delivery
            .entry(r["concurrency"].as_u64().unwrap())
            .or_insert_with(|| (vec![], vec![], vec![]));
        d.0.push(head_delivery);
        d.1.push(ttft - send - head_delivery - server_ttft);
        d.2.push(send);
        if let Some(fb) = r["paint_fallback_ms"].as_f64() {
            fallback_minus_et.push(fb - paint);
        }
    }
    let lag = &report["environment"]["event_loop_lag_ms"];
    eprintln!(
        "the page's event-loop lag: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        f(&lag["p50"]),
        f(&lag["p99"]),
        f(&lag["max"])
    );
    // The agreement, per level and request by request: the page's TTFT minus the
    // server's (request received to first chunk handed to HTTP), its median within
    // 8 ms, and within 1.5 ms once the browser's own send and delivery are taken
    // out. (The medians of the two distributions are printed too; at c > 1 they
    // are not compared: TTFTs there fall in clusters, one per engine step a
    // request waited for, and the median sits in the gap between two clusters,
    // where it jumps by a step's length from sample to sample.)
    let mut missed = late_paints;
    for (c, (page, server)) in &per_level {
        let diffs: Vec<f64> = page.iter().zip(server).map(|(p, s)| p - s).collect();
        let added = median(&diffs);
        let min = diffs.iter().copied().fold(f64::INFINITY, f64::min);
        eprintln!(
            "c={c}: the page's TTFT exceeds the server log's by {added:.2} ms at the median request (min {min:.2} ms, {} requests); medians: page {:.2} ms, server {:.2} ms",
            diffs.len(),
            median(page),
            median(server)
        );
        assert!(
            min >= -0.05,
            "c={c}: the page saw a token before the server sent it"
        );
        // The page's TTFT is the server's plus the browser's own time (its send
        // and its delivery of the head, both measured by Resource Timing): on a
        // busy host those two alone come to 3-4 ms, so the whole gap is bounded
        // loosely and what is left once they are taken out tightly.
        if !(0.0..=8.0).contains(&added) {
            missed.push(format!(
                "c={c}: the page's TTFT is {added:.3} ms off the server's at the median (> 8 ms)"
            ));
        }
        let (heads, rest, sends) = &delivery[c];
        if median(rest).abs() > 1.5 {
            missed.push(format!(
                "c={c}: without the browser's own time the page's TTFT is {:.3} ms off the server's at the median (> 1.5 ms)",
                median(rest)
            ));
        }
        eprintln!(
            "c={c}: the browser's own time at the median: send (fetch() to its network stack) {:.2} ms, delivery (network stack to the worker, on the response head) {:.2} ms (min {:.2}, max {:.2}); without them the TTFT exceeds the server's by {:.2} ms",
            median(sends),
            median(heads),
            heads.iter().copied().fold(f64::INFINITY, f64::min),
            heads.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            median(rest)
        );
        if *c == 1 {
            let d = median(page) - median(server);
            if d.abs() > 8.0 {
                missed.push(format!("c=1: TTFT medians differ by {d:.3} ms"));
            }
        }
    }
    let mut sorted = delays.clone();
    sorted.sort_by(f64::total_cmp);
    eprintln!(
        "render delay: min {:.2} ms, median {:.2} ms, max {:.2} ms",
        sorted[0],
        median(&delays),
        sorted[sorted.len() - 1]
    );
    assert!(
        median(&delays) < 50.0,
        "render delay median {:.2} ms: paints lag their tokens",
        median(&delays)
    );
    if !fallback_minus_et.is_empty() {
        eprintln!(
            "animation-frame fallback minus Element Timing: median {:.2} ms ({} requests)",
            median(&fallback_minus_et),
            fallback_minus_et.len()
        );
    }

    // Nothing was fetched but the page's own files, the endpoint, its /metrics
    // and its /tokenize (the page counts prompts with the server's tokenizer).
    let mock_origin = mock.url.trim_end_matches("/v1");
    for name in &resources {
        assert!(
            name.starts_with(&origin)
                || name.starts_with(&mock.url)
                || *name == format!("{mock_origin}/metrics")
                || *name == format!("{mock_origin}/tokenize"),
            "unexpected request to {name}"
        );
    }
    if missed.is_empty() {
        Ok(())
    } else {
        Err(missed.join("; "))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn static_page_works_from_a_sub_path_and_fetches_nothing_else() {
    let _one = lock().await;
    let serve = Serve::start(&["--base-path", "/sub/", "--mock"]);
    assert!(serve.url.ends_with("/sub/"), "{}", serve.url);
    let origin = serve.origin();

    // The sub-path without its slash redirects (relative URLs need it).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = client.get(format!("{origin}/sub")).send().await.unwrap();
    assert!(r.status().is_redirection(), "{}", r.status());
    assert_eq!(r.headers()["location"], "/sub/");
    let html = reqwest::get(&serve.url)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("Content-Security-Policy"));
    assert!(
        !html.contains("src=\"/") && !html.contains("href=\"/"),
        "relative URLs only"
    );

    let browser = Browser::start(&["--disable-gpu"]).await;
    // 1. No URL: the simulator built into the page.
    let url = format!(
        "{}?concurrency=2&requests=6&rounds=1&warmup=1&max_tokens=8&autorun=1",
        serve.url
    );
    let state = browser.run(&url, Duration::from_secs(60)).await;
    assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
    browser.screenshot("simulated-sub-path").await;
    let label = browser.text_of("simulated-badge").await;
    assert!(
        label.contains("SIMULATED"),
        "the simulated endpoint is labelled: {label:?}"
    );
    let report = json_of(&browser.text_of("report-json").await, "#report-json");
    validate_schema(&report);
    assert_eq!(report["environment"]["simulated"], true);
    assert_eq!(report["config"]["url"], "builtin:simulated");
    check_accounting(&report, 6);
    assert!(warning_kinds(&report).contains(&"simulated_endpoint".to_owned()));
    // The simulator answers the page's scrapes with the mock's /metrics: the demo
    // has a server view, its TTFT histogram counting the level's requests and its
    // token counter the usage the page received.
    assert_eq!(
        report["config"]["server_metrics_url"],
        "builtin:simulated/metrics"
    );
    let server = &report["levels"][0]["server"];
    assert_eq!(server["engine"], "vllm", "{server}");
    assert_eq!(
        server["stages"]["server_requests"].as_f64(),
        Some(6.0),
        "{server}"
    );
    assert!(server["stages"]["queue_ms"].is_number(), "{server}");
    assert_eq!(server["tokens"]["agrees"], true, "{server}");
    assert!(
        !warning_kinds(&report).contains(&"delivery_unmeasured".to_owned()),
        "the simulator has no network to time"
    );
    let (resources, page_origin) = (browser.resources().await, browser.origin().await);
    assert_eq!(page_origin, origin);
    assert!(!resources.is_empty());
    for name in &resources {
        assert!(
            name.starts_with(&format!("{origin}/sub/")),
            "the simulated run fetched {name}"
        );
    }

    // 2. The simulator co-hosted by `serve --mock`, same origin, over HTTP/1.1 at
    //    concurrency 8: the page warns that the browser queues beyond 6.
    let url = format!(
        "{}?url={origin}/v1&concurrency=8&requests=16&rounds=1&warmup=0&max_tokens=4&autorun=1",
        serve.url
    );
    let state = browser.run(&url, Duration::from_secs(60)).await;
    assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
    let report = json_of(&browser.text_of("report-json").await, "#report-json");
    validate_schema(&report);
    check_accounting(&report, 16);
    let kinds = warning_kinds(&report);
    assert!(
        kinds.contains(&"http1_connection_limit".to_owned()),
        "{kinds:?}"
    );
    let visible = browser.text_of("warnings").await;
    assert!(
        visible.contains("http1_connection_limit"),
        "shown on the page: {visible:?}"
    );
    let resources = browser.resources().await;
    for name in &resources {
        assert!(name.starts_with(&origin), "unexpected request to {name}");
    }

    // 3. The combined view: a kernels report loaded beside the run, the model
    //    picked; the page shows the same analysis as `tokenscope report`.
    combined_view_matches_the_cli(&browser, &report).await;
    browser.close().await;
}

/// The Analysis's text once it shows `needle` (within 15 s).
async fn analysis_showing(browser: &Browser, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let t = browser.text_of("combined-report").await;
        if t.contains(needle) {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "the Analysis never showed {needle:?}: {t:.400} (kernels: {})",
            browser.text_of("kernels-loaded").await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Load the recorded lavapipe kernels report into the page's analysis, pick the
/// model, and check the page's verdict is `tokenscope report`'s, sentence by
/// sentence, for the same inputs.
async fn combined_view_matches_the_cli(browser: &Browser, report: &Value) {
    use fantoccini::Locator;
    let kernels = repo().join("tests/fixtures/reports/kernels-lavapipe.json");
    browser
        .client
        .find(Locator::Id("load-kernels"))
        .await
        .unwrap()
        .send_keys(kernels.to_str().unwrap())
        .await
        .unwrap();
    let select = browser
        .client
        .find(Locator::Id("floor-model"))
        .await
        .unwrap();
    select.select_by_value("gemma-3-270m").await.unwrap();
    let shown = analysis_showing(browser, "TPOT vs the GPU floor").await;
    browser.screenshot("combined-view").await;
    // The same inputs through the CLI.
    let dir = tempfile::tempdir().unwrap();
    let client = dir.path().join("browser.json");
    std::fs::write(&client, report.to_string()).unwrap();
    let md = dir.path().join("report.md");
    let o = Command::new(bin())
        .args(["report", "--client"])
        .arg(&client)
        .arg("--kernels")
        .arg(&kernels)
        .args([
            "--model",
            "gemma-3-270m",
            "--quant",
            "q4_0",
            "--context",
            "4096",
        ])
        .arg("--markdown")
        .arg(&md)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(&md).unwrap();
    let verdict: Vec<&str> = md
        .split("## Verdict")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("- "))
        .collect();
    assert!(!verdict.is_empty(), "{md:.600}");
    for v in &verdict {
        assert!(
            shown.contains(v.trim()),
            "the page's analysis lacks the CLI's verdict {v:?}: {shown:.800}"
        );
    }
    assert!(
        shown.contains("bandwidth floor") || shown.contains("the floor"),
        "{shown:.600}"
    );
    // The run scraped the co-hosted mock's /metrics: the analysis shows where
    // each level's TTFT went, as the CLI's report of the same JSON does.
    if report["levels"][0]["server"].is_object() {
        assert!(md.contains("Where TTFT went"), "{md:.600}");
        assert!(shown.contains("Where TTFT went"), "{shown:.800}");
    }

    // The KV-cache plan: the GPU's memory typed into the floor view gives the
    // plan `tokenscope plan` prints for the same model and context.
    browser
        .js(
            "const i = document.getElementById('floor-gpu-memory'); i.value = '24GiB'; \
             i.dispatchEvent(new Event('change', { bubbles: true })); return true;",
        )
        .await;
    let shown = analysis_showing(browser, "KV-cache plan").await;
    let o = Command::new(bin())
        .args([
            "plan",
            "--model",
            "gemma-3-270m",
            "--quant",
            "q4_0",
            "--context",
            "4096",
            "--gpu-memory",
            "24GiB",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plan = json_of(
        &String::from_utf8_lossy(&o.stdout),
        "tokenscope plan --json",
    );
    let fits = plan["sequences"].as_u64().unwrap();
    assert!(fits > 0);
    // The plan's table as text: "sequences that fit", the count, "of ... tokens".
    assert!(
        shown.contains(&format!("sequences that fit{fits}of 4096 tokens")),
        "tokenscope plan says {fits} sequences; the page: {:.300}",
        &shown[shown.find("KV-cache plan").unwrap_or(0)..]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn failures_are_reported_through_the_contract() {
    let _one = lock().await;
    let serve = Serve::start(&[]);
    let browser = Browser::start(&["--disable-gpu"]).await;
    // Nothing listens on this port: the model list cannot be read, so the run
    // cannot start: "failed" with the reason in #run-error.
    let dead = format!("http://127.0.0.1:{}/v1", free_port());
    let state = browser
        .run(
            &format!("{}?url={dead}&autorun=1", serve.url),
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(state, "failed");
    let error = browser.text_of("run-error").await;
    assert!(error.contains("could not list the models"), "{error}");

    // With a model given, the run goes on and every request is a `connect` error.
    let url = format!(
        "{}?url={dead}&model=m&concurrency=2&requests=4&rounds=1&warmup=0&autorun=1&key=sk-should-be-ignored",
        serve.url
    );
    let state = browser.run(&url, Duration::from_secs(30)).await;
    assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
    let report_text = browser.text_of("report-json").await;
    assert!(
        !report_text.contains("sk-should-be-ignored"),
        "the key never reaches the report"
    );
    let report = json_of(&report_text, "#report-json");
    validate_schema(&report);
    check_accounting(&report, 4);
    assert_eq!(report["levels"][0]["error_kinds"]["connect"], 4);
    let kinds = warning_kinds(&report);
    assert!(kinds.contains(&"no_success".to_owned()));
    // No /metrics at the endpoint's origin either: the server view is off, said once.
    assert!(
        kinds.contains(&"server_metrics_off".to_owned()),
        "{kinds:?}"
    );
    assert!(report["config"]["server_metrics_url"].is_null());
    let notes = browser.text_of("warnings").await;
    assert!(
        notes.contains("never read"),
        "the ignored key is pointed out: {notes}"
    );

    // Metrics URLs that do not answer (named, so kept): every scrape fails, each
    // target is one warning with the reason, and the run is measured all the same.
    let dead_metrics = format!("http://127.0.0.1:{}/metrics", free_port());
    let url = format!(
        "{}?concurrency=2&requests=4&rounds=1&warmup=0&max_tokens=4&metrics={dead_metrics}&gpu_metrics={dead_metrics}&scrape_interval=200ms&autorun=1",
        serve.url
    );
    let state = browser.run(&url, Duration::from_secs(30)).await;
    assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
    let report = json_of(&browser.text_of("report-json").await, "#report-json");
    validate_schema(&report);
    check_accounting(&report, 4);
    assert_eq!(report["levels"][0]["ok"], 4, "nothing measured was lost");
    let failed: Vec<&Value> = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] == "server_metrics")
        .collect();
    assert_eq!(failed.len(), 2, "one line per target: {failed:?}");
    for w in failed {
        let m = w["message"].as_str().unwrap();
        assert!(
            m.contains("read nothing") && m.contains("no response"),
            "{m}"
        );
    }
    browser.close().await;
}

/// Open the page with `query` (no autorun), type the extra headers and the key's
/// header into the form (they never go in the URL), and run.
async fn run_with_headers(browser: &Browser, url: &str, headers: &str, key_header: &str) -> String {
    use fantoccini::Locator;
    browser.client.goto(url).await.unwrap();
    browser
        .wait_for(
            "document.querySelector('textarea[name=headers_field]')",
            Duration::from_secs(30),
        )
        .await;
    for (css, text) in [
        ("textarea[name=headers_field]", headers),
        ("input[name=key_header_field]", key_header),
        ("input[name=api_key_field]", "sk-key-value-77d3"),
    ] {
        browser
            .client
            .find(Locator::Css(css))
            .await
            .unwrap()
            .send_keys(text)
            .await
            .unwrap();
    }
    assert_eq!(
        browser.text_of("headers-error").await,
        "",
        "the lines are valid"
    );
    browser
        .client
        .find(Locator::Id("run"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser.wait_run(Duration::from_secs(60)).await
}

/// Extra headers and the key in its own header, typed in the form: sent on every
/// request (the mock's preflight allows what it is asked), named in the report's
/// `environment.transport` with no value, and neither value nor the key anywhere
/// in the page, the report, the records or the page's storage. Each request's
/// protocol and connection come from Resource Timing. Against a mock whose
/// preflight allows only `authorization, content-type`, the run fails with the
/// refused headers named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn page_sends_extra_headers_and_explains_a_cors_refusal() {
    let _one = lock().await;
    let serve = Serve::start(&[]);
    let browser = Browser::start(&["--disable-gpu"]).await;
    let secrets = ["tenant-value-4f1c", "trace-value-9a2e", "sk-key-value-77d3"];
    let headers = format!("X-Tenant: {}\nX-Trace: {}", secrets[0], secrets[1]);

    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "2"]);
    let url = format!(
        "{}?url={}&concurrency=2&requests=6&rounds=1&warmup=0&max_tokens=4&metrics=none",
        serve.url, mock.url
    );
    let state = run_with_headers(&browser, &url, &headers, "api-key").await;
    assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
    let report_text = browser.text_of("report-json").await;
    let records_text = browser.text_of("records-json").await;
    let report = json_of(&report_text, "#report-json");
    validate_schema(&report);
    check_accounting(&report, 6);
    assert_eq!(report["levels"][0]["ok"], 6, "{report_text:.600}");
    let transport = &report["environment"]["transport"];
    assert_eq!(transport["http_version"], "auto");
    assert_eq!(transport["api_key_header"], "api-key");
    assert_eq!(
        transport["headers"],
        serde_json::json!([{"name": "X-Tenant"}, {"name": "X-Trace"}]),
        "names, never values"
    );
    let page = browser
        .js("return document.documentElement.outerHTML + location.href + JSON.stringify(sessionStorage) + JSON.stringify(localStorage);")
        .await;
    let page = page.as_str().unwrap();
    for secret in secrets {
        for (what, text) in [("report", &report_text), ("records", &records_text)] {
            assert!(!text.contains(secret), "{secret} in the {what}");
        }
        assert!(
            !page.contains(secret),
            "{secret} in the page's DOM, URL or storage"
        );
    }
    // Every request's protocol and connection, from its Resource Timing.
    let records = json_of(&records_text, "#records-json");
    for r in records.as_array().unwrap() {
        assert_eq!(r["protocol"], "http/1.1", "{r}");
        assert!(r["connection"]["new"].is_boolean(), "{r}");
    }
    let level = &report["levels"][0];
    assert_eq!(level["protocols"]["http/1.1"], 6, "{level}");
    // Every request is counted once, as opening its connection or reusing one.
    // (The extra headers make each request CORS-preflighted, and a preflight can
    // open the connection its request then finds ready: all six may be reused.)
    assert_eq!(
        f(&level["connections"]["new"]) + f(&level["connections"]["reused"]),
        6.0,
        "{level}"
    );
    if f(&level["connections"]["new"]) >= 1.0 {
        assert!(
            level["metrics"]["connection_setup_ms"]["p50"]
                .as_f64()
                .unwrap()
                >= 0.0,
            "{level}"
        );
    }

    // A preflight that refuses them: the run fails, the headers named.
    let strict = Mock::start(&["--cors-allow-headers", "authorization,content-type"]);
    let url = format!(
        "{}?url={}&model=m&concurrency=1&requests=2&rounds=1&warmup=0&max_tokens=4&metrics=none&request_ids=0",
        serve.url, strict.url
    );
    let state = run_with_headers(&browser, &url, &headers, "api-key").await;
    assert_eq!(state, "failed");
    let error = browser.text_of("run-error").await;
    assert!(
        error.contains("does not allow the header(s) api-key, X-Tenant, X-Trace")
            && error.contains("Access-Control-Allow-Headers must list them"),
        "{error}"
    );
    for secret in secrets {
        assert!(!error.contains(secret), "{secret} in the error");
    }
    browser.close().await;
}

/// The fault matrix in the browser: the page against `tokenscope mock` injecting
/// every fault kind into about half the requests, over real HTTP. Each request's
/// classification is checked against the fault the server logged for it (joined
/// by request id); tokens received before a fault are kept; every request is
/// counted once; the run carries on to "done".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn page_classifies_every_fault_like_the_server_logged_it() {
    let _one = lock().await;
    let faults = "http_429,http_503,error_event,reset,malformed,stall,html,no_done,no_headers";
    let mock = Mock::start(&[
        "--error-rate",
        "0.5",
        "--faults",
        faults,
        "--itl-ms",
        "4",
        "--ttft-ms",
        "5",
        "--stall",
        "20s",
        "--seed",
        "5",
    ]);
    let serve = Serve::start(&[]);
    let browser = Browser::start(&["--disable-gpu"]).await;
    let n = 60u64;
    let url = format!(
        "{}?url={}&model=tokenscope-sim&concurrency=4&requests={n}&rounds=1&warmup=0&max_tokens=12&input_tokens=8&timeout=1500ms&autorun=1",
        serve.url, mock.url
    );
    let state = browser.run(&url, Duration::from_secs(120)).await;
    assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
    browser.screenshot("faults").await;
    let report = json_of(&browser.text_of("report-json").await, "#report-json");
    let records = json_of(&browser.text_of("records-json").await, "#records-json");
    browser.close().await;
    validate_schema(&report);
    check_accounting(&report, n);
    let level = &report["levels"][0];
    let kinds_total: u64 = level["error_kinds"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(
        kinds_total,
        level["errors"].as_u64().unwrap(),
        "every error has a kind"
    );

    let records = records.as_array().unwrap();
    assert_eq!(records.len() as u64, n);
    let server = mock.log_records(n as usize);
    let seen = check_faults_against_log("page", records, &server);
    eprintln!("faults injected and classified: {seen:?}");
    assert!(
        seen.len() >= 6,
        "most fault kinds came up (seeded): {seen:?}"
    );
}

/// The page's layout as a person sees it: no empty panel before there is anything
/// to say, the Analysis without the charts the page already shows above it, and
/// the wide tables (levels, glossary) scrolling inside their panels on a narrow
/// window instead of overflowing them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn the_layout_shows_each_thing_once_and_wide_tables_scroll() {
    let _one = lock().await;
    let serve = Serve::start(&[]);
    let browser = Browser::start(&["--disable-gpu"]).await;
    let count = |sel: &str| format!("return document.querySelectorAll({sel:?}).length;");

    // Before a run, with nothing to warn about: no warnings panel at all.
    browser.client.goto(&serve.url).await.unwrap();
    browser
        .wait_for(
            "document.querySelector('.tables') !== null",
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(browser.js(&count("section.warnings")).await, 0);

    // A run on the page's simulator: the analysis comes without the run's charts.
    let url = format!(
        "{}?concurrency=1,2,4&requests=6&rounds=1&warmup=0&max_tokens=6&autorun=1",
        serve.url
    );
    assert_eq!(browser.run(&url, Duration::from_secs(60)).await, "done");
    browser
        .wait_for(
            "document.getElementById('combined-report') !== null",
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(browser.js(&count("section.warnings")).await, 1);
    assert!(
        browser
            .js(&count("#chart-throughput-latency svg"))
            .await
            .as_u64()
            .unwrap()
            >= 1
    );
    // The Analysis draws only what the page does not show above it (the server
    // view's charts over the run): none of its charts repeats one of the page's.
    let repeated = browser
        .js("const above = new Set([...document.querySelectorAll('svg > title')].filter(t => !t.closest('#combined-report')).map(t => t.textContent)); \
             return [...document.querySelectorAll('#combined-report svg > title')].map(t => t.textContent).filter(t => above.has(t));")
        .await;
    assert_eq!(
        repeated,
        serde_json::json!([]),
        "the Analysis repeats a chart shown above it"
    );
    assert!(
        browser
            .text_of("combined-report")
            .await
            .contains("Requests on the server over the run"),
        "the simulator's server view is in the Analysis"
    );
    let titles = browser
        .js("return [...document.querySelectorAll('svg > title')].filter(t => t.textContent === 'Throughput vs latency').length;")
        .await;
    assert_eq!(titles, 1, "the throughput-latency chart is drawn once");

    // A narrow window: the page never scrolls sideways; the wide tables do,
    // inside their panels.
    browser.client.set_window_size(560, 2400).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let page = browser
        .js("const d = document.documentElement; return [d.scrollWidth, d.clientWidth];")
        .await;
    let (scroll, client) = (page[0].as_f64().unwrap(), page[1].as_f64().unwrap());
    assert!(
        scroll <= client + 1.0,
        "the page overflows sideways: {scroll} > {client}"
    );
    for sel in ["#summary-table", "#combined-report .table-wrap table"] {
        let fits = browser
            .js(&format!(
                "const t = document.querySelector({sel:?}); const w = t.closest('.scroll, .table-wrap'); const p = t.closest('.panel').getBoundingClientRect(); const r = w.getBoundingClientRect(); return [t.scrollWidth > w.clientWidth, r.right <= p.right + 1, getComputedStyle(w).overflowX];"
            ))
            .await;
        assert_eq!(
            fits[0], true,
            "{sel} is wide enough to need scrolling here: {fits}"
        );
        assert_eq!(
            fits[1], true,
            "{sel}'s scroller stays inside its panel: {fits}"
        );
        assert_eq!(fits[2], "auto", "{sel} scrolls: {fits}");
    }
    browser.screenshot("narrow-layout").await;
    browser.close().await;
}

/// The page's workload settings against the mock and its log: a prompts file
/// (served beside the page, `prompts=`) sends its prompts in turn,
/// each with its own `max_tokens`, as the CLI would; and a reasoning model's
/// answer with the reasoning hidden (`reasoning=hidden`) paints its first answer
/// token, not its first reasoning token, so the rendered TTFT follows what the
/// user saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn page_sends_a_prompts_file_and_paints_after_hidden_reasoning() {
    let _one = lock().await;
    let site = chromium::dist_copy();
    let prompts = [
        ("alpha beta gamma delta", Some(3u64)),
        ("one two three four five six seven eight nine ten", None),
        ("short", Some(5)),
    ];
    let mut text = String::new();
    for (p, m) in &prompts {
        let mut line = serde_json::json!({ "prompt": p });
        if let Some(m) = m {
            line["max_tokens"] = (*m).into();
        }
        text.push_str(&format!("{line}\n"));
    }
    text.push_str("{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"why is the sky blue\"}]}\n");
    std::fs::write(site.path().join("prompts.jsonl"), &text).unwrap();
    std::fs::write(
        site.path().join("broken.jsonl"),
        "{\"prompt\": \"ok\"}\n{\"oops\": 1}\n",
    )
    .unwrap();
    let serve = Serve::start_dir(site.path(), &[]);
    let browser = Browser::start(&["--disable-gpu"]).await;

    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "2"]);
    let n = 8u64;
    let url = format!(
        "{}?url={}&api=chat&concurrency=1&requests={n}&rounds=1&warmup=0&max_tokens=7&ignore_eos=1&prompts=prompts.jsonl&autorun=1",
        serve.url, mock.url
    );
    let state = browser.run(&url, Duration::from_secs(60)).await;
    assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
    let report = json_of(&browser.text_of("report-json").await, "#report-json");
    validate_schema(&report);
    check_accounting(&report, n);
    assert_eq!(report["config"]["prompts_file"], "prompts.jsonl");
    assert_eq!(report["config"]["distinct_prompts"], 4);
    // The prompt set's fingerprint, as core (and so `bench`) computes it.
    let d = tokenscope_workload::dataset::Dataset::parse(&text).unwrap();
    let expected = tokenscope_workload::dataset::prompts_hash(&d.prompts);
    assert_eq!(report["config"]["prompts_hash"], expected.as_str());
    assert!(report["config"]["input_tokens"].is_null());
    let records = json_of(&browser.text_of("records-json").await, "#records-json");
    let log: HashMap<String, Value> = mock
        .log_records(n as usize)
        .into_iter()
        .map(|r| (r["request_id"].as_str().unwrap().to_owned(), r))
        .collect();
    // Request i (in the order sent) carried prompt i mod 4, as the mock counted it.
    let expected: Vec<(u64, u64)> = vec![(4, 3), (10, 7), (1, 5), (7, 7)];
    let records = records.as_array().unwrap();
    assert_eq!(records.len() as u64, n);
    for r in records {
        let id = r["request_id"].as_str().unwrap();
        let i: usize = id.rsplit('-').next().unwrap().parse().unwrap();
        let server = &log[id];
        let (tokens, max_tokens) = expected[i % 4];
        assert_eq!(server["prompt_tokens"], tokens, "request {i}: {server}");
        assert_eq!(server["max_tokens"], max_tokens, "request {i}: {server}");
    }
    // A file that does not read: the run stops before it starts, naming the line.
    let state = browser
        .run(
            &format!(
                "{}?url={}&model=m&prompts=broken.jsonl&autorun=1",
                serve.url, mock.url
            ),
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(state, "failed");
    let error = browser.text_of("run-error").await;
    assert!(
        error.contains("broken.jsonl") && error.contains("line 2"),
        "{error}"
    );

    // Reasoning: 10 reasoning tokens 20 ms apart before the answer.
    let mock = Mock::start(&[
        "--ttft-ms",
        "5",
        "--itl-ms",
        "20",
        "--reasoning-tokens",
        "10",
    ]);
    let mut figures = Vec::new();
    for display in ["shown", "hidden"] {
        let url = format!(
            "{}?url={}&api=chat&concurrency=1&requests=6&rounds=1&warmup=1&max_tokens=14&ignore_eos=1&reasoning={display}&autorun=1",
            serve.url, mock.url
        );
        let state = browser.run(&url, Duration::from_secs(60)).await;
        assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
        let report = json_of(&browser.text_of("report-json").await, "#report-json");
        validate_schema(&report);
        assert_eq!(report["config"]["reasoning_display"], display);
        let m = &report["levels"][0]["metrics"];
        let (ttft, answer, rendered, delay) = (
            f(&m["ttft_ms"]["p50"]),
            f(&m["time_to_first_answer_ms"]["p50"]),
            f(&m["rendered_ttft_ms"]["p50"]),
            f(&m["render_delay_ms"]["p50"]),
        );
        figures.push(format!(
            "{display}: TTFT p50 {ttft:.1} ms, first answer {answer:.1} ms, rendered {rendered:.1} ms, render delay {delay:.1} ms"
        ));
        assert!(
            answer > ttft + 150.0,
            "{display}: the reasoning took 200 ms"
        );
        assert!(
            (0.0..100.0).contains(&delay),
            "{display}: render delay {delay}"
        );
        if display == "shown" {
            assert!(
                rendered < answer - 100.0,
                "the first reasoning token painted: {figures:?}"
            );
        } else {
            assert!(
                rendered >= answer,
                "the first answer token painted: {figures:?}"
            );
        }
    }
    eprintln!("reasoning in the page: {}", figures.join("; "));
    browser.close().await;
}

/// The page runs the Responses and Messages APIs against the mock (their
/// named events, usage split over two events, `anthropic-version` sent and let
/// through CORS), each request's tokens as the server's log counted them, and
/// against its own simulator, which streams the same APIs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn page_runs_the_responses_and_messages_apis() {
    let _one = lock().await;
    let site = chromium::dist_copy();
    let serve = Serve::start_dir(site.path(), &[]);
    let browser = Browser::start(&["--disable-gpu"]).await;
    let mock = Mock::start(&[
        "--ttft-ms",
        "5",
        "--itl-ms",
        "10",
        "--reasoning-tokens",
        "3",
        "--prefix-cache",
    ]);
    let n = 6u64;
    let mut seen = 0;
    for api in ["responses", "messages"] {
        let url = format!(
            "{}?url={}&api={api}&concurrency=1&requests={n}&rounds=1&warmup=0&max_tokens=8&ignore_eos=1&shared_prefix=32&price=input_per_mtok%3D3,cached_input_per_mtok%3D0.3,output_per_mtok%3D15&autorun=1",
            serve.url, mock.url
        );
        let state = browser.run(&url, Duration::from_secs(60)).await;
        assert_eq!(
            state,
            "done",
            "{api}: {}",
            browser.text_of("run-error").await
        );
        let report = json_of(&browser.text_of("report-json").await, "#report-json");
        validate_schema(&report);
        check_accounting(&report, n);
        assert_eq!(report["config"]["api"], api);
        let level = &report["levels"][0];
        assert_eq!(level["ok"], n, "{api}: {level}");
        assert_eq!(level["output_tokens_estimated"], false, "{api}");
        let m = &level["metrics"];
        assert!(
            f(&m["time_to_first_answer_ms"]["p50"]) > f(&m["ttft_ms"]["p50"]) + 20.0,
            "{api}: 3 reasoning tokens 10 ms apart come first: {m}"
        );
        seen += n as usize;
        let log: HashMap<String, Value> = mock
            .log_records(seen)
            .into_iter()
            .map(|r| (r["request_id"].as_str().unwrap().to_owned(), r))
            .collect();
        let records = json_of(&browser.text_of("records-json").await, "#records-json");
        assert_eq!(report["config"]["price"]["basis"], "tokens");
        let mut usd = 0.0;
        for r in records.as_array().unwrap() {
            let id = r["request_id"].as_str().unwrap();
            let server = &log[id];
            let (p, c, o) = (
                f(&server["prompt_tokens"]),
                f(&server["cached_tokens"]),
                f(&server["completion_tokens"]),
            );
            usd += ((p - c) * 3.0 + c * 0.3 + o * 15.0) / 1e6;
            assert_eq!(server["api"], api, "{server}");
            if api == "messages" {
                let names = server["header_names"].as_array().unwrap();
                for h in [
                    "anthropic-version",
                    "anthropic-dangerous-direct-browser-access",
                ] {
                    assert!(names.iter().any(|n| n == h), "{h}: {server}");
                }
            }
            assert_eq!(r["usage"]["completion_tokens"], 8, "{api}: {r}");
            assert_eq!(
                r["usage"]["prompt_tokens"], server["prompt_tokens"],
                "{api}"
            );
            assert_eq!(
                r["usage"]["prompt_tokens_details"]["cached_tokens"], server["cached_tokens"],
                "{api}: the cache's hits as the server counted them"
            );
            assert_eq!(
                r["token_events_ms"].as_array().unwrap().len(),
                server["chunk_times_ms"].as_array().unwrap().len(),
                "{api}: every chunk the server sent arrived as one event"
            );
        }
        // The page prices each request's usage as the CLI does: what the mock served.
        let cost = &level["cost"];
        assert!(
            (f(&cost["usd"]) - usd).abs() < 1e-12,
            "{api}: {cost} vs ${usd}"
        );
    }
    // The page's own simulator streams the same APIs.
    for api in ["responses", "messages"] {
        let url = format!(
            "{}?api={api}&concurrency=2&requests=4&rounds=1&warmup=0&max_tokens=6&autorun=1",
            serve.url
        );
        let state = browser.run(&url, Duration::from_secs(60)).await;
        assert_eq!(
            state,
            "done",
            "{api}: {}",
            browser.text_of("run-error").await
        );
        let report = json_of(&browser.text_of("report-json").await, "#report-json");
        validate_schema(&report);
        assert_eq!(report["config"]["api"], api);
        assert_eq!(report["levels"][0]["ok"], 4, "{api}");
        assert_eq!(report["levels"][0]["output_tokens_total"], 24, "{api}");
        assert_eq!(
            report["levels"][0]["output_tokens_estimated"], false,
            "{api}"
        );
    }
    browser.close().await;
}

/// The page's open loop against the mock: requests sent at rates with the
/// native client's own schedule (the same seeded gaps, `tokenscope_workload::plan`),
/// and a public Mooncake trace replayed from a file beside the page, sped up and
/// scaled, each request at its time with its lengths as the mock counted them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn page_sends_on_schedule_and_replays_a_trace() {
    use tokenscope_core::report::Arrival;
    use tokenscope_workload::plan;
    let _one = lock().await;
    let site = chromium::dist_copy();
    let name = "mooncake-conversation_trace-head200.jsonl";
    std::fs::copy(
        repo().join("tests/fixtures/traces").join(name),
        site.path().join("mooncake.jsonl"),
    )
    .unwrap();
    let serve = Serve::start_dir(site.path(), &[]);
    let browser = Browser::start(&["--disable-gpu"]).await;
    let mock = Mock::start(&["--max-batch", "32", "--ttft-ms", "10", "--itl-ms", "3"]);
    let lags = |records: &Value| -> Vec<f64> {
        records
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["warmup"] == false)
            .map(|r| f(&r["t_send_ms"]) - f(&r["t_scheduled_ms"]))
            .collect()
    };
    let scheduled = |records: &Value| -> Vec<(u64, f64)> {
        let mut v: Vec<(u64, f64)> = records
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["warmup"] == false)
            .map(|r| {
                let id = r["request_id"].as_str().unwrap();
                (
                    id.rsplit('-').next().unwrap().parse().unwrap(),
                    f(&r["t_scheduled_ms"]),
                )
            })
            .collect();
        v.sort_by_key(|x| x.0);
        v
    };

    // Rate mode, gamma arrivals (CV 2): the native client's gaps exactly.
    let (n, rate, seed) = (12u64, 20.0, 5u64);
    let url = format!(
        "{}?url={}&api=chat&rate={rate}&arrival=gamma:2&requests={n}&rounds=1&warmup=0&max_tokens=4&seed={seed}&autorun=1",
        serve.url, mock.url
    );
    let state = browser.run(&url, Duration::from_secs(60)).await;
    assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
    let report = json_of(&browser.text_of("report-json").await, "#report-json");
    validate_schema(&report);
    check_accounting(&report, n);
    assert_eq!(report["config"]["mode"], "rate");
    assert_eq!(report["config"]["arrival"], "gamma");
    assert_eq!(f(&report["config"]["arrival_cv"]), 2.0);
    let records = json_of(&browser.text_of("records-json").await, "#records-json");
    let times = scheduled(&records);
    assert_eq!(times.len() as u64, n);
    let mut rng = plan::arrival_stream(seed, 0);
    for w in times.windows(2) {
        let want = plan::arrival_gap_ms(&mut rng, rate, Arrival::Gamma, Some(2.0));
        let got = w[1].1 - w[0].1;
        assert!((got - want).abs() < 1e-6, "gap {got} vs the CLI's {want}");
    }
    let rate_lag = lags(&records);

    // The Mooncake excerpt: 30 requests at 10x, lengths x 0.02.
    let (n, speed, scale) = (30usize, 10.0, 0.02);
    let url = format!(
        "{}?url={}&api=chat&trace=mooncake.jsonl&trace_speed={speed}&trace_token_scale={scale}&requests={n}&autorun=1",
        serve.url, mock.url
    );
    let state = browser.run(&url, Duration::from_secs(120)).await;
    assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
    let report = json_of(&browser.text_of("report-json").await, "#report-json");
    validate_schema(&report);
    check_accounting(&report, n as u64);
    let t = &report["config"]["trace"];
    assert_eq!(t["format"], "mooncake");
    assert_eq!(t["requests"], n as u64);
    assert_eq!(report["config"]["arrival"], "trace");
    let records = json_of(&browser.text_of("records-json").await, "#records-json");
    let trace: Vec<Value> = std::fs::read_to_string(site.path().join("mooncake.jsonl"))
        .unwrap()
        .lines()
        .take(n)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let scaled = |v: &Value| ((v.as_u64().unwrap() as f64 * scale).round() as u64).max(1);
    let times = scheduled(&records);
    let t0 = f(&trace[0]["timestamp"]);
    for (i, (k, at)) in times.iter().enumerate() {
        assert_eq!(*k as usize, i);
        let want = (f(&trace[i]["timestamp"]) - t0) / speed;
        assert!(
            ((at - times[0].1) - want).abs() < 1e-6,
            "request {i}: {at} vs {want}"
        );
    }
    let log: HashMap<String, Value> = mock
        .log_records(12 + n)
        .into_iter()
        .map(|r| (r["request_id"].as_str().unwrap().to_owned(), r))
        .collect();
    for r in records.as_array().unwrap() {
        let id = r["request_id"].as_str().unwrap();
        let i: usize = id.rsplit('-').next().unwrap().parse().unwrap();
        let server = &log[id];
        assert_eq!(
            server["prompt_tokens"],
            scaled(&trace[i]["input_length"]),
            "request {i}"
        );
        assert_eq!(
            server["max_tokens"],
            scaled(&trace[i]["output_length"]),
            "request {i}"
        );
    }
    let trace_lag = lags(&records);
    let p99 = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 * 0.99).ceil() as usize).min(v.len()) - 1]
    };
    eprintln!(
        "page open loop: send lag median {:.2} ms, max {:.2} ms (gamma:2 at {rate}/s); trace replay lag median {:.2} ms, p99 {:.2} ms",
        median(&rate_lag),
        p99(&rate_lag),
        median(&trace_lag),
        p99(&trace_lag)
    );
    // Browser timers: a send is due no later than a few frames after its time
    // (p99 under 20 ms idle; 30.6 ms seen on a busy 2-core CI host).
    assert!(
        p99(&trace_lag) < 50.0 && p99(&rate_lag) < 50.0,
        "send lag p99: trace {:.1} ms, open loop {:.1} ms",
        p99(&trace_lag),
        p99(&rate_lag)
    );
    browser.close().await;
}

/// Conversations in the page, with prompts of exact length by the server's
/// `/tokenize` (the mock's counts one token a word, as its `usage` does), one
/// shared system prompt, and the prompt length given as a fraction of the
/// server's context window: every turn's prompt as the mock counted it (the
/// prefix, the history and the new message), the first turns' counted prompts
/// checked against `usage`, and the per-turn table and the prefix cache in the
/// report, as `bench --conversation` gives them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn page_runs_conversations_of_exact_prompts() {
    let _one = lock().await;
    let serve = Serve::start(&[]);
    let browser = Browser::start(&["--disable-gpu"]).await;
    // 0.01 of a 1600-token context: 16-token user messages.
    let mock = Mock::start(&[
        "--ttft-ms",
        "5",
        "--itl-ms",
        "2",
        "--prefix-cache",
        "--max-context",
        "1600",
    ]);
    let (turns, answer, prefix) = (3u64, 8u64, 8u64);
    let url = format!(
        "{}?url={}&api=chat&concurrency=2&requests=6&rounds=1&warmup=0&max_tokens={answer}&ignore_eos=1&input_tokens=0.01max&shared_prefix={prefix}&tokenizer=server&conversation=turns%3D{turns},think%3D100ms&autorun=1",
        serve.url, mock.url
    );
    let state = browser.run(&url, Duration::from_secs(90)).await;
    assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
    let report = json_of(&browser.text_of("report-json").await, "#report-json");
    validate_schema(&report);
    let config = &report["config"];
    assert_eq!(config["conversation"]["turns"], turns);
    assert_eq!(config["context_window"], 1600);
    assert_eq!(config["input_tokens"], 16);
    assert_eq!(config["shared_prefix_tokens"], prefix);
    assert_eq!(config["tokens"]["method"], "server");
    assert_eq!(config["tokens"]["source"], "llama.cpp /tokenize");
    assert_eq!(config["tokens"]["exact"], true);
    assert_eq!(config["tokens"]["template_overhead"], 0);
    let level = &report["levels"][0];
    assert_eq!(
        (level["sent"].as_u64(), level["ok"].as_u64()),
        (Some(6), Some(6))
    );
    // The first turns' prompts were counted, and usage agreed.
    assert_eq!(level["prompt_tokens_checked"], 2);
    assert!(level["prompt_tokens_differ"].is_null(), "{level}");
    let per_turn = level["turns"].as_array().expect("the per-turn table");
    assert_eq!(per_turn.len(), turns as usize);
    assert!(level["prompt_cache"]["cached_tokens"].as_u64().unwrap() > 0);

    // Every turn as the mock counted it: the prefix, k prompts and k - 1 answers.
    let records = json_of(&browser.text_of("records-json").await, "#records-json");
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 6);
    let log: HashMap<String, Value> = mock
        .log_records(7)
        .into_iter()
        .map(|r| (r["request_id"].as_str().unwrap().to_owned(), r))
        .collect();
    let mut sessions = HashMap::new();
    for r in records {
        let (session, turn) = (r["session"].as_u64().unwrap(), r["turn"].as_u64().unwrap());
        *sessions.entry(session).or_insert(0) += 1;
        let server = &log[r["request_id"].as_str().unwrap()];
        let expected = prefix + 16 * turn + answer * (turn - 1);
        assert_eq!(server["prompt_tokens"], expected, "turn {turn}: {server}");
        assert_eq!(
            r["prompt_tokens_sent"].as_u64(),
            (turn == 1).then_some(prefix + 16),
            "turn {turn}"
        );
    }
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    assert!(sessions.values().all(|&n| n == turns), "{sessions:?}");
    // The template-overhead request went too (one, before the run).
    assert!(log.contains_key("tokenscope-template"), "{:?}", log.keys());
    // The Analysis shows the turns (the report module renders them).
    analysis_showing(&browser, "Per conversation turn").await;

    // tokenizer=server against an endpoint without /tokenize: the run does not
    // start, and says why.
    let state = browser
        .run(
            &format!(
                "{}?url={}/nothing&model=m&tokenizer=server&autorun=1",
                serve.url, serve.url
            ),
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(state, "failed");
    let error = browser.text_of("run-error").await;
    assert!(error.contains("tokenizer=server"), "{error}");
    browser.close().await;
}

/// Input and output tiers in the page (`input_tokens=16,32&max_tokens=4,8`): the
/// whole sweep at each pair, inputs outer, a report each (`#tiers-json`), every
/// request with its tier's prompt length (exact by the mock's `/tokenize`) and
/// `max_tokens` as the mock counted them, and the tiers side by side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn page_runs_input_and_output_tiers() {
    let _one = lock().await;
    let serve = Serve::start(&[]);
    let browser = Browser::start(&["--disable-gpu"]).await;
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "2"]);
    let url = format!(
        "{}?url={}&api=chat&concurrency=1,2&requests=4&rounds=1&warmup=0&ignore_eos=1&input_tokens=16,32&max_tokens=4,8&autorun=1",
        serve.url, mock.url
    );
    let state = browser.run(&url, Duration::from_secs(90)).await;
    assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
    let tiers = json_of(&browser.text_of("tiers-json").await, "#tiers-json");
    let tiers = tiers.as_array().unwrap();
    let expected = [(16u64, 4u64), (16, 8), (32, 4), (32, 8)];
    assert_eq!(tiers.len(), expected.len());
    let log: HashMap<String, Value> = mock
        .log_records(4 * 8 + 4)
        .into_iter()
        .map(|r| (r["request_id"].as_str().unwrap_or("").to_owned(), r))
        .collect();
    for (report, (input, max_tokens)) in tiers.iter().zip(expected) {
        validate_schema(report);
        check_accounting(report, 4);
        assert_eq!(report["config"]["input_tokens"], input);
        assert_eq!(report["config"]["max_tokens"], max_tokens);
        assert_eq!(report["config"]["tokens"]["exact"], true);
        assert_eq!(report["levels"].as_array().unwrap().len(), 2);
    }
    // The shown report is the last tier's; every request of the last tier as
    // the mock counted it.
    let report = json_of(&browser.text_of("report-json").await, "#report-json");
    assert_eq!(report["config"]["input_tokens"], 32);
    assert_eq!(report["config"]["max_tokens"], 8);
    let records = json_of(&browser.text_of("records-json").await, "#records-json");
    for r in records.as_array().unwrap() {
        let server = &log[r["request_id"].as_str().unwrap()];
        assert_eq!(server["prompt_tokens"], 32, "{server}");
        assert_eq!(server["max_tokens"], 8, "{server}");
    }
    let rows = browser
        .js("return document.querySelectorAll('#tiers-table tbody tr').length;")
        .await;
    assert_eq!(rows, 8, "a row per tier and level");
    browser.close().await;
}

/// A ramp in the page (`ramp=1s`), as `bench --ramp`: before the level's
/// measured part, never measured, the rate rising linearly to the level's (the
/// k-th send at core's `ramp_send_ms`, relative to the first), or the workers
/// joining one by one to the level's concurrency; no warm-up besides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn page_ramps_the_load_before_measuring() {
    use tokenscope_workload::plan;
    let _one = lock().await;
    let serve = Serve::start(&[]);
    let browser = Browser::start(&["--disable-gpu"]).await;
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "2"]);
    for (load, ramped) in [("rate=20", 9usize), ("concurrency=4", 4)] {
        let url = format!(
            "{}?url={}&api=chat&{load}&requests=10&rounds=1&max_tokens=4&ramp=1s&autorun=1",
            serve.url, mock.url
        );
        let state = browser.run(&url, Duration::from_secs(60)).await;
        assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
        let report = json_of(&browser.text_of("report-json").await, "#report-json");
        validate_schema(&report);
        check_accounting(&report, 10);
        assert_eq!(f(&report["config"]["ramp_s"]), 1.0);
        assert_eq!(report["config"]["warmup_requests"], 0);
        let records = json_of(&browser.text_of("records-json").await, "#records-json");
        let ramp: Vec<&Value> = records
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["warmup"] == true)
            .collect();
        if load.starts_with("rate") {
            assert_eq!(ramp.len(), ramped, "rate · T / 2 - 1 sends before the end");
            let t0 = f(&ramp[0]["t_scheduled_ms"]);
            for (k, r) in ramp.iter().enumerate() {
                let due = plan::ramp_send_ms(k as u64 + 1, 20.0, 1000.0)
                    - plan::ramp_send_ms(1, 20.0, 1000.0);
                let at = f(&r["t_scheduled_ms"]) - t0;
                assert!((at - due).abs() < 1e-6, "send {k}: {at} vs {due}");
            }
        } else {
            // One worker for the ramp's first quarter (the second joins at 250
            // ms after the ramp's start, which can be some ms before the first
            // send on a busy host: a CI run sent the second worker's first
            // request 236 ms after the first send): requests sent in the first
            // 200 ms never overlap.
            assert!(ramp.len() >= ramped, "{} ramp requests", ramp.len());
            let first = ramp
                .iter()
                .map(|r| f(&r["t_send_ms"]))
                .fold(f64::MAX, f64::min);
            let mut alone: Vec<(f64, f64)> = ramp
                .iter()
                .map(|r| (f(&r["t_send_ms"]), f(&r["t_done_ms"])))
                .filter(|(s, _)| *s < first + 200.0)
                .collect();
            alone.sort_by(|a, b| a.0.total_cmp(&b.0));
            assert!(alone.len() >= 2, "{alone:?}");
            for w in alone.windows(2) {
                assert!(
                    w[1].0 >= w[0].1 - 0.01,
                    "overlap in the first quarter: {alone:?}"
                );
            }
            // All four in the last quarter (the fourth joins at 750 ms).
            let in_flight = |t: f64| {
                ramp.iter()
                    .filter(|r| f(&r["t_send_ms"]) <= t && t < f(&r["t_done_ms"]))
                    .count()
            };
            let most = (76..100)
                .map(|k| in_flight(first + 10.0 * f64::from(k)))
                .max()
                .unwrap();
            assert_eq!(most, 4, "in flight late in the ramp");
        }
    }
    browser.close().await;
}

/// The page's Compare panel against the CLI: two native runs (mocks 1 ms of ITL
/// apart) opened with their raw files give `tokenscope compare`'s comparison,
/// cell for cell (the same code, in the report module); then this page's own run
/// as the base beside one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn page_compares_runs_as_the_cli_does() {
    use fantoccini::Locator;
    let _one = lock().await;
    let dir = tempfile::tempdir().unwrap();
    let base_mock = Mock::start(&["--ttft-ms", "10", "--itl-ms", "3", "--jitter-ms", "0.3"]);
    let new_mock = Mock::start(&["--ttft-ms", "10", "--itl-ms", "4", "--jitter-ms", "0.3"]);
    for (name, mock) in [("base", &base_mock), ("new", &new_mock)] {
        let o = Command::new(bin())
            .current_dir(dir.path())
            .args(["bench", "--url", &mock.url, "--concurrency", "1"])
            .args(["--requests", "21", "--rounds", "3", "--max-tokens", "12"])
            .args(["--ignore-eos", "--server-metrics", "none", "-q"])
            .args([
                "--json",
                &format!("{name}.json"),
                "--raw",
                &format!("{name}.jsonl"),
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let cli = Command::new(bin())
        .current_dir(dir.path())
        .args(["compare", "base.json", "new.json", "--json", "-"])
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let cli: Value = serde_json::from_slice(&cli.stdout).unwrap();

    let serve = Serve::start(&[]);
    let browser = Browser::start(&["--disable-gpu"]).await;
    let url = format!(
        "{}?url={}&api=chat&concurrency=1&requests=21&rounds=3&warmup=1&max_tokens=12&ignore_eos=1&autorun=1",
        serve.url, base_mock.url
    );
    let state = browser.run(&url, Duration::from_secs(90)).await;
    assert_eq!(state, "done", "{}", browser.text_of("run-error").await);
    // The panel comes from the report module, loaded when opened.
    browser
        .client
        .find(Locator::Id("compare-open"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .wait_for(
            "document.getElementById('compare-files')",
            Duration::from_secs(30),
        )
        .await;
    let paths: Vec<String> = ["base.json", "base.jsonl", "new.json", "new.jsonl"]
        .iter()
        .map(|f| dir.path().join(f).to_str().unwrap().to_owned())
        .collect();
    browser
        .client
        .find(Locator::Id("compare-files"))
        .await
        .unwrap()
        .send_keys(&paths.join("\n"))
        .await
        .unwrap();
    let wait_json = |base: &'static str| {
        let browser = &browser;
        async move {
            browser
                .wait_for(
                    &format!(
                        "(document.getElementById('compare-json')?.textContent || '').includes('\"base\": \"{base}\"') || document.getElementById('compare-error')"
                    ),
                    Duration::from_secs(30),
                )
                .await;
            assert_eq!(browser.text_of("compare-error").await, "");
            json_of(&browser.text_of("compare-json").await, "#compare-json")
        }
    };
    let page = wait_json("base.json").await;
    browser
        .js("document.getElementById('compare').scrollIntoView(); return null;")
        .await;
    browser.screenshot("compare-view").await;
    assert_schema("compare.schema.json", &page, "the page's comparison");
    // The CLI's comparison, cell for cell: the same values, intervals and
    // verdicts (floats within 1e-9: wasm's and the host's libm may differ in
    // the last bit of a p-value).
    fn same(a: &Value, b: &Value, at: &str) {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                assert!((x - y).abs() <= 1e-9 * x.abs().max(1.0), "{at}: {x} vs {y}");
            }
            (Value::Object(x), Value::Object(y)) => {
                assert_eq!(
                    x.keys().collect::<Vec<_>>(),
                    y.keys().collect::<Vec<_>>(),
                    "{at}"
                );
                for (k, v) in x {
                    same(v, &y[k], &format!("{at}.{k}"));
                }
            }
            (Value::Array(x), Value::Array(y)) => {
                assert_eq!(x.len(), y.len(), "{at}");
                for (i, (v, w)) in x.iter().zip(y).enumerate() {
                    same(v, w, &format!("{at}[{i}]"));
                }
            }
            _ => assert_eq!(a, b, "{at}"),
        }
    }
    same(&page, &cli, "compare");
    let tpot = page["runs"][0]["levels"][0]["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metric"] == "tpot_ms:p50")
        .unwrap()
        .clone();
    assert_eq!(tpot["verdict"], "worse", "{tpot}");
    assert!(
        browser
            .text_of("compare-view")
            .await
            .contains("runs overlaid"),
        "the charts"
    );
    let export = browser
        .js("return document.getElementById('compare-export').getAttribute('href').slice(0, 60);")
        .await;
    assert!(
        export
            .as_str()
            .unwrap_or("")
            .starts_with("data:text/html;charset=utf-8,%3C%21doctype"),
        "{export}"
    );

    // This run as the base, beside both files: the page's own raw file gives it
    // intervals too.
    browser
        .client
        .find(Locator::Id("compare-this-run"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let page = wait_json("this-run.json").await;
    let runs: Vec<&str> = page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(runs, ["base.json", "new.json"]);
    assert_eq!(page["runs"][0]["intervals"], true, "{}", page["runs"][0]);
    let mismatches: Vec<&str> = page["runs"][0]["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["field"].as_str().unwrap())
        .collect();
    assert!(
        mismatches.contains(&"source"),
        "native vs browser: {mismatches:?}"
    );

    // A file that is not a report: the error names it.
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "{ not json").unwrap();
    browser
        .client
        .find(Locator::Id("compare-files"))
        .await
        .unwrap()
        .send_keys(garbage.to_str().unwrap())
        .await
        .unwrap();
    browser
        .wait_for(
            "document.getElementById('compare-error')",
            Duration::from_secs(30),
        )
        .await;
    let error = browser.text_of("compare-error").await;
    assert!(error.starts_with("garbage.json: "), "{error}");
    browser.close().await;
}
