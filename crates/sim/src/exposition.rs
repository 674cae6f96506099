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

use super::{Engine, SimConfig};
use tokenscope_measure::buckets::{VLLM_ITL_BOUNDS_S, VLLM_REQUEST_BOUNDS_S, VLLM_TTFT_BOUNDS_S};
use tokenscope_measure::exposition::{Floats, Histogram, Value, Writer};
use tokenscope_measure::prometheus::MetricKind;

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

/// One histogram of the exposition: its name, help and counts.
#[derive(Debug, Clone)]
struct Series {
    name: &'static str,
    help: &'static str,
    counts: Histogram,
}

impl Series {
    fn new(name: &'static str, help: &'static str, bounds_s: &'static [f64]) -> Self {
        Series {
            name,
            help,
            counts: Histogram::new(bounds_s),
        }
    }

    fn observe(&mut self, seconds: f64) {
        self.counts.observe(seconds, 1);
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
    ttft: Series,
    queue: Series,
    prefill: Series,
    decode: Series,
    itl: Series,
    e2e: Series,
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
            ttft: Series::new(
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                VLLM_TTFT_BOUNDS_S,
            ),
            queue: Series::new(
                "vllm:request_queue_time_seconds",
                "Histogram of time spent in WAITING phase for request.",
                VLLM_REQUEST_BOUNDS_S,
            ),
            prefill: Series::new(
                "vllm:request_prefill_time_seconds",
                "Histogram of time spent in PREFILL phase for request.",
                VLLM_REQUEST_BOUNDS_S,
            ),
            decode: Series::new(
                "vllm:request_decode_time_seconds",
                "Histogram of time spent in DECODE phase for request.",
                VLLM_REQUEST_BOUNDS_S,
            ),
            itl: Series::new(
                "vllm:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
                VLLM_ITL_BOUNDS_S,
            ),
            e2e: Series::new(
                "vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.",
                VLLM_REQUEST_BOUNDS_S,
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

    /// The exposition (Prometheus text format 0.0.4, numbers spelled as vLLM's
    /// Python client spells them) with the engine's state `gauges` under the
    /// configuration `cfg`.
    pub fn render(&self, gauges: Gauges, cfg: &SimConfig) -> String {
        let labels = [("model_name", cfg.model.as_str())];
        let kv_capacity = (u64::from(cfg.max_batch) * cfg.max_context_tokens).max(1);
        let kv = gauges.kv_tokens as f64 / kv_capacity as f64;
        let mut w = Writer::new(Floats::Python);
        for (name, help, v) in [
            (
                "vllm:num_requests_running",
                "Number of requests in model execution batches.",
                Value::Count(gauges.running),
            ),
            (
                "vllm:num_requests_waiting",
                "Number of requests waiting to be processed.",
                Value::Count(gauges.waiting),
            ),
            (
                "vllm:kv_cache_usage_perc",
                "KV-cache usage. 1 means 100 percent usage.",
                Value::Real(kv),
            ),
        ] {
            w.family(name, MetricKind::Gauge, help);
            w.sample(name, &labels, v);
        }
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
            w.family(name, MetricKind::Counter, help);
            w.sample(name, &labels, v);
        }
        for h in [
            &self.ttft,
            &self.queue,
            &self.prefill,
            &self.decode,
            &self.itl,
            &self.e2e,
        ] {
            w.family(h.name, MetricKind::Histogram, h.help);
            w.histogram(h.name, &labels, &h.counts);
        }
        w.finish()
    }
}
