//! Arbitrary bytes as a streaming response body through the timeline (SSE decoder,
//! chunk parser, metrics): never panics, always ends in exactly one outcome, and
//! the metrics derived from the record are finite.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokenscope_measure::metrics::{MetricOptions, RequestMetrics};
use tokenscope_measure::timeline::RequestTimeline;

fuzz_target!(|data: &[u8]| {
    let mut tl = RequestTimeline::new(0.0, None).max_event_bytes(8192).keep_text(true);
    tl.on_headers(1.0, 200, Some("text/event-stream"));
    // Feed in reads of 1..=64 bytes, chosen by the data itself.
    let mut t = 2.0;
    let mut rest = data;
    while !rest.is_empty() {
        let n = (usize::from(rest[0]) % 64 + 1).min(rest.len());
        let s = tl.on_read(t, &rest[..n]);
        rest = &rest[n..];
        t += 1.0;
        if s.finished {
            break;
        }
    }
    tl.on_end(t);
    let r = tl.finish();
    let m = RequestMetrics::from_record(&r, &MetricOptions::default());
    for v in [m.ttft_ms, m.tpot_ms, m.e2e_ms, m.decode_rate_tok_per_s].into_iter().flatten() {
        assert!(v.is_finite(), "non-finite metric");
    }
    let _ = serde_json::to_string(&r);
});
