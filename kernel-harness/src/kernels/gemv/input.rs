//! A GEMV's input x as its kernel reads it: the f32 buffer itself, or (XQ8 variants)
//! x quantized to int8 blocks by `shaders/quantize_x.wgsl`. A decode step quantizes
//! each activation once, in its pass, before the GEMVs that read it (and times it
//! with them); a GEMV alone is timed without it: x is quantized once before.

use std::sync::Arc;

use crate::context::GpuContext;
use crate::error::{KernelId, Result};
use crate::shader::{self, Binding, Defines, Kernel};

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct QuantizeParams {
    blocks: u32,
    _pad: [u32; 3],
}

/// Threads per workgroup of quantize_x.wgsl.
const QUANTIZE_WG: u32 = 64;

/// x quantized: int8 per half-block of 16 (`xq`, one `vec4<u32>` each) and (d, sum)
/// per half-block (`xm`), with the pass that fills them from the f32 x.
#[derive(Debug)]
pub struct Quantized {
    /// `[batch, cols / 16]` vec4<u32>: 16 int8 each.
    pub xq: wgpu::Buffer,
    /// `[batch, cols / 16]` vec2<f32>: (scale of its 32-block, sum of its 16 int8).
    pub xm: wgpu::Buffer,
    kernel: Arc<Kernel>,
    bind: wgpu::BindGroup,
    groups: (u32, u32),
}

/// What a GEMV binds as x.
#[derive(Debug, Clone, Copy)]
pub enum XArg<'a> {
    /// The f32 buffer.
    F32(&'a wgpu::Buffer),
    /// The quantized buffers.
    Q8 {
        /// int8 of x.
        xq: &'a wgpu::Buffer,
        /// Scales and sums.
        xm: &'a wgpu::Buffer,
    },
}

/// A GEMV input: x, and its quantized form when the kernel reads int8.
#[derive(Debug)]
pub struct GemvInput {
    /// The f32 x, `[batch, cols]`.
    pub x: wgpu::Buffer,
    /// Present for XQ8 kernels.
    pub quantized: Option<Quantized>,
}

impl GemvInput {
    /// The input `x` (`batch` columns of `cols`, cols a multiple of 32 when `q8`).
    pub async fn new(
        ctx: &GpuContext,
        kernel: &KernelId,
        x: wgpu::Buffer,
        batch: u32,
        cols: u32,
        q8: bool,
    ) -> Result<GemvInput> {
        let quantized = if q8 {
            let blocks = u64::from(batch) * u64::from(cols / 32);
            let k = ctx
                .kernel(
                    kernel,
                    shader::QUANTIZE_X,
                    &Defines::new(),
                    &[
                        Binding::Uniform,
                        Binding::Read,
                        Binding::ReadWrite,
                        Binding::ReadWrite,
                    ],
                )
                .await?;
            let xq = ctx.storage(&format!("{kernel} x int8"), blocks * 32);
            let xm = ctx.storage(&format!("{kernel} x scales"), blocks * 16);
            let params = ctx.uniform(
                &format!("{kernel} quantize params"),
                &QuantizeParams {
                    blocks: blocks as u32,
                    _pad: [0; 3],
                },
            );
            let bind = ctx.bind(
                &k,
                &format!("{kernel} quantize"),
                &crate::bufs![&params, &x, &xq, &xm],
            );
            Some(Quantized {
                xq,
                xm,
                groups: ctx.grid((blocks as u32).div_ceil(QUANTIZE_WG)),
                kernel: k,
                bind,
            })
        } else {
            None
        };
        Ok(GemvInput { x, quantized })
    }

    /// What the GEMV binds.
    pub fn arg(&self) -> XArg<'_> {
        match &self.quantized {
            Some(q) => XArg::Q8 {
                xq: &q.xq,
                xm: &q.xm,
            },
            None => XArg::F32(&self.x),
        }
    }

    /// Records the quantization (nothing for an f32 input).
    pub fn encode(&self, pass: &mut wgpu::ComputePass<'_>) {
        if let Some(q) = &self.quantized {
            pass.set_pipeline(&q.kernel.pipeline);
            pass.set_bind_group(0, &q.bind, &[]);
            pass.dispatch_workgroups(q.groups.0, q.groups.1, 1);
        }
    }

    /// Quantizes x now, untimed (nothing for an f32 input): what a GEMV timed
    /// alone reads.
    pub async fn quantize_once(&self, ctx: &GpuContext, kernel: &KernelId) -> Result<()> {
        if self.quantized.is_none() {
            return Ok(());
        }
        let mut enc = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("quantize x"),
            });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("quantize x"),
                timestamp_writes: None,
            });
            self.encode(&mut pass);
        }
        ctx.queue.submit([enc.finish()]);
        ctx.wait_idle().await;
        ctx.check_errors(kernel)
    }

    /// Dispatches this input adds to a call.
    pub fn dispatches(&self) -> u32 {
        u32::from(self.quantized.is_some())
    }
}

/// x quantized on the host exactly as quantize_x.wgsl describes it, for tests: per
/// 32-block `(d, int8 values)`.
pub fn quantize_blocks(x: &[f32]) -> Vec<(f32, [i8; 32])> {
    x.chunks(32)
        .map(|b| {
            let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if d > 0.0 { 1.0 / d } else { 0.0 };
            let mut q = [0i8; 32];
            for (o, v) in q.iter_mut().zip(b) {
                *o = (v * id).round_ties_even().clamp(-127.0, 127.0) as i8;
            }
            (d, q)
        })
        .collect()
}
