//! Throughput of the SSE decoder (MB/s, events/s) and of the whole per-read path
//! the clients run after stamping a read: decode + chunk parse + timeline.
//!
//! Input: llama.cpp's captured chat stream (tests/fixtures/sse), repeated to ~1 MiB,
//! fed in reads of 64 B (worst case), 1 KiB and 16 KiB.
//!
//!     cargo bench -p tokenscope-measure --bench sse_decoder

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tokenscope_measure::sse::Decoder;
use tokenscope_measure::timeline::RequestTimeline;

fn stream() -> (Vec<u8>, u64) {
    let one = include_bytes!("../../../tests/fixtures/sse/llama-server-chat-usage.sse");
    // Drop the final [DONE] so repeats stay one long stream of chunks.
    let text = std::str::from_utf8(one).unwrap();
    let body = text.replace("data: [DONE]\n\n", "");
    let mut out = Vec::new();
    while out.len() < 1 << 20 {
        out.extend_from_slice(body.as_bytes());
    }
    let events = out.windows(2).filter(|w| w == b"\n\n").count() as u64;
    (out, events)
}

fn decoder(c: &mut Criterion) {
    let (bytes, events) = stream();
    let mut g = c.benchmark_group("sse_decoder_bytes");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    for read in [64usize, 1024, 16 * 1024] {
        g.bench_with_input(BenchmarkId::from_parameter(read), &read, |b, &read| {
            b.iter(|| {
                let mut d = Decoder::new();
                let mut out = Vec::with_capacity(64);
                let mut n = 0;
                for chunk in bytes.chunks(read) {
                    d.feed(black_box(chunk), &mut out).unwrap();
                    n += out.len();
                    out.clear();
                }
                black_box(n)
            });
        });
    }
    g.finish();
    let mut g = c.benchmark_group("sse_decoder_events");
    g.throughput(Throughput::Elements(events));
    g.bench_function("1024", |b| {
        b.iter(|| {
            let mut d = Decoder::new();
            let mut out = Vec::with_capacity(64);
            for chunk in bytes.chunks(1024) {
                d.feed(black_box(chunk), &mut out).unwrap();
                out.clear();
            }
        });
    });
    g.finish();
}

fn timeline(c: &mut Criterion) {
    let (bytes, events) = stream();
    let mut g = c.benchmark_group("timeline_per_event");
    g.throughput(Throughput::Elements(events));
    g.bench_function("decode+parse+record/1024", |b| {
        b.iter(|| {
            let mut tl = RequestTimeline::new(0.0, None);
            tl.on_headers(0.0, 200, Some("text/event-stream"));
            for (i, chunk) in bytes.chunks(1024).enumerate() {
                tl.on_read(i as f64, black_box(chunk));
            }
            black_box(tl.record().token_events_ms.len())
        });
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = decoder, timeline
}
criterion_main!(benches);
