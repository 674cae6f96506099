//! Real-user monitoring: the turns the browser probe (`rum/tokenscope-rum.js`) sends
//! and `tokenscope collect` stores, their validation, and the weighted summary
//! `collect --summary` prints.
//!
//! A turn is one streamed answer as a real user's page saw it: times in ms from the
//! app's `fetch` call (headers, first byte, first text chunk, first DOM change, first
//! paint, last chunk, last paint), counts, stalls, outcome. Never text: the probe
//! sends lengths only, and [`Turn::validate`] refuses strings that could carry any
//! (a route is a path template, an error kind a short token).

use serde::{Deserialize, Serialize};

pub mod report;
pub mod summary;

/// The batch format the probe posts.
pub const RUM_SCHEMA: &str = "tokenscope.rum/1";
/// Most turns in one batch.
pub const MAX_TURNS_PER_BATCH: usize = 500;
/// Largest count a turn may report (chunks, characters, tokens, ...).
pub const MAX_COUNT: u64 = 1 << 40;
/// Longest time a turn may report, ms (an hour).
pub const MAX_MS: f64 = 3.6e6;
/// Most chunk times a turn carries (`chunk_ms`): the probe stops recording there.
pub const MAX_CHUNK_TIMES: usize = 1000;
/// Rounding of `chunk_ms` against the other times (the probe rounds to 0.1 ms).
const CHUNK_MS_SLACK: f64 = 0.051;

/// What the probe posts: a batch of turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// [`RUM_SCHEMA`].
    pub schema: String,
    /// The turns.
    pub turns: Vec<Turn>,
}

/// Times of a turn, ms after the app's `fetch` call; absent when it did not happen
/// (paint times are absent when the page was hidden during the turn).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnTimes {
    /// Response headers.
    pub headers: Option<f64>,
    /// First body bytes the app read.
    pub first_byte: Option<f64>,
    /// First chunk carrying answer text: TTFT as received.
    pub first_chunk: Option<f64>,
    /// First DOM change in the answer's container after it.
    pub first_dom: Option<f64>,
    /// The frame after that change: TTFT as painted.
    pub first_paint: Option<f64>,
    /// Last text chunk.
    pub last_chunk: Option<f64>,
    /// Last paint.
    pub last_paint: Option<f64>,
    /// Last body bytes.
    pub last_byte: Option<f64>,
}

impl TurnTimes {
    fn all(&self) -> [(&'static str, Option<f64>); 8] {
        [
            ("headers", self.headers),
            ("first_byte", self.first_byte),
            ("first_chunk", self.first_chunk),
            ("first_dom", self.first_dom),
            ("first_paint", self.first_paint),
            ("last_chunk", self.last_chunk),
            ("last_paint", self.last_paint),
            ("last_byte", self.last_byte),
        ]
    }
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The stream ended normally.
    Complete,
    /// The user (or the app) stopped it.
    Aborted,
    /// An HTTP error, a network error or an error event in the stream.
    Error,
}

impl Outcome {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Complete => "complete",
            Outcome::Aborted => "aborted",
            Outcome::Error => "error",
        }
    }
}

/// One streamed answer on a real user's page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// The stream URL's route template (`/api/chat/:id`).
    pub route: String,
    /// When the app called `fetch`, Unix ms (the user's clock).
    pub started_unix_ms: f64,
    /// The times.
    pub ms: TurnTimes,
    /// Chunks that carried text.
    pub chunks: u64,
    /// Stream events (SSE events or NDJSON lines).
    pub events: u64,
    /// Characters of answer text (UTF-16 units): a length, never the text.
    pub chars: u64,
    /// Frames painted after a DOM change while it streamed.
    pub paints: u64,
    /// Chunks that shared a frame with another (arrived before the frame).
    pub chunks_merged: u64,
    /// Gaps between text chunks longer than 250 ms.
    pub stalls_250: u64,
    /// ... longer than 500 ms.
    pub stalls_500: u64,
    /// ... longer than 1000 ms.
    pub stalls_1000: u64,
    /// Longest gap between text chunks, ms.
    pub longest_gap_ms: f64,
    /// Longest gap between paints, ms.
    pub longest_paint_gap_ms: f64,
    /// How it ended.
    pub outcome: Outcome,
    /// `http_503`, `network`, `stream` for errors.
    pub error_kind: Option<String>,
    /// The page was hidden during the turn (paint times dropped).
    pub hidden: bool,
    /// The page had been restored from the back/forward cache.
    pub restored: bool,
    /// How paints were estimated (`raf+task`: the frame after the DOM change).
    pub paint_method: String,
    /// Output tokens, when the stream's `usage` gave them.
    pub output_tokens: Option<u64>,
    /// Input tokens, when the stream's `usage` gave them.
    pub input_tokens: Option<u64>,
    /// Times the probe dropped as impossible.
    #[serde(default)]
    pub clamped: u64,
    /// Each text chunk's arrival, ms after the `fetch` call (0.1 ms), the first
    /// [`MAX_CHUNK_TIMES`] of them: the inter-chunk latencies. Empty from a probe
    /// that did not send them (then the turn has a TTFT but no ITL).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunk_ms: Vec<f64>,
    /// The server's own time to its first token, from the stream's timings
    /// (llama.cpp `timings.prompt_ms`), when it sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_prefill_ms: Option<f64>,
    /// The user's click or key that sent the turn, ms before the `fetch` call (its
    /// event's time, so the browser's input delay is in it), when within 1 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_to_fetch_ms: Option<f64>,
    /// Long animation frames (or long tasks) that overlapped the turn.
    #[serde(default)]
    pub long_frames: u64,
    /// The time they blocked input (LoAF `blockingDuration`), ms.
    #[serde(default)]
    pub blocking_ms: f64,
    /// Turns this one stands for (1 / the sampling rate; 1 for turns always kept).
    pub weight: f64,
}

/// Largest batch body, bytes (the probe sends at most 60,000).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Why a whole batch was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Over [`MAX_BODY_BYTES`].
    #[error("over {MAX_BODY_BYTES} bytes")]
    TooLarge,
    /// Not JSON, not [`RUM_SCHEMA`], or over [`MAX_TURNS_PER_BATCH`] turns.
    #[error("not a {RUM_SCHEMA} batch")]
    Malformed,
}

/// Parses a batch body: the turns that pass [`Turn::validate`], and how many did
/// not (each turn is judged on its own, so one bad turn does not cost its batch).
/// Never panics, whatever the bytes (`fuzz/fuzz_targets/rum_batch.rs`).
pub fn parse_batch(body: &[u8]) -> Result<(Vec<Turn>, usize), BatchError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(BatchError::TooLarge);
    }
    #[derive(Deserialize)]
    struct Loose {
        schema: String,
        turns: Vec<serde_json::Value>,
    }
    let loose: Loose = serde_json::from_slice(body).map_err(|_| BatchError::Malformed)?;
    if loose.schema != RUM_SCHEMA || loose.turns.len() > MAX_TURNS_PER_BATCH {
        return Err(BatchError::Malformed);
    }
    let mut turns = Vec::with_capacity(loose.turns.len());
    let mut rejected = 0;
    for v in loose.turns {
        match serde_json::from_value::<Turn>(v) {
            Ok(t) if t.validate().is_ok() => turns.push(t),
            _ => rejected += 1,
        }
    }
    Ok((turns, rejected))
}

/// Why a turn was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TurnError {
    /// A time out of range or out of order.
    #[error("{field}: {reason}")]
    Time {
        /// The field.
        field: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// A string that is not the short token it must be.
    #[error("{field}: not a {what}")]
    Text {
        /// The field.
        field: &'static str,
        /// What it must be.
        what: &'static str,
    },
    /// A weight out of range.
    #[error("weight: {0} is not in 1..=10000")]
    Weight(f64),
    /// A count past [`MAX_COUNT`].
    #[error("a count is over {MAX_COUNT}")]
    Count,
}

impl Turn {
    /// Checks every field: times finite, in 0..[`MAX_MS`] and in causal order (a
    /// paint after its chunk), strings short tokens (no text can hide in them),
    /// weight in 1..=10000.
    pub fn validate(&self) -> Result<(), TurnError> {
        for (field, v) in self.ms.all() {
            if let Some(v) = v
                && !(v.is_finite() && (0.0..MAX_MS).contains(&v))
            {
                return Err(TurnError::Time {
                    field,
                    reason: format!("{v} is not in 0..{MAX_MS}"),
                });
            }
        }
        let order = [
            ("first_chunk", self.ms.headers, self.ms.first_chunk),
            ("first_paint", self.ms.first_chunk, self.ms.first_paint),
            ("first_paint", self.ms.first_dom, self.ms.first_paint),
            ("last_chunk", self.ms.first_chunk, self.ms.last_chunk),
            ("last_paint", self.ms.first_paint, self.ms.last_paint),
        ];
        for (field, before, after) in order {
            if let (Some(a), Some(b)) = (before, after)
                && b < a
            {
                return Err(TurnError::Time {
                    field,
                    reason: format!("{b} ms is before the time it follows ({a} ms)"),
                });
            }
        }
        self.validate_chunks()?;
        for (field, v) in [
            ("server_prefill_ms", self.server_prefill_ms),
            ("input_to_fetch_ms", self.input_to_fetch_ms),
            ("blocking_ms", Some(self.blocking_ms)),
        ] {
            if let Some(v) = v
                && !(v.is_finite() && (0.0..MAX_MS).contains(&v))
            {
                return Err(TurnError::Time {
                    field,
                    reason: format!("{v} is not in 0..{MAX_MS}"),
                });
            }
        }
        if !(self.started_unix_ms.is_finite() && self.started_unix_ms > 0.0) {
            return Err(TurnError::Time {
                field: "started_unix_ms",
                reason: "not a time".into(),
            });
        }
        for (field, v) in [
            ("longest_gap_ms", self.longest_gap_ms),
            ("longest_paint_gap_ms", self.longest_paint_gap_ms),
        ] {
            if !(v.is_finite() && (0.0..MAX_MS).contains(&v)) {
                return Err(TurnError::Time {
                    field,
                    reason: format!("{v} is not in 0..{MAX_MS}"),
                });
            }
        }
        let route_ok = self.route.len() <= 200
            && self
                .route
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/:-_.~".contains(c));
        if !route_ok {
            return Err(TurnError::Text {
                field: "route",
                what: "path template (200 characters at most)",
            });
        }
        let token = |s: &str| {
            !s.is_empty()
                && s.len() <= 40
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_+-".contains(c))
        };
        if let Some(k) = &self.error_kind
            && !token(k)
        {
            return Err(TurnError::Text {
                field: "error_kind",
                what: "short token",
            });
        }
        if !token(&self.paint_method) {
            return Err(TurnError::Text {
                field: "paint_method",
                what: "short token",
            });
        }
        if !(self.weight.is_finite() && (1.0..=10_000.0).contains(&self.weight)) {
            return Err(TurnError::Weight(self.weight));
        }
        let counts = [
            self.chunks,
            self.events,
            self.chars,
            self.paints,
            self.chunks_merged,
            self.stalls_250,
            self.stalls_500,
            self.stalls_1000,
            self.clamped,
            self.long_frames,
            self.output_tokens.unwrap_or(0),
            self.input_tokens.unwrap_or(0),
        ];
        if counts.iter().any(|c| *c > MAX_COUNT) {
            return Err(TurnError::Count);
        }
        Ok(())
    }

    /// `chunk_ms`: at most [`MAX_CHUNK_TIMES`], no more than `chunks`, in order,
    /// from the first chunk to the last.
    fn validate_chunks(&self) -> Result<(), TurnError> {
        let c = &self.chunk_ms;
        let bad = |reason: String| {
            Err(TurnError::Time {
                field: "chunk_ms",
                reason,
            })
        };
        if c.len() > MAX_CHUNK_TIMES || c.len() as u64 > self.chunks {
            return bad(format!(
                "{} times for {} chunks (at most {MAX_CHUNK_TIMES})",
                c.len(),
                self.chunks
            ));
        }
        if c.iter()
            .any(|v| !(v.is_finite() && (0.0..MAX_MS).contains(v)))
        {
            return bad(format!("a time is not in 0..{MAX_MS}"));
        }
        if c.windows(2).any(|w| w[1] < w[0]) {
            return bad("times out of order".into());
        }
        let off = |a: Option<f64>, b: Option<&f64>| match (a, b) {
            (Some(a), Some(b)) => (a - b).abs() > CHUNK_MS_SLACK,
            _ => false,
        };
        if off(self.ms.first_chunk, c.first())
            || (c.len() as u64 == self.chunks && off(self.ms.last_chunk, c.last()))
        {
            return bad("the first or last time is not first_chunk or last_chunk".into());
        }
        Ok(())
    }

    /// TTFT as painted less as received: the page's own delay (main thread and
    /// rendering) before the user saw the first text.
    pub fn render_delay_ms(&self) -> Option<f64> {
        Some(self.ms.first_paint? - self.ms.first_chunk?)
    }
}

/// A browser's family and major version from its `User-Agent` (`Chrome 131`,
/// `Firefox 133`, `Safari 18`, `Edge 131`, `HeadlessChrome 131`), or `other`:
/// all the collector keeps of it.
pub fn browser_family(user_agent: &str) -> String {
    let version = |name: &str| -> Option<String> {
        let rest = &user_agent[user_agent.find(name)? + name.len()..];
        let major: String = rest.chars().take_while(char::is_ascii_digit).collect();
        (!major.is_empty()).then_some(major)
    };
    let named = [
        ("Edg/", "Edge"),
        ("OPR/", "Opera"),
        ("Firefox/", "Firefox"),
        ("HeadlessChrome/", "HeadlessChrome"),
        ("Chrome/", "Chrome"),
    ];
    for (token, family) in named {
        if let Some(v) = version(token) {
            return format!("{family} {v}");
        }
    }
    if user_agent.contains("Safari/")
        && let Some(v) = version("Version/")
    {
        return format!("Safari {v}");
    }
    "other".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::rum_turn as turn;

    #[test]
    fn a_valid_turn_passes_and_each_bad_field_is_named() {
        assert_eq!(turn().validate(), Ok(()));
        let bad = |f: fn(&mut Turn), field: &str| {
            let mut t = turn();
            f(&mut t);
            let e = t.validate().unwrap_err().to_string();
            assert!(e.starts_with(field), "{field}: {e}");
        };
        bad(|t| t.ms.first_paint = Some(f64::NAN), "first_paint");
        bad(|t| t.ms.headers = Some(-1.0), "headers");
        bad(|t| t.ms.last_byte = Some(4e6), "last_byte");
        bad(|t| t.ms.first_paint = Some(10.0), "first_paint");
        bad(|t| t.route = "/chat?q=my secret prompt".into(), "route");
        bad(
            |t| t.error_kind = Some("the answer was: ...".into()),
            "error_kind",
        );
        bad(|t| t.weight = 0.5, "weight");
        bad(|t| t.started_unix_ms = f64::INFINITY, "started_unix_ms");
        bad(|t| t.chars = u64::MAX, "a count");
        bad(|t| t.chunk_ms = vec![41.0, 30.0], "chunk_ms");
        bad(|t| t.chunk_ms = vec![45.0, 50.0], "chunk_ms");
        bad(|t| t.chunk_ms = vec![41.0; 21], "chunk_ms");
        bad(|t| t.server_prefill_ms = Some(-3.0), "server_prefill_ms");
        bad(
            |t| t.input_to_fetch_ms = Some(f64::NAN),
            "input_to_fetch_ms",
        );
        bad(|t| t.blocking_ms = -1.0, "blocking_ms");
        let mut ok = turn();
        ok.chunk_ms = (0..20).map(|i| 41.0 + f64::from(i) * 18.9).collect();
        ok.chunk_ms[19] = 400.0;
        assert_eq!(ok.validate(), Ok(()));
    }

    #[test]
    fn the_fuzzers_seed_is_a_valid_batch_and_garbage_is_refused() {
        let seed = include_bytes!("../../../fuzz/seeds/rum_batch/two-turns.json");
        let (turns, rejected) = parse_batch(seed).unwrap();
        assert_eq!((turns.len(), rejected), (2, 0));
        assert_eq!(turns[1].error_kind.as_deref(), Some("http_503"));
        assert_eq!(parse_batch(b"{}"), Err(BatchError::Malformed));
        assert_eq!(
            parse_batch(&vec![b' '; MAX_BODY_BYTES + 1]),
            Err(BatchError::TooLarge)
        );
    }

    #[test]
    fn a_batch_with_unknown_fields_is_refused() {
        let mut v = serde_json::to_value(turn()).unwrap();
        v["prompt"] = "hello".into();
        let batch = serde_json::json!({"schema": RUM_SCHEMA, "turns": [v]});
        assert!(serde_json::from_value::<Batch>(batch).is_err());
    }

    #[test]
    fn browsers_are_reduced_to_family_and_major_version() {
        let chrome = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.85 Safari/537.36";
        assert_eq!(browser_family(chrome), "Chrome 131");
        let edge = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.2903.86";
        assert_eq!(browser_family(edge), "Edge 131");
        let safari = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15";
        assert_eq!(browser_family(safari), "Safari 18");
        let firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";
        assert_eq!(browser_family(firefox), "Firefox 133");
        assert_eq!(browser_family("curl/8.5.0"), "other");
    }
}
