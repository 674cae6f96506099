//! The mock's `/metrics`: core's simulated exposition
//! ([`tokenscope_sim::exposition`], in vLLM's names) fed the very records
//! `--log` writes, with the engine's gauges at the moment of the scrape.

use std::sync::Mutex;
use std::sync::atomic::Ordering;

use tokenscope_sim::SimConfig;
use tokenscope_sim::exposition::{self, Exposition, Served};

use super::engine::Gauges;
use super::log::LogRecord;

/// The mock's server-side metrics.
pub(super) struct ServerMetrics {
    counters: Mutex<Exposition>,
}

impl ServerMetrics {
    pub(super) fn new() -> Self {
        ServerMetrics {
            counters: Mutex::new(Exposition::new()),
        }
    }

    /// One request ended: count it from its log record.
    pub(super) fn observe(&self, r: &LogRecord) {
        if let Ok(mut c) = self.counters.lock() {
            c.observe(&Served {
                t_received_ms: r.t_received_ms,
                t_scheduled_ms: r.t_scheduled_ms,
                chunk_times_ms: &r.chunk_times_ms,
                prompt_tokens: r.prompt_tokens,
                completion_tokens: r.completion_tokens,
                completed: r.outcome == "completed",
                t_end_ms: r.t_end_ms,
            });
        }
    }

    /// The exposition: Prometheus text format 0.0.4.
    pub(super) fn render(&self, gauges: &Gauges, cfg: &SimConfig) -> String {
        let now = exposition::Gauges {
            running: gauges.running.load(Ordering::Relaxed),
            waiting: gauges.waiting.load(Ordering::Relaxed),
            kv_tokens: gauges.kv_tokens.load(Ordering::Relaxed),
        };
        self.counters
            .lock()
            .map(|c| c.render(now, cfg))
            .unwrap_or_default()
    }
}
