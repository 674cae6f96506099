//! Two kernels reports compared (`tokenscope compare a.kernels.json b.kernels.json`):
//! per kernel (and the read ceiling) the median time before and after, the change,
//! a 95% interval of the change from the timed samples (the percentile bootstrap of
//! the median, [`tokenscope_stats::compare::bootstrap_diff`]), a verdict
//! ([`tokenscope_stats::compare::verdict`]) and the gate `--fail-on` on kernel
//! figures. What differs between the two runs besides the change (another GPU,
//! driver, backend, tool version, timing) is said first.

use serde::{Deserialize, Serialize};

use super::{AdapterReport, KernelReport, KernelResult};
use tokenscope_stats::compare::{Direction, Interval, Verdict, bootstrap_diff, verdict};

/// The schema id of the comparison's JSON.
pub const KERNELS_COMPARE_SCHEMA: &str = "tokenscope.kernels-compare/1";

/// The samples a median's interval needs on each side (the bootstrap of a median
/// from fewer says little): [`tokenscope_stats::compare::min_samples`] at p50.
pub fn min_kernel_samples() -> usize {
    tokenscope_stats::compare::min_samples(0.5)
}

/// How to compare.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelCompareOptions {
    /// A change smaller than this share of the base is no change (fraction).
    pub min_change: f64,
    /// Bootstrap resamples.
    pub resamples: u32,
    /// Bootstrap seed.
    pub seed: u64,
}

/// One kernel (or the read ceiling) before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelChange {
    /// `gemv f16 4096x4096 batch 1`, `attention_decode_split f16 32x4096x128 kv 8`,
    /// `bandwidth_read`.
    pub kernel: String,
    /// Median time per call before, microseconds.
    pub before_us: f64,
    /// Median time per call after, microseconds.
    pub after_us: f64,
    /// `after_us / before_us - 1` (negative: faster).
    pub change: f64,
    /// 95% interval of `change` (bootstrap of the median over the samples);
    /// absent without enough samples on both sides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Interval>,
    /// Bytes moved / median time before, GB/s.
    pub before_gbps: f64,
    /// After, GB/s.
    pub after_gbps: f64,
    /// `after_gbps / before_gbps - 1` (the time's change seen as bandwidth).
    pub gbps_change: f64,
    /// Samples before and after.
    pub samples: [u32; 2],
    /// `better`, `worse`, `no_change`, or `unknown` (no interval).
    pub verdict: Verdict,
    /// What the row cannot carry (no samples kept, too few, cache-resident, not
    /// verified), if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelsComparison {
    /// Always [`KERNELS_COMPARE_SCHEMA`].
    pub schema: String,
    /// The base report's name (its path).
    pub before: String,
    /// The other report's.
    pub after: String,
    /// The base's adapter.
    pub before_adapter: AdapterReport,
    /// The other's.
    pub after_adapter: AdapterReport,
    /// Whether both ran on the same GPU (name, backend, PCI ids).
    pub same_gpu: bool,
    /// What differs between the runs besides the change under test, each in a
    /// sentence (another GPU first).
    pub differences: Vec<String>,
    /// The noise floor asked for (`--min-change`, fraction of the base).
    pub min_change: f64,
    /// The noise floor used: `min_change`, or the largest move either run saw of
    /// one kernel timed twice (its drift check) when larger: the samples of one
    /// run do not hold how far a figure moves between runs, the drift does.
    #[serde(default)]
    pub noise_floor: f64,
    /// Where the noise floor came from, in words.
    #[serde(default)]
    pub noise_source: String,
    /// The read ceiling and every kernel both reports ran, in the base's order.
    pub rows: Vec<KernelChange>,
    /// Kernels only the base ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only_before: Vec<String>,
    /// Kernels only the other ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only_after: Vec<String>,
}

/// A kernel's identity across reports, and its label.
fn key(k: &KernelResult) -> String {
    let shape: Vec<String> = k.shape.iter().map(u64::to_string).collect();
    let mut s = format!("{} {} {}", k.name, k.dtype, shape.join("x"));
    if let Some(kv) = k.kv_heads {
        s.push_str(&format!(" kv {kv}"));
    }
    if k.batch != 1 {
        s.push_str(&format!(" batch {}", k.batch));
    }
    if !k.tensors.is_empty() {
        s.push_str(&format!(" ({})", k.tensors.join(",")));
    }
    s
}

/// What differs between two runs' settings, each in a sentence.
fn differences(a: &KernelReport, b: &KernelReport) -> (bool, Vec<String>) {
    let (x, y) = (&a.adapter, &b.adapter);
    let same_gpu = x.name == y.name
        && x.backend == y.backend
        && x.vendor_id == y.vendor_id
        && x.device_id == y.device_id;
    let mut out = Vec::new();
    if !same_gpu {
        out.push(format!(
            "different GPU: {} ({}) before, {} ({}) after: every change mixes the GPU with the change under test",
            x.name, x.backend, y.name, y.backend
        ));
    }
    let pairs = [
        (
            "driver",
            format!("{} {}", x.driver, x.driver_info),
            format!("{} {}", y.driver, y.driver_info),
        ),
        (
            "tool version",
            a.tool_version.clone(),
            b.tool_version.clone(),
        ),
        (
            "timing",
            a.timing.label().to_owned(),
            b.timing.label().to_owned(),
        ),
        (
            "--quick",
            a.config.quick.to_string(),
            b.config.quick.to_string(),
        ),
    ];
    for (what, p, q) in pairs {
        if same_gpu && p.trim() != q.trim() || !same_gpu && what != "driver" && p != q {
            out.push(format!(
                "{what} differs: {} before, {} after",
                p.trim(),
                q.trim()
            ));
        }
    }
    (same_gpu, out)
}

/// One row from the two sides' medians and samples.
fn change(
    kernel: String,
    bytes: u64,
    before: (f64, &[f64]),
    after: (f64, &[f64]),
    opts: &KernelCompareOptions,
) -> KernelChange {
    let gbps = |us: f64| {
        if us > 0.0 {
            bytes as f64 / (us * 1e3)
        } else {
            0.0
        }
    };
    let (b_us, a_us) = (before.0, after.0);
    let rel = |x: f64| if b_us > 0.0 { x / b_us } else { 0.0 };
    let enough = before.1.len() >= min_kernel_samples() && after.1.len() >= min_kernel_samples();
    let d = if enough {
        bootstrap_diff(before.1, after.1, 0.5, opts.resamples, opts.seed)
    } else {
        None
    };
    let note = if before.1.is_empty() || after.1.is_empty() {
        Some("no per-sample timings in a report (written before `samples_us`): no interval".into())
    } else if !enough {
        Some(format!(
            "{} and {} samples: a median's interval needs {} on each side",
            before.1.len(),
            after.1.len(),
            min_kernel_samples()
        ))
    } else {
        None
    };
    let v = d.as_ref().map_or(Verdict::Unknown, |d| {
        verdict(d, Direction::LowerIsBetter, opts.min_change)
    });
    KernelChange {
        kernel,
        before_us: b_us,
        after_us: a_us,
        change: rel(a_us - b_us),
        interval: d.and_then(|d| d.interval).map(|i| Interval {
            lo: rel(i.lo),
            hi: rel(i.hi),
        }),
        before_gbps: gbps(b_us),
        after_gbps: gbps(a_us),
        gbps_change: if a_us > 0.0 { b_us / a_us - 1.0 } else { 0.0 },
        samples: [before.1.len() as u32, after.1.len() as u32],
        verdict: v,
        note,
    }
}

/// Compares `after` with `before` (the base), kernel by kernel.
pub fn compare_kernels(
    before: (&str, &KernelReport),
    after: (&str, &KernelReport),
    opts: &KernelCompareOptions,
) -> KernelsComparison {
    let (a, b) = (before.1, after.1);
    let (same_gpu, differences) = differences(a, b);
    let drift = a
        .drift
        .iter()
        .chain(&b.drift)
        .filter(|d| d.change.is_finite())
        .max_by(|x, y| x.change.abs().total_cmp(&y.change.abs()));
    let (noise_floor, noise_source) = match drift {
        Some(d) if d.change.abs() > opts.min_change => (
            d.change.abs(),
            format!(
                "the largest drift within a run ({} {:+.1}%): a figure moved that much with nothing changed",
                d.kernel,
                100.0 * d.change
            ),
        ),
        _ => (opts.min_change, "--min-change".to_owned()),
    };
    let asked = opts.min_change;
    let opts = &KernelCompareOptions {
        min_change: noise_floor,
        ..*opts
    };
    let mut rows = Vec::new();
    if let (Some(x), Some(y)) = (&a.bandwidth, &b.bandwidth) {
        rows.push(change(
            "bandwidth_read".into(),
            x.buffer_bytes,
            (x.read.median_us, &x.read_samples_us),
            (y.read.median_us, &y.read_samples_us),
            opts,
        ));
        if x.buffer_bytes != y.buffer_bytes
            && let Some(r) = rows.last_mut()
        {
            r.note = Some(format!(
                "buffers of {} and {} bytes: the GB/s compare, the times do not",
                x.buffer_bytes, y.buffer_bytes
            ));
            r.verdict = Verdict::Unknown;
            r.interval = None;
        }
    }
    let mut only_before = Vec::new();
    for k in &a.kernels {
        let id = key(k);
        let Some(o) = b.kernels.iter().find(|o| key(o) == id) else {
            only_before.push(id);
            continue;
        };
        let mut row = change(
            id,
            k.bytes_moved,
            (k.median_us, &k.samples_us),
            (o.median_us, &o.samples_us),
            opts,
        );
        if !(k.verified && o.verified) {
            row.note = Some("a side did not match its CPU reference: not judged".into());
            row.verdict = Verdict::Unknown;
        } else if k.cache_resident || o.cache_resident {
            row.note = Some("cache-resident on a side: a time, not a memory bandwidth".into());
        }
        rows.push(row);
    }
    let only_after = b
        .kernels
        .iter()
        .map(key)
        .filter(|id| !a.kernels.iter().any(|k| &key(k) == id))
        .collect();
    KernelsComparison {
        schema: KERNELS_COMPARE_SCHEMA.into(),
        before: before.0.into(),
        after: after.0.into(),
        before_adapter: a.adapter.clone(),
        after_adapter: b.adapter.clone(),
        same_gpu,
        differences,
        min_change: asked,
        noise_floor,
        noise_source,
        rows,
        only_before,
        only_after,
    }
}

/// The figure a kernel gate watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelMetric {
    /// GB/s (bytes moved over the median time): a drop is worse.
    Gbps,
    /// Median time per call: a rise is worse.
    MedianUs,
}

/// One `--fail-on` term on kernel figures: `gbps:-5%` or `median_us:+5%`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelGate {
    /// The figure.
    pub metric: KernelMetric,
    /// The relative change that crosses it (a fraction, signed the worse way).
    pub limit: f64,
}

/// Errors parsing `--fail-on` for kernels reports.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KernelGateError {
    /// Not `METRIC:±N%`.
    #[error(
        "`{0}`: a kernel gate is gbps:-N% (GB/s falling by more than N%) or median_us:+N% (the median time rising by more than N%)"
    )]
    Form(String),
}

impl KernelGate {
    /// Parses a comma-separated list (empty: no gate).
    pub fn parse_list(text: &str) -> Result<Vec<KernelGate>, KernelGateError> {
        text.split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| {
                let bad = || KernelGateError::Form(t.to_owned());
                let (metric, n) = t.split_once(':').ok_or_else(bad)?;
                let metric = match metric.trim() {
                    "gbps" => KernelMetric::Gbps,
                    "median_us" => KernelMetric::MedianUs,
                    _ => return Err(bad()),
                };
                let pct: f64 = n
                    .trim()
                    .strip_suffix('%')
                    .ok_or_else(bad)?
                    .parse()
                    .map_err(|_| bad())?;
                let limit = pct / 100.0;
                // The worse way only: GB/s down, time up.
                let worse_way = match metric {
                    KernelMetric::Gbps => limit < 0.0,
                    KernelMetric::MedianUs => limit > 0.0,
                };
                if !worse_way || !limit.is_finite() {
                    return Err(bad());
                }
                Ok(KernelGate { metric, limit })
            })
            .collect()
    }

    /// The gate's name as typed: `gbps:-5%`.
    pub fn label(&self) -> String {
        let m = match self.metric {
            KernelMetric::Gbps => "gbps",
            KernelMetric::MedianUs => "median_us",
        };
        format!("{m}:{:+}%", 100.0 * self.limit)
    }
}

/// What a gate found on a row.
#[derive(Debug, Clone, PartialEq)]
pub enum GateOutcome {
    /// The change crosses the limit the worse way and its interval excludes no
    /// change on that side.
    Crossed(String),
    /// The row has no interval: the gate cannot be evaluated (with the reason).
    Unevaluated(String),
}

/// Every gate on every row: the crossings and the terms that could not be
/// evaluated, each in a sentence. Rows not judged (not verified) count as not
/// evaluable.
pub fn judge(c: &KernelsComparison, gates: &[KernelGate]) -> Vec<GateOutcome> {
    let mut out = Vec::new();
    for g in gates {
        for r in &c.rows {
            let Some(i) = r.interval.filter(|_| r.verdict != Verdict::Unknown) else {
                out.push(GateOutcome::Unevaluated(format!(
                    "{} on {}: {}",
                    g.label(),
                    r.kernel,
                    r.note.as_deref().unwrap_or("no interval")
                )));
                continue;
            };
            // The time's change and its interval, seen as the gate's figure.
            let (point, sure) = match g.metric {
                KernelMetric::MedianUs => (r.change, i.lo > 0.0),
                KernelMetric::Gbps => (r.gbps_change, i.lo > 0.0),
            };
            let crossed = match g.metric {
                KernelMetric::MedianUs => point > g.limit,
                KernelMetric::Gbps => point < g.limit,
            };
            // Beyond the noise floor too (the verdict), not only beyond zero.
            if crossed && sure && r.verdict == Verdict::Worse {
                out.push(GateOutcome::Crossed(format!(
                    "{} crossed on {}: {:+.1}% (time {:+.1}%, 95% interval [{:+.1}%, {:+.1}%])",
                    g.label(),
                    r.kernel,
                    100.0
                        * match g.metric {
                            KernelMetric::Gbps => r.gbps_change,
                            KernelMetric::MedianUs => r.change,
                        },
                    100.0 * r.change,
                    100.0 * i.lo,
                    100.0 * i.hi
                )));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_stats::rng::Rng;

    const OPTS: KernelCompareOptions = KernelCompareOptions {
        min_change: 0.02,
        resamples: 500,
        seed: 1,
    };

    /// The lavapipe fixture with `n` samples per kernel around `scale` times its
    /// median (1% noise).
    fn report(scale: f64, n: usize, seed: u64) -> KernelReport {
        let text = include_str!("../../../tests/fixtures/reports/kernels-lavapipe.json");
        let mut r = KernelReport::from_json(text).unwrap();
        r.drift.clear();
        let mut rng = Rng::new(seed);
        let mut draw = |m: f64| -> Vec<f64> {
            (0..n)
                .map(|_| m * scale * (1.0 + 0.01 * rng.normal()))
                .collect()
        };
        for k in &mut r.kernels {
            k.samples_us = draw(k.median_us);
            k.median_us = tokenscope_stats::stats::median(&k.samples_us).unwrap_or(0.0);
        }
        if let Some(b) = &mut r.bandwidth {
            b.read_samples_us = draw(b.read.median_us);
            b.read.median_us = tokenscope_stats::stats::median(&b.read_samples_us).unwrap_or(0.0);
        }
        r
    }

    #[test]
    fn a_ten_percent_slowdown_is_worse_with_its_interval() {
        let (a, b) = (report(1.0, 20, 1), report(1.1, 20, 2));
        let c = compare_kernels(("a", &a), ("b", &b), &OPTS);
        assert!(
            c.same_gpu && c.differences.is_empty(),
            "{:?}",
            c.differences
        );
        assert_eq!(c.rows.len(), a.kernels.len() + 1);
        assert_eq!(c.rows[0].kernel, "bandwidth_read");
        for r in &c.rows {
            let i = r.interval.unwrap();
            assert!(i.lo > 0.05 && i.hi < 0.15 && i.contains(r.change), "{r:?}");
            assert_eq!(r.verdict, Verdict::Worse, "{r:?}");
            assert!((r.gbps_change - (1.0 / (1.0 + r.change) - 1.0)).abs() < 1e-12);
        }
        let gates = KernelGate::parse_list("gbps:-5%").unwrap();
        let out = judge(&c, &gates);
        assert_eq!(out.len(), c.rows.len(), "{out:?}");
        assert!(out.iter().all(|o| matches!(o, GateOutcome::Crossed(_))));
        // A 20% limit is not crossed by a 10% slowdown.
        let out = judge(&c, &KernelGate::parse_list("median_us:+20%").unwrap());
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn the_same_run_twice_is_no_change() {
        let (a, b) = (report(1.0, 20, 3), report(1.0, 20, 4));
        let c = compare_kernels(("a", &a), ("b", &b), &OPTS);
        for r in &c.rows {
            assert_eq!(r.verdict, Verdict::NoChange, "{r:?}");
        }
        assert!(judge(&c, &KernelGate::parse_list("gbps:-5%").unwrap()).is_empty());
    }

    #[test]
    fn without_samples_no_interval_and_the_gate_says_so() {
        let a = report(1.0, 0, 5);
        let mut b = report(1.1, 20, 6);
        b.adapter.name = "NVIDIA H100".into();
        let c = compare_kernels(("a", &a), ("b", &b), &OPTS);
        assert!(!c.same_gpu);
        assert!(
            c.differences[0].starts_with("different GPU"),
            "{:?}",
            c.differences
        );
        let r = &c.rows[1];
        assert_eq!((r.verdict, r.interval), (Verdict::Unknown, None));
        assert!(
            r.note.as_deref().unwrap().contains("no per-sample"),
            "{r:?}"
        );
        let out = judge(&c, &KernelGate::parse_list("gbps:-5%").unwrap());
        assert!(out.iter().all(|o| matches!(o, GateOutcome::Unevaluated(_))));
        // Too few samples on one side.
        let c = compare_kernels(("b", &b), ("s", &report(1.0, 3, 7)), &OPTS);
        assert!(
            c.rows[1].note.as_deref().unwrap().contains("needs 10"),
            "{:?}",
            c.rows[1]
        );
    }

    #[test]
    fn a_run_that_drifted_widens_the_noise_floor() {
        let (mut a, b) = (report(1.0, 20, 1), report(1.1, 20, 2));
        a.drift = vec![super::super::DriftCheck::new(
            "gemv f32".into(),
            100.0,
            130.0,
        )];
        let c = compare_kernels(("a", &a), ("b", &b), &OPTS);
        assert!((c.noise_floor - 0.3).abs() < 1e-12, "{}", c.noise_floor);
        assert!(c.noise_source.contains("drift"), "{}", c.noise_source);
        // A 10% change inside a 30% drift is no change, and no gate trips.
        assert!(
            c.rows.iter().all(|r| r.verdict == Verdict::NoChange),
            "{:?}",
            c.rows
        );
        assert!(judge(&c, &KernelGate::parse_list("gbps:-5%").unwrap()).is_empty());
        // A drift under --min-change leaves it.
        a.drift = vec![super::super::DriftCheck::new(
            "gemv f32".into(),
            100.0,
            101.0,
        )];
        let c = compare_kernels(("a", &a), ("b", &b), &OPTS);
        assert_eq!(
            (c.noise_floor, c.noise_source.as_str()),
            (0.02, "--min-change")
        );
    }

    #[test]
    fn kernels_only_one_side_ran_are_listed() {
        let a = report(1.0, 20, 8);
        let mut b = a.clone();
        let gone = b.kernels.remove(0);
        let c = compare_kernels(("a", &a), ("b", &b), &OPTS);
        assert_eq!(c.only_before, vec![key(&gone)]);
        assert!(c.only_after.is_empty());
    }

    #[test]
    fn gates_parse_the_worse_way_only() {
        let g = KernelGate::parse_list("gbps:-5%, median_us:+3%").unwrap();
        assert_eq!(g[0].metric, KernelMetric::Gbps);
        assert!((g[0].limit + 0.05).abs() < 1e-12);
        assert_eq!(g[1].label(), "median_us:+3%");
        for bad in [
            "gbps:+5%",
            "median_us:-5%",
            "gbps:5",
            "ttft_ms:p95:+5%",
            "gbps",
        ] {
            let e = KernelGate::parse_list(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
        assert!(KernelGate::parse_list("").unwrap().is_empty());
    }
}
