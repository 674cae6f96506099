//! Decode attention: `shaders/attention_decode.wgsl` (+ `attention_combine.wgsl` for
//! split-KV). One new query per head over a KV cache of `context` tokens, grouped-query
//! heads, f16 or f32 cache.
//!
//! Cache layout: K and V are `[kv_heads, capacity, head_dim]`; when a cache is larger
//! than one binding, whole KV heads are split across bindings (one dispatch each).

use std::sync::Arc;

use tokenscope_hw::floor::Quant;
use tokenscope_kernel_report::VerificationReport;

use crate::context::GpuContext;
use crate::data::{self};
use crate::error::{HarnessError, Result};
use crate::kernels::fill::Filler;
use crate::kernels::{Check, F16Path, Reduction, VariantCaps};
use crate::shader::{self, Binding, Defines, Kernel};
use crate::timing::Workload;
use crate::tune::Choice;

mod kv_cache;
mod spec;
mod variant;

pub use kv_cache::KvCache;
pub use spec::AttentionSpec;
pub use variant::{AttentionVariant, attention_default};

/// Compiled attention kernels (decode + combine).
#[derive(Debug, Clone)]
pub struct AttentionKernels {
    /// attention_decode.wgsl.
    pub decode: Arc<Kernel>,
    /// attention_combine.wgsl.
    pub combine: Arc<Kernel>,
    /// How it reads an f16 KV cache (`None`: an f32 cache).
    pub f16: Option<F16Path>,
    /// The variant compiled, and why it was chosen.
    pub choice: Choice<AttentionVariant>,
}

impl AttentionKernels {
    /// Compiles both for `spec`, in the variant the run's tuning chooses.
    pub async fn new(ctx: &GpuContext, spec: &AttentionSpec) -> Result<Self> {
        spec.validate()?;
        let choice = AttentionVariant::choose(
            ctx.tuning(),
            spec,
            &VariantCaps::of(ctx),
            &ctx.adapter_report(),
        );
        Self::with_variant(ctx, spec, choice).await
    }

    /// Compiles both for `spec` in a given variant.
    pub async fn with_variant(
        ctx: &GpuContext,
        spec: &AttentionSpec,
        choice: Choice<AttentionVariant>,
    ) -> Result<Self> {
        spec.validate()?;
        let id = spec.id();
        let v = choice.variant;
        if let Some(reason) = v.check(spec, &VariantCaps::of(ctx)) {
            return Err(HarnessError::InvalidShape {
                kernel: id,
                reason: format!("variant {v}: {reason}"),
            });
        }
        let wide = v.vec == 8;
        let f16 = if wide {
            Some(F16Path::Unpack)
        } else {
            F16Path::of(ctx, spec.kv_dtype == Quant::F16)
        };
        let defines = Defines::new()
            .flag("KV_F16", spec.kv_dtype == Quant::F16)
            .flag("WIDE", wide)
            .flag("SHADER_F16", f16 == Some(F16Path::ShaderF16))
            .flag("KV_TOGETHER", v.kv_together)
            .value("WG_SIZE", v.threads)
            .value("HEAD_DIM", spec.head_dim)
            .value("GROUP", spec.group())
            .value("LANES", v.lanes(spec))
            .value("VEC", v.vec);
        let decode = ctx
            .kernel(
                &id,
                shader::ATTENTION_DECODE,
                &defines,
                &[
                    Binding::Uniform,
                    Binding::Read,
                    Binding::Read,
                    Binding::Read,
                    Binding::ReadWrite,
                    Binding::ReadWrite,
                    Binding::ReadWrite,
                ],
            )
            .await?;
        // The combine's threads: as many as splits (a power of two), at least one
        // per 4-vector of a head row, at most 256: a few splits take a small
        // workgroup, hundreds the largest.
        let (splits, _) = v.splits(spec);
        let combine_wg = splits
            .next_power_of_two()
            .max((spec.head_dim / 4).next_power_of_two())
            .clamp(32, 256);
        let combine = ctx
            .kernel(
                &id,
                shader::ATTENTION_COMBINE,
                &Defines::new()
                    .flag("SUBGROUPS", Reduction::of(ctx) == Reduction::Subgroup)
                    .value("WG_SIZE", combine_wg),
                &[
                    Binding::Uniform,
                    Binding::Read,
                    Binding::Read,
                    Binding::ReadWrite,
                ],
            )
            .await?;
        Ok(Self {
            decode,
            combine,
            f16,
            choice,
        })
    }

    /// Splits per KV head and positions per split of `spec` in this variant.
    pub fn splits(&self, spec: &AttentionSpec) -> (u32, u32) {
        self.choice.variant.splits(spec)
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct DecodeParams {
    context: u32,
    capacity: u32,
    chunk: u32,
    splits: u32,
    kv_head_offset: u32,
    heads: u32,
    scale: f32,
    _pad: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct CombineParams {
    heads: u32,
    splits: u32,
    hq: u32,
    _pad: u32,
}

/// Attention dispatches for one cache, one query buffer and one output buffer.
#[derive(Debug)]
pub struct AttentionOp {
    /// The problem.
    pub spec: AttentionSpec,
    kernels: AttentionKernels,
    decode_groups: Vec<(wgpu::BindGroup, (u32, u32))>,
    combine_group: Option<(wgpu::BindGroup, u32)>,
    /// Splits per KV head.
    pub splits: u32,
    _keep: Vec<wgpu::Buffer>,
}

impl AttentionOp {
    /// Binds `cache` (its first `spec.context` positions), `q` (`[heads, head_dim]`) and
    /// `out` (`[heads, head_dim]`).
    pub fn new(
        ctx: &GpuContext,
        spec: AttentionSpec,
        kernels: &AttentionKernels,
        cache: &KvCache,
        q: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> Self {
        let (splits, chunk) = kernels.splits(&spec);
        let hq = spec.head_dim / 4;
        let label = format!("{} bind", spec.id());
        let part_o = ctx.storage(
            &format!("{} partial o", spec.id()),
            if splits > 1 {
                16 * u64::from(spec.heads * splits * hq)
            } else {
                16
            },
        );
        let part_ml = ctx.storage(
            &format!("{} partial m, l", spec.id()),
            if splits > 1 {
                8 * u64::from(spec.heads * splits)
            } else {
                8
            },
        );
        let mut keep = Vec::new();
        let decode_groups = cache
            .parts
            .iter()
            .map(|(h0, n, k, v)| {
                let params = ctx.uniform(
                    &label,
                    &DecodeParams {
                        context: spec.context,
                        capacity: cache.capacity,
                        chunk,
                        splits,
                        kv_head_offset: *h0,
                        heads: spec.heads,
                        scale: 1.0 / (spec.head_dim as f32).sqrt(),
                        _pad: 0,
                    },
                );
                let bg = ctx.bind(
                    &kernels.decode,
                    &label,
                    &crate::bufs![&params, q, k, v, out, &part_o, &part_ml],
                );
                keep.push(params);
                (bg, (splits, *n))
            })
            .collect();
        let combine_group = (splits > 1).then(|| {
            let params = ctx.uniform(
                &label,
                &CombineParams {
                    heads: spec.heads,
                    splits,
                    hq,
                    _pad: 0,
                },
            );
            let bg = ctx.bind(
                &kernels.combine,
                &label,
                &crate::bufs![&params, &part_o, &part_ml, out],
            );
            keep.push(params);
            (bg, spec.heads)
        });
        keep.push(part_o);
        keep.push(part_ml);
        Self {
            spec,
            kernels: kernels.clone(),
            decode_groups,
            combine_group,
            splits,
            _keep: keep,
        }
    }

    /// Records the decode dispatch(es) and, for split-KV, the combine.
    pub fn encode(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.kernels.decode.pipeline);
        for (bg, (x, y)) in &self.decode_groups {
            pass.set_bind_group(0, bg, &[]);
            pass.dispatch_workgroups(*x, *y, 1);
        }
        self.encode_combine(pass);
    }

    /// Records the combine alone (nothing without splits).
    pub fn encode_combine(&self, pass: &mut wgpu::ComputePass<'_>) {
        if let Some((bg, heads)) = &self.combine_group {
            pass.set_pipeline(&self.kernels.combine.pipeline);
            pass.set_bind_group(0, bg, &[]);
            pass.dispatch_workgroups(*heads, 1, 1);
        }
    }

    /// Dispatches per call.
    pub fn dispatches(&self) -> u32 {
        self.decode_groups.len() as u32 + u32::from(self.combine_group.is_some())
    }
}

/// An attention benchmark: `rotation` caches, one q, one output.
#[derive(Debug)]
pub struct AttentionBench {
    /// The problem.
    pub spec: AttentionSpec,
    /// Caches rotated through.
    pub caches: Vec<KvCache>,
    ops: Vec<AttentionOp>,
    /// The kernels (and the variant they were compiled in).
    pub kernels: AttentionKernels,
    q_key: u32,
    /// Output `[heads, head_dim]`.
    pub out: wgpu::Buffer,
    q: wgpu::Buffer,
}

impl Workload for AttentionBench {
    fn rotation(&self) -> usize {
        self.ops.len()
    }
    fn encode(&self, pass: &mut wgpu::ComputePass<'_>, iter: usize) {
        self.ops[iter % self.ops.len()].encode(pass);
    }
}

/// The combine dispatch of a split-KV [`AttentionBench`] alone, on each slot's
/// partials as the last full call left them: its share of the time, timed apart.
pub struct CombineOnly<'a>(&'a AttentionBench);

impl Workload for CombineOnly<'_> {
    fn rotation(&self) -> usize {
        self.0.ops.len()
    }
    fn encode(&self, pass: &mut wgpu::ComputePass<'_>, iter: usize) {
        self.0.ops[iter % self.0.ops.len()].encode_combine(pass);
    }
}

impl AttentionBench {
    /// The combine alone, for split-KV with more than one split.
    pub fn combine_only(&self) -> Option<CombineOnly<'_>> {
        (self.splits() > 1).then_some(CombineOnly(self))
    }

    /// Allocates `rotation` caches and the vectors.
    pub async fn new(
        ctx: &GpuContext,
        spec: AttentionSpec,
        seed: u64,
        rotation: u32,
    ) -> Result<Self> {
        let id = spec.id();
        let kernels = AttentionKernels::new(ctx, &spec).await?;
        let filler = Filler::new(ctx, &id).await?;
        let q_key = data::key(seed, 2000);
        let qlen = (spec.heads * spec.head_dim) as usize;
        let q = ctx.storage_init(
            &format!("{id} q"),
            bytemuck::cast_slice(&data::f32_vec(q_key, qlen)),
        );
        let out = ctx.storage(&format!("{id} out"), 4 * qlen as u64);
        let mut caches = Vec::new();
        let mut ops = Vec::new();
        for slot in 0..rotation.max(1) {
            let keys = (
                data::key(seed, 2001 + 2 * slot),
                data::key(seed, 2002 + 2 * slot),
            );
            let cache = KvCache::new(ctx, &spec, spec.context, keys, &filler).await?;
            ops.push(AttentionOp::new(ctx, spec, &kernels, &cache, &q, &out));
            caches.push(cache);
        }
        ctx.check_errors(&id)?;
        Ok(Self {
            spec,
            caches,
            ops,
            kernels,
            q_key,
            out,
            q,
        })
    }

    /// Runs the same caches with other kernels (another variant), rebinding them.
    pub fn set_kernels(&mut self, ctx: &GpuContext, kernels: AttentionKernels) {
        self.ops = self
            .caches
            .iter()
            .map(|c| AttentionOp::new(ctx, self.spec, &kernels, c, &self.q, &self.out))
            .collect();
        self.kernels = kernels;
    }

    /// Splits per KV head.
    pub fn splits(&self) -> u32 {
        self.ops.first().map_or(1, |o| o.splits)
    }

    /// How it reads its f16 KV cache (`None`: an f32 cache).
    pub fn f16(&self) -> Option<F16Path> {
        self.kernels.f16
    }

    /// Runs slot `slot` once and compares the output with an f64 CPU reference for
    /// every query head and dim. Tolerance: `(1e-5 + 2 n 2^-24) * sum_p p_p |v_p|`,
    /// n the longest f32 summation chain of the kernel.
    pub async fn verify(
        &self,
        ctx: &GpuContext,
        slot: usize,
    ) -> Result<(VerificationReport, Option<HarnessError>)> {
        self.verify_heads(ctx, slot, self.spec.kv_heads).await
    }

    /// [`AttentionBench::verify`] of the query heads of the first `kv_heads` KV heads
    /// only (the tuner's quick check of a variant).
    pub async fn verify_heads(
        &self,
        ctx: &GpuContext,
        slot: usize,
        kv_heads: u32,
    ) -> Result<(VerificationReport, Option<HarnessError>)> {
        let s = self.spec;
        let id = s.id();
        crate::timing::run_calls(ctx, &id, self, slot, 1).await?;
        let d = s.head_dim as usize;
        let gpu = ctx
            .read_f32(&self.out, 0, u64::from(s.heads) * d as u64)
            .await?;
        let q = data::f32_vec(self.q_key, s.heads as usize * d);
        let cache = &self.caches[slot % self.caches.len()];
        let v = self.kernels.choice.variant;
        let (splits, chunk) = v.splits(&s);
        let pg = (v.threads / (s.head_dim / v.vec)).max(1);
        let chain = chunk.div_ceil(pg) + v.tile(&s) + splits;
        let rel = 1e-5 + 2.0 * f64::from(chain) * f64::from(f32::EPSILON) / 2.0;
        let scale = 1.0 / f64::from(s.head_dim).sqrt();
        let mut check = Check::new(&id, u64::from(s.heads) * d as u64);
        let g = s.group();
        let ctxlen = s.context as usize;
        let mut scores = vec![0f64; g as usize * ctxlen];
        let mut krow = vec![0f64; d];
        for kvh in 0..s.kv_heads.min(kv_heads.max(1)) {
            for p in 0..s.context {
                for (dd, kv) in krow.iter_mut().enumerate() {
                    *kv = f64::from(cache.value(false, kvh, p, dd as u32));
                }
                for gi in 0..g {
                    let h = (kvh * g + gi) as usize;
                    let dot: f64 = krow
                        .iter()
                        .zip(&q[h * d..(h + 1) * d])
                        .map(|(k, q)| k * f64::from(*q))
                        .sum();
                    scores[gi as usize * ctxlen + p as usize] = dot * scale;
                }
            }
            for gi in 0..g {
                let sc = &mut scores[gi as usize * ctxlen..(gi as usize + 1) * ctxlen];
                let m = sc.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let mut l = 0.0;
                for x in sc.iter_mut() {
                    *x = (*x - m).exp();
                    l += *x;
                }
                for x in sc.iter_mut() {
                    *x /= l;
                }
            }
            let mut o = vec![0f64; g as usize * d];
            let mut oabs = vec![0f64; g as usize * d];
            for p in 0..s.context {
                for dd in 0..d {
                    let v = f64::from(cache.value(true, kvh, p, dd as u32));
                    for gi in 0..g as usize {
                        let pv = scores[gi * ctxlen + p as usize] * v;
                        o[gi * d + dd] += pv;
                        oabs[gi * d + dd] += pv.abs();
                    }
                }
            }
            for gi in 0..g as usize {
                let h = kvh as usize * g as usize + gi;
                for dd in 0..d {
                    let i = h * d + dd;
                    check.compare(
                        || format!("out[head {h}, dim {dd}]"),
                        f64::from(gpu[i]),
                        o[gi * d + dd],
                        rel * oabs[gi * d + dd] + 1e-7,
                    );
                }
            }
        }
        Ok(check.finish())
    }
}
