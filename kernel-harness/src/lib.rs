//! # kernel-harness
//!
//! tokenscope's GPU kernel harness: how close this GPU's kernels get to its memory
//! bandwidth, and from that the floor under a model's time per output token.
//!
//! Decode is memory-bound: each token reads every weight and the KV cache once. The
//! harness measures the read bandwidth ceiling ([`kernels::bandwidth`]), then the kernels
//! that dominate decode at real shapes: GEMV and skinny matmul in f32, f16, q8_0 and q4_0
//! ([`kernels::gemv`]), decode attention with grouped-query heads, single pass and
//! split-KV ([`kernels::attention`]), and a synthetic decode step ([`decode`]). Each kernel
//! is one WGSL file in `shaders/` plus one Rust type that knows its bytes moved, its FLOPs,
//! how to encode it, and its CPU reference; every run verifies every kernel.
//! [`suite::run_suite`] assembles the `tokenscope.kernels/1` report, with the decode floor
//! from `tokenscope_hw::floor`.
//!
//! The core is `async` and portable (wgpu on Vulkan, Metal, DX12, GL, and WebGPU in a
//! browser): results come back through `map_async` and a one-shot channel, the only
//! native-only pieces are [`GpuContext::pump`] (`device.poll`), [`clock::MonotonicClock`]
//! and [`cache_info`]. Natively, drive it with `pollster::block_on`.
//!
//! ```no_run
//! use kernel_harness::{AdapterOptions, GpuContext, clock::MonotonicClock, suite};
//! let ctx = pollster::block_on(GpuContext::new(&AdapterOptions::default())).unwrap();
//! let (cache, source) = kernel_harness::cache_info(&ctx);
//! let cfg = suite::SuiteConfig::quick(cache, &source);
//! let report = pollster::block_on(suite::run_suite(&ctx, &MonotonicClock::new(), &cfg, &mut suite::NoProgress)).unwrap();
//! assert!(report.verified);
//! ```

pub mod arena;
pub mod clock;
pub mod context;
pub mod data;
pub mod decode;
pub mod error;
pub mod kernels;
pub mod pipeline;
pub mod quant;
pub mod shader;
pub mod suite;
pub mod sync;
pub mod timing;
pub mod tune;
pub mod user;

/// Runs a future to completion on the current thread (native: wgpu's callbacks are
/// driven by [`GpuContext::pump`], so nothing else is needed).
#[cfg(not(target_arch = "wasm32"))]
pub use pollster::block_on;

pub use context::{AdapterOptions, AdapterSummary, BackendChoice, Caps, GpuContext, list_adapters};
pub use error::{HarnessError, KernelId, Result};

/// Last-level cache assumed for GPUs when nothing better is known: 256 MiB covers the
/// largest caches in use (AMD MI300X Infinity Cache 256 MiB, Apple M-series SLC up to
/// 96 MiB, NVIDIA B200 L2 126 MiB, H100/H200 L2 50 MiB).
pub const ASSUMED_GPU_CACHE_BYTES: u64 = 256 << 20;

/// Last-level cache assumed for CPU adapters when the OS does not say.
pub const ASSUMED_CPU_CACHE_BYTES: u64 = 64 << 20;

/// The last-level cache size the working sets must exceed, and where it came from:
/// for a CPU adapter (lavapipe, SwiftShader, WARP) the host's largest cache from
/// `/sys/devices/system/cpu/cpu0/cache`, otherwise [`ASSUMED_GPU_CACHE_BYTES`].
pub fn cache_info(ctx: &GpuContext) -> (u64, String) {
    if ctx.is_cpu() {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some((bytes, level)) = host_llc() {
            return (bytes, format!("sysfs: L{level} of cpu0"));
        }
        return (
            ASSUMED_CPU_CACHE_BYTES,
            "assumed (CPU adapter, cache size unknown)".into(),
        );
    }
    (
        ASSUMED_GPU_CACHE_BYTES,
        "assumed (largest GPU last-level caches)".into(),
    )
}

#[cfg(not(target_arch = "wasm32"))]
fn host_llc() -> Option<(u64, u32)> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    let mut best: Option<(u64, u32)> = None;
    for entry in dir.flatten() {
        let path = entry.path();
        if !path.file_name()?.to_str()?.starts_with("index") {
            continue;
        }
        let level: u32 = std::fs::read_to_string(path.join("level"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let size = parse_cache_size(std::fs::read_to_string(path.join("size")).ok()?.trim())?;
        if best.is_none_or(|(_, l)| level > l) {
            best = Some((size, level));
        }
    }
    best
}

/// Parses sysfs cache sizes (`32768K`, `32M`, `1024`).
pub fn parse_cache_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok().map(|n| n * mult)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cache_sizes() {
        assert_eq!(super::parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(super::parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(super::parse_cache_size("512"), Some(512));
        assert_eq!(super::parse_cache_size("x"), None);
    }
}
