//! # tokenscope-measure
//!
//! Measuring: from the bytes a transport read (each stamped on arrival, before
//! anything else) to one request's record and its metrics.
//!
//! [`sse::Decoder`] (the event-stream grammar) -> [`openai::parse_event`] (the
//! chunks of OpenAI-compatible servers: chat, completions, and the Responses and
//! Messages APIs) -> [`timeline::RequestTimeline`] (follows
//! the request) -> [`record::RequestRecord`] (its timestamps and outcome) ->
//! [`metrics::RequestMetrics`] (TTFT, TPOT, ITL, E2E, ... as `docs/metrics.md`
//! defines them).
//!
//! Beside the streams, the server's own view: [`prometheus::Scrape`] parses a
//! `/metrics` exposition (the engine's or a GPU exporter's); [`exposition::Writer`]
//! writes the ones tokenscope serves, with [`buckets`]' edges where other projects
//! fixed them.
//!
//! And [`parse`]: the text inputs both clients read (durations, URLs, dates, sizes).

pub mod buckets;
pub mod exposition;
pub mod messages;
pub mod metrics;
pub mod openai;
pub mod parse;
pub mod prometheus;
pub mod record;
pub mod responses;
pub mod sse;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod timeline;
pub mod tools;
pub mod wire;
