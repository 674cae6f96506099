//! Where the kernels ran: the adapter, its features and limits, the run's
//! configuration and environment, and how time was measured.

use serde::{Deserialize, Serialize};

use tokenscope_hw::floor::Quant;

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
