//! What the kernels measured: timing summaries, the bandwidth ceiling, each
//! kernel's result and verification, the floor rows, the decode steps, the
//! roofline and the goals.

use serde::{Deserialize, Serialize};

use tokenscope_hw::floor::{FloorEstimate, Quant};

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
        let pct = |q: f64| tokenscope_stats::stats::percentile_sorted(&v, q);
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
    /// Every sample of the read kernel, microseconds per call (for `compare`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_samples_us: Vec<f64>,
    /// Read kernel checksum matched the CPU.
    pub read_verified: bool,
    /// Copy destination matched the source.
    pub copy_verified: bool,
    /// The read kernel's reduction path (`subgroup` or `shared`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_reduction: Option<String>,
    /// The read kernel's variant and why it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_variant: Option<super::VariantReport>,
    /// The copy kernel's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_variant: Option<super::VariantReport>,
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
    /// Split-KV attention: the combine dispatch alone, timed apart (median,
    /// microseconds; part of `median_us`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub combine_us: Option<f64>,
    /// The model file's tensors this GEMV stands for (`kernels --gguf`): of this
    /// type and shape (generated data), or the one whose own weights it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tensors: Vec<String>,
    /// Output matched the CPU reference.
    pub verified: bool,
    /// Verification details.
    pub verification: VerificationReport,
    /// Median time per call, microseconds.
    pub median_us: f64,
    /// Timing spread.
    pub timing: TimingSummary,
    /// Every timed sample, microseconds per call, in the order taken: what
    /// `tokenscope compare` resamples for a kernel's interval (absent in reports
    /// written before it was added).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples_us: Vec<f64>,
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
    /// The variant that ran and why (absent in reports written before variants).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<super::VariantReport>,
    /// The roof that bounds this kernel: `bandwidth` when its bytes at the read
    /// bandwidth take longer than its FLOPs at the f32 FMA rate, else `compute`
    /// (absent until the compute roof is measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roof: Option<String>,
    /// Time at that roof over the measured time (1.0 = at the roof).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction_of_roof: Option<f64>,
    /// The developer's kernel (`kernels --shader`, its name) this GEMV of
    /// tokenscope's ran beside, moving about the same bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beside: Option<String>,
}

/// The `dtype` of a developer's own kernel (`kernels --shader`).
pub const USER_KERNEL_DTYPE: &str = "wgsl";

impl KernelResult {
    /// A developer's own kernel (`kernels --shader`), not one of tokenscope's.
    pub fn is_user(&self) -> bool {
        self.dtype == USER_KERNEL_DTYPE
    }

    /// Places the kernel against both roofs: the read bandwidth and the f32 FMA rate.
    pub fn place_on_roofline(&mut self, read_gbps: f64, fma_gflops: f64) {
        if self.median_us <= 0.0 || read_gbps <= 0.0 || fma_gflops <= 0.0 {
            return;
        }
        let bytes_us = self.bytes_moved as f64 / (read_gbps * 1e3);
        let flops_us = self.flops as f64 / (fma_gflops * 1e3);
        let (roof, roof_us) = if bytes_us >= flops_us {
            ("bandwidth", bytes_us)
        } else {
            ("compute", flops_us)
        };
        self.roof = Some(roof.into());
        self.fraction_of_roof = Some(roof_us / self.median_us);
    }
}

/// The arithmetic ceiling: a kernel of independent FMA chains, f32 and f16.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputeReport {
    /// f32 FMA throughput, GFLOP/s (an FMA counts 2).
    pub f32_gflops: f64,
    /// f16 FMA throughput (`vec4<f16>`), GFLOP/s; absent without shader-f16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f16_gflops: Option<f64>,
    /// f32 kernel timing.
    pub f32: TimingSummary,
    /// f16 kernel timing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f16: Option<TimingSummary>,
    /// FLOPs of one call.
    pub flops_per_call: u64,
    /// Both kernels' results matched the CPU's.
    pub verified: bool,
}

/// Relative change between two timings of the same kernel in one run above which the
/// report flags drift.
pub const DRIFT_LIMIT: f64 = 0.05;

/// A kernel timed twice in one run, early and at the end: a figure that moved says
/// that what ran before it changed it (memory placement, clocks, caches).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftCheck {
    /// Which kernel (name, format, shape).
    pub kernel: String,
    /// Median at its place in the run, microseconds.
    pub first_us: f64,
    /// Median at the end, microseconds.
    pub again_us: f64,
    /// `again_us / first_us - 1`.
    pub change: f64,
    /// `|change| > DRIFT_LIMIT`.
    pub drifted: bool,
}

impl DriftCheck {
    /// The check of one kernel's two medians.
    pub fn new(kernel: String, first_us: f64, again_us: f64) -> DriftCheck {
        let change = if first_us > 0.0 {
            again_us / first_us - 1.0
        } else {
            0.0
        };
        DriftCheck {
            kernel,
            first_us,
            again_us,
            change,
            drifted: change.abs() > DRIFT_LIMIT,
        }
    }
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
    /// The memory's measured read bandwidth (`bandwidth.read_gbps`), GB/s: what the
    /// floor at the read bandwidth divides by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_gbps: Option<f64>,
    /// Every byte of the step (weights and KV cache) at the read bandwidth: the
    /// hardware's floor, the same whatever the kernels, ms. `tpot_floor_ms` is the
    /// floor with these kernels (each part at its own kernel's bandwidth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_floor_ms: Option<f64>,
    /// `1000 / read_floor_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_tokens_per_s_ceiling: Option<f64>,
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
    /// The floor with these kernels at the same model/quant/context, milliseconds.
    pub tpot_floor_ms: f64,
    /// The floor at the read bandwidth at the same model/quant/context, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_floor_ms: Option<f64>,
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

/// A format's GEMV time over its shapes, fitted as `time = a + bytes / B`: `a` is
/// what each dispatch costs beyond moving its bytes (launch, ramp-up, drain and the
/// barrier before the next one, dispatches back to back in one pass), `B` the rate
/// at which the bytes stream once it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchCost {
    /// Weight format.
    pub dtype: String,
    /// Shapes fitted (verified batch-1 GEMVs on generated data, off the cache).
    pub shapes: u32,
    /// Fixed cost per dispatch `a`, microseconds (may come out negative when it is
    /// below what the fit resolves).
    pub fixed_us: f64,
    /// Half-width of the 95% confidence interval of `fixed_us`.
    pub fixed_ci95_us: f64,
    /// `fixed_us` is above 0 at 95%: only then does the report name a fixed cost. An
    /// interval wholly below 0 is no cost at all: the times were not linear in the
    /// bytes (caches, a CPU adapter), and the text says the fit does not hold.
    pub resolved: bool,
    /// Streaming rate `B`, GB/s (`null` when the fitted slope is not positive).
    pub stream_gbps: Option<f64>,
    /// `stream_gbps` over the measured read bandwidth.
    pub stream_fraction_of_read: Option<f64>,
    /// Distinct variants among the shapes fitted (tuned variants differ by shape):
    /// above 1, `fixed_us` is the mix's, not one kernel's (1 in reports written
    /// before it was added).
    #[serde(default = "one")]
    pub variants: u32,
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
