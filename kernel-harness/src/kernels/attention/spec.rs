//! A decode-attention problem ([`AttentionSpec`]): heads, head dimension, context,
//! cache format and whether the keys are split, and the bytes it reads.

use tokenscope_hw::floor::Quant;

use crate::error::{HarnessError, KernelId, Result};

/// Largest head dimension (the value phase gives each load of a row its own thread).
const MAX_HEAD_DIM: u32 = 512;

/// A decode-attention problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionSpec {
    /// KV-cache format (f16 or f32).
    pub kv_dtype: Quant,
    /// Query heads.
    pub heads: u32,
    /// KV heads.
    pub kv_heads: u32,
    /// Head dimension.
    pub head_dim: u32,
    /// Tokens in the cache.
    pub context: u32,
    /// Split-KV (flash-decoding) when true; one pass per KV head when false.
    pub split: bool,
}

impl AttentionSpec {
    /// `attention_decode` or `attention_decode_split`.
    pub fn name(&self) -> &'static str {
        if self.split {
            "attention_decode_split"
        } else {
            "attention_decode"
        }
    }

    /// Identity for errors.
    pub fn id(&self) -> KernelId {
        KernelId {
            name: self.name().into(),
            dtype: self.kv_dtype.as_str().into(),
            shape: format!(
                "heads {}/{} dim {} context {}",
                self.heads, self.kv_heads, self.head_dim, self.context
            ),
        }
    }

    /// Query heads per KV head.
    pub fn group(&self) -> u32 {
        self.heads / self.kv_heads.max(1)
    }

    pub(super) fn elem_bytes(&self) -> u64 {
        if self.kv_dtype == Quant::F16 { 2 } else { 4 }
    }

    /// `[heads, context, head_dim]`, as in the report.
    pub fn shape(&self) -> Vec<u64> {
        vec![
            u64::from(self.heads),
            u64::from(self.context),
            u64::from(self.head_dim),
        ]
    }

    /// Bytes of K plus V.
    pub fn kv_bytes(&self) -> u64 {
        2 * u64::from(self.kv_heads)
            * u64::from(self.context)
            * u64::from(self.head_dim)
            * self.elem_bytes()
    }

    /// Bytes one call moves: K and V once, q in, the output out (split-KV partials,
    /// which stay in cache, are not counted).
    pub fn bytes_moved(&self) -> u64 {
        self.kv_bytes() + 2 * 4 * u64::from(self.heads) * u64::from(self.head_dim)
    }

    /// FLOPs: q.k and p.v, 2 each per head, position and dim.
    pub fn flops(&self) -> u64 {
        4 * u64::from(self.heads) * u64::from(self.context) * u64::from(self.head_dim)
    }

    /// Checks the shape before any GPU work.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| {
            Err(HarnessError::InvalidShape {
                kernel: self.id(),
                reason,
            })
        };
        if !matches!(self.kv_dtype, Quant::F16 | Quant::F32) {
            return bad(format!(
                "KV cache format {} is not supported (f16 or f32)",
                self.kv_dtype
            ));
        }
        if self.heads == 0 || self.kv_heads == 0 || !self.heads.is_multiple_of(self.kv_heads) {
            return bad(format!(
                "{} query heads do not group over {} KV heads",
                self.heads, self.kv_heads
            ));
        }
        if self.head_dim == 0 || !self.head_dim.is_multiple_of(4) || self.head_dim > MAX_HEAD_DIM {
            return bad(format!(
                "head_dim = {} must be a multiple of 4 up to {MAX_HEAD_DIM}",
                self.head_dim
            ));
        }
        if self.context == 0 {
            return bad("context must be positive".into());
        }
        if self.group() > 16 {
            return bad(format!(
                "{} query heads per KV head (at most 16)",
                self.group()
            ));
        }
        Ok(())
    }

    /// KV heads per binding.
    pub fn heads_per_binding(&self, max_binding: u64) -> Result<u32> {
        let per_head = u64::from(self.context) * u64::from(self.head_dim) * self.elem_bytes();
        if per_head > max_binding {
            return Err(HarnessError::BindingTooLarge {
                kernel: self.id(),
                bytes: per_head,
                limit: max_binding,
            });
        }
        Ok((max_binding / per_head).min(u64::from(self.kv_heads)) as u32)
    }
}
