//! The KV cache an attention kernel reads: f32 or f16 keys and values per KV head
//! and position, split across bindings that fit the device, filled on the GPU
//! from seeded data the CPU reference regenerates.

use tokenscope_hw::floor::Quant;

use super::spec::AttentionSpec;
use crate::arena::Slice;
use crate::context::GpuContext;
use crate::data::{self, FillMode};
use crate::error::Result;
use crate::kernels::fill::{FillJob, Filler};

/// A KV cache on the GPU: K and V per binding of whole KV heads.
#[derive(Debug)]
pub struct KvCache {
    /// Format.
    pub dtype: Quant,
    /// KV heads.
    pub kv_heads: u32,
    /// Positions allocated per head.
    pub capacity: u32,
    /// Head dimension.
    pub head_dim: u32,
    /// (first KV head, heads, K range, V range) per binding.
    pub parts: Vec<(u32, u32, Slice, Slice)>,
    /// Stream keys of K and V.
    pub keys: (u32, u32),
}

impl KvCache {
    /// Allocates a cache and fills it with seeded values.
    pub async fn new(
        ctx: &GpuContext,
        spec: &AttentionSpec,
        capacity: u32,
        keys: (u32, u32),
        filler: &Filler,
    ) -> Result<Self> {
        let id = spec.id();
        let sized = AttentionSpec {
            context: capacity,
            ..*spec
        };
        let per = sized.heads_per_binding(ctx.max_binding())?;
        let elem = sized.elem_bytes();
        let head_bytes = u64::from(capacity) * u64::from(spec.head_dim) * elem;
        let parts = ctx
            .scoped(&id, 2 * head_bytes * u64::from(spec.kv_heads), || {
                let mut parts = Vec::new();
                let mut h0 = 0;
                while h0 < spec.kv_heads {
                    let n = per.min(spec.kv_heads - h0);
                    let bytes = head_bytes * u64::from(n);
                    let k = ctx.operand(&format!("{id} K heads {h0}.."), bytes);
                    let v = ctx.operand(&format!("{id} V heads {h0}.."), bytes);
                    parts.push((h0, n, k, v));
                    h0 += n;
                }
                parts
            })
            .await?;
        let mode = if spec.kv_dtype == Quant::F16 {
            FillMode::F16Pair
        } else {
            FillMode::F32
        };
        let words_per_head = head_bytes / 4;
        let mut jobs = Vec::new();
        for (h0, n, k, v) in &parts {
            for (buf, key) in [(k, keys.0), (v, keys.1)] {
                jobs.push(FillJob {
                    target: buf.into(),
                    words: words_per_head * u64::from(*n),
                    key,
                    mode,
                    offset: words_per_head * u64::from(*h0),
                });
            }
        }
        filler.run(ctx, &id, &jobs).await?;
        Ok(Self {
            dtype: spec.kv_dtype,
            kv_heads: spec.kv_heads,
            capacity,
            head_dim: spec.head_dim,
            parts,
            keys,
        })
    }

    /// Element `(kv_head, pos, dim)` of K (`v = false`) or V, as the CPU sees it.
    pub fn value(&self, v: bool, kvh: u32, pos: u32, d: u32) -> f32 {
        let key = if v { self.keys.1 } else { self.keys.0 };
        let i = (u64::from(kvh) * u64::from(self.capacity) + u64::from(pos))
            * u64::from(self.head_dim)
            + u64::from(d);
        if self.dtype == Quant::F16 {
            data::f16_at(key, i).to_f32()
        } else {
            data::f32_at(key, i)
        }
    }
}
