//! Model shapes and the GPU decode-floor arithmetic.
//!
//! Decode at batch 1 is bound by memory bandwidth: every generated token reads every
//! weight that takes part in the step once, plus the KV cache of every layer. This
//! module turns a model's shape, a weight format and a context length into the bytes
//! one decode step must read, and, given the bandwidths the GPU's kernels reach, into
//! the floor under the time per output token (TPOT):
//!
//! ```text
//! weight_bytes   = Σ matrices read per token, stored at the quant (with its block scales)
//!                + the embedding row of the token + 1-D tensors (norms, biases) in f32
//! kv_bytes(c)    = Σ_layers 2 · h_kv · d_h · min(c, window_l) · kv_bytes_per_elem
//! TPOT_floor     = weight_bytes / B_gemv + kv_bytes / B_attention
//! tokens/s ceil  = 1 / TPOT_floor
//! ```
//!
//! Everything here is pure (no I/O, no clock) so the CLI, the web page and the report
//! share one implementation. A Hugging Face `config.json` is read from its text with
//! [`ModelShape::from_hf_config`].

mod hf_config;
mod kv_plan;
mod presets;

use std::fmt;
use std::str::FromStr;

pub use kv_plan::{KvPlan, KvPlanInput};
pub use presets::{preset_names, presets};

use serde::{Deserialize, Serialize};

use crate::gguf::GgmlType;

/// Errors of the model-shape and floor arithmetic.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FloorError {
    /// The `config.json` text is not JSON.
    #[error("config.json is not valid JSON: {0}")]
    Json(String),
    /// A field the floor needs is missing from `config.json`.
    #[error("config.json has no `{0}` (needed for the decode floor)")]
    MissingField(&'static str),
    /// A field has a value the floor cannot use.
    #[error("config.json field `{field}` = {value}: {reason}")]
    InvalidField {
        /// The field name.
        field: &'static str,
        /// Its value, as written.
        value: String,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A model name that is not one of the presets.
    #[error("unknown model `{name}`; known presets: {known} (or pass a Hugging Face config.json)")]
    UnknownModel {
        /// The name asked for.
        name: String,
        /// The preset names, comma separated.
        known: String,
    },
    /// A weight format name that is not known.
    #[error(
        "unknown weight format `{0}`; expected one of f32, f16, bf16, q8_0, q6_k, q5_1, q5_0, q5_k, q4_1, q4_0, q4_k"
    )]
    UnknownQuant(String),
    /// A block-quantized tensor whose rows are not a whole number of blocks.
    #[error(
        "tensor `{tensor}` has rows of {cols} elements, not a multiple of the {quant} block size {block}"
    )]
    NotBlockAligned {
        /// Tensor name.
        tensor: String,
        /// Row length.
        cols: u64,
        /// The format.
        quant: Quant,
        /// Its block size.
        block: u64,
    },
    /// A bandwidth that is not a positive finite number.
    #[error("bandwidth `{name}` = {value} GB/s must be a positive finite number")]
    InvalidBandwidth {
        /// Which bandwidth.
        name: &'static str,
        /// Its value.
        value: f64,
    },
}

/// A storage format for weights (and the KV cache).
///
/// `q8_0` and `q4_0` are GGUF's block formats: each block of 32 weights stores one f16
/// scale `d` and 32 signed 8-bit quants (34 bytes), or 32 unsigned 4-bit quants with an
/// offset of -8 (18 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Quant {
    /// IEEE f32, 4 bytes per weight.
    #[serde(rename = "f32")]
    F32,
    /// IEEE f16, 2 bytes per weight.
    #[serde(rename = "f16")]
    F16,
    /// bfloat16 (the top half of an f32), 2 bytes per weight.
    #[serde(rename = "bf16")]
    Bf16,
    /// GGUF q8_0: 34 bytes per block of 32.
    #[serde(rename = "q8_0")]
    Q8_0,
    /// GGUF q6_K: 210 bytes per super-block of 256 (6.5625 bits a weight).
    #[serde(rename = "q6_k")]
    Q6K,
    /// GGUF q5_1: 24 bytes per block of 32.
    #[serde(rename = "q5_1")]
    Q5_1,
    /// GGUF q5_0: 22 bytes per block of 32.
    #[serde(rename = "q5_0")]
    Q5_0,
    /// GGUF q5_K: 176 bytes per super-block of 256 (5.5 bits a weight).
    #[serde(rename = "q5_k")]
    Q5K,
    /// GGUF q4_1: 20 bytes per block of 32.
    #[serde(rename = "q4_1")]
    Q4_1,
    /// GGUF q4_0: 18 bytes per block of 32.
    #[serde(rename = "q4_0")]
    Q4_0,
    /// GGUF q4_K: 144 bytes per super-block of 256 (4.5 bits a weight).
    #[serde(rename = "q4_k")]
    Q4K,
}

impl Quant {
    /// All formats, in order of decreasing size.
    pub const ALL: [Quant; 11] = [
        Quant::F32,
        Quant::F16,
        Quant::Bf16,
        Quant::Q8_0,
        Quant::Q6K,
        Quant::Q5_1,
        Quant::Q5_0,
        Quant::Q5K,
        Quant::Q4_1,
        Quant::Q4_0,
        Quant::Q4K,
    ];

    /// The name used on the command line and in JSON (`f16`, `q4_0`, `q4_k`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Quant::F32 => "f32",
            Quant::F16 => "f16",
            Quant::Bf16 => "bf16",
            Quant::Q8_0 => "q8_0",
            Quant::Q6K => "q6_k",
            Quant::Q5_1 => "q5_1",
            Quant::Q5_0 => "q5_0",
            Quant::Q5K => "q5_k",
            Quant::Q4_1 => "q4_1",
            Quant::Q4_0 => "q4_0",
            Quant::Q4K => "q4_k",
        }
    }

    /// The ggml type storing this format: its block sizes are ggml's own
    /// ([`GgmlType`]'s table, the one place they are written).
    pub fn ggml_type(self) -> GgmlType {
        match self {
            Quant::F32 => GgmlType::F32,
            Quant::F16 => GgmlType::F16,
            Quant::Bf16 => GgmlType::BF16,
            Quant::Q8_0 => GgmlType::Q8_0,
            Quant::Q6K => GgmlType::Q6_K,
            Quant::Q5_1 => GgmlType::Q5_1,
            Quant::Q5_0 => GgmlType::Q5_0,
            Quant::Q5K => GgmlType::Q5_K,
            Quant::Q4_1 => GgmlType::Q4_1,
            Quant::Q4_0 => GgmlType::Q4_0,
            Quant::Q4K => GgmlType::Q4_K,
        }
    }

    /// Elements per block (1 for the float formats, 32 for the legacy GGUF blocks,
    /// 256 for the K-quants' super-blocks).
    pub fn block_elems(self) -> u64 {
        self.ggml_type().block_elems()
    }

    /// Bytes per block, scales included (ggml's `block_*` sizes).
    pub fn block_bytes(self) -> u64 {
        self.ggml_type().block_bytes()
    }

    /// Average bytes per element, scales included (e.g. 1.0625 for q8_0, 0.5625 for q4_0).
    pub fn bytes_per_elem(self) -> f64 {
        self.block_bytes() as f64 / self.block_elems() as f64
    }

    /// Bytes of a `rows x cols` matrix stored row by row in this format.
    ///
    /// Block formats need `cols` to be a multiple of the block size (as GGUF does).
    pub fn matrix_bytes(self, tensor: &str, rows: u64, cols: u64) -> Result<u64, FloorError> {
        let block = self.block_elems();
        if !cols.is_multiple_of(block) {
            return Err(FloorError::NotBlockAligned {
                tensor: tensor.to_string(),
                cols,
                quant: self,
                block,
            });
        }
        Ok(rows * (cols / block) * self.block_bytes())
    }
}

impl GgmlType {
    /// The tokenscope weight format with a kernel for this type, if any (the
    /// inverse of [`Quant::ggml_type`]).
    pub fn to_quant(self) -> Option<Quant> {
        Quant::ALL.into_iter().find(|q| q.ggml_type() == self)
    }
}

impl fmt::Display for Quant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Quant {
    type Err = FloorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f32" | "fp32" => Ok(Quant::F32),
            "f16" | "fp16" => Ok(Quant::F16),
            "q8_0" | "q8" => Ok(Quant::Q8_0),
            "q4_0" | "q4" => Ok(Quant::Q4_0),
            "bf16" => Ok(Quant::Bf16),
            "q6_k" => Ok(Quant::Q6K),
            "q5_1" => Ok(Quant::Q5_1),
            "q5_0" => Ok(Quant::Q5_0),
            "q5_k" => Ok(Quant::Q5K),
            "q4_1" => Ok(Quant::Q4_1),
            "q4_k" => Ok(Quant::Q4K),
            _ => Err(FloorError::UnknownQuant(s.to_string())),
        }
    }
}

/// The mixture-of-experts part of a model: at batch 1 only the active experts are read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoeShape {
    /// Routed experts per layer.
    pub experts: u32,
    /// Experts each token is routed to.
    pub active: u32,
    /// FFN width of the always-active shared expert (0 if none).
    pub shared_intermediate: u32,
}

/// The shape of a decoder-only transformer, as far as decode bandwidth is concerned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelShape {
    /// Preset id or the name given to a custom config.
    pub name: String,
    /// Transformer layers `L`.
    pub layers: u32,
    /// Hidden size `d`.
    pub hidden: u32,
    /// Query heads `h`.
    pub heads: u32,
    /// Key/value heads `h_kv` (grouped-query attention when smaller than `heads`).
    pub kv_heads: u32,
    /// Head dimension `d_h`.
    pub head_dim: u32,
    /// FFN width `d_ff` (per expert for mixture-of-experts models).
    pub intermediate: u32,
    /// Vocabulary size `V`.
    pub vocab: u32,
    /// Whether the LM head shares the embedding matrix (it is still read once per token).
    pub tied_embeddings: bool,
    /// Whether q/k/v projections have biases (Qwen2).
    pub qkv_bias: bool,
    /// Whether q and k get per-head RMS norms (Gemma 3, Qwen3).
    pub qk_norm: bool,
    /// RMS norms per layer (2 for Llama; 4 for Gemma 2/3's sandwich norms).
    pub norms_per_layer: u32,
    /// Sliding-window length of the local-attention layers, if any.
    pub sliding_window: Option<u32>,
    /// Layers that attend over the whole context (the others use `sliding_window`).
    pub full_attention_layers: u32,
    /// Mixture-of-experts FFN, if any.
    pub moe: Option<MoeShape>,
}

/// One weight matrix read during a decode step (`rows` outputs x `cols` inputs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixShape {
    /// Tensor name (`attn_qkv`, `ffn_down`, ...).
    pub name: String,
    /// Output features.
    pub rows: u64,
    /// Input features (the GEMV's reduction length).
    pub cols: u64,
    /// How many copies of it one decode step reads (e.g. active experts).
    pub count: u64,
}

/// The bytes one decode step reads, broken down.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepBytes {
    /// Matrices of all layers (fused q/k/v, output, FFN, router).
    pub layer_weight_bytes: u64,
    /// The LM head matrix (read whole every token, tied or not).
    pub lm_head_bytes: u64,
    /// The token's embedding row.
    pub embedding_row_bytes: u64,
    /// Norm weights and biases, in f32 as GGUF stores 1-D tensors.
    pub vector_bytes: u64,
    /// KV cache read by attention over the context.
    pub kv_bytes: u64,
}

impl StepBytes {
    /// All weight bytes (everything but the KV cache).
    pub fn weight_bytes(&self) -> u64 {
        self.layer_weight_bytes + self.lm_head_bytes + self.embedding_row_bytes + self.vector_bytes
    }

    /// Weight bytes plus KV-cache bytes.
    pub fn total(&self) -> u64 {
        self.weight_bytes() + self.kv_bytes
    }
}

/// The bandwidths the floor divides by, in GB/s (10^9 bytes per second).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FloorBandwidth {
    /// Bandwidth the GEMV kernel reaches for this weight format.
    pub gemv_gbps: f64,
    /// Bandwidth the decode-attention kernel reaches at this context.
    pub attention_gbps: f64,
}

/// The decode floor of one model at one weight format and context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloorEstimate {
    /// Model name.
    pub model: String,
    /// Weight format.
    pub quant: Quant,
    /// KV-cache element format.
    pub kv_dtype: Quant,
    /// Tokens in the context (KV cache length).
    pub context: u64,
    /// Weight bytes read per token (with scales, the embedding row and the LM head).
    pub weight_bytes: u64,
    /// KV-cache bytes read per token.
    pub kv_bytes: u64,
    /// `weight_bytes + kv_bytes`.
    pub bytes_per_token: u64,
    /// GEMV bandwidth used, GB/s.
    pub gemv_gbps: f64,
    /// Attention bandwidth used, GB/s.
    pub attention_gbps: f64,
    /// `weight_bytes / B_gemv + kv_bytes / B_attention`, in milliseconds.
    pub tpot_floor_ms: f64,
    /// `1000 / tpot_floor_ms`.
    pub tokens_per_s_ceiling: f64,
}

/// The name of the floor at the memory's measured read bandwidth, in every view:
/// every byte a decode step reads (weights and KV cache) at the read ceiling. The
/// hardware's floor: no kernel does better, and a format with fewer bytes always
/// has a lower one.
pub const FLOOR_AT_READ: &str = "floor at read bw";
/// The name of the floor with the kernels a run measured, in every view: each
/// weight format at its own GEMV's bandwidth, the KV cache at the attention
/// kernel's ([`ModelShape::floor`]).
pub const FLOOR_WITH_KERNELS: &str = "floor with these kernels";

/// Milliseconds to move `bytes` at `gbps` GB/s (10^9 bytes per second): the one
/// division every floor makes. `None` unless the bandwidth is positive and finite.
///
/// The *floor at the read bandwidth* is every byte one decode step reads at the
/// memory's measured read bandwidth: the hardware's floor, the same for any kernel
/// and never higher for a format with fewer bytes. The *floor with these kernels*
/// ([`ModelShape::floor`]) divides each part by the bandwidth its own kernel reached.
pub fn ms_at(bytes: u64, gbps: f64) -> Option<f64> {
    (gbps.is_finite() && gbps > 0.0).then(|| bytes as f64 / (gbps * 1e6))
}

/// `efficiency = TPOT_floor / TPOT_measured`: 1.0 means the server runs at the floor.
pub fn efficiency(tpot_floor_ms: f64, measured_tpot_ms: f64) -> Option<f64> {
    (measured_tpot_ms > 0.0 && tpot_floor_ms.is_finite()).then(|| tpot_floor_ms / measured_tpot_ms)
}

impl ModelShape {
    /// Query width `h · d_h`.
    pub fn q_dim(&self) -> u64 {
        u64::from(self.heads) * u64::from(self.head_dim)
    }

    /// Key (or value) width `h_kv · d_h`.
    pub fn kv_dim(&self) -> u64 {
        u64::from(self.kv_heads) * u64::from(self.head_dim)
    }

    /// Layers that use the sliding window (0 when the model has none).
    pub fn sliding_layers(&self) -> u32 {
        if self.sliding_window.is_some() {
            self.layers - self.full_attention_layers
        } else {
            0
        }
    }

    /// The matrices one layer reads per token, fused the way the harness runs them:
    /// q/k/v as one `[(h + 2 h_kv) d_h, d]` matrix, the output projection `[d, h d_h]`,
    /// gate and up as one `[2 d_ff, d]` matrix and down `[d, d_ff]` (for MoE: the router
    /// and the active experts' FFNs, plus the shared expert).
    pub fn layer_matrices(&self) -> Vec<MatrixShape> {
        let d = u64::from(self.hidden);
        let ff = u64::from(self.intermediate);
        let m = |name: &str, rows: u64, cols: u64, count: u64| MatrixShape {
            name: name.to_string(),
            rows,
            cols,
            count,
        };
        let mut out = vec![
            m("attn_qkv", self.q_dim() + 2 * self.kv_dim(), d, 1),
            m("attn_output", d, self.q_dim(), 1),
        ];
        match &self.moe {
            None => {
                out.push(m("ffn_gate_up", 2 * ff, d, 1));
                out.push(m("ffn_down", d, ff, 1));
            }
            Some(moe) => {
                out.push(m("ffn_router", u64::from(moe.experts), d, 1));
                out.push(m("ffn_gate_up_exp", 2 * ff, d, u64::from(moe.active)));
                out.push(m("ffn_down_exp", d, ff, u64::from(moe.active)));
                let sh = u64::from(moe.shared_intermediate);
                if sh > 0 {
                    out.push(m("ffn_gate_up_shexp", 2 * sh, d, 1));
                    out.push(m("ffn_down_shexp", d, sh, 1));
                }
            }
        }
        out
    }

    /// How many copies of a layer matrix are stored (every expert), where
    /// [`MatrixShape::count`] is how many one decode step reads (the active ones).
    pub fn stored_copies(&self, mat: &MatrixShape) -> u64 {
        match (&self.moe, mat.name.as_str()) {
            (Some(moe), "ffn_gate_up_exp" | "ffn_down_exp") => u64::from(moe.experts),
            _ => mat.count,
        }
    }

    /// Parameters of the layers' matrices plus embedding and (untied) LM head, for display.
    pub fn parameter_count(&self) -> u64 {
        let d = u64::from(self.hidden);
        let v = u64::from(self.vocab);
        let mut layer = 0u64;
        for mat in self.layer_matrices() {
            layer += mat.rows * mat.cols * self.stored_copies(&mat);
        }
        let head = if self.tied_embeddings { 0 } else { v * d };
        u64::from(self.layers) * layer + v * d + head
    }

    /// KV-cache bytes attention reads for one token at `context` tokens, each element in `kv`.
    ///
    /// `Σ_layers 2 · h_kv · d_h · min(context, window_l) · bytes(kv)`; sliding-window
    /// layers read at most their window.
    pub fn kv_bytes(&self, context: u64, kv: Quant) -> u64 {
        let per_pos = 2.0 * self.kv_dim() as f64 * kv.bytes_per_elem();
        let full = u64::from(self.layers - self.sliding_layers()) * context;
        let local = match self.sliding_window {
            Some(w) => u64::from(self.sliding_layers()) * context.min(u64::from(w)),
            None => 0,
        };
        ((full + local) as f64 * per_pos).round() as u64
    }

    /// The bytes one decode step reads at `context` with weights in `quant` and the KV
    /// cache in `kv`.
    pub fn step_bytes(
        &self,
        quant: Quant,
        context: u64,
        kv: Quant,
    ) -> Result<StepBytes, FloorError> {
        let d = u64::from(self.hidden);
        let v = u64::from(self.vocab);
        let mut layer = 0u64;
        for mat in self.layer_matrices() {
            layer += mat.count * quant.matrix_bytes(&mat.name, mat.rows, mat.cols)?;
        }
        let mut vectors_per_layer = u64::from(self.norms_per_layer) * d;
        if self.qk_norm {
            vectors_per_layer += 2 * u64::from(self.head_dim);
        }
        if self.qkv_bias {
            vectors_per_layer += self.q_dim() + 2 * self.kv_dim();
        }
        Ok(StepBytes {
            layer_weight_bytes: u64::from(self.layers) * layer,
            lm_head_bytes: quant.matrix_bytes("lm_head", v, d)?,
            embedding_row_bytes: quant.matrix_bytes("token_embd", 1, d)?,
            vector_bytes: 4 * (u64::from(self.layers) * vectors_per_layer + d),
            kv_bytes: self.kv_bytes(context, kv),
        })
    }

    /// The decode floor: TPOT floor and tokens/s ceiling from measured bandwidths.
    pub fn floor(
        &self,
        quant: Quant,
        context: u64,
        kv: Quant,
        bw: FloorBandwidth,
    ) -> Result<FloorEstimate, FloorError> {
        for (name, value) in [
            ("gemv_gbps", bw.gemv_gbps),
            ("attention_gbps", bw.attention_gbps),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(FloorError::InvalidBandwidth { name, value });
            }
        }
        let bytes = self.step_bytes(quant, context, kv)?;
        let weight_bytes = bytes.weight_bytes();
        // bytes / (GB/s * 1e9) seconds = bytes / (GB/s * 1e6) milliseconds.
        let tpot_floor_ms = weight_bytes as f64 / (bw.gemv_gbps * 1e6)
            + bytes.kv_bytes as f64 / (bw.attention_gbps * 1e6);
        Ok(FloorEstimate {
            model: self.name.clone(),
            quant,
            kv_dtype: kv,
            context,
            weight_bytes,
            kv_bytes: bytes.kv_bytes,
            bytes_per_token: bytes.total(),
            gemv_gbps: bw.gemv_gbps,
            attention_gbps: bw.attention_gbps,
            tpot_floor_ms,
            tokens_per_s_ceiling: 1e3 / tpot_floor_ms,
        })
    }

    /// Checks the invariants every consumer relies on.
    pub fn validate(&self) -> Result<(), FloorError> {
        let positive = [
            ("num_hidden_layers", self.layers),
            ("hidden_size", self.hidden),
            ("num_attention_heads", self.heads),
            ("num_key_value_heads", self.kv_heads),
            ("head_dim", self.head_dim),
            ("intermediate_size", self.intermediate),
            ("vocab_size", self.vocab),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(FloorError::InvalidField {
                    field,
                    value: "0".into(),
                    reason: "must be positive",
                });
            }
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(FloorError::InvalidField {
                field: "num_key_value_heads",
                value: self.kv_heads.to_string(),
                reason: "must divide num_attention_heads",
            });
        }
        if self.full_attention_layers > self.layers {
            return Err(FloorError::InvalidField {
                field: "layer_types",
                value: self.full_attention_layers.to_string(),
                reason: "more full-attention layers than layers",
            });
        }
        if let Some(moe) = &self.moe
            && (moe.active == 0 || moe.active > moe.experts)
        {
            return Err(FloorError::InvalidField {
                field: "num_experts_per_tok",
                value: moe.active.to_string(),
                reason: "must be between 1 and the number of experts",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bw(gemv: f64, attn: f64) -> FloorBandwidth {
        FloorBandwidth {
            gemv_gbps: gemv,
            attention_gbps: attn,
        }
    }

    #[test]
    fn quant_bytes_include_scales() {
        assert_eq!(Quant::Q8_0.matrix_bytes("w", 1, 32).unwrap(), 34);
        assert_eq!(Quant::Q4_0.matrix_bytes("w", 1, 32).unwrap(), 18);
        assert_eq!(
            Quant::F16.matrix_bytes("w", 4096, 4096).unwrap(),
            4096 * 4096 * 2
        );
        assert_eq!(
            Quant::Q4_0.matrix_bytes("w", 4096, 4096).unwrap(),
            4096 * 128 * 18
        );
        assert!((Quant::Q8_0.bytes_per_elem() - 1.0625).abs() < 1e-12);
        assert!((Quant::Q4_0.bytes_per_elem() - 0.5625).abs() < 1e-12);
        let err = Quant::Q4_0.matrix_bytes("odd", 2, 33).unwrap_err();
        assert!(
            err.to_string().contains("odd") && err.to_string().contains("33"),
            "{err}"
        );
    }

    #[test]
    fn every_quant_is_a_ggml_type_and_back() {
        for q in Quant::ALL {
            assert_eq!(q.ggml_type().to_quant(), Some(q), "{q}");
        }
        let with_kernel = GgmlType::ALL.iter().filter(|t| t.to_quant().is_some());
        assert_eq!(with_kernel.count(), Quant::ALL.len());
        assert_eq!(GgmlType::IQ4_NL.to_quant(), None);
    }

    #[test]
    fn quant_parses_names() {
        assert_eq!("Q4_0".parse::<Quant>().unwrap(), Quant::Q4_0);
        assert_eq!("fp16".parse::<Quant>().unwrap(), Quant::F16);
        assert_eq!("Q5_K".parse::<Quant>().unwrap(), Quant::Q5K);
        assert!(
            "iq2_xs"
                .parse::<Quant>()
                .unwrap_err()
                .to_string()
                .contains("iq2_xs")
        );
        assert_eq!(serde_json::to_string(&Quant::Q8_0).unwrap(), "\"q8_0\"");
    }

    #[test]
    fn llama_8b_bytes_by_hand() {
        let m = ModelShape::preset("Llama-3.1-8B").unwrap();
        // q/k/v 6144x4096, o 4096x4096, gate+up 28672x4096, down 4096x14336.
        let per_layer: u64 = 6144 * 4096 + 4096 * 4096 + 28672 * 4096 + 4096 * 14336;
        let b = m.step_bytes(Quant::F16, 0, Quant::F16).unwrap();
        assert_eq!(b.layer_weight_bytes, 32 * per_layer * 2);
        assert_eq!(b.lm_head_bytes, 128_256 * 4096 * 2);
        assert_eq!(b.embedding_row_bytes, 4096 * 2);
        assert_eq!(b.vector_bytes, 4 * (32 * 2 * 4096 + 4096));
        assert_eq!(b.kv_bytes, 0);
        // ~8.03 B parameters.
        let params = m.parameter_count();
        assert!((8.0e9..8.1e9).contains(&(params as f64)), "{params}");
        // KV: 2 * 32 layers * 8 heads * 128 * 4096 tokens * 2 bytes = 512 MiB.
        assert_eq!(m.kv_bytes(4096, Quant::F16), 2 * 32 * 8 * 128 * 4096 * 2);
    }

    #[test]
    fn floor_formula() {
        let m = ModelShape::preset("llama-3.1-8b").unwrap();
        let f = m
            .floor(Quant::Q4_0, 4096, Quant::F16, bw(1000.0, 500.0))
            .unwrap();
        let b = m.step_bytes(Quant::Q4_0, 4096, Quant::F16).unwrap();
        let expect = b.weight_bytes() as f64 / 1e12 * 1e3 + b.kv_bytes as f64 / 5e11 * 1e3;
        assert!((f.tpot_floor_ms - expect).abs() < 1e-12);
        assert!((f.tokens_per_s_ceiling * f.tpot_floor_ms - 1e3).abs() < 1e-9);
        assert_eq!(f.bytes_per_token, b.total());
        assert!(m.floor(Quant::Q4_0, 1, Quant::F16, bw(0.0, 1.0)).is_err());
        assert!(
            m.floor(Quant::Q4_0, 1, Quant::F16, bw(1.0, f64::NAN))
                .is_err()
        );
        assert_eq!(efficiency(10.0, 20.0), Some(0.5));
        assert_eq!(efficiency(10.0, 0.0), None);
        assert_eq!(ms_at(2_000_000, 1.0), Some(2.0));
        assert_eq!(ms_at(1, 0.0), None);
        assert_eq!(ms_at(1, f64::INFINITY), None);
    }

    #[test]
    fn gemma_sliding_window_caps_kv() {
        let m = ModelShape::preset("gemma-3-270m").unwrap();
        assert_eq!(m.sliding_layers(), 15);
        // 3 full layers at 4096 + 15 local layers at 512, 1 kv head of 256, f16.
        let expect = 2 * 256 * 2 * (3 * 4096 + 15 * 512);
        assert_eq!(m.kv_bytes(4096, Quant::F16), expect);
        // Below the window every layer reads the whole context.
        assert_eq!(m.kv_bytes(100, Quant::F16), 2 * 256 * 2 * 18 * 100);
        // Tied embeddings are still read as the LM head every token.
        let b = m.step_bytes(Quant::Q8_0, 0, Quant::F16).unwrap();
        assert_eq!(b.lm_head_bytes, 262_144 * 20 * 34);
        let params = m.parameter_count() as f64;
        assert!((2.6e8..2.8e8).contains(&params), "{params}");
    }

    #[test]
    fn presets_validate_and_are_named() {
        for p in presets() {
            p.validate().unwrap();
            assert_eq!(ModelShape::preset(&p.name).unwrap(), p);
            for q in Quant::ALL {
                match p.step_bytes(q, 8192, Quant::F16) {
                    Ok(_) => {}
                    // A K-quant's 256-weight super-blocks do not divide every
                    // width (Gemma 3 270M's 640): llama.cpp falls back to a legacy
                    // format for those tensors.
                    Err(FloorError::NotBlockAligned { block: 256, .. }) => {}
                    Err(e) => panic!("{}: {q}: {e}", p.name),
                }
            }
        }
        let err = ModelShape::preset("gpt-5").unwrap_err().to_string();
        assert!(
            err.contains("gpt-5") && err.contains("llama-3.1-8b"),
            "{err}"
        );
    }

    #[test]
    fn hf_config_llama_matches_preset() {
        let json = r#"{
          "architectures": ["LlamaForCausalLM"], "model_type": "llama",
          "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
          "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
          "tie_word_embeddings": false, "rope_theta": 500000.0
        }"#;
        let m = ModelShape::from_hf_config("llama-3.1-8b", json).unwrap();
        assert_eq!(m, ModelShape::preset("llama-3.1-8b").unwrap());
    }

    #[test]
    fn hf_config_gemma3_text_config_and_layer_types() {
        let mut types = Vec::new();
        for i in 0..18 {
            types.push(if i % 6 == 5 {
                "\"full_attention\""
            } else {
                "\"sliding_attention\""
            });
        }
        let json = format!(
            r#"{{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
               "text_config": {{"model_type": "gemma3_text", "hidden_size": 640,
               "intermediate_size": 2048, "num_attention_heads": 4, "num_key_value_heads": 1,
               "head_dim": 256, "num_hidden_layers": 18, "vocab_size": 262144,
               "sliding_window": 512, "layer_types": [{}]}}}}"#,
            types.join(",")
        );
        let m = ModelShape::from_hf_config("gemma-3-270m", &json).unwrap();
        assert_eq!(m, ModelShape::preset("gemma-3-270m").unwrap());
    }

    #[test]
    fn hf_config_qwen_moe_and_defaults() {
        let qwen = r#"{"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
            "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
            "vocab_size": 152064, "sliding_window": 131072, "use_sliding_window": false,
            "tie_word_embeddings": false}"#;
        assert_eq!(
            ModelShape::from_hf_config("qwen2.5-7b", qwen).unwrap(),
            ModelShape::preset("qwen2.5-7b").unwrap()
        );
        let mixtral = r#"{"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
            "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2,
            "sliding_window": null}"#;
        let m = ModelShape::from_hf_config("mixtral", mixtral).unwrap();
        let moe = m.moe.clone().unwrap();
        assert_eq!((moe.experts, moe.active), (8, 2));
        let b = m.step_bytes(Quant::F16, 0, Quant::F16).unwrap();
        let per_layer = 6144 * 4096 + 4096 * 4096 + 8 * 4096 + 2 * (28672 * 4096 + 4096 * 14336);
        assert_eq!(b.layer_weight_bytes, 32 * per_layer * 2);
        // Mistral v0.1 style: window on every layer.
        let mistral01 = r#"{"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
            "vocab_size": 32000, "sliding_window": 4096}"#;
        let m = ModelShape::from_hf_config("mistral-7b-v0.1", mistral01).unwrap();
        assert_eq!(m.kv_bytes(8192, Quant::F16), m.kv_bytes(4096, Quant::F16));
        // Defaults: kv heads = heads, head_dim = hidden / heads.
        let tiny = r#"{"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
            "num_hidden_layers": 2, "vocab_size": 100}"#;
        let m = ModelShape::from_hf_config("tiny", tiny).unwrap();
        assert_eq!((m.kv_heads, m.head_dim, m.tied_embeddings), (4, 16, false));
    }

    #[test]
    fn hf_config_errors_name_the_field() {
        let e = ModelShape::from_hf_config("x", "{").unwrap_err();
        assert!(matches!(e, FloorError::Json(_)));
        let e = ModelShape::from_hf_config("x", r#"{"hidden_size": 64}"#).unwrap_err();
        assert_eq!(e, FloorError::MissingField("num_hidden_layers"));
        let bad = r#"{"hidden_size": -1, "intermediate_size": 128, "num_attention_heads": 4,
            "num_hidden_layers": 2, "vocab_size": 100}"#;
        let e = ModelShape::from_hf_config("x", bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("hidden_size") && e.contains("-1"), "{e}");
        let gqa = r#"{"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
            "num_key_value_heads": 3, "num_hidden_layers": 2, "vocab_size": 100}"#;
        let e = ModelShape::from_hf_config("x", gqa)
            .unwrap_err()
            .to_string();
        assert!(e.contains("num_key_value_heads"), "{e}");
    }
}
