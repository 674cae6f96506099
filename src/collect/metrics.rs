//! `tokenscope collect`'s `/metrics`: the intake's counters, and real users' TTFT
//! as received and as painted and the render delay between them, as Prometheus
//! histograms on OpenTelemetry GenAI's advised bucket edges for time to first
//! token, per route and browser. Each turn counts by its weight (the inverse of its
//! sampling probability), so the histograms estimate all turns, not the sample.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tokenscope_core::rum::Turn;

use super::intake::Refusal;

/// OpenTelemetry GenAI's advised boundaries for `gen_ai.server.time_to_first_token`,
/// seconds.
pub const GENAI_TTFT_BOUNDS_S: [f64; 16] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// Most (route, browser) label sets kept; later ones are counted as `other`.
const MAX_SERIES: usize = 200;

/// A weighted histogram on [`GENAI_TTFT_BOUNDS_S`]: per-bucket weights (not
/// cumulative; the last is `+Inf`), their sum and the weighted sum of values.
#[derive(Debug, Clone, Default)]
struct Weighted {
    buckets: [f64; GENAI_TTFT_BOUNDS_S.len() + 1],
    count: f64,
    sum: f64,
}

impl Weighted {
    fn observe(&mut self, v_s: f64, weight: f64) {
        let i = GENAI_TTFT_BOUNDS_S
            .iter()
            .position(|b| v_s <= *b)
            .unwrap_or(GENAI_TTFT_BOUNDS_S.len());
        self.buckets[i] += weight;
        self.count += weight;
        self.sum += v_s * weight;
    }
}

/// Everything `/metrics` shows.
#[derive(Debug, Default)]
pub struct Metrics {
    batches: u64,
    turns: u64,
    rejected_turns: u64,
    refused: [u64; Refusal::ALL.len()],
    /// (route, browser) -> [received, painted, render delay].
    series: BTreeMap<(String, String), [Weighted; 3]>,
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
            let h = self.series.entry(key).or_default();
            let figures = [t.ms.first_chunk, t.ms.first_paint, t.render_delay_ms()];
            for (h, v) in h.iter_mut().zip(figures) {
                if let Some(ms) = v {
                    h.observe(ms / 1e3, t.weight);
                }
            }
        }
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
        let histograms = [
            (
                "tokenscope_rum_ttft_received_seconds",
                "Real users' time to first token as received (first text chunk), from the app's fetch call; weighted.",
            ),
            (
                "tokenscope_rum_ttft_painted_seconds",
                "Real users' time to first token as painted (the frame after its DOM change); weighted.",
            ),
            (
                "tokenscope_rum_render_delay_seconds",
                "Painted less received TTFT: the page's own delay; weighted.",
            ),
        ];
        for (i, (name, help)) in histograms.iter().enumerate() {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
            for ((route, browser), hs) in &self.series {
                let h = &hs[i];
                let labels = format!(
                    "route=\"{}\",browser=\"{}\"",
                    escape(route),
                    escape(browser)
                );
                let mut acc = 0.0;
                for (b, w) in GENAI_TTFT_BOUNDS_S.iter().zip(&h.buckets) {
                    acc += w;
                    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {acc}");
                }
                // +Inf and the count from the same running total, so the buckets
                // stay cumulative whatever the rounding of fractional weights.
                acc += h.buckets[GENAI_TTFT_BOUNDS_S.len()];
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
            "paint_method":"raf+task","weight":10}]}"#;
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
        assert!(text.contains("tokenscope_rum_refused_batches_total{reason=\"rate_limited\"} 1\n"));
    }
}
