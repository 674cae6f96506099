//! Every kernel against its CPU reference on seeded inputs, at small and odd sizes,
//! through both reduction paths (subgroups and shared memory) and both f16 load paths.
//! Runs on any adapter; CI uses Mesa lavapipe (`apt install mesa-vulkan-drivers`).

use std::sync::Arc;

use half::f16;
use kernel_harness::clock::MonotonicClock;
use kernel_harness::data::{self, FillMode};
use kernel_harness::decode::{self, DecodeStepSpec};
use kernel_harness::kernels::attention::{
    AttentionBench, AttentionKernels, AttentionSpec, AttentionVariant,
};
use kernel_harness::kernels::bandwidth::{self, BandwidthPlan, Stream, StreamBench, StreamVariant};
use kernel_harness::kernels::fill::{FillJob, Filler};
use kernel_harness::kernels::gemv::{
    GemvBench, GemvKernel, GemvSpec, GemvVariant, HostMatrix, Team, XPath,
};
use kernel_harness::kernels::glue::{self, RopeShape, reference};
use kernel_harness::kernels::{F16Path, Reduction, VariantCaps};
use kernel_harness::quant;
use kernel_harness::timing::TimingOptions;
use kernel_harness::tune::Choice;
use kernel_harness::{AdapterOptions, GpuContext, HarnessError, KernelId};
use tokenscope_hw::floor::{ModelShape, Quant};

fn gpu(opts: AdapterOptions) -> GpuContext {
    match pollster::block_on(GpuContext::new(&opts)) {
        Ok(ctx) => ctx,
        Err(e) => panic!("these tests need a GPU adapter: {e}"),
    }
}

/// The variants to cover: as the adapter is (on lavapipe, and on any GPU with
/// both features: subgroups and shader-f16 on) and with subgroups and
/// shader-f16 off. Each context's paths are checked here, and each kernel built
/// on it is checked to have compiled for them.
fn contexts() -> Vec<GpuContext> {
    let full = gpu(AdapterOptions::default());
    let bare = gpu(AdapterOptions {
        disable_subgroups: true,
        disable_f16: true,
        disable_timestamps: true,
        ..Default::default()
    });
    assert!(
        full.caps.subgroups && full.caps.shader_f16,
        "{} ({}) offers no subgroups or no shader-f16 ({:?}): these tests cover both \
         reduction paths and both f16 paths, which needs an adapter with both (Mesa \
         lavapipe: scripts/setup.sh installs it)",
        full.adapter_report().name,
        full.adapter_report().backend,
        full.caps
    );
    assert!(
        !bare.caps.subgroups && !bare.caps.shader_f16,
        "{:?}",
        bare.caps
    );
    vec![full, bare]
}

/// The reduction and f16 paths a kernel compiled on `ctx` must have taken.
fn expected_paths(ctx: &GpuContext, reads_f16: bool) -> (Reduction, Option<F16Path>) {
    let reduction = if ctx.caps.subgroups {
        Reduction::Subgroup
    } else {
        Reduction::Shared
    };
    let f16 = reads_f16.then_some(if ctx.caps.shader_f16 {
        F16Path::ShaderF16
    } else {
        F16Path::Unpack
    });
    (reduction, f16)
}

fn id(name: &str) -> KernelId {
    KernelId {
        name: name.into(),
        dtype: "test".into(),
        shape: "-".into(),
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn fill_matches_the_cpu_twin() {
    let ctx = gpu(AdapterOptions::default());
    let k = id("fill");
    let filler = pollster::block_on(Filler::new(&ctx, &k)).unwrap();
    let key = data::key(11, 3);
    for mode in [
        FillMode::Bits,
        FillMode::F32,
        FillMode::F16Pair,
        FillMode::ScalePair,
        FillMode::Bf16Pair,
    ] {
        let buf = ctx.storage("fill test", 4 * 1001);
        let job = FillJob {
            target: (&buf).into(),
            words: 1001,
            key,
            mode,
            offset: 77,
        };
        pollster::block_on(filler.run(&ctx, &k, &[job])).unwrap();
        let got = pollster::block_on(ctx.read_u32(&buf, 0, 1001)).unwrap();
        for (i, w) in got.iter().enumerate() {
            assert_eq!(
                *w,
                data::fill_word(mode, key, 77 + i as u32),
                "{mode:?} word {i}"
            );
        }
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn bandwidth_kernels_verify_on_both_reduction_paths() {
    for ctx in contexts() {
        let plan = BandwidthPlan {
            buffer_bytes: 3 << 20,
            buffers: 4,
        };
        let timing = TimingOptions {
            warmup: 1,
            samples: 3,
            budget_ms: 500.0,
            min_sample_ms: 0.5,
            min_timestamp_sample_ms: 0.0,
            detect_timestamp_step: false,
        };
        let (report, _, err) = pollster::block_on(bandwidth::run(
            &ctx,
            &MonotonicClock::new(),
            plan,
            5,
            &timing,
        ))
        .unwrap();
        assert!(err.is_none(), "{err:?}");
        assert!(report.read_verified && report.copy_verified);
        assert_eq!(
            report.read_reduction.as_deref(),
            Some(expected_paths(&ctx, false).0.as_str())
        );
        assert!(report.read_gbps > 0.0 && report.copy_gbps > 0.0);
        assert_eq!(report.working_set_bytes, 12 << 20);
    }
}

/// Every weight format (each has a GEMV kernel), and `cols` rounded up to a whole
/// number of their blocks (256 weights for the K-quants).
fn gemv_formats() -> impl Iterator<Item = Quant> {
    Quant::ALL.into_iter()
}

fn whole_blocks(dtype: Quant, cols: u32) -> u32 {
    cols.next_multiple_of(dtype.block_elems() as u32)
}

fn check_gemv(ctx: &GpuContext, spec: GemvSpec, rotation: u32) {
    let bench = pollster::block_on(GemvBench::new(ctx, spec, 42, rotation, None)).unwrap();
    // GEMV reads f16 weights as u32 words (16-byte loads) on every adapter.
    let (reduction, _) = expected_paths(ctx, false);
    assert_eq!(
        (bench.kernel.reduction, bench.kernel.f16),
        (
            reduction,
            (spec.dtype == Quant::F16).then_some(F16Path::Unpack)
        ),
        "{spec:?} on {:?}",
        ctx.caps
    );
    for slot in 0..rotation as usize {
        let (report, err) = pollster::block_on(bench.verify(ctx, slot, u64::MAX)).unwrap();
        assert!(
            err.is_none(),
            "{:?} ({:?}): {}",
            spec,
            ctx.caps,
            err.unwrap()
        );
        assert_eq!(report.checked, u64::from(spec.rows * spec.batch));
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn gemv_every_format_small_and_odd_sizes() {
    for ctx in contexts() {
        for dtype in gemv_formats() {
            // Rows not a multiple of the rows per workgroup; cols not a multiple of the
            // workgroup's stride; one shape with a single row, one with many steps.
            for (rows, cols) in [(1, 32), (37, 96), (130, 800), (257, 2080)] {
                check_gemv(
                    &ctx,
                    GemvSpec {
                        dtype,
                        rows,
                        cols: whole_blocks(dtype, cols),
                        batch: 1,
                    },
                    1,
                );
            }
        }
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn skinny_matmul_every_format_and_odd_batches() {
    for ctx in contexts() {
        for dtype in gemv_formats() {
            for batch in [2, 3, 8, 17, 64] {
                check_gemv(
                    &ctx,
                    GemvSpec {
                        dtype,
                        rows: 45,
                        cols: whole_blocks(dtype, 160),
                        batch,
                    },
                    1,
                );
            }
        }
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn gemv_split_across_bindings_and_rotated() {
    let mut ctx = gpu(AdapterOptions::default());
    // 4 KiB bindings: an f32 row of 256 is 1 KiB, so 4 rows per binding.
    ctx.set_binding_limit(Some(4096));
    for dtype in gemv_formats() {
        let spec = GemvSpec {
            dtype,
            rows: 23,
            cols: 256,
            batch: 2,
        };
        let bench = pollster::block_on(GemvBench::new(&ctx, spec, 9, 2, None)).unwrap();
        assert!(
            bench.matrices[0].chunks.len() > 1 || dtype != Quant::F32,
            "{dtype}: not split"
        );
        for slot in 0..2 {
            let (_, err) = pollster::block_on(bench.verify(&ctx, slot, u64::MAX)).unwrap();
            assert!(err.is_none(), "{dtype}: {}", err.unwrap());
        }
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn k_quants_on_odd_shapes_and_batches() {
    for ctx in contexts() {
        for dtype in [Quant::Q4K, Quant::Q5K, Quant::Q6K] {
            // 1 row; rows not a multiple of the rows per workgroup; 1, 3 and 9
            // super-blocks per row (2304 = 72 steps: fewer than the 128 threads).
            for (rows, cols) in [(1, 256), (37, 768), (130, 2304), (5, 256)] {
                for batch in [1, 2, 5, 16, 64] {
                    check_gemv(
                        &ctx,
                        GemvSpec {
                            dtype,
                            rows,
                            cols,
                            batch,
                        },
                        1,
                    );
                }
            }
        }
    }
    // More steps than threads: each thread takes several steps, across super-blocks.
    let ctx = gpu(AdapterOptions::default());
    for dtype in [Quant::Q4K, Quant::Q5K, Quant::Q6K] {
        check_gemv(
            &ctx,
            GemvSpec {
                dtype,
                rows: 9,
                cols: 256 * 19,
                batch: 1,
            },
            2,
        );
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn k_quants_on_real_gguf_blocks() {
    let mut ctx = gpu(AdapterOptions::default());
    // Small bindings, so that the host upload is split into chunks too.
    ctx.set_binding_limit(Some(4096));
    let (rows, cols) = (45u32, 768u32);
    let mut rng = 5u32;
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| {
            rng = data::pcg(rng);
            (rng as f32 / u32::MAX as f32 - 0.5) * (1.0 + (i % 97) as f32 / 16.0)
        })
        .collect();
    for (dtype, host) in [
        (
            Quant::Q4K,
            HostMatrix::Q4K(quant::repack_q4_k(&quant::quantize_q4_k(&x))),
        ),
        (
            Quant::Q5K,
            HostMatrix::Q5K(quant::repack_q5_k(&quant::quantize_q5_k(&x))),
        ),
        (
            Quant::Q6K,
            HostMatrix::Q6K(quant::repack_q6_k(&quant::quantize_q6_k(&x))),
        ),
    ] {
        for batch in [1, 7] {
            let spec = GemvSpec {
                dtype,
                rows,
                cols,
                batch,
            };
            let bench = pollster::block_on(GemvBench::new(
                &ctx,
                spec,
                3,
                1,
                Some(Arc::new(host.clone())),
            ))
            .unwrap();
            assert!(bench.matrices[0].chunks.len() > 1, "{dtype}: not split");
            let (_, err) = pollster::block_on(bench.verify(&ctx, 0, u64::MAX)).unwrap();
            assert!(err.is_none(), "{dtype} batch {batch}: {}", err.unwrap());
        }
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn gemv_on_real_gguf_blocks() {
    let ctx = gpu(AdapterOptions::default());
    let (rows, cols) = (19u32, 256u32);
    let mut rng = 1u32;
    let x: Vec<f32> = (0..rows * cols)
        .map(|_| {
            rng = data::pcg(rng);
            (rng as f32 / u32::MAX as f32 - 0.5) * 3.0
        })
        .collect();
    let q8 = quant::repack_q8_0(&quant::quantize_q8_0(&x));
    let q4 = quant::repack_q4_0(&quant::quantize_q4_0(&x));
    let f16s: Vec<f16> = x.iter().map(|v| f16::from_f32(*v)).collect();
    let hosts = [
        (Quant::Q8_0, HostMatrix::Q8_0(q8)),
        (Quant::Q4_0, HostMatrix::Q4_0(q4)),
        (Quant::F16, HostMatrix::F16(f16s)),
        (Quant::F32, HostMatrix::F32(x.clone())),
    ];
    for (dtype, host) in hosts {
        let spec = GemvSpec {
            dtype,
            rows,
            cols,
            batch: 1,
        };
        let bench =
            pollster::block_on(GemvBench::new(&ctx, spec, 3, 1, Some(Arc::new(host)))).unwrap();
        let (_, err) = pollster::block_on(bench.verify(&ctx, 0, u64::MAX)).unwrap();
        assert!(err.is_none(), "{dtype}: {}", err.unwrap());
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn gemv_on_real_legacy_and_bf16_blocks() {
    // Real blocks (negative minimums, every 5th-bit pattern), an even and an odd row
    // count, GEMV and skinny matmul, split across bindings, on both reduction paths.
    for mut ctx in contexts() {
        ctx.set_binding_limit(Some(2048));
        let (rows, cols) = (21u32, 320u32);
        let mut rng = 5u32;
        let x: Vec<f32> = (0..rows * cols)
            .map(|_| {
                rng = data::pcg(rng);
                (rng as f32 / u32::MAX as f32 - 0.3) * 2.0
            })
            .collect();
        let hosts = [
            (
                Quant::Q4_1,
                HostMatrix::Q4_1(quant::repack_q4_1(&quant::quantize_q4_1(&x))),
            ),
            (
                Quant::Q5_0,
                HostMatrix::Q5_0(quant::repack_q5_0(&quant::quantize_q5_0(&x))),
            ),
            (
                Quant::Q5_1,
                HostMatrix::Q5_1(quant::repack_q5_1(&quant::quantize_q5_1(&x))),
            ),
            (Quant::Bf16, HostMatrix::Bf16(quant::quantize_bf16(&x))),
        ];
        for (dtype, host) in hosts {
            let host = Arc::new(host);
            for batch in [1, 5] {
                let spec = GemvSpec {
                    dtype,
                    rows,
                    cols,
                    batch,
                };
                let bench =
                    pollster::block_on(GemvBench::new(&ctx, spec, 3, 1, Some(host.clone())))
                        .unwrap();
                assert!(bench.matrices[0].chunks.len() > 1, "{dtype}: not split");
                let (_, err) = pollster::block_on(bench.verify(&ctx, 0, u64::MAX)).unwrap();
                assert!(err.is_none(), "{dtype} batch {batch}: {}", err.unwrap());
            }
        }
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn a_wrong_result_is_an_error_naming_the_index() {
    let ctx = gpu(AdapterOptions::default());
    let (rows, cols) = (8u32, 64u32);
    let w: Vec<f32> = (0..rows * cols).map(|i| (i % 7) as f32 - 3.0).collect();
    let spec = GemvSpec {
        dtype: Quant::F32,
        rows,
        cols,
        batch: 1,
    };
    let bench = pollster::block_on(GemvBench::new(
        &ctx,
        spec,
        3,
        1,
        Some(Arc::new(HostMatrix::F32(w))),
    ))
    .unwrap();
    // Corrupt row 5 on the GPU only.
    let chunk = &bench.matrices[0].chunks[0];
    ctx.write_slice(&chunk.main, 5 * 64 * 4, bytemuck::cast_slice(&[100f32; 4]));
    let (report, err) = pollster::block_on(bench.verify(&ctx, 0, u64::MAX)).unwrap();
    let err = err.expect("a corrupted row must fail verification");
    assert!(matches!(err, HarnessError::Mismatch(_)));
    let msg = err.to_string();
    assert!(
        msg.contains("row 5") && msg.contains("gemv f32 [8, 64]"),
        "{msg}"
    );
    assert_eq!(report.failure.as_deref(), Some(msg.as_str()));
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn shapes_are_checked_before_gpu_work() {
    let bad = GemvSpec {
        dtype: Quant::Q4_0,
        rows: 4,
        cols: 48,
        batch: 1,
    };
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("48") && e.contains("q4_0"), "{e}");
    let bad = GemvSpec {
        dtype: Quant::Q5_1,
        rows: 4,
        cols: 48,
        batch: 1,
    };
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("48") && e.contains("q5_1"), "{e}");
    let bad = GemvSpec {
        dtype: Quant::Q4K,
        rows: 4,
        cols: 640,
        batch: 1,
    };
    let e = bad.validate().unwrap_err().to_string();
    assert!(
        e.contains("cols = 640 is not a multiple of 256") && e.contains("q4_k"),
        "{e}"
    );
    let bad = GemvSpec {
        dtype: Quant::F16,
        rows: 4,
        cols: 64,
        batch: 65,
    };
    assert!(
        bad.validate()
            .unwrap_err()
            .to_string()
            .contains("batch = 65")
    );
}

fn check_attention(ctx: &GpuContext, spec: AttentionSpec, rotation: u32) {
    let bench = pollster::block_on(AttentionBench::new(ctx, spec, 17, rotation)).unwrap();
    assert_eq!(
        bench.f16(),
        expected_paths(ctx, spec.kv_dtype == Quant::F16).1,
        "{spec:?} on {:?}",
        ctx.caps
    );
    for slot in 0..rotation as usize {
        let (report, err) = pollster::block_on(bench.verify(ctx, slot)).unwrap();
        assert!(err.is_none(), "{spec:?} ({:?}): {}", ctx.caps, err.unwrap());
        assert_eq!(report.checked, u64::from(spec.heads * spec.head_dim));
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn attention_single_pass_and_split_kv() {
    for ctx in contexts() {
        for kv_dtype in [Quant::F16, Quant::F32] {
            for split in [false, true] {
                // (heads, kv heads, head dim, context): MHA, GQA 4 and 8, Gemma's 256-dim
                // heads, an odd head dim, contexts of 1, odd, and past several splits.
                for (heads, kv_heads, head_dim, context) in [
                    (2, 2, 64, 1),
                    (8, 2, 128, 37),
                    (8, 1, 64, 700),
                    (4, 1, 256, 300),
                    (6, 3, 72, 129),
                    (4, 2, 128, 1500),
                ] {
                    let spec = AttentionSpec {
                        kv_dtype,
                        heads,
                        kv_heads,
                        head_dim,
                        context,
                        split,
                    };
                    check_attention(&ctx, spec, 1);
                }
            }
        }
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn attention_split_across_bindings_and_rotated() {
    let mut ctx = gpu(AdapterOptions::default());
    // One KV head (100 positions x 64 dims x 4 bytes = 25 KiB) per binding.
    ctx.set_binding_limit(Some(30_000));
    let spec = AttentionSpec {
        kv_dtype: Quant::F32,
        heads: 8,
        kv_heads: 4,
        head_dim: 64,
        context: 100,
        split: true,
    };
    let bench = pollster::block_on(AttentionBench::new(&ctx, spec, 1, 2)).unwrap();
    assert_eq!(bench.caches[0].parts.len(), 4);
    for slot in 0..2 {
        let (_, err) = pollster::block_on(bench.verify(&ctx, slot)).unwrap();
        assert!(err.is_none(), "{}", err.unwrap());
    }
}

fn upload(ctx: &GpuContext, v: &[f32]) -> wgpu::Buffer {
    ctx.storage_init("test input", bytemuck::cast_slice(v))
}

fn assert_close(gpu: &[f32], cpu: &[f32], rel: f32, what: &str) {
    assert_eq!(gpu.len(), cpu.len(), "{what}");
    for (i, (g, c)) in gpu.iter().zip(cpu).enumerate() {
        assert!(
            (g - c).abs() <= rel * c.abs().max(1.0),
            "{what}[{i}]: gpu {g} cpu {c}"
        );
    }
}

fn run_ops(ctx: &GpuContext, ops: &[&glue::GlueOp]) {
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        for op in ops {
            op.encode(&mut pass);
        }
    }
    ctx.queue.submit([enc.finish()]);
    pollster::block_on(ctx.wait_idle());
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn glue_kernels_match_their_references() {
    let ctx = gpu(AdapterOptions::default());
    let key = data::key(4, 4);
    for n in [1u32, 300, 1029] {
        let x = data::f32_vec(key, n as usize);
        let w: Vec<f32> = data::f32_vec(key ^ 1, n as usize);
        let (xb, wb) = (upload(&ctx, &x), upload(&ctx, &w));
        let y = ctx.storage("y", 4 * u64::from(n));
        let op = pollster::block_on(glue::rmsnorm(&ctx, n, &xb, &wb, &y)).unwrap();
        run_ops(&ctx, &[&op]);
        let got = pollster::block_on(ctx.read_f32(&y, 0, u64::from(n))).unwrap();
        assert_close(
            &got,
            &reference::rmsnorm(&x, &w, glue::RMS_EPS),
            1e-5,
            "rmsnorm",
        );

        let gu: Vec<f32> = data::f32_vec(key ^ 2, 2 * n as usize)
            .iter()
            .map(|v| v * 6.0)
            .collect();
        let gub = upload(&ctx, &gu);
        for gelu in [false, true] {
            let out = ctx.storage("act", 4 * u64::from(n));
            let op = pollster::block_on(glue::silu_mul(&ctx, n, gelu, &gub, &out)).unwrap();
            run_ops(&ctx, &[&op]);
            let got = pollster::block_on(ctx.read_f32(&out, 0, u64::from(n))).unwrap();
            assert_close(&got, &reference::silu_mul(&gu, gelu), 1e-5, "silu_mul");
        }

        let h = upload(&ctx, &x);
        let op = pollster::block_on(glue::add(&ctx, n, &wb, &h)).unwrap();
        run_ops(&ctx, &[&op]);
        let got = pollster::block_on(ctx.read_f32(&h, 0, u64::from(n))).unwrap();
        let want: Vec<f32> = x.iter().zip(&w).map(|(a, b)| a + b).collect();
        assert_close(&got, &want, 1e-6, "add");
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn rope_and_kv_append_match_the_reference() {
    let ctx = gpu(AdapterOptions::default());
    for kv_dtype in [Quant::F16, Quant::F32] {
        let (h, hkv, dh, cap, pos) = (4u32, 2u32, 64u32, 10u32, 7u32);
        let qkv: Vec<f32> = data::f32_vec(data::key(8, 1), ((h + 2 * hkv) * dh) as usize);
        let cs = glue::rope_table(dh, pos, 10_000.0);
        let qkv_b = upload(&ctx, &qkv);
        let cs_b = ctx.storage_init("cs", bytemuck::cast_slice(&cs));
        let q_out = ctx.storage("q", 4 * u64::from(h * dh));
        let elem = if kv_dtype == Quant::F16 { 2 } else { 4 };
        let cache_bytes = u64::from(hkv * cap * dh) * elem;
        // Ranges of the arena (K after V's padding: a non-zero offset).
        let k = ctx.operand("k", cache_bytes);
        let v = ctx.operand("v", cache_bytes);
        let shape = RopeShape {
            heads: h,
            kv_heads: hkv,
            head_dim: dh,
            pos,
            capacity: cap,
            kv_dtype,
        };
        let op =
            pollster::block_on(glue::rope_kv(&ctx, shape, &qkv_b, &cs_b, &q_out, &k, &v)).unwrap();
        run_ops(&ctx, &[&op]);
        let d = dh as usize;
        let got_q = pollster::block_on(ctx.read_f32(&q_out, 0, u64::from(h * dh))).unwrap();
        for head in 0..h as usize {
            let want = reference::rope(&qkv[head * d..(head + 1) * d], &cs);
            assert_close(&got_q[head * d..(head + 1) * d], &want, 1e-6, "rope q");
        }
        let read = |s: &kernel_harness::arena::Slice| -> Vec<f32> {
            let bytes =
                pollster::block_on(ctx.read_bytes(&s.buffer, s.offset, cache_bytes)).unwrap();
            if kv_dtype == Quant::F16 {
                bytemuck::pod_collect_to_vec::<u8, f16>(&bytes)
                    .iter()
                    .map(|v| v.to_f32())
                    .collect()
            } else {
                bytemuck::pod_collect_to_vec(&bytes)
            }
        };
        let (kc, vc) = (read(&k), read(&v));
        let tol = if kv_dtype == Quant::F16 { 1e-3 } else { 1e-6 };
        for kvh in 0..hkv as usize {
            let src = (h as usize + kvh) * d;
            let row = (kvh * cap as usize + pos as usize) * d;
            let want_k = reference::rope(&qkv[src..src + d], &cs);
            assert_close(&kc[row..row + d], &want_k, tol, "k cache");
            let vsrc = (h as usize + hkv as usize + kvh) * d;
            assert_close(&vc[row..row + d], &qkv[vsrc..vsrc + d], tol, "v cache");
        }
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn decode_step_runs_a_tiny_model() {
    let ctx = gpu(AdapterOptions::default());
    let json = r#"{"model_type": "gemma3_text", "hidden_size": 128, "intermediate_size": 256,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "num_hidden_layers": 6, "vocab_size": 1000, "sliding_window": 32,
        "sliding_window_pattern": 3}"#;
    let model = ModelShape::from_hf_config("tiny-gemma", json).unwrap();
    for quant in [Quant::Q4_0, Quant::F16] {
        let spec = DecodeStepSpec {
            model: model.clone(),
            quant,
            kv_dtype: Quant::F16,
            context: 100,
        };
        assert_eq!((0..6).filter(|&l| spec.is_full_layer(l)).count(), 2);
        let timing = TimingOptions {
            warmup: 1,
            samples: 3,
            budget_ms: 500.0,
            min_sample_ms: 0.5,
            min_timestamp_sample_ms: 0.0,
            detect_timestamp_step: false,
        };
        let t = pollster::block_on(decode::run(
            &ctx,
            &MonotonicClock::new(),
            &spec,
            1,
            1 << 20,
            &timing,
        ))
        .unwrap();
        assert!(t.layers.median_us > 0.0 && t.lm_head.median_us > 0.0);
        assert!(t.distinct_layers >= 2, "{}", t.distinct_layers);
        // 6 layers x (6 glue + 4 gemv + attention; one split at 100 tokens) + norm + lm head.
        assert_eq!(t.dispatches, 6 * 11 + 2);
        assert!(ctx.take_uncaptured_errors().is_empty());
    }
}

/// A subset of `space` in which every pair of parameter values that occurs together
/// in some variant of the space occurs together in a chosen one (greedy pairwise
/// cover): each parameter's every value, and each combination of two, is verified.
fn pairwise<V: Copy>(space: &[V], params: impl Fn(&V) -> Vec<u32>) -> Vec<V> {
    use std::collections::BTreeSet;
    let pairs = |v: &V| -> BTreeSet<(usize, u32, usize, u32)> {
        let p = params(v);
        let mut out = BTreeSet::new();
        for i in 0..p.len() {
            for j in i + 1..p.len() {
                out.insert((i, p[i], j, p[j]));
            }
        }
        out
    };
    let mut uncovered: BTreeSet<_> = space.iter().flat_map(pairs).collect();
    let mut chosen = Vec::new();
    while !uncovered.is_empty() {
        let best = space
            .iter()
            .max_by_key(|v| pairs(v).intersection(&uncovered).count())
            .copied()
            .expect("a non-empty space");
        for p in pairs(&best) {
            uncovered.remove(&p);
        }
        chosen.push(best);
    }
    chosen
}

fn gemv_params(v: &GemvVariant) -> Vec<u32> {
    vec![
        u32::from(v.team == Team::Subgroup),
        v.threads,
        v.rows,
        v.unroll,
        v.batch_tile,
        match v.x {
            XPath::F32 => 0,
            XPath::Q8 => 1,
            XPath::F16 => 2,
        },
        u32::from(v.unrolled),
    ]
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn every_gemv_variant_verifies_on_odd_shapes() {
    // The variant space itself, not only the variants a tuner picks: for each format,
    // a pairwise cover of every variant that can run here, at batch 1 and at an odd
    // batch, on a shape whose rows and units divide by nothing the variants use.
    for ctx in contexts() {
        let caps = VariantCaps::of(&ctx);
        let mut total = 0;
        for dtype in gemv_formats() {
            for (rows, cols, batch) in [(37, 288, 1), (19, 800, 5)] {
                let spec = GemvSpec {
                    dtype,
                    rows,
                    cols: whole_blocks(dtype, cols),
                    batch,
                };
                let space = GemvVariant::space(&spec, &caps);
                assert!(space.iter().any(|v| v.team == Team::Workgroup), "{spec:?}");
                assert_eq!(
                    space.iter().any(|v| v.team == Team::Subgroup),
                    ctx.caps.subgroups,
                    "{spec:?}"
                );
                if dtype.block_elems() > 1 {
                    assert!(space.iter().any(|v| v.x == XPath::Q8), "{spec:?}");
                }
                // The f16 dequantization where the format and the device take it.
                assert_eq!(
                    space.iter().any(|v| v.x == XPath::F16),
                    ctx.caps.shader_f16
                        && matches!(
                            dtype,
                            Quant::Q4_0
                                | Quant::Q5_0
                                | Quant::Q4_1
                                | Quant::Q5_1
                                | Quant::Q4K
                                | Quant::Q5K
                        ),
                    "{spec:?}"
                );
                let cover = pairwise(&space, gemv_params);
                let kernel = |v: GemvVariant| {
                    pollster::block_on(GemvKernel::with_variant(&ctx, &spec, Choice::given(v)))
                        .unwrap_or_else(|e| panic!("{v}: {e}"))
                };
                let mut bench = pollster::block_on(GemvBench::with_kernel(
                    &ctx,
                    spec,
                    7,
                    1,
                    None,
                    kernel(cover[0]),
                ))
                .unwrap();
                for v in &cover {
                    pollster::block_on(bench.set_kernel(&ctx, kernel(*v))).unwrap();
                    let (report, err) =
                        pollster::block_on(bench.verify(&ctx, 0, u64::MAX)).unwrap();
                    assert!(err.is_none(), "{spec:?} variant {v}: {}", err.unwrap());
                    assert_eq!(report.checked, u64::from(rows * batch), "{v}");
                }
                total += cover.len();
            }
        }
        eprintln!("{total} GEMV variants verified on {:?}", ctx.caps);
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn every_streaming_variant_verifies() {
    // The bandwidth ceiling's read and copy in every threads / loads in flight /
    // words a thread that can run here: the checksum and the copy are exact, over a
    // size that is no multiple of any grid (the remainder loop runs too).
    let ctx = gpu(AdapterOptions::default());
    let caps = VariantCaps::of(&ctx);
    let plan = BandwidthPlan {
        buffer_bytes: (3 << 20) + 4096 * 3,
        buffers: 4,
    };
    let bench = pollster::block_on(StreamBench::new(&ctx, plan, 5)).unwrap();
    let clock = MonotonicClock::new();
    let timing = TimingOptions {
        warmup: 1,
        samples: 3,
        budget_ms: 200.0,
        min_sample_ms: 0.0,
        min_timestamp_sample_ms: 0.0,
        detect_timestamp_step: false,
    };
    let mut n = 0;
    for threads in [64, 128, 256] {
        for unroll in [1, 2, 4, 8] {
            for words in [4, 8, 16, 32, 64] {
                let v = StreamVariant {
                    threads,
                    unroll,
                    words,
                };
                if v.check(&caps).is_some() {
                    continue;
                }
                for stream in [Stream::Read, Stream::Copy] {
                    let (_, report, err) =
                        pollster::block_on(bench.time(&ctx, &clock, stream, v, &timing)).unwrap();
                    assert!(err.is_none(), "{stream:?} {v}: {}", err.unwrap());
                    assert!(report.checked > 0);
                    n += 1;
                }
            }
        }
    }
    assert!(n >= 2 * 3 * 9, "{n} variants");
    assert_eq!(
        StreamVariant::parse("t256_u4_w16"),
        Ok(StreamVariant::DEFAULT)
    );
    assert!(StreamVariant::parse("t256_u4").is_err());
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn every_attention_variant_verifies_on_odd_shapes() {
    for ctx in contexts() {
        let caps = VariantCaps::of(&ctx);
        for kv_dtype in [Quant::F16, Quant::F32] {
            for split in [false, true] {
                let spec = AttentionSpec {
                    kv_dtype,
                    heads: 6,
                    kv_heads: 2,
                    head_dim: 72,
                    context: 333,
                    split,
                };
                let space = AttentionVariant::space(&spec, &caps);
                let cover = pairwise(&space, |v| {
                    vec![v.chunk, v.threads, v.vec, u32::from(v.kv_together)]
                });
                // V loaded after K and together with it, both verified.
                assert!(
                    cover.iter().any(|v| v.kv_together) && cover.iter().any(|v| !v.kv_together)
                );
                // Every chunk (split) and both load widths (f16) are among them.
                assert!(
                    cover.len() >= if split { 6 } else { 2 },
                    "{spec:?}: {cover:?}"
                );
                let kernels = |v: AttentionVariant| {
                    pollster::block_on(AttentionKernels::with_variant(
                        &ctx,
                        &spec,
                        Choice::given(v),
                    ))
                    .unwrap_or_else(|e| panic!("{v}: {e}"))
                };
                let mut bench = pollster::block_on(AttentionBench::new(&ctx, spec, 9, 1)).unwrap();
                for v in cover {
                    bench.set_kernels(&ctx, kernels(v));
                    let (_, err) = pollster::block_on(bench.verify(&ctx, 0)).unwrap();
                    assert!(err.is_none(), "{spec:?} variant {v}: {}", err.unwrap());
                }
            }
        }
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn the_combine_merges_more_splits_than_its_threads() {
    // 8,200 positions in splits of 32: 257 splits a head, past the combine's 256
    // threads, so its weights come in two rounds; both head sizes the combine lays
    // out differently (16 and 64 four-vectors a head).
    let ctx = gpu(AdapterOptions::default());
    for head_dim in [64, 256] {
        let spec = AttentionSpec {
            kv_dtype: Quant::F32,
            heads: 2,
            kv_heads: 1,
            head_dim,
            context: 8200,
            split: true,
        };
        // Both ways of loading V.
        let v = AttentionVariant::parse(if head_dim == 64 {
            "c32_t128_v4"
        } else {
            "c32_t128_v4_kv"
        })
        .unwrap();
        let kernels = pollster::block_on(AttentionKernels::with_variant(
            &ctx,
            &spec,
            Choice::given(v),
        ))
        .unwrap();
        let mut bench = pollster::block_on(AttentionBench::new(&ctx, spec, 5, 1)).unwrap();
        bench.set_kernels(&ctx, kernels);
        assert_eq!(bench.splits(), 257);
        let (report, err) = pollster::block_on(bench.verify(&ctx, 0)).unwrap();
        assert!(err.is_none(), "head dim {head_dim}: {}", err.unwrap());
        assert_eq!(report.checked, u64::from(spec.heads * head_dim));
        assert!(bench.combine_only().is_some());
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn the_arena_reuses_its_blocks_and_never_overlaps_live_ranges() {
    let ctx = gpu(AdapterOptions::default());
    let align = u64::from(ctx.limits.min_storage_buffer_offset_alignment).max(256);
    let a = ctx.operand("a", 1000);
    let b = ctx.operand("b", 3000);
    assert!(a.buffer == b.buffer, "small ranges share a block");
    assert_eq!((a.offset, a.size), (0, 1000));
    assert_eq!(b.offset, 1024_u64.next_multiple_of(align));
    assert_eq!(ctx.arena_footprint().0, 1);
    // While a range lives its block is not reused from zero.
    drop(b);
    let c = ctx.operand("c", 64);
    assert!(c.offset > a.offset);
    // Once every range of a block is gone, the next one starts it again at zero:
    // the same memory, whatever the kernel before it allocated.
    drop((a, c));
    let d = ctx.operand("d", 4096);
    assert_eq!(d.offset, 0);
    assert_eq!(ctx.arena_footprint().0, 1);
    // Writes land in the range, not elsewhere in the block.
    let e = ctx.operand("e", 16);
    ctx.write_slice(&e, 0, bytemuck::cast_slice(&[1u32, 2, 3, 4]));
    let got = pollster::block_on(ctx.read_u32(&e.buffer, e.offset / 4, 4)).unwrap();
    assert_eq!(got, [1, 2, 3, 4]);
    let before = pollster::block_on(ctx.read_u32(&d.buffer, 0, 4)).unwrap();
    assert_eq!(before, [0, 0, 0, 0]);
    // Without the arena each operand is its own buffer.
    let bare = gpu(AdapterOptions {
        no_arena: true,
        ..Default::default()
    });
    let x = bare.operand("x", 1000);
    assert_eq!((x.offset, x.buffer.size()), (0, 1000));
    assert_eq!(bare.arena_footprint(), (0, 0));
}
