//! Fidelity: `tokenscope bench` against `tokenscope mock` over real loopback HTTP,
//! compared request by request with the server's own log of when it handed each
//! chunk to HTTP (server truth).

use crate::common;

use std::collections::HashMap;

use common::{Mock, median, raw_requests, read_jsonl, run, text};

struct Compared {
    client_ttft: Vec<f64>,
    server_ttft: Vec<f64>,
    client_itl: Vec<f64>,
    server_itl: Vec<f64>,
}

/// Run one level and join the raw records with the server log by request id.
fn bench_and_compare(
    mock_args: &[&str],
    concurrency: u32,
    requests: u32,
    max_tokens: u32,
) -> Compared {
    bench_and_compare_over(
        Wire::Plain,
        "completions",
        mock_args,
        concurrency,
        requests,
        max_tokens,
    )
}

/// How the client reaches the mock.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wire {
    /// Plaintext HTTP/1.1.
    Plain,
    /// TLS with a private CA, HTTP/2 by ALPN.
    TlsH2,
    /// TLS with a private CA, HTTP/1.1 forced.
    TlsHttp1,
    /// Plaintext HTTP/2 (h2c, prior knowledge).
    H2c,
}

impl Wire {
    fn protocol(self) -> &'static str {
        match self {
            Wire::Plain | Wire::TlsHttp1 => "http/1.1",
            Wire::TlsH2 | Wire::H2c => "h2",
        }
    }
}

/// [`bench_and_compare`] over `wire`, to `api` (`--api`). Also checks, request
/// by request against the server's log, the HTTP version recorded, which
/// requests opened a new connection (the first the server answered on each
/// connection), and the prompt's and the answer's tokens.
fn bench_and_compare_over(
    wire: Wire,
    api: &str,
    mock_args: &[&str],
    concurrency: u32,
    requests: u32,
    max_tokens: u32,
) -> Compared {
    let certs = tempfile::tempdir().unwrap();
    let certs_dir = certs.path().to_str().unwrap().to_owned();
    let ca = certs.path().join("ca.pem").to_str().unwrap().to_owned();
    let tls = matches!(wire, Wire::TlsH2 | Wire::TlsHttp1);
    let mut mock_all: Vec<&str> = mock_args.to_vec();
    if tls {
        mock_all.extend(["--tls-self-signed", &certs_dir]);
    }
    let mock = Mock::start(&mock_all);
    assert_eq!(mock.url.starts_with("https://"), tls, "{}", mock.url);
    let mut wire_args: Vec<&str> = Vec::new();
    if tls {
        wire_args.extend(["--ca-cert", &ca]);
    }
    match wire {
        Wire::TlsHttp1 => wire_args.push("--http1"),
        Wire::H2c => wire_args.push("--http2"),
        Wire::Plain | Wire::TlsH2 => {}
    }
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.jsonl");
    let out = dir.path().join("report.json");
    let c = concurrency.to_string();
    let n = requests.to_string();
    let m = max_tokens.to_string();
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--api",
        api,
        "--concurrency",
        &c,
        "--requests",
        &n,
        "--rounds",
        "1",
        "--max-tokens",
        &m,
        "--input-tokens",
        "32",
        // Scraping on (its own connection, every 250 ms and at the level's start
        // and end): the agreement must hold with it.
        "--server-metrics",
        "auto",
        "--scrape-interval",
        "250ms",
        "--quiet",
        "--raw",
        raw.to_str().unwrap(),
        "--json",
        out.to_str().unwrap(),
    ]
    .into_iter()
    .chain(wire_args)
    .collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o));

    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    for level in report["levels"].as_array().unwrap() {
        let sent = level["sent"].as_u64().unwrap();
        let sum = level["ok"].as_u64().unwrap()
            + level["errors"].as_u64().unwrap()
            + level["timeouts"].as_u64().unwrap();
        assert_eq!(sent, sum, "sent = ok + errors + timeouts");
        assert_eq!(sent, u64::from(requests));
        let scrapes = level["server"]["scrapes"].as_u64().unwrap_or(0);
        assert!(
            scrapes >= 2,
            "the level was scraped at its start and end: {scrapes}"
        );
        assert_eq!(level["server"]["failed_scrapes"], 0);
    }

    let raw_lines = raw_requests(&raw);
    let measured: Vec<&serde_json::Value> =
        raw_lines.iter().filter(|r| r["warmup"] == false).collect();
    assert_eq!(measured.len() as u32, requests);
    // Every request, warm-up included, reached the server's log (plus the pre-flight).
    let server = mock.log_records(raw_lines.len());
    let by_id: HashMap<&str, &serde_json::Value> = server
        .iter()
        .filter_map(|s| Some((s["request_id"].as_str()?, s)))
        .collect();

    let mut cmp = Compared {
        client_ttft: vec![],
        server_ttft: vec![],
        client_itl: vec![],
        server_itl: vec![],
    };
    let mut client_tokens = 0;
    let mut server_tokens = 0;
    for r in measured {
        assert_eq!(r["outcome"]["status"], "ok", "{r}");
        let id = r["request_id"].as_str().unwrap();
        let s = by_id
            .get(id)
            .unwrap_or_else(|| panic!("request {id} missing from the server log"));
        let ct: Vec<f64> = r["token_events_ms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        let st: Vec<f64> = s["chunk_times_ms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        assert_eq!(
            ct.len(),
            st.len(),
            "{id}: every chunk the server sent arrived as one event"
        );
        assert_eq!(r["protocol"], wire.protocol(), "{id}");
        assert_eq!(s["protocol"], wire.protocol(), "{id}: the server's view");
        assert_eq!(s["tls"], tls, "{id}");
        let conn = s["connection"].as_u64().unwrap();
        let opened = server
            .iter()
            .filter(|o| o["connection"].as_u64() == Some(conn))
            .min_by(|a, b| {
                // The first answered on it (under h2 several wait on one
                // connection; the client claims it with the first answer).
                let t = |v: &serde_json::Value| v["t_headers_ms"].as_f64().unwrap_or(f64::MAX);
                t(a).total_cmp(&t(b))
            })
            .is_some_and(|first| first["request_id"] == s["request_id"]);
        assert_eq!(
            r["connection"]["new"], opened,
            "{id}: the client says it opened connection {conn}: {}, the server log says {opened}",
            r["connection"]
        );
        let t_send = r["t_send_ms"].as_f64().unwrap();
        let t_recv = s["t_received_ms"].as_f64().unwrap();
        cmp.client_ttft.push(ct[0] - t_send);
        cmp.server_ttft.push(st[0] - t_recv);
        cmp.client_itl.extend(ct.windows(2).map(|w| w[1] - w[0]));
        cmp.server_itl.extend(st.windows(2).map(|w| w[1] - w[0]));
        assert_eq!(s["api"], api, "{id}");
        if api == "messages" {
            let names = s["header_names"].as_array().unwrap();
            assert!(names.iter().any(|n| n == "anthropic-version"), "{id}: {s}");
        }
        // Prompt tokens: the usage the client read (however its API splits
        // them) is the count the server made.
        assert_eq!(r["usage"]["prompt_tokens"], s["prompt_tokens"], "{id}");
        // Output tokens: the client's (from usage) equal what the server sent.
        let usage = r["usage"]["completion_tokens"].as_u64().unwrap();
        assert_eq!(usage, s["completion_tokens"].as_u64().unwrap(), "{id}");
        assert_eq!(usage, u64::from(max_tokens));
        client_tokens += usage;
        server_tokens += s["chunk_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_u64().unwrap())
            .sum::<u64>();
    }
    assert_eq!(client_tokens, server_tokens);
    let level = &report["levels"][0];
    assert_eq!(
        level["output_tokens_total"].as_u64().unwrap(),
        client_tokens
    );
    cmp
}

/// The timing agreement: Err (with the figures) when a median is off by more
/// than `tol_ms`. The client never seeing a token before the server sent it is
/// a hard failure.
fn check(cmp: &Compared, tol_ms: f64, label: &str) -> Result<(), String> {
    let (ct, st) = (median(&cmp.client_ttft), median(&cmp.server_ttft));
    let (ci, si) = (median(&cmp.client_itl), median(&cmp.server_itl));
    eprintln!(
        "{label}: TTFT median client {ct:.3} ms, server {st:.3} ms; ITL median client {ci:.3} ms, server {si:.3} ms"
    );
    assert!(ct >= st - 0.05, "{label}: client TTFT below server TTFT");
    if (ct - st).abs() > tol_ms {
        return Err(format!(
            "{label}: TTFT medians differ by {:.3} ms (> {tol_ms})",
            ct - st
        ));
    }
    if (ci - si).abs() > tol_ms {
        return Err(format!(
            "{label}: ITL medians differ by {:.3} ms (> {tol_ms})",
            ci - si
        ));
    }
    Ok(())
}

/// Run `measure` and check it, measured again on a miss ([`crate::remeasured`]:
/// the ITL medians, normally 0.03 ms apart, differ by 0.8 ms in a burst of
/// load on a shared 2-core machine).
fn agree_within(tol_ms: f64, label: &str, measure: impl Fn() -> Compared) {
    crate::remeasured(label, || check(&measure(), tol_ms, label));
}

#[test]
fn concurrency_1_within_1ms_of_server_truth() {
    agree_within(1.0, "c=1", || {
        bench_and_compare(
            &["--itl-ms", "8", "--ttft-ms", "20", "--jitter-ms", "1"],
            1,
            24,
            24,
        )
    });
}

#[test]
fn concurrency_64_within_2ms_of_server_truth() {
    agree_within(2.0, "c=64", || {
        bench_and_compare(
            &[
                "--itl-ms",
                "10",
                "--ttft-ms",
                "20",
                "--max-batch",
                "64",
                "--step-growth",
                "0.01",
            ],
            64,
            128,
            16,
        )
    });
}

/// The same agreement over TLS (a private CA) and HTTP/2, and over h2c: the
/// transport adds nothing to the figures.
#[test]
fn over_tls_and_http2_within_the_plaintext_bounds() {
    let args = ["--itl-ms", "8", "--ttft-ms", "20", "--jitter-ms", "1"];
    for wire in [Wire::TlsH2, Wire::TlsHttp1, Wire::H2c] {
        agree_within(1.0, &format!("c=1 {wire:?}"), || {
            bench_and_compare_over(wire, "completions", &args, 1, 24, 24)
        });
    }
    let args = [
        "--itl-ms",
        "10",
        "--ttft-ms",
        "20",
        "--max-batch",
        "64",
        "--step-growth",
        "0.01",
    ];
    // TLS at c=64: 64 connections, each with its own handshake and records.
    agree_within(2.0, "c=64 TlsHttp1", || {
        bench_and_compare_over(Wire::TlsHttp1, "completions", &args, 64, 128, 16)
    });
    // HTTP/2 multiplexes the streams on one connection: when a decode step
    // hands all its chunks to HTTP at once, each side's single connection task
    // writes and reads them in turn. At c=16 that stays within the bound; at
    // c=64 it was 1.7-3.3 ms on this 2-core machine (docs/metrics.md), a property of
    // the protocol that the notes explain, not the client's overhead.
    agree_within(2.0, "c=16 TlsH2", || {
        bench_and_compare_over(Wire::TlsH2, "completions", &args, 16, 64, 16)
    });
}

/// Chat, and the Responses and Messages APIs (their named events, their end
/// events instead of `[DONE]`, usage split over two events): the same
/// agreement with the server's log as completions, at c=1 and c=16 with a
/// prefix cache, and every token counted.
#[test]
fn every_api_within_the_bounds_of_server_truth() {
    for api in ["chat", "responses", "messages"] {
        agree_within(1.0, &format!("c=1 --api {api}"), || {
            bench_and_compare_over(
                Wire::Plain,
                api,
                &["--itl-ms", "8", "--ttft-ms", "20", "--jitter-ms", "1"],
                1,
                16,
                16,
            )
        });
        agree_within(2.0, &format!("c=16 --api {api}"), || {
            bench_and_compare_over(
                Wire::Plain,
                api,
                &[
                    "--itl-ms",
                    "10",
                    "--ttft-ms",
                    "20",
                    "--max-batch",
                    "16",
                    "--prefix-cache",
                    "--reasoning-tokens",
                    "4",
                ],
                16,
                32,
                12,
            )
        });
    }
}

#[test]
fn chunks_of_several_tokens_count_every_token() {
    let mock = Mock::start(&["--tokens-per-chunk", "4", "--itl-ms", "5"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "2",
        "--requests",
        "6",
        "--rounds",
        "2",
        "--max-tokens",
        "18",
        "--quiet",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let l = &r["levels"][0];
    assert_eq!(l["output_tokens_total"], 6 * 18);
    // 18 tokens in chunks of 4,4,4,4,2: 5 events, 4 gaps per request.
    assert_eq!(l["metrics"]["itl_ms"]["count"], 6 * 4);
    // Per-token ITL is about a quarter of the per-chunk ITL.
    let per_chunk = l["metrics"]["itl_ms"]["p50"].as_f64().unwrap();
    let per_token = l["metrics"]["itl_per_token_ms"]["p50"].as_f64().unwrap();
    assert!(per_token < per_chunk / 2.5, "{per_token} vs {per_chunk}");
    // Without a count per chunk, the tokens are spread: the level says so.
    assert_eq!(l["event_tokens"]["spread"], 6);
    assert_eq!(l["event_tokens"]["counted"], 0);
    let _ = read_jsonl(&mock.log);

    // With a running usage in every chunk (--continuous-usage), each event's
    // tokens are the server's own: the raw file's counts are the mock's log's.
    let raw = dir.path().join("raw.jsonl");
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--continuous-usage",
        "--concurrency",
        "2",
        "--requests",
        "6",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--max-tokens",
        "18",
        "--quiet",
        "--json",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(r["config"]["continuous_usage"], true);
    let l = &r["levels"][0];
    assert_eq!(l["event_tokens"]["counted"], 6, "{}", l["event_tokens"]);
    assert_eq!(l["event_tokens"]["spread"], 0);
    let lines = raw_requests(&raw);
    let ids: Vec<&str> = lines
        .iter()
        .map(|l| l["request_id"].as_str().unwrap())
        .collect();
    let server = mock.log_records_for(&ids);
    let by_id: HashMap<&str, &serde_json::Value> = server
        .iter()
        .filter_map(|s| Some((s["request_id"].as_str()?, s)))
        .collect();
    for line in &lines {
        let id = line["request_id"].as_str().unwrap();
        assert_eq!(
            line["event_tokens"], by_id[id]["chunk_tokens"],
            "{id}: each event's tokens as the server sent them"
        );
        assert_eq!(line["event_tokens"], serde_json::json!([4, 4, 4, 4, 2]));
    }
    // The last gap of each request carried 2 tokens, not the 3.6 of a spread.
    let per_token = l["metrics"]["itl_per_token_ms"]["p50"].as_f64().unwrap();
    let per_chunk = l["metrics"]["itl_ms"]["p50"].as_f64().unwrap();
    assert!(
        (per_token - per_chunk / 4.0).abs() < 0.25 * per_chunk / 4.0,
        "{per_token} vs {per_chunk} / 4"
    );
}
