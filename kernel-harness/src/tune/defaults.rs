//! The variant each kernel runs without a tuning file, per kind of adapter, and where
//! each default came from.
//!
//! - CPU adapters (Mesa lavapipe, SwiftShader, WARP): the workgroup-strided kernels the
//!   harness had before variants, whose figures CI records (a CPU has no memory
//!   parallelism to gain from the GPU layouts, and its compiler vectorizes these);
//!   at batch 16 and more, 8 columns a pass, which `kernels --tune` on lavapipe found
//!   4-6x faster than one pass over 64 columns (1024x1024, 2026-12-04).
//! - NVIDIA: from the first H200 run (Vulkan, driver 580.159.04, 2026-12-04,
//!   `../shared/gpu/h200-2026-12-04`): one row per 32-lane subgroup with 16-byte loads
//!   took f16 14336x4096 from 34% to 81% of the read bandwidth but left 4096x14336 at
//!   18% for lack of loads in flight, hence several units in flight per lane; and x as
//!   int8 for quantized weights (the H200 has about 4.5 arithmetic instructions per q4_0
//!   weight at full bandwidth: an f32 dequantization does not fit, `dot4I8Packed`
//!   does). Not yet searched on a GPU with `kernels --tune`: docs/kernels.md says so.
//! - Other GPUs: a heuristic from the same principles (one subgroup per row, loads in
//!   flight, x as int8 for quantized weights), not measured on that vendor: run
//!   `tokenscope kernels --tune` there.

use tokenscope_core::analyze::floor::Quant;
use tokenscope_core::report::kernels::AdapterReport;

use crate::kernels::VariantCaps;
use crate::kernels::attention::{AttentionSpec, AttentionVariant};
use crate::kernels::bandwidth::StreamVariant;
use crate::kernels::gemv::{GemvSpec, GemvVariant, Team, XPath};

/// PCI vendor id of NVIDIA.
pub const NVIDIA: u32 = 0x10de;

/// Kinds of adapter with their own defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Runs on the CPU.
    Cpu,
    /// NVIDIA GPU.
    Nvidia,
    /// Any other GPU.
    OtherGpu,
}

impl Family {
    /// The family of an adapter (by PCI vendor, or its name where the backend gives
    /// no id, as browsers do).
    pub fn of(adapter: &AdapterReport) -> Family {
        if adapter.is_cpu() {
            Family::Cpu
        } else if adapter.vendor_id == NVIDIA
            || adapter.name.to_ascii_lowercase().contains("nvidia")
        {
            Family::Nvidia
        } else {
            Family::OtherGpu
        }
    }
}

/// The default GEMV variant for `spec` here, and where it came from.
pub fn gemv(spec: &GemvSpec, caps: &VariantCaps, adapter: &AdapterReport) -> (GemvVariant, String) {
    let family = Family::of(adapter);
    let batch_tile = spec.batch.next_power_of_two();
    let quantized = spec.dtype.block_elems() > 1;
    let team = best_team(caps);
    let (v, note) = match family {
        Family::Cpu if spec.batch >= 16 => (
            GemvVariant {
                team,
                threads: 128,
                rows: if caps.subgroups { 2 } else { 4 },
                unroll: 1,
                batch_tile: 8,
                x: if quantized { XPath::Q8 } else { XPath::F32 },
            },
            "default for CPU adapters at batch 16 and more: 8 columns a pass (int8 x for quantized weights), which a search on lavapipe found 4-6x faster than one pass over all columns",
        ),
        Family::Cpu => (
            GemvVariant {
                team: Team::Workgroup,
                threads: if quantized { 128 } else { 256 },
                rows: (16 / spec.batch).clamp(1, 4),
                unroll: 1,
                batch_tile: spec.batch,
                x: XPath::F32,
            },
            "default for CPU adapters: the workgroup-strided kernel CI's lavapipe figures were measured with",
        ),
        Family::Nvidia => (
            nvidia_gemv(spec, caps),
            "default for NVIDIA: from the H200 run of 2026-12-04 (subgroup rows, loads in flight, int8 x), not yet tuned there (run `tokenscope kernels --tune`)",
        ),
        Family::OtherGpu => (
            GemvVariant {
                team,
                threads: 128,
                rows: 2,
                unroll: 2,
                batch_tile: batch_tile.min(4),
                x: if quantized { XPath::Q8 } else { XPath::F32 },
            },
            "default for this GPU: a heuristic, not measured on its vendor (run `tokenscope kernels --tune`)",
        ),
    };
    (fit_gemv(v, spec, caps), note.into())
}

/// One subgroup per team where the device has subgroups.
fn best_team(caps: &VariantCaps) -> Team {
    if caps.subgroups {
        Team::Subgroup
    } else {
        Team::Workgroup
    }
}

/// NVIDIA's GEMV defaults by format and batch.
fn nvidia_gemv(spec: &GemvSpec, caps: &VariantCaps) -> GemvVariant {
    let quantized = spec.dtype.block_elems() > 1;
    let team = best_team(caps);
    let batch_tile = spec.batch.next_power_of_two().min(4);
    match spec.dtype {
        Quant::F32 | Quant::F16 | Quant::Bf16 => GemvVariant {
            team,
            threads: 128,
            rows: 2,
            unroll: 4,
            batch_tile,
            x: XPath::F32,
        },
        _ => GemvVariant {
            team,
            threads: 128,
            rows: 2,
            unroll: 2,
            batch_tile,
            x: if quantized { XPath::Q8 } else { XPath::F32 },
        },
    }
}

/// The nearest variant to `v` that can run `spec` here: parameters halved until it
/// fits, then the team and x path relaxed; the plainest kernel if nothing fits.
fn fit_gemv(mut v: GemvVariant, spec: &GemvSpec, caps: &VariantCaps) -> GemvVariant {
    for _ in 0..12 {
        if v.check(spec, caps).is_none() {
            return v;
        }
        if v.team == Team::Subgroup && !caps.subgroups {
            v.team = Team::Workgroup;
        } else if v.threads > caps.max_threads {
            v.threads /= 2;
        } else if v.x == XPath::Q8 && spec.dtype.block_elems() == 1 {
            v.x = XPath::F32;
        } else if v.batch_tile > 1 {
            v.batch_tile /= 2;
        } else if v.unroll > 1 {
            v.unroll /= 2;
        } else if v.rows > 1 {
            v.rows /= 2;
        } else {
            break;
        }
    }
    GemvVariant {
        team: Team::Workgroup,
        threads: 64,
        rows: 1,
        unroll: 1,
        batch_tile: 1,
        x: XPath::F32,
    }
}

/// The streaming kernels' default, on every adapter: the layout the harness had
/// before variants.
pub fn stream(adapter: &AdapterReport) -> (StreamVariant, String) {
    let note = match Family::of(adapter) {
        Family::Nvidia => {
            "default: 256 threads, 4 loads in flight, 16 words a thread (on an H200 it read 4,108 GB/s, 94% of PyTorch's own read, 2026-12-04)"
        }
        _ => {
            "default: 256 threads, 4 loads in flight, 16 words a thread (the layout CI's figures were measured with)"
        }
    };
    (StreamVariant::DEFAULT, note.into())
}

/// The default attention variant for `spec` here, and where it came from.
pub fn attention(
    spec: &AttentionSpec,
    caps: &VariantCaps,
    adapter: &AdapterReport,
) -> (AttentionVariant, String) {
    let family = Family::of(adapter);
    let (v, note) = match family {
        Family::Cpu => (
            AttentionVariant {
                chunk: AttentionVariant::chunk_for(spec, 1024, 256),
                threads: 128,
                vec: 4,
            },
            "default for CPU adapters: the layout CI's lavapipe figures were measured with",
        ),
        Family::Nvidia => (
            AttentionVariant {
                chunk: AttentionVariant::chunk_for(spec, 2048, 64),
                threads: 128,
                vec: if spec.kv_dtype == Quant::F16 { 8 } else { 4 },
            },
            "default for NVIDIA: enough splits for about 2048 workgroups and 16-byte loads (a heuristic, not yet tuned on a GPU: run `tokenscope kernels --tune`)",
        ),
        Family::OtherGpu => (
            AttentionVariant {
                chunk: AttentionVariant::chunk_for(spec, 1024, 64),
                threads: 128,
                vec: if spec.kv_dtype == Quant::F16 { 8 } else { 4 },
            },
            "default for this GPU: a heuristic, not measured on its vendor (run `tokenscope kernels --tune`)",
        ),
    };
    let v = if v.check(spec, caps).is_none() {
        v
    } else {
        // Fall back to the most portable layout (4 elements a load, 64 threads).
        AttentionVariant {
            threads: 64,
            vec: 4,
            ..v
        }
    };
    (v, note.into())
}
