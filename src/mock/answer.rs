//! One request's answer: the SSE stream fed by the engine's emissions (faults
//! performed where the model placed them), or the whole answer at once for a
//! non-streaming request.

use std::time::Duration;

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use tokenscope_measure::openai::{Api, ServerTimings};
use tokenscope_sim::{FaultAction, StreamWriter};
use tokio::sync::mpsc;

use super::engine::Step;
use super::log::LogRecord;
use super::state::{LogOnDrop, MockState};

struct StreamState {
    rx: mpsc::UnboundedReceiver<Step>,
    /// A step already received (the head was held for it).
    first: Option<Step>,
    writer: StreamWriter,
    guard: LogOnDrop,
    started: bool,
    done: bool,
    reset_next: bool,
    /// Hold the stream this long before the next chunk (a `stall` fault).
    stall_next: Option<f64>,
    stall_ms: f64,
}

/// How long a reset waits after the last chunk, so the HTTP layer flushes that
/// chunk before the connection is cut (a reset *after* k tokens, not during).
const RESET_AFTER_MS: u64 = 30;

pub(super) fn sse_stream(
    s: MockState,
    rx: mpsc::UnboundedReceiver<Step>,
    first: Option<Step>,
    writer: StreamWriter,
    log: LogRecord,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> {
    let stall_ms = s.cfg.stall_ms;
    let st = StreamState {
        rx,
        first,
        writer,
        guard: LogOnDrop {
            state: s,
            log: Some(log),
        },
        started: false,
        done: false,
        reset_next: false,
        stall_next: None,
        stall_ms,
    };
    stream::unfold(st, |mut st| async move {
        if st.done {
            return None;
        }
        if st.reset_next {
            st.done = true;
            // Pending here lets hyper flush the chunk before; then cut the connection.
            tokio::time::sleep(Duration::from_millis(RESET_AFTER_MS)).await;
            if let Some(mut log) = st.guard.log.take() {
                log.t_end_ms = st.guard.state.clock.now_ms();
                st.guard.state.write_log(log);
            }
            return Some((
                Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "simulated reset",
                )),
                st,
            ));
        }
        if let Some(ms) = st.stall_next.take() {
            tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)).await;
        }
        // None: the engine dropped us; the body ends without [DONE].
        let Step { em, started_ms } = match st.first.take() {
            Some(step) => step,
            None => st.rx.recv().await?,
        };
        if let Some(log) = st.guard.log.as_mut() {
            log.t_scheduled_ms.get_or_insert(started_ms);
        }
        let mut out = String::new();
        if !st.started {
            out.push_str(&st.writer.start());
            st.started = true;
        }
        out.push_str(&st.writer.tokens(em.tokens));
        if let Some(fault) = em.fault {
            if let Some(log) = st.guard.log.as_mut() {
                log.fault = Some(fault);
                log.outcome = "fault";
            }
            match st.writer.fault(fault, st.stall_ms) {
                FaultAction::SendThenEnd(bytes) => {
                    out.push_str(&bytes);
                    st.done = true;
                }
                FaultAction::Reset => st.reset_next = true,
                FaultAction::Stall { ms } => st.stall_next = Some(ms),
            }
        }
        // Server truth: the moment the chunk is handed to the HTTP layer.
        let t = st.guard.state.clock.now_ms();
        if em.fault.is_none() && em.finished {
            let timings = st
                .guard
                .log
                .as_ref()
                .filter(|_| st.guard.state.timings)
                .map(|log| {
                    let first = log.chunk_times_ms.first().copied().unwrap_or(t);
                    ServerTimings {
                        prompt_n: Some(log.prompt_tokens),
                        prompt_ms: Some(first - log.t_received_ms),
                        predicted_n: Some(st.writer.sent_tokens()),
                        predicted_ms: Some(t - first),
                        ..ServerTimings::default()
                    }
                });
            out.push_str(&st.writer.finish_with(timings));
            st.done = true;
        }
        if let Some(log) = st.guard.log.as_mut() {
            if em.tokens > 0 {
                log.chunk_times_ms.push(t);
                log.chunk_tokens.push(em.tokens);
            }
            log.completion_tokens = st.writer.sent_tokens();
        }
        if st.done
            && let Some(mut log) = st.guard.log.take()
        {
            log.t_end_ms = t;
            st.guard.state.write_log(log);
        }
        Some((Ok(Bytes::from(out)), st))
    })
}

pub(super) async fn non_streaming(
    s: MockState,
    api: Api,
    id: u64,
    mut rx: mpsc::UnboundedReceiver<Step>,
    mut log: LogRecord,
    prompt_tokens: u64,
    // A chat request that asked for log-probabilities: its prompt, top-k and
    // whether it asked for tokens by id.
    lm: Option<(&str, usize, bool)>,
) -> Response {
    let mut writer = StreamWriter::new(api, id, &s.cfg.model, false, prompt_tokens, s.cfg.seed);
    let mut tokens = 0u64;
    let mut text_events = String::new();
    // Whether the request ever ran beside others (a batch of more than one).
    let mut batched = false;
    while let Some(Step { em, started_ms }) = rx.recv().await {
        log.t_scheduled_ms.get_or_insert(started_ms);
        batched |= s.gauges.running.load(std::sync::atomic::Ordering::Relaxed) > 1;
        text_events.push_str(&writer.tokens(em.tokens));
        tokens += u64::from(em.tokens);
        if em.finished || em.fault.is_some() {
            break;
        }
    }
    // Rebuild the text from the chunks the writer made (same words as streaming).
    let text: String = tokenscope_measure::sse::decode_all(text_events.as_bytes())
        .unwrap_or_default()
        .iter()
        .filter_map(
            |e| match tokenscope_measure::openai::parse_event(&e.event, &e.data) {
                Ok(tokenscope_measure::openai::StreamItem::Chunk(c)) => Some(c.content),
                _ => None,
            },
        )
        .collect();
    // Asked for log-probabilities: the toy model's answer of the same length
    // (a completion: the prompt echoed and scored, then the answer).
    let serve = s.lm.in_batch(batched);
    let (text, logprobs) = match (lm, api) {
        (Some((prompt, k, _)), Api::Completions) => {
            tokenscope_quality::toy_serve::echo(&serve, prompt, tokens as usize, k)
        }
        (Some((prompt, k, by_id)), Api::Chat) => {
            tokenscope_quality::toy_serve::answer(&serve, prompt, tokens as usize, k, by_id)
        }
        _ => (text, serde_json::Value::Null),
    };
    log.completion_tokens = tokens;
    log.t_end_ms = s.clock.now_ms();
    log.t_headers_ms = Some(log.t_end_ms);
    let cached = log.cached_tokens;
    s.write_log(log);
    let mut usage = serde_json::json!({"prompt_tokens": prompt_tokens, "completion_tokens": tokens, "total_tokens": prompt_tokens + tokens});
    if s.cfg.prefix_cache {
        usage["prompt_tokens_details"] = serde_json::json!({ "cached_tokens": cached });
    }
    let body = match api {
        Api::Chat => serde_json::json!({
            "id": format!("chatcmpl-{id}"), "object": "chat.completion", "created": 0, "model": s.cfg.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": logprobs, "finish_reason": "length"}],
            "usage": usage,
        }),
        Api::Completions => serde_json::json!({
            "id": format!("cmpl-{id}"), "object": "text_completion", "created": 0, "model": s.cfg.model,
            "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length"}],
            "usage": usage,
        }),
        Api::Responses => serde_json::json!({
            "id": format!("resp_{id}"), "object": "response", "created_at": 0, "model": s.cfg.model,
            "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "message", "id": format!("msg_{id}"), "status": "incomplete", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "usage": {"input_tokens": prompt_tokens, "output_tokens": tokens, "total_tokens": prompt_tokens + tokens,
                "input_tokens_details": {"cached_tokens": if s.cfg.prefix_cache { cached } else { 0 }}},
        }),
        Api::Messages => serde_json::json!({
            "id": format!("msg_{id}"), "type": "message", "role": "assistant", "model": s.cfg.model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "max_tokens", "stop_sequence": null,
            "usage": {"input_tokens": prompt_tokens - cached, "cache_read_input_tokens": cached, "output_tokens": tokens},
        }),
    };
    axum::Json(body).into_response()
}
