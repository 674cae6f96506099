//! `tokenscope bench --conversation`: sessions whose every turn sends the history
//! so far, checked against the mock's log (what it received and counted) and the
//! raw file (turns, sessions, think times).

use crate::common;

use std::collections::{BTreeMap, HashMap};

use common::{Mock, assert_schema, f, raw_requests, run, text};
use serde_json::Value;

#[test]
fn every_turn_sends_the_history_after_the_think_time() {
    let (input, answer, turns, think_ms) = (16u64, 8u64, 3u64, 150.0);
    let mock = Mock::start(&["--ttft-ms", "20", "--itl-ms", "2"]);
    let dir = tempfile::tempdir().unwrap();
    let (raw, out) = (dir.path().join("raw.jsonl"), dir.path().join("report.json"));
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--conversation",
        "turns=3,think=150ms",
        "--concurrency",
        "2",
        // 5 requests: rounded up to whole sessions, 2 of 3 turns.
        "--requests",
        "5",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--input-tokens",
        &input.to_string(),
        "--max-tokens",
        &answer.to_string(),
        "--ignore-eos",
        "--raw",
        raw.to_str().unwrap(),
        "--json",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("per conversation turn"), "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_schema(
        "client.schema.json",
        &report,
        "the conversation run's report",
    );
    assert_eq!(report["config"]["conversation"]["turns"], turns);
    assert_eq!(f(&report["config"]["conversation"]["think_ms"]), think_ms);
    let level = &report["levels"][0];
    assert_eq!(
        (level["sent"].as_u64(), level["ok"].as_u64()),
        (Some(6), Some(6))
    );
    let per_turn = level["turns"].as_array().unwrap();
    assert_eq!(per_turn.len(), 3);
    for (k, t) in per_turn.iter().enumerate() {
        assert_eq!(t["turn"], k as u64 + 1);
        assert_eq!((t["sent"].as_u64(), t["ok"].as_u64()), (Some(2), Some(2)));
        // The history: k earlier prompts and answers, and the new prompt.
        let expected = input * (k as u64 + 1) + answer * k as u64;
        assert_eq!(
            f(&t["prompt_tokens"]["p50"]),
            expected as f64,
            "turn {}",
            k + 1
        );
    }

    // Each request as the mock counted it, by its id.
    let log: HashMap<String, Value> = mock
        .log_records(6)
        .into_iter()
        .map(|r| (r["request_id"].as_str().unwrap().to_owned(), r))
        .collect();
    let mut sessions: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    for line in raw_requests(&raw) {
        sessions
            .entry(line["session"].as_u64().expect("a session number"))
            .or_default()
            .push(line.clone());
    }
    assert_eq!(sessions.len(), 2, "whole sessions");
    for (s, lines) in &sessions {
        let mut lines = lines.clone();
        lines.sort_by_key(|l| l["turn"].as_u64());
        let turns_seen: Vec<u64> = lines.iter().map(|l| l["turn"].as_u64().unwrap()).collect();
        assert_eq!(turns_seen, [1, 2, 3], "session {s}");
        for (k, l) in lines.iter().enumerate() {
            let r = l;
            let server = &log[l["request_id"].as_str().unwrap()];
            let expected = input * (k as u64 + 1) + answer * k as u64;
            assert_eq!(
                server["prompt_tokens"],
                expected,
                "session {s} turn {}",
                k + 1
            );
            assert_eq!(r["usage"]["prompt_tokens"], expected);
            if k > 0 {
                // Sent no sooner than the think time after the last answer ended.
                let prev = &lines[k - 1];
                let gap = f(&r["t_send_ms"]) - f(&prev["t_done_ms"]);
                assert!(
                    gap >= think_ms - 1.0 && gap < think_ms + 100.0,
                    "session {s} turn {}: sent {gap:.1} ms after the last answer",
                    k + 1
                );
                assert!(
                    r.get("prompt_tokens_sent").is_none(),
                    "only turn 1 is counted"
                );
            } else {
                assert_eq!(r["prompt_tokens_sent"], input);
            }
        }
    }
}

#[test]
fn a_conversation_needs_the_chat_api_and_a_valid_shape() {
    for (args, says) in [
        (
            vec!["--conversation", "turns=2", "--api", "completions"],
            "use --api chat",
        ),
        (vec!["--conversation", "turns=0"], "--conversation: turns=0"),
        (vec!["--conversation", "think=2s"], "turns=N is missing"),
        (
            vec!["--conversation", "turns=2", "--rate", "1"],
            "cannot be used with",
        ),
    ] {
        let mut a = vec!["bench", "--url", "http://127.0.0.1:9/v1"];
        a.extend(args.iter().copied());
        let o = run(&a);
        assert!(!o.status.success());
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
    }
}

/// The mock's prefix cache (`--prefix-cache`) is the ground truth for the cache
/// share the client reports: every request's `cached_tokens` as the mock logged
/// it, per turn and level; and the prefill the cache saved shows in each TTFT
/// (the mock prefills 1000 tokens/s here: a cached token is 1 ms less).
#[test]
fn the_cache_share_per_turn_is_what_the_mock_cached() {
    let mock = Mock::start(&[
        "--ttft-ms",
        "20",
        "--itl-ms",
        "2",
        "--prefill-tok-per-s",
        "1000",
        "--prefix-cache",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let (raw, out) = (dir.path().join("raw.jsonl"), dir.path().join("report.json"));
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--conversation",
        "turns=3",
        "--concurrency",
        "1",
        "--requests",
        "6",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--input-tokens",
        "32",
        "--max-tokens",
        "8",
        "--ignore-eos",
        "--raw",
        raw.to_str().unwrap(),
        "--json",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_schema("client.schema.json", &report, "the cached run's report");
    let log: HashMap<String, Value> = mock
        .log_records(8)
        .into_iter()
        .filter_map(|r| Some((r["request_id"].as_str()?.to_owned(), r)))
        .collect();
    let mut per_turn: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut ttft_off = Vec::new();
    for line in raw_requests(&raw) {
        let server = &log[line["request_id"].as_str().unwrap()];
        let cached = server["cached_tokens"].as_u64().unwrap();
        let prompt = server["prompt_tokens"].as_u64().unwrap();
        assert_eq!(
            line["usage"]["prompt_tokens_details"]["cached_tokens"], cached,
            "the client read the cache count the mock sent"
        );
        let turn = line["turn"].as_u64().unwrap();
        let e = per_turn.entry(turn).or_default();
        e.0 += prompt;
        e.1 += cached;
        if turn > 1 {
            // The earlier turns' prompts are this one's first words.
            assert!(cached >= 32 * (turn - 1), "turn {turn}: {cached} cached");
        }
        let ttft = f(&line["token_events_ms"][0]) - f(&line["t_send_ms"]);
        ttft_off.push(ttft - (20.0 + (prompt - cached) as f64));
    }
    for t in report["levels"][0]["turns"].as_array().unwrap() {
        let (prompt, cached) = per_turn[&t["turn"].as_u64().unwrap()];
        let c = &t["prompt_cache"];
        assert_eq!(
            (c["prompt_tokens"].as_u64(), c["cached_tokens"].as_u64()),
            (Some(prompt), Some(cached)),
            "{t}"
        );
    }
    let level_cache = &report["levels"][0]["prompt_cache"];
    let (p, c) = per_turn
        .values()
        .fold((0, 0), |a, v| (a.0 + v.0, a.1 + v.1));
    assert_eq!(level_cache["prompt_tokens"].as_u64(), Some(p));
    assert_eq!(level_cache["cached_tokens"].as_u64(), Some(c));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("from its prefix cache"), "{stdout}");
    // TTFT = the mock's overhead + the uncached tokens' prefill, request by request.
    assert!(
        ttft_off.iter().all(|d| d.abs() < 8.0),
        "TTFT minus (20 ms + uncached tokens x 1 ms): {ttft_off:?}"
    );
}
