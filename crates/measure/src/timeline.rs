//! The life of one request, as the client saw it: every timestamp the metrics need,
//! recorded from the transport's reads.
//!
//! The transport owns the clock. It stamps each body read the moment it arrives and
//! hands `(t, bytes)` to [`RequestTimeline::on_read`]; the SSE decoding and JSON
//! parsing happen after the stamp, so they never move a timestamp. Every event
//! completed by one read shares that read's timestamp (counted in
//! [`RequestRecord::shared_read_events`]).
//!
//! The same code serves the native client (reqwest), the page (`fetch`) and the
//! page's built-in simulator.

use crate::openai::{self, StreamItem};
use crate::record::{ConnectionUse, ErrorKind, Outcome, PaintMethod, RequestRecord, TimeoutPhase};
use crate::sse;

/// How long a non-2xx or non-SSE body may be before the rest is ignored.
pub const MAX_ERROR_BODY_BYTES: usize = 4096;

/// What the transport should do after the headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderVerdict {
    /// A 2xx event stream: feed the body with [`RequestTimeline::on_read`].
    Stream,
    /// An error answer (non-2xx, or not an event stream): read up to
    /// [`MAX_ERROR_BODY_BYTES`] into [`RequestTimeline::on_error_body`], then call
    /// [`RequestTimeline::on_end`].
    ErrorBody,
}

/// What one read changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadSummary {
    /// Content-bearing events this read completed.
    pub token_events: u32,
    /// This read carried the request's first token.
    pub first_token: bool,
    /// The request is finished (`[DONE]`, an error): stop reading.
    pub finished: bool,
}

/// Builds a [`RequestRecord`] from transport callbacks.
#[derive(Debug)]
pub struct RequestTimeline {
    record: RequestRecord,
    decoder: sse::Decoder,
    events: Vec<sse::Event>,
    /// Set once the outcome is decided (first error wins).
    decided: bool,
    error_body: Option<Vec<u8>>,
    keep_text: bool,
    /// The kept text includes the reasoning.
    text_reasoning: bool,
    /// The answer's text, when kept.
    answer: Option<String>,
    text: String,
    /// The stream is of an API whose complete stream ends with its own end
    /// event (`message_stop`, `response.completed`).
    needs_end_event: bool,
    /// The running `usage.completion_tokens` the content events carried so
    /// far, while every one of them carried it (`None` once one did not).
    running_tokens: Option<u64>,
    /// The tool calls' deltas put together, when kept.
    calls: Option<crate::tools::ToolCalls>,
    /// Where each content event's text ends in `text` (bytes), when kept.
    event_ends: Vec<usize>,
}

impl RequestTimeline {
    /// Start a request sent at `t_send_ms` (and scheduled at `t_scheduled_ms` in rate mode).
    pub fn new(t_send_ms: f64, t_scheduled_ms: Option<f64>) -> Self {
        Self {
            record: RequestRecord::sent_at(t_send_ms, t_scheduled_ms),
            decoder: sse::Decoder::new(),
            events: Vec::new(),
            decided: false,
            error_body: None,
            keep_text: false,
            text_reasoning: true,
            text: String::new(),
            answer: None,
            running_tokens: Some(0),
            needs_end_event: false,
            calls: None,
            event_ends: Vec::new(),
        }
    }

    /// Leave the reasoning out of the kept text (the page hides it).
    pub fn hide_reasoning(mut self, hide: bool) -> Self {
        self.text_reasoning = !hide;
        self
    }

    /// Keep the answer's text (`content`, without reasoning): a conversation's
    /// next turn sends it back ([`RequestTimeline::take_answer`]).
    pub fn keep_answer(mut self, keep: bool) -> Self {
        self.answer = keep.then(String::new);
        self
    }

    /// The answer's text so far (when [`RequestTimeline::keep_answer`] is on).
    pub fn take_answer(&mut self) -> Option<String> {
        self.answer.take()
    }

    /// Put the answer's tool calls together from their deltas
    /// ([`RequestTimeline::take_calls`]).
    pub fn keep_calls(mut self, keep: bool) -> Self {
        self.calls = keep.then(crate::tools::ToolCalls::default);
        self
    }

    /// The answer's tool calls (when [`RequestTimeline::keep_calls`] is on).
    pub fn take_calls(&mut self) -> Option<Vec<crate::tools::ToolCall>> {
        self.calls.take().map(crate::tools::ToolCalls::into_calls)
    }

    /// Keep the generated text (the page shows it as it streams).
    pub fn keep_text(mut self, keep: bool) -> Self {
        self.keep_text = keep;
        self
    }

    /// Cap the decoder's event size (default [`sse::DEFAULT_MAX_EVENT_BYTES`]).
    pub fn max_event_bytes(mut self, bytes: usize) -> Self {
        self.decoder = sse::Decoder::with_max_event_bytes(bytes);
        self
    }

    /// The generated text so far (only when [`RequestTimeline::keep_text`] is on).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Where each content event's text ends in [`RequestTimeline::text`], in
    /// bytes (only when [`RequestTimeline::keep_text`] is on): a tokenizer's
    /// tokens of the text, by where they start, are each event's.
    pub fn text_event_ends(&self) -> &[usize] {
        &self.event_ends
    }

    /// The record so far.
    pub fn record(&self) -> &RequestRecord {
        &self.record
    }

    /// The connection the request went over and the HTTP version of the answer,
    /// as the transport saw them (set when the response head arrives).
    pub fn on_transport(&mut self, protocol: Option<String>, connection: Option<ConnectionUse>) {
        self.record.protocol = protocol;
        self.record.connection = connection;
    }

    /// Whether the outcome is already decided (an error was seen, or `[DONE]`).
    pub fn is_finished(&self) -> bool {
        self.decided || self.record.done_received
    }

    /// Response status and headers arrived.
    pub fn on_headers(
        &mut self,
        t_ms: f64,
        status: u16,
        content_type: Option<&str>,
    ) -> HeaderVerdict {
        self.record.t_headers_ms = Some(t_ms);
        self.record.status = Some(status);
        if !(200..300).contains(&status) {
            self.error_body = Some(Vec::new());
            return HeaderVerdict::ErrorBody;
        }
        // A missing content type is given the benefit of the doubt.
        let is_sse = content_type.is_none_or(|ct| {
            ct.to_ascii_lowercase()
                .split(';')
                .next()
                .is_some_and(|m| m.trim() == "text/event-stream")
        });
        if is_sse {
            HeaderVerdict::Stream
        } else {
            self.error_body = Some(Vec::new());
            HeaderVerdict::ErrorBody
        }
    }

    /// Body bytes of an error answer (see [`HeaderVerdict::ErrorBody`]).
    pub fn on_error_body(&mut self, t_ms: f64, bytes: &[u8]) {
        self.note_bytes(t_ms, bytes.len());
        if let Some(body) = &mut self.error_body {
            let room = MAX_ERROR_BODY_BYTES.saturating_sub(body.len());
            body.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
    }

    fn note_bytes(&mut self, t_ms: f64, n: usize) {
        if n > 0 && self.record.t_first_byte_ms.is_none() {
            self.record.t_first_byte_ms = Some(t_ms);
        }
        self.record.body_bytes += n as u64;
    }

    /// A body read of the event stream arrived at `t_ms` (stamped before this call).
    pub fn on_read(&mut self, t_ms: f64, bytes: &[u8]) -> ReadSummary {
        self.note_bytes(t_ms, bytes.len());
        let mut summary = ReadSummary::default();
        if self.is_finished() {
            summary.finished = true;
            return summary;
        }
        let mut events = std::mem::take(&mut self.events);
        if let Err(err) = self.decoder.feed(bytes, &mut events) {
            // Keep the events completed before the cap was hit.
            self.apply_events(t_ms, &mut events, &mut summary);
            self.fail(t_ms, ErrorKind::EventTooLarge, err.to_string());
        } else {
            self.apply_events(t_ms, &mut events, &mut summary);
        }
        self.events = events;
        summary.finished = self.is_finished();
        summary
    }

    fn apply_events(&mut self, t_ms: f64, events: &mut Vec<sse::Event>, summary: &mut ReadSummary) {
        for event in events.drain(..) {
            if self.is_finished() {
                break;
            }
            self.apply_event(t_ms, &event, summary);
        }
        if summary.token_events > 1 {
            self.record.shared_read_events += summary.token_events;
        }
    }

    fn apply_event(&mut self, t_ms: f64, event: &sse::Event, summary: &mut ReadSummary) {
        if event.invalid_utf8 {
            self.fail(
                t_ms,
                ErrorKind::InvalidUtf8,
                "the stream held invalid UTF-8".into(),
            );
            return;
        }
        match openai::parse_event(&event.event, &event.data) {
            Ok(StreamItem::Done) => {
                self.record.done_received = true;
                self.record.t_done_ms = Some(t_ms);
            }
            Ok(StreamItem::Error(err)) => {
                let detail = match &err.code {
                    Some(code) => format!("{code}: {}", err.message),
                    None => err.message.clone(),
                };
                self.fail(
                    t_ms,
                    ErrorKind::StreamError,
                    format!("error event in stream: {detail}"),
                );
            }
            Ok(StreamItem::Chunk(chunk)) => {
                if chunk.carries_token() {
                    if self.record.token_events_ms.is_empty() {
                        summary.first_token = true;
                    }
                    self.record.token_events_ms.push(t_ms);
                    summary.token_events += 1;
                    // A running count in every content event (vLLM's
                    // continuous usage stats): the tokens this one carried.
                    let running = chunk.usage.and_then(|u| u.completion_tokens);
                    self.running_tokens = match (self.running_tokens, running) {
                        (Some(before), Some(now)) if now > before => {
                            self.record.event_tokens.push((now - before) as u32);
                            Some(now)
                        }
                        _ => None,
                    };
                    if !chunk.content.is_empty() || !chunk.tool_calls.is_empty() {
                        self.record.t_first_answer_ms.get_or_insert(t_ms);
                    }
                    if !chunk.reasoning.is_empty() {
                        self.record.reasoning_events += 1;
                    }
                    if !chunk.tool_calls.is_empty() {
                        self.record.t_first_tool_call_ms.get_or_insert(t_ms);
                        if let Some(calls) = self.calls.as_mut() {
                            chunk.tool_calls.iter().for_each(|d| calls.add(d));
                        }
                    }
                    self.record.output_chars += chunk.text_chars() as u64;
                    if self.keep_text {
                        if self.text_reasoning {
                            self.text.push_str(&chunk.reasoning);
                        }
                        self.text.push_str(&chunk.content);
                        self.event_ends.push(self.text.len());
                    }
                    if let Some(a) = self.answer.as_mut() {
                        a.push_str(&chunk.content);
                    }
                }
                if let Some(usage) = chunk.usage {
                    self.record.usage = Some(match self.record.usage {
                        Some(earlier) => earlier.merged(usage),
                        None => usage,
                    });
                }
                if let Some(timings) = chunk.timings.map(|t| *t) {
                    self.record.server_timings = Some(timings);
                }
                if chunk.finish_reason.is_some() {
                    self.record.finish_reason = chunk.finish_reason;
                }
                self.needs_end_event |= chunk.needs_end_event;
                if chunk.ends_stream {
                    // `response.completed`, `message_stop`: their APIs' `[DONE]`.
                    self.record.done_received = true;
                    self.record.t_done_ms = Some(t_ms);
                }
            }
            // The body ended in the middle of this event (no blank line after it)
            // and its data does not parse: the server stopped mid-event, the
            // stream is cut short, not malformed.
            Err(err) if !event.terminated => self.fail(
                t_ms,
                ErrorKind::Truncated,
                format!("the body ended in the middle of an event ({err})"),
            ),
            Err(err) => self.fail(t_ms, ErrorKind::MalformedChunk, err.to_string()),
        }
    }

    /// The body ended cleanly at `t_ms`. Decides the outcome if nothing else did:
    /// `[DONE]` or a `finish_reason` means success, otherwise the stream was truncated.
    ///
    /// An event the body ended in the middle of (no blank line after it) is still
    /// applied: a complete chunk counts, and a complete `data: [DONE]` completes the
    /// request (servers send `data: [DONE]` and a blank line: llama.cpp, vLLM, SGLang
    /// and OpenAI alike; a close right after the sentinel loses nothing). Data that
    /// does not parse there is the server stopping mid-event: `truncated`, not
    /// `malformed_chunk`.
    pub fn on_end(&mut self, t_ms: f64) {
        if let Some(body) = self.error_body.take() {
            let status = self.record.status.unwrap_or(0);
            let text = String::from_utf8_lossy(&body);
            let detail = summarize_error_body(&text);
            if (200..300).contains(&status) {
                self.fail(
                    t_ms,
                    ErrorKind::NonSse,
                    format!("HTTP {status} answer is not an event stream: {detail}"),
                );
            } else if (400..500).contains(&status) && is_context_overflow(&text) {
                self.fail(
                    t_ms,
                    ErrorKind::ContextOverflow,
                    format!("HTTP {status}, the prompt is longer than the context: {detail}"),
                );
            } else {
                self.fail(
                    t_ms,
                    ErrorKind::Http(status),
                    format!("HTTP {status}: {detail}"),
                );
            }
            return;
        }
        if !self.is_finished() {
            let mut summary = ReadSummary::default();
            if let Some(event) = self.decoder.finish() {
                self.apply_event(t_ms, &event, &mut summary);
            }
        }
        if self.record.t_done_ms.is_none() {
            self.record.t_done_ms = Some(t_ms);
        }
        if !self.decided {
            let finished = self.record.finish_reason.is_some() && !self.needs_end_event;
            if self.record.done_received || finished {
                self.decided = true;
                self.record.outcome = Outcome::Ok;
            } else if self.needs_end_event {
                self.fail(
                    t_ms,
                    ErrorKind::Truncated,
                    "the body ended without the stream's end event (message_stop, response.completed)"
                        .into(),
                );
            } else {
                self.fail(
                    t_ms,
                    ErrorKind::Truncated,
                    "the body ended without [DONE] or a finish_reason".into(),
                );
            }
        }
    }

    /// The transport failed at `t_ms` (connection refused, reset, ...).
    pub fn on_transport_error(&mut self, t_ms: f64, kind: ErrorKind, message: impl Into<String>) {
        if self.record.done_received && !self.decided {
            // The stream was complete; a broken connection after [DONE] changes nothing.
            self.on_end(t_ms);
            return;
        }
        self.fail(t_ms, kind, message.into());
    }

    /// The client timeout fired at `t_ms`.
    pub fn on_timeout(&mut self, t_ms: f64) {
        if self.decided || self.record.done_received {
            return;
        }
        let phase = if self.record.t_headers_ms.is_none() {
            TimeoutPhase::Headers
        } else if self.record.token_events_ms.is_empty() {
            TimeoutPhase::FirstToken
        } else {
            TimeoutPhase::Stream
        };
        self.decided = true;
        self.record.t_done_ms = Some(t_ms);
        self.record.outcome = Outcome::Timeout { phase };
    }

    /// The run was cancelled before this request finished.
    pub fn on_cancel(&mut self, t_ms: f64) {
        self.on_transport_error(
            t_ms,
            ErrorKind::Cancelled,
            "the run was stopped before this request finished",
        );
    }

    /// Browser only: Resource Timing's `requestStart` and `responseStart` for
    /// this request (each `None` where the browser hid it).
    pub fn on_resource_timing(
        &mut self,
        request_start_ms: Option<f64>,
        response_start_ms: Option<f64>,
    ) {
        self.record.t_request_start_ms = request_start_ms;
        self.record.t_response_start_ms = response_start_ms;
    }

    /// Browser only: the first token was painted at `t_ms`.
    pub fn on_first_paint(&mut self, t_ms: f64, method: PaintMethod) {
        if self.record.t_first_paint_ms.is_none() {
            self.record.t_first_paint_ms = Some(t_ms);
            self.record.paint_method = Some(method);
        }
    }

    fn fail(&mut self, t_ms: f64, kind: ErrorKind, message: String) {
        if self.decided {
            return;
        }
        self.decided = true;
        self.record.t_done_ms = Some(t_ms);
        self.record.outcome = Outcome::Error { kind, message };
    }

    /// Finish and take the record. A request nobody ended is counted as an error
    /// (`other`), never dropped.
    pub fn finish(mut self) -> RequestRecord {
        if self.running_tokens.is_none()
            || self.record.event_tokens.len() != self.record.token_events_ms.len()
        {
            self.record.event_tokens.clear();
        }
        if !self.decided && !self.record.done_received {
            let t = self
                .record
                .t_done_ms
                .or(self.record.t_last_token_ms())
                .unwrap_or(self.record.t_send_ms);
            self.fail(
                t,
                ErrorKind::Other,
                "the request was never completed".into(),
            );
        } else if !self.decided {
            self.decided = true;
        }
        self.record
    }
}

/// One line out of an error body: the JSON error message when there is one,
/// otherwise the first characters of the text.
/// Whether an error answer says the request is longer than the model's context,
/// in the words servers use: llama.cpp ("exceeds the available context size",
/// `exceed_context_size_error`), vLLM and OpenAI ("maximum context length",
/// `context_length_exceeded`), SGLang ("is longer than the model's context
/// length"), TGI ("`inputs` tokens + `max_new_tokens` must be <=").
pub fn is_context_overflow(body: &str) -> bool {
    let b = body.to_ascii_lowercase();
    [
        "exceeds the available context size",
        "exceed_context_size",
        "maximum context length",
        "context_length_exceeded",
        "longer than the model's context length",
        "max_new_tokens` must be <=",
        "context window",
    ]
    .iter()
    .any(|p| b.contains(p))
}

fn summarize_error_body(text: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text)
        && v.get("error").is_some()
    {
        let e = openai::error_from_value(v);
        return match e.code {
            Some(code) => format!("{code}: {}", e.message),
            None => e.message,
        };
    }
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(120)
        .collect();
    let flat = flat.trim();
    if flat.is_empty() {
        "(empty body)".to_owned()
    } else {
        flat.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAT: &str = concat!(
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":null}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n",
        "data: [DONE]\n\n",
    );

    fn events() -> Vec<&'static str> {
        CHAT.split_inclusive("\n\n").collect()
    }

    #[test]
    fn timestamps_come_from_the_reads() {
        let mut tl = RequestTimeline::new(100.0, None).keep_text(true);
        assert_eq!(
            tl.on_headers(105.0, 200, Some("text/event-stream; charset=utf-8")),
            HeaderVerdict::Stream
        );
        let ev = events();
        let s = tl.on_read(110.0, ev[0].as_bytes());
        assert_eq!(s.token_events, 0, "role-only chunk is not a token");
        let s = tl.on_read(130.0, ev[1].as_bytes());
        assert!(s.first_token);
        tl.on_read(150.0, ev[2].as_bytes());
        let s = tl.on_read(151.0, (ev[3].to_owned() + ev[4] + ev[5]).as_bytes());
        assert!(s.finished);
        tl.on_end(152.0);
        assert_eq!(tl.text(), "Hello");
        let r = tl.finish();
        assert_eq!(r.outcome, Outcome::Ok);
        assert_eq!(r.t_headers_ms, Some(105.0));
        assert_eq!(r.t_first_byte_ms, Some(110.0));
        assert_eq!(r.token_events_ms, vec![130.0, 150.0]);
        assert_eq!(r.t_done_ms, Some(151.0), "t_done is when [DONE] arrived");
        assert_eq!(r.usage.unwrap().completion_tokens, Some(2));
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
        assert_eq!(r.shared_read_events, 0);
    }

    #[test]
    fn events_sharing_a_read_share_its_timestamp() {
        let mut tl = RequestTimeline::new(0.0, None);
        tl.on_headers(1.0, 200, Some("text/event-stream"));
        tl.on_read(2.0, CHAT.as_bytes());
        tl.on_end(3.0);
        let r = tl.finish();
        assert_eq!(r.token_events_ms, vec![2.0, 2.0]);
        assert_eq!(r.shared_read_events, 2);
    }

    #[test]
    fn http_error_with_json_body() {
        let mut tl = RequestTimeline::new(0.0, None);
        assert_eq!(
            tl.on_headers(1.0, 400, Some("application/json")),
            HeaderVerdict::ErrorBody
        );
        tl.on_error_body(
            2.0,
            include_bytes!("../../../tests/fixtures/sse/llama-server-error-context-exceeded.json"),
        );
        tl.on_end(2.5);
        let r = tl.finish();
        match r.outcome {
            Outcome::Error { kind, message } => {
                assert_eq!(kind, ErrorKind::ContextOverflow);
                assert!(
                    message.contains("exceeds the available context size"),
                    "{message}"
                );
                assert!(message.contains("exceed_context_size_error"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn context_overflow_in_each_servers_words_and_other_400s() {
        let kind = |status: u16, body: &str| {
            let mut tl = RequestTimeline::new(0.0, None);
            tl.on_headers(1.0, status, Some("application/json"));
            tl.on_error_body(2.0, body.as_bytes());
            tl.on_end(3.0);
            match tl.finish().outcome {
                Outcome::Error { kind, .. } => kind,
                other => panic!("{other:?}"),
            }
        };
        // vLLM's and OpenAI's wording.
        let vllm = r#"{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 4100 tokens (4000 in the messages, 100 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(kind(400, vllm), ErrorKind::ContextOverflow);
        let openai = r#"{"error":{"message":"...","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        assert_eq!(kind(400, openai), ErrorKind::ContextOverflow);
        // TGI's.
        let tgi = r#"{"error":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens and 200 `max_new_tokens`","error_type":"validation"}"#;
        assert_eq!(kind(422, tgi), ErrorKind::ContextOverflow);
        // Other refusals stay HTTP errors; a 5xx saying so is still the server's error.
        assert_eq!(
            kind(400, r#"{"error":{"message":"model not found"}}"#),
            ErrorKind::Http(400)
        );
        assert_eq!(kind(503, vllm), ErrorKind::Http(503));
        assert_eq!(
            ErrorKind::from_key("context_overflow"),
            Some(ErrorKind::ContextOverflow)
        );
        assert_eq!(ErrorKind::ContextOverflow.key(), "context_overflow");
    }

    #[test]
    fn html_page_with_200_is_non_sse() {
        let mut tl = RequestTimeline::new(0.0, None);
        assert_eq!(
            tl.on_headers(1.0, 200, Some("text/html")),
            HeaderVerdict::ErrorBody
        );
        tl.on_error_body(2.0, b"<html><body>Bad gateway</body></html>");
        tl.on_end(2.0);
        match tl.finish().outcome {
            Outcome::Error { kind, message } => {
                assert_eq!(kind, ErrorKind::NonSse);
                assert!(message.contains("Bad gateway"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn truncated_stream_keeps_its_tokens() {
        let mut tl = RequestTimeline::new(0.0, None);
        tl.on_headers(1.0, 200, Some("text/event-stream"));
        let ev = events();
        tl.on_read(2.0, ev[1].as_bytes());
        tl.on_read(3.0, ev[2].as_bytes());
        tl.on_end(4.0);
        let r = tl.finish();
        assert_eq!(r.token_events_ms, vec![2.0, 3.0]);
        assert!(matches!(
            r.outcome,
            Outcome::Error {
                kind: ErrorKind::Truncated,
                ..
            }
        ));
    }

    #[test]
    fn finish_reason_without_done_is_ok() {
        let mut tl = RequestTimeline::new(0.0, None);
        tl.on_headers(1.0, 200, Some("text/event-stream"));
        let ev = events();
        tl.on_read(2.0, ev[1].as_bytes());
        tl.on_read(3.0, ev[3].as_bytes());
        tl.on_end(4.0);
        let r = tl.finish();
        assert_eq!(r.outcome, Outcome::Ok);
        assert_eq!(r.t_done_ms, Some(4.0));
    }

    #[test]
    fn error_event_midstream_keeps_prior_tokens() {
        let mut tl = RequestTimeline::new(0.0, None);
        tl.on_headers(1.0, 200, Some("text/event-stream"));
        let s = tl.on_read(
            2.0,
            include_bytes!("../../../tests/fixtures/sse/synthetic-chat-error-midstream.sse"),
        );
        assert!(s.finished);
        tl.on_end(3.0);
        let r = tl.finish();
        assert_eq!(r.token_events_ms.len(), 2);
        assert!(!r.done_received, "events after the error are ignored");
        match r.outcome {
            Outcome::Error { kind, message } => {
                assert_eq!(kind, ErrorKind::StreamError);
                assert!(message.contains("backend overloaded"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_chunk_fails_with_its_own_kind() {
        let mut tl = RequestTimeline::new(0.0, None);
        tl.on_headers(1.0, 200, Some("text/event-stream"));
        tl.on_read(2.0, events()[1].as_bytes());
        tl.on_read(3.0, b"data: {\"choices\": [ {\"delta\": \n\n");
        let r = tl.finish();
        assert_eq!(r.token_events_ms, vec![2.0]);
        assert!(matches!(
            r.outcome,
            Outcome::Error {
                kind: ErrorKind::MalformedChunk,
                ..
            }
        ));
    }

    #[test]
    fn timeout_phases() {
        let mut tl = RequestTimeline::new(0.0, None);
        tl.on_timeout(10.0);
        assert_eq!(
            tl.finish().outcome,
            Outcome::Timeout {
                phase: TimeoutPhase::Headers
            }
        );
        let mut tl = RequestTimeline::new(0.0, None);
        tl.on_headers(1.0, 200, None);
        tl.on_read(2.0, events()[1].as_bytes());
        tl.on_timeout(10.0);
        let r = tl.finish();
        assert_eq!(
            r.outcome,
            Outcome::Timeout {
                phase: TimeoutPhase::Stream
            }
        );
        assert_eq!(
            r.token_events_ms,
            vec![2.0],
            "tokens before the timeout are kept"
        );
    }

    #[test]
    fn reset_after_done_is_not_an_error() {
        let mut tl = RequestTimeline::new(0.0, None);
        tl.on_headers(1.0, 200, None);
        tl.on_read(2.0, CHAT.as_bytes());
        tl.on_transport_error(3.0, ErrorKind::Reset, "connection reset");
        assert_eq!(tl.finish().outcome, Outcome::Ok);
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let mut tl = RequestTimeline::new(0.0, None);
        tl.on_headers(1.0, 200, None);
        tl.on_read(2.0, b"data: {\"choices\":[{\"text\":\"a\xff\"}]}\n\n");
        assert!(matches!(
            tl.finish().outcome,
            Outcome::Error {
                kind: ErrorKind::InvalidUtf8,
                ..
            }
        ));
    }

    #[test]
    fn a_stream_without_line_breaks_is_capped_and_classified() {
        let mut tl = RequestTimeline::new(0.0, None).max_event_bytes(1024);
        tl.on_headers(1.0, 200, None);
        tl.on_read(2.0, events()[1].as_bytes());
        let mut finished = false;
        for i in 0..100 {
            if tl.on_read(3.0 + f64::from(i), &[b'x'; 100]).finished {
                finished = true;
                break;
            }
        }
        assert!(
            finished,
            "the request stops at the cap, not at the end of memory"
        );
        let r = tl.finish();
        assert_eq!(r.token_events_ms, vec![2.0], "what came before is kept");
        assert!(matches!(
            r.outcome,
            Outcome::Error {
                kind: ErrorKind::EventTooLarge,
                ..
            }
        ));
    }

    #[test]
    fn unfinished_request_is_counted_not_dropped() {
        let tl = RequestTimeline::new(0.0, None);
        assert!(matches!(
            tl.finish().outcome,
            Outcome::Error {
                kind: ErrorKind::Other,
                ..
            }
        ));
    }

    #[test]
    fn error_kind_keys_round_trip() {
        for kind in [
            ErrorKind::Http(503),
            ErrorKind::Connect,
            ErrorKind::Reset,
            ErrorKind::StreamError,
            ErrorKind::MalformedChunk,
            ErrorKind::NonSse,
            ErrorKind::Truncated,
            ErrorKind::InvalidUtf8,
            ErrorKind::EventTooLarge,
            ErrorKind::Cancelled,
            ErrorKind::Other,
        ] {
            assert_eq!(ErrorKind::from_key(&kind.key()), Some(kind));
        }
        assert_eq!(ErrorKind::from_key("http_x"), None);
    }
}
