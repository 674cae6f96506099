//! Writing the Prometheus text exposition format (0.0.4): the one writer behind
//! every `/metrics` tokenscope serves (the simulated vLLM's,
//! `tokenscope_sim::exposition`; `bench --metrics-listen`'s live figures; `collect`'s
//! real-user histograms), and the histogram they all fill. [`super::prometheus`]
//! reads what it writes (the tests below parse it back).
//!
//! What it writes: `# HELP` (`\` and newline escaped) and `# TYPE` per family, then
//! one line per sample, `name{k="v",…} value`, label values escaped (`\\ \" \n`),
//! no braces when a sample has no label; a histogram as its cumulative
//! `_bucket{…,le="…"}` lines (`+Inf` last), `_sum` and `_count`, its buckets
//! counted or weighted ([`Weight`]). Counts are written as integers; other values
//! and the `le` edges as [`Floats`] says, `+Inf`, `-Inf` and `NaN` as Prometheus
//! spells them.
//!
//! Written here rather than taken from `prometheus-client` (0.23 to 0.26): that
//! crate owns the metrics (registered up front, atomics) and counts whole
//! observations, where `collect` counts each turn by a fractional weight (the
//! inverse of its sampling probability); its text is OpenMetrics (`# EOF`, `_total`
//! added to counter names, its own spelling of numbers), where the simulated
//! server writes vLLM's names with the Python client's spelling (`le="1.0"`). A
//! writer into a `String` needs no clock and builds for wasm32, where the page's
//! simulator answers scrapes with it.

use std::fmt::Write as _;
use std::ops::Add;

use super::prometheus::MetricKind;

/// How values that are not counts, and the `le` edges, are spelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Floats {
    /// The shortest form that reads back the same, a whole number without a
    /// point (`1`, `0.25`): tokenscope's own exporters.
    Shortest,
    /// Always with a point (`1.0`, `0.0`), as vLLM's Python client writes: the
    /// simulated vLLM.
    Python,
}

impl Floats {
    /// `v` spelled this way; `+Inf`, `-Inf` and `NaN` either way.
    pub fn format(self, v: f64) -> String {
        if v.is_nan() {
            "NaN".into()
        } else if v.is_infinite() {
            if v > 0.0 { "+Inf" } else { "-Inf" }.into()
        } else {
            match self {
                Floats::Shortest => v.to_string(),
                Floats::Python => format!("{v:?}"),
            }
        }
    }
}

/// A sample's value: a count (written as an integer) or any other figure
/// (written as [`Floats`] says).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A whole count.
    Count(u64),
    /// Any other figure.
    Real(f64),
}

impl Value {
    /// The value as a float (remote write carries only floats).
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Count(n) => n as f64,
            Value::Real(v) => v,
        }
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Count(n)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}

/// What a histogram's bucket holds: a count of observations (`u64`) or their
/// total weight (`f64`).
pub trait Weight: Copy + Default + Add<Output = Self> + Into<Value> {
    /// The weight as a float, to weigh an observation's value in the sum.
    fn as_f64(self) -> f64;
}

impl Weight for u64 {
    fn as_f64(self) -> f64 {
        self as f64
    }
}

impl Weight for f64 {
    fn as_f64(self) -> f64 {
        self
    }
}

/// A Prometheus histogram: fixed upper edges (`le`, seconds), what each bucket
/// holds (not cumulative; the last is `+Inf`) and the weighted sum of the values.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram<W = u64> {
    bounds_s: &'static [f64],
    buckets: Vec<W>,
    sum_s: f64,
}

impl<W: Weight> Histogram<W> {
    /// Empty, on the ascending edges `bounds_s`.
    pub fn new(bounds_s: &'static [f64]) -> Self {
        Self {
            bounds_s,
            buckets: vec![W::default(); bounds_s.len() + 1],
            sum_s: 0.0,
        }
    }

    /// Adds `v_s` with `weight` (1 for a plain count) to the first bucket whose
    /// edge is at or above it (`le` is inclusive), `+Inf` past the last.
    pub fn observe(&mut self, v_s: f64, weight: W) {
        let i = self.bounds_s.partition_point(|&b| b < v_s);
        self.buckets[i] = self.buckets[i] + weight;
        self.sum_s += v_s * weight.as_f64();
    }

    /// The upper edges, seconds.
    pub fn bounds_s(&self) -> &'static [f64] {
        self.bounds_s
    }

    /// What each bucket holds, `bounds_s().len() + 1` of them (`+Inf` last).
    pub fn buckets(&self) -> &[W] {
        &self.buckets
    }

    /// The weighted sum of the values, seconds.
    pub fn sum_s(&self) -> f64 {
        self.sum_s
    }

    /// What all the buckets hold together.
    pub fn count(&self) -> W {
        self.buckets.iter().fold(W::default(), |acc, &w| acc + w)
    }

    /// The exposed series: `("_bucket", Some(le), cumulative)` per edge then
    /// `+Inf` (`le` infinite), `("_sum", None, sum)`, `("_count", None, total)`.
    /// `+Inf` and the count come from the same running total, so the buckets stay
    /// cumulative whatever the rounding of fractional weights.
    pub fn series(&self) -> Vec<(&'static str, Option<f64>, Value)> {
        let mut out = Vec::with_capacity(self.buckets.len() + 2);
        let mut acc = W::default();
        let edges = self.bounds_s.iter().copied().chain([f64::INFINITY]);
        for (le, &w) in edges.zip(&self.buckets) {
            acc = acc + w;
            out.push(("_bucket", Some(le), acc.into()));
        }
        out.push(("_sum", None, Value::Real(self.sum_s)));
        out.push(("_count", None, acc.into()));
        out
    }
}

/// The text of one exposition, written family by family.
#[derive(Debug, Clone)]
pub struct Writer {
    out: String,
    floats: Floats,
}

impl Writer {
    /// An empty exposition whose figures are spelled as `floats` says.
    pub fn new(floats: Floats) -> Self {
        Self {
            out: String::new(),
            floats,
        }
    }

    /// A family's `# HELP` and `# TYPE` lines; its samples follow.
    pub fn family(&mut self, name: &str, kind: MetricKind, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let kind = kind.as_str();
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample line: `name{labels} value`.
    pub fn sample<K: AsRef<str>, V: AsRef<str>>(
        &mut self,
        name: &str,
        labels: &[(K, V)],
        value: impl Into<Value>,
    ) {
        self.line(name, "", labels, None, value.into());
    }

    /// A histogram's samples (see [`Histogram::series`]), `le` after `labels`.
    pub fn histogram<W: Weight, K: AsRef<str>, V: AsRef<str>>(
        &mut self,
        name: &str,
        labels: &[(K, V)],
        h: &Histogram<W>,
    ) {
        for (suffix, le, value) in h.series() {
            self.line(name, suffix, labels, le, value);
        }
    }

    /// The exposition written so far.
    pub fn finish(self) -> String {
        self.out
    }

    fn line<K: AsRef<str>, V: AsRef<str>>(
        &mut self,
        name: &str,
        suffix: &str,
        labels: &[(K, V)],
        le: Option<f64>,
        value: Value,
    ) {
        let out = &mut self.out;
        out.push_str(name);
        out.push_str(suffix);
        let le = le.map(|b| self.floats.format(b));
        let le = le.as_ref().map(|b| ("le", b.as_str()));
        let pairs = labels.iter().map(|(k, v)| (k.as_ref(), v.as_ref()));
        let mut pairs = pairs.chain(le).peekable();
        if pairs.peek().is_some() {
            out.push('{');
            for (i, (k, v)) in pairs.enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{k}=\"{}\"", escape_label_value(v));
            }
            out.push('}');
        }
        let value = match value {
            Value::Count(n) => n.to_string(),
            Value::Real(v) => self.floats.format(v),
        };
        let _ = writeln!(out, " {value}");
    }
}

/// A label value as the text format wants it: `\`, `"` and newline escaped.
fn escape_label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prometheus::Scrape;

    const EDGES: &[f64] = &[0.1, 1.0, 2.5];

    #[test]
    fn what_it_writes_reads_back_the_same_through_the_parser() {
        let odd = "a \"quoted\" \\ back\nslash ünï";
        let mut counted = Histogram::<u64>::new(EDGES);
        for v in [0.05, 0.1, 0.7, 2.5, 9.0] {
            counted.observe(v, 1);
        }
        let mut weighted = Histogram::<f64>::new(EDGES);
        weighted.observe(0.5, 2.5);
        weighted.observe(3.0, 0.25);
        for floats in [Floats::Shortest, Floats::Python] {
            let mut w = Writer::new(floats);
            w.family(
                "up_total",
                MetricKind::Counter,
                "Help with \\ and\nnewline.",
            );
            w.sample::<&str, &str>("up_total", &[], 7u64);
            w.family("g", MetricKind::Gauge, "A gauge.");
            w.sample("g", &[("who", odd), ("b", "")], 0.5);
            w.sample("g", &[("who", "inf")], f64::INFINITY);
            w.family("h_seconds", MetricKind::Histogram, "Counted.");
            w.histogram("h_seconds", &[("who", odd)], &counted);
            w.family("w_seconds", MetricKind::Histogram, "Weighted.");
            w.histogram("w_seconds", &[("k", "v")], &weighted);
            let text = w.finish();
            let s = Scrape::parse(&text);
            assert!(s.skipped.is_empty(), "{:?}\n{text}", s.skipped);

            let up = s.family("up_total").unwrap();
            assert_eq!(up.kind, MetricKind::Counter);
            assert_eq!(up.help.as_deref(), Some("Help with \\ and\nnewline."));
            assert_eq!(up.samples[0].value, 7.0);
            assert!(up.samples[0].labels.is_empty());
            let g: Vec<_> = s.samples("g").collect();
            assert_eq!((g[0].label("who"), g[0].label("b")), (Some(odd), Some("")));
            assert_eq!((g[0].value, g[1].value), (0.5, f64::INFINITY));

            let h = s.family("h_seconds").unwrap();
            assert_eq!(h.kind, MetricKind::Histogram);
            let got: Vec<(String, Option<&str>, f64)> = h
                .samples
                .iter()
                .map(|x| (x.name.clone(), x.label("le"), x.value))
                .collect();
            fn le(floats: Floats, b: &str) -> &str {
                match floats {
                    Floats::Python if b == "1" => "1.0",
                    _ => b,
                }
            }
            let want = [
                ("h_seconds_bucket", Some(le(floats, "0.1")), 2.0),
                ("h_seconds_bucket", Some(le(floats, "1")), 3.0),
                ("h_seconds_bucket", Some(le(floats, "2.5")), 4.0),
                ("h_seconds_bucket", Some("+Inf"), 5.0),
                ("h_seconds_sum", None, 0.05 + 0.1 + 0.7 + 2.5 + 9.0),
                ("h_seconds_count", None, 5.0),
            ];
            let want: Vec<_> = want
                .iter()
                .map(|(n, l, v)| (n.to_string(), *l, *v))
                .collect();
            assert_eq!(got, want, "{text}");
            assert!(h.samples.iter().all(|x| x.label("who") == Some(odd)));

            let w: Vec<f64> = s.samples("w_seconds_bucket").map(|x| x.value).collect();
            assert_eq!(w, [0.0, 2.5, 2.5, 2.75]);
            let sum = s.samples("w_seconds_sum").next().unwrap().value;
            assert_eq!(sum, 0.5 * 2.5 + 3.0 * 0.25);
            assert_eq!(s.samples("w_seconds_count").next().unwrap().value, 2.75);
        }
    }

    #[test]
    fn the_two_spellings_differ_only_in_whole_numbers_and_edges() {
        let line = |floats| {
            let mut w = Writer::new(floats);
            let mut h = Histogram::<u64>::new(&[1.0]);
            h.observe(2.0, 1);
            w.sample("x", &[("a", "b")], Value::Real(0.0));
            w.sample::<&str, &str>("n", &[], 3u64);
            w.histogram::<u64, &str, &str>("h", &[], &h);
            w.finish()
        };
        assert_eq!(
            line(Floats::Shortest),
            "x{a=\"b\"} 0\nn 3\nh_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 1\nh_sum 2\nh_count 1\n"
        );
        assert_eq!(
            line(Floats::Python),
            "x{a=\"b\"} 0.0\nn 3\nh_bucket{le=\"1.0\"} 0\nh_bucket{le=\"+Inf\"} 1\nh_sum 2.0\nh_count 1\n"
        );
    }

    #[test]
    fn observations_land_in_the_first_bucket_at_or_above_them() {
        let mut h = Histogram::<f64>::new(EDGES);
        h.observe(1.0, 2.0); // on an edge: that bucket
        h.observe(1.0001, 0.5); // just past: the next
        h.observe(100.0, 1.0); // +Inf
        assert_eq!(h.buckets(), [0.0, 2.0, 0.5, 1.0]);
        assert_eq!(h.count(), 3.5);
        assert_eq!(h.sum_s(), 2.0 + 0.50005 + 100.0);
    }
}
