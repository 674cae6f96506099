//! The synthetic decode step: every layer's kernels in sequence at a model's shapes,
//! with random weights, then the final norm and the LM head. Its time, set against the
//! floor, shows what the sum of real kernels (launches, small ops, imperfect
//! bandwidth) costs on top of the bytes alone.
//!
//! Per layer (12 dispatches with split-KV attention):
//! `rmsnorm -> gemv qkv -> rope + KV append -> attention (+ combine) -> gemv o -> add ->
//! rmsnorm -> gemv gate|up -> silu_mul -> gemv down -> add`.
//! Layers cycle through `distinct_layers` weight sets (enough to exceed the cache), so a
//! layer never finds its weights in cache, like in a real model. Not modelled (under
//! 0.1% of the bytes): q/k norms, q/k/v biases, the embedding gather.

use tokenscope_core::analyze::floor::{ModelShape, Quant};
use tokenscope_core::report::kernels::{DecodeStepResult, TimingSummary};

use crate::clock::Clock;
use crate::context::GpuContext;
use crate::data;
use crate::error::{HarnessError, KernelId, Result};
use crate::kernels::attention::{AttentionKernels, AttentionOp, AttentionSpec, KvCache};
use crate::kernels::fill::Filler;
use crate::kernels::gemv::{GemvKernel, GemvSpec, GpuMatrix, encode_gemv, weight_source};
use crate::kernels::glue::{self, GlueOp, RopeShape};
use crate::kernels::rotation_for;
use crate::timing::{TimingOptions, Workload, measure};

/// Which synthetic step to run.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeStepSpec {
    /// Model shape.
    pub model: ModelShape,
    /// Weight format.
    pub quant: Quant,
    /// KV-cache format (f16 or f32).
    pub kv_dtype: Quant,
    /// Tokens in the context.
    pub context: u32,
}

impl DecodeStepSpec {
    /// Identity for errors.
    pub fn id(&self) -> KernelId {
        KernelId {
            name: "decode_step".into(),
            dtype: self.quant.as_str().into(),
            shape: format!("{} context {}", self.model.name, self.context),
        }
    }

    /// Bytes of the step's largest operand: the LM head's weights (`vocab x hidden`).
    pub fn largest_operand_bytes(&self) -> u64 {
        GemvSpec {
            dtype: self.quant,
            rows: self.model.vocab,
            cols: self.model.hidden,
            batch: 1,
        }
        .weight_bytes()
    }

    /// Whether layer `l` attends over the whole context (else over the sliding window):
    /// the full layers are spread evenly (Gemma 3: every 6th).
    pub fn is_full_layer(&self, l: u32) -> bool {
        let m = &self.model;
        if m.sliding_window.is_none() {
            return true;
        }
        let (n, f) = (u64::from(m.layers), u64::from(m.full_attention_layers));
        (u64::from(l) + 1) * f / n > u64::from(l) * f / n
    }
}

type Groups = Vec<(wgpu::BindGroup, (u32, u32))>;

struct LayerSlot {
    _mats: [GpuMatrix; 4],
    groups: [Groups; 4],
    _cache: KvCache,
    rope: GlueOp,
    attention: AttentionOp,
}

struct Shared {
    kernels: [GemvKernel; 4],
    rms1: GlueOp,
    rms2: GlueOp,
    add1: GlueOp,
    add2: GlueOp,
    act: GlueOp,
}

struct LayersWorkload {
    shared: Shared,
    // (full-attention slots, sliding slots)
    slots: (Vec<LayerSlot>, Vec<LayerSlot>),
    order: Vec<(bool, usize)>,
}

impl Workload for LayersWorkload {
    fn rotation(&self) -> usize {
        1
    }
    fn encode(&self, pass: &mut wgpu::ComputePass<'_>, _iter: usize) {
        let s = &self.shared;
        for &(full, i) in &self.order {
            let slot = if full {
                &self.slots.0[i]
            } else {
                &self.slots.1[i]
            };
            s.rms1.encode(pass);
            encode_gemv(pass, &s.kernels[0], &slot.groups[0]);
            slot.rope.encode(pass);
            slot.attention.encode(pass);
            encode_gemv(pass, &s.kernels[1], &slot.groups[1]);
            s.add1.encode(pass);
            s.rms2.encode(pass);
            encode_gemv(pass, &s.kernels[2], &slot.groups[2]);
            s.act.encode(pass);
            encode_gemv(pass, &s.kernels[3], &slot.groups[3]);
            s.add2.encode(pass);
        }
    }
}

struct HeadWorkload {
    norm: GlueOp,
    kernel: GemvKernel,
    groups: Groups,
}

impl Workload for HeadWorkload {
    fn rotation(&self) -> usize {
        1
    }
    fn encode(&self, pass: &mut wgpu::ComputePass<'_>, _iter: usize) {
        self.norm.encode(pass);
        encode_gemv(pass, &self.kernel, &self.groups);
    }
}

/// What a decode step run produced (before the floor is attached).
#[derive(Debug, Clone)]
pub struct DecodeStepTiming {
    /// Layers' timing (one sample = all layers).
    pub layers: TimingSummary,
    /// Final norm + LM head timing.
    pub lm_head: TimingSummary,
    /// Distinct layer weight sets.
    pub distinct_layers: u32,
    /// Dispatches per token.
    pub dispatches: u32,
}

/// Runs the synthetic step and times it.
pub async fn run(
    ctx: &GpuContext,
    clock: &dyn Clock,
    spec: &DecodeStepSpec,
    seed: u64,
    cache_bytes: u64,
    timing: &TimingOptions,
) -> Result<DecodeStepTiming> {
    let id = spec.id();
    let m = &spec.model;
    let bad = |reason: String| HarnessError::InvalidShape {
        kernel: id.clone(),
        reason,
    };
    if m.moe.is_some() {
        return Err(bad(
            "mixture-of-experts layers are not modelled by the decode step (the floor covers them)"
                .into(),
        ));
    }
    let (d, h, hkv, dh, ff) = (m.hidden, m.heads, m.kv_heads, m.head_dim, m.intermediate);
    let qkv_rows = (h + 2 * hkv) * dh;
    let specs = [
        GemvSpec {
            dtype: spec.quant,
            rows: qkv_rows,
            cols: d,
            batch: 1,
        },
        GemvSpec {
            dtype: spec.quant,
            rows: d,
            cols: h * dh,
            batch: 1,
        },
        GemvSpec {
            dtype: spec.quant,
            rows: 2 * ff,
            cols: d,
            batch: 1,
        },
        GemvSpec {
            dtype: spec.quant,
            rows: d,
            cols: ff,
            batch: 1,
        },
    ];
    let head_spec = GemvSpec {
        dtype: spec.quant,
        rows: m.vocab,
        cols: d,
        batch: 1,
    };
    for s in specs.iter().chain([&head_spec]) {
        s.validate().map_err(|e| bad(e.to_string()))?;
    }
    let full_cap = spec.context;
    let slide_cap = m.sliding_window.map_or(full_cap, |w| w.min(full_cap));
    let attn = |cap: u32| AttentionSpec {
        kv_dtype: spec.kv_dtype,
        heads: h,
        kv_heads: hkv,
        head_dim: dh,
        context: cap,
        split: true,
    };
    attn(full_cap).validate(ctx)?;

    // Layer order and distinct weight sets per attention type.
    let n_full = (0..m.layers).filter(|&l| spec.is_full_layer(l)).count() as u32;
    let n_slide = m.layers - n_full;
    let layer_bytes: u64 =
        specs.iter().map(GemvSpec::weight_bytes).sum::<u64>() + attn(full_cap).kv_bytes();
    let distinct = rotation_for(
        layer_bytes,
        cache_bytes,
        u64::from(m.layers),
        2 * cache_bytes + layer_bytes,
    );
    let r_full = distinct.min(n_full).max(u32::from(n_full > 0));
    let r_slide = distinct.min(n_slide).max(u32::from(n_slide > 0));
    let (mut cf, mut cs) = (0usize, 0usize);
    let order: Vec<(bool, usize)> = (0..m.layers)
        .map(|l| {
            if spec.is_full_layer(l) {
                cf += 1;
                (true, (cf - 1) % r_full as usize)
            } else {
                cs += 1;
                (false, (cs - 1) % r_slide as usize)
            }
        })
        .collect();

    let filler = Filler::new(ctx, &id).await?;
    let kernels = [
        GemvKernel::new(ctx, &specs[0]).await?,
        GemvKernel::new(ctx, &specs[1]).await?,
        GemvKernel::new(ctx, &specs[2]).await?,
        GemvKernel::new(ctx, &specs[3]).await?,
    ];
    let attn_kernels = AttentionKernels::new(ctx, &attn(full_cap)).await?;

    // Activations.
    let x_key = data::key(seed, 3000);
    let hbuf = ctx.storage_init(
        "step h",
        bytemuck::cast_slice(&data::f32_vec(x_key, d as usize)),
    );
    let ones = vec![1f32; d as usize];
    let norm_w = ctx.storage_init("step norm weights", bytemuck::cast_slice(&ones));
    let a = ctx.storage("step a", 4 * u64::from(d));
    let qkv = ctx.storage("step qkv", 4 * u64::from(qkv_rows));
    let q_rot = ctx.storage("step q", 4 * u64::from(h * dh));
    let att = ctx.storage("step attention out", 4 * u64::from(h * dh));
    let o = ctx.storage("step o", 4 * u64::from(d));
    let gu = ctx.storage("step gate|up", 8 * u64::from(ff));
    let act = ctx.storage("step act", 4 * u64::from(ff));
    let dn = ctx.storage("step down", 4 * u64::from(d));
    let logits = ctx.storage("step logits", 4 * u64::from(m.vocab));
    let table = |cap: u32| glue::rope_table(dh, (spec.context - 1) % cap, 10_000.0);
    let cs_full = ctx.storage_init("rope cos/sin full", bytemuck::cast_slice(&table(full_cap)));
    let cs_slide = ctx.storage_init(
        "rope cos/sin sliding",
        bytemuck::cast_slice(&table(slide_cap)),
    );

    let shared = Shared {
        rms1: glue::rmsnorm(ctx, d, &hbuf, &norm_w, &a).await?,
        rms2: glue::rmsnorm(ctx, d, &hbuf, &norm_w, &a).await?,
        add1: glue::add(ctx, d, &o, &hbuf).await?,
        add2: glue::add(ctx, d, &dn, &hbuf).await?,
        act: glue::silu_mul(ctx, ff, m.name.starts_with("gemma"), &gu, &act).await?,
        kernels,
    };

    let env = SlotEnv {
        ctx,
        spec,
        seed,
        specs: &specs,
        kernels: &shared.kernels,
        attn_kernels: &attn_kernels,
        filler: &filler,
        bufs: [&a, &qkv, &q_rot, &att, &o, &gu, &act, &dn],
    };
    let full_slots = make_slots(&env, r_full, full_cap, &cs_full, 0).await?;
    let slide_slots = make_slots(&env, r_slide, slide_cap, &cs_slide, r_full).await?;
    let dispatch_per_layer = |s: &LayerSlot| {
        6 + s.groups.iter().map(|g| g.len() as u32).sum::<u32>() + s.attention.dispatches()
    };
    let dispatches: u32 = order
        .iter()
        .map(|&(full, i)| {
            dispatch_per_layer(if full {
                &full_slots[i]
            } else {
                &slide_slots[i]
            })
        })
        .sum();
    let layers = LayersWorkload {
        shared,
        slots: (full_slots, slide_slots),
        order,
    };
    ctx.check_errors(&id)?;
    let layer_m = measure(ctx, clock, &id, &layers, timing).await?;
    drop(layers);

    let head_kernel = GemvKernel::new(ctx, &head_spec).await?;
    let head = GpuMatrix::new(ctx, head_spec, weight_source(seed, 9000), &filler).await?;
    let head_groups = head.bind(ctx, &head_kernel, &a, &logits);
    let head_dispatches = 1 + head_groups.len() as u32;
    let head_w = HeadWorkload {
        norm: glue::rmsnorm(ctx, d, &hbuf, &norm_w, &a).await?,
        kernel: head_kernel,
        groups: head_groups,
    };
    let head_m = measure(ctx, clock, &id, &head_w, timing).await?;
    Ok(DecodeStepTiming {
        layers: layer_m.summary(&id)?,
        lm_head: head_m.summary(&id)?,
        distinct_layers: r_full + r_slide,
        dispatches: dispatches + head_dispatches,
    })
}

struct SlotEnv<'a> {
    ctx: &'a GpuContext,
    spec: &'a DecodeStepSpec,
    seed: u64,
    specs: &'a [GemvSpec; 4],
    kernels: &'a [GemvKernel; 4],
    attn_kernels: &'a AttentionKernels,
    filler: &'a Filler,
    // a, qkv, q_rot, att, o, gu, act, dn
    bufs: [&'a wgpu::Buffer; 8],
}

impl SlotEnv<'_> {
    fn attention(&self, cap: u32) -> AttentionSpec {
        let m = &self.spec.model;
        AttentionSpec {
            kv_dtype: self.spec.kv_dtype,
            heads: m.heads,
            kv_heads: m.kv_heads,
            head_dim: m.head_dim,
            context: cap,
            split: true,
        }
    }
}

async fn make_slots(
    env: &SlotEnv<'_>,
    count: u32,
    cap: u32,
    cs_buf: &wgpu::Buffer,
    base: u32,
) -> Result<Vec<LayerSlot>> {
    let (ctx, seed, specs) = (env.ctx, env.seed, env.specs);
    let [a, qkv, q_rot, att, o, gu, act, dn] = env.bufs;
    let m = &env.spec.model;
    let mut slots = Vec::new();
    for i in 0..count {
        let slot_seed = base + i;
        let mats = [
            GpuMatrix::new(
                ctx,
                specs[0],
                weight_source(seed, 4 * slot_seed),
                env.filler,
            )
            .await?,
            GpuMatrix::new(
                ctx,
                specs[1],
                weight_source(seed, 4 * slot_seed + 1),
                env.filler,
            )
            .await?,
            GpuMatrix::new(
                ctx,
                specs[2],
                weight_source(seed, 4 * slot_seed + 2),
                env.filler,
            )
            .await?,
            GpuMatrix::new(
                ctx,
                specs[3],
                weight_source(seed, 4 * slot_seed + 3),
                env.filler,
            )
            .await?,
        ];
        let groups = [
            mats[0].bind(ctx, &env.kernels[0], a, qkv),
            mats[1].bind(ctx, &env.kernels[1], att, o),
            mats[2].bind(ctx, &env.kernels[2], a, gu),
            mats[3].bind(ctx, &env.kernels[3], act, dn),
        ];
        let keys = (
            data::key(seed, 5000 + 2 * slot_seed),
            data::key(seed, 5001 + 2 * slot_seed),
        );
        let cache = KvCache::new(ctx, &env.attention(cap), cap, keys, env.filler).await?;
        if cache.parts.len() != 1 {
            return Err(HarnessError::InvalidShape {
                kernel: env.spec.id(),
                reason: "the decode step needs each layer's KV cache in one binding".into(),
            });
        }
        let (_, _, kbuf, vbuf) = &cache.parts[0];
        let rope = glue::rope_kv(
            ctx,
            RopeShape {
                heads: m.heads,
                kv_heads: m.kv_heads,
                head_dim: m.head_dim,
                pos: (env.spec.context - 1) % cap,
                capacity: cap,
                kv_dtype: env.spec.kv_dtype,
            },
            qkv,
            cs_buf,
            q_rot,
            kbuf,
            vbuf,
        )
        .await?;
        let attention = AttentionOp::new(
            ctx,
            env.attention(cap),
            env.attn_kernels,
            &cache,
            q_rot,
            att,
        );
        slots.push(LayerSlot {
            _mats: mats,
            groups,
            _cache: cache,
            rope,
            attention,
        });
    }
    Ok(slots)
}

/// Attaches the floor to a step timing.
pub fn result(
    spec: &DecodeStepSpec,
    t: &DecodeStepTiming,
    bytes_per_token: u64,
    tpot_floor_ms: f64,
) -> DecodeStepResult {
    let layers_ms = t.layers.median_us / 1e3;
    let lm_head_ms = t.lm_head.median_us / 1e3;
    let step_ms = layers_ms + lm_head_ms;
    DecodeStepResult {
        model: spec.model.name.clone(),
        quant: spec.quant,
        kv_dtype: spec.kv_dtype,
        context: u64::from(spec.context),
        layers: spec.model.layers,
        distinct_layers: t.distinct_layers,
        dispatches: t.dispatches,
        layers_ms,
        lm_head_ms,
        step_ms,
        per_layer_us: t.layers.median_us / f64::from(spec.model.layers),
        bytes_per_token,
        effective_gbps: bytes_per_token as f64 / (step_ms * 1e-3) / 1e9,
        tpot_floor_ms,
        gap: step_ms / tpot_floor_ms,
        layers_timing: t.layers,
        lm_head_timing: t.lm_head,
    }
}
