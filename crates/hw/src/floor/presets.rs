//! The built-in model shapes.

use super::{FloorError, ModelShape};

impl ModelShape {
    /// The preset with this id (case-insensitive; `llama-3.1-8b`, `Llama-3.1-8B`, ...).
    pub fn preset(name: &str) -> Result<ModelShape, FloorError> {
        let wanted = name.trim().to_ascii_lowercase();
        presets()
            .into_iter()
            .find(|p| p.name == wanted)
            .ok_or_else(|| FloorError::UnknownModel {
                name: name.to_string(),
                known: preset_names().join(", "),
            })
    }
}

/// The preset ids, in display order.
pub fn preset_names() -> Vec<&'static str> {
    vec![
        "llama-3.1-8b",
        "llama-3.1-70b",
        "qwen2.5-7b",
        "mistral-7b",
        "gemma-3-270m",
    ]
}

/// The built-in model shapes, from each model's published `config.json`.
///
/// | id | source |
/// |---|---|
/// | `llama-3.1-8b` | meta-llama/Llama-3.1-8B |
/// | `llama-3.1-70b` | meta-llama/Llama-3.1-70B |
/// | `qwen2.5-7b` | Qwen/Qwen2.5-7B (q/k/v biases) |
/// | `mistral-7b` | mistralai/Mistral-7B-v0.3 (no sliding window) |
/// | `gemma-3-270m` | google/gemma-3-270m (tied embeddings, 512-token window on 15 of 18 layers) |
pub fn presets() -> Vec<ModelShape> {
    let base = |name: &str| ModelShape {
        name: name.to_string(),
        layers: 0,
        hidden: 0,
        heads: 0,
        kv_heads: 0,
        head_dim: 128,
        intermediate: 0,
        vocab: 0,
        tied_embeddings: false,
        qkv_bias: false,
        qk_norm: false,
        norms_per_layer: 2,
        sliding_window: None,
        full_attention_layers: 0,
        moe: None,
    };
    vec![
        ModelShape {
            layers: 32,
            hidden: 4096,
            heads: 32,
            kv_heads: 8,
            intermediate: 14336,
            vocab: 128_256,
            full_attention_layers: 32,
            ..base("llama-3.1-8b")
        },
        ModelShape {
            layers: 80,
            hidden: 8192,
            heads: 64,
            kv_heads: 8,
            intermediate: 28672,
            vocab: 128_256,
            full_attention_layers: 80,
            ..base("llama-3.1-70b")
        },
        ModelShape {
            layers: 28,
            hidden: 3584,
            heads: 28,
            kv_heads: 4,
            intermediate: 18944,
            vocab: 152_064,
            qkv_bias: true,
            full_attention_layers: 28,
            ..base("qwen2.5-7b")
        },
        ModelShape {
            layers: 32,
            hidden: 4096,
            heads: 32,
            kv_heads: 8,
            intermediate: 14336,
            vocab: 32768,
            full_attention_layers: 32,
            ..base("mistral-7b")
        },
        ModelShape {
            layers: 18,
            hidden: 640,
            heads: 4,
            kv_heads: 1,
            head_dim: 256,
            intermediate: 2048,
            vocab: 262_144,
            tied_embeddings: true,
            qk_norm: true,
            norms_per_layer: 4,
            sliding_window: Some(512),
            full_attention_layers: 3,
            ..base("gemma-3-270m")
        },
    ]
}
