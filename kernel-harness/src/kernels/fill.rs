//! `shaders/fill.wgsl`: fills buffers with [`crate::data`]'s seeded words on the GPU.

use std::sync::Arc;

use crate::arena::Res;
use crate::context::GpuContext;
use crate::data::FillMode;
use crate::error::{KernelId, Result};
use crate::shader::{self, Binding, Defines, Kernel};

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    words: u32,
    key: u32,
    mode: u32,
    offset: u32,
}

/// Threads per workgroup (`WG_SIZE` in fill.wgsl).
const WG_SIZE: u32 = 256;

/// A compiled fill kernel.
#[derive(Debug, Clone)]
pub struct Filler {
    kernel: Arc<Kernel>,
}

/// One buffer (or range) to fill.
#[derive(Debug)]
pub struct FillJob<'a> {
    /// The buffer or range.
    pub target: Res<'a>,
    /// Words to write from its start.
    pub words: u64,
    /// Stream key.
    pub key: u32,
    /// Word shape.
    pub mode: FillMode,
    /// Logical index of word 0 within its stream.
    pub offset: u64,
}

impl Filler {
    /// Compiles the fill kernel.
    pub async fn new(ctx: &GpuContext, id: &KernelId) -> Result<Self> {
        let kernel = ctx
            .kernel(
                id,
                shader::FILL,
                &Defines::new(),
                &[Binding::Uniform, Binding::ReadWrite],
            )
            .await?;
        Ok(Self { kernel })
    }

    /// Fills every job, submits and waits.
    pub async fn run(&self, ctx: &GpuContext, id: &KernelId, jobs: &[FillJob<'_>]) -> Result<()> {
        let mut enc = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("fill"),
            });
        let mut keep = Vec::new();
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("fill"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.kernel.pipeline);
            for job in jobs {
                if job.words == 0 {
                    continue;
                }
                let params = Params {
                    words: job.words as u32,
                    key: job.key,
                    mode: job.mode as u32,
                    offset: job.offset as u32,
                };
                let ub = ctx.uniform("fill params", &params);
                let bg = ctx.bind(&self.kernel, "fill", &[Res::from(&ub), job.target]);
                let groups = job.words.div_ceil(u64::from(WG_SIZE)).min(65_535) as u32;
                let (x, y) = ctx.grid(groups);
                pass.set_bind_group(0, &bg, &[]);
                pass.dispatch_workgroups(x, y, 1);
                keep.push((ub, bg));
            }
        }
        ctx.queue.submit([enc.finish()]);
        ctx.wait_idle().await;
        ctx.check_errors(id)
    }
}
