//! The arithmetic roof: `shaders/fma.wgsl`, independent chains of fused multiply-adds
//! in f32 and (with shader-f16) f16. Together with the read bandwidth it places every
//! kernel on a roofline: a kernel whose FLOPs at this rate take longer than its bytes
//! at the read bandwidth is compute-bound (the skinny matmul at large batches).

use tokenscope_kernel_report::{ComputeReport, TimingSummary};

use crate::clock::Clock;
use crate::context::GpuContext;
use crate::error::{HarnessError, KernelId, Result};
use crate::kernels::Check;
use crate::shader::{self, Binding, Defines, Kernel};
use crate::timing::{TimingOptions, Workload, measure, run_calls};

/// Threads per workgroup (fma.wgsl).
const WG_SIZE: u32 = 256;
/// Chains per thread and lanes per chain (fma.wgsl).
const CHAINS: u64 = 8;
/// What every thread's chains sum to once they have converged (8 chains x 4 lanes x 0.5).
const CONVERGED: f32 = 16.0;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    mul: f32,
    add: f32,
    _pad: [u32; 2],
}

/// The size of one call: enough threads to fill a large GPU, enough multiply-adds that
/// a call lasts about a millisecond there (far fewer on a CPU adapter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComputePlan {
    /// Workgroups.
    pub groups: u32,
    /// Multiply-adds per chain.
    pub iters: u32,
}

impl ComputePlan {
    /// The plan for this adapter.
    pub fn for_device(ctx: &GpuContext) -> ComputePlan {
        if ctx.is_cpu() {
            ComputePlan {
                groups: 16,
                iters: 64,
            }
        } else {
            ComputePlan {
                groups: 4096,
                iters: 512,
            }
        }
    }

    fn threads(&self) -> u64 {
        u64::from(self.groups) * u64::from(WG_SIZE)
    }

    /// FLOPs of one call (a multiply-add counts 2).
    pub fn flops(&self) -> u64 {
        self.threads() * CHAINS * 4 * u64::from(self.iters) * 2
    }
}

struct FmaWorkload {
    kernel: std::sync::Arc<Kernel>,
    group: wgpu::BindGroup,
    grid: (u32, u32),
}

impl Workload for FmaWorkload {
    fn rotation(&self) -> usize {
        1
    }
    fn encode(&self, pass: &mut wgpu::ComputePass<'_>, _iter: usize) {
        pass.set_pipeline(&self.kernel.pipeline);
        pass.set_bind_group(0, &self.group, &[]);
        pass.dispatch_workgroups(self.grid.0, self.grid.1, 1);
    }
}

/// Times one format's chains; returns the timing and whether every thread's result
/// was the converged value.
async fn one(
    ctx: &GpuContext,
    clock: &dyn Clock,
    plan: ComputePlan,
    f16: bool,
    timing: &TimingOptions,
) -> Result<(TimingSummary, Option<HarnessError>)> {
    let id = KernelId {
        name: "fma".into(),
        dtype: if f16 { "f16" } else { "f32" }.into(),
        shape: format!("{} threads x {} iterations", plan.threads(), plan.iters),
    };
    let kernel = ctx
        .kernel(
            &id,
            shader::FMA,
            &Defines::new()
                .flag("SHADER_F16", f16)
                .value("ITERS", plan.iters),
            &[Binding::Uniform, Binding::ReadWrite],
        )
        .await?;
    let params = ctx.uniform(
        "fma params",
        &Params {
            mul: 0.5,
            add: 0.25,
            _pad: [0; 2],
        },
    );
    let out = ctx.storage("fma out", 4 * plan.threads());
    let group = ctx.bind(&kernel, "fma", &crate::bufs![&params, &out]);
    let w = FmaWorkload {
        kernel,
        group,
        grid: ctx.grid(plan.groups),
    };
    run_calls(ctx, &id, &w, 0, 1).await?;
    let got = ctx.read_f32(&out, 0, plan.threads()).await?;
    let mut check = Check::new(&id, plan.threads());
    for (i, v) in got.iter().enumerate() {
        check.compare(
            || format!("out[{i}]"),
            f64::from(*v),
            f64::from(CONVERGED),
            0.0,
        );
    }
    let (_, err) = check.finish();
    let t = measure(ctx, clock, &id, &w, timing).await?.summary(&id)?;
    Ok((t, err))
}

/// Measures the f32 (and f16, with shader-f16) FMA throughput.
pub async fn run(
    ctx: &GpuContext,
    clock: &dyn Clock,
    timing: &TimingOptions,
) -> Result<(ComputeReport, Option<HarnessError>)> {
    let plan = ComputePlan::for_device(ctx);
    let gflops = |t: &TimingSummary| plan.flops() as f64 / (t.median_us * 1e3);
    let (f32_t, f32_err) = one(ctx, clock, plan, false, timing).await?;
    let (f16_t, f16_err) = if ctx.caps.shader_f16 {
        let (t, e) = one(ctx, clock, plan, true, timing).await?;
        (Some(t), e)
    } else {
        (None, None)
    };
    let err = f32_err.or(f16_err);
    Ok((
        ComputeReport {
            f32_gflops: gflops(&f32_t),
            f16_gflops: f16_t.as_ref().map(gflops),
            f32: f32_t,
            f16: f16_t,
            flops_per_call: plan.flops(),
            verified: err.is_none(),
        },
        err,
    ))
}
