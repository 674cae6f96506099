//! Which GEMV variant a spec runs (the tuning's, else the default), and the
//! variant each format and batch runs without a tuning file, per kind of adapter,
//! and where each default came from:
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
//!   Skinny batches take up to 8 columns a pass (at 4, a batch of 8 read the
//!   weights twice), as llama.cpp's mul_mat_vec does: from its code, not measured.
//! - Other GPUs: a heuristic from the same principles (one subgroup per row, loads in
//!   flight, x as int8 for quantized weights), not measured on that vendor: run
//!   `tokenscope kernels --tune` there.

use tokenscope_hw::floor::Quant;
use tokenscope_kernel_report::AdapterReport;

use super::spec::GemvSpec;
use super::variant::{GemvVariant, Team, XPath};
use crate::kernels::VariantCaps;
use crate::tune::{Choice, Family, Tuning};

impl GemvVariant {
    /// The variant `spec` runs here: the tuning's (for this shape, or the nearest
    /// searched, when it can run this one), else this adapter's default.
    pub fn choose(
        tuning: &Tuning,
        spec: &GemvSpec,
        caps: &VariantCaps,
        adapter: &AdapterReport,
    ) -> Choice<GemvVariant> {
        let shape = [u64::from(spec.rows), u64::from(spec.cols)];
        tuning.choose(
            (spec.name(), spec.dtype.as_str(), &shape, spec.batch, None),
            |name| {
                GemvVariant::parse(name)
                    .ok()
                    .filter(|v| v.check(spec, caps).is_none())
            },
            || gemv_default(spec, caps, adapter),
        )
    }
}

/// The default GEMV variant for `spec` here, and where it came from.
pub fn gemv_default(
    spec: &GemvSpec,
    caps: &VariantCaps,
    adapter: &AdapterReport,
) -> (GemvVariant, String) {
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
                batch_tile: batch_tile.min(8),
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
    // Up to 8 columns a pass, as llama.cpp's mul_mat_vec: at 4, a batch of 8
    // streams the weights twice, the second time from DRAM (not yet measured here).
    let batch_tile = spec.batch.next_power_of_two().min(8);
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
