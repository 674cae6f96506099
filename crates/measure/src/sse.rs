//! An incremental decoder for `text/event-stream` (Server-Sent Events).
//!
//! It follows the WHATWG HTML standard, section 9.2.6 "Interpreting an event
//! stream", and accepts its input split at *any* byte: inside a line, between
//! the CR and LF of a CRLF pair, or inside a multi-byte UTF-8 character.
//!
//! > Lines must be separated by either a U+000D CARRIAGE RETURN U+000A LINE FEED
//! > (CRLF) character pair, a single U+000A LINE FEED (LF) character, or a single
//! > U+000D CARRIAGE RETURN (CR) character.
//!
//! > If the line is empty (a blank line): Dispatch the event.
//! > If the line starts with a U+003A COLON character (:): Ignore the line.
//! > If the line contains a U+003A COLON character: collect the characters before
//! > it as the field name and the characters after it as the value; if the value
//! > starts with a U+0020 SPACE character, remove it from the value.
//! > Otherwise, the whole line is the field name and the value is the empty string.
//!
//! Differences from a browser's `EventSource`, made on purpose for measurement:
//!
//! * Lines are buffered as bytes and decoded as UTF-8 only when complete, so a
//!   character split across reads is never mangled. Invalid UTF-8 is decoded with
//!   U+FFFD (as the standard says) **and** reported on the event
//!   ([`Event::invalid_utf8`]) instead of being swallowed.
//! * The standard discards an event that the stream ends in the middle of. A
//!   benchmark must not silently drop data that arrived, so [`Decoder::finish`]
//!   returns such an event flagged [`Event::terminated`]` = false`; the caller
//!   decides what it means (the request timeline counts it and flags truncation).
//! * A line or an event larger than [`Decoder::max_event_bytes`] is an error
//!   ([`SseError::EventTooLarge`]), so a stream with no line breaks cannot make
//!   the client's memory grow without bound.
//!
//! The decoder never reads a clock: the caller stamps each read before feeding it,
//! and every event completed by that read belongs to that timestamp.

use thiserror::Error;

/// Default cap on one line or one event's data, in bytes (16 MiB).
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    /// The `event:` field, or `"message"` when none was given.
    pub event: String,
    /// The `data:` lines joined with `\n` (the trailing LF removed, as the standard says).
    pub data: String,
    /// The last event ID at dispatch time (`id:` fields persist across events).
    pub id: Option<String>,
    /// The stream's reconnection time at dispatch, milliseconds: set by the last
    /// valid `retry:` field so far (all ASCII digits), in this event's block or an
    /// earlier one. Like `id:`, it persists across events and is never reset by a
    /// dispatch or a discarded block.
    pub retry_ms: Option<u64>,
    /// Whether this event was closed by a blank line. `false` only for the event
    /// returned by [`Decoder::finish`] when the stream ended in its middle.
    pub terminated: bool,
    /// Whether any of this event's lines held invalid UTF-8 (decoded with U+FFFD).
    pub invalid_utf8: bool,
}

/// Why the decoder refused input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SseError {
    /// A line or the data of one event grew past the cap without ending.
    #[error(
        "an SSE event exceeded {limit_bytes} bytes without ending (no line break or blank line)"
    )]
    EventTooLarge {
        /// The cap that was exceeded.
        limit_bytes: usize,
    },
}

/// Incremental SSE decoder. Feed it bytes as they arrive with [`Decoder::feed`]; call
/// [`Decoder::finish`] when the body ends.
#[derive(Debug, Clone)]
pub struct Decoder {
    /// Bytes of the current, not yet complete line.
    line: Vec<u8>,
    /// The previous byte was a CR that ended a line: a following LF belongs to it.
    after_cr: bool,
    /// Still looking for a BOM at the very start of the stream (bytes seen so far of it).
    bom_seen: usize,
    data: String,
    event_type: String,
    last_event_id: Option<String>,
    /// The reconnection time (WHATWG: "set the event stream's reconnection time").
    reconnection_ms: Option<u64>,
    /// Any field line seen since the last dispatch (for the unterminated event at the end).
    pending_fields: bool,
    invalid_utf8: bool,
    max_event_bytes: usize,
    failed: bool,
    total_bytes: u64,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

impl Decoder {
    /// A decoder with the default event-size cap.
    pub fn new() -> Self {
        Self::with_max_event_bytes(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder that refuses lines or events larger than `max_event_bytes`.
    pub fn with_max_event_bytes(max_event_bytes: usize) -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            bom_seen: 0,
            data: String::new(),
            event_type: String::new(),
            last_event_id: None,
            reconnection_ms: None,
            pending_fields: false,
            invalid_utf8: false,
            max_event_bytes,
            failed: false,
            total_bytes: 0,
        }
    }

    /// The cap on one line or one event's data.
    pub fn max_event_bytes(&self) -> usize {
        self.max_event_bytes
    }

    /// Total bytes fed so far.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// The stream's reconnection time, milliseconds: the last valid `retry:` field
    /// seen so far (`None` until one arrives).
    pub fn reconnection_ms(&self) -> Option<u64> {
        self.reconnection_ms
    }

    /// Decode `bytes`, appending every event they complete to `out`.
    ///
    /// After an error the decoder stays failed and ignores further input.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        if self.failed {
            return Err(SseError::EventTooLarge {
                limit_bytes: self.max_event_bytes,
            });
        }
        self.total_bytes += bytes.len() as u64;
        let mut rest = self.skip_bom(bytes);
        while !rest.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match memchr::memchr2(b'\n', b'\r', rest) {
                Some(pos) => {
                    let (head, tail) = rest.split_at(pos);
                    self.after_cr = tail[0] == b'\r';
                    rest = &tail[1..];
                    if self.line.is_empty() {
                        self.check_len(head.len())?;
                        self.process_line(head, out)?;
                    } else {
                        self.check_len(self.line.len() + head.len())?;
                        let mut line = std::mem::take(&mut self.line);
                        line.extend_from_slice(head);
                        self.process_line(&line, out)?;
                        line.clear();
                        self.line = line;
                    }
                }
                None => {
                    self.check_len(self.line.len() + rest.len())?;
                    self.line.extend_from_slice(rest);
                    rest = &[];
                }
            }
        }
        Ok(())
    }

    /// The body ended. Returns the event the stream ended in the middle of, if any,
    /// with `terminated: false` (a final line without a line break counts as a line).
    pub fn finish(&mut self) -> Option<Event> {
        if self.failed {
            return None;
        }
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            let mut sink = Vec::new();
            // The line is complete (the stream ended) but a line is never blank here,
            // so it cannot dispatch; it can only add a field.
            if self.process_line(&line, &mut sink).is_err() {
                return None;
            }
            debug_assert!(sink.is_empty());
        }
        self.after_cr = false;
        if !self.pending_fields || self.data.is_empty() {
            return None;
        }
        Some(self.take_event(false))
    }

    fn skip_bom<'a>(&mut self, bytes: &'a [u8]) -> &'a [u8] {
        // A BOM may only appear at the very start, and may itself be split across reads.
        let mut rest = bytes;
        while self.bom_seen < BOM.len() && !rest.is_empty() {
            if rest[0] == BOM[self.bom_seen] {
                self.bom_seen += 1;
                rest = &rest[1..];
            } else {
                // Not a BOM: replay the part of it we swallowed as ordinary line bytes.
                let swallowed = self.bom_seen;
                self.bom_seen = usize::MAX;
                if swallowed > 0 {
                    self.line.extend_from_slice(&BOM[..swallowed]);
                }
                return rest;
            }
        }
        if self.bom_seen == BOM.len() {
            self.bom_seen = usize::MAX;
        }
        rest
    }

    fn check_len(&mut self, len: usize) -> Result<(), SseError> {
        if len > self.max_event_bytes || self.data.len() > self.max_event_bytes {
            self.failed = true;
            self.line = Vec::new();
            self.data = String::new();
            return Err(SseError::EventTooLarge {
                limit_bytes: self.max_event_bytes,
            });
        }
        Ok(())
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        if line.is_empty() {
            // "If the data buffer is an empty string, set the data buffer and the event
            // type buffer to the empty string and return." (checked before the
            // trailing LF is removed, so `data:` alone dispatches an empty event)
            if self.data.is_empty() {
                // The block is discarded: its event type and invalid UTF-8 in one of
                // its lines do not reach the next event. A `retry` in it has already
                // set the reconnection time, which is stream state, not the block's.
                self.event_type.clear();
                self.invalid_utf8 = false;
                self.pending_fields = false;
            } else {
                out.push(self.take_event(true));
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(()); // comment
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                let value = value.strip_prefix(b" ").unwrap_or(value);
                (&line[..colon], value)
            }
            None => (line, &[][..]),
        };
        match name {
            b"data" => {
                self.pending_fields = true;
                self.push_str_data(value);
                self.data.push('\n');
                if self.data.len() > self.max_event_bytes {
                    return self.check_len(self.data.len());
                }
            }
            b"event" => {
                self.pending_fields = true;
                self.event_type = self.decode(value);
            }
            // An id containing NULL is ignored, as the standard says.
            b"id" if !value.contains(&0) => {
                self.pending_fields = true;
                self.last_event_id = Some(self.decode(value));
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.pending_fields = true;
                // Saturate absurd values instead of overflowing.
                let ms = value.iter().fold(0u64, |acc, d| {
                    acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                self.reconnection_ms = Some(ms);
            }
            _ => {} // unknown fields are ignored
        }
        Ok(())
    }

    fn push_str_data(&mut self, value: &[u8]) {
        match std::str::from_utf8(value) {
            Ok(s) => self.data.push_str(s),
            Err(_) => {
                self.invalid_utf8 = true;
                self.data.push_str(&String::from_utf8_lossy(value));
            }
        }
    }

    fn decode(&mut self, value: &[u8]) -> String {
        match std::str::from_utf8(value) {
            Ok(s) => s.to_owned(),
            Err(_) => {
                self.invalid_utf8 = true;
                String::from_utf8_lossy(value).into_owned()
            }
        }
    }

    fn take_event(&mut self, terminated: bool) -> Event {
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        let event_type = std::mem::take(&mut self.event_type);
        let event = Event {
            event: if event_type.is_empty() {
                "message".to_owned()
            } else {
                event_type
            },
            data,
            id: self.last_event_id.clone(),
            retry_ms: self.reconnection_ms,
            terminated,
            invalid_utf8: std::mem::take(&mut self.invalid_utf8),
        };
        self.pending_fields = false;
        event
    }
}

/// Decode a whole stream at once (convenience for tests and replays).
pub fn decode_all(bytes: &[u8]) -> Result<Vec<Event>, SseError> {
    let mut decoder = Decoder::new();
    let mut out = Vec::new();
    decoder.feed(bytes, &mut out)?;
    out.extend(decoder.finish());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<Event> {
        let mut d = Decoder::new();
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut out).unwrap();
        }
        out.extend(d.finish());
        out
    }

    fn data(chunks: &[&[u8]]) -> Vec<String> {
        events(chunks).into_iter().map(|e| e.data).collect()
    }

    #[test]
    fn split_inside_a_value() {
        assert_eq!(data(&[b"data: Hello,", b" world!\n\n"]), ["Hello, world!"]);
    }

    #[test]
    fn lf_cr_and_crlf_line_ends() {
        assert_eq!(
            data(&[b"data: a\n\ndata: b\r\rdata: c\r\n\r\n"]),
            ["a", "b", "c"]
        );
    }

    #[test]
    fn crlf_split_between_cr_and_lf_is_one_line_end() {
        // If the LF after a CR were taken as a second line end, it would dispatch
        // early and split "x" and "y" into two events.
        let got = events(&[b"data: x\r", b"\ndata: y\r", b"\n\r", b"\n"]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].data, "x\ny");
        assert!(got[0].terminated);
    }

    #[test]
    fn multiline_data_is_joined_with_lf() {
        assert_eq!(data(&[b"data: one\ndata:two\ndata\n\n"]), ["one\ntwo\n"]);
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored() {
        assert_eq!(data(&[b": keep-alive\nfoo: bar\ndata: x\n\n:\n\n"]), ["x"]);
    }

    #[test]
    fn event_id_and_retry_fields() {
        let got = events(&[b"event: delta\nid: 7\nretry: 1500\ndata: x\n\ndata: y\n\n"]);
        assert_eq!(got[0].event, "delta");
        assert_eq!(got[0].id.as_deref(), Some("7"));
        assert_eq!(got[0].retry_ms, Some(1500));
        // The event type resets; the last event id and the reconnection time persist.
        assert_eq!(got[1].event, "message");
        assert_eq!(got[1].id.as_deref(), Some("7"));
        assert_eq!(got[1].retry_ms, Some(1500));
    }

    #[test]
    fn retry_must_be_digits() {
        let got = events(&[b"retry: 10a\ndata: x\n\n"]);
        assert_eq!(got[0].retry_ms, None);
    }

    #[test]
    fn id_with_null_is_ignored() {
        let got = events(&[b"id: a\0b\ndata: x\n\n"]);
        assert_eq!(got[0].id, None);
    }

    #[test]
    fn only_one_leading_space_is_removed() {
        assert_eq!(data(&[b"data:  two spaces\n\n"]), [" two spaces"]);
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        assert!(events(&[b"event: ping\n\n"]).is_empty());
        // ...but an empty data field is data: an event with empty data.
        assert_eq!(data(&[b"data:\n\n"]), [""]);
        // The event type of a block without data does not leak into the next event.
        let got = events(&[b"event: ping\n\ndata: x\n\n"]);
        assert_eq!(got[0].event, "message");
    }

    #[test]
    fn a_discarded_block_resets_its_flags() {
        // A block without data is discarded: an invalid-UTF-8 event type in it does
        // not carry over to the next, clean event; a retry in it has set the
        // stream's reconnection time, which stays (WHATWG 9.2.6).
        let got = events(&[b"event: \xff\n\nretry: 5\n\ndata: x\n\n"]);
        assert_eq!(got.len(), 1);
        assert!(!got[0].invalid_utf8);
        assert_eq!(got[0].retry_ms, Some(5));
        assert_eq!(got[0].event, "message");
    }

    #[test]
    fn the_reconnection_time_survives_discarded_blocks_at_every_split() {
        // retry: 500 alone in a block, an event, an invalid retry (not all digits,
        // ignored) in a block of its own, an event: the reconnection time is 500 at
        // both events and at the end, wherever the stream is cut.
        let stream: &[u8] = b"retry: 500\n\ndata: first\n\nretry: 50x\n\ndata: second\n\n";
        let check = |chunks: &[&[u8]], how: &str| {
            let mut d = Decoder::new();
            let mut out = Vec::new();
            for c in chunks {
                d.feed(c, &mut out).unwrap();
            }
            out.extend(d.finish());
            let got: Vec<(&str, Option<u64>)> =
                out.iter().map(|e| (e.data.as_str(), e.retry_ms)).collect();
            assert_eq!(got, [("first", Some(500)), ("second", Some(500))], "{how}");
            assert_eq!(d.reconnection_ms(), Some(500), "{how}");
        };
        check(&[stream], "whole");
        for cut in 1..stream.len() {
            check(&[&stream[..cut], &stream[cut..]], &format!("cut at {cut}"));
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        check(&bytes, "byte by byte");
        // A comment-only block does not reset it either; a later valid retry does.
        let got = events(&[b"retry: 7\n\n: ping\n\ndata: a\n\nretry: 9\ndata: b\n\n"]);
        assert_eq!(got[0].retry_ms, Some(7));
        assert_eq!(got[1].retry_ms, Some(9));
    }

    #[test]
    fn bom_is_skipped_even_when_split() {
        assert_eq!(data(&[&[0xEF], &[0xBB, 0xBF], b"data: x\n\n"]), ["x"]);
        // A BOM later in the stream is data, not skipped.
        let got = data(&[b"data: x\n\n", &[0xEF, 0xBB, 0xBF], b"data: y\n\n"]);
        assert_eq!(got, ["x"]); // the second block's field name is "\u{feff}data": unknown
    }

    #[test]
    fn partial_bom_prefix_is_kept() {
        // 0xEF then something else: the 0xEF is part of the first line.
        let got = events(&[&[0xEF], b"data: x\n\n"]);
        assert!(
            got.is_empty(),
            "field name starts with 0xEF, so it is unknown"
        );
    }

    #[test]
    fn utf8_split_across_reads() {
        let s = "data: héllo 👋\n\n".as_bytes();
        for i in 0..s.len() {
            let got = events(&[&s[..i], &s[i..]]);
            assert_eq!(got[0].data, "héllo 👋");
            assert!(!got[0].invalid_utf8);
        }
    }

    #[test]
    fn invalid_utf8_is_reported() {
        let got = events(&[b"data: a\xffb\n\n"]);
        assert_eq!(got[0].data, "a\u{fffd}b");
        assert!(got[0].invalid_utf8);
    }

    #[test]
    fn stream_ending_without_blank_line() {
        let got = events(&[b"data: a\n\ndata: b\n"]);
        assert_eq!(got.len(), 2);
        assert!(got[0].terminated);
        assert_eq!(got[1].data, "b");
        assert!(!got[1].terminated);
        // Without even the final line break.
        let got = events(&[b"data: a\n\ndata: [DONE]"]);
        assert_eq!(got[1].data, "[DONE]");
        assert!(!got[1].terminated);
    }

    #[test]
    fn empty_chunks_change_nothing() {
        assert_eq!(data(&[b"", b"data: a", b"", b"\n", b"", b"\n"]), ["a"]);
    }

    #[test]
    fn line_without_break_is_capped() {
        let mut d = Decoder::with_max_event_bytes(64);
        let mut out = Vec::new();
        let mut result = Ok(());
        for _ in 0..10 {
            result = d.feed(&[b'x'; 16], &mut out);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(SseError::EventTooLarge { limit_bytes: 64 }));
        // Stays failed.
        assert!(d.feed(b"\n\n", &mut out).is_err());
    }

    #[test]
    fn many_data_lines_are_capped() {
        let mut d = Decoder::with_max_event_bytes(64);
        let mut out = Vec::new();
        let mut failed = false;
        for _ in 0..100 {
            if d.feed(b"data: 0123456789\n", &mut out).is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed);
    }
}
