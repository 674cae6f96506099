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

/// `/gpu/metrics`: a simulated GPU drawing `watts` the whole time, in
/// dcgm-exporter's names: its power, its energy counter (millijoules since the
/// server started: `watts` x ms, exact), and its utilisation (100 while a
/// request runs).
pub(super) fn gpu_exposition(watts: f64, uptime_ms: f64, running: u64) -> String {
    use tokenscope_measure::exposition::{Floats, Value, Writer};
    use tokenscope_measure::prometheus::MetricKind;
    let labels = [("gpu", "0"), ("modelName", "tokenscope mock GPU")];
    let mut w = Writer::new(Floats::Python);
    for (name, kind, help, v) in [
        (
            "DCGM_FI_DEV_POWER_USAGE",
            MetricKind::Gauge,
            "Power draw (in W).",
            watts,
        ),
        (
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            MetricKind::Counter,
            "Total energy consumption since boot (in mJ).",
            (watts * uptime_ms).round(),
        ),
        (
            "DCGM_FI_DEV_GPU_UTIL",
            MetricKind::Gauge,
            "GPU utilization (in %).",
            if running > 0 { 100.0 } else { 0.0 },
        ),
    ] {
        w.family(name, kind, help);
        w.sample(name, &labels, Value::Real(v));
    }
    w.finish()
}
