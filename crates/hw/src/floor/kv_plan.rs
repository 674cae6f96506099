//! The KV-cache memory planner, beside the bandwidth floor: how much memory one
//! token and one sequence of the KV cache take, how much the weights take, and how
//! many sequences of a context fit in a GPU's memory.
//!
//! ```text
//! kv_per_token     = Σ_layers 2 · h_kv · d_h · bytes(kv)          (K and V)
//! kv_per_sequence  = Σ_layers 2 · h_kv · d_h · min(context, window_l) · bytes(kv)
//! budget           = gpu_memory · utilisation                     (vLLM's default 0.9)
//! sequences        = ⌊(budget − weights) / kv_per_sequence⌋
//! ```
//!
//! Weights count every stored tensor once (all experts of a mixture-of-experts
//! model, the embedding table unless tied). Activations, the CUDA graphs and the
//! engine's own buffers are what the utilisation fraction leaves room for.

use serde::{Deserialize, Serialize};

use super::{FloorError, ModelShape, Quant};

/// What the planner was asked.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct KvPlanInput {
    /// Weight format.
    pub weights: Quant,
    /// KV-cache element format.
    pub kv_dtype: Quant,
    /// Tokens per sequence (prompt plus output).
    pub context: u64,
    /// The GPU's memory, bytes.
    pub gpu_memory_bytes: u64,
    /// The fraction of it the engine may use (0-1].
    pub utilization: f64,
    /// Also size llama.cpp's KV buffers for this many slots (`--parallel`), each
    /// of `context` tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llamacpp_slots: Option<u64>,
}

/// The KV buffers llama.cpp allocates ([`ModelShape::llamacpp_kv_buffer_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlamaCppKv {
    /// Slots (`--parallel`).
    pub slots: u64,
    /// `--ctx-size`: `context x slots`.
    pub ctx_size: u64,
    /// Micro-batch assumed (`--ubatch-size`, default 512).
    pub ubatch: u64,
    /// The full-attention layers' buffer.
    pub full_attention_bytes: u64,
    /// The sliding-window layers' buffer.
    pub sliding_window_bytes: u64,
}

/// The plan for one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvPlan {
    /// Model name.
    pub model: String,
    /// What was asked.
    pub input: KvPlanInput,
    /// KV bytes one token adds while the context is within every window.
    pub kv_bytes_per_token: u64,
    /// KV bytes of one sequence of `context` tokens (sliding-window layers hold at
    /// most their window).
    pub kv_bytes_per_sequence: u64,
    /// The weights' bytes, every tensor stored once.
    pub weight_bytes: u64,
    /// `gpu_memory_bytes · utilization`.
    pub budget_bytes: u64,
    /// What is left for the KV cache after the weights (0 when they do not fit).
    pub kv_budget_bytes: u64,
    /// Whole sequences of `context` tokens that fit.
    pub sequences: u64,
    /// llama.cpp's buffers, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llamacpp: Option<LlamaCppKv>,
}

impl ModelShape {
    /// Bytes of every weight stored once: all layers' matrices (all experts), the
    /// LM head, the embedding table unless tied, and the 1-D tensors in f32.
    pub fn resident_weight_bytes(&self, quant: Quant) -> Result<u64, FloorError> {
        let d = u64::from(self.hidden);
        let v = u64::from(self.vocab);
        let mut layer = 0u64;
        for mat in self.layer_matrices() {
            layer +=
                self.stored_copies(&mat) * quant.matrix_bytes(&mat.name, mat.rows, mat.cols)?;
        }
        let head = quant.matrix_bytes("lm_head", v, d)?;
        let embedding = if self.tied_embeddings {
            0
        } else {
            quant.matrix_bytes("token_embd", v, d)?
        };
        let vectors = self.step_bytes(quant, 1, Quant::F16)?.vector_bytes;
        Ok(u64::from(self.layers) * layer + head + embedding + vectors)
    }

    /// How many sequences of a context fit in a GPU's memory, and why.
    pub fn plan_kv(&self, input: KvPlanInput) -> Result<KvPlan, FloorError> {
        if input.context == 0 {
            return Err(FloorError::InvalidField {
                field: "context",
                value: "0".into(),
                reason: "must be at least one token",
            });
        }
        if !(input.utilization > 0.0 && input.utilization <= 1.0) {
            return Err(FloorError::InvalidField {
                field: "utilization",
                value: input.utilization.to_string(),
                reason: "must be a fraction in (0, 1]",
            });
        }
        let weight_bytes = self.resident_weight_bytes(input.weights)?;
        let kv_bytes_per_token = self.kv_bytes(1, input.kv_dtype);
        let kv_bytes_per_sequence = self.kv_bytes(input.context, input.kv_dtype);
        let budget_bytes = (input.gpu_memory_bytes as f64 * input.utilization).floor() as u64;
        let kv_budget_bytes = budget_bytes.saturating_sub(weight_bytes);
        Ok(KvPlan {
            model: self.name.clone(),
            input,
            kv_bytes_per_token,
            kv_bytes_per_sequence,
            weight_bytes,
            budget_bytes,
            kv_budget_bytes,
            sequences: kv_budget_bytes
                .checked_div(kv_bytes_per_sequence)
                .unwrap_or(0),
            llamacpp: input.llamacpp_slots.map(|slots| {
                let ctx_size = input.context * slots.max(1);
                let (full, local) =
                    self.llamacpp_kv_buffer_bytes(ctx_size, slots, LLAMACPP_UBATCH, input.kv_dtype);
                LlamaCppKv {
                    slots,
                    ctx_size,
                    ubatch: LLAMACPP_UBATCH,
                    full_attention_bytes: full,
                    sliding_window_bytes: local,
                }
            }),
        })
    }
}

/// llama.cpp's micro-batch (`--ubatch-size`) default: a sliding-window layer's
/// cache keeps this many cells beyond its window, for the batch being written.
pub const LLAMACPP_UBATCH: u64 = 512;

impl ModelShape {
    /// The KV buffer llama.cpp (llama-server) allocates for `--ctx-size ctx_total`
    /// over `slots` sequences (`--parallel`) with micro-batch `ubatch`, each slot a
    /// separate stream (llama-server's default, not `--kv-unified`): full-attention
    /// layers hold `ctx_total` cells in all, sliding-window layers
    /// `min(ctx_total / slots, window + ubatch)` cells per slot. The engine states
    /// the two buffers at start-up (`llama_kv_cache: CPU KV buffer size = ...`, at
    /// `--log-verbosity 4`). Cell padding is left out (these sizes need none).
    pub fn llamacpp_kv_buffer_bytes(
        &self,
        ctx_total: u64,
        slots: u64,
        ubatch: u64,
        kv: Quant,
    ) -> (u64, u64) {
        let per_cell = 2.0 * self.kv_dim() as f64 * kv.bytes_per_elem();
        let slots = slots.max(1);
        let full = u64::from(self.layers - self.sliding_layers()) * ctx_total;
        let local = match self.sliding_window {
            Some(w) => {
                let cells = (ctx_total / slots).min(u64::from(w) + ubatch) * slots;
                u64::from(self.sliding_layers()) * cells
            }
            None => 0,
        };
        let bytes = |cells: u64| (cells as f64 * per_cell).round() as u64;
        (bytes(full), bytes(local))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn input(context: u64, gpu_memory_bytes: u64) -> KvPlanInput {
        KvPlanInput {
            weights: Quant::F16,
            kv_dtype: Quant::F16,
            context,
            gpu_memory_bytes,
            utilization: 0.9,
            llamacpp_slots: None,
        }
    }

    #[test]
    fn llamacpp_buffers_for_gemma_3_270m_by_hand() {
        let m = ModelShape::preset("gemma-3-270m").unwrap();
        // 3 global layers x 8192 cells x 1 KV head x 256 x 2 (K, V) x 2 B = 24 MiB;
        // 15 local layers x 2 slots x (512 + 512) cells x 1 KiB = 30 MiB.
        let (full, local) = m.llamacpp_kv_buffer_bytes(8192, 2, LLAMACPP_UBATCH, Quant::F16);
        assert_eq!(full, 24 << 20);
        assert_eq!(local, 30 << 20);
        // A context per slot under the window: the local layers hold all of it.
        let (_, local) = m.llamacpp_kv_buffer_bytes(1024, 4, LLAMACPP_UBATCH, Quant::F16);
        assert_eq!(local, 15 * 1024 * 1024);
    }

    #[test]
    fn llama_3_1_8b_by_hand() {
        let m = ModelShape::preset("llama-3.1-8b").unwrap();
        let p = m.plan_kv(input(8192, 80 * GIB)).unwrap();
        // 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 128 KiB per token.
        assert_eq!(p.kv_bytes_per_token, 32 * 8 * 128 * 2 * 2);
        assert_eq!(p.kv_bytes_per_token, 128 * 1024);
        assert_eq!(p.kv_bytes_per_sequence, 8192 * 128 * 1024);
        // 8.03 B parameters in f16, plus the norms (2 per layer and the final one,
        // 4096 wide) in f32.
        let params = m.parameter_count();
        assert!((8.0e9..8.1e9).contains(&(params as f64)), "{params}");
        assert_eq!(p.weight_bytes, 2 * params + 4 * (32 * 2 * 4096 + 4096));
        assert_eq!(p.budget_bytes, (80.0 * GIB as f64 * 0.9) as u64);
        // (72 GiB - 14.96 GiB) / 1 GiB per sequence = 57.
        assert_eq!(p.sequences, (p.budget_bytes - p.weight_bytes) / GIB);
        assert_eq!(p.sequences, 57);
    }

    #[test]
    fn sliding_window_layers_hold_their_window() {
        let m = ModelShape::preset("gemma-3-270m").unwrap();
        // 18 layers, 1 KV head of 256; 15 of them local with a 512-token window.
        let per_layer_token = 2 * 256 * 2;
        let p = m.plan_kv(input(4096, 8 * GIB)).unwrap();
        assert_eq!(p.kv_bytes_per_token, 18 * per_layer_token);
        assert_eq!(
            p.kv_bytes_per_sequence,
            (3 * 4096 + 15 * 512) * per_layer_token
        );
        let short = m.plan_kv(input(256, 8 * GIB)).unwrap();
        assert_eq!(short.kv_bytes_per_sequence, 18 * 256 * per_layer_token);
    }

    #[test]
    fn weights_that_do_not_fit_leave_no_sequence() {
        let m = ModelShape::preset("llama-3.1-70b").unwrap();
        let p = m.plan_kv(input(8192, 80 * GIB)).unwrap();
        assert_eq!((p.kv_budget_bytes, p.sequences), (0, 0));
        assert!(m.plan_kv(input(0, GIB)).is_err());
        let mut bad = input(10, GIB);
        bad.utilization = 1.5;
        assert!(m.plan_kv(bad).is_err());
    }
}
