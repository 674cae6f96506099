//! Is a difference between two runs real? The statistics `tokenscope compare`
//! stands on (`docs/metrics.md`, "Comparing runs"):
//!
//! - a **percentile's difference** (TTFT p95 new minus base) gets a 95% interval
//!   with rounds as a random effect ([`rounds_diff`]): the requests' sampling
//!   by the bootstrap within rounds (core's one percentile definition,
//!   [`super::stats::percentile_sorted`]; seeded, so the same files give the
//!   same interval) plus the rounds' spread beyond it (method of moments),
//!   Student's t with Satterthwaite's degrees of freedom ([`bootstrap_diff`]: the
//!   bootstrap over requests alone, for samples without rounds);
//! - a **rate's difference** (error rate) gets Newcombe's hybrid score interval for
//!   a difference of two proportions (Wilson's interval for each), which holds for
//!   small counts and for rates of 0 ([`proportion_diff`]);
//! - a **throughput's difference** gets Welch's t interval over the runs' rounds
//!   ([`welch_diff`]): rounds, not requests, are its independent draws.
//!
//! A change is **significant** when its whole interval lies beyond the noise
//! floor (`--min-change`, relative to the base) on one side; **better** or
//! **worse** follows the metric's direction ([`Direction`], [`verdict`]).

use serde::{Deserialize, Serialize};

use super::bootstrap;
use super::stats::{percentile_sorted, t_critical_95};
use crate::rng::Rng;

/// Resamples the bootstrap draws by default.
pub const DEFAULT_RESAMPLES: u32 = 2000;

/// A 95% interval of a difference (new minus base), in the metric's unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
}

impl Interval {
    /// Whether the interval holds `x`.
    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }

    /// Whether zero is outside it (the difference is unlikely to be noise).
    pub fn excludes_zero(&self) -> bool {
        !self.contains(0.0)
    }
}

/// A difference and its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    /// The base run's value.
    pub base: f64,
    /// The new run's value.
    pub new: f64,
    /// `new - base`.
    pub diff: f64,
    /// Its 95% interval (`None`: no per-request samples to resample, or too few
    /// for the percentile: [`min_samples`]).
    pub interval: Option<Interval>,
    /// The two-sided p-value of "no difference" (bootstrap, or the score test for
    /// rates): what the comparison's multiplicity control ([`holm`]) ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
}

/// The fewest requests a run needs for an interval of its `q` percentile: five
/// beyond it (10 for p50, 100 for p95, 500 for p99). With fewer, the percentile is
/// one of the last few samples and resampling cannot say how it varies.
pub fn min_samples(q: f64) -> usize {
    (5.0 / (1.0 - q.clamp(0.0, 0.999))).ceil() as usize
}

/// Holm's step-down over a family of p-values at level `alpha`: which are
/// significant with the family-wise error kept at `alpha` (for "is anything
/// different?" over every cell of a comparison).
pub fn holm(p_values: &[f64], alpha: f64) -> Vec<bool> {
    let mut order: Vec<usize> = (0..p_values.len()).collect();
    order.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]));
    let m = p_values.len();
    let mut out = vec![false; m];
    for (rank, &i) in order.iter().enumerate() {
        if p_values[i] > alpha / (m - rank) as f64 {
            break;
        }
        out[i] = true;
    }
    out
}

/// The standard normal's CDF (Abramowitz and Stegun 7.1.26, within 1.5e-7).
fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// `ln Γ(x)` for `x > 0` (Lanczos, g = 7, 9 terms: about 15 digits).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let sum = C[1..]
        .iter()
        .enumerate()
        .fold(C[0], |acc, (i, c)| acc + c / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// The regularized incomplete beta `I_x(a, b)` (Lentz's continued fraction).
fn incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - incomplete_beta(1.0 - x, b, a);
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp() / a;
    let tiny = 1e-300;
    let (mut c, mut d) = (1.0, 1.0 - (a + b) * x / (a + 1.0));
    d = 1.0 / if d.abs() < tiny { tiny } else { d };
    let mut f = d;
    for m in 1..300 {
        let m = m as f64;
        for numerator in [
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + numerator * d;
            d = 1.0 / if d.abs() < tiny { tiny } else { d };
            c = 1.0 + numerator / c;
            c = if c.abs() < tiny { tiny } else { c };
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-14 {
            break;
        }
    }
    front * f
}

/// The two-sided p-value of Student's `t` with `df` degrees of freedom.
pub fn t_two_sided_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    incomplete_beta(df / (df + t * t), df / 2.0, 0.5).clamp(0.0, 1.0)
}

/// The quantile `q` of `base` and `new` (per-request samples of one metric) and
/// the 95% percentile-bootstrap interval of its difference, from `resamples`
/// draws seeded by `seed`. `None` when either run has no sample.
pub fn bootstrap_diff(
    base: &[f64],
    new: &[f64],
    q: f64,
    resamples: u32,
    seed: u64,
) -> Option<Difference> {
    let each = |v: &[f64]| v.iter().map(|x| vec![*x]).collect::<Vec<_>>();
    bootstrap_clusters(&each(base), &each(new), q, resamples, seed)
}

/// [`bootstrap_diff`] over clusters: each run's values come in groups that move
/// together (a request's inter-token gaps), so the bootstrap draws whole groups
/// (requests) and takes the quantile over their values.
pub fn bootstrap_clusters(
    base: &[Vec<f64>],
    new: &[Vec<f64>],
    q: f64,
    resamples: u32,
    seed: u64,
) -> Option<Difference> {
    let clean = |c: &[Vec<f64>]| -> Vec<Vec<f64>> {
        c.iter()
            .map(|v| {
                v.iter()
                    .copied()
                    .filter(|x| !x.is_nan())
                    .collect::<Vec<f64>>()
            })
            .filter(|v| !v.is_empty())
            .collect()
    };
    let (b, n) = (clean(base), clean(new));
    let flat = |c: &[Vec<f64>]| {
        let mut s: Vec<f64> = c.iter().flatten().copied().collect();
        s.sort_by(f64::total_cmp);
        s
    };
    let (fb, fnew) = (flat(&b), flat(&n));
    if fb.is_empty() || fnew.is_empty() {
        return None;
    }
    let (vb, vn) = (percentile_sorted(&fb, q), percentile_sorted(&fnew, q));
    if fb.len().min(fnew.len()) < min_samples(q) {
        return Some(Difference {
            base: vb,
            new: vn,
            diff: vn - vb,
            interval: None,
            p_value: None,
        });
    }
    let mut rng = bootstrap::rng(seed);
    let mut draw = |c: &[Vec<f64>], buf: &mut Vec<f64>| {
        buf.clear();
        for g in bootstrap::resample(c, &mut rng) {
            buf.extend_from_slice(g);
        }
        buf.sort_by(f64::total_cmp);
        percentile_sorted(buf, q)
    };
    let mut buf = Vec::with_capacity(fb.len().max(fnew.len()) * 2);
    let diffs: Vec<f64> = (0..resamples.max(1))
        .map(|_| {
            let db = draw(&b, &mut buf);
            draw(&n, &mut buf) - db
        })
        .collect();
    // Two-sided: the smaller share of resampled differences on either side of 0.
    let below = diffs.iter().filter(|&&d| d <= 0.0).count();
    let above = diffs.iter().filter(|&&d| d >= 0.0).count();
    let p = (2.0 * (below.min(above) + 1) as f64 / (diffs.len() + 1) as f64).min(1.0);
    Some(Difference {
        base: vb,
        new: vn,
        diff: vn - vb,
        interval: bootstrap::interval_95(&diffs).map(|[lo, hi]| Interval { lo, hi }),
        p_value: Some(p),
    })
}

/// The quantile `q` of one run's samples (in groups that move together, as in
/// [`bootstrap_clusters`]) and its own 95% percentile-bootstrap interval: how
/// precisely the run measured it (`tokenscope history`'s error bars). `None`
/// without a sample; no interval under [`min_samples`].
pub fn bootstrap_one(
    groups: &[Vec<f64>],
    q: f64,
    resamples: u32,
    seed: u64,
) -> Option<(f64, Option<Interval>)> {
    let groups: Vec<&Vec<f64>> = groups.iter().filter(|g| !g.is_empty()).collect();
    let mut all: Vec<f64> = groups.iter().copied().flatten().copied().collect();
    all.retain(|x| !x.is_nan());
    if all.is_empty() {
        return None;
    }
    all.sort_by(f64::total_cmp);
    let value = percentile_sorted(&all, q);
    if all.len() < min_samples(q) {
        return Some((value, None));
    }
    let mut rng = bootstrap::rng(seed);
    let mut buf = Vec::with_capacity(all.len() * 2);
    let draws: Vec<f64> = (0..resamples.max(1))
        .map(|_| {
            buf.clear();
            for g in bootstrap::resample(&groups, &mut rng) {
                buf.extend(g.iter().filter(|x| !x.is_nan()));
            }
            buf.sort_by(f64::total_cmp);
            percentile_sorted(&buf, q)
        })
        .collect();
    let interval = bootstrap::interval_95(&draws).map(|[lo, hi]| Interval { lo, hi });
    Some((value, interval))
}

/// The 97.5th percentile of Student's `t` with `df` degrees of freedom (a
/// fraction allowed; bisection on [`t_two_sided_p`]); 1.96 past 10^6.
pub fn t_quantile_975(df: f64) -> f64 {
    if !df.is_finite() || df > 1e6 {
        return 1.959_963_984_540_054;
    }
    let df = df.max(1.0);
    let (mut lo, mut hi) = (1.9, 13.0);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if t_two_sided_p(mid, df) > 0.05 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// A percentile's difference between two runs measured in rounds
/// ([`rounds_diff`]), with what its interval stands on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoundsDiff {
    /// The difference, its interval and p-value.
    pub diff: Difference,
    /// The `t`'s degrees of freedom (Satterthwaite); `None`: the normal's
    /// (no variance between rounds found, or one round each).
    pub df: Option<f64>,
    /// The share of the difference's variance that is between rounds (0: the
    /// requests' sampling alone).
    pub between_share: f64,
    /// Requests behind the percentile: base, new.
    pub requests: [usize; 2],
}

/// The sampling variance of `q` within one run's rounds, by the stratified
/// bootstrap (requests resampled within their round): of the run's pooled
/// percentile, and of each round's own.
struct Within {
    /// Each resample's pooled percentile.
    pooled: Vec<f64>,
    /// Each round's percentile's bootstrap variance.
    round_var: Vec<f64>,
}

fn variance(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64
}

fn within(rounds: &[Vec<Vec<f64>>], q: f64, resamples: u32, rng: &mut Rng) -> Within {
    let mut draws: Vec<Vec<f64>> = vec![Vec::with_capacity(resamples as usize); rounds.len()];
    let mut pooled = Vec::with_capacity(resamples as usize);
    let (mut all, mut one) = (Vec::new(), Vec::new());
    for _ in 0..resamples.max(2) {
        all.clear();
        for (r, groups) in rounds.iter().enumerate() {
            one.clear();
            for g in bootstrap::resample(groups, rng) {
                one.extend_from_slice(g);
            }
            one.sort_by(f64::total_cmp);
            draws[r].push(percentile_sorted(&one, q));
            all.extend_from_slice(&one);
        }
        // Sorted runs, one a round: the sort merges them.
        all.sort_by(f64::total_cmp);
        pooled.push(percentile_sorted(&all, q));
    }
    Within {
        pooled,
        round_var: draws.iter().map(|d| variance(d)).collect(),
    }
}

/// The difference of the `q` percentile of two runs measured in rounds (each
/// run: its rounds, each round its requests' values, a request's values moving
/// together: [`bootstrap_clusters`]), with **rounds as a random effect**
/// (`docs/metrics.md`, "Comparing runs"): a round's offset `a ~ (0, σ²_a)` shifts
/// all its requests, the requests vary within it.
///
/// - The percentile of each run's requests pooled; their difference.
/// - `V_w`: the requests' sampling variance of the difference, from the
///   stratified bootstrap (requests drawn within their round, `resamples`
///   seeded by `seed`).
/// - `σ²_a`, by the method of moments: the rounds' own percentiles vary by
///   `MS = Σ (x_r - x̄)² / Σ (R - 1)` over both runs (one between-round variance
///   for the two: the same configuration but for the change), of which
///   `v̄`, the mean of the rounds' bootstrap variances, is sampling; so
///   `σ²_a = max(0, MS - v̄)` with `Σ (R - 1)` degrees of freedom.
/// - `V = V_w + σ²_a (1/R_base + 1/R_new)`; the interval `diff ± t·√V` with
///   Satterthwaite's degrees of freedom `df = df_a V² / (σ²_a (1/R_b + 1/R_n))²`
///   (the normal's when `σ²_a` is 0), the p-value the same `t`'s.
///
/// `None` when either run has no value; no interval under [`min_samples`].
pub fn rounds_diff(
    base: &[Vec<Vec<f64>>],
    new: &[Vec<Vec<f64>>],
    q: f64,
    resamples: u32,
    seed: u64,
) -> Option<RoundsDiff> {
    let clean = |rounds: &[Vec<Vec<f64>>]| -> Vec<Vec<Vec<f64>>> {
        rounds
            .iter()
            .map(|groups| {
                groups
                    .iter()
                    .map(|g| g.iter().copied().filter(|x| !x.is_nan()).collect())
                    .filter(|g: &Vec<f64>| !g.is_empty())
                    .collect()
            })
            .filter(|g: &Vec<Vec<f64>>| !g.is_empty())
            .collect()
    };
    let (b, n) = (clean(base), clean(new));
    let flat = |rounds: &[Vec<Vec<f64>>]| {
        let mut s: Vec<f64> = rounds.iter().flatten().flatten().copied().collect();
        s.sort_by(f64::total_cmp);
        s
    };
    let (fb, fnew) = (flat(&b), flat(&n));
    if fb.is_empty() || fnew.is_empty() {
        return None;
    }
    let (vb, vn) = (percentile_sorted(&fb, q), percentile_sorted(&fnew, q));
    let requests = [b.iter().map(Vec::len).sum(), n.iter().map(Vec::len).sum()];
    let mut out = RoundsDiff {
        diff: Difference {
            base: vb,
            new: vn,
            diff: vn - vb,
            interval: None,
            p_value: None,
        },
        df: None,
        between_share: 0.0,
        requests,
    };
    if fb.len().min(fnew.len()) < min_samples(q) {
        return Some(out);
    }
    let mut rng = bootstrap::rng(seed);
    let (wb, wn) = (
        within(&b, q, resamples, &mut rng),
        within(&n, q, resamples, &mut rng),
    );
    let v_within = variance(&wb.pooled) + variance(&wn.pooled);
    // The rounds' own percentiles, and how much more they vary than their
    // sampling says.
    let (mut ss, mut df_a, mut sampling) = (0.0, 0usize, Vec::new());
    for (rounds, w) in [(&b, &wb), (&n, &wn)] {
        if rounds.len() < 2 {
            continue;
        }
        let x: Vec<f64> = rounds
            .iter()
            .map(|groups| {
                let mut v: Vec<f64> = groups.iter().flatten().copied().collect();
                v.sort_by(f64::total_cmp);
                percentile_sorted(&v, q)
            })
            .collect();
        ss += variance(&x) * (x.len() - 1) as f64;
        df_a += x.len() - 1;
        sampling.extend_from_slice(&w.round_var);
    }
    let ms = if df_a > 0 { ss / df_a as f64 } else { 0.0 };
    let between = if df_a > 0 {
        let v_bar = sampling.iter().sum::<f64>() / sampling.len() as f64;
        (ms - v_bar).max(0.0)
    } else {
        0.0
    };
    let c = 1.0 / b.len() as f64 + 1.0 / n.len() as f64;
    let v = v_within + between * c;
    let df = (between > 0.0).then(|| (df_a as f64 * v.powi(2) / (ms * c).powi(2)).max(1.0));
    let se = v.sqrt();
    let half = t_quantile_975(df.unwrap_or(f64::INFINITY)) * se;
    let d = vn - vb;
    out.diff.interval = Some(Interval {
        lo: d - half,
        hi: d + half,
    });
    out.diff.p_value = Some(if se > 0.0 {
        match df {
            Some(df) => t_two_sided_p(d / se, df),
            None => 2.0 * (1.0 - normal_cdf((d / se).abs())),
        }
    } else if d == 0.0 {
        1.0
    } else {
        0.0
    });
    out.df = df;
    out.between_share = if v > 0.0 { between * c / v } else { 0.0 };
    Some(out)
}

/// Wilson's 95% score interval for `k` successes of `n`.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    const Z: f64 = 1.959_963_984_540_054;
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let centre = p + Z * Z / (2.0 * n);
    let half = Z * (p * (1.0 - p) / n + Z * Z / (4.0 * n * n)).sqrt();
    let d = 1.0 + Z * Z / n;
    (
        ((centre - half) / d).max(0.0),
        ((centre + half) / d).min(1.0),
    )
}

/// The difference of two rates (`k_new / n_new - k_base / n_base`, e.g. error
/// rates) with Newcombe's hybrid score interval (his method 10). `None` when a
/// run has no request.
pub fn proportion_diff(k_base: u64, n_base: u64, k_new: u64, n_new: u64) -> Option<Difference> {
    if n_base == 0 || n_new == 0 {
        return None;
    }
    let (p1, p2) = (k_new as f64 / n_new as f64, k_base as f64 / n_base as f64);
    let ((l1, u1), (l2, u2)) = (wilson(k_new, n_new), wilson(k_base, n_base));
    let d = p1 - p2;
    let lo = d - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt();
    let hi = d + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt();
    // The pooled score test's p-value.
    let pooled = (k_new + k_base) as f64 / (n_new + n_base) as f64;
    let se = (pooled * (1.0 - pooled) * (1.0 / n_new as f64 + 1.0 / n_base as f64)).sqrt();
    let p_value = if se > 0.0 {
        2.0 * (1.0 - normal_cdf((d / se).abs()))
    } else {
        1.0
    };
    Some(Difference {
        base: p2,
        new: p1,
        diff: d,
        interval: Some(Interval { lo, hi }),
        p_value: Some(p_value),
    })
}

/// The difference of two means over independent draws (a throughput per round)
/// with Welch's 95% t interval; without two draws on each side, the difference
/// alone.
pub fn welch_diff(base: &[f64], new: &[f64]) -> Option<Difference> {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let var =
        |v: &[f64], m: f64| v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    if base.is_empty() || new.is_empty() {
        return None;
    }
    let (mb, mn) = (mean(base), mean(new));
    let diff = mn - mb;
    let mut p_value = None;
    let interval = (base.len() >= 2 && new.len() >= 2).then(|| {
        let (sb, sn) = (
            var(base, mb) / base.len() as f64,
            var(new, mn) / new.len() as f64,
        );
        let se = (sb + sn).sqrt();
        // Welch-Satterthwaite degrees of freedom.
        let df = if se > 0.0 {
            (sb + sn).powi(2)
                / (sb * sb / (base.len() - 1) as f64 + sn * sn / (new.len() - 1) as f64)
        } else {
            (base.len() + new.len() - 2) as f64
        };
        let half = t_critical_95(df.floor().max(1.0) as u64) * se;
        p_value = Some(if se > 0.0 {
            t_two_sided_p(diff / se, df.max(1.0))
        } else if diff == 0.0 {
            1.0
        } else {
            0.0
        });
        Interval {
            lo: diff - half,
            hi: diff + half,
        }
    });
    Some(Difference {
        base: mb,
        new: mn,
        diff,
        interval,
        p_value,
    })
}

/// Which way is better for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Latencies, error and timeout rates.
    LowerIsBetter,
    /// Throughput, goodput.
    HigherIsBetter,
}

/// What a comparison concludes for one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A significant change the right way.
    Better,
    /// A significant change the wrong way.
    Worse,
    /// The interval holds zero, or the change is under the noise floor.
    NoChange,
    /// No interval (summaries only): the difference is shown, not judged.
    Unknown,
}

/// The verdict on `d` for a metric going `direction`: significant when its
/// whole interval lies beyond the noise floor, `min_change` of the base (a
/// fraction: 0.02 for 2%), on one side: 95% sure the change is at least the
/// floor, not only that it is not zero. With a floor of zero (or a base of
/// zero), an interval excluding zero is enough.
pub fn verdict(d: &Difference, direction: Direction, min_change: f64) -> Verdict {
    let Some(interval) = d.interval else {
        return Verdict::Unknown;
    };
    let floor = min_change * d.base.abs();
    let beyond = interval.lo > floor || interval.hi < -floor;
    if !interval.excludes_zero() || !beyond || d.diff == 0.0 {
        return Verdict::NoChange;
    }
    match (direction, d.diff < 0.0) {
        (Direction::LowerIsBetter, true) | (Direction::HigherIsBetter, false) => Verdict::Better,
        _ => Verdict::Worse,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples around `centre` ms (normal, sd 5), `n` of them, from `seed`.
    fn samples(centre: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = Rng::new(seed);
        (0..n).map(|_| centre + 5.0 * rng.normal()).collect()
    }

    #[test]
    fn a_known_shift_is_found_in_its_direction() {
        let (base, new) = (samples(100.0, 300, 1), samples(110.0, 300, 2));
        let d = bootstrap_diff(&base, &new, 0.5, DEFAULT_RESAMPLES, 7).unwrap();
        let i = d.interval.unwrap();
        assert!(i.contains(10.0) && i.excludes_zero(), "{d:?}");
        assert_eq!(verdict(&d, Direction::LowerIsBetter, 0.02), Verdict::Worse);
        assert_eq!(
            verdict(&d, Direction::HigherIsBetter, 0.02),
            Verdict::Better
        );
        // Seeded: the same inputs, the same interval.
        assert_eq!(
            bootstrap_diff(&base, &new, 0.5, DEFAULT_RESAMPLES, 7),
            Some(d)
        );
        // Significant means the whole interval beyond the floor: +2.5 [+1.5, +3.0]
        // on 100 is not 95% sure to be 2%, but is to be 1%.
        let near = Difference {
            base: 100.0,
            new: 102.5,
            diff: 2.5,
            interval: Some(Interval { lo: 1.5, hi: 3.0 }),
            p_value: None,
        };
        let judge = |floor| verdict(&near, Direction::LowerIsBetter, floor);
        assert_eq!(
            (judge(0.02), judge(0.01)),
            (Verdict::NoChange, Verdict::Worse)
        );
        // Under a 20% noise floor, a 10% change is no change.
        assert_eq!(
            verdict(&d, Direction::LowerIsBetter, 0.2),
            Verdict::NoChange
        );
    }

    /// The same behaviour twice: "no change" in at least 19 of 20 seeds (a 95%
    /// interval's false positives, measured).
    #[test]
    fn the_same_run_twice_is_no_change() {
        let false_positives = (0..20u64)
            .filter(|&s| {
                let (a, b) = (samples(100.0, 200, 100 + s), samples(100.0, 200, 200 + s));
                let d = bootstrap_diff(&a, &b, 0.95, 1000, s).unwrap();
                verdict(&d, Direction::LowerIsBetter, 0.0) != Verdict::NoChange
            })
            .count();
        assert!(false_positives <= 1, "{false_positives} of 20");
    }

    /// Newcombe (1998), Statistics in Medicine 17:873, Table II, method 10:
    /// 56/70 vs 48/80 -> 0.2000 (0.0524, 0.3339); 9/10 vs 3/10 -> 0.6 (0.1705,
    /// 0.8090).
    #[test]
    fn proportions_as_newcombe_gives_them() {
        let d = proportion_diff(48, 80, 56, 70).unwrap();
        let i = d.interval.unwrap();
        assert!((d.diff - 0.2).abs() < 1e-12);
        assert!(
            (i.lo - 0.0524).abs() < 5e-5 && (i.hi - 0.3339).abs() < 5e-5,
            "{i:?}"
        );
        let i = proportion_diff(3, 10, 9, 10).unwrap().interval.unwrap();
        assert!(
            (i.lo - 0.1705).abs() < 5e-5 && (i.hi - 0.8090).abs() < 5e-5,
            "{i:?}"
        );
        // No errors either time: no change, and a finite interval around zero.
        let d = proportion_diff(0, 100, 0, 100).unwrap();
        assert_eq!(
            verdict(&d, Direction::LowerIsBetter, 0.0),
            Verdict::NoChange
        );
        assert_eq!(proportion_diff(0, 0, 1, 10), None);
    }

    #[test]
    fn holm_and_the_normal_cdf() {
        assert_eq!(
            holm(&[0.01, 0.04, 0.03, 0.5], 0.05),
            [true, false, false, false]
        );
        assert_eq!(holm(&[0.001, 0.012, 0.02], 0.05), [true, true, true]);
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
        assert!((normal_cdf(-1.0) - 0.158_655_3).abs() < 1e-6);
        assert_eq!(min_samples(0.5), 10);
        assert_eq!(min_samples(0.99), 500);
        // Too few for p99: the values, no interval.
        let few = samples(100.0, 50, 3);
        let d = bootstrap_diff(&few, &few, 0.99, 100, 1).unwrap();
        assert_eq!((d.interval, d.p_value), (None, None));
    }

    #[test]
    fn one_runs_percentile_interval_holds_the_truth() {
        // The median of normal(100, 5) samples: 300 of them pin it within about
        // +-0.7; 5 samples are too few for p95.
        let v: Vec<Vec<f64>> = samples(100.0, 300, 4)
            .into_iter()
            .map(|x| vec![x])
            .collect();
        let (m, i) = bootstrap_one(&v, 0.5, DEFAULT_RESAMPLES, 1).unwrap();
        let i = i.unwrap();
        assert!(
            i.contains(100.0) && i.contains(m) && i.hi - i.lo < 2.0,
            "{m} {i:?}"
        );
        assert_eq!(bootstrap_one(&v[..5], 0.95, 100, 1).unwrap().1, None);
        assert_eq!(bootstrap_one(&[], 0.5, 100, 1), None);
    }

    /// Student's t two-sided p-values against tables: t(1) 12.706 and t(4) 2.776
    /// give 0.05, t(10) 2.0 gives 0.0734, t(30) 2.750 gives 0.01.
    #[test]
    fn t_p_values_as_tables_give_them() {
        for (t, df, p) in [
            (12.706, 1.0, 0.05),
            (2.776, 4.0, 0.05),
            (2.0, 10.0, 0.073_388),
            (2.750, 30.0, 0.01),
            (0.0, 5.0, 1.0),
        ] {
            let got = t_two_sided_p(t, df);
            assert!((got - p).abs() < 2e-4, "t {t} df {df}: {got} vs {p}");
        }
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
    }

    #[test]
    fn welch_over_rounds() {
        let d = welch_diff(&[100.0, 102.0, 98.0], &[120.0, 118.0, 122.0]).unwrap();
        let i = d.interval.unwrap();
        assert!(
            (d.diff - 20.0).abs() < 1e-12 && i.excludes_zero() && i.contains(20.0),
            "{d:?}"
        );
        assert_eq!(
            verdict(&d, Direction::HigherIsBetter, 0.02),
            Verdict::Better
        );
        // One round each: the difference, not judged.
        let d = welch_diff(&[100.0], &[120.0]).unwrap();
        assert_eq!(
            verdict(&d, Direction::HigherIsBetter, 0.02),
            Verdict::Unknown
        );
    }
    /// One run measured in `rounds` rounds of `per_round` requests: each round
    /// offset by `normal(0, between)`, each request `normal(centre + offset,
    /// within)`.
    fn hierarchical(
        centre: f64,
        within: f64,
        between: f64,
        rounds: usize,
        per_round: usize,
        rng: &mut Rng,
    ) -> Vec<Vec<Vec<f64>>> {
        (0..rounds)
            .map(|_| {
                let offset = between * rng.normal();
                (0..per_round)
                    .map(|_| vec![centre + offset + within * rng.normal()])
                    .collect()
            })
            .collect()
    }

    /// How many of `pairs` seeded comparisons of runs `shift` apart (3 rounds of
    /// 20 requests, within-round sd 5, between-round sd `between`) call a
    /// change at `q`: by [`rounds_diff`], and by the bootstrap over requests
    /// pooled alone.
    fn called(pairs: u64, shift: f64, between: f64, q: f64) -> (usize, usize) {
        let (mut by_rounds, mut pooled) = (0, 0);
        for s in 0..pairs {
            let mut rng = Rng::new(1000 + s);
            let b = hierarchical(100.0, 5.0, between, 3, 20, &mut rng);
            let n = hierarchical(100.0 + shift, 5.0, between, 3, 20, &mut rng);
            let d = rounds_diff(&b, &n, q, 300, s).unwrap();
            by_rounds +=
                usize::from(verdict(&d.diff, Direction::LowerIsBetter, 0.0) != Verdict::NoChange);
            let flat = |r: &Vec<Vec<Vec<f64>>>| r.iter().flatten().cloned().collect::<Vec<_>>();
            let d = bootstrap_clusters(&flat(&b), &flat(&n), q, 300, s).unwrap();
            pooled += usize::from(verdict(&d, Direction::LowerIsBetter, 0.0) != Verdict::NoChange);
        }
        (by_rounds, pooled)
    }

    /// Rounds with a random offset (sd 1, 2, 4 against the median's sampling
    /// sd of 1.4 in a round of 20): 200 same-configuration pairs (seeded: the
    /// counts are fixed) call a change at about the nominal 5% per cell, where
    /// the bootstrap over requests alone, which takes the rounds' offsets for
    /// signal, calls up to 40%; without an offset the random effect keeps the
    /// rate too.
    #[test]
    fn rounds_as_a_random_effect_keep_the_false_positive_rate() {
        for between in [0.0, 1.0, 2.0, 4.0] {
            let (by_rounds, pooled) = called(200, 0.0, between, 0.5);
            eprintln!("between sd {between}: {by_rounds} of 200 (pooled bootstrap: {pooled})");
            // 5% of 200 is 10; binomial sd 3.1.
            assert!(
                (2..=17).contains(&by_rounds),
                "between {between}: {by_rounds} of 200"
            );
            if between >= 2.0 {
                assert!(
                    pooled >= 2 * by_rounds + 10,
                    "between {between}: {pooled} vs {by_rounds}"
                );
            }
        }
    }

    /// And they find a real shift: 5 (1.4 x the requests' sd of 5 over 60
    /// requests a run: z about 4.4) in most seeds without an offset between
    /// rounds, and in many with one.
    #[test]
    fn rounds_as_a_random_effect_find_a_shift() {
        for (shift, between, least) in [(5.0, 0.0, 85), (8.0, 2.0, 60)] {
            let (by_rounds, pooled) = called(100, shift, between, 0.5);
            eprintln!(
                "shift {shift} between sd {between}: {by_rounds} of 100 (pooled bootstrap: {pooled})"
            );
            assert!(
                by_rounds >= least,
                "shift {shift} between {between}: {by_rounds} of 100"
            );
        }
        // Too few for the p95 (60 < 100): the values, no interval.
        let mut rng = Rng::new(1);
        let b = hierarchical(100.0, 5.0, 1.0, 3, 20, &mut rng);
        let d = rounds_diff(&b, &b, 0.95, 100, 1).unwrap();
        assert_eq!((d.diff.interval, d.requests), (None, [60, 60]));
        // One round each: the requests' sampling alone (normal, no df).
        let d = rounds_diff(&b[..1], &b[1..2], 0.5, 100, 1).unwrap();
        assert!(d.diff.interval.is_some() && d.df.is_none() && d.between_share == 0.0);
        assert!((t_quantile_975(4.0) - 2.776).abs() < 1e-3);
        assert!((t_quantile_975(f64::INFINITY) - 1.96).abs() < 1e-3);
    }
}
