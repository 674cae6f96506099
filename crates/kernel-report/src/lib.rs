//! The `tokenscope.kernels/1` report: what `tokenscope kernels` writes with `--out`
//! and what `tokenscope report` and the web page read.
//!
//! The contract (`docs/json.md`) fixes the field names shown there; this model adds
//! fields but never renames one. Units are in the names (`_us`, `_gbps`, `_bytes`). [`KernelReport::from_json`] refuses a document whose major
//! schema version it does not know.

mod compare;
mod device;
mod gguf;
mod results;
mod tuning;

pub use compare::{
    GateOutcome, KERNELS_COMPARE_SCHEMA, KernelChange, KernelCompareOptions, KernelGate,
    KernelGateError, KernelMetric, KernelsComparison, compare_kernels, judge, min_kernel_samples,
};
pub use device::{
    AdapterReport, AvailableFeatures, FeatureReport, LimitsReport, RunConfig, RunEnvironment,
    TimingMethod,
};
pub use gguf::{GgufFloorRow, GgufReport, TypeRow};
pub use results::{
    BandwidthReport, ComputeReport, DRIFT_LIMIT, DecodeStepResult, DispatchCost, DriftCheck,
    FloorRow, GoalResult, KernelResult, ROOFLINE_TURN, RooflinePoint, RooflineRow, SkippedKernel,
    TimingSummary, USER_KERNEL_DTYPE, VerificationReport,
};
use serde::{Deserialize, Serialize};
pub use tuning::{
    CEILING_MOVE_LIMIT, ProblemKey, SPREAD_LIMIT, SearchReport, TUNING_SCHEMA, TriedVariant,
    TuningEntry, TuningError, TuningFile, TuningUse, VariantReport,
};

use tokenscope_hw::floor::{FloorBandwidth, ModelShape, Quant, ms_at};

/// The schema id this build writes.
pub const SCHEMA: &str = "tokenscope.kernels/1";
/// The schema family prefix (before the version).
pub const SCHEMA_PREFIX: &str = "tokenscope.kernels/";
/// The major version this build reads and writes.
pub const SCHEMA_MAJOR: u32 = 1;

/// Errors reading a kernels report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Not JSON, or JSON that does not match the model.
    #[error("kernels report is not valid: {0}")]
    Json(String),
    /// No `schema` string.
    #[error("kernels report has no `schema` field (expected \"{SCHEMA}\")")]
    MissingSchema,
    /// A `schema` of another document type.
    #[error("`schema` is \"{0}\", not a tokenscope kernels report (expected \"{SCHEMA}\")")]
    WrongSchema(String),
    /// A major version this build does not know.
    #[error(
        "kernels report has schema \"{found}\" (major version {major}); this build of tokenscope reads major version {SCHEMA_MAJOR} only: upgrade tokenscope to read it"
    )]
    UnsupportedVersion {
        /// The schema string found.
        found: String,
        /// Its major version.
        major: u32,
    },
}

/// The whole `tokenscope.kernels/1` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelReport {
    /// Always [`SCHEMA`] when written by this build.
    pub schema: String,
    /// Version of the tool that wrote it.
    pub tool_version: String,
    /// The adapter.
    pub adapter: AdapterReport,
    /// Features used.
    pub features: FeatureReport,
    /// Limits requested.
    pub limits: LimitsReport,
    /// How times were taken.
    pub timing: TimingMethod,
    /// Where the harness ran (native or a browser, with its user agent); absent in
    /// reports written before it was added.
    #[serde(default)]
    pub environment: Option<RunEnvironment>,
    /// Settings of the run.
    pub config: RunConfig,
    /// Memory-bandwidth ceiling; `null` until measured.
    pub bandwidth: Option<BandwidthReport>,
    /// Arithmetic ceiling (FMA throughput, f32 and f16): the roofline's other roof;
    /// absent in reports written before it was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute: Option<ComputeReport>,
    /// The tuning file the run looked for, and whether it applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning: Option<TuningUse>,
    /// Kernel results.
    pub kernels: Vec<KernelResult>,
    /// Kernels not run, with reasons.
    #[serde(default)]
    pub skipped: Vec<SkippedKernel>,
    /// Decode floor per model, quant and context.
    pub decode_floor: Vec<FloorRow>,
    /// Synthetic decode steps.
    #[serde(default)]
    pub decode_steps: Vec<DecodeStepResult>,
    /// Skinny-matmul batch sweeps against the GEMV: the roofline turn.
    #[serde(default)]
    pub roofline: Vec<RooflineRow>,
    /// Each GEMV format's fixed cost per dispatch and streaming rate, fitted over its
    /// shapes (formats with fewer than 3 shapes are left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dispatch_cost: Vec<DispatchCost>,
    /// Standing against the goals.
    #[serde(default)]
    pub goals: Vec<GoalResult>,
    /// The same kernels timed again at the end of the run: whether a figure depends on
    /// what ran before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<DriftCheck>,
    /// Errors that stopped a kernel (wgpu errors, failed readbacks); any makes
    /// `verified` false.
    #[serde(default)]
    pub errors: Vec<String>,
    /// Every kernel (and the bandwidth kernels) matched its CPU reference.
    pub verified: bool,
    /// The model file the run measured (`kernels --gguf`): its types and floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gguf: Option<GgufReport>,
}

impl KernelReport {
    /// GEMV bandwidth for a format: total bytes over total time of the verified,
    /// non-cache-resident batch-1 GEMVs (the mix of shapes a model reads), else the
    /// read bandwidth. Returns the GB/s and where they came from.
    pub fn gemv_bandwidth(&self, dtype: Quant) -> (f64, String) {
        let ks: Vec<&KernelResult> = self
            .kernels
            .iter()
            .filter(|k| {
                k.name == "gemv" && k.dtype == dtype.as_str() && k.verified && !k.cache_resident
            })
            // A GEMV run beside a developer's kernel has no model's shape.
            .filter(|k| k.beside.is_none())
            .collect();
        let time: f64 = ks.iter().map(|k| k.median_us).sum();
        if ks.is_empty() || time <= 0.0 {
            let read = self.bandwidth.as_ref().map_or(0.0, |b| b.read_gbps);
            return (read, format!("read (no GEMV {dtype} measured)"));
        }
        let bytes: u64 = ks.iter().map(|k| k.bytes_moved).sum();
        (
            bytes as f64 / (time * 1e-6) / 1e9,
            format!("gemv {dtype} ({} shapes)", ks.len()),
        )
    }

    /// Attention bandwidth at `context`: the split-KV kernel with the KV format at
    /// the measured context nearest (in log scale), else any attention kernel, else
    /// the read bandwidth. Returns the GB/s and where they came from.
    pub fn attention_bandwidth(&self, kv: Quant, context: u64) -> (f64, String) {
        let usable =
            |k: &&KernelResult| k.name.starts_with("attention") && k.verified && !k.cache_resident;
        let nearest = |pred: &dyn Fn(&KernelResult) -> bool| {
            self.kernels
                .iter()
                .filter(usable)
                .filter(|k| pred(k))
                .min_by(|a, b| {
                    let d = |k: &KernelResult| {
                        (k.context.unwrap_or(1).max(1) as f64 / context.max(1) as f64)
                            .ln()
                            .abs()
                    };
                    d(a).total_cmp(&d(b))
                })
        };
        let pick = nearest(&|k| k.name == "attention_decode_split" && k.dtype == kv.as_str())
            .or_else(|| nearest(&|_| true));
        match pick {
            Some(k) => (
                k.effective_gbps,
                format!("{} {} context {}", k.name, k.dtype, k.context.unwrap_or(0)),
            ),
            None => (
                self.bandwidth.as_ref().map_or(0.0, |b| b.read_gbps),
                "read (no attention measured)".into(),
            ),
        }
    }

    /// The decode floor of `model` at `quant` and `context` from this report's
    /// measured bandwidths (with the synthetic decode step, if one ran there).
    /// `None` when no bandwidth was measured.
    pub fn floor_row(
        &self,
        model: &ModelShape,
        quant: Quant,
        context: u64,
        kv: Quant,
    ) -> Option<FloorRow> {
        let (gemv, gemv_source) = self.gemv_bandwidth(quant);
        let (attn, attention_source) = self.attention_bandwidth(kv, context);
        let bw = FloorBandwidth {
            gemv_gbps: gemv,
            attention_gbps: attn,
        };
        let estimate = model.floor(quant, context, kv, bw).ok()?;
        let read_gbps = self.read_gbps();
        let read_floor_ms = read_gbps.and_then(|r| ms_at(estimate.bytes_per_token, r));
        let step = self
            .decode_steps
            .iter()
            .find(|s| s.model == model.name && s.quant == quant && s.context == context);
        Some(FloorRow {
            decode_step_ms: step.map(|s| s.step_ms),
            step_efficiency: step
                .and_then(|s| tokenscope_hw::floor::efficiency(estimate.tpot_floor_ms, s.step_ms)),
            estimate,
            gemv_source,
            attention_source,
            read_gbps,
            read_floor_ms,
            read_tokens_per_s_ceiling: read_floor_ms.map(|ms| 1e3 / ms),
        })
    }

    /// The measured read bandwidth, when it is a usable (positive, finite) figure.
    pub fn read_gbps(&self) -> Option<f64> {
        self.bandwidth
            .as_ref()
            .map(|b| b.read_gbps)
            .filter(|r| r.is_finite() && *r > 0.0)
    }

    /// [`KernelReport::floor_row`] with the KV format the report's own floor used
    /// (f16 if it has none): what `tokenscope report` calls for the served model.
    pub fn floor_for(&self, model: &ModelShape, quant: Quant, context: u64) -> Option<FloorRow> {
        let kv = self
            .decode_floor
            .first()
            .map_or(Quant::F16, |r| r.estimate.kv_dtype);
        self.floor_row(model, quant, context, kv)
    }

    /// The read ceiling's moves this report can see, in sentences: between the start
    /// and the end of the run (the drift check's read kernel), and between the
    /// variant search and this run (the tuning file's read kernel), each when more
    /// than [`CEILING_MOVE_LIMIT`]. Every fraction of the read bandwidth is
    /// uncertain by that much.
    pub fn ceiling_remarks(&self) -> Vec<String> {
        let Some(read) = self.read_gbps() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let fig = |g: f64| tokenscope_stats::fmt::fmt_sig3(g);
        if let Some(d) = self
            .drift
            .iter()
            .find(|d| d.kernel == "bandwidth_read" && d.again_us > 0.0)
        {
            // GB/s scale as 1 / time.
            let end = read * d.first_us / d.again_us;
            let change = end / read - 1.0;
            if change.abs() > CEILING_MOVE_LIMIT {
                out.push(format!(
                    "the read ceiling moved {} -> {} GB/s ({:+.0}%) between the start and the end of this run: every fraction of it is uncertain by that much",
                    fig(read),
                    fig(end),
                    100.0 * change
                ));
            }
        }
        if let Some(then) = self
            .tuning
            .as_ref()
            .filter(|t| t.used)
            .and_then(|t| t.read_gbps)
            .filter(|g| *g > 0.0)
        {
            let change = read / then - 1.0;
            if change.abs() > CEILING_MOVE_LIMIT {
                out.push(format!(
                    "the read ceiling was {} GB/s when the variants were searched and is {} GB/s in this run ({:+.0}%): the adapter's state moved, the tuned choices may not hold",
                    fig(then),
                    fig(read),
                    100.0 * change
                ));
            }
        }
        out
    }

    /// Reads a report, refusing unknown major schema versions with a clear error.
    /// Minor additions (unknown fields) are ignored.
    pub fn from_json(text: &str) -> Result<KernelReport, ReportError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ReportError::Json(e.to_string()))?;
        let schema = value
            .get("schema")
            .and_then(serde_json::Value::as_str)
            .ok_or(ReportError::MissingSchema)?;
        check_schema(schema)?;
        let mut report: KernelReport =
            serde_json::from_value(value).map_err(|e| ReportError::Json(e.to_string()))?;
        report.fill_read_floors();
        Ok(report)
    }

    /// Gives every floor row and decode step without a floor at the read bandwidth
    /// (a report written before it was added) the one its own read bandwidth
    /// gives: every view then shows both floors.
    pub fn fill_read_floors(&mut self) {
        let Some(read) = self.read_gbps() else {
            return;
        };
        for f in self
            .decode_floor
            .iter_mut()
            .filter(|f| f.read_floor_ms.is_none())
        {
            f.read_gbps = Some(read);
            f.read_floor_ms = ms_at(f.estimate.bytes_per_token, read);
            f.read_tokens_per_s_ceiling = f.read_floor_ms.map(|ms| 1e3 / ms);
        }
        for s in self
            .decode_steps
            .iter_mut()
            .filter(|s| s.read_floor_ms.is_none())
        {
            s.read_floor_ms = ms_at(s.bytes_per_token, read);
        }
    }

    /// Serializes as pretty JSON.
    pub fn to_json_pretty(&self) -> String {
        // A struct of plain data always serializes.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The batch sweeps of the skinny matmul, each against the GEMV of the same format
    /// and shape (sweeps without a verified GEMV are left out).
    pub fn roofline_rows(&self) -> Vec<RooflineRow> {
        let mut rows: Vec<RooflineRow> = Vec::new();
        for k in self
            .kernels
            .iter()
            .filter(|k| k.name == "matmul_skinny" && k.verified)
        {
            let Some(base) = self.kernels.iter().find(|g| {
                g.name == "gemv" && g.verified && g.dtype == k.dtype && g.shape == k.shape
            }) else {
                continue;
            };
            let point = |x: &KernelResult| RooflinePoint {
                batch: x.batch,
                median_us: x.median_us,
                time_vs_batch1: if base.median_us > 0.0 {
                    x.median_us / base.median_us
                } else {
                    0.0
                },
                gflops: x.gflops,
            };
            match rows
                .iter_mut()
                .find(|r| r.dtype == k.dtype && r.shape == k.shape)
            {
                Some(r) => r.points.push(point(k)),
                None => rows.push(RooflineRow {
                    dtype: k.dtype.clone(),
                    shape: k.shape.clone(),
                    points: vec![point(base), point(k)],
                    turn_batch: None,
                }),
            }
        }
        for r in &mut rows {
            r.points.sort_by_key(|p| p.batch);
            r.turn_batch = r
                .points
                .iter()
                .find(|p| p.time_vs_batch1 > ROOFLINE_TURN)
                .map(|p| p.batch);
        }
        rows
    }

    /// Each GEMV format's time over its shapes fitted as `a + bytes / B`
    /// ([`DispatchCost`]): verified batch-1 GEMVs of the sweep (generated data, off
    /// the cache, not one run beside a developer's kernel), at least 3 of them with
    /// different sizes, and how many variants they ran (more than one: `a` is the
    /// mix's).
    pub fn dispatch_costs(&self) -> Vec<DispatchCost> {
        let read = self.bandwidth.as_ref().map_or(0.0, |b| b.read_gbps);
        let mut out = Vec::new();
        let mut dtypes: Vec<&str> = Vec::new();
        let sweep = |k: &&KernelResult| k.name == "gemv" && !k.is_user() && k.beside.is_none();
        for k in self.kernels.iter().filter(sweep) {
            if !dtypes.contains(&k.dtype.as_str()) {
                dtypes.push(&k.dtype);
            }
        }
        for dtype in dtypes {
            let ks: Vec<&KernelResult> = self
                .kernels
                .iter()
                .filter(sweep)
                .filter(|k| k.dtype == dtype && k.batch == 1)
                .filter(|k| k.verified && !k.cache_resident && k.tensors.is_empty())
                .collect();
            let points: Vec<(f64, f64)> = ks
                .iter()
                .map(|k| (k.bytes_moved as f64, k.median_us))
                .collect();
            let mut variants: Vec<&str> = ks
                .iter()
                .filter_map(|k| k.variant.as_ref().map(|v| v.name.as_str()))
                .collect();
            variants.sort_unstable();
            variants.dedup();
            let Some(fit) = tokenscope_stats::stats::LinearFit::fit(&points) else {
                continue;
            };
            // slope: microseconds per byte; bytes / us = MB/s.
            let stream_gbps = (fit.slope > 0.0).then(|| 1e-3 / fit.slope);
            let ci = fit.intercept_ci95();
            out.push(DispatchCost {
                dtype: dtype.to_string(),
                shapes: fit.n as u32,
                fixed_us: fit.intercept,
                fixed_ci95_us: ci,
                resolved: fit.intercept > ci,
                stream_gbps,
                stream_fraction_of_read: stream_gbps.filter(|_| read > 0.0).map(|g| g / read),
                variants: variants.len().max(1) as u32,
            });
        }
        out
    }

    /// Recomputes `verified` from the parts: the bandwidth kernels and every kernel
    /// matched their CPU references and no kernel stopped with an error.
    pub fn all_verified(&self) -> bool {
        let bw = self
            .bandwidth
            .as_ref()
            .is_none_or(|b| b.read_verified && b.copy_verified);
        bw && self.kernels.iter().all(|k| k.verified) && self.errors.is_empty()
    }
}

/// Checks a `schema` string: `tokenscope.kernels/<major>[.<minor>]` with a known major.
pub fn check_schema(schema: &str) -> Result<(), ReportError> {
    let version = schema
        .strip_prefix(SCHEMA_PREFIX)
        .ok_or_else(|| ReportError::WrongSchema(schema.to_string()))?;
    let major_text = version.split('.').next().unwrap_or("");
    let major: u32 = major_text
        .parse()
        .map_err(|_| ReportError::WrongSchema(schema.to_string()))?;
    if major != SCHEMA_MAJOR {
        return Err(ReportError::UnsupportedVersion {
            found: schema.to_string(),
            major,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let s = TimingSummary::from_samples(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.samples, 4);
        assert_eq!(s.min_us, 1.0);
        assert_eq!(s.max_us, 4.0);
        assert!((s.median_us - 2.5).abs() < 1e-12);
        assert!((s.p25_us - 1.75).abs() < 1e-12);
        assert!((s.p75_us - 3.25).abs() < 1e-12);
        assert!((s.mean_us - 2.5).abs() < 1e-12);
        let one = TimingSummary::from_samples(&[7.0, f64::NAN]).unwrap();
        assert_eq!((one.samples, one.median_us, one.p25_us), (1, 7.0, 7.0));
        assert!(TimingSummary::from_samples(&[]).is_none());
        assert!((s.relative_iqr() - 0.6).abs() < 1e-12);
        assert_eq!(s.calls_per_sample, 1);
        assert_eq!(s.with_calls_per_sample(12).calls_per_sample, 12);
        assert_eq!(s.with_calls_per_sample(0).calls_per_sample, 1);
    }

    #[test]
    fn older_reports_read_with_defaults_and_new_fields_round_trip() {
        // The lavapipe fixture predates `environment`, the batching settings and
        // `calls_per_sample`: it still reads, with the defaults.
        let text = include_str!("../../../tests/fixtures/reports/kernels-lavapipe.json");
        let mut r = KernelReport::from_json(text).unwrap();
        assert_eq!(r.environment, None);
        assert_eq!(r.config.timestamp_batch_ms, 0.0);
        assert!(r.kernels.iter().all(|k| k.timing.calls_per_sample == 1));
        r.environment = Some(RunEnvironment::browser(Some("Mozilla/5.0 test".into())));
        r.config.timestamp_batch_ms = 10.0;
        r.kernels[0].timing = r.kernels[0].timing.with_calls_per_sample(7);
        let back = KernelReport::from_json(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        let env = back.environment.unwrap();
        assert_eq!(env.runtime, "browser");
        assert_eq!(env.clock, "performance.now()");
        assert_eq!(env.user_agent.as_deref(), Some("Mozilla/5.0 test"));
    }

    #[test]
    fn a_moving_ceiling_is_remarked() {
        let text = include_str!("../../../tests/fixtures/reports/kernels-lavapipe.json");
        let mut r = KernelReport::from_json(text).unwrap();
        r.drift.clear();
        r.tuning = None;
        assert!(r.ceiling_remarks().is_empty());
        let read = r.read_gbps().unwrap();
        // The read kernel 20% slower at the end: the ceiling fell to 1/1.2.
        r.drift
            .push(DriftCheck::new("bandwidth_read".into(), 100.0, 120.0));
        let m = r.ceiling_remarks();
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].contains("-17%") && m[0].contains("start and the end"),
            "{m:?}"
        );
        // 4% is within the limit.
        r.drift[0] = DriftCheck::new("bandwidth_read".into(), 100.0, 104.0);
        assert!(r.ceiling_remarks().is_empty());
        // The issue's 2.5 -> 3.2 GB/s between the search and the run.
        r.tuning = Some(TuningUse {
            file: "t.json".into(),
            used: true,
            note: String::new(),
            read_gbps: Some(read / 1.28),
        });
        let m = r.ceiling_remarks();
        assert!(m[0].contains("+28%") && m[0].contains("searched"), "{m:?}");
    }

    /// The lavapipe fixture's GEMVs replaced by `shapes` f16 GEMVs timed as
    /// `time(bytes)`.
    fn gemvs_timed(shapes: &[(u64, u64)], mut time: impl FnMut(u64) -> f64) -> KernelReport {
        let text = include_str!("../../../tests/fixtures/reports/kernels-lavapipe.json");
        let mut r = KernelReport::from_json(text).unwrap();
        let template = r.kernels.iter().find(|k| k.name == "gemv").unwrap().clone();
        r.kernels.retain(|k| k.name != "gemv");
        for &(rows, cols) in shapes {
            let mut k = template.clone();
            k.dtype = "f16".into();
            k.shape = vec![rows, cols];
            k.bytes_moved = 2 * rows * cols + 4 * (rows + cols);
            k.median_us = time(k.bytes_moved);
            k.cache_resident = false;
            k.verified = true;
            r.kernels.push(k);
        }
        r
    }

    const DECODE_SHAPES: [(u64, u64); 5] = [
        (4096, 4096),
        (1024, 4096),
        (14336, 4096),
        (4096, 14336),
        (128_256, 4096),
    ];

    #[test]
    fn the_fixed_cost_per_dispatch_is_fitted_over_the_shapes() {
        // 3 us a dispatch, bytes at 4000 GB/s (4 bytes a nanosecond).
        let r = gemvs_timed(&DECODE_SHAPES, |b| 3.0 + b as f64 / 4000.0 / 1e3);
        let c = r.dispatch_costs();
        assert_eq!(c.len(), 1, "{c:?}");
        let c = &c[0];
        assert_eq!((c.dtype.as_str(), c.shapes), ("f16", 5));
        assert!((c.fixed_us - 3.0).abs() < 1e-6, "{c:?}");
        assert!((c.stream_gbps.unwrap() - 4000.0).abs() < 1e-6, "{c:?}");
        let read = r.bandwidth.as_ref().unwrap().read_gbps;
        assert!((c.stream_fraction_of_read.unwrap() - 4000.0 / read).abs() < 1e-9);
        assert!(c.resolved && c.fixed_ci95_us < 1e-6, "{c:?}");
        assert_eq!(c.variants, 1);
        // Shapes that ran different variants: the fit says it is their mix's.
        let mut mixed = r.clone();
        for (k, name) in mixed
            .kernels
            .iter_mut()
            .filter(|k| k.name == "gemv")
            .zip(["a", "b", "a", "a", "c"])
        {
            k.variant = Some(VariantReport {
                name: name.into(),
                source: "tuned".into(),
                note: String::new(),
                search: None,
            });
        }
        assert_eq!(mixed.dispatch_costs()[0].variants, 3);
        // tokenscope's GEMV beside a developer's kernel and a developer's kernel
        // named gemv are not the sweep's.
        let mut other = r.clone();
        other
            .kernels
            .iter_mut()
            .filter(|k| k.name == "gemv")
            .take(3)
            .for_each(|k| {
                k.beside = Some("mine".into());
            });
        assert!(other.dispatch_costs().is_empty());

        // Noise of +-2 us around a fixed cost of 0.5 us: the interval holds 0, and
        // the report names no fixed cost.
        let noise = [2.0, -2.0, 2.0, -2.0, 2.0];
        let mut i = 0;
        let r = gemvs_timed(&DECODE_SHAPES, |b| {
            i += 1;
            0.5 + noise[i - 1] + b as f64 / 4000.0 / 1e3
        });
        let c = &r.dispatch_costs()[0];
        assert!(!c.resolved && c.fixed_ci95_us > c.fixed_us.abs(), "{c:?}");

        // A fixed cost below 0 by more than its interval is no cost: not resolved.
        let r = gemvs_timed(&DECODE_SHAPES, |b| b as f64 / 4000.0 / 1e3 - 3.0);
        let c = &r.dispatch_costs()[0];
        assert!(c.fixed_us < -2.9 && !c.resolved, "{c:?}");

        // Two shapes, or a third that sat in cache or failed its check: no fit.
        assert!(
            gemvs_timed(&DECODE_SHAPES[..2], |b| b as f64)
                .dispatch_costs()
                .is_empty()
        );
        for spoil in [
            |k: &mut KernelResult| k.cache_resident = true,
            |k: &mut KernelResult| k.verified = false,
        ] {
            let mut r = gemvs_timed(&DECODE_SHAPES[..3], |b| 1.0 + b as f64 / 1e6);
            spoil(r.kernels.last_mut().unwrap());
            assert!(r.dispatch_costs().is_empty());
        }
    }

    #[test]
    fn schema_versions() {
        assert!(check_schema("tokenscope.kernels/1").is_ok());
        assert!(check_schema("tokenscope.kernels/1.3").is_ok());
        let e = check_schema("tokenscope.kernels/2").unwrap_err();
        assert!(matches!(
            e,
            ReportError::UnsupportedVersion { major: 2, .. }
        ));
        assert!(e.to_string().contains("major version 1"), "{e}");
        assert!(matches!(
            check_schema("tokenscope.client/1"),
            Err(ReportError::WrongSchema(_))
        ));
        assert!(matches!(
            KernelReport::from_json(r#"{"kernels": []}"#),
            Err(ReportError::MissingSchema)
        ));
        let e = KernelReport::from_json(r#"{"schema": "tokenscope.kernels/7", "kernels": []}"#)
            .unwrap_err();
        assert!(e.to_string().contains("tokenscope.kernels/7"), "{e}");
    }
}
