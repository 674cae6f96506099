//! Images in the prompt (`--images`) against the mock's log: every request
//! carried the images it says, of the size asked, in each API's shape; the
//! server counted their tokens as the report says; and TTFT per size is the
//! server's within the fidelity bounds.

use std::collections::HashMap;
use std::io::{Read, Write};

use crate::common::{Mock, f, median, raw_requests, run, text};

/// `(count, width, height)` of a spec's label (`2x512x384`, `64x64`).
fn spec(label: &str) -> (u64, u64, u64) {
    let n: Vec<u64> = label.split('x').map(|x| x.parse().unwrap()).collect();
    match n[..] {
        [w, h] => (1, w, h),
        [c, w, h] => (c, w, h),
        _ => panic!("{label}"),
    }
}

/// In chat, the Responses and the Messages APIs, JPEG and PNG: each request's
/// images are those the log read (count and size), the server's prompt tokens
/// are the report's, each size's image tokens are the log's own count, and
/// each size's TTFT p50 is the server's.
#[test]
fn images_are_what_the_mock_read_and_ttft_is_given_per_size() {
    let mock = Mock::start(&[
        "--ttft-ms",
        "5",
        "--itl-ms",
        "4",
        "--prefill-tok-per-s",
        "20000",
        "--image-patch-px",
        "28",
    ]);
    let sizes = ["64x64", "333x101", "2x512x384"];
    for (api, format) in [("chat", "jpeg"), ("responses", "png"), ("messages", "jpeg")] {
        crate::remeasured(api, || images_run(&mock, &sizes, api, format));
    }
}

/// One run of `api` with `format` images of `sizes`: its exact checks asserted,
/// its timing bounds `Err` when missed.
fn images_run(mock: &Mock, sizes: &[&str], api: &str, format: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let (raw, out) = (dir.path().join("raw.jsonl"), dir.path().join("r.json"));
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--api",
        api,
        "--images",
        &sizes.join(","),
        "--image-format",
        format,
        "--concurrency",
        "2",
        "--requests",
        "30",
        "--rounds",
        "1",
        "--max-tokens",
        "6",
        "--quiet",
        "--raw",
        raw.to_str().unwrap(),
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    crate::common::assert_schema("client.schema.json", &report, "a run with images");
    assert_eq!(report["config"]["images"], serde_json::json!(sizes));
    assert_eq!(report["config"]["image_format"], format);
    let measured: Vec<serde_json::Value> = raw_requests(&raw)
        .into_iter()
        .filter(|r| r["warmup"] == false)
        .collect();
    let ids: Vec<&str> = measured
        .iter()
        .map(|r| r["request_id"].as_str().unwrap())
        .collect();
    let log = mock.log_records_for(&ids);
    let by_id: HashMap<&str, &serde_json::Value> = log
        .iter()
        .filter_map(|s| Some((s["request_id"].as_str()?, s)))
        .collect();
    // Per size: the log's image tokens and prompt tokens, the client's and
    // the server's TTFT.
    #[derive(Default)]
    struct Truth {
        image_tokens: Vec<f64>,
        prompt_tokens: Vec<f64>,
        client_ttft: Vec<f64>,
        server_ttft: Vec<f64>,
    }
    let mut per: HashMap<String, Truth> = HashMap::new();
    for r in &measured {
        let id = r["request_id"].as_str().unwrap();
        let s = by_id[id];
        let label = r["images"]
            .as_str()
            .unwrap_or_else(|| panic!("{id}: no images"));
        let (count, w, h) = spec(label);
        let seen = s["images"]
            .as_array()
            .unwrap_or_else(|| panic!("{id}: {s}"));
        assert_eq!(seen.len() as u64, count, "{id}: {label}");
        for i in seen {
            assert_eq!(
                (i["width_px"].as_u64(), i["height_px"].as_u64()),
                (Some(w), Some(h)),
                "{id}"
            );
            assert_eq!(
                i["tokens"].as_u64().unwrap(),
                w.div_ceil(28) * h.div_ceil(28),
                "{id}: one token per 28-pixel square"
            );
        }
        assert_eq!(r["usage"]["prompt_tokens"], s["prompt_tokens"], "{id}");
        let t = per.entry(label.to_owned()).or_default();
        t.image_tokens
            .push(seen.iter().map(|i| f(&i["tokens"])).sum());
        t.prompt_tokens.push(f(&s["prompt_tokens"]));
        t.client_ttft
            .push(f(&r["token_events_ms"][0]) - f(&r["t_send_ms"]));
        t.server_ttft
            .push(f(&s["chunk_times_ms"][0]) - f(&s["t_received_ms"]));
    }
    let groups = report["levels"][0]["images"].as_array().unwrap();
    let labels: Vec<&str> = groups
        .iter()
        .map(|g| g["images"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["64x64", "333x101", "2x512x384"], "smallest first");
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    for g in groups {
        let label = g["images"].as_str().unwrap();
        let t = &per[label];
        assert_eq!(g["sent"], 10, "{api} {label}: each size in turn");
        assert_eq!(g["ok"], 10, "{api} {label}");
        // Exact: the mock's tokenizer is the client's (/tokenize), and the
        // images' share is what the server counted for them.
        assert!(
            (f(&g["image_tokens_mean"]) - mean(&t.image_tokens)).abs() < 1e-9,
            "{api} {label}: {g} vs the log's {:?}",
            t.image_tokens
        );
        assert!((f(&g["prompt_tokens_mean"]) - mean(&t.prompt_tokens)).abs() < 1e-9);
        let (c, s) = (median(&t.client_ttft), median(&t.server_ttft));
        assert!(
            (f(&g["ttft_ms_p50"]) - c).abs() < 1e-6,
            "{api} {label}: the report's p50 is its requests' own"
        );
        assert!(
            c >= s - 0.05,
            "{api} {label}: TTFT p50 {c:.2} ms, before the server's {s:.2} ms"
        );
        if c - s > 2.0 {
            return Err(format!(
                "{api} {label}: TTFT p50 {c:.2} ms, the server's {s:.2} ms (> 2 ms apart)"
            ));
        }
        assert!(g["ttft_ms_p90"].is_number(), "10 requests carry a p90");
        eprintln!(
            "{api} ({format}) {label}: image tokens {:.0}, TTFT p50 client {c:.2} ms, server {s:.2} ms",
            f(&g["image_tokens_mean"])
        );
    }
    // More pixels, more tokens to prefill: a slower first token.
    let p50 = |i: usize| f(&groups[i]["ttft_ms_p50"]);
    if p50(0) >= p50(2) {
        return Err(format!(
            "{api}: the largest images' TTFT p50 not above the smallest's: {groups:?}"
        ));
    }
    // Requests with images are left out of the text's count check: their
    // difference from the text is the images (every request here has some).
    let differ = &report["levels"][0]["prompt_tokens_differ"];
    assert_eq!(differ.as_u64().unwrap_or(0), 0, "{differ}");
    Ok(())
}

/// One POST of `body` to the mock's `path`: the status and the body.
fn post(mock: &Mock, path: &str, body: &str) -> (u16, String) {
    let addr = mock
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_owned();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "POST /v1/{path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    (status, out)
}

/// What cannot carry images is refused before anything is sent; the mock
/// refuses an image it cannot read, as servers do, naming which.
#[test]
fn images_that_cannot_be_sent_or_read_are_refused() {
    let mock = Mock::start(&[]);
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--api",
        "completions",
        "--images",
        "64x64",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("--images: images go in a message's content"),
        "{}",
        text(&o)
    );
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--images",
        "64x64",
        "--conversation",
        "turns=2",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("--images: not with --conversation"),
        "{}",
        text(&o)
    );
    for (bad, why) in [
        ("64", "is not WIDTHxHEIGHT"),
        ("0x64", "each side must be 1 to 4096 pixels"),
        ("17x8x8", "a request carries 1 to 16 images"),
    ] {
        let o = run(&["bench", "--url", &mock.url, "--images", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o));
        assert!(text(&o).contains(why), "{bad}: {}", text(&o));
    }
    let chat = |url: &str| {
        format!(
            r#"{{"model":"m","stream":true,"max_tokens":2,"messages":[{{"role":"user","content":[{{"type":"text","text":"hi"}},{{"type":"image_url","image_url":{{"url":"{url}"}}}}]}}]}}"#
        )
    };
    let (status, body) = post(
        &mock,
        "chat/completions",
        &chat("data:image/gif;base64,R0lGODlhAQABAAAAACw="),
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("image 1: not a PNG or JPEG"), "{body}");
    let (status, body) = post(
        &mock,
        "chat/completions",
        &chat("https://example.com/cat.png"),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("image 1: only data URLs are served here"),
        "{body}"
    );
    let (status, body) = post(
        &mock,
        "chat/completions",
        &chat("data:image/png;base64,%%%"),
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("image 1: not valid base64"), "{body}");
}
