//! The SSE decoder on arbitrary bytes, split at arbitrary points: never panics,
//! never holds more than its cap, and splitting never changes the events.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokenscope_measure::sse::{Decoder, Event};

const CAP: usize = 4096;

fn decode(chunks: &[&[u8]]) -> (Vec<Event>, bool) {
    let mut d = Decoder::with_max_event_bytes(CAP);
    let mut out = Vec::new();
    for c in chunks {
        if d.feed(c, &mut out).is_err() {
            return (out, true);
        }
    }
    out.extend(d.finish());
    (out, false)
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    // The first byte picks a split point.
    let split = usize::from(data[0]) % data.len();
    let body = &data[1..];
    let split = split.min(body.len());
    let (whole, whole_failed) = decode(&[body]);
    let (parts, parts_failed) = decode(&[&body[..split], &body[split..]]);
    for e in whole.iter().chain(&parts) {
        assert!(e.data.len() <= CAP + 1, "an event grew past the cap");
    }
    if !whole_failed && !parts_failed {
        assert_eq!(whole, parts, "splitting changed the events");
    }
});
