//! The mock's `/metrics` (vLLM's names) against its own `--log`: every histogram
//! bucket, sum and count, and the token counters, recomputed from the log lines
//! and compared; read through core's parser and engine tables as a user's run
//! would read them.

use crate::common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;

use common::{Mock, run, text};
use serde_json::Value;
use tokenscope_core::analyze::server::engines::{Engine, Series};
use tokenscope_core::analyze::server::reading::{Histogram, Reading};
use tokenscope_measure::prometheus::Scrape;

/// GET `path` from the mock's origin (HTTP/1.1, connection closed).
fn get(mock: &Mock, path: &str) -> String {
    let origin = mock
        .url
        .trim_end_matches("/v1")
        .trim_start_matches("http://");
    let mut s = TcpStream::connect(origin).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {origin}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    body.to_owned()
}

/// A histogram recomputed from observations with the scrape's own bounds.
fn expected(bounds: &[f64], xs: &[f64]) -> Histogram {
    Histogram {
        buckets: bounds
            .iter()
            .map(|&le| (le, xs.iter().filter(|&&x| x <= le).count() as f64))
            .collect(),
        sum: xs.iter().sum(),
        count: xs.len() as f64,
    }
}

fn assert_histogram(r: &Reading, series: Series, xs: &[f64]) {
    let h = r
        .histogram(series)
        .unwrap_or_else(|| panic!("{series:?} missing"));
    let bounds: Vec<f64> = h.buckets.iter().map(|b| b.0).collect();
    let want = expected(&bounds, xs);
    assert_eq!(h.buckets, want.buckets, "{series:?} buckets");
    assert_eq!(h.count, want.count, "{series:?} count");
    assert!(
        (h.sum - want.sum).abs() < 1e-9,
        "{series:?} sum {} vs {}",
        h.sum,
        want.sum
    );
}

#[test]
fn the_mocks_metrics_are_its_log() {
    let mock = Mock::start(&[
        "--ttft-ms",
        "30",
        "--itl-ms",
        "5",
        "--max-batch",
        "2",
        "--jitter-ms",
        "1",
    ]);
    let idle = Reading::of(&Scrape::parse(&get(&mock, "/metrics")));
    assert_eq!(idle.engine, Some(Engine::Vllm));
    assert_eq!(idle.scalar(Series::RequestsRunning), Some(0.0));
    assert_eq!(
        idle.histogram(Series::TtftSeconds).map(|h| h.count),
        Some(0.0)
    );

    // Concurrency 4 on 2 slots: half the requests queue.
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "4",
        "--requests",
        "16",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--max-tokens",
        "12",
        "--input-tokens",
        "64",
        "--no-preflight",
        // Only the measured requests reach the server (no /tokenize probe, no
        // template measurement).
        "--tokenizer",
        "approx",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let log: Vec<Value> = mock.log_records(16);
    let scrape = Scrape::parse(&get(&mock, "/metrics"));
    assert!(scrape.skipped.is_empty(), "{:?}", scrape.skipped);
    let r = Reading::of(&scrape);

    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
    let completed: Vec<&Value> = log.iter().filter(|v| v["outcome"] == "completed").collect();
    assert_eq!(completed.len(), 16);
    let secs = |ms: f64| ms / 1000.0;
    let chunks = |v: &Value| -> Vec<f64> {
        v["chunk_times_ms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect()
    };
    let mut ttft = Vec::new();
    let mut queue = Vec::new();
    let mut prefill = Vec::new();
    let mut decode = Vec::new();
    let mut itl = Vec::new();
    let mut e2e = Vec::new();
    for v in &completed {
        let c = chunks(v);
        let (received, scheduled) = (f(v, "t_received_ms"), f(v, "t_scheduled_ms"));
        ttft.push(secs(c[0] - received));
        queue.push(secs(scheduled - received));
        prefill.push(secs(c[0] - scheduled));
        decode.push(secs(c[c.len() - 1] - c[0]));
        itl.extend(c.windows(2).map(|w| secs(w[1] - w[0])));
        e2e.push(secs(f(v, "t_end_ms") - received));
    }
    assert_histogram(&r, Series::TtftSeconds, &ttft);
    assert_histogram(&r, Series::QueueSeconds, &queue);
    assert_histogram(&r, Series::PrefillSeconds, &prefill);
    assert_histogram(&r, Series::DecodeSeconds, &decode);
    assert_histogram(&r, Series::InterTokenSeconds, &itl);
    assert_histogram(&r, Series::E2eSeconds, &e2e);
    // Four clients on two slots: all but the first requests wait for a slot.
    let waited = queue.iter().filter(|&&q| q > 0.02).count();
    assert!(waited >= 10, "{waited} of 16 queued: {queue:?}");

    let total = |k: &str| log.iter().map(|v| f(v, k)).sum::<f64>();
    assert_eq!(r.scalar(Series::PromptTokens), Some(total("prompt_tokens")));
    assert_eq!(
        r.scalar(Series::GenerationTokens),
        Some(total("completion_tokens"))
    );
    assert_eq!(r.scalar(Series::GenerationTokens), Some(16.0 * 12.0));
    assert_eq!(r.scalar(Series::RequestsRunning), Some(0.0));
    assert_eq!(r.scalar(Series::RequestsWaiting), Some(0.0));
    assert_eq!(r.scalar(Series::KvCacheUsage), Some(0.0));
}
