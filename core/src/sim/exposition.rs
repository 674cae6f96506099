//! The simulated server's `/metrics`, in vLLM's names, from what it really did:
//! the gauges from the engine's state at the moment of the scrape, the counters
//! and histograms from each finished request's own record (the one `tokenscope
//! mock --log` writes, the one the page's simulator logs), so the two agree by
//! construction. `tokenscope mock` serves it over HTTP; the page's built-in
//! simulator answers the page's scrapes with it.
//!
//! | series | from the request's record |
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
//! context (`max_context_tokens`): its usage is the running requests' prompt and
//! generated tokens over that ([`Engine::kv_tokens`](super::Engine::kv_tokens)).

use std::fmt::Write as _;

use super::{Engine, SimConfig};

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

/// One finished request as the simulated server saw it (times in ms on the
/// server's clock).
#[derive(Debug, Clone, Copy)]
pub struct Served<'a> {
    /// Received.
    pub t_received_ms: f64,
    /// Admitted by the engine (its queueing ended); none if it never was.
    pub t_scheduled_ms: Option<f64>,
    /// When each content chunk was handed over.
    pub chunk_times_ms: &'a [f64],
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Tokens sent.
    pub completion_tokens: u64,
    /// Streamed to its end (no fault, no disconnect).
    pub completed: bool,
    /// When its last byte was handed over (or the client left).
    pub t_end_ms: f64,
}

#[derive(Debug, Clone)]
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

/// The engine's state at a scrape.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Gauges {
    /// Requests decoding.
    pub running: u64,
    /// Requests queued.
    pub waiting: u64,
    /// Tokens the running requests hold in the KV cache.
    pub kv_tokens: u64,
}

impl Gauges {
    /// The engine's state now.
    pub fn of(engine: &Engine) -> Self {
        Gauges {
            running: engine.running() as u64,
            waiting: engine.waiting() as u64,
            kv_tokens: engine.kv_tokens(),
        }
    }
}

/// The simulated server's counters and histograms.
#[derive(Debug, Clone)]
pub struct Exposition {
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

impl Default for Exposition {
    fn default() -> Self {
        Self::new()
    }
}

impl Exposition {
    /// Nothing served yet.
    pub fn new() -> Self {
        Exposition {
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
        }
    }

    /// One request ended: count it from its record.
    pub fn observe(&mut self, r: &Served<'_>) {
        let Some(scheduled) = r.t_scheduled_ms else {
            return;
        };
        self.prompt_tokens += r.prompt_tokens;
        self.generation_tokens += r.completion_tokens;
        let (Some(&first), Some(&last)) = (r.chunk_times_ms.first(), r.chunk_times_ms.last())
        else {
            return;
        };
        if !r.completed {
            return;
        }
        let s = |ms: f64| ms / 1000.0;
        self.success += 1;
        self.ttft.observe(s(first - r.t_received_ms));
        self.queue.observe(s(scheduled - r.t_received_ms));
        self.prefill.observe(s(first - scheduled));
        self.decode.observe(s(last - first));
        for w in r.chunk_times_ms.windows(2) {
            self.itl.observe(s(w[1] - w[0]));
        }
        self.e2e.observe(s(r.t_end_ms - r.t_received_ms));
    }

    /// The exposition (Prometheus text format 0.0.4) with the engine's state
    /// `gauges` under the configuration `cfg`.
    pub fn render(&self, gauges: Gauges, cfg: &SimConfig) -> String {
        let labels = format!("model_name=\"{}\"", escape(&cfg.model));
        let kv_capacity = (u64::from(cfg.max_batch) * cfg.max_context_tokens).max(1);
        let kv = gauges.kv_tokens as f64 / kv_capacity as f64;
        let mut out = String::new();
        let mut series = |kind: &str, name: &str, help: &str, v: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{{labels}}} {v}"
            );
        };
        series(
            "gauge",
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            gauges.running.to_string(),
        );
        series(
            "gauge",
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            gauges.waiting.to_string(),
        );
        series(
            "gauge",
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            format!("{kv:?}"),
        );
        for (name, help, v) in [
            (
                "vllm:num_preemptions_total",
                "Cumulative number of preemption from the engine.",
                0,
            ),
            (
                "vllm:prompt_tokens_total",
                "Number of prefill tokens processed.",
                self.prompt_tokens,
            ),
            (
                "vllm:generation_tokens_total",
                "Number of generation tokens processed.",
                self.generation_tokens,
            ),
            (
                "vllm:request_success_total",
                "Count of successfully processed requests.",
                self.success,
            ),
        ] {
            series("counter", name, help, v.to_string());
        }
        for h in [
            &self.ttft,
            &self.queue,
            &self.prefill,
            &self.decode,
            &self.itl,
            &self.e2e,
        ] {
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
