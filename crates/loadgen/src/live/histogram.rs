//! The live histograms' fixed buckets, and the histogram itself.
//!
//! One set of bucket boundaries for every duration, log-spaced so that the
//! relative resolution is the same at 1 ms as at 10 s: [`BUCKETS_PER_DOUBLING`]
//! buckets per doubling, boundaries [`FIRST_BOUND_S`] (0.1 ms) times
//! [`BUCKET_FACTOR`]`^i` (`2^(1/8)` ≈ 1.0905) up to the first one at or past
//! [`LAST_BOUND_S`] (300 s): 174 finite boundaries and `+Inf`. Each boundary is
//! rounded to 4 significant digits so that the `le` labels read well
//! (`0.0001091`, not `0.00010905077326652577`); adjacent boundaries then differ by
//! a factor within 0.1% of `BUCKET_FACTOR` ([`max_bucket_ratio`]).
//!
//! Resolution: Prometheus' `histogram_quantile` interpolates linearly inside the
//! bucket holding the quantile's rank, so its answer lies in the same bucket as
//! the observation at that rank: within a factor [`max_bucket_ratio`] (≈ 9.1%) of
//! the exact percentile whenever the observations around the quantile are closer
//! together than a bucket (any sizeable sample). Below 0.1 ms the answer is within
//! 0.1 ms (the first bucket starts at 0); past 300 s `histogram_quantile` answers
//! the last finite boundary.

use std::sync::OnceLock;

use tokenscope_measure::exposition;

/// Buckets per doubling of the value.
pub const BUCKETS_PER_DOUBLING: u32 = 8;
/// The ratio between adjacent bucket boundaries before rounding: `2^(1/8)`.
#[cfg_attr(not(test), allow(dead_code))]
pub const BUCKET_FACTOR: f64 = 1.090_507_732_665_257_7;
/// The first (smallest) boundary, seconds: 0.1 ms.
pub const FIRST_BOUND_S: f64 = 1e-4;
/// The boundaries go up to the first one at or past this, seconds.
pub const LAST_BOUND_S: f64 = 300.0;

/// The finite bucket boundaries (`le`), seconds, ascending.
pub fn bounds() -> &'static [f64] {
    static BOUNDS: OnceLock<Vec<f64>> = OnceLock::new();
    BOUNDS.get_or_init(|| {
        let mut out = Vec::new();
        for i in 0.. {
            let exact = FIRST_BOUND_S * 2f64.powf(f64::from(i) / f64::from(BUCKETS_PER_DOUBLING));
            out.push(round_4_digits(exact));
            if exact >= LAST_BOUND_S {
                break;
            }
        }
        out
    })
}

/// The largest ratio between adjacent boundaries: the resolution of a quantile
/// read from these buckets (see the module's doc).
#[cfg_attr(not(test), allow(dead_code))]
pub fn max_bucket_ratio() -> f64 {
    bounds().windows(2).map(|w| w[1] / w[0]).fold(1.0, f64::max)
}

fn round_4_digits(x: f64) -> f64 {
    format!("{x:.3e}").parse().unwrap_or(x)
}

/// core's Prometheus histogram on [`bounds`], counting observations in
/// seconds as the live registry takes them.
#[derive(Debug, Clone)]
pub struct Histogram(exposition::Histogram<u64>);

impl Default for Histogram {
    fn default() -> Self {
        Self(exposition::Histogram::new(bounds()))
    }
}

impl Histogram {
    /// Adds one observation, seconds. A NaN is ignored; a negative value (a clock
    /// step) counts as 0.
    pub fn observe(&mut self, v_s: f64) {
        if !v_s.is_nan() {
            self.0.observe(v_s.max(0.0), 1);
        }
    }

    /// The counts, as core's exposition writes them.
    pub fn counts(&self) -> &exposition::Histogram<u64> {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_span_the_range_at_the_stated_factor() {
        assert!((BUCKET_FACTOR.powi(8) - 2.0).abs() < 1e-12);
        let b = bounds();
        assert_eq!(b[0], 1e-4);
        assert!(b[b.len() - 2] < LAST_BOUND_S && b[b.len() - 1] >= LAST_BOUND_S);
        assert_eq!(b.len(), 174);
        assert!(b.windows(2).all(|w| w[0] < w[1]));
        let ratio = max_bucket_ratio();
        assert!(
            (BUCKET_FACTOR..=BUCKET_FACTOR * 1.001).contains(&ratio),
            "{ratio}"
        );
        // The labels read as 4 significant digits.
        assert_eq!(b[1].to_string(), "0.0001091");
    }

    #[test]
    fn observations_land_in_the_first_bucket_at_or_above_them() {
        let mut h = Histogram::default();
        let b = bounds();
        h.observe(b[3]); // exactly on a boundary: that bucket (le is inclusive)
        h.observe(b[3] * 1.0001); // just past: the next
        h.observe(0.0);
        h.observe(-1.0); // counted as 0
        h.observe(1e6); // +Inf only
        h.observe(f64::NAN); // ignored
        let per_bucket = h.counts().buckets();
        assert_eq!(&per_bucket[..5], [2, 0, 0, 1, 1]);
        assert_eq!(per_bucket[b.len()], 1);
        assert_eq!(h.counts().count(), 5);
        assert_eq!(h.counts().sum_s(), b[3] + b[3] * 1.0001 + 1e6);
    }
}
