//! The `tokenscope.kernels/1` report: what `tokenscope kernels` writes with `--out`
//! and what `tokenscope report` and the web page read.
//!
//! The contract (docs: `../shared/spec/contracts.md` section 3) fixes the field names
//! shown there; this model adds fields but never renames one. Units are in the names
//! (`_us`, `_gbps`, `_bytes`). [`KernelReport::from_json`] refuses a document whose major
//! schema version it does not know.

use serde::{Deserialize, Serialize};

use crate::analyze::floor::{FloorBandwidth, FloorEstimate, ModelShape, Quant};

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

/// How kernel times were taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimingMethod {
    /// GPU timestamps written at the beginning and end of each compute pass.
    TimestampQuery,
    /// Host clock around submit-and-wait of a batch of iterations (includes submit overhead).
    WallClock,
}

impl TimingMethod {
    /// How tables and reports name the method.
    pub fn label(self) -> &'static str {
        match self {
            Self::TimestampQuery => "GPU timestamp queries",
            Self::WallClock => "wall clock around submit-and-wait",
        }
    }
}

/// The adapter the harness ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdapterReport {
    /// Adapter name (e.g. "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)").
    pub name: String,
    /// Graphics backend: `vulkan`, `metal`, `dx12`, `gl`, `webgpu`.
    pub backend: String,
    /// `DiscreteGpu`, `IntegratedGpu`, `VirtualGpu`, `Cpu` or `Other`.
    pub device_type: String,
    /// Driver name.
    pub driver: String,
    /// Driver version / info.
    #[serde(default)]
    pub driver_info: String,
    /// PCI vendor id (backend-specific).
    #[serde(default)]
    pub vendor_id: u32,
    /// PCI device id (backend-specific).
    #[serde(default)]
    pub device_id: u32,
    /// Smallest subgroup size the adapter reports (0 if unknown).
    #[serde(default)]
    pub subgroup_min_size: u32,
    /// Largest subgroup size the adapter reports (0 if unknown).
    #[serde(default)]
    pub subgroup_max_size: u32,
}

impl AdapterReport {
    /// Whether the adapter runs on the CPU (Mesa lavapipe or llvmpipe, SwiftShader).
    pub fn is_cpu(&self) -> bool {
        self.device_type.eq_ignore_ascii_case("cpu")
    }

    /// What to tell the user when the adapter is a fallback, not a GPU: OpenGL's
    /// llvmpipe (wgpu's last resort without a Vulkan driver) or a CPU Vulkan
    /// driver. `None` for a GPU.
    pub fn fallback_note(&self) -> Option<String> {
        if self.is_cpu() && self.backend.eq_ignore_ascii_case("gl") {
            Some(format!(
                "{} through OpenGL is a fallback: no Vulkan driver was found, so the kernels ran on the CPU through GL, slower than Vulkan lavapipe and without shader-f16 or subgroups; the figures are the CPU memory's. For Vulkan install a driver (Debian/Ubuntu: apt install mesa-vulkan-drivers; on a GPU machine, its vendor's driver), then run again",
                self.name
            ))
        } else if self.is_cpu() {
            Some(format!(
                "{} ({}) is a CPU adapter, not a GPU: the figures are the CPU memory's; run on a machine with a GPU for its floor",
                self.name, self.backend
            ))
        } else {
            None
        }
    }
}

/// Optional features: what the adapter has and what the harness used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureReport {
    /// Timestamp queries used for timing.
    pub timestamp_query: bool,
    /// `shader-f16` used (f16 loads in the f16 kernels).
    pub shader_f16: bool,
    /// Subgroup operations used for reductions.
    pub subgroups: bool,
    /// What the adapter offers, before any `--no-*` option turned a feature off.
    #[serde(default)]
    pub available: Option<AvailableFeatures>,
}

/// Features the adapter offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AvailableFeatures {
    /// `TIMESTAMP_QUERY`.
    pub timestamp_query: bool,
    /// `SHADER_F16`.
    pub shader_f16: bool,
    /// `SUBGROUP`.
    pub subgroups: bool,
}

/// The device limits the harness requested (the adapter's own, not wgpu's defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitsReport {
    /// Largest storage-buffer binding, bytes.
    pub max_storage_buffer_binding_size: u64,
    /// Largest buffer, bytes.
    pub max_buffer_size: u64,
    /// Storage buffers per shader stage.
    pub max_storage_buffers_per_shader_stage: u32,
    /// Invocations per workgroup.
    pub max_compute_invocations_per_workgroup: u32,
    /// Workgroup size in x.
    pub max_compute_workgroup_size_x: u32,
    /// Workgroup shared memory, bytes.
    pub max_compute_workgroup_storage_size: u32,
    /// Workgroups per dispatch dimension.
    pub max_compute_workgroups_per_dimension: u32,
}

/// The run's settings, enough to rerun it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Small shapes (CI).
    pub quick: bool,
    /// Timed samples per kernel.
    pub samples: u32,
    /// Untimed warm-up iterations per kernel.
    pub warmup: u32,
    /// Seed of the generated inputs.
    pub seed: u64,
    /// Subgroup reductions turned off by option.
    #[serde(default)]
    pub force_shared_reduction: bool,
    /// Models whose floor was computed.
    pub models: Vec<String>,
    /// Weight formats of the floor.
    pub quants: Vec<Quant>,
    /// Context lengths of the floor and the attention kernels.
    pub contexts: Vec<u64>,
    /// The bytes the harness assumed for the last-level cache.
    pub cache_bytes: u64,
    /// Where `cache_bytes` came from (`sysfs:...` or `assumed`).
    pub cache_source: String,
    /// Timestamp timing: each sample spans enough calls (in one compute pass) for at
    /// least this many milliseconds of GPU work; 0 = one call per sample. Browsers
    /// quantize timestamps (Chrome to 100 us), so the page uses 10 ms.
    #[serde(default)]
    pub timestamp_batch_ms: f64,
    /// Wall-clock timing: each sample spans enough calls for at least this many
    /// milliseconds (used when timestamps are missing).
    #[serde(default)]
    pub wall_batch_ms: f64,
}

/// Where the harness ran: natively (the CLI) or in a browser page (WebGPU).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEnvironment {
    /// `native` (`tokenscope kernels`) or `browser` (the page's GPU view).
    pub runtime: String,
    /// The browser's `navigator.userAgent` (browser runs).
    #[serde(default)]
    pub user_agent: Option<String>,
    /// The host clock behind wall-clock timing (`std::time::Instant`, `performance.now()`).
    pub clock: String,
}

impl RunEnvironment {
    /// A native run (the CLI, `std::time::Instant`).
    pub fn native() -> RunEnvironment {
        RunEnvironment {
            runtime: "native".into(),
            user_agent: None,
            clock: "std::time::Instant".into(),
        }
    }

    /// A run in a browser page.
    pub fn browser(user_agent: Option<String>) -> RunEnvironment {
        RunEnvironment {
            runtime: "browser".into(),
            user_agent,
            clock: "performance.now()".into(),
        }
    }
}

/// Median and spread of a kernel's repeated timings, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimingSummary {
    /// Number of timed samples.
    pub samples: u32,
    /// Median.
    pub median_us: f64,
    /// Fastest sample.
    pub min_us: f64,
    /// Slowest sample.
    pub max_us: f64,
    /// 25th percentile.
    pub p25_us: f64,
    /// 75th percentile.
    pub p75_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// Calls each sample spans (a sample is their time divided by this): 1 for
    /// per-call timestamps, more when samples are batched to a minimum duration.
    #[serde(default = "one")]
    pub calls_per_sample: u32,
}

fn one() -> u32 {
    1
}

impl TimingSummary {
    /// Summarises samples (microseconds). Percentiles interpolate linearly between
    /// closest ranks (numpy's default). `None` when there is no finite sample.
    pub fn from_samples(samples: &[f64]) -> Option<TimingSummary> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let pct = |q: f64| crate::analyze::stats::percentile_sorted(&v, q);
        Some(TimingSummary {
            samples: v.len() as u32,
            median_us: pct(0.5),
            min_us: v[0],
            max_us: v[v.len() - 1],
            p25_us: pct(0.25),
            p75_us: pct(0.75),
            mean_us: v.iter().sum::<f64>() / v.len() as f64,
            calls_per_sample: 1,
        })
    }

    /// The same summary, recording that each sample spanned `calls` calls.
    pub fn with_calls_per_sample(mut self, calls: u32) -> TimingSummary {
        self.calls_per_sample = calls.max(1);
        self
    }

    /// Interquartile range relative to the median (a unitless spread).
    pub fn relative_iqr(&self) -> f64 {
        if self.median_us > 0.0 {
            (self.p75_us - self.p25_us) / self.median_us
        } else {
            0.0
        }
    }
}

/// The measured memory-bandwidth ceiling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BandwidthReport {
    /// Read-only streaming kernel, GB/s (10^9 bytes/s). Every `fraction_of_read` divides by it.
    pub read_gbps: f64,
    /// Copy kernel, GB/s counting bytes read plus bytes written.
    pub copy_gbps: f64,
    /// Bytes touched across the rotating buffers.
    pub working_set_bytes: u64,
    /// Size of each buffer.
    pub buffer_bytes: u64,
    /// Buffers rotated through.
    pub buffers: u32,
    /// Read kernel timing.
    pub read: TimingSummary,
    /// Copy kernel timing.
    pub copy: TimingSummary,
    /// Read kernel checksum matched the CPU.
    pub read_verified: bool,
    /// Copy destination matched the source.
    pub copy_verified: bool,
    /// The read kernel's reduction path (`subgroup` or `shared`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_reduction: Option<String>,
}

/// How a kernel's output was checked against its CPU reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerificationReport {
    /// Outputs compared.
    pub checked: u64,
    /// Outputs the kernel produced.
    pub outputs: u64,
    /// Largest |gpu - cpu|.
    pub max_abs_err: f64,
    /// Largest |gpu - cpu| / tolerance (<= 1 passes).
    pub max_err_over_tol: f64,
    /// The first failure (kernel, shape, index, values), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// One kernel's result. GEMV and skinny matmul fill `shape` and `batch`; attention
/// fills `context`, `heads`, `kv_heads`, `head_dim` and `splits`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelResult {
    /// `gemv`, `matmul_skinny`, `attention_decode` or `attention_decode_split`.
    pub name: String,
    /// Weight or KV format: `f32`, `f16`, `q8_0`, `q4_0`.
    pub dtype: String,
    /// `[rows, cols]` of the weight matrix (outputs x inputs); for attention
    /// `[heads, context, head_dim]`.
    pub shape: Vec<u64>,
    /// Activation columns (decode batch); 1 for GEMV and attention.
    pub batch: u32,
    /// KV-cache length (attention only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<u64>,
    /// Query heads (attention only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heads: Option<u32>,
    /// Key/value heads (attention only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_heads: Option<u32>,
    /// Head dimension (attention only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u32>,
    /// KV splits of the flash-decoding variant (attention only; 1 = single pass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub splits: Option<u32>,
    /// Output matched the CPU reference.
    pub verified: bool,
    /// Verification details.
    pub verification: VerificationReport,
    /// Median time per call, microseconds.
    pub median_us: f64,
    /// Timing spread.
    pub timing: TimingSummary,
    /// Bytes one call must move (weights with scales, activations in and out).
    pub bytes_moved: u64,
    /// Floating-point operations of one call (a multiply-add counts 2).
    pub flops: u64,
    /// Bytes moved / median time, GB/s; `null` when the data sat in cache
    /// (`cache_resident`), since that is not memory bandwidth.
    pub gbps: Option<f64>,
    /// Bytes moved / median time, GB/s, whether cache-resident or not.
    pub effective_gbps: f64,
    /// FLOPs / median time, GFLOP/s.
    pub gflops: f64,
    /// `effective_gbps / bandwidth.read_gbps`.
    pub fraction_of_read: f64,
    /// `fraction_of_read > 1`: the working set was served from cache.
    pub cache_resident: bool,
    /// Reduction path: `subgroup` or `shared`.
    pub reduction: String,
    /// Bindings the weights (or KV cache) were split across to fit the binding limit.
    pub bindings: u32,
    /// Copies rotated through so consecutive calls do not hit cache.
    pub rotation: u32,
    /// Anything worth knowing (e.g. the f16 load path).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A kernel the harness did not run, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkippedKernel {
    /// Kernel name.
    pub name: String,
    /// Format.
    pub dtype: String,
    /// Shape as for [`KernelResult::shape`].
    pub shape: Vec<u64>,
    /// Why (missing feature, out of memory, ...).
    pub reason: String,
}

/// A decode-floor row: [`FloorEstimate`] plus where its bandwidths came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloorRow {
    /// The floor.
    #[serde(flatten)]
    pub estimate: FloorEstimate,
    /// Which measurement gave `gemv_gbps` (e.g. `gemv q4_0`, or `read` as a fallback).
    pub gemv_source: String,
    /// Which measurement gave `attention_gbps`.
    pub attention_source: String,
    /// Median of the synthetic decode step at this model/quant/context, if one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_step_ms: Option<f64>,
    /// `tpot_floor_ms / decode_step_ms`: how close the sum of the kernels comes to the floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_efficiency: Option<f64>,
}

/// A synthetic decode step: every layer's kernels in sequence at the model's shapes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodeStepResult {
    /// Model name.
    pub model: String,
    /// Weight format.
    pub quant: Quant,
    /// KV-cache format.
    pub kv_dtype: Quant,
    /// KV-cache length.
    pub context: u64,
    /// Layers run (the model's layer count).
    pub layers: u32,
    /// Distinct layer weight sets rotated through (so layers do not hit cache).
    pub distinct_layers: u32,
    /// Dispatches per token.
    pub dispatches: u32,
    /// All layers, median, milliseconds.
    pub layers_ms: f64,
    /// Final norm + LM head, median, milliseconds.
    pub lm_head_ms: f64,
    /// `layers_ms + lm_head_ms`.
    pub step_ms: f64,
    /// `layers_ms / layers`, microseconds.
    pub per_layer_us: f64,
    /// Bytes the step reads (weights as stored + KV cache).
    pub bytes_per_token: u64,
    /// `bytes_per_token / step_ms`, GB/s.
    pub effective_gbps: f64,
    /// The floor at the same model/quant/context, milliseconds.
    pub tpot_floor_ms: f64,
    /// `step_ms / tpot_floor_ms` (>= 1; the gap between the kernels and the floor).
    pub gap: f64,
    /// Layer timing spread.
    pub layers_timing: TimingSummary,
    /// LM-head timing spread.
    pub lm_head_timing: TimingSummary,
}

/// One batch of a skinny-matmul sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RooflinePoint {
    /// Activation columns.
    pub batch: u32,
    /// Median time per call, microseconds.
    pub median_us: f64,
    /// `median_us / median_us at batch 1`: 1.0 while the weights' bytes dominate, growing
    /// with the batch once arithmetic does.
    pub time_vs_batch1: f64,
    /// GFLOP/s at this batch.
    pub gflops: f64,
}

/// The batch sweep of one format and shape: where decode stops being bandwidth-bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RooflineRow {
    /// Weight format.
    pub dtype: String,
    /// `[rows, cols]`.
    pub shape: Vec<u64>,
    /// Batch 1 (the GEMV) and every verified skinny batch, in batch order.
    pub points: Vec<RooflinePoint>,
    /// Smallest batch whose call takes more than [`ROOFLINE_TURN`] times the GEMV's:
    /// the roofline turn. `null` if no measured batch got there.
    pub turn_batch: Option<u32>,
}

/// Time ratio to batch 1 above which a batch counts as past the roofline turn.
pub const ROOFLINE_TURN: f64 = 1.25;

/// Where a measurement stands against a goal of the harness.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalResult {
    /// What the goal is about (e.g. `gemv f16`, `attention 8k`).
    pub goal: String,
    /// Target fraction of read bandwidth.
    pub target_fraction: f64,
    /// Measured fraction, if measured.
    pub measured_fraction: Option<f64>,
    /// `measured >= target`; `null` when not measured.
    pub met: Option<bool>,
    /// Which kernels the figure comes from.
    pub source: String,
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
    /// Standing against the goals.
    #[serde(default)]
    pub goals: Vec<GoalResult>,
    /// Errors that stopped a kernel (wgpu errors, failed readbacks); any makes
    /// `verified` false.
    #[serde(default)]
    pub errors: Vec<String>,
    /// Every kernel (and the bandwidth kernels) matched its CPU reference.
    pub verified: bool,
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
        let step = self
            .decode_steps
            .iter()
            .find(|s| s.model == model.name && s.quant == quant && s.context == context);
        Some(FloorRow {
            decode_step_ms: step.map(|s| s.step_ms),
            step_efficiency: step
                .and_then(|s| crate::analyze::floor::efficiency(estimate.tpot_floor_ms, s.step_ms)),
            estimate,
            gemv_source,
            attention_source,
        })
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
        serde_json::from_value(value).map_err(|e| ReportError::Json(e.to_string()))
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
