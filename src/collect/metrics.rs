//! `tokenscope collect`'s live figures: the intake's counters, and real users' TTFT
//! as received and as painted, the render delay between them and the time per
//! output chunk, as histograms on OpenTelemetry GenAI's advised bucket edges (for
//! the server's time to first token and time per output token), per route and
//! browser, with turns counted by outcome. Each turn counts by its weight (the
//! inverse of its sampling probability), so the histograms estimate all turns,
//! not the sample. `GET /metrics` renders them for Prometheus ([`Metrics::render`]);
//! `--otlp` sends the same state as OTLP/HTTP JSON (`super::otlp`).

use std::collections::BTreeMap;

use tokenscope_core::rum::Turn;
use tokenscope_measure::buckets::{GENAI_TPOT_BOUNDS_S, GENAI_TTFT_BOUNDS_S};
use tokenscope_measure::exposition::{Floats, Histogram, Writer};
use tokenscope_measure::prometheus::MetricKind;

use super::intake::Refusal;

/// Most (route, browser) label sets kept; later ones are counted as `other`.
const MAX_SERIES: usize = 200;

/// One histogram kept per (route, browser): its Prometheus and OpenTelemetry
/// names, what it is, its bucket edges.
#[derive(Debug, Clone, Copy)]
pub struct Figure {
    /// The Prometheus name.
    pub prometheus: &'static str,
    /// The OpenTelemetry metric name.
    pub otel: &'static str,
    /// What it measures.
    pub help: &'static str,
    /// Upper bucket edges, seconds.
    pub bounds_s: &'static [f64],
}

/// The histograms, in [`Series::histograms`] order.
pub const FIGURES: [Figure; 4] = [
    Figure {
        prometheus: "tokenscope_rum_ttft_received_seconds",
        otel: "gen_ai.client.operation.time_to_first_chunk",
        help: "Real users' time to first token as received (first text chunk), from the app's fetch call; weighted.",
        bounds_s: GENAI_TTFT_BOUNDS_S,
    },
    Figure {
        prometheus: "tokenscope_rum_ttft_painted_seconds",
        otel: "tokenscope.rum.time_to_first_paint",
        help: "Real users' time to first token as painted (the frame after its DOM change); weighted.",
        bounds_s: GENAI_TTFT_BOUNDS_S,
    },
    Figure {
        prometheus: "tokenscope_rum_render_delay_seconds",
        otel: "tokenscope.rum.render_delay",
        help: "Painted less received TTFT: the page's own delay; weighted.",
        bounds_s: GENAI_TTFT_BOUNDS_S,
    },
    Figure {
        prometheus: "tokenscope_rum_time_per_output_chunk_seconds",
        otel: "gen_ai.client.operation.time_per_output_chunk",
        help: "Real users' time between text chunks after the first (each chunk's time the probe sent); weighted by the turn.",
        bounds_s: GENAI_TPOT_BOUNDS_S,
    },
];

/// A weighted histogram: each turn counts by its weight.
pub type Weighted = Histogram<f64>;

/// The figures of one (route, browser).
#[derive(Debug, Clone)]
pub struct Series {
    /// One per [`FIGURES`] entry.
    pub histograms: Vec<Weighted>,
    /// Weighted turns by outcome (`complete`, `aborted`, `error`).
    pub outcomes: BTreeMap<&'static str, f64>,
}

impl Default for Series {
    fn default() -> Self {
        Self {
            histograms: FIGURES.iter().map(|f| Histogram::new(f.bounds_s)).collect(),
            outcomes: BTreeMap::new(),
        }
    }
}

/// Everything `/metrics` shows.
#[derive(Debug, Default)]
pub struct Metrics {
    batches: u64,
    turns: u64,
    rejected_turns: u64,
    refused: [u64; Refusal::ALL.len()],
    /// (route, browser) -> its figures.
    series: BTreeMap<(String, String), Series>,
}

impl Metrics {
    /// A refused batch.
    pub fn refused(&mut self, r: Refusal) {
        self.refused[r.index()] += 1;
    }

    /// An accepted batch: its stored turns and how many were dropped.
    pub fn accepted(&mut self, browser: &str, turns: &[Turn], rejected: usize) {
        self.batches += 1;
        self.turns += turns.len() as u64;
        self.rejected_turns += rejected as u64;
        for t in turns {
            let mut key = (t.route.clone(), browser.to_string());
            if !self.series.contains_key(&key) && self.series.len() >= MAX_SERIES {
                key = ("other".into(), "other".into());
            }
            let s = self.series.entry(key).or_default();
            let firsts = [t.ms.first_chunk, t.ms.first_paint, t.render_delay_ms()];
            for (h, v) in s.histograms.iter_mut().zip(firsts) {
                if let Some(ms) = v {
                    h.observe(ms / 1e3, t.weight);
                }
            }
            for gap in t.chunk_ms.windows(2) {
                s.histograms[3].observe((gap[1] - gap[0]) / 1e3, t.weight);
            }
            *s.outcomes.entry(t.outcome.as_str()).or_insert(0.0) += t.weight;
        }
    }

    /// Each (route, browser) and its figures.
    pub fn series(&self) -> impl Iterator<Item = (&(String, String), &Series)> {
        self.series.iter()
    }

    /// The Prometheus text exposition, written by core's [`Writer`].
    pub fn render(&self) -> String {
        let mut w = Writer::new(Floats::Shortest);
        let none: &[(&str, &str)] = &[];
        for (name, help, v) in [
            (
                "tokenscope_rum_batches_total",
                "Batches accepted.",
                self.batches,
            ),
            ("tokenscope_rum_turns_total", "Turns stored.", self.turns),
            (
                "tokenscope_rum_rejected_turns_total",
                "Turns dropped by validation.",
                self.rejected_turns,
            ),
        ] {
            w.family(name, MetricKind::Counter, help);
            w.sample(name, none, v);
        }
        let name = "tokenscope_rum_refused_batches_total";
        w.family(name, MetricKind::Counter, "Batches refused, by reason.");
        for r in Refusal::ALL {
            w.sample(name, &[("reason", r.reason())], self.refused[r.index()]);
        }
        let name = "tokenscope_rum_turns_weighted_total";
        let help = "Turns they stand for (weighted), by outcome.";
        w.family(name, MetricKind::Counter, help);
        for ((route, browser), s) in &self.series {
            for (outcome, weight) in &s.outcomes {
                let labels = [
                    ("route", route.as_str()),
                    ("browser", browser),
                    ("outcome", outcome),
                ];
                w.sample(name, &labels, *weight);
            }
        }
        for (i, fig) in FIGURES.iter().enumerate() {
            w.family(fig.prometheus, MetricKind::Histogram, fig.help);
            for ((route, browser), s) in &self.series {
                let labels = [("route", route.as_str()), ("browser", browser)];
                w.histogram(fig.prometheus, &labels, &s.histograms[i]);
            }
        }
        w.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_land_in_their_buckets_by_weight() {
        let batch = r#"{"schema":"tokenscope.rum/1","turns":[{"route":"/api/chat","started_unix_ms":1.7e12,
            "ms":{"first_chunk":90,"first_dom":91,"first_paint":300},
            "chunks":10,"events":12,"chars":200,"paints":9,"chunks_merged":1,"stalls_250":0,"stalls_500":0,"stalls_1000":0,
            "longest_gap_ms":40,"longest_paint_gap_ms":45,"outcome":"complete","hidden":false,"restored":false,
            "paint_method":"raf+task","weight":10,"chunk_ms":[90,110,140,150,200,260,290,300,310,320]}]}"#;
        let b: tokenscope_core::rum::Batch = serde_json::from_str(batch).unwrap();
        let mut m = Metrics::default();
        m.accepted("Chrome 131", &b.turns, 1);
        m.refused(Refusal::RateLimited);
        let text = m.render();
        let l = r#"route="/api/chat",browser="Chrome 131""#;
        // 90 ms received: first counted at le=0.1; 300 ms painted: at le=0.5.
        assert!(
            text.contains(&format!(
                "tokenscope_rum_ttft_received_seconds_bucket{{{l},le=\"0.08\"}} 0\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "tokenscope_rum_ttft_received_seconds_bucket{{{l},le=\"0.1\"}} 10\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "tokenscope_rum_ttft_painted_seconds_bucket{{{l},le=\"0.25\"}} 0\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "tokenscope_rum_ttft_painted_seconds_bucket{{{l},le=\"0.5\"}} 10\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "tokenscope_rum_render_delay_seconds_count{{{l}}} 10\n"
            )),
            "{text}"
        );
        assert!(text.contains("tokenscope_rum_rejected_turns_total 1\n"));
        // Nine gaps (20, 30, 10, 50, 60, 30, 10, 10, 10 ms), each of weight 10.
        let tpoc = "tokenscope_rum_time_per_output_chunk_seconds";
        for (le, n) in [("0.01", 40), ("0.025", 50), ("0.05", 80), ("0.075", 90)] {
            let line = format!("{tpoc}_bucket{{{l},le=\"{le}\"}} {n}\n");
            assert!(text.contains(&line), "{line} in {text}");
        }
        assert!(text.contains(&format!(
            "tokenscope_rum_turns_weighted_total{{{l},outcome=\"complete\"}} 10\n"
        )));
        assert!(text.contains("tokenscope_rum_refused_batches_total{reason=\"rate_limited\"} 1\n"));
    }
}
