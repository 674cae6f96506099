//! The kernels. Each is one WGSL file plus one Rust type that knows its bytes moved,
//! its FLOPs, how to encode it and its CPU reference.

pub mod attention;
pub mod bandwidth;
pub mod compute;
pub mod fill;
pub mod gemv;
pub mod glue;

use tokenscope_kernel_report::{KernelResult, TimingSummary, VariantReport, VerificationReport};

use crate::GpuContext;
use crate::error::{HarnessError, KernelId, Mismatch};

/// What the device offers a kernel variant (every variant is checked against it
/// before it is compiled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VariantCaps {
    /// Subgroup operations in use.
    pub subgroups: bool,
    /// Smallest subgroup size the adapter reports (0: unknown).
    pub subgroup_min: u32,
    /// Most invocations per workgroup.
    pub max_threads: u32,
    /// Most workgroup memory, bytes.
    pub max_workgroup_bytes: u32,
    /// f16 arithmetic in shaders (`shader-f16` in use).
    pub shader_f16: bool,
}

/// An NVIDIA datacenter GPU's caps as wgpu's Vulkan backend reports them (tests of
/// the variant spaces and the defaults).
#[cfg(test)]
pub(crate) const NVIDIA_CAPS: VariantCaps = VariantCaps {
    subgroups: true,
    subgroup_min: 32,
    max_threads: 1024,
    max_workgroup_bytes: 49152,
    shader_f16: true,
};

impl VariantCaps {
    /// The device's.
    pub fn of(ctx: &GpuContext) -> VariantCaps {
        VariantCaps {
            subgroups: ctx.caps.subgroups,
            subgroup_min: ctx.info.subgroup_min_size,
            max_threads: ctx
                .limits
                .max_compute_invocations_per_workgroup
                .min(ctx.limits.max_compute_workgroup_size_x),
            max_workgroup_bytes: ctx.limits.max_compute_workgroup_storage_size,
            shader_f16: ctx.caps.shader_f16,
        }
    }

    /// Threads per subgroup assumed when laying out teams: the adapter's smallest
    /// subgroup (a larger one runs several teams in turn), 4 when unknown.
    pub fn subgroup_lanes(&self) -> u32 {
        self.subgroup_min.max(4)
    }
}

/// How a kernel sums across a workgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// Subgroup operations, then shared memory across subgroups.
    Subgroup,
    /// Shared memory only (no subgroups on the device, or turned off).
    Shared,
}

impl Reduction {
    /// The path a kernel compiled for `ctx` takes.
    pub fn of(ctx: &GpuContext) -> Self {
        if ctx.caps.subgroups {
            Reduction::Subgroup
        } else {
            Reduction::Shared
        }
    }

    /// `subgroup` or `shared`, as in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Reduction::Subgroup => "subgroup",
            Reduction::Shared => "shared",
        }
    }
}

/// How a kernel reads f16 data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum F16Path {
    /// Native f16 loads (`enable f16;`, the `shader-f16` feature).
    ShaderF16,
    /// u32 words converted with `unpack2x16float` (no `shader-f16`).
    Unpack,
}

impl F16Path {
    /// The path a kernel reading f16 data (`reads_f16`) compiled for `ctx` takes;
    /// `None` when it reads no f16.
    pub fn of(ctx: &GpuContext, reads_f16: bool) -> Option<Self> {
        reads_f16.then_some(if ctx.caps.shader_f16 {
            F16Path::ShaderF16
        } else {
            F16Path::Unpack
        })
    }

    /// The note the report carries for it.
    pub fn note(self) -> &'static str {
        match self {
            F16Path::ShaderF16 => "f16 loads (shader-f16)",
            F16Path::Unpack => "f16 via unpack2x16float",
        }
    }
}

/// Compares GPU outputs with CPU references and keeps the first failure.
#[derive(Debug)]
pub struct Check {
    kernel: KernelId,
    outputs: u64,
    checked: u64,
    failures: u64,
    max_abs: f64,
    max_ratio: f64,
    first: Option<(String, f64, f64, f64, f64)>,
}

impl Check {
    /// A check of `outputs` outputs of `kernel`.
    pub fn new(kernel: &KernelId, outputs: u64) -> Self {
        Self {
            kernel: kernel.clone(),
            outputs,
            checked: 0,
            failures: 0,
            max_abs: 0.0,
            max_ratio: 0.0,
            first: None,
        }
    }

    /// Compares one output; `index` describes it (e.g. `y[3, 17]`).
    pub fn compare(&mut self, index: impl FnOnce() -> String, gpu: f64, cpu: f64, tol: f64) {
        self.checked += 1;
        let diff = (gpu - cpu).abs();
        let ok = gpu.is_finite() && diff <= tol;
        if diff.is_finite() {
            self.max_abs = self.max_abs.max(diff);
            self.max_ratio = self.max_ratio.max(diff / tol.max(f64::MIN_POSITIVE));
        }
        if !ok {
            self.failures += 1;
            if self.first.is_none() {
                self.first = Some((index(), gpu, cpu, diff, tol));
            }
        }
    }

    /// Compares two integers exactly.
    pub fn compare_exact(&mut self, index: impl FnOnce() -> String, gpu: u64, cpu: u64) {
        self.compare(
            index,
            gpu as f64,
            cpu as f64,
            if gpu == cpu { 0.0 } else { -1.0 },
        );
    }

    /// The report and, on failure, the typed error naming the first failing index.
    pub fn finish(self) -> (VerificationReport, Option<HarnessError>) {
        let error = self.first.as_ref().map(|(index, gpu, cpu, diff, tol)| {
            HarnessError::Mismatch(Box::new(Mismatch {
                kernel: self.kernel.clone(),
                index: index.clone(),
                gpu: *gpu,
                cpu: *cpu,
                diff: *diff,
                tol: *tol,
                failures: self.failures,
                checked: self.checked,
            }))
        });
        let report = VerificationReport {
            checked: self.checked,
            outputs: self.outputs,
            max_abs_err: self.max_abs,
            max_err_over_tol: self.max_ratio,
            failure: error.as_ref().map(ToString::to_string),
        };
        (report, error)
    }
}

/// Rows (or other indices) to verify out of `n`: all when `n <= full`, else the first
/// and last 32, the neighbours of every chunk boundary and an even spread.
pub fn sample_indices(n: u64, full: u64, boundaries: &[u64]) -> Vec<u64> {
    if n <= full {
        return (0..n).collect();
    }
    let mut v: Vec<u64> = (0..32.min(n)).chain(n.saturating_sub(32)..n).collect();
    for &b in boundaries {
        v.extend(b.saturating_sub(2)..(b + 2).min(n));
    }
    let spread = full.max(64);
    v.extend((0..spread).map(|i| i * n / spread));
    v.sort_unstable();
    v.dedup();
    v
}

/// What every kernel result needs besides its identity.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Timing.
    pub timing: TimingSummary,
    /// Every sample, microseconds per call.
    pub samples_us: Vec<f64>,
    /// Verification.
    pub verification: VerificationReport,
    /// Bytes moved per call.
    pub bytes_moved: u64,
    /// FLOPs per call.
    pub flops: u64,
    /// Reduction path.
    pub reduction: &'static str,
    /// Bindings the big operand was split across.
    pub bindings: u32,
    /// Buffer sets rotated through.
    pub rotation: u32,
    /// Notes.
    pub notes: Vec<String>,
    /// The variant that ran, and why.
    pub variant: Option<VariantReport>,
}

/// Identity of a kernel result.
#[derive(Debug, Clone, Default)]
pub struct ResultId {
    /// Name.
    pub name: String,
    /// Format.
    pub dtype: String,
    /// Shape.
    pub shape: Vec<u64>,
    /// Batch.
    pub batch: u32,
    /// Attention: context.
    pub context: Option<u64>,
    /// Attention: query heads.
    pub heads: Option<u32>,
    /// Attention: KV heads.
    pub kv_heads: Option<u32>,
    /// Attention: head dim.
    pub head_dim: Option<u32>,
    /// Attention: splits.
    pub splits: Option<u32>,
    /// A model file's tensors the kernel stands for (`kernels --gguf`).
    pub tensors: Vec<String>,
}

/// Builds a [`KernelResult`]: GB/s, GFLOP/s and the fraction of the read bandwidth,
/// flagged as cache-resident (and not reported as bandwidth) above 1.
pub fn kernel_result(id: ResultId, o: Outcome, read_gbps: f64) -> KernelResult {
    let secs = o.timing.median_us * 1e-6;
    let effective_gbps = if secs > 0.0 {
        o.bytes_moved as f64 / secs / 1e9
    } else {
        0.0
    };
    let gflops = if secs > 0.0 {
        o.flops as f64 / secs / 1e9
    } else {
        0.0
    };
    let fraction_of_read = if read_gbps > 0.0 {
        effective_gbps / read_gbps
    } else {
        0.0
    };
    let cache_resident = fraction_of_read > 1.0;
    KernelResult {
        name: id.name,
        dtype: id.dtype,
        shape: id.shape,
        batch: id.batch,
        context: id.context,
        heads: id.heads,
        kv_heads: id.kv_heads,
        head_dim: id.head_dim,
        splits: id.splits,
        combine_us: None,
        tensors: id.tensors,
        verified: o.verification.failure.is_none(),
        verification: o.verification,
        median_us: o.timing.median_us,
        timing: o.timing,
        samples_us: o.samples_us,
        bytes_moved: o.bytes_moved,
        flops: o.flops,
        gbps: (!cache_resident).then_some(effective_gbps),
        effective_gbps,
        gflops,
        fraction_of_read,
        cache_resident,
        reduction: o.reduction.to_string(),
        bindings: o.bindings,
        rotation: o.rotation,
        notes: o.notes,
        variant: o.variant,
        roof: None,
        fraction_of_roof: None,
        beside: None,
    }
}

/// How many copies of a `bytes`-sized operand to rotate through so that consecutive
/// calls do not find it in a `cache_bytes` cache: enough for twice the cache, at most
/// `max_copies` and at most `budget` bytes in all (at least one copy).
pub fn rotation_for(bytes: u64, cache_bytes: u64, max_copies: u64, budget: u64) -> u32 {
    let want = (2 * cache_bytes).div_ceil(bytes.max(1));
    let fit = (budget / bytes.max(1)).max(1);
    want.clamp(1, max_copies).min(fit) as u32
}
