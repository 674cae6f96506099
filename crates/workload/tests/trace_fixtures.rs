//! The trace readers on real excerpts of public traces (`tests/fixtures/traces/`,
//! their sources and licences in `SOURCES.md` there): Mooncake's conversation
//! trace, Azure's 2023 code trace, BurstGPT's documented sample rows.

use tokenscope_workload::trace::{Trace, TraceError, TraceFormat};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../../tests/fixtures/traces/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn mooncake_conversation_trace() {
    let t = Trace::parse(&fixture("mooncake-conversation_trace-head200.jsonl")).unwrap();
    assert_eq!(t.format, TraceFormat::Mooncake);
    assert_eq!(t.requests.len(), 200);
    let r = &t.requests[0];
    assert_eq!((r.t_ms, r.input_tokens, r.output_tokens), (0.0, 6758, 500));
    assert_eq!(r.hash_ids, (0..14).collect::<Vec<u64>>());
    // 14 blocks of 512 tokens cover 6758 (13 full, one partial).
    assert_eq!(r.input_tokens.div_ceil(t.block_tokens), 14);
    // Requests 1 and 2 share block 0 with request 0, and only it.
    assert_eq!(t.requests[1].hash_ids[0], 0);
    assert_ne!(t.requests[1].hash_ids[1], r.hash_ids[1]);
    assert!(t.requests.windows(2).all(|w| w[0].t_ms <= w[1].t_ms));
    let last = t.requests.last().unwrap();
    assert!(last.t_ms > 0.0 && t.span_ms() == last.t_ms);
    assert!(t.skipped.is_empty());
}

#[test]
fn azure_code_trace() {
    let t = Trace::parse(&fixture("azure-llm-2023-code-head200.csv")).unwrap();
    assert_eq!(t.format, TraceFormat::Azure);
    assert_eq!(t.requests.len(), 200);
    let (a, b) = (&t.requests[0], &t.requests[1]);
    assert_eq!((a.input_tokens, a.output_tokens), (4808, 10));
    assert_eq!((b.input_tokens, b.output_tokens), (3180, 8));
    // 18:17:03.9799600 then 18:17:04.0319600: 52 ms apart.
    assert!((b.t_ms - 52.0).abs() < 1e-6, "{}", b.t_ms);
    assert!(a.hash_ids.is_empty(), "no prefix information");
}

#[test]
fn burstgpt_sample() {
    let t = Trace::parse(&fixture("burstgpt-sample-rows-as-quoted.csv")).unwrap();
    assert_eq!(t.format, TraceFormat::Burstgpt);
    let got: Vec<(f64, u64, u64)> = t
        .requests
        .iter()
        .map(|r| (r.t_ms, r.input_tokens, r.output_tokens))
        .collect();
    assert_eq!(
        got,
        [(0.0, 472, 18), (40_000.0, 1087, 230), (113_000.0, 417, 276)]
    );
    // A failed request (0 response tokens) is left out and said.
    let text = fixture("burstgpt-sample-rows-as-quoted.csv") + "120,ChatGPT,300,0,300,API log\n";
    let t = Trace::parse(&text).unwrap();
    assert_eq!(t.requests.len(), 3);
    assert_eq!(t.skipped.len(), 1);
    assert!(t.skipped[0].starts_with("line 5:"), "{:?}", t.skipped);
}

#[test]
fn bad_traces_name_the_line_and_the_field() {
    let err = |text: &str| Trace::parse(text).unwrap_err().to_string();
    assert_eq!(Trace::parse("\n\n").unwrap_err(), TraceError::Empty);
    assert!(err("hello,world\n1,2\n").starts_with("not a trace this reads"));
    let e = err(
        "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 2}\n\
                 {\"timestamp\": 3, \"input_length\": 10, \"output_length\": 2}\n",
    );
    assert!(
        e.starts_with("line 2: timestamp goes backwards (3 after 5)"),
        "{e}"
    );
    let e = err("{\"timestamp\": 5, \"output_length\": 2}\n");
    assert_eq!(e, "line 1: input_length: missing");
    let e = err("{\"timestamp\": 5, \"input_length\": -3, \"output_length\": 2}\n");
    assert!(
        e.starts_with("line 1: input_length: -3 is not a count"),
        "{e}"
    );
    let e = err(
        "{\"timestamp\": 5, \"input_length\": 3, \"output_length\": 2, \"hash_ids\": [1, \"x\"]}\n",
    );
    assert!(e.starts_with("line 1: hash_ids:"), "{e}");
    let e = err("{\"timestamp\": 5, \"input_length\": 3, \"output_length\": 2}\n{oops\n");
    assert!(
        e.starts_with("line 2: (the line): not a JSON object"),
        "{e}"
    );
    let e = err("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,12,x\n");
    assert_eq!(e, "line 2: GeneratedTokens: \"x\" is not a count of tokens");
    let e = err("TIMESTAMP,ContextTokens,GeneratedTokens\nnoon,12,3\n");
    assert!(
        e.starts_with("line 2: TIMESTAMP: \"noon\" is not a time"),
        "{e}"
    );
    let e = err("Timestamp,Model,Request tokens,Response tokens\n5,GPT-4,10\n");
    assert_eq!(e, "line 2: Response tokens: missing");
    let e = err("TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.97,12\n");
    assert_eq!(e, "line 1: generatedtokens: the header has no such column");
}

#[test]
fn sharegpt_record() {
    use tokenscope_workload::dataset::{Dataset, DatasetFormat};
    let text = fixture("sharegpt-v3-record0-as-quoted.json");
    let d = Dataset::parse(&text).unwrap();
    assert_eq!(d.format, DatasetFormat::Sharegpt);
    assert_eq!(d.prompts.len(), 1);
    let p = &d.prompts[0];
    assert!(
        p.prompt
            .starts_with("Summarize the main ideas of Jeff Walker's Product Launch Formula"),
        "{}",
        p.prompt
    );
    let m = p.messages.as_ref().unwrap();
    assert_eq!(m.len(), 1, "the first human turn only");
    assert_eq!(m[0].role, "user");
    // As the real file holds it: an array of records; one without a human turn is
    // skipped and counted.
    let array = format!(
        "[{text}, {{\"id\": \"x\", \"conversations\": [{{\"from\": \"gpt\", \"value\": \"hi\"}}]}}]"
    );
    let d = Dataset::parse(&array).unwrap();
    assert_eq!((d.prompts.len(), d.skipped), (1, 1));
}
