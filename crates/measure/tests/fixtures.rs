//! Replays of real streams captured from llama.cpp's server, and the hand-written
//! variants real services send, through the decoder, the chunk parser and the
//! timeline. The socket recordings carry the time of every `recv()`, so the
//! metrics are checked against times we know independently of our decoder.

use base64::Engine as _;
use tokenscope_measure::metrics::{MetricOptions, RequestMetrics};
use tokenscope_measure::openai::{StreamItem, parse_event};
use tokenscope_measure::record::{ErrorKind, Outcome, RequestRecord};
use tokenscope_measure::sse::decode_all;
use tokenscope_measure::timeline::{HeaderVerdict, RequestTimeline};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../../tests/fixtures/sse/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Feed a whole stream as one read and end it.
fn replay_whole(bytes: &[u8]) -> RequestRecord {
    let mut tl = RequestTimeline::new(0.0, None);
    assert_eq!(
        tl.on_headers(1.0, 200, Some("text/event-stream")),
        HeaderVerdict::Stream
    );
    tl.on_read(2.0, bytes);
    tl.on_end(3.0);
    tl.finish()
}

fn contents(bytes: &[u8]) -> Vec<String> {
    decode_all(bytes)
        .unwrap()
        .iter()
        .filter_map(|e| match parse_event(&e.event, &e.data) {
            Ok(StreamItem::Chunk(c)) if c.carries_token() => Some(c.content + &c.reasoning),
            _ => None,
        })
        .collect()
}

#[test]
fn llama_server_chat_with_usage() {
    let bytes = fixture("llama-server-chat-usage.sse");
    let r = replay_whole(&bytes);
    assert_eq!(r.outcome, Outcome::Ok);
    assert!(r.done_received);
    // The first chunk is role-only with "content": null: not a token.
    assert_eq!(contents(&bytes)[0], "Say");
    let usage = r.usage.unwrap();
    assert_eq!(usage.completion_tokens, Some(10));
    assert_eq!(usage.prompt_tokens, Some(26));
    assert_eq!(r.token_events_ms.len(), 10);
    let t = r.server_timings.unwrap();
    assert_eq!(t.predicted_per_token_ms, Some(19.711));
    assert_eq!(t.prompt_ms, Some(89.905));
    assert_eq!(r.finish_reason.as_deref(), Some("length"));
    // Its prefix cache, said twice: usage.prompt_tokens_details and timings.cache_n.
    assert_eq!(usage.cached_tokens(), Some(1));
    assert_eq!(t.cache_n, Some(1));
    assert_eq!(r.cached_prompt_tokens(), Some(1));
}

#[test]
fn llama_server_completions_with_usage() {
    let r = replay_whole(&fixture("llama-server-completions-usage.sse"));
    assert_eq!(r.outcome, Outcome::Ok);
    let n = r.usage.unwrap().completion_tokens.unwrap();
    assert_eq!(r.token_events_ms.len() as u64, n);
}

#[test]
fn llama_server_without_usage_counts_events() {
    let r = replay_whole(&fixture("llama-server-chat.sse"));
    assert_eq!(r.outcome, Outcome::Ok);
    assert!(r.usage.is_none());
    let m = RequestMetrics::from_record(&r, &MetricOptions::default());
    assert!(m.tokens_estimated);
    assert_eq!(m.output_tokens, r.token_events_ms.len() as u64);
}

#[test]
fn synthetic_variants() {
    // CRLF and CR-only line ends decode to the same content as LF.
    let crlf = contents(&fixture("synthetic-chat-crlf.sse"));
    let cr = contents(&fixture("synthetic-chat-cr-only.sse"));
    assert!(!crlf.is_empty());
    assert_eq!(crlf, cr);
    // Role chunk with empty content is not a token.
    let role = fixture("synthetic-chat-role-empty-content.sse");
    let r = replay_whole(&role);
    assert_eq!(r.outcome, Outcome::Ok);
    assert!(contents(&role).iter().all(|c| !c.is_empty()));
    // Reasoning deltas are tokens.
    let reasoning = contents(&fixture("synthetic-chat-reasoning-content.sse"));
    assert_eq!(reasoning, vec!["Think", "ing.", "Answer"]);
    // Tool-call deltas are tokens (the first carries the function name).
    let r = replay_whole(&fixture("synthetic-chat-tool-calls.sse"));
    assert_eq!(r.token_events_ms.len(), 3);
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    // Comments, event/id/retry fields, data split over two lines.
    let events = decode_all(&fixture("synthetic-chat-comments-multiline.sse")).unwrap();
    assert!(events.iter().any(|e| e.data.contains('\n')), "{events:?}");
    let r = replay_whole(&fixture("synthetic-chat-comments-multiline.sse"));
    assert_eq!(r.outcome, Outcome::Ok, "{r:?}");
    assert!(!r.token_events_ms.is_empty());
    // Empty completions text is not a token.
    let empty = fixture("synthetic-completions-empty-text.sse");
    let r = replay_whole(&empty);
    assert_eq!(r.outcome, Outcome::Ok);
    assert_eq!(r.token_events_ms.len(), contents(&empty).len());
    // An error mid-stream keeps what came before.
    let r = replay_whole(&fixture("synthetic-chat-error-midstream.sse"));
    assert!(matches!(
        r.outcome,
        Outcome::Error {
            kind: ErrorKind::StreamError,
            ..
        }
    ));
    assert_eq!(r.token_events_ms.len(), 2);
    // A stream cut off without the final blank line or [DONE].
    let r = replay_whole(&fixture("synthetic-chat-truncated.sse"));
    assert!(
        matches!(
            r.outcome,
            Outcome::Error {
                kind: ErrorKind::Truncated,
                ..
            }
        ),
        "{:?}",
        r.outcome
    );
    assert!(!r.token_events_ms.is_empty());
}

/// An HTTP/1.1 response parser for the recordings: headers, then a chunked body,
/// fed incrementally; yields the body bytes of each read.
struct Http1 {
    buf: Vec<u8>,
    headers_done: bool,
    status: u16,
    content_type: Option<String>,
    /// Bytes left in the current chunk (None: expecting a size line).
    chunk_left: Option<usize>,
    /// The chunk's data is complete; its CRLF is still to skip.
    need_crlf: bool,
    ended: bool,
}

impl Http1 {
    fn new() -> Self {
        Self {
            buf: Vec::new(),
            headers_done: false,
            status: 0,
            content_type: None,
            chunk_left: None,
            need_crlf: false,
            ended: false,
        }
    }

    /// Returns (headers completed by this read, body bytes of this read).
    fn feed(&mut self, bytes: &[u8]) -> (bool, Vec<u8>) {
        self.buf.extend_from_slice(bytes);
        let mut headers_now = false;
        if !self.headers_done {
            let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                return (false, Vec::new());
            };
            let head = String::from_utf8(self.buf[..end].to_vec()).unwrap();
            self.status = head.split(' ').nth(1).unwrap().parse().unwrap();
            self.content_type = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Type: ").map(str::to_owned));
            self.buf.drain(..end + 4);
            self.headers_done = true;
            headers_now = true;
        }
        let mut body = Vec::new();
        loop {
            if self.need_crlf {
                if self.buf.len() < 2 {
                    break;
                }
                self.buf.drain(..2);
                self.need_crlf = false;
            }
            match self.chunk_left {
                None => {
                    let Some(eol) = self.buf.windows(2).position(|w| w == b"\r\n") else {
                        break;
                    };
                    let line = std::str::from_utf8(&self.buf[..eol]).unwrap().trim();
                    let size = usize::from_str_radix(line, 16).unwrap();
                    self.buf.drain(..eol + 2);
                    if size == 0 {
                        self.ended = true;
                        break;
                    }
                    self.chunk_left = Some(size);
                }
                Some(left) => {
                    if self.buf.is_empty() {
                        break;
                    }
                    let take = left.min(self.buf.len());
                    body.extend(self.buf.drain(..take));
                    if take == left {
                        self.chunk_left = None;
                        self.need_crlf = true;
                    } else {
                        self.chunk_left = Some(left - take);
                    }
                }
            }
        }
        (headers_now, body)
    }
}

struct Recv {
    t_ms: f64,
    bytes: Vec<u8>,
}

fn recording(name: &str) -> Vec<Recv> {
    let text = String::from_utf8(fixture(name)).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            Recv {
                t_ms: v["t_ms"].as_f64().unwrap(),
                bytes: base64::engine::general_purpose::STANDARD
                    .decode(v["bytes_b64"].as_str().unwrap())
                    .unwrap(),
            }
        })
        .collect()
}

/// Ground truth without our SSE decoder: these recordings use LF line ends and
/// single-line data, so each event ends at "\n\n". The time of a content event is
/// the time of the read that delivered its last byte.
fn expected_token_times(reads: &[(f64, Vec<u8>)]) -> (Vec<f64>, Option<f64>) {
    let mut body = Vec::new();
    let mut ends = Vec::new(); // (end offset of read, t)
    for (t, b) in reads {
        body.extend_from_slice(b);
        ends.push((body.len(), *t));
    }
    let text = String::from_utf8(body).unwrap();
    let mut times = Vec::new();
    let mut done_t = None;
    let mut offset = 0;
    for block in text.split_inclusive("\n\n") {
        offset += block.len();
        if !block.ends_with("\n\n") {
            continue;
        }
        let t = ends.iter().find(|(end, _)| *end >= offset).unwrap().1;
        let data = block.trim().strip_prefix("data: ").unwrap();
        if data == "[DONE]" {
            done_t = Some(t);
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(data).unwrap();
        let choice = &v["choices"][0];
        let text = choice["delta"]["content"]
            .as_str()
            .or(choice["text"].as_str())
            .unwrap_or("");
        if !text.is_empty() {
            times.push(t);
        }
    }
    (times, done_t)
}

fn replay_recording(name: &str) {
    let recvs = recording(name);
    let mut http = Http1::new();
    let mut tl = RequestTimeline::new(0.0, None);
    let mut body_reads = Vec::new();
    let mut headers_t = None;
    for r in &recvs {
        let (headers_now, body) = http.feed(&r.bytes);
        if headers_now {
            headers_t = Some(r.t_ms);
            assert_eq!(
                tl.on_headers(r.t_ms, http.status, http.content_type.as_deref()),
                HeaderVerdict::Stream
            );
        }
        if !body.is_empty() {
            tl.on_read(r.t_ms, &body);
            body_reads.push((r.t_ms, body));
        }
    }
    assert!(http.ended, "{name}: the recording ends with the last chunk");
    let t_end = recvs.last().unwrap().t_ms;
    tl.on_end(t_end);
    let rec = tl.finish();
    assert_eq!(rec.outcome, Outcome::Ok, "{name}");

    let (want_times, want_done) = expected_token_times(&body_reads);
    assert_eq!(rec.token_events_ms, want_times, "{name}: token event times");
    assert_eq!(rec.t_done_ms, want_done, "{name}: [DONE] time");
    assert_eq!(rec.t_headers_ms, headers_t);

    let m = RequestMetrics::from_record(&rec, &MetricOptions::default());
    assert_eq!(m.ttft_ms, Some(want_times[0]));
    let n = rec.usage.unwrap().completion_tokens.unwrap();
    assert_eq!(n, 24, "max_tokens 24");
    let tpot = (want_times.last().unwrap() - want_times[0]) / (n - 1) as f64;
    assert!((m.tpot_ms.unwrap() - tpot).abs() < 1e-9);
    let gaps: Vec<f64> = want_times.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(m.gaps.iter().map(|g| g.ms).collect::<Vec<_>>(), gaps);
    assert!(rec.server_timings.unwrap().predicted_per_token_ms.unwrap() > 0.0);
}

#[test]
fn socket_recording_chat() {
    replay_recording("llama-server-chat.recording.jsonl");
}

#[test]
fn socket_recording_completions() {
    replay_recording("llama-server-completions.recording.jsonl");
}

#[test]
fn socket_recording_split_at_every_byte_gives_the_same_events() {
    // The same body fed one byte per read yields the same tokens.
    let recvs = recording("llama-server-chat.recording.jsonl");
    let mut http = Http1::new();
    let mut body = Vec::new();
    for r in &recvs {
        body.extend(http.feed(&r.bytes).1);
    }
    let whole = replay_whole(&body);
    let mut tl = RequestTimeline::new(0.0, None);
    tl.on_headers(1.0, 200, Some("text/event-stream"));
    for b in &body {
        tl.on_read(2.0, std::slice::from_ref(b));
    }
    tl.on_end(3.0);
    let split = tl.finish();
    assert_eq!(whole.token_events_ms.len(), split.token_events_ms.len());
    assert_eq!(whole.usage, split.usage);
    assert_eq!(whole.outcome, split.outcome);
}

/// Feed a stream as two reads split at `at` (and end it).
fn replay_split(bytes: &[u8], at: usize) -> RequestRecord {
    let mut tl = RequestTimeline::new(0.0, None);
    tl.on_headers(1.0, 200, Some("text/event-stream"));
    tl.on_read(2.0, &bytes[..at]);
    tl.on_read(3.0, &bytes[at..]);
    tl.on_end(4.0);
    tl.finish()
}

/// How a stream's end is classified, at every split point of the body: the
/// expected outcome kind (`None`: ok) and the tokens kept.
fn assert_end(name: &str, expected: Option<ErrorKind>, tokens: usize) {
    let bytes = fixture(name);
    for at in 0..=bytes.len() {
        let r = replay_split(&bytes, at);
        let kind = match &r.outcome {
            Outcome::Ok => None,
            Outcome::Error { kind, .. } => Some(*kind),
            other => panic!("{name} split at {at}: {other:?}"),
        };
        assert_eq!(kind, expected, "{name} split at {at}: {:?}", r.outcome);
        assert_eq!(r.token_events_ms.len(), tokens, "{name} split at {at}");
    }
}

#[test]
fn a_clean_close_in_the_middle_of_an_event_is_truncated_not_malformed() {
    // Two tokens, then the server closes after `data: {...{"content": " wor`:
    // no blank line, so the last event is unfinished, not a malformed chunk.
    assert_end(
        "synthetic-chat-closed-mid-event.sse",
        Some(ErrorKind::Truncated),
        2,
    );
    // The same cut inside the [DONE] sentinel.
    assert_end("synthetic-chat-done-cut.sse", Some(ErrorKind::Truncated), 2);
    let r = replay_whole(&fixture("synthetic-chat-closed-mid-event.sse"));
    match r.outcome {
        Outcome::Error { message, .. } => {
            assert!(message.contains("middle of an event"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // A broken chunk that *is* closed by a blank line stays malformed.
    let mut tl = RequestTimeline::new(0.0, None);
    tl.on_headers(1.0, 200, Some("text/event-stream"));
    tl.on_read(2.0, b"data: {\"choices\": [ {\"delta\": \n\n");
    tl.on_end(3.0);
    assert!(matches!(
        tl.finish().outcome,
        Outcome::Error {
            kind: ErrorKind::MalformedChunk,
            ..
        }
    ));
}

#[test]
fn a_discarded_block_leaves_nothing_to_the_next_event() {
    // `event: <invalid UTF-8>` and `retry: 3000`, each closed by a blank line with
    // no data: both blocks are discarded (the standard dispatches nothing without
    // data), and the invalid-UTF-8 flag does not reach the clean events after them.
    // The retry is not the block's but the stream's: it set the reconnection time,
    // which every later event carries (WHATWG 9.2.6).
    let bytes = fixture("synthetic-chat-discarded-blocks.sse");
    let events = decode_all(&bytes).unwrap();
    assert_eq!(events.len(), 4, "{events:?}");
    assert!(
        events
            .iter()
            .all(|e| !e.invalid_utf8 && e.retry_ms == Some(3000))
    );
    assert_end("synthetic-chat-discarded-blocks.sse", None, 2);
}

#[test]
fn done_without_the_final_blank_line_completes_the_request() {
    // Servers end with `data: [DONE]` and a blank line (the llama-server fixtures
    // here; vLLM, SGLang and OpenAI send the same). A close right after the
    // sentinel's line, or after its last byte, loses nothing: the request is ok.
    for name in [
        "synthetic-chat-done-one-newline.sse",
        "synthetic-chat-done-no-newline.sse",
    ] {
        assert_end(name, None, 2);
        let r = replay_whole(&fixture(name));
        assert!(r.done_received, "{name}");
        assert_eq!(r.finish_reason.as_deref(), Some("stop"), "{name}");
    }
    let real = fixture("llama-server-chat-usage.sse");
    assert!(real.ends_with(b"data: [DONE]\n\n"));
}

/// The Responses API from llama-server: text deltas, `response.completed` with
/// its usage (OpenAI's names) and llama.cpp's timings beside it, no `[DONE]`.
#[test]
fn llama_server_responses_api() {
    let bytes = fixture("llama-server-responses.sse");
    let r = replay_whole(&bytes);
    assert_eq!(r.outcome, Outcome::Ok);
    assert!(r.done_received, "response.completed ends the stream");
    let usage = r.usage.unwrap();
    assert_eq!(usage.prompt_tokens, Some(50));
    assert_eq!(usage.completion_tokens, Some(10));
    assert_eq!(usage.cached_tokens(), Some(0));
    // One token per delta event (llama-server sends one token a delta).
    assert_eq!(r.token_events_ms.len(), 10);
    assert_eq!(contents(&bytes).concat(), "Name a colour of the sky.<|im_");
    assert_eq!(r.finish_reason.as_deref(), Some("completed"));
    assert_eq!(r.server_timings.unwrap().predicted_n, Some(10));
}

/// The Messages API from llama-server: the prompt's usage in `message_start`
/// (`input_tokens` less the cached ones), the output's in `message_delta`.
#[test]
fn llama_server_messages_api() {
    let bytes = fixture("llama-server-messages.sse");
    let r = replay_whole(&bytes);
    assert_eq!(r.outcome, Outcome::Ok);
    assert!(r.done_received, "message_stop ends the stream");
    let usage = r.usage.unwrap();
    assert_eq!(
        usage.prompt_tokens,
        Some(50),
        "5 input + 45 read from the cache"
    );
    assert_eq!(usage.cached_tokens(), Some(45));
    assert_eq!(usage.completion_tokens, Some(10));
    assert_eq!(r.token_events_ms.len(), 10);
    assert_eq!(r.finish_reason.as_deref(), Some("max_tokens"));
    assert_eq!(r.cached_prompt_tokens(), Some(45));
}

/// Reasoning (summary and raw), a function call's name and argument deltas, and
/// the answer text: tokens of each kind, the answer's first after the reasoning.
#[test]
fn responses_reasoning_and_function_calls() {
    let bytes = fixture("synthetic-responses-reasoning-tool.sse");
    let mut tl = RequestTimeline::new(0.0, None);
    tl.on_headers(1.0, 200, Some("text/event-stream"));
    let events: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    // One read per line, at 10 ms each: every event's time is known.
    for (i, line) in events.iter().enumerate() {
        tl.on_read(10.0 * i as f64, line);
    }
    tl.on_end(1000.0);
    let r = tl.finish();
    assert_eq!(r.outcome, Outcome::Ok);
    // 2 reasoning deltas, the call's name, 2 non-empty argument deltas, 1 text.
    assert_eq!(r.token_events_ms.len(), 6);
    assert_eq!(r.reasoning_events, 2);
    // The first answer token is the function call's name (line 14: its data).
    let first_reasoning = r.token_events_ms[0];
    assert!(r.t_first_answer_ms.unwrap() > first_reasoning);
    let usage = r.usage.unwrap();
    assert_eq!(usage.reasoning_tokens(), Some(11));
    assert_eq!(usage.cached_tokens(), Some(64));
    assert_eq!(usage.prompt_tokens, Some(81));
    assert_eq!(r.finish_reason.as_deref(), Some("completed"));
}

#[test]
fn messages_thinking_and_tool_use() {
    let bytes = fixture("synthetic-messages-thinking-tool.sse");
    let r = replay_whole(&bytes);
    assert_eq!(r.outcome, Outcome::Ok);
    // thinking, text, tool_use's name, one non-empty input_json_delta; ping and
    // signature_delta carry nothing.
    assert_eq!(r.token_events_ms.len(), 4);
    assert_eq!(r.reasoning_events, 1);
    let usage = r.usage.unwrap();
    assert_eq!(usage.prompt_tokens, Some(2060));
    assert_eq!(usage.cached_tokens(), Some(2048));
    assert_eq!(
        usage.completion_tokens,
        Some(89),
        "message_delta's count, not message_start's placeholder"
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_use"));
}

#[test]
fn errors_in_the_newer_apis_streams() {
    for (name, code, message) in [
        (
            "synthetic-responses-error.sse",
            "server_error",
            "The model is overloaded",
        ),
        (
            "synthetic-messages-error.sse",
            "overloaded_error",
            "Overloaded",
        ),
    ] {
        let r = replay_whole(&fixture(name));
        assert_eq!(r.token_events_ms.len(), 1, "{name}");
        match &r.outcome {
            Outcome::Error { kind, message: m } => {
                assert_eq!(*kind, ErrorKind::StreamError, "{name}");
                assert!(m.contains(code) && m.contains(message), "{name}: {m}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // Without `event:` lines (a proxy dropped them) the data's `type` says the API.
    let bytes = String::from_utf8(fixture("synthetic-messages-thinking-tool.sse"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("event:"))
        .collect::<Vec<_>>()
        .join("\n");
    let r = replay_whole(bytes.as_bytes());
    assert_eq!(r.outcome, Outcome::Ok);
    assert_eq!(r.token_events_ms.len(), 4);
    assert_eq!(r.usage.unwrap().completion_tokens, Some(89));
}

/// A stream of the newer APIs cut before its end event is truncated, even after
/// the Messages API's `message_delta` said why it stopped.
#[test]
fn newer_apis_without_their_end_event_are_truncated() {
    for name in ["llama-server-responses.sse", "llama-server-messages.sse"] {
        let text = String::from_utf8(fixture(name)).unwrap();
        let end = if name.contains("responses") {
            "event: response.completed"
        } else {
            "event: message_stop"
        };
        let cut = &text[..text.find(end).unwrap()];
        let r = replay_whole(cut.as_bytes());
        assert!(
            matches!(
                &r.outcome,
                Outcome::Error {
                    kind: ErrorKind::Truncated,
                    ..
                }
            ),
            "{name}: {:?}",
            r.outcome
        );
        assert_eq!(r.token_events_ms.len(), 10, "{name}");
        if name.contains("messages") {
            assert_eq!(r.finish_reason.as_deref(), Some("max_tokens"));
        }
    }
    // A Responses event whose `delta` is not text, of a kind not counted, is
    // passed over, not a malformed chunk.
    let odd = "event: response.mcp_call_arguments.delta\ndata: {\"type\":\"response.mcp_call_arguments.delta\",\"delta\":{\"a\":1}}\n\n";
    let text = String::from_utf8(fixture("llama-server-responses.sse")).unwrap();
    let r = replay_whole(format!("{odd}{text}").as_bytes());
    assert_eq!(r.outcome, Outcome::Ok);
}

#[test]
fn newer_apis_streams_read_the_same_at_every_split_point() {
    assert_end("llama-server-responses.sse", None, 10);
    assert_end("llama-server-messages.sse", None, 10);
}
