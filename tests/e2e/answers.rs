//! Tool calls and JSON answers (`--tools`, `--json-schema`) against the mock's
//! log: every request's calls and validity are what the mock says it served,
//! the levels' counts add them up, and the time to the first tool-call delta
//! is the server's within the fidelity bounds.

use std::collections::HashMap;

use crate::common::{Mock, f, median, raw_requests, run, text};

/// Bench `args` against `mock` with a raw file; the report and the measured
/// requests paired with the log's record of each.
fn bench(
    mock: &Mock,
    args: &[&str],
) -> (
    serde_json::Value,
    Vec<(serde_json::Value, serde_json::Value)>,
) {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.jsonl");
    let out = dir.path().join("report.json");
    let mut all = vec![
        "bench",
        "--url",
        &mock.url,
        "--rounds",
        "1",
        "--max-tokens",
        "24",
        "--quiet",
        "--raw",
        raw.to_str().unwrap(),
        "--json",
        out.to_str().unwrap(),
    ];
    all.extend(args);
    let o = run(&all);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
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
    let pairs = measured
        .iter()
        .map(|r| {
            let id = r["request_id"].as_str().unwrap();
            let s = by_id
                .get(id)
                .unwrap_or_else(|| panic!("{id} not in the log"));
            (r.clone(), (*s).clone())
        })
        .collect();
    (report, pairs)
}

/// Tools offered and the model left to decide (the mock calls in half of its
/// answers, a quarter of the calls without a required argument): in chat and
/// the Responses and Messages APIs, each request's calls and validity are the
/// log's, and the first tool-call delta arrives when the server sent it.
#[test]
fn tool_calls_are_what_the_mock_served_in_every_api() {
    let mock = Mock::start(&[
        "--tool-call-share",
        "0.5",
        "--invalid-answer-share",
        "0.25",
        "--itl-ms",
        "6",
        "--ttft-ms",
        "15",
    ]);
    for api in ["chat", "responses", "messages"] {
        crate::remeasured(api, || tool_calls_run(&mock, api));
    }
    // A tool the model must call: every answer calls one.
    let (report, pairs) = bench(
        &mock,
        &[
            "--tools",
            "builtin",
            "--tool-choice",
            "required",
            "--requests",
            "8",
        ],
    );
    assert!(
        pairs
            .iter()
            .all(|(_, s)| s["answer"]["kind"] == "tool_call")
    );
    assert_eq!(report["levels"][0]["answers"]["called_tool"], 8);
    assert_eq!(report["config"]["answer"]["tool_choice"], "required");
    crate::common::assert_schema("client.schema.json", &report, "a run with tools");
    // The tool named: every answer calls it, and the report says which.
    let (report, pairs) = bench(
        &mock,
        &[
            "--tools",
            "builtin",
            "--tool-choice",
            "search_flights",
            "--requests",
            "8",
        ],
    );
    assert!(
        pairs
            .iter()
            .all(|(_, s)| s["answer"]["tool"] == "search_flights")
    );
    assert_eq!(report["config"]["answer"]["tool_choice"], "search_flights");
    crate::common::assert_schema("client.schema.json", &report, "a named tool");
}

/// One run of `api` with the built-in tools: its exact checks asserted, the
/// time to the first tool call `Err` when off the server's.
fn tool_calls_run(mock: &Mock, api: &str) -> Result<(), String> {
    let (report, pairs) = bench(
        mock,
        &[
            "--api",
            api,
            "--tools",
            "builtin",
            "--concurrency",
            "4",
            "--requests",
            "40",
        ],
    );
    assert_eq!(pairs.len(), 40);
    assert_eq!(
        report["config"]["answer"]["tools"],
        serde_json::json!(["get_weather", "search_flights"])
    );
    let (mut called, mut valid, mut checked) = (0, 0, 0);
    let (mut client, mut server) = (Vec::new(), Vec::new());
    for (r, s) in &pairs {
        let id = &r["request_id"];
        let truth = &s["answer"];
        let answer = serde_json::json!({
            "tool_calls": r.get("tool_calls").cloned().unwrap_or(serde_json::json!(0)),
            "valid": r.get("answer_valid"),
            "problem": r.get("answer_problem"),
        });
        assert_eq!(s["api"], api);
        if truth["kind"] == "tool_call" {
            called += 1;
            checked += 1;
            assert_eq!(answer["tool_calls"], 1, "{id}: {answer} vs {truth}");
            assert_eq!(answer["valid"], truth["valid"], "{id}: {answer} vs {truth}");
            if truth["valid"] == true {
                valid += 1;
            } else {
                // The tool's first required argument left out, said
                // without the arguments' values.
                let tool = truth["tool"].as_str().unwrap();
                assert_eq!(answer["problem"], format!("{tool}: /required"), "{id}");
            }
            let first = f(&r["t_first_tool_call_ms"]);
            assert_eq!(
                first,
                f(&r["token_events_ms"][0]),
                "{id}: the call came first"
            );
            client.push(first - f(&r["t_send_ms"]));
            server.push(f(&s["chunk_times_ms"][0]) - f(&s["t_received_ms"]));
        } else {
            assert_eq!(truth["kind"], "text", "{id}");
            assert_eq!(answer["tool_calls"], 0, "{id}");
            assert!(
                r.get("answer_valid").is_none(),
                "{id}: nothing to check: {answer}"
            );
            assert!(r.get("t_first_tool_call_ms").is_none(), "{id}");
        }
    }
    assert!(
        (8..=32).contains(&called),
        "{api}: {called} of 40 called at 0.5"
    );
    assert!(valid < called, "{api}: some calls were made invalid");
    let level = &report["levels"][0];
    let a = &level["answers"];
    assert_eq!(a["requests"], 40, "{api}: {a}");
    assert_eq!(a["called_tool"], called, "{api}: {a}");
    assert_eq!(a["tool_calls"], called, "{api}: {a}");
    assert_eq!(a["checked"], checked, "{api}: {a}");
    assert_eq!(a["valid"], valid, "{api}: {a}");
    let m = &level["metrics"]["time_to_first_tool_call_ms"];
    assert_eq!(m["count"], called, "{api}");
    let (c, s) = (median(&client), median(&server));
    assert!(
        c >= s - 0.05,
        "{api}: time to the first tool call p50 {c:.2} ms, before the server's {s:.2} ms"
    );
    if c - s > 2.0 {
        return Err(format!(
            "{api}: time to the first tool call p50 {c:.2} ms, the server's {s:.2} ms (> 2 ms apart)"
        ));
    }
    eprintln!("{api}: first tool call p50 client {c:.2} ms, server {s:.2} ms ({called} calls)");
    Ok(())
}

/// A JSON schema asked of every answer: each answer's validity is the log's,
/// in each API's field (response_format, text.format, output_format); the
/// text report says it; a schema that is not one, and an API without the
/// field, are refused before the run.
#[test]
fn json_answers_are_checked_against_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("person.json");
    std::fs::write(
        &schema,
        r#"{"type": "object", "properties": {"name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0, "maximum": 120}},
            "required": ["name", "age"], "additionalProperties": false}"#,
    )
    .unwrap();
    let schema = schema.to_str().unwrap();
    let mock = Mock::start(&["--invalid-answer-share", "0.3", "--itl-ms", "2"]);
    for api in ["chat", "responses", "messages"] {
        let (report, pairs) = bench(
            &mock,
            &[
                "--api",
                api,
                "--json-schema",
                schema,
                "--concurrency",
                "4",
                "--requests",
                "30",
            ],
        );
        let mut valid = 0;
        for (r, s) in &pairs {
            assert_eq!(s["answer"]["kind"], "json", "{s}");
            assert_eq!(
                r["answer_valid"], s["answer"]["valid"],
                "{}",
                r["request_id"]
            );
            valid += u64::from(s["answer"]["valid"] == true);
        }
        assert!(valid < 30 && valid > 0, "{api}: {valid}");
        let a = &report["levels"][0]["answers"];
        assert_eq!(
            (a["checked"].as_u64(), a["valid"].as_u64()),
            (Some(30), Some(valid)),
            "{api}"
        );
        assert_eq!(a["problems"][0]["problem"], "/required", "{api}: {a}");
        assert_eq!(report["config"]["answer"]["json_schema"], true);
        crate::common::assert_schema("client.schema.json", &report, api);
    }
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--json-schema",
        schema,
        "--requests",
        "4",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("what the answers were:"), "{out}");

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"type": "no-such-type"}"#).unwrap();
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--json-schema",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("--json-schema: not a JSON schema"),
        "{}",
        text(&o)
    );
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--api",
        "completions",
        "--tools",
        "builtin",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("--api chat, responses or messages"),
        "{}",
        text(&o)
    );
    // Answers made a given length, and tool calls in a conversation's
    // history, cannot be checked: refused before the run, naming why.
    for (args, says) in [
        (
            &["--json-schema", schema, "--ignore-eos"][..],
            "--json-schema: not with --ignore-eos",
        ),
        (
            &["--tools", "builtin", "--min-tokens", "16"][..],
            "--tools: not with --min-tokens",
        ),
        (
            &["--tools", "builtin", "--conversation", "turns=2"][..],
            "--tools: not with --conversation",
        ),
    ] {
        let mut argv = vec!["bench", "--url", &mock.url];
        argv.extend_from_slice(args);
        let o = run(&argv);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
    }
}

/// A mixed workload's classes (a prompts file's `class`), each held to its own
/// SLOs (`--slo-class`): each request carries its prompt's class (the server's
/// log has its prompt's length), and each level's per-class counts are those
/// of its requests' own values against their class's bounds.
#[test]
fn goodput_per_class_holds_each_class_to_its_own_slos() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("mixed.jsonl");
    let long = vec!["word"; 200].join(" ");
    let mut lines = String::new();
    for i in 0..6 {
        lines.push_str(&format!(
            "{{\"prompt\": \"hello there {i}\", \"class\": \"chat\", \"max_tokens\": 8}}\n"
        ));
        lines.push_str(&format!(
            "{{\"prompt\": \"{long} {i}\", \"class\": \"summarize\", \"max_tokens\": 24}}\n"
        ));
    }
    lines.push_str("{\"prompt\": \"no class here\"}\n");
    std::fs::write(&prompts, lines).unwrap();
    let prompts = prompts.to_str().unwrap();
    let mock = Mock::start(&[
        "--itl-ms",
        "2",
        "--ttft-ms",
        "10",
        "--prefill-tok-per-s",
        "4000",
    ]);
    let (report, pairs) = bench(
        &mock,
        &[
            "--prompts",
            prompts,
            "--concurrency",
            "2",
            "--requests",
            "26",
            "--slo",
            "e2e_ms:p50<=100000",
            "--slo-class",
            "chat=ttft_ms:p95<=100000",
            "--slo-class",
            "summarize=ttft_ms:p50<=1",
        ],
    );
    let mut per_class: HashMap<String, (u64, u64)> = HashMap::new();
    for (r, s) in &pairs {
        let class = r["class"].as_str().unwrap_or("-").to_owned();
        let prompt = s["prompt_tokens"].as_u64().unwrap();
        match class.as_str() {
            "chat" => assert!(prompt < 10, "{}: {prompt}", r["request_id"]),
            "summarize" => assert!(prompt > 200, "{}: {prompt}", r["request_id"]),
            _ => assert!(r.get("class").is_none()),
        }
        let e = per_class.entry(class.clone()).or_default();
        e.0 += 1;
        // chat: every TTFT is under 100 s; summarize: none is under 1 ms.
        e.1 += u64::from(class != "summarize");
    }
    let level = &report["levels"][0];
    let classes = level["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 2, "{level}");
    for c in classes {
        let name = c["class"].as_str().unwrap();
        let (sent, met) = per_class[name];
        assert_eq!(
            (c["sent"].as_u64(), c["met"].as_u64()),
            (Some(sent), Some(met)),
            "{c}"
        );
        assert!(sent >= 10, "{name}: {sent}");
    }
    assert_eq!(classes[1]["slos"], serde_json::json!(["ttft_ms:p50<=1"]));
    // The level's goodput holds each request to its class's SLOs (the
    // unclassed ones to --slo).
    let met: u64 = per_class.values().map(|v| v.1).sum();
    let fraction = level["goodput_fraction"].as_f64().unwrap();
    assert!((fraction - met as f64 / 26.0).abs() < 1e-9, "{fraction}");
    crate::common::assert_schema("client.schema.json", &report, "classes");

    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--prompts",
        prompts,
        "--slo-class",
        "code=ttft_ms<=5",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("(theirs: chat, summarize)"),
        "{}",
        text(&o)
    );
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--slo-class",
        "chat=ttft_ms<=5",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--prompts file"), "{}", text(&o));
}
