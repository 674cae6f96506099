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

use tokenscope_hw::floor::{ModelShape, Quant};
use tokenscope_kernel_report::{DecodeStepResult, TimingSummary};

use crate::clock::Clock;
use crate::context::GpuContext;
use crate::data;
use crate::error::{HarnessError, KernelId, Result};
use crate::kernels::attention::{AttentionKernels, AttentionOp, AttentionSpec, KvCache};
use crate::kernels::fill::Filler;
use crate::kernels::gemv::{
    GemvInput, GemvKernel, GemvSpec, GpuMatrix, encode_gemv, weight_source,
};
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
    /// Each matrix's input as its kernel reads it (a, att, a, act).
    inputs: [GemvInput; 4],
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
            s.inputs[0].encode(pass);
            encode_gemv(pass, &s.kernels[0], &slot.groups[0]);
            slot.rope.encode(pass);
            slot.attention.encode(pass);
            s.inputs[1].encode(pass);
            encode_gemv(pass, &s.kernels[1], &slot.groups[1]);
            s.add1.encode(pass);
            s.rms2.encode(pass);
            s.inputs[2].encode(pass);
            encode_gemv(pass, &s.kernels[2], &slot.groups[2]);
            s.act.encode(pass);
            s.inputs[3].encode(pass);
            encode_gemv(pass, &s.kernels[3], &slot.groups[3]);
            s.add2.encode(pass);
        }
    }
}

struct HeadWorkload {
    norm: GlueOp,
    input: GemvInput,
    kernel: GemvKernel,
    groups: Groups,
}

impl Workload for HeadWorkload {
    fn rotation(&self) -> usize {
        1
    }
    fn encode(&self, pass: &mut wgpu::ComputePass<'_>, _iter: usize) {
        self.norm.encode(pass);
        self.input.encode(pass);
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
    let (specs, head_spec) = matrices(spec);
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
    attn(full_cap).validate()?;

    // Layer order and distinct weight sets per attention type.
    let layer_bytes: u64 =
        specs.iter().map(GemvSpec::weight_bytes).sum::<u64>() + attn(full_cap).kv_bytes();
    let distinct = rotation_for(
        layer_bytes,
        cache_bytes,
        u64::from(m.layers),
        2 * cache_bytes + layer_bytes,
    );
    let layer_order = LayerOrder::new(spec, distinct);
    let (r_full, r_slide) = (layer_order.full, layer_order.sliding);

    let filler = Filler::new(ctx, &id).await?;
    let kernels = [
        GemvKernel::new(ctx, &specs[0]).await?,
        GemvKernel::new(ctx, &specs[1]).await?,
        GemvKernel::new(ctx, &specs[2]).await?,
        GemvKernel::new(ctx, &specs[3]).await?,
    ];
    let attn_kernels = AttentionKernels::new(ctx, &attn(full_cap)).await?;

    let v = Activations::new(ctx, spec, seed);
    let table = |cap: u32| glue::rope_table(dh, (spec.context - 1) % cap, 10_000.0);
    let cs_full = ctx.storage_init("rope cos/sin full", bytemuck::cast_slice(&table(full_cap)));
    let cs_slide = ctx.storage_init(
        "rope cos/sin sliding",
        bytemuck::cast_slice(&table(slide_cap)),
    );

    let input = |k: usize, x: &wgpu::Buffer| {
        GemvInput::new(ctx, &id, x.clone(), 1, specs[k].cols, kernels[k].q8())
    };
    let inputs = [
        input(0, &v.a).await?,
        input(1, &v.att).await?,
        input(2, &v.a).await?,
        input(3, &v.act).await?,
    ];
    let shared = Shared {
        inputs,
        rms1: glue::rmsnorm(ctx, d, &v.h, &v.norm_w, &v.a).await?,
        rms2: glue::rmsnorm(ctx, d, &v.h, &v.norm_w, &v.a).await?,
        add1: glue::add(ctx, d, &v.o, &v.h).await?,
        add2: glue::add(ctx, d, &v.dn, &v.h).await?,
        act: glue::silu_mul(ctx, ff, m.name.starts_with("gemma"), &v.gu, &v.act).await?,
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
        inputs: &shared.inputs,
        bufs: [&v.qkv, &v.q_rot, &v.att, &v.o, &v.gu, &v.dn],
    };
    let full_slots = make_slots(&env, r_full, full_cap, &cs_full, 0).await?;
    let slide_slots = make_slots(&env, r_slide, slide_cap, &cs_slide, r_full).await?;
    let prep = shared.inputs.iter().map(GemvInput::dispatches).sum();
    let dispatches = layer_order.dispatches(&full_slots, &slide_slots, prep);
    let layers = LayersWorkload {
        shared,
        slots: (full_slots, slide_slots),
        order: layer_order.order,
    };
    ctx.check_errors(&id)?;
    let layer_m = measure(ctx, clock, &id, &layers, timing).await?;
    drop(layers);

    let head_kernel = GemvKernel::new(ctx, &head_spec).await?;
    let head = GpuMatrix::new(ctx, head_spec, weight_source(seed, 9000), &filler).await?;
    let head_input =
        GemvInput::new(ctx, &id, v.a.clone(), 1, head_spec.cols, head_kernel.q8()).await?;
    let head_groups = head.bind(ctx, &head_kernel, head_input.arg(), &v.logits);
    let head_dispatches = 1 + head_input.dispatches() + head_groups.len() as u32;
    let head_w = HeadWorkload {
        norm: glue::rmsnorm(ctx, d, &v.h, &v.norm_w, &v.a).await?,
        input: head_input,
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

/// The step's activation buffers (f32), the hidden state seeded.
struct Activations {
    h: wgpu::Buffer,
    norm_w: wgpu::Buffer,
    a: wgpu::Buffer,
    qkv: wgpu::Buffer,
    q_rot: wgpu::Buffer,
    att: wgpu::Buffer,
    o: wgpu::Buffer,
    gu: wgpu::Buffer,
    act: wgpu::Buffer,
    dn: wgpu::Buffer,
    logits: wgpu::Buffer,
}

impl Activations {
    fn new(ctx: &GpuContext, spec: &DecodeStepSpec, seed: u64) -> Activations {
        let m = &spec.model;
        let (d, h, hkv, dh, ff) = (m.hidden, m.heads, m.kv_heads, m.head_dim, m.intermediate);
        let f32s = |label: &str, n: u32| ctx.storage(label, 4 * u64::from(n));
        let x = data::f32_vec(data::key(seed, 3000), d as usize);
        Activations {
            h: ctx.storage_init("step h", bytemuck::cast_slice(&x)),
            norm_w: ctx.storage_init(
                "step norm weights",
                bytemuck::cast_slice(&vec![1f32; d as usize]),
            ),
            a: f32s("step a", d),
            qkv: f32s("step qkv", (h + 2 * hkv) * dh),
            q_rot: f32s("step q", h * dh),
            att: f32s("step attention out", h * dh),
            o: f32s("step o", d),
            gu: f32s("step gate|up", 2 * ff),
            act: f32s("step act", ff),
            dn: f32s("step down", d),
            logits: f32s("step logits", m.vocab),
        }
    }
}

/// The four layer matrices (QKV, output, gate|up, down) and the LM head.
pub(crate) fn matrices(spec: &DecodeStepSpec) -> ([GemvSpec; 4], GemvSpec) {
    let m = &spec.model;
    let (d, h, hkv, dh, ff) = (m.hidden, m.heads, m.kv_heads, m.head_dim, m.intermediate);
    let gemv = |rows: u32, cols: u32| GemvSpec {
        dtype: spec.quant,
        rows,
        cols,
        batch: 1,
    };
    (
        [
            gemv((h + 2 * hkv) * dh, d),
            gemv(d, h * dh),
            gemv(2 * ff, d),
            gemv(d, ff),
        ],
        gemv(m.vocab, d),
    )
}

/// Which weight set each layer uses: `distinct` sets at most, shared between the
/// full-attention and the sliding-window layers in proportion, cycled in order.
struct LayerOrder {
    /// Distinct full-attention weight sets.
    full: u32,
    /// Distinct sliding-window weight sets.
    sliding: u32,
    /// Per layer: (full attention?, index of its weight set).
    order: Vec<(bool, usize)>,
}

impl LayerOrder {
    fn new(spec: &DecodeStepSpec, distinct: u32) -> LayerOrder {
        let layers = spec.model.layers;
        let n_full = (0..layers).filter(|&l| spec.is_full_layer(l)).count() as u32;
        let n_slide = layers - n_full;
        let full = distinct.min(n_full).max(u32::from(n_full > 0));
        let sliding = distinct.min(n_slide).max(u32::from(n_slide > 0));
        let (mut cf, mut cs) = (0usize, 0usize);
        let order = (0..layers)
            .map(|l| {
                if spec.is_full_layer(l) {
                    cf += 1;
                    (true, (cf - 1) % full as usize)
                } else {
                    cs += 1;
                    (false, (cs - 1) % sliding as usize)
                }
            })
            .collect();
        LayerOrder {
            full,
            sliding,
            order,
        }
    }

    /// Dispatches for all layers: each layer's glue (6) + `prep` (x quantized for
    /// XQ8 GEMVs) + its matrices' groups + its attention.
    fn dispatches(&self, full: &[LayerSlot], sliding: &[LayerSlot], prep: u32) -> u32 {
        let per_layer = |s: &LayerSlot| {
            6 + prep
                + s.groups.iter().map(|g| g.len() as u32).sum::<u32>()
                + s.attention.dispatches()
        };
        self.order
            .iter()
            .map(|&(is_full, i)| per_layer(if is_full { &full[i] } else { &sliding[i] }))
            .sum()
    }
}

struct SlotEnv<'a> {
    ctx: &'a GpuContext,
    spec: &'a DecodeStepSpec,
    seed: u64,
    specs: &'a [GemvSpec; 4],
    kernels: &'a [GemvKernel; 4],
    attn_kernels: &'a AttentionKernels,
    filler: &'a Filler,
    inputs: &'a [GemvInput; 4],
    // qkv, q_rot, att, o, gu, dn
    bufs: [&'a wgpu::Buffer; 6],
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
    let [qkv, q_rot, att, o, gu, dn] = env.bufs;
    let x = |k: usize| env.inputs[k].arg();
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
            mats[0].bind(ctx, &env.kernels[0], x(0), qkv),
            mats[1].bind(ctx, &env.kernels[1], x(1), o),
            mats[2].bind(ctx, &env.kernels[2], x(2), gu),
            mats[3].bind(ctx, &env.kernels[3], x(3), dn),
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
        read_floor_ms: None,
        gap: step_ms / tpot_floor_ms,
        layers_timing: t.layers,
        lm_head_timing: t.lm_head,
    }
}
