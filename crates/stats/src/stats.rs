//! Summary statistics: one [`Summary`] type for every metric, from exact samples or,
//! on long runs, from a mergeable HdrHistogram.
//!
//! ## Percentile method
//!
//! Percentiles of exact samples use **linear interpolation between closest ranks**
//! (numpy's default `linear` method, also criterion's): sort the `n` samples
//! `x[0] <= ... <= x[n-1]`; for a quantile `q` in `[0, 1]` let `h = (n - 1) * q`;
//! the percentile is `x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])`.
//! So p50 of `[1, 2, 3, 4]` is 2.5 and p90 of `1..=10` is 9.1.
//!
//! `std` is the sample standard deviation (divisor `n - 1`); with one sample it is 0.
//! With no samples every statistic is `None` (`null` in JSON), never 0.
//!
//! ## Histograms
//!
//! [`Samples`] keeps exact values up to a cap (default [`DEFAULT_SAMPLE_CAP`]); past it,
//! it moves them into an HdrHistogram of microseconds with 3 significant digits
//! and keeps counting there, so a soak's memory stays flat. Mean, std, min and max
//! stay exact (running sums); percentiles then come from the histogram by the same
//! method as above, each ranked sample taken as the middle of its bucket (the
//! smallest and largest as the exact min and max): within [`HISTOGRAM_PRECISION`]
//! of the exact percentile (0.1%, or 1 µs below 1 ms). Such a summary says so
//! ([`Summary::histogram`]).
//!
//! A histogram travels in a report as [`HistogramData`] (its non-empty buckets):
//! shards' reports merge exactly within that precision (`tokenscope merge`).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// How many exact samples a [`Samples`] keeps before switching to a histogram.
pub const DEFAULT_SAMPLE_CAP: usize = 1_000_000;

/// Significant digits of the histogram (0.1% relative precision).
pub const HISTOGRAM_SIGFIG: u8 = 3;

/// How far a percentile from a histogram can be from the exact one: this
/// fraction of the value (a bucket is at most 1/1024 of its values wide, and a
/// sample is taken as its bucket's middle), or [`HISTOGRAM_PRECISION_ABS`]
/// (values are kept in whole microseconds), whichever is larger.
pub const HISTOGRAM_PRECISION: f64 = 0.001;

/// The absolute part of [`HISTOGRAM_PRECISION`], in the metric's unit (ms): 1 µs.
pub const HISTOGRAM_PRECISION_ABS: f64 = 0.001;

/// The quantiles every summary reports.
pub const QUANTILES: [(&str, f64); 5] = [
    ("p50", 0.50),
    ("p90", 0.90),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p999", 0.999),
];

/// count, mean, std, min, max and the percentiles p50..p99.9 of one metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Summary {
    /// Number of samples.
    pub count: u64,
    /// Arithmetic mean.
    pub mean: Option<f64>,
    /// Sample standard deviation (n - 1); 0 for one sample.
    pub std: Option<f64>,
    /// Smallest sample.
    pub min: Option<f64>,
    /// Largest sample.
    pub max: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// 99.9th percentile.
    pub p999: Option<f64>,
    /// True when the percentiles came from a histogram (precision: 3 significant digits).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub histogram: bool,
}

impl Summary {
    /// Summarize exact samples (NaN values are ignored).
    pub fn from_samples(samples: &[f64]) -> Self {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| !v.is_nan()).collect();
        sorted.sort_by(f64::total_cmp);
        Self::from_sorted(&sorted)
    }

    /// Summarize samples already sorted ascending (no NaN).
    pub fn from_sorted(sorted: &[f64]) -> Self {
        let n = sorted.len();
        if n == 0 {
            return Self::default();
        }
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let std = if n > 1 {
            (sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let q = |p| Some(percentile_sorted(sorted, p));
        Self {
            count: n as u64,
            mean: Some(mean),
            std: Some(std),
            min: Some(sorted[0]),
            max: Some(sorted[n - 1]),
            p50: q(0.50),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
            histogram: false,
        }
    }

    /// A percentile by name (`p50`, `p90`, `p95`, `p99`, `p999`), or `mean`/`max`/`min`.
    pub fn get(&self, name: &str) -> Option<f64> {
        match name {
            "p50" | "median" => self.p50,
            "p90" => self.p90,
            "p95" => self.p95,
            "p99" => self.p99,
            "p999" | "p99.9" => self.p999,
            "mean" | "avg" => self.mean,
            "max" => self.max,
            "min" => self.min,
            _ => None,
        }
    }
}

/// The `q` quantile (0..=1) of sorted samples, by linear interpolation between
/// closest ranks. Panics on an empty slice.
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    assert!(!sorted.is_empty(), "percentile of no samples");
    let q = q.clamp(0.0, 1.0);
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// The `q` quantile of unsorted samples (sorts a copy); `None` when empty.
pub fn percentile(samples: &[f64], q: f64) -> Option<f64> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| !v.is_nan()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    Some(percentile_sorted(&sorted, q))
}

/// Weighted quantile `q` of `(value, weight)` pairs sorted by value: the smallest
/// value whose cumulative weight reaches `q` of the total (the inverse of the
/// weighted CDF; no interpolation). Real-user turns carry the inverse of their
/// sampling probability as weight (`core::rum::summary`).
pub fn weighted_quantile(sorted: &[(f64, f64)], q: f64) -> f64 {
    let total: f64 = sorted.iter().map(|p| p.1).sum();
    let want = q * total;
    let mut acc = 0.0;
    for (v, w) in sorted {
        acc += w;
        if acc >= want {
            return *v;
        }
    }
    sorted.last().map_or(f64::NAN, |p| p.0)
}

/// Median of samples; `None` when empty.
pub fn median(samples: &[f64]) -> Option<f64> {
    percentile(samples, 0.5)
}

/// A collection of samples of one metric: exact up to a cap, then a histogram.
/// Mergeable, so per-round or per-minute collections can be combined.
#[derive(Debug, Clone)]
pub struct Samples {
    values: Vec<f64>,
    hist: Option<Histogram<u64>>,
    cap: usize,
    count: u64,
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
}

impl Default for Samples {
    fn default() -> Self {
        Self::new()
    }
}

impl Samples {
    /// Empty, with the default cap.
    pub fn new() -> Self {
        Self::with_cap(DEFAULT_SAMPLE_CAP)
    }

    /// Empty, switching to a histogram past `cap` exact samples. (Never
    /// inlined: a level makes twenty, and the page's wasm carries each copy.)
    #[inline(never)]
    pub fn with_cap(cap: usize) -> Self {
        Self {
            values: Vec::new(),
            hist: None,
            cap,
            count: 0,
            mean: 0.0,
            m2: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }

    /// Number of samples recorded.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether the samples moved into a histogram.
    pub fn is_histogram(&self) -> bool {
        self.hist.is_some()
    }

    /// Exact values (empty once the samples moved into a histogram).
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Record one value (NaN is ignored; negative values are kept exactly but
    /// clamped to 0 in the histogram).
    pub fn push(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        // Welford's running mean and variance: exact whatever the storage.
        self.count += 1;
        let delta = v - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (v - self.mean);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        match &mut self.hist {
            Some(h) => record_hist(h, v),
            None => {
                self.values.push(v);
                if self.values.len() > self.cap {
                    self.spill();
                }
            }
        }
    }

    fn spill(&mut self) {
        let mut h = new_histogram();
        for v in self.values.drain(..) {
            record_hist(&mut h, v);
        }
        self.values = Vec::new();
        self.hist = Some(h);
    }

    /// Add all of `other`'s samples.
    pub fn merge(&mut self, other: &Samples) {
        if other.count == 0 {
            return;
        }
        // Chan et al.'s parallel combination of running moments.
        let n_a = self.count as f64;
        let n_b = other.count as f64;
        let n = n_a + n_b;
        let delta = other.mean - self.mean;
        let mean = self.mean + delta * n_b / n;
        let m2 = self.m2 + other.m2 + delta * delta * n_a * n_b / n;
        let (min, max) = (self.min.min(other.min), self.max.max(other.max));
        match (&mut self.hist, &other.hist) {
            (None, None) => {
                self.values.extend_from_slice(&other.values);
                if self.values.len() > self.cap {
                    self.spill();
                }
            }
            (Some(h), None) => {
                for &v in &other.values {
                    record_hist(h, v);
                }
            }
            (None, Some(oh)) => {
                self.spill();
                if let Some(h) = &mut self.hist {
                    h.add(oh).ok();
                }
            }
            (Some(h), Some(oh)) => {
                h.add(oh).ok();
            }
        }
        self.count += other.count;
        self.mean = mean;
        self.m2 = m2;
        self.min = min;
        self.max = max;
    }

    /// The `q` quantile (0..=1) of everything recorded (from the histogram past
    /// the cap, within [`HISTOGRAM_PRECISION`]); `None` when empty.
    pub fn percentile(&self, q: f64) -> Option<f64> {
        match &self.hist {
            None => percentile(&self.values, q),
            Some(h) => self.hist_quantiles(h, &[q]).pop(),
        }
    }

    /// The `qs` quantiles from the histogram, by the exact method's
    /// interpolation between ranks: the sample of rank `r` (0-based) is the
    /// middle of the bucket holding it, the first and last the exact min and max.
    fn hist_quantiles(&self, h: &Histogram<u64>, qs: &[f64]) -> Vec<f64> {
        if self.count == 0 {
            return Vec::new();
        }
        let last = self.count - 1;
        let n = self.count as f64;
        let at = |r: u64| match r {
            0 => self.min,
            r if r >= last => self.max,
            // value_at_quantile(q) is the bucket of the ceil(q n)-th sample:
            // with q = (r + 0.5) / n, rank r's, whatever the float rounding.
            r => h.median_equivalent(h.value_at_quantile((r as f64 + 0.5) / n)) as f64 / 1000.0,
        };
        qs.iter()
            .map(|&q| {
                let pos = last as f64 * q.clamp(0.0, 1.0);
                let lo = pos.floor() as u64;
                let (a, b) = (at(lo), at(lo + 1));
                a + (pos - pos.floor()) * (b - a)
            })
            .collect()
    }

    /// What a report carries to merge these samples later: the histogram's
    /// non-empty buckets (the exact samples put into one first).
    pub fn histogram_data(&self) -> HistogramData {
        let built;
        let h = match &self.hist {
            Some(h) => h,
            None => {
                let mut h = new_histogram();
                for &v in &self.values {
                    record_hist(&mut h, v);
                }
                built = h;
                &built
            }
        };
        let (mut us, mut n) = (Vec::new(), Vec::new());
        for v in h.iter_recorded() {
            us.push(v.value_iterated_to());
            n.push(v.count_at_value());
        }
        HistogramData { us, n }
    }

    /// Samples back from a report: its histogram and the summary's exact count,
    /// mean, std, min and max. `None` when the two disagree on the count.
    pub fn from_histogram(data: &HistogramData, summary: &Summary) -> Option<Self> {
        let mut h = new_histogram();
        for (&v, &n) in data.us.iter().zip(&data.n) {
            h.record_n(v, n).ok()?;
        }
        if h.len() != summary.count || data.us.len() != data.n.len() {
            return None;
        }
        let mut s = Self::new();
        if summary.count == 0 {
            return Some(s);
        }
        s.count = summary.count;
        s.mean = summary.mean?;
        s.m2 = summary.std.unwrap_or(0.0).powi(2) * (summary.count - 1) as f64;
        s.min = summary.min?;
        s.max = summary.max?;
        s.hist = Some(h);
        Some(s)
    }

    /// The quantile curve at probabilities `k / (points - 1)` for `k = 0..points`
    /// (e.g. 101 points: every percentile from p0 to p100), for CDFs and
    /// histograms; empty when there are no samples.
    pub fn quantile_curve(&self, points: usize) -> Vec<f64> {
        if self.count == 0 || points < 2 {
            return Vec::new();
        }
        let probs = (0..points).map(|k| k as f64 / (points - 1) as f64);
        match &self.hist {
            None => {
                let mut sorted = self.values.clone();
                sorted.sort_by(f64::total_cmp);
                probs.map(|q| percentile_sorted(&sorted, q)).collect()
            }
            Some(h) => self.hist_quantiles(h, &probs.collect::<Vec<f64>>()),
        }
    }

    /// The summary of everything recorded.
    pub fn summary(&self) -> Summary {
        match &self.hist {
            None => Summary::from_samples(&self.values),
            Some(h) => {
                if self.count == 0 {
                    return Summary::default();
                }
                let qs: Vec<f64> = QUANTILES.iter().map(|(_, q)| *q).collect();
                let at = self.hist_quantiles(h, &qs);
                let q = |p: f64| QUANTILES.iter().position(|(_, x)| *x == p).map(|i| at[i]);
                Summary {
                    count: self.count,
                    mean: Some(self.mean),
                    std: Some(if self.count > 1 {
                        (self.m2 / (self.count - 1) as f64).sqrt()
                    } else {
                        0.0
                    }),
                    min: Some(self.min),
                    max: Some(self.max),
                    p50: q(0.50),
                    p90: q(0.90),
                    p95: q(0.95),
                    p99: q(0.99),
                    p999: q(0.999),
                    histogram: true,
                }
            }
        }
    }
}

/// A histogram as a report carries it: its non-empty buckets, each as the
/// highest value it holds (in thousandths of the metric's unit: µs for ms) and
/// its count. Recording those values again rebuilds the same histogram.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct HistogramData {
    /// Bucket values, ascending.
    pub us: Vec<u64>,
    /// Samples in each bucket.
    pub n: Vec<u64>,
}

fn new_histogram() -> Histogram<u64> {
    let mut h = Histogram::new(HISTOGRAM_SIGFIG).expect("3 significant digits is valid");
    h.auto(true);
    h
}

fn record_hist(h: &mut Histogram<u64>, v_ms: f64) {
    // Microseconds, so a 1 ms value keeps 3 significant digits.
    let us = (v_ms.max(0.0) * 1000.0).round() as u64;
    h.record(us).ok();
}

/// Ordinary least squares fit `y = a + b x`, with the standard errors of the slope
/// and the intercept and a two-sided significance test of the slope: used by the
/// soak drift check and the GEMVs' fixed cost per dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinearFit {
    /// Points fitted.
    pub n: u64,
    /// Intercept.
    pub intercept: f64,
    /// Slope.
    pub slope: f64,
    /// Standard error of the slope.
    pub slope_stderr: f64,
    /// `slope / slope_stderr`.
    pub t_stat: f64,
    /// Standard error of the intercept (0 in fits written before it was added).
    #[serde(default)]
    pub intercept_stderr: f64,
}

impl LinearFit {
    /// Fit points; `None` with fewer than 3 points or no spread in x.
    pub fn fit(points: &[(f64, f64)]) -> Option<Self> {
        let n = points.len();
        if n < 3 {
            return None;
        }
        let nf = n as f64;
        let mx = points.iter().map(|p| p.0).sum::<f64>() / nf;
        let my = points.iter().map(|p| p.1).sum::<f64>() / nf;
        let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        if sxx <= 0.0 {
            return None;
        }
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let slope = sxy / sxx;
        let intercept = my - slope * mx;
        let sse: f64 = points
            .iter()
            .map(|p| (p.1 - intercept - slope * p.0).powi(2))
            .sum();
        let slope_stderr = (sse / (nf - 2.0) / sxx).sqrt();
        let intercept_stderr = (sse / (nf - 2.0) * (1.0 / nf + mx * mx / sxx)).sqrt();
        let t_stat = if slope_stderr > 0.0 {
            slope / slope_stderr
        } else if slope == 0.0 {
            0.0
        } else {
            // A perfect fit: as significant as can be (finite, so JSON can hold it).
            f64::MAX.copysign(slope)
        };
        Some(Self {
            n: n as u64,
            intercept,
            slope,
            slope_stderr,
            t_stat,
            intercept_stderr,
        })
    }

    /// Half-width of the 95% confidence interval of the intercept.
    pub fn intercept_ci95(&self) -> f64 {
        t_critical_95(self.n.saturating_sub(2)) * self.intercept_stderr
    }

    /// Half-width of the 95% confidence interval of the slope (Student's t, n - 2
    /// degrees of freedom).
    pub fn slope_ci95(&self) -> f64 {
        t_critical_95(self.n.saturating_sub(2)) * self.slope_stderr
    }

    /// Whether the slope differs from 0 at the 95% level.
    pub fn significant(&self) -> bool {
        self.t_stat.abs() > t_critical_95(self.n.saturating_sub(2))
    }
}

/// Two-sided 95% critical value of Student's t with `df` degrees of freedom.
pub fn t_critical_95(df: u64) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[(df - 1) as usize],
        31..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn known_percentiles() {
        let s = Summary::from_samples(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(s.p50, Some(2.5));
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = Summary::from_samples(&v);
        assert!(close(s.p90.unwrap(), 9.1));
        assert!(close(s.p95.unwrap(), 9.55));
        assert!(close(s.p99.unwrap(), 9.91));
        assert!(close(s.p999.unwrap(), 9.991));
        assert_eq!(s.mean, Some(5.5));
        assert!(close(s.std.unwrap(), 3.0276503540974917)); // numpy std(ddof=1)
        assert_eq!((s.min, s.max), (Some(1.0), Some(10.0)));
        // numpy.percentile([15, 20, 35, 40, 50], [40, 95]) == [29.0, 48.0]
        let v = [35.0, 15.0, 50.0, 20.0, 40.0];
        assert!(close(percentile(&v, 0.40).unwrap(), 29.0));
        assert!(close(percentile(&v, 0.95).unwrap(), 48.0));
    }

    #[test]
    fn edge_cases() {
        let s = Summary::from_samples(&[]);
        assert_eq!(s.count, 0);
        assert_eq!(s.p50, None);
        assert_eq!(s.mean, None);
        let s = Summary::from_samples(&[7.0]);
        assert_eq!(
            (s.p50, s.p999, s.std, s.min, s.max),
            (Some(7.0), Some(7.0), Some(0.0), Some(7.0), Some(7.0))
        );
        let s = Summary::from_samples(&[1.0, 3.0]);
        assert_eq!(s.p50, Some(2.0));
        assert!(close(s.p90.unwrap(), 2.8));
        assert!(close(s.std.unwrap(), 2f64.sqrt()));
        let s = Summary::from_samples(&[f64::NAN, 1.0]);
        assert_eq!(s.count, 1);
    }

    #[test]
    fn null_in_json_when_empty() {
        let j = serde_json::to_value(Summary::from_samples(&[])).unwrap();
        assert!(j["p50"].is_null());
        assert_eq!(j["count"], 0);
        assert!(j.get("histogram").is_none());
    }

    #[test]
    fn samples_switch_to_histogram_past_the_cap() {
        let mut s = Samples::with_cap(100);
        for i in 0..1000 {
            s.push(f64::from(i) / 10.0); // 0.0 .. 99.9 ms
        }
        assert!(s.is_histogram());
        assert!(s.values().is_empty());
        let sum = s.summary();
        assert!(sum.histogram);
        assert_eq!(sum.count, 1000);
        assert!(close(sum.mean.unwrap(), 49.95));
        assert_eq!(sum.min, Some(0.0));
        assert_eq!(sum.max, Some(99.9));
        let exact =
            Summary::from_samples(&(0..1000).map(|i| f64::from(i) / 10.0).collect::<Vec<_>>());
        for (name, _) in QUANTILES {
            let (h, e) = (sum.get(name).unwrap(), exact.get(name).unwrap());
            // The same interpolation between ranks: within the stated precision.
            assert!(within_precision(h, e), "{name}: {h} vs {e}");
        }
    }

    fn within_precision(got: f64, exact: f64) -> bool {
        (got - exact).abs() <= (exact.abs() * HISTOGRAM_PRECISION).max(HISTOGRAM_PRECISION_ABS)
    }

    /// Samples of a skewed distribution over five decades, with ties.
    fn skewed(n: u32, seed: u64) -> Vec<f64> {
        let mut rng = crate::rng::Rng::new(seed);
        (0..n)
            .map(|_| {
                let v = rng.exponential(20.0).powf(1.6) + 0.05;
                (v * 1000.0).round() / 1000.0
            })
            .collect()
    }

    #[test]
    fn a_histogram_travels_and_merges_within_the_stated_precision() {
        // Three "shards": their histograms, as reports carry them, read back and
        // merged, give the union's percentiles within the stated precision.
        let parts: Vec<Vec<f64>> = (0..3).map(|k| skewed(700 + 301 * k, k as u64)).collect();
        let mut merged = Samples::new();
        for p in &parts {
            let mut s = Samples::new();
            p.iter().for_each(|&v| s.push(v));
            let data: HistogramData =
                serde_json::from_str(&serde_json::to_string(&s.histogram_data()).unwrap()).unwrap();
            let back = Samples::from_histogram(&data, &s.summary()).unwrap();
            assert!(back.is_histogram());
            assert_eq!(back.len(), p.len() as u64);
            merged.merge(&back);
        }
        let all: Vec<f64> = parts.concat();
        let exact = Summary::from_samples(&all);
        let got = merged.summary();
        assert_eq!(got.count, exact.count);
        assert_eq!((got.min, got.max), (exact.min, exact.max));
        assert!(close(got.mean.unwrap(), exact.mean.unwrap()));
        assert!((got.std.unwrap() - exact.std.unwrap()).abs() < 1e-6);
        for (name, _) in QUANTILES {
            let (h, e) = (got.get(name).unwrap(), exact.get(name).unwrap());
            assert!(within_precision(h, e), "{name}: {h} vs {e}");
        }
        let mut sorted = all.clone();
        sorted.sort_by(f64::total_cmp);
        for (k, h) in merged.quantile_curve(101).iter().enumerate() {
            let e = percentile_sorted(&sorted, k as f64 / 100.0);
            assert!(within_precision(*h, e), "p{k}: {h} vs {e}");
        }
        assert!(within_precision(
            merged.percentile(0.975).unwrap(),
            percentile_sorted(&sorted, 0.975)
        ));
        // A summary whose count is not the histogram's is refused.
        let mut s = Samples::new();
        parts[0].iter().for_each(|&v| s.push(v));
        let wrong = Summary {
            count: 3,
            ..s.summary()
        };
        assert!(Samples::from_histogram(&s.histogram_data(), &wrong).is_none());
    }

    #[test]
    fn merge_equals_pushing_everything() {
        let a: Vec<f64> = (0..50).map(|i| f64::from(i) * 1.5).collect();
        let b: Vec<f64> = (0..70).map(|i| 100.0 - f64::from(i)).collect();
        let mut sa = Samples::new();
        a.iter().for_each(|&v| sa.push(v));
        let mut sb = Samples::new();
        b.iter().for_each(|&v| sb.push(v));
        sa.merge(&sb);
        let all: Vec<f64> = a.iter().chain(&b).copied().collect();
        let want = Summary::from_samples(&all);
        let got = sa.summary();
        assert_eq!(got.count, want.count);
        assert_eq!(got.p50, want.p50);
        assert!(close(got.mean.unwrap(), want.mean.unwrap()));
        // Merging histograms too.
        let mut ha = Samples::with_cap(10);
        a.iter().for_each(|&v| ha.push(v));
        let mut hb = Samples::with_cap(10);
        b.iter().for_each(|&v| hb.push(v));
        ha.merge(&hb);
        let got = ha.summary();
        assert_eq!(got.count, 120);
        assert!(close(got.mean.unwrap(), want.mean.unwrap()));
        assert!(close(got.std.unwrap(), want.std.unwrap()));
    }

    #[test]
    fn weighted_quantiles_count_each_value_by_its_weight() {
        let v = [(1.0, 1.0), (2.0, 1.0), (3.0, 8.0)];
        assert_eq!(weighted_quantile(&v, 0.1), 1.0);
        assert_eq!(weighted_quantile(&v, 0.2), 2.0);
        assert_eq!(weighted_quantile(&v, 0.5), 3.0);
    }

    #[test]
    fn quantile_curves() {
        let mut s = Samples::new();
        assert!(s.quantile_curve(101).is_empty());
        for v in [4.0, 1.0, 3.0, 2.0] {
            s.push(v);
        }
        assert_eq!(s.quantile_curve(3), vec![1.0, 2.5, 4.0]);
        let c = s.quantile_curve(101);
        assert_eq!(c.len(), 101);
        assert!(c.windows(2).all(|w| w[0] <= w[1]));
        let mut h = Samples::with_cap(2);
        for v in [4.0, 1.0, 3.0, 2.0] {
            h.push(v);
        }
        let c = h.quantile_curve(5);
        assert_eq!((c[0], c[4]), (1.0, 4.0));
    }

    #[test]
    fn linear_fit() {
        let pts: Vec<(f64, f64)> = (0..10)
            .map(|i| (f64::from(i), 2.0 + 0.5 * f64::from(i)))
            .collect();
        let f = LinearFit::fit(&pts).unwrap();
        assert!(close(f.slope, 0.5));
        assert!(close(f.intercept, 2.0));
        assert!(f.significant());
        let flat: Vec<(f64, f64)> = (0..10u32)
            .map(|i| (f64::from(i), if i.is_multiple_of(2) { 1.0 } else { -1.0 }))
            .collect();
        assert!(!LinearFit::fit(&flat).unwrap().significant());
        assert!(LinearFit::fit(&pts[..2]).is_none());
        // By hand: x 0, 1, 2 and y 0, 1, 1 give y = 1/6 + x/2, residuals -1/6, 1/3,
        // -1/6, s^2 = (1/6) / 1 and var(a) = s^2 (1/n + mean(x)^2 / Sxx) = 5/36.
        let f = LinearFit::fit(&[(0.0, 0.0), (1.0, 1.0), (2.0, 1.0)]).unwrap();
        assert!(close(f.intercept, 1.0 / 6.0), "{f:?}");
        assert!(close(f.intercept_stderr, 5f64.sqrt() / 6.0), "{f:?}");
        assert!(
            close(f.intercept_ci95(), 12.706 * 5f64.sqrt() / 6.0),
            "{f:?}"
        );
    }
}
