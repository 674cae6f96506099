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

    /// The adapter's streaming multiprocessors (NVIDIA) or compute units (AMD), from
    /// its name, for the GPUs in [`COMPUTE_UNITS`] (the vendors' published figures):
    /// WebGPU and wgpu do not report it (llama.cpp reads it from Vulkan extensions
    /// wgpu does not expose). `None` for any other adapter.
    pub fn compute_units(&self) -> Option<u32> {
        let words: Vec<String> = self
            .name
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_ascii_lowercase)
            .collect();
        COMPUTE_UNITS
            .iter()
            .find(|(model, _)| model.split(' ').all(|m| words.iter().any(|w| w == m)))
            .map(|&(_, n)| n)
    }
}

/// GPU models (the words of the adapter's name, lower case; the more specific
/// first) and their streaming multiprocessors or compute units, from the vendors'
/// specifications.
pub const COMPUTE_UNITS: &[(&str, u32)] = &[
    ("h100 pcie", 114),
    ("h100", 132),
    ("h200", 132),
    ("gh200", 132),
    ("h800", 132),
    ("h20", 78),
    ("b200", 148),
    ("a100", 108),
    ("a800", 108),
    ("a10", 72),
    ("a30", 56),
    ("l40s", 142),
    ("l40", 142),
    ("l4", 58),
    ("t4", 40),
    ("v100", 80),
    ("rtx 5090", 170),
    ("rtx 5080", 84),
    ("rtx 4090", 128),
    ("rtx 4080 super", 80),
    ("rtx 4080", 76),
    ("rtx 3090 ti", 84),
    ("rtx 3090", 82),
    ("mi300x", 304),
    ("mi325x", 304),
    ("rx 7900 xtx", 96),
    ("rx 7900 xt", 84),
];

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

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> AdapterReport {
        AdapterReport {
            name: name.into(),
            backend: "vulkan".into(),
            device_type: "DiscreteGpu".into(),
            driver: String::new(),
            driver_info: String::new(),
            vendor_id: 0,
            device_id: 0,
            subgroup_min_size: 0,
            subgroup_max_size: 0,
        }
    }

    #[test]
    fn compute_units_come_from_whole_words_of_the_name() {
        for (name, units) in [
            ("NVIDIA H200", Some(132)),
            ("NVIDIA H100 PCIe", Some(114)),
            ("NVIDIA H100 80GB HBM3", Some(132)),
            ("NVIDIA GH200 480GB", Some(132)),
            ("NVIDIA A100-SXM4-80GB", Some(108)),
            ("NVIDIA A10", Some(72)),
            ("NVIDIA L40S", Some(142)),
            ("NVIDIA L4", Some(58)),
            ("NVIDIA GeForce RTX 4080 SUPER", Some(80)),
            ("NVIDIA GeForce RTX 4080", Some(76)),
            ("AMD Radeon RX 7900 XTX (RADV NAVI31)", Some(96)),
            ("AMD Radeon RX 7900 XT (RADV NAVI31)", Some(84)),
            ("llvmpipe (LLVM 15.0.6, 256 bits)", None),
            ("", None),
        ] {
            assert_eq!(named(name).compute_units(), units, "{name}");
        }
    }
}
