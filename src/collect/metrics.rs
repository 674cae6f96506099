//! `tokenscope collect`'s live figures: the intake's counters, and real users' TTFT
//! as received and as painted, the render delay between them and the time per
//! output chunk, as histograms on OpenTelemetry GenAI's advised bucket edges (for
//! the server's time to first token and time per output token), per route and
//! browser, with turns counted by outcome. Each turn counts by its weight (the
//! inverse of its sampling probability), so the histograms estimate all turns,
//! not the sample. `GET /metrics` renders them for Prometheus ([`Metrics::render`]);
//! `--otlp` sends the same state as OTLP/HTTP JSON (`super::otlp`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tokenscope_core::rum::Turn;

use super::intake::Refusal;

/// OpenTelemetry GenAI's advised boundaries for `gen_ai.server.time_to_first_token`,
/// seconds.
pub const GENAI_TTFT_BOUNDS_S: [f64; 16] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// OpenTelemetry GenAI's advised boundaries for `gen_ai.server.time_per_output_token`,
/// seconds.
pub const GENAI_TPOT_BOUNDS_S: [f64; 13] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
];

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
        bounds_s: &GENAI_TTFT_BOUNDS_S,
    },
    Figure {
        prometheus: "tokenscope_rum_ttft_painted_seconds",
        otel: "tokenscope.rum.time_to_first_paint",
        help: "Real users' time to first token as painted (the frame after its DOM change); weighted.",
        bounds_s: &GENAI_TTFT_BOUNDS_S,
    },
    Figure {
        prometheus: "tokenscope_rum_render_delay_seconds",
        otel: "tokenscope.rum.render_delay",
        help: "Painted less received TTFT: the page's own delay; weighted.",
        bounds_s: &GENAI_TTFT_BOUNDS_S,
    },
    Figure {
        prometheus: "tokenscope_rum_time_per_output_chunk_seconds",
        otel: "gen_ai.client.operation.time_per_output_chunk",
        help: "Real users' time between text chunks after the first (each chunk's time the probe sent); weighted by the turn.",
        bounds_s: &GENAI_TPOT_BOUNDS_S,
    },
];

/// A weighted histogram: per-bucket weights (not cumulative; the last is `+Inf`),
/// their sum and the weighted sum of values.
#[derive(Debug, Clone)]
pub struct Weighted {
    /// Upper edges, seconds.
    pub bounds_s: &'static [f64],
    /// Weight per bucket, `bounds_s.len() + 1` of them.
    pub buckets: Vec<f64>,
    /// Their sum.
    pub count: f64,
    /// The weighted sum of the values, seconds.
    pub sum: f64,
}

impl Weighted {
    fn new(bounds_s: &'static [f64]) -> Self {
        Self {
            bounds_s,
            buckets: vec![0.0; bounds_s.len() + 1],
            count: 0.0,
            sum: 0.0,
        }
    }

    fn observe(&mut self, v_s: f64, weight: f64) {
        let i = self
            .bounds_s
            .iter()
            .position(|b| v_s <= *b)
            .unwrap_or(self.bounds_s.len());
        self.buckets[i] += weight;
        self.count += weight;
        self.sum += v_s * weight;
    }
}

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
            histograms: FIGURES.iter().map(|f| Weighted::new(f.bounds_s)).collect(),
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

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        };
        counter(
            &mut out,
            "tokenscope_rum_batches_total",
            "Batches accepted.",
            self.batches,
        );
        counter(
            &mut out,
            "tokenscope_rum_turns_total",
            "Turns stored.",
            self.turns,
        );
        counter(
            &mut out,
            "tokenscope_rum_rejected_turns_total",
            "Turns dropped by validation.",
            self.rejected_turns,
        );
        let name = "tokenscope_rum_refused_batches_total";
        let _ = writeln!(
            out,
            "# HELP {name} Batches refused, by reason.\n# TYPE {name} counter"
        );
        for r in Refusal::ALL {
            let _ = writeln!(
                out,
                "{name}{{reason=\"{}\"}} {}",
                r.reason(),
                self.refused[r.index()]
            );
        }
        let name = "tokenscope_rum_turns_weighted_total";
        let _ = writeln!(
            out,
            "# HELP {name} Turns they stand for (weighted), by outcome.\n# TYPE {name} counter"
        );
        for ((route, browser), s) in &self.series {
            for (outcome, w) in &s.outcomes {
                let _ = writeln!(
                    out,
                    "{name}{{route=\"{}\",browser=\"{}\",outcome=\"{outcome}\"}} {w}",
                    escape(route),
                    escape(browser)
                );
            }
        }
        for (i, fig) in FIGURES.iter().enumerate() {
            let (name, help) = (fig.prometheus, fig.help);
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
            for ((route, browser), s) in &self.series {
                let h = &s.histograms[i];
                let labels = format!(
                    "route=\"{}\",browser=\"{}\"",
                    escape(route),
                    escape(browser)
                );
                let mut acc = 0.0;
                for (b, w) in h.bounds_s.iter().zip(&h.buckets) {
                    acc += w;
                    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {acc}");
                }
                // +Inf and the count from the same running total, so the buckets
                // stay cumulative whatever the rounding of fractional weights.
                acc += h.buckets[h.bounds_s.len()];
                let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {acc}");
                let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum);
                let _ = writeln!(out, "{name}_count{{{labels}}} {acc}");
            }
        }
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
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
