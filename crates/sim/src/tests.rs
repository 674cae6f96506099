//! The simulator's model on exact inputs: timing, batching, faults, streams.

use super::*;
use tokenscope_measure::openai::Api;
use tokenscope_measure::sse;

/// The parameters these tests compute their expectations from, spelled out (not
/// taken from the defaults, which may change): TTFT overhead 40 ms, prefill
/// 8000 tok/s, ITL 15 ms at batch 1, +3% per extra sequence, batch 16, one token
/// per chunk, no jitter, no drift, no faults, a 32k context.
fn cfg() -> SimConfig {
    SimConfig {
        model: "sim".into(),
        ttft_ms: 40.0,
        itl_ms: 15.0,
        prefill_tok_per_s: 8000.0,
        max_batch: 16,
        step_growth: 0.03,
        jitter_ms: 0.0,
        tokens_per_chunk: 1,
        error_rate: 0.0,
        faults: vec![FaultKind::Http503],
        stall_ms: 120_000.0,
        retry_after_s: 1,
        itl_growth_ms_per_min: 0.0,
        max_context_tokens: 32_768,
        default_max_tokens: 128,
        reasoning_tokens: 0,
        prefix_cache: false,
        tool_call_share: 1.0,
        invalid_answer_share: 0.0,
        image_patch_px: 28,
        seed: 1,
    }
}

fn accept(e: &mut Engine, prompt: u64, max: u32) -> u64 {
    match e.submit(SimRequest {
        cached_tokens: 0,
        prompt_tokens: prompt,
        max_tokens: max,
    }) {
        Admission::Accepted { id } => id,
        other => panic!("{other:?}"),
    }
}

#[test]
fn cached_prompt_tokens_are_not_prefilled() {
    let mut e = Engine::new(cfg());
    let admitted = e.submit(SimRequest {
        cached_tokens: 600,
        prompt_tokens: 800,
        max_tokens: 1,
    });
    assert!(matches!(admitted, Admission::Accepted { .. }));
    // ttft 40 + (800 - 600) / 8000 s = 65 ms.
    assert_eq!(e.start_step(0.0), Some(65.0));
}

#[test]
fn single_request_timing() {
    let mut e = Engine::new(cfg());
    let id = accept(&mut e, 800, 3);
    // Admission step: ttft 40 + 800 / 8000 s = 140 ms.
    assert_eq!(e.start_step(0.0), Some(140.0));
    let em = e.finish_step();
    assert_eq!(
        em,
        vec![Emission {
            id,
            tokens: 1,
            finished: false,
            fault: None
        }]
    );
    assert_eq!(e.start_step(140.0), Some(15.0));
    e.finish_step();
    assert_eq!(e.start_step(155.0), Some(15.0));
    let em = e.finish_step();
    assert!(em[0].finished);
    assert!(!e.has_work());
    assert_eq!(e.start_step(170.0), None);
}

#[test]
fn batching_queueing_and_step_growth() {
    let mut e = Engine::new(SimConfig {
        max_batch: 2,
        ..cfg()
    });
    for _ in 0..3 {
        accept(&mut e, 0, 10);
    }
    e.start_step(0.0);
    assert_eq!((e.running(), e.waiting()), (2, 1));
    e.finish_step();
    // Two decoding: 15 * (1 + 0.03).
    let ms = e.start_step(40.0).unwrap();
    assert!((ms - 15.45).abs() < 1e-9, "{ms}");
}

#[test]
fn prefill_interferes_with_decoding() {
    let mut e = Engine::new(cfg());
    accept(&mut e, 0, 10);
    e.start_step(0.0);
    e.finish_step();
    accept(&mut e, 8000, 10);
    // 1 decoding (15) + prefill (40 + 1000).
    assert_eq!(e.start_step(40.0), Some(1055.0));
}

#[test]
fn chunks_of_several_tokens() {
    let mut e = Engine::new(SimConfig {
        tokens_per_chunk: 4,
        ..cfg()
    });
    accept(&mut e, 0, 10);
    let mut sent = Vec::new();
    let mut t = 0.0;
    while let Some(ms) = e.start_step(t) {
        t += ms;
        for em in e.finish_step() {
            sent.push((em.tokens, em.finished));
        }
    }
    assert_eq!(sent, vec![(4, false), (4, false), (2, true)]);
}

#[test]
fn faults_are_seeded_and_placed() {
    let mut e = Engine::new(SimConfig {
        error_rate: 1.0,
        faults: vec![FaultKind::Reset],
        ..cfg()
    });
    let id = accept(&mut e, 0, 10);
    let mut t = 0.0;
    let mut got = None;
    let mut tokens = 0;
    while let Some(ms) = e.start_step(t) {
        t += ms;
        for em in e.finish_step() {
            assert_eq!(em.id, id);
            tokens += em.tokens;
            if em.fault.is_some() {
                got = em.fault;
            }
        }
    }
    assert_eq!(got, Some(FaultKind::Reset));
    assert!(
        (1..=5).contains(&tokens),
        "fault after 1..=max/2 tokens, got {tokens}"
    );
    let mut e = Engine::new(SimConfig {
        error_rate: 1.0,
        faults: vec![FaultKind::Http429],
        ..cfg()
    });
    assert!(matches!(
        e.submit(SimRequest {
            cached_tokens: 0,
            prompt_tokens: 1,
            max_tokens: 1
        }),
        Admission::Fault {
            fault: FaultKind::Http429,
            ..
        }
    ));
}

#[test]
fn context_limit() {
    let mut e = Engine::new(SimConfig {
        max_context_tokens: 100,
        ..cfg()
    });
    assert!(matches!(
        e.submit(SimRequest {
            cached_tokens: 0,
            prompt_tokens: 90,
            max_tokens: 20
        }),
        Admission::ContextExceeded {
            requested: 110,
            limit: 100,
            ..
        }
    ));
}

#[test]
fn cancel_frees_the_slot() {
    let mut e = Engine::new(SimConfig {
        max_batch: 1,
        ..cfg()
    });
    let a = accept(&mut e, 0, 10);
    accept(&mut e, 0, 10);
    e.start_step(0.0);
    e.cancel(a);
    e.finish_step();
    e.start_step(10.0);
    assert_eq!(e.running(), 1);
    assert_eq!(e.waiting(), 0);
}

fn read_stream(s: &str) -> tokenscope_measure::record::RequestRecord {
    read_stream_text(s).0
}

fn read_stream_text(s: &str) -> (tokenscope_measure::record::RequestRecord, String) {
    let mut tl = tokenscope_measure::timeline::RequestTimeline::new(0.0, None).keep_text(true);
    tl.on_headers(1.0, 200, Some("text/event-stream"));
    tl.on_read(2.0, s.as_bytes());
    tl.on_end(3.0);
    let text = tl.text().to_owned();
    (tl.finish(), text)
}

#[test]
fn writer_output_is_a_valid_stream() {
    for api in Api::ALL {
        let mut w = StreamWriter::new(api, 3, "sim", true, 12, 1).with_cached(Some(4));
        let mut s = w.start();
        s += &w.tokens(1);
        s += &w.tokens(2);
        s += &w.finish();
        let r = read_stream(&s);
        assert!(r.outcome.is_ok(), "{api:?}: {:?}", r.outcome);
        assert!(r.done_received, "{api:?}: its end event");
        assert_eq!(r.token_events_ms.len(), 2, "{api:?}");
        let usage = r.usage.unwrap();
        assert_eq!(usage.completion_tokens, Some(3), "{api:?}");
        assert_eq!(usage.prompt_tokens, Some(12), "{api:?}");
        assert_eq!(usage.cached_tokens(), Some(4), "{api:?}");
    }
}

/// Reasoning then text, one chunk straddling the two: each API's own reasoning
/// events, the answer after them, the same words in every API.
#[test]
fn every_api_streams_reasoning_before_the_answer() {
    let mut words = None;
    for api in [Api::Chat, Api::Responses, Api::Messages] {
        let mut w = StreamWriter::new(api, 5, "sim", true, 7, 9).with_reasoning(3);
        let mut s = w.start();
        s += &w.tokens(2);
        s += &w.tokens(2);
        s += &w.tokens(2);
        s += &w.finish();
        let (r, text) = read_stream_text(&s);
        assert!(r.outcome.is_ok(), "{api:?}: {:?}", r.outcome);
        // Chunks: [r r] [r | t] [t t]: four token events, two of reasoning.
        assert_eq!(r.token_events_ms.len(), 4, "{api:?}");
        assert_eq!(r.reasoning_events, 2, "{api:?}");
        assert_eq!(r.usage.unwrap().completion_tokens, Some(6), "{api:?}");
        if api != Api::Messages {
            assert_eq!(r.usage.unwrap().reasoning_tokens(), Some(3), "{api:?}");
        }
        assert_eq!(*words.get_or_insert(text.clone()), text, "{api:?}");
    }
}

/// A running usage in every chunk (vLLM's continuous usage stats): the
/// timeline keeps each event's own token count, and ITL per token divides each
/// gap by it; without it, the same stream's tokens are spread evenly.
#[test]
fn a_running_usage_counts_each_events_tokens() {
    use tokenscope_measure::metrics::{MetricOptions, RequestMetrics};
    let stream = |continuous: bool| {
        let mut w = StreamWriter::new(Api::Chat, 3, "sim", true, 12, 1)
            .with_reasoning(2)
            .with_continuous_usage(continuous);
        let mut tl = tokenscope_measure::timeline::RequestTimeline::new(0.0, None);
        tl.on_headers(1.0, 200, Some("text/event-stream"));
        let start = w.start();
        tl.on_read(2.0, start.as_bytes());
        // Chunks of 1, 4 (reasoning 1 | text 3) and 2 tokens, 10 ms apart.
        for (i, n) in [1u32, 4, 2].into_iter().enumerate() {
            tl.on_read(10.0 * (i + 1) as f64, w.tokens(n).as_bytes());
        }
        tl.on_read(40.0, w.finish().as_bytes());
        tl.on_end(41.0);
        tl.finish()
    };
    let r = stream(true);
    assert_eq!(r.event_tokens, [1, 1, 3, 2]);
    let m = RequestMetrics::from_record(&r, &MetricOptions::default());
    let per_token: Vec<f64> = m.gaps.iter().map(|g| g.per_token_ms).collect();
    // Gaps 10, 0 (the chunk's two events share a read), 10 ms.
    assert_eq!(per_token, [10.0, 0.0, 10.0 / 2.0]);
    let positions: Vec<u64> = m.gaps.iter().map(|g| g.position).collect();
    assert_eq!(positions, [2, 3, 6]);
    // Without it: 7 tokens over 4 events, spread.
    let r = stream(false);
    assert!(r.event_tokens.is_empty());
    let m = RequestMetrics::from_record(&r, &MetricOptions::default());
    assert!((m.gaps[0].per_token_ms - 10.0 / 1.75).abs() < 1e-9);
}

/// A scripted tool call (after 2 reasoning tokens) and a scripted JSON answer,
/// in chunks of 1-3 tokens: each API's stream reads back as the call or the
/// text the script held, every token counted.
#[test]
fn scripted_answers_read_back_in_every_api() {
    use crate::answer::Script;
    let args = r#"{"city": "Oslo", "unit": "celsius"}"#;
    for api in [Api::Chat, Api::Responses, Api::Messages] {
        for tool in [true, false] {
            let pieces = crate::answer::pieces(args, 10);
            let script = if tool {
                Script::ToolCall {
                    name: "get_weather".into(),
                    pieces,
                }
            } else {
                Script::Json(pieces)
            };
            let mut w = StreamWriter::new(api, 3, "sim", true, 12, 1)
                .with_reasoning(2)
                .with_script(script);
            let mut tl = tokenscope_measure::timeline::RequestTimeline::new(0.0, None)
                .keep_calls(true)
                .keep_answer(true);
            tl.on_headers(1.0, 200, Some("text/event-stream"));
            tl.on_read(2.0, w.start().as_bytes());
            for (i, n) in [1u32, 3, 2, 3, 3].into_iter().enumerate() {
                tl.on_read(10.0 * (i + 1) as f64, w.tokens(n).as_bytes());
            }
            tl.on_read(90.0, w.finish().as_bytes());
            tl.on_end(91.0);
            let (calls, answer) = (tl.take_calls().unwrap(), tl.take_answer().unwrap());
            let r = tl.finish();
            assert!(r.outcome.is_ok(), "{api:?}: {:?}", r.outcome);
            assert_eq!(r.usage.unwrap().completion_tokens, Some(12), "{api:?}");
            // (The Messages API's usage does not count reasoning apart.)
            assert_eq!(r.reasoning_events, 2, "{api:?}");
            if tool {
                assert_eq!(calls.len(), 1, "{api:?}");
                assert_eq!(calls[0].name, "get_weather");
                assert_eq!(calls[0].arguments, args, "{api:?}");
                assert!(answer.is_empty());
                assert_eq!(
                    r.t_first_tool_call_ms,
                    Some(20.0),
                    "{api:?}: after the reasoning"
                );
            } else {
                assert!(calls.is_empty());
                assert_eq!(answer, args, "{api:?}");
                assert_eq!(r.t_first_tool_call_ms, None);
            }
        }
    }
}

#[test]
fn error_faults_fail_every_api() {
    for api in Api::ALL {
        let mut w = StreamWriter::new(api, 3, "sim", true, 12, 1);
        let mut s = w.start();
        s += &w.tokens(1);
        let FaultAction::SendThenEnd(bytes) = w.fault(FaultKind::ErrorEvent, 0.0) else {
            panic!()
        };
        s += &bytes;
        let r = read_stream(&s);
        assert!(
            matches!(
                r.outcome,
                tokenscope_measure::record::Outcome::Error {
                    kind: tokenscope_measure::record::ErrorKind::StreamError,
                    ..
                }
            ),
            "{api:?}: {:?}",
            r.outcome
        );
        // Cut after the tokens, without the end event: truncated.
        let mut w = StreamWriter::new(api, 3, "sim", true, 12, 1);
        let s = w.start() + &w.tokens(2);
        let r = read_stream(&s);
        assert!(
            matches!(
                r.outcome,
                tokenscope_measure::record::Outcome::Error {
                    kind: tokenscope_measure::record::ErrorKind::Truncated,
                    ..
                }
            ),
            "{api:?}: {:?}",
            r.outcome
        );
    }
}

#[test]
fn malformed_fault_is_malformed() {
    let mut w = StreamWriter::new(Api::Chat, 1, "m", true, 1, 1);
    let FaultAction::SendThenEnd(bytes) = w.fault(FaultKind::Malformed, 0.0) else {
        panic!()
    };
    let events = sse::decode_all(bytes.as_bytes()).unwrap();
    assert!(tokenscope_measure::openai::parse_event("message", &events[0].data).is_err());
}

#[test]
fn fault_lists_parse_and_print_back() {
    let faults = parse_faults(" http_503, reset ,,stall").unwrap();
    assert_eq!(
        faults,
        vec![FaultKind::Http503, FaultKind::Reset, FaultKind::Stall]
    );
    assert_eq!(faults_label(&faults), "http_503,reset,stall");
    assert_eq!(parse_faults("").unwrap(), vec![]);
    let e = parse_faults("reset,nope").unwrap_err();
    assert!(e.contains("\"nope\"") && e.contains("no_headers"), "{e}");
}

#[test]
fn fault_names_match_in_json() {
    for f in FaultKind::ALL {
        assert_eq!(serde_json::to_value(f).unwrap(), f.as_str());
    }
}

#[test]
fn validation_names_the_flag() {
    let e = SimConfig {
        error_rate: 1.5,
        ..cfg()
    }
    .validate()
    .unwrap_err();
    assert!(e.to_string().contains("error-rate = 1.5"), "{e}");
    assert!(
        SimConfig {
            itl_ms: 0.0,
            ..cfg()
        }
        .validate()
        .is_err()
    );
}
