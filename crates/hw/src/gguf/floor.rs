//! The decode floor of a GGUF file's own tensors: the bytes one decode step at
//! batch 1 reads, from the types the file actually stores (a Q4_K_M file mixes
//! several), rather than one format for the whole model.
//!
//! ```text
//! weight_bytes = Σ_tensors ≠ token_embd size_bytes
//!              + (tied ? size(token_embd)          -- the output projection reads it whole;
//!                                                     the lookup's row is not counted again
//!                      : row_bytes(token_embd))     -- the lookup reads one row
//! kv_bytes(C)  = Σ_layers h_kv,l · (d_k + d_v) · (sliding_l ? min(C, window) : C) · bytes(kv)
//! ms/token     = weight_bytes / B_gemv + kv_bytes / B_attention
//! ```
//!
//! Mixture-of-experts tensors (names with `_exps`) count the active experts' share,
//! `size · expert_used_count / expert_count`.

use serde::{Deserialize, Serialize};

use super::{GgmlType, GgufHeader, GgufModel, SlidingSource};
use crate::floor::{FloorBandwidth, FloorError, Quant};

/// The name of the embedding matrix in GGUF files.
pub const TOKEN_EMBD: &str = "token_embd.weight";

/// Bytes read per token from the tensors of one type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeBytes {
    /// The ggml type (`q4_K`).
    #[serde(rename = "type")]
    pub ggml_type: GgmlType,
    /// Tensors of this type.
    pub tensors: u64,
    /// Bytes of them read per token.
    pub bytes: u64,
}

/// Tensors of a type tokenscope has no kernel for (their bytes still count).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsupportedType {
    /// The ggml type.
    #[serde(rename = "type")]
    pub ggml_type: GgmlType,
    /// The tensors' names, in file order.
    pub tensors: Vec<String>,
}

/// The decode floor of one GGUF file at one context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileFloor {
    /// `general.name`, else the architecture.
    pub model: String,
    /// `general.architecture`.
    pub architecture: String,
    /// Tokens in the context (KV-cache length).
    pub context_tokens: u64,
    /// KV-cache element format.
    pub kv_dtype: Quant,
    /// Weight bytes read per token.
    pub weight_bytes_per_token: u64,
    /// KV-cache bytes read per token at `context_tokens`.
    pub kv_bytes_per_token: u64,
    /// `weight_bytes_per_token + kv_bytes_per_token`.
    pub bytes_per_token: u64,
    /// All tensors' bytes as stored in the file.
    pub file_tensor_bytes: u64,
    /// One row of `token_embd.weight` (the lookup's read).
    pub embedding_row_bytes: u64,
    /// Whether the output projection reuses `token_embd.weight`.
    pub tied_embeddings: bool,
    /// Bytes read per token by ggml type, largest first.
    pub by_type: Vec<TypeBytes>,
    /// Types without a tokenscope kernel, with their tensors.
    pub unsupported: Vec<UnsupportedType>,
    /// What the figures leave out or assume.
    pub approximations: Vec<String>,
}

impl FileFloor {
    /// Milliseconds per token when every byte moves at `bandwidth_gbps` (GB/s,
    /// 10^9 bytes per second).
    pub fn ms_per_token(&self, bandwidth_gbps: f64) -> Result<f64, FloorError> {
        self.ms_per_token_split(FloorBandwidth {
            gemv_gbps: bandwidth_gbps,
            attention_gbps: bandwidth_gbps,
        })
    }

    /// Milliseconds per token with the weights at the GEMV bandwidth and the KV
    /// cache at the attention bandwidth.
    pub fn ms_per_token_split(&self, bw: FloorBandwidth) -> Result<f64, FloorError> {
        for (name, value) in [
            ("gemv_gbps", bw.gemv_gbps),
            ("attention_gbps", bw.attention_gbps),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(FloorError::InvalidBandwidth { name, value });
            }
        }
        // bytes / (GB/s · 1e9) s = bytes / (GB/s · 1e6) ms.
        Ok(self.weight_bytes_per_token as f64 / (bw.gemv_gbps * 1e6)
            + self.kv_bytes_per_token as f64 / (bw.attention_gbps * 1e6))
    }
}

/// KV-cache bytes read per token at `context_tokens` with elements in `kv_dtype`.
pub fn kv_bytes_per_token(model: &GgufModel, context_tokens: u64, kv_dtype: Quant) -> u64 {
    let elems: u64 = (0..model.layers as usize)
        .map(|l| {
            model
                .kv_elems_per_position(l)
                .saturating_mul(model.positions_read(l, context_tokens))
        })
        .fold(0, u64::saturating_add);
    (u128::from(elems) * u128::from(kv_dtype.block_bytes()) / u128::from(kv_dtype.block_elems()))
        .try_into()
        .unwrap_or(u64::MAX)
}

/// The decode floor of the file `header` describes, at `context_tokens` with the
/// KV cache in `kv_dtype` (llama.cpp's default is f16).
pub fn file_floor(
    header: &GgufHeader,
    model: &GgufModel,
    context_tokens: u64,
    kv_dtype: Quant,
) -> FileFloor {
    let mut approximations = Vec::new();
    let mut by_type: Vec<TypeBytes> = Vec::new();
    let mut unsupported: Vec<UnsupportedType> = Vec::new();
    let mut embedding_row_bytes = 0;
    let experts = match (model.expert_count, model.expert_used_count) {
        (Some(n), Some(used)) if n > 0 && used <= n => Some((u64::from(n), u64::from(used))),
        _ => None,
    };
    let mut saw_experts = false;
    for t in &header.tensors {
        let bytes = if t.name == TOKEN_EMBD {
            embedding_row_bytes = t.row_bytes();
            if model.tied_embeddings {
                t.size_bytes
            } else {
                embedding_row_bytes
            }
        } else if let (Some((n, used)), true) = (experts, t.name.contains("_exps")) {
            saw_experts = true;
            (u128::from(t.size_bytes) * u128::from(used) / u128::from(n)) as u64
        } else {
            t.size_bytes
        };
        match by_type.iter_mut().find(|b| b.ggml_type == t.ggml_type) {
            Some(b) => {
                b.tensors += 1;
                b.bytes += bytes;
            }
            None => by_type.push(TypeBytes {
                ggml_type: t.ggml_type,
                tensors: 1,
                bytes,
            }),
        }
        if t.ggml_type.to_quant().is_none() {
            match unsupported.iter_mut().find(|u| u.ggml_type == t.ggml_type) {
                Some(u) => u.tensors.push(t.name.clone()),
                None => unsupported.push(UnsupportedType {
                    ggml_type: t.ggml_type,
                    tensors: vec![t.name.clone()],
                }),
            }
        }
    }
    by_type.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.ggml_type.cmp(&b.ggml_type)));
    let weight_bytes_per_token: u64 = by_type.iter().map(|b| b.bytes).sum();

    if header.tensor(TOKEN_EMBD).is_none() {
        approximations.push(format!(
            "the file has no {TOKEN_EMBD}: no embedding read is counted"
        ));
    } else if model.tied_embeddings {
        approximations.push(format!(
            "embeddings are tied (no output.weight): {TOKEN_EMBD} is counted once, whole, as the output projection reads it; the lookup's one row ({embedding_row_bytes} bytes) is not counted again"
        ));
    } else {
        approximations.push(format!(
            "the embedding lookup reads one row of {TOKEN_EMBD} ({embedding_row_bytes} bytes)"
        ));
    }
    approximations.push(
        "every other tensor is read whole once per token, 1-D tensors (norms, biases) at their stored size".into(),
    );
    if saw_experts && let Some((n, used)) = experts {
        approximations.push(format!(
            "expert tensors (`_exps`) count the {used} active of {n} experts' share of their bytes"
        ));
    }
    approximations.push("activations, the logits and the sampler's reads are not counted".into());
    approximations.push(format!(
        "the KV cache is {kv_dtype}: per layer 2 x KV heads x head dim (K {}, V {}) x positions, sliding layers reading at most their window",
        model.key_length, model.value_length
    ));
    if model.sliding_source == SlidingSource::UnknownAllGlobal {
        approximations.push(format!(
            "the file sets a sliding window of {} but no pattern, and tokenscope knows none for `{}`: every layer is counted as global (an upper bound)",
            model.sliding_window.unwrap_or(0),
            model.architecture
        ));
    }
    if !unsupported.is_empty() {
        let names: Vec<&str> = unsupported.iter().map(|u| u.ggml_type.name()).collect();
        approximations.push(format!(
            "types without a tokenscope kernel ({}) are counted at their stored size",
            names.join(", ")
        ));
    }
    let kv = kv_bytes_per_token(model, context_tokens, kv_dtype);
    FileFloor {
        model: model
            .name
            .clone()
            .unwrap_or_else(|| model.architecture.clone()),
        architecture: model.architecture.clone(),
        context_tokens,
        kv_dtype,
        weight_bytes_per_token,
        kv_bytes_per_token: kv,
        bytes_per_token: weight_bytes_per_token.saturating_add(kv),
        file_tensor_bytes: header.tensor_bytes(),
        embedding_row_bytes,
        tied_embeddings: model.tied_embeddings,
        by_type,
        unsupported,
        approximations,
    }
}
