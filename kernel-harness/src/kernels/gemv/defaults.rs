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
//!   does), except where llama.cpp reads float x on NVIDIA: q8_0, and rows of at
//!   most 4096 at batch 1, there dequantizing the 4- and 5-bit formats in f16 (from its code,
//!   not measured here; `scripts/gpu-figures.sh` times the paths). Not yet searched
//!   on a GPU with `kernels --tune`: docs/kernels.md says so.
//!   Skinny batches take up to 8 columns a pass (at 4, a batch of 8 read the
//!   weights twice), as llama.cpp's mul_mat_vec does: from its code, not measured.
//!   GPUs unroll the loops over the register arrays (`_ur`) where the bound allows
//!   (not measured on a GPU; on lavapipe it made the q8_0 GEMVs up to 36% slower,
//!   so CPU adapters keep the loops).
//! - Other GPUs: a heuristic from the same principles (one subgroup per row, loads in
//!   flight, x as int8 for quantized weights), not measured on that vendor: run
//!   `tokenscope kernels --tune` there.

use tokenscope_hw::floor::Quant;
use tokenscope_kernel_report::AdapterReport;

use super::spec::GemvSpec;
use super::variant::{GemvVariant, Team, XPath, f16_dequant_formats};
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
                unrolled: false,
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
                unrolled: false,
            },
            "default for CPU adapters: the workgroup-strided kernel CI's lavapipe figures were measured with",
        ),
        Family::Nvidia => (
            nvidia_gemv(spec, caps),
            "default for NVIDIA: from the H200 run of 2026-12-04 (subgroup rows, loads in flight) and llama.cpp's x path (int8 x except for q8_0 and rows of at most 4096, there f16 dequantization for the 4- and 5-bit formats), not yet tuned there (run `tokenscope kernels --tune`)",
        ),
        Family::OtherGpu => (
            GemvVariant {
                team,
                threads: 128,
                rows: 2,
                unroll: 2,
                batch_tile: batch_tile.min(8),
                x: if quantized { XPath::Q8 } else { XPath::F32 },
                unrolled: true,
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
            unrolled: true,
        },
        _ => GemvVariant {
            team,
            threads: 128,
            rows: 2,
            unroll: 2,
            batch_tile,
            x: if quantized && nvidia_int8_x(spec) {
                XPath::Q8
            } else if f16_dequant_formats().contains(&spec.dtype) {
                // llama.cpp's f16 dequantization where it reads float x (fit_gemv
                // falls back to f32 without shader-f16).
                XPath::F16
            } else {
                XPath::F32
            },
            unrolled: true,
        },
    }
}

/// Whether NVIDIA's default reads x as int8, as llama.cpp's Vulkan backend chooses
/// its integer-dot path there (from its code, not measured here): never for q8_0
/// (f32 x on Turing and later), and at batch 1 only when a row is longer than 4096
/// (below that the quantization of x costs more than the dot products save).
fn nvidia_int8_x(spec: &GemvSpec) -> bool {
    spec.dtype != Quant::Q8_0 && (spec.batch > 1 || spec.cols > 4096)
}

/// The nearest variant to `v` that can run `spec` here: parameters halved until it
/// fits, then the team and x path relaxed; the plainest kernel if nothing fits.
fn fit_gemv(mut v: GemvVariant, spec: &GemvSpec, caps: &VariantCaps) -> GemvVariant {
    for _ in 0..12 {
        if v.check(spec, caps).is_none() {
            return v;
        }
        if v.unrolled && !v.can_unroll(spec) {
            v.unrolled = false;
        } else if v.team == Team::Subgroup && !caps.subgroups {
            v.team = Team::Workgroup;
        } else if v.threads > caps.max_threads {
            v.threads /= 2;
        } else if (v.x == XPath::Q8 && spec.dtype.block_elems() == 1)
            || (v.x == XPath::F16
                && (!caps.shader_f16 || !f16_dequant_formats().contains(&spec.dtype)))
        {
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
        unrolled: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200() -> AdapterReport {
        AdapterReport {
            name: "NVIDIA H200".into(),
            backend: "vulkan".into(),
            device_type: "DiscreteGpu".into(),
            driver: "NVIDIA".into(),
            driver_info: "580.159.04".into(),
            vendor_id: 0x10de,
            device_id: 0x2335,
            subgroup_min_size: 32,
            subgroup_max_size: 32,
        }
    }

    const NV: VariantCaps = crate::kernels::NVIDIA_CAPS;

    fn x_path(dtype: Quant, rows: u32, cols: u32, batch: u32) -> XPath {
        let spec = GemvSpec {
            dtype,
            rows,
            cols,
            batch,
        };
        gemv_default(&spec, &NV, &h200()).0.x
    }

    #[test]
    fn nvidia_reads_x_as_llama_cpp_does() {
        // q8_0: f32 x at every shape and batch.
        for (rows, cols, batch) in [(4096, 4096, 1), (4096, 14336, 1), (4096, 4096, 8)] {
            assert_eq!(x_path(Quant::Q8_0, rows, cols, batch), XPath::F32);
        }
        // Other quantized formats: float x for rows of at most 4096 at batch 1 (f16
        // dequantization for the 4- and 5-bit formats with shader-f16), int8 x for
        // longer rows and for batches.
        assert_eq!(x_path(Quant::Q4_0, 4096, 4096, 1), XPath::F16);
        assert_eq!(x_path(Quant::Q5_0, 1024, 4096, 1), XPath::F16);
        assert_eq!(x_path(Quant::Q4_1, 4096, 4096, 1), XPath::F16);
        assert_eq!(x_path(Quant::Q5K, 4096, 4096, 1), XPath::F16);
        assert_eq!(x_path(Quant::Q6K, 4096, 4096, 1), XPath::F32);
        let no_f16 = VariantCaps {
            shader_f16: false,
            ..NV
        };
        let spec = GemvSpec {
            dtype: Quant::Q4_0,
            rows: 4096,
            cols: 4096,
            batch: 1,
        };
        assert_eq!(gemv_default(&spec, &no_f16, &h200()).0.x, XPath::F32);
        assert_eq!(x_path(Quant::Q4_0, 4096, 14336, 1), XPath::Q8);
        assert_eq!(x_path(Quant::Q4K, 4096, 14336, 1), XPath::Q8);
        assert_eq!(x_path(Quant::Q4_0, 4096, 4096, 4), XPath::Q8);
        // Float weights never quantize x.
        assert_eq!(x_path(Quant::F16, 4096, 14336, 1), XPath::F32);
    }
}
