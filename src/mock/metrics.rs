//! The mock's `/metrics`, in vLLM's names, from what it really did: the gauges
//! from the engine's state, the counters and histograms from the very records
//! `--log` writes (so the two agree by construction, and a test checks it).
//!
//! | series | from the log record |
//! |---|---|
//! | `vllm:time_to_first_token_seconds` | first chunk − received |
//! | `vllm:request_queue_time_seconds` | scheduled − received |
//! | `vllm:request_prefill_time_seconds` | first chunk − scheduled |
//! | `vllm:request_decode_time_seconds` | last chunk − first chunk |
//! | `vllm:inter_token_latency_seconds` | each gap between chunks |
//! | `vllm:e2e_request_latency_seconds` | end − received |
//!
//! Histograms count completed streamed requests (as vLLM records them when a
//! request finishes); the token counters count every request the engine
//! scheduled. The simulated KV cache holds `max_batch` sequences of the whole
//! context (`max_context_tokens`): its usage is the running requests' prompt
//! and generated tokens over that.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use super::LogRecord;
use super::engine::Gauges;

/// vLLM's bucket bounds (seconds), `vllm/v1/metrics/loggers.py`.
const TTFT_BOUNDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
const ITL_BOUNDS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
const REQUEST_BOUNDS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

struct Histogram {
    name: &'static str,
    help: &'static str,
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative); the last is `+Inf`.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(name: &'static str, help: &'static str, bounds: &'static [f64]) -> Self {
        Histogram {
            name,
            help,
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    fn observe(&mut self, seconds: f64) {
        let i = self.bounds.partition_point(|&b| b < seconds);
        self.counts[i] += 1;
        self.sum += seconds;
        self.count += 1;
    }

    fn write(&self, out: &mut String, labels: &str) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} histogram", self.name);
        let mut cumulative = 0;
        for (i, n) in self.counts.iter().enumerate() {
            cumulative += n;
            let le = self
                .bounds
                .get(i)
                .map_or("+Inf".to_owned(), |b| format!("{b:?}"));
            let _ = writeln!(
                out,
                "{}_bucket{{{labels},le=\"{le}\"}} {cumulative}",
                self.name
            );
        }
        let _ = writeln!(out, "{}_sum{{{labels}}} {:?}", self.name, self.sum);
        let _ = writeln!(out, "{}_count{{{labels}}} {}", self.name, self.count);
    }
}

struct Counters {
    prompt_tokens: u64,
    generation_tokens: u64,
    success: u64,
    ttft: Histogram,
    queue: Histogram,
    prefill: Histogram,
    decode: Histogram,
    itl: Histogram,
    e2e: Histogram,
}

/// The mock's server-side metrics.
pub(super) struct ServerMetrics {
    counters: Mutex<Counters>,
}

impl ServerMetrics {
    pub(super) fn new() -> Self {
        ServerMetrics {
            counters: Mutex::new(Counters {
                prompt_tokens: 0,
                generation_tokens: 0,
                success: 0,
                ttft: Histogram::new(
                    "vllm:time_to_first_token_seconds",
                    "Histogram of time to first token in seconds.",
                    TTFT_BOUNDS,
                ),
                queue: Histogram::new(
                    "vllm:request_queue_time_seconds",
                    "Histogram of time spent in WAITING phase for request.",
                    REQUEST_BOUNDS,
                ),
                prefill: Histogram::new(
                    "vllm:request_prefill_time_seconds",
                    "Histogram of time spent in PREFILL phase for request.",
                    REQUEST_BOUNDS,
                ),
                decode: Histogram::new(
                    "vllm:request_decode_time_seconds",
                    "Histogram of time spent in DECODE phase for request.",
                    REQUEST_BOUNDS,
                ),
                itl: Histogram::new(
                    "vllm:inter_token_latency_seconds",
                    "Histogram of inter-token latency in seconds.",
                    ITL_BOUNDS,
                ),
                e2e: Histogram::new(
                    "vllm:e2e_request_latency_seconds",
                    "Histogram of e2e request latency in seconds.",
                    REQUEST_BOUNDS,
                ),
            }),
        }
    }

    /// One request ended: count it from its log record.
    pub(super) fn observe(&self, r: &LogRecord) {
        let Ok(mut c) = self.counters.lock() else {
            return;
        };
        let Some(scheduled) = r.t_scheduled_ms else {
            return;
        };
        c.prompt_tokens += r.prompt_tokens;
        c.generation_tokens += r.completion_tokens;
        let (Some(&first), Some(&last)) = (r.chunk_times_ms.first(), r.chunk_times_ms.last())
        else {
            return;
        };
        if r.outcome != "completed" {
            return;
        }
        let s = |ms: f64| ms / 1000.0;
        c.success += 1;
        c.ttft.observe(s(first - r.t_received_ms));
        c.queue.observe(s(scheduled - r.t_received_ms));
        c.prefill.observe(s(first - scheduled));
        c.decode.observe(s(last - first));
        for w in r.chunk_times_ms.windows(2) {
            c.itl.observe(s(w[1] - w[0]));
        }
        c.e2e.observe(s(r.t_end_ms - r.t_received_ms));
    }

    /// The exposition: Prometheus text format 0.0.4.
    pub(super) fn render(&self, gauges: &Gauges, model: &str, kv_capacity_tokens: u64) -> String {
        let labels = format!("model_name=\"{}\"", escape(model));
        let mut out = String::new();
        let gauge = |out: &mut String, name: &str, help: &str, v: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{{labels}}} {v}"
            );
        };
        let running = gauges.running.load(Ordering::Relaxed);
        let waiting = gauges.waiting.load(Ordering::Relaxed);
        let kv = gauges.kv_tokens.load(Ordering::Relaxed) as f64 / kv_capacity_tokens.max(1) as f64;
        gauge(
            &mut out,
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            running.to_string(),
        );
        gauge(
            &mut out,
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            waiting.to_string(),
        );
        gauge(
            &mut out,
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            format!("{kv:?}"),
        );
        let Ok(c) = self.counters.lock() else {
            return out;
        };
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{{labels}}} {v}"
            );
        };
        counter(
            &mut out,
            "vllm:num_preemptions_total",
            "Cumulative number of preemption from the engine.",
            0,
        );
        counter(
            &mut out,
            "vllm:prompt_tokens_total",
            "Number of prefill tokens processed.",
            c.prompt_tokens,
        );
        counter(
            &mut out,
            "vllm:generation_tokens_total",
            "Number of generation tokens processed.",
            c.generation_tokens,
        );
        counter(
            &mut out,
            "vllm:request_success_total",
            "Count of successfully processed requests.",
            c.success,
        );
        for h in [&c.ttft, &c.queue, &c.prefill, &c.decode, &c.itl, &c.e2e] {
            h.write(&mut out, &labels);
        }
        out
    }
}

/// A label value, escaped as the text format wants.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
