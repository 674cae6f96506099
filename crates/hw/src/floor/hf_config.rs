//! Model shapes read from a Hugging Face `config.json`.

use serde_json::Value;

use super::{FloorError, ModelShape, MoeShape};

impl ModelShape {
    /// Reads a Hugging Face `config.json` (its text). Multimodal configs are read from
    /// their `text_config`. `name` labels the model in reports (e.g. the file's folder).
    ///
    /// Defaults follow transformers: `num_key_value_heads = num_attention_heads`,
    /// `head_dim = hidden_size / num_attention_heads`, embeddings tied only for Gemma
    /// unless `tie_word_embeddings` says otherwise; Qwen2 has q/k/v biases; Gemma 2/3 have
    /// four norms per layer; Gemma 3 and Qwen3 have q/k norms; sliding-window layers come
    /// from `layer_types`, else `sliding_window_pattern`, else all layers when
    /// `sliding_window` is set (and `use_sliding_window` is not false).
    pub fn from_hf_config(name: &str, json: &str) -> Result<ModelShape, FloorError> {
        let root: Value =
            serde_json::from_str(json).map_err(|e| FloorError::Json(e.to_string()))?;
        let cfg = match root.get("text_config") {
            Some(text) if text.is_object() && root.get("hidden_size").is_none() => text,
            _ => &root,
        };
        let model_type = cfg
            .get("model_type")
            .or_else(|| root.get("model_type"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_lowercase();
        let is_gemma = model_type.starts_with("gemma");

        let layers = req_u32(cfg, "num_hidden_layers")?;
        let hidden = req_u32(cfg, "hidden_size")?;
        let heads = req_u32(cfg, "num_attention_heads")?;
        let kv_heads = opt_u32(cfg, "num_key_value_heads")?.unwrap_or(heads);
        let head_dim = head_dim(cfg, hidden, heads)?;
        let vocab = req_u32(cfg, "vocab_size")?;

        let (intermediate, moe) = feed_forward(cfg)?;

        let tied_embeddings = match cfg
            .get("tie_word_embeddings")
            .or_else(|| root.get("tie_word_embeddings"))
        {
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(FloorError::InvalidField {
                    field: "tie_word_embeddings",
                    value: other.to_string(),
                    reason: "must be true or false",
                });
            }
            None => is_gemma,
        };
        let qkv_bias = match cfg.get("attention_bias") {
            Some(Value::Bool(b)) => *b,
            _ => model_type == "qwen2" || model_type == "qwen2_moe",
        };
        let qk_norm = model_type.starts_with("gemma3") || model_type.starts_with("qwen3");
        let norms_per_layer =
            if model_type.starts_with("gemma2") || model_type.starts_with("gemma3") {
                4
            } else {
                2
            };

        let (sliding_window, full_attention_layers) = attention_window(cfg, &model_type, layers)?;

        let shape = ModelShape {
            name: name.to_string(),
            layers,
            hidden,
            heads,
            kv_heads,
            head_dim,
            intermediate,
            vocab,
            tied_embeddings,
            qkv_bias,
            qk_norm,
            norms_per_layer,
            sliding_window,
            full_attention_layers,
            moe,
        };
        shape.validate()?;
        Ok(shape)
    }
}

/// `head_dim`, or `hidden_size / num_attention_heads` when the config has none.
fn head_dim(cfg: &Value, hidden: u32, heads: u32) -> Result<u32, FloorError> {
    Ok(match opt_u32(cfg, "head_dim")? {
        Some(h) => h,
        None => {
            if heads == 0 || !hidden.is_multiple_of(heads) {
                return Err(FloorError::InvalidField {
                    field: "hidden_size",
                    value: hidden.to_string(),
                    reason: "not divisible by num_attention_heads and no head_dim given",
                });
            }
            hidden / heads
        }
    })
}

/// The feed-forward width per expert and, for mixture-of-experts models, the
/// experts: total, active per token, and the shared expert's width.
fn feed_forward(cfg: &Value) -> Result<(u32, Option<MoeShape>), FloorError> {
    let experts = match opt_u32(cfg, "num_local_experts")? {
        Some(e) => Some(e),
        None => opt_u32(cfg, "num_experts")?,
    };
    Ok(match experts {
        Some(experts) if experts > 1 => {
            let active = opt_u32(cfg, "num_experts_per_tok")?
                .ok_or(FloorError::MissingField("num_experts_per_tok"))?;
            let per_expert = match opt_u32(cfg, "moe_intermediate_size")? {
                Some(w) => w,
                None => req_u32(cfg, "intermediate_size")?,
            };
            let shared = opt_u32(cfg, "shared_expert_intermediate_size")?.unwrap_or(0);
            (
                per_expert,
                Some(MoeShape {
                    experts,
                    active,
                    shared_intermediate: shared,
                }),
            )
        }
        _ => (req_u32(cfg, "intermediate_size")?, None),
    })
}

/// The sliding window, if any, and how many layers attend to the whole context
/// (from `layer_types`, a sliding-window pattern, or the model family's default).
fn attention_window(
    cfg: &Value,
    model_type: &str,
    layers: u32,
) -> Result<(Option<u32>, u32), FloorError> {
    let use_sliding = !matches!(cfg.get("use_sliding_window"), Some(Value::Bool(false)));
    let window = if use_sliding {
        opt_u32(cfg, "sliding_window")?
    } else {
        None
    };
    Ok(match window {
        None => (None, layers),
        Some(w) => {
            let full = if let Some(types) = cfg.get("layer_types").and_then(Value::as_array) {
                types
                    .iter()
                    .filter(|t| t.as_str() == Some("full_attention"))
                    .count() as u32
            } else if let Some(p) = match opt_u32(cfg, "sliding_window_pattern")? {
                Some(p) => Some(p),
                None => opt_u32(cfg, "_sliding_window_pattern")?,
            } {
                layers.checked_div(p).unwrap_or(0)
            } else if model_type.starts_with("gemma3") {
                layers / 6
            } else if model_type.starts_with("gemma2") {
                layers / 2
            } else {
                0
            };
            (Some(w), full)
        }
    })
}

fn field_u32(cfg: &Value, field: &'static str) -> Result<Option<u32>, FloorError> {
    match cfg.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| FloorError::InvalidField {
                field,
                value: v.to_string(),
                reason: "must be a non-negative integer below 2^32",
            }),
    }
}

fn opt_u32(cfg: &Value, field: &'static str) -> Result<Option<u32>, FloorError> {
    field_u32(cfg, field)
}

fn req_u32(cfg: &Value, field: &'static str) -> Result<u32, FloorError> {
    field_u32(cfg, field)?.ok_or(FloorError::MissingField(field))
}
