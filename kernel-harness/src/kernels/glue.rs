//! The small kernels between the GEMVs of a transformer layer, used by the synthetic
//! decode step: `rmsnorm.wgsl`, `silu_mul.wgsl`, `add.wgsl`, `rope_kv.wgsl`. Each has
//! its CPU reference here.

use std::sync::Arc;

use tokenscope_hw::floor::Quant;

use crate::arena::Slice;
use crate::context::GpuContext;
use crate::error::{KernelId, Result};
use crate::shader::{self, Binding, Defines, Kernel};

/// RMS-norm epsilon used by the decode step.
pub const RMS_EPS: f32 = 1e-6;

fn glue_id(name: &str, n: u64) -> KernelId {
    KernelId {
        name: name.into(),
        dtype: "f32".into(),
        shape: format!("[{n}]"),
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct NParams {
    n: u32,
    eps: f32,
    _pad: [u32; 2],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct RopeParams {
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    pos: u32,
    capacity: u32,
    _pad: [u32; 3],
}

/// A bound glue dispatch.
#[derive(Debug)]
pub struct GlueOp {
    kernel: Arc<Kernel>,
    group: wgpu::BindGroup,
    grid: (u32, u32),
    _params: wgpu::Buffer,
}

impl GlueOp {
    /// Records the dispatch.
    pub fn encode(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.kernel.pipeline);
        pass.set_bind_group(0, &self.group, &[]);
        pass.dispatch_workgroups(self.grid.0, self.grid.1, 1);
    }
}

/// `y = x / sqrt(mean(x^2) + eps) * w` over `n` elements (one workgroup).
pub async fn rmsnorm(
    ctx: &GpuContext,
    n: u32,
    x: &wgpu::Buffer,
    w: &wgpu::Buffer,
    y: &wgpu::Buffer,
) -> Result<GlueOp> {
    let id = glue_id("rmsnorm", u64::from(n));
    let kernel = ctx
        .kernel(
            &id,
            shader::RMSNORM,
            &Defines::new(),
            &[
                Binding::Uniform,
                Binding::Read,
                Binding::Read,
                Binding::ReadWrite,
            ],
        )
        .await?;
    let params = ctx.uniform(
        "rmsnorm params",
        &NParams {
            n,
            eps: RMS_EPS,
            _pad: [0; 2],
        },
    );
    let group = ctx.bind(&kernel, "rmsnorm", &crate::bufs![&params, x, w, y]);
    Ok(GlueOp {
        kernel,
        group,
        grid: (1, 1),
        _params: params,
    })
}

/// `out[i] = act(gu[i]) * gu[n + i]`, act = SiLU, or tanh-GELU when `gelu`.
pub async fn silu_mul(
    ctx: &GpuContext,
    n: u32,
    gelu: bool,
    gu: &wgpu::Buffer,
    out: &wgpu::Buffer,
) -> Result<GlueOp> {
    let id = glue_id("silu_mul", u64::from(n));
    let kernel = ctx
        .kernel(
            &id,
            shader::SILU_MUL,
            &Defines::new().flag("GELU", gelu),
            &[Binding::Uniform, Binding::Read, Binding::ReadWrite],
        )
        .await?;
    let params = ctx.uniform(
        "silu_mul params",
        &NParams {
            n,
            eps: 0.0,
            _pad: [0; 2],
        },
    );
    let group = ctx.bind(&kernel, "silu_mul", &crate::bufs![&params, gu, out]);
    Ok(GlueOp {
        kernel,
        group,
        grid: ctx.grid(n.div_ceil(256)),
        _params: params,
    })
}

/// `h[i] += delta[i]`.
pub async fn add(
    ctx: &GpuContext,
    n: u32,
    delta: &wgpu::Buffer,
    h: &wgpu::Buffer,
) -> Result<GlueOp> {
    let id = glue_id("add", u64::from(n));
    let kernel = ctx
        .kernel(
            &id,
            shader::ADD,
            &Defines::new(),
            &[Binding::Uniform, Binding::Read, Binding::ReadWrite],
        )
        .await?;
    let params = ctx.uniform(
        "add params",
        &NParams {
            n,
            eps: 0.0,
            _pad: [0; 2],
        },
    );
    let group = ctx.bind(&kernel, "add", &crate::bufs![&params, delta, h]);
    Ok(GlueOp {
        kernel,
        group,
        grid: ctx.grid(n.div_ceil(256)),
        _params: params,
    })
}

/// Shape of a rope + KV-append call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RopeShape {
    /// Query heads.
    pub heads: u32,
    /// KV heads.
    pub kv_heads: u32,
    /// Head dimension (multiple of 4).
    pub head_dim: u32,
    /// Cache position written.
    pub pos: u32,
    /// Positions allocated per KV head.
    pub capacity: u32,
    /// Cache format (f16 or f32).
    pub kv_dtype: Quant,
}

/// Rotates q and k of `qkv` at `pos` (cos/sin table `cs`), writes q to `q_out` and k, v
/// into the caches at `pos`.
#[allow(clippy::too_many_arguments)]
pub async fn rope_kv(
    ctx: &GpuContext,
    s: RopeShape,
    qkv: &wgpu::Buffer,
    cs: &wgpu::Buffer,
    q_out: &wgpu::Buffer,
    k_cache: &Slice,
    v_cache: &Slice,
) -> Result<GlueOp> {
    let id = KernelId {
        name: "rope_kv".into(),
        dtype: s.kv_dtype.as_str().into(),
        shape: format!("heads {}/{} dim {}", s.heads, s.kv_heads, s.head_dim),
    };
    let kernel = ctx
        .kernel(
            &id,
            shader::ROPE_KV,
            &Defines::new().flag("KV_F16", s.kv_dtype == Quant::F16),
            &[
                Binding::Uniform,
                Binding::Read,
                Binding::Read,
                Binding::ReadWrite,
                Binding::ReadWrite,
                Binding::ReadWrite,
            ],
        )
        .await?;
    let params = ctx.uniform(
        "rope params",
        &RopeParams {
            heads: s.heads,
            kv_heads: s.kv_heads,
            head_dim: s.head_dim,
            pos: s.pos,
            capacity: s.capacity,
            _pad: [0; 3],
        },
    );
    let group = ctx.bind(
        &kernel,
        "rope_kv",
        &crate::bufs![&params, qkv, cs, q_out, k_cache, v_cache],
    );
    let items = (s.heads + s.kv_heads) * (s.head_dim / 4);
    Ok(GlueOp {
        kernel,
        group,
        grid: (items.div_ceil(64), 1),
        _params: params,
    })
}

/// The (cos, sin) table of rotary frequencies `theta^(-2i/d)` at `pos`, computed in f64.
pub fn rope_table(head_dim: u32, pos: u32, theta: f64) -> Vec<[f32; 2]> {
    (0..head_dim / 2)
        .map(|i| {
            let freq = theta.powf(-2.0 * f64::from(i) / f64::from(head_dim));
            let a = f64::from(pos) * freq;
            [a.cos() as f32, a.sin() as f32]
        })
        .collect()
}

/// CPU references of the glue kernels.
pub mod reference {
    /// RMS norm.
    pub fn rmsnorm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
        let ms = x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>() / x.len() as f64;
        let inv = 1.0 / (ms + f64::from(eps)).sqrt();
        x.iter()
            .zip(w)
            .map(|(v, w)| (f64::from(*v) * inv * f64::from(*w)) as f32)
            .collect()
    }

    /// Gated activation.
    pub fn silu_mul(gu: &[f32], gelu: bool) -> Vec<f32> {
        let n = gu.len() / 2;
        (0..n)
            .map(|i| {
                let g = f64::from(gu[i]);
                let a = if gelu {
                    0.5 * g * (1.0 + (0.797_884_560_802_865_4 * (g + 0.044715 * g * g * g)).tanh())
                } else {
                    g / (1.0 + (-g).exp())
                };
                (a * f64::from(gu[n + i])) as f32
            })
            .collect()
    }

    /// Rotate-half rotary embedding of one head.
    pub fn rope(head: &[f32], cs: &[[f32; 2]]) -> Vec<f32> {
        let half = head.len() / 2;
        let mut out = head.to_vec();
        for i in 0..half {
            let (c, s) = (f64::from(cs[i][0]), f64::from(cs[i][1]));
            let (a, b) = (f64::from(head[i]), f64::from(head[i + half]));
            out[i] = (a * c - b * s) as f32;
            out[i + half] = (b * c + a * s) as f32;
        }
        out
    }
}
