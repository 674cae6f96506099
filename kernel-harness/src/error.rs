//! Typed errors of the harness. Messages name the kernel, its shape and, for a
//! verification failure, the failing index with both values.

use std::fmt;

/// Where in the harness an error happened: kernel name, format and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelId {
    /// Kernel name (`gemv`, `attention_decode`, ...).
    pub name: String,
    /// Format (`f16`, `q4_0`, ...).
    pub dtype: String,
    /// Shape, human readable (`[4096, 14336] batch 1`).
    pub shape: String,
}

impl fmt::Display for KernelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.name, self.dtype, self.shape)
    }
}

/// The no-adapter message: which adapters exist and that none matched, or, when
/// none exists at all, how to get one on the CPU.
fn no_adapter_message(wanted: &str, found: &[String]) -> String {
    if found.is_empty() {
        format!(
            "no GPU adapter found{wanted}; to run on the CPU install Mesa lavapipe (`apt install mesa-vulkan-drivers`), or pick one with --adapter/--backend (see --list-adapters)"
        )
    } else {
        format!(
            "no GPU adapter{wanted}: found {} ({}), none matched; pick one with --adapter and a part of its name, or --backend (see --list-adapters)",
            found.len(),
            found.join("; ")
        )
    }
}

/// Everything that can go wrong in the harness.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// No adapter matched (or none exists at all).
    #[error("{}", no_adapter_message(wanted, found))]
    NoAdapter {
        /// What was asked for (empty, or ` matching "..."`).
        wanted: String,
        /// The adapters that exist (name, backend, type), when some do but none
        /// matched.
        found: Vec<String>,
    },
    /// The adapter refused to create a device.
    #[error("adapter `{adapter}` refused to create a device: {message}")]
    RequestDevice {
        /// Adapter name.
        adapter: String,
        /// wgpu's message.
        message: String,
    },
    /// A shape the kernel cannot run (checked before any GPU work).
    #[error("{kernel}: invalid shape: {reason}")]
    InvalidShape {
        /// The kernel.
        kernel: KernelId,
        /// What is wrong.
        reason: String,
    },
    /// The kernel needs a feature the device lacks.
    #[error("{kernel}: needs the `{feature}` feature, which this adapter lacks")]
    MissingFeature {
        /// The kernel.
        kernel: KernelId,
        /// The feature.
        feature: &'static str,
    },
    /// A buffer is larger than the device allows even after splitting.
    #[error(
        "{kernel}: needs a {bytes}-byte binding but the device allows {limit} bytes per binding"
    )]
    BindingTooLarge {
        /// The kernel.
        kernel: KernelId,
        /// Bytes needed for one indivisible unit (a row, a head).
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// The kernel needs more of a device limit than the adapter allows (invocations
    /// per workgroup, storage buffers per stage).
    #[error("{kernel}: needs {needed} {limit} but the device allows {allowed}")]
    DeviceLimit {
        /// The kernel.
        kernel: KernelId,
        /// The limit, in words (`invocations per workgroup`).
        limit: &'static str,
        /// What the kernel needs.
        needed: u64,
        /// What the device allows.
        allowed: u64,
    },
    /// An operand larger than the run's memory budget (a browser page's).
    #[error(
        "{kernel}: its {bytes}-byte operand exceeds this run's memory budget of {budget} bytes"
    )]
    OverBudget {
        /// The kernel.
        kernel: KernelId,
        /// The operand's bytes.
        bytes: u64,
        /// The budget.
        budget: u64,
    },
    /// The run was cancelled (by the user, through [`crate::suite::Progress::cancelled`]).
    #[error("cancelled")]
    Cancelled,
    /// A model file's weights could not be read.
    #[error("{kernel}: cannot read the weights: {reason}")]
    Weights {
        /// The kernel.
        kernel: KernelId,
        /// What went wrong.
        reason: String,
    },
    /// Allocation failed.
    #[error("{kernel}: out of GPU memory allocating {bytes} bytes: {message}")]
    OutOfMemory {
        /// The kernel.
        kernel: KernelId,
        /// Bytes being allocated.
        bytes: u64,
        /// wgpu's message.
        message: String,
    },
    /// wgpu reported a validation or internal error.
    #[error("{kernel}: wgpu error: {message}")]
    Wgpu {
        /// The kernel.
        kernel: KernelId,
        /// wgpu's message.
        message: String,
    },
    /// Mapping a buffer for readback failed.
    #[error("reading back `{label}` failed: {message}")]
    Readback {
        /// Buffer label.
        label: String,
        /// wgpu's message.
        message: String,
    },
    /// A shader failed to preprocess (a harness bug, or a user's kernel).
    #[error("shader `{shader}`: {message}")]
    Shader {
        /// Shader file.
        shader: String,
        /// What is wrong.
        message: String,
    },
    /// The GPU result differs from the CPU reference.
    #[error(transparent)]
    Mismatch(Box<Mismatch>),
    /// A timing readback gave no usable sample.
    #[error("{kernel}: no usable timing sample ({reason})")]
    Timing {
        /// The kernel.
        kernel: KernelId,
        /// Why.
        reason: String,
    },
    /// The floor arithmetic rejected its input.
    #[error(transparent)]
    Floor(#[from] tokenscope_hw::floor::FloorError),
}

/// A GPU output that differs from its CPU reference beyond the tolerance.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "{kernel}: output {index} is {gpu} on the GPU but {cpu} on the CPU (|diff| {diff:.3e} > tolerance {tol:.3e}); {failures} of {checked} checked outputs fail"
)]
pub struct Mismatch {
    /// The kernel.
    pub kernel: KernelId,
    /// The first failing output (and its coordinates).
    pub index: String,
    /// GPU value.
    pub gpu: f64,
    /// CPU value.
    pub cpu: f64,
    /// Absolute difference.
    pub diff: f64,
    /// Tolerance at that index.
    pub tol: f64,
    /// Failing outputs.
    pub failures: u64,
    /// Outputs checked.
    pub checked: u64,
}

/// The harness's result type.
pub type Result<T, E = HarnessError> = std::result::Result<T, E>;
