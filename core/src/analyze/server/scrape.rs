//! One scrape as a run records it (the raw file's `scrape` events): when its
//! answer came, whose `/metrics` it was (the server's or the GPU exporter's), and
//! either what was read from it or why nothing was. What is kept is the
//! [`Reading`] (the recognised series), not the text: a report rebuilt from the
//! raw file computes the same server view from it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::engines::{Engine, Series};
use super::reading::{Reading, Value};
use tokenscope_measure::prometheus::Scrape;

/// Whose `/metrics` a scrape read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScrapeTarget {
    /// The inference server (`--server-metrics`).
    Server,
    /// The GPU exporter (`--gpu-metrics`).
    Gpu,
}

impl ScrapeTarget {
    /// How reports name it.
    pub fn label(self) -> &'static str {
        match self {
            ScrapeTarget::Server => "server",
            ScrapeTarget::Gpu => "GPU exporter",
        }
    }
}

/// One scrape, recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScrapeRecord {
    /// Whose metrics.
    pub target: ScrapeTarget,
    /// When the answer was read (ms on the run's clock; for a failure, when it failed).
    pub t_ms: f64,
    /// The engine its names belong to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<Engine>,
    /// The series read (empty for a failure).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<Series, Value>,
    /// Lines the parser skipped (counted, never fatal).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped_lines: u32,
    /// Why nothing was read (an HTTP status, a timeout, no known names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl ScrapeRecord {
    /// A scrape whose answer (the exposition text) arrived at `t_ms`. Text with no
    /// known engine's names is a failed scrape saying so.
    pub fn read(target: ScrapeTarget, t_ms: f64, text: &str) -> Self {
        let scrape = Scrape::parse(text);
        let reading = Reading::of(&scrape);
        let skipped_lines = u32::try_from(scrape.skipped.len()).unwrap_or(u32::MAX);
        let error = reading.engine.is_none().then(|| {
            format!(
                "no known engine's metric names ({} families, {} lines skipped)",
                scrape.families.len(),
                scrape.skipped.len()
            )
        });
        Self {
            target,
            t_ms,
            engine: reading.engine,
            values: reading.values,
            skipped_lines,
            error,
        }
    }

    /// A scrape that failed at `t_ms` for `reason`.
    pub fn failed(target: ScrapeTarget, t_ms: f64, reason: impl Into<String>) -> Self {
        Self {
            target,
            t_ms,
            engine: None,
            values: BTreeMap::new(),
            skipped_lines: 0,
            error: Some(reason.into()),
        }
    }

    /// It read something.
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// What it read.
    pub fn reading(&self) -> Reading {
        Reading {
            engine: self.engine,
            values: self.values.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_through_json_with_its_infinite_bucket() {
        let text = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n\
             # TYPE vllm:e2e_request_latency_seconds histogram\n\
             vllm:e2e_request_latency_seconds_bucket{le=\"1.0\"} 1\n\
             vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} 2\n\
             vllm:e2e_request_latency_seconds_sum 3.5\n\
             vllm:e2e_request_latency_seconds_count 2\n";
        let r = ScrapeRecord::read(ScrapeTarget::Server, 12.5, text);
        assert!(r.ok());
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"+Inf\""), "{json}");
        let back: ScrapeRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.reading().scalar(Series::RequestsRunning), Some(3.0));
    }

    #[test]
    fn garbage_is_a_failed_scrape_that_counts_its_lines() {
        let r = ScrapeRecord::read(ScrapeTarget::Server, 1.0, "<html>nope</html>\n{x}\n");
        assert!(!r.ok());
        assert_eq!(r.skipped_lines, 2);
        assert!(r.error.unwrap().contains("no known engine"));
    }
}
