//! The model a GGUF file describes, read from its `{arch}.*` metadata and its
//! tensor infos, and its conversion to a [`ModelShape`].
//!
//! Which layers use the sliding window: llama.cpp marks layer `i` as sliding when
//! `n == 0 || i % n < n - 1` for a period `n` (its `set_swa_pattern(n)`), so layer
//! `i` is global when `(i + 1) % n == 0`. The period comes from
//! `{arch}.attention.sliding_window_pattern` when the file has it (a u32 period, or
//! an array of one bool per layer, `true` = sliding); otherwise from the
//! architecture as llama.cpp hard-codes it: `gemma3` and `gemma-embedding` 6,
//! `gemma2` 2. Other architectures with a window in the file but no pattern key
//! (llama.cpp hard-codes periods for a few more, e.g. Cohere 2, gpt-oss, and
//! Llama 4's chunked attention, which it does not store as a sliding window) are
//! treated as all-global here: the KV figure is then an upper bound, and
//! [`GgufModel::sliding_source`] says so.

use serde::{Deserialize, Serialize};

use super::{GgufError, GgufHeader, Value};
use crate::floor::{ModelShape, MoeShape};

/// The most layers a model may have (per-layer lists are sized from the count, so a
/// corrupt count must not allocate gigabytes).
pub const MAX_LAYERS: u32 = 1 << 16;

/// Where [`GgufModel::sliding_layers`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlidingSource {
    /// The file has no `{arch}.attention.sliding_window`: every layer is global.
    NoWindow,
    /// `{arch}.attention.sliding_window_pattern` as a period.
    PatternKey,
    /// `{arch}.attention.sliding_window_pattern` as one bool per layer.
    LayerArray,
    /// The architecture's period as llama.cpp hard-codes it (gemma2, gemma3).
    Architecture,
    /// A window, but no pattern key and an architecture this reader has no period
    /// for: every layer is counted as global (an upper bound on the KV bytes).
    UnknownAllGlobal,
}

/// The model of a GGUF file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GgufModel {
    /// `general.architecture` (`llama`, `gemma3`, ...).
    pub architecture: String,
    /// `general.name`, if set.
    pub name: Option<String>,
    /// `{arch}.block_count`.
    pub layers: u32,
    /// `{arch}.embedding_length`.
    pub hidden: u32,
    /// `{arch}.feed_forward_length`, per layer (a scalar repeated).
    pub ffn_per_layer: Vec<u32>,
    /// `{arch}.attention.head_count`, per layer.
    pub heads_per_layer: Vec<u32>,
    /// `{arch}.attention.head_count_kv` (default: the head count), per layer.
    pub kv_heads_per_layer: Vec<u32>,
    /// `{arch}.attention.key_length`, else `hidden / heads`.
    pub key_length: u32,
    /// `{arch}.attention.value_length`, else the key length.
    pub value_length: u32,
    /// Length of `tokenizer.ggml.tokens`, else `token_embd.weight`'s second dimension.
    pub vocab: u64,
    /// `{arch}.context_length` (the trained context), if set.
    pub context_length: Option<u64>,
    /// `{arch}.attention.sliding_window`, if set.
    pub sliding_window: Option<u32>,
    /// Whether each layer uses the sliding window (see the module docs).
    pub sliding_layers: Vec<bool>,
    /// Where `sliding_layers` came from.
    pub sliding_source: SlidingSource,
    /// No `output.weight` tensor: the output projection reuses `token_embd.weight`.
    pub tied_embeddings: bool,
    /// `{arch}.expert_count`, for mixture-of-experts models.
    pub expert_count: Option<u32>,
    /// `{arch}.expert_used_count`.
    pub expert_used_count: Option<u32>,
}

impl GgufHeader {
    /// The model this file describes.
    pub fn model(&self) -> Result<GgufModel, GgufError> {
        let architecture = self.string("general.architecture")?.to_string();
        let arch = architecture.as_str();
        let k = |suffix: &str| format!("{arch}.{suffix}");
        let layers = self.u32(&k("block_count"))?;
        if layers > MAX_LAYERS {
            return Err(self.invalid(
                &k("block_count"),
                &format!("is {layers}, expected at most {MAX_LAYERS} layers"),
            ));
        }
        let hidden = self.u32(&k("embedding_length"))?;
        let n = layers as usize;
        let ffn_per_layer = self
            .per_layer(&k("feed_forward_length"), n)?
            .unwrap_or_else(|| vec![0; n]);
        let heads_per_layer = self
            .per_layer(&k("attention.head_count"), n)?
            .ok_or_else(|| GgufError::MissingKey(k("attention.head_count")))?;
        let kv_heads_per_layer = self
            .per_layer(&k("attention.head_count_kv"), n)?
            .unwrap_or_else(|| heads_per_layer.clone());
        let key_length = match self.opt_u32(&k("attention.key_length"))? {
            Some(v) => v,
            None => {
                let heads = heads_per_layer.iter().copied().max().unwrap_or(0);
                if heads == 0 {
                    return Err(self.invalid(
                        &k("attention.head_count"),
                        "is 0, expected a positive head count",
                    ));
                }
                hidden / heads
            }
        };
        let value_length = self
            .opt_u32(&k("attention.value_length"))?
            .unwrap_or(key_length);
        let vocab = match self.get("tokenizer.ggml.tokens") {
            Some(Value::Array(a)) => a.len,
            Some(_) => {
                return Err(self.invalid(
                    "tokenizer.ggml.tokens",
                    "is not an array, expected an array of strings",
                ));
            }
            None => self
                .tensor("token_embd.weight")
                .and_then(|t| t.dims.get(1).copied())
                .ok_or_else(|| GgufError::MissingKey("tokenizer.ggml.tokens".into()))?,
        };
        let context_length = self.opt_u64(&k("context_length"))?;
        let sliding_window = self
            .opt_u32(&k("attention.sliding_window"))?
            .filter(|&w| w > 0);
        let (sliding_layers, sliding_source) = self.sliding(arch, n, sliding_window.is_some())?;
        let name = match self.get("general.name") {
            Some(v) => v.as_str().map(str::to_string),
            None => None,
        };
        Ok(GgufModel {
            name,
            layers,
            hidden,
            ffn_per_layer,
            heads_per_layer,
            kv_heads_per_layer,
            key_length,
            value_length,
            vocab,
            context_length,
            sliding_window,
            sliding_layers,
            sliding_source,
            tied_embeddings: self.tensor("output.weight").is_none(),
            expert_count: self.opt_u32(&k("expert_count"))?.filter(|&e| e > 0),
            expert_used_count: self.opt_u32(&k("expert_used_count"))?,
            architecture,
        })
    }

    fn sliding(
        &self,
        arch: &str,
        n: usize,
        has_window: bool,
    ) -> Result<(Vec<bool>, SlidingSource), GgufError> {
        if !has_window {
            return Ok((vec![false; n], SlidingSource::NoWindow));
        }
        let key = format!("{arch}.attention.sliding_window_pattern");
        let by_period = |p: u64| {
            (0..n as u64)
                .map(|i| p == 0 || i % p < p - 1)
                .collect::<Vec<_>>()
        };
        match self.get(&key) {
            Some(Value::Array(a)) => {
                let flags = a
                    .values
                    .as_ref()
                    .filter(|v| v.len() == n)
                    .and_then(|v| v.iter().map(Value::as_bool).collect::<Option<Vec<_>>>())
                    .ok_or_else(|| {
                        self.invalid(
                            &key,
                            &format!(
                                "is an array of {} {:?}, expected {n} bools (one per layer)",
                                a.len, a.elem_type
                            ),
                        )
                    })?;
                Ok((flags, SlidingSource::LayerArray))
            }
            Some(v) => {
                let p = v
                    .as_u64()
                    .ok_or_else(|| self.invalid(&key, "is not an integer or a bool array"))?;
                Ok((by_period(p), SlidingSource::PatternKey))
            }
            None => match arch {
                "gemma3" | "gemma-embedding" => Ok((by_period(6), SlidingSource::Architecture)),
                "gemma2" => Ok((by_period(2), SlidingSource::Architecture)),
                _ => Ok((vec![false; n], SlidingSource::UnknownAllGlobal)),
            },
        }
    }

    fn invalid(&self, key: &str, reason: &str) -> GgufError {
        GgufError::InvalidKey {
            key: key.to_string(),
            offset: self.entry(key).map_or(0, |e| e.offset_bytes),
            reason: reason.to_string(),
        }
    }

    fn string(&self, key: &str) -> Result<&str, GgufError> {
        self.get(key)
            .ok_or_else(|| GgufError::MissingKey(key.to_string()))?
            .as_str()
            .ok_or_else(|| self.invalid(key, "is not a string"))
    }

    fn opt_u64(&self, key: &str) -> Result<Option<u64>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                self.invalid(key, &format!("is {v:?}, expected a non-negative integer"))
            }),
        }
    }

    fn opt_u32(&self, key: &str) -> Result<Option<u32>, GgufError> {
        match self.opt_u64(key)? {
            None => Ok(None),
            Some(v) => u32::try_from(v)
                .map(Some)
                .map_err(|_| self.invalid(key, &format!("is {v}, expected a value below 2^32"))),
        }
    }

    fn u32(&self, key: &str) -> Result<u32, GgufError> {
        self.opt_u32(key)?
            .ok_or_else(|| GgufError::MissingKey(key.to_string()))
    }

    /// A scalar repeated per layer, or an array of one value per layer.
    fn per_layer(&self, key: &str, n: usize) -> Result<Option<Vec<u32>>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => {
                let values = a
                    .values
                    .as_ref()
                    .filter(|v| v.len() == n)
                    .and_then(|v| {
                        v.iter()
                            .map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
                            .collect::<Option<Vec<_>>>()
                    })
                    .ok_or_else(|| {
                        self.invalid(
                            key,
                            &format!(
                                "is an array of {} {:?}, expected {n} integers (one per layer)",
                                a.len, a.elem_type
                            ),
                        )
                    })?;
                Ok(Some(values))
            }
            Some(_) => Ok(self.opt_u32(key)?.map(|v| vec![v; n])),
        }
    }
}

impl GgufModel {
    /// Layers using the sliding window.
    pub fn sliding_layer_count(&self) -> u32 {
        self.sliding_layers.iter().filter(|&&s| s).count() as u32
    }

    /// KV-cache elements (K and V) one position of the context takes in layer `i`.
    pub fn kv_elems_per_position(&self, layer: usize) -> u64 {
        let kv_heads = self.kv_heads_per_layer.get(layer).copied().unwrap_or(0);
        u64::from(kv_heads) * (u64::from(self.key_length) + u64::from(self.value_length))
    }

    /// Positions layer `i` reads at `context_tokens`: `min(context, window)` on a
    /// sliding layer, the whole context otherwise.
    pub fn positions_read(&self, layer: usize, context_tokens: u64) -> u64 {
        match (self.sliding_layers.get(layer), self.sliding_window) {
            (Some(true), Some(w)) => context_tokens.min(u64::from(w)),
            _ => context_tokens,
        }
    }

    /// The model as a [`ModelShape`] for the shape-based floor and the KV planner,
    /// which need one head count, KV head count, FFN width and head dimension for
    /// every layer. `header` supplies what the metadata does not say (norms, q/k
    /// norms, q/k/v biases, the mixture-of-experts widths).
    pub fn to_model_shape(&self, header: &GgufHeader) -> Result<ModelShape, GgufError> {
        let uniform = |what: &str, v: &[u32]| -> Result<u32, GgufError> {
            match v.split_first() {
                Some((&first, rest)) if rest.iter().all(|&x| x == first) => Ok(first),
                Some(_) => Err(GgufError::NotAModelShape(format!(
                    "{what} varies per layer: {v:?}"
                ))),
                None => Err(GgufError::NotAModelShape("the file has 0 layers".into())),
            }
        };
        let heads = uniform("the head count", &self.heads_per_layer)?;
        let kv_heads = uniform("the KV head count", &self.kv_heads_per_layer)?;
        if self.key_length != self.value_length {
            return Err(GgufError::NotAModelShape(format!(
                "key length {} differs from value length {}",
                self.key_length, self.value_length
            )));
        }
        let arch = &self.architecture;
        let opt = |key: &str| {
            header
                .get(&format!("{arch}.{key}"))
                .and_then(Value::as_u64)
                .map(|v| u32::try_from(v).unwrap_or(u32::MAX))
        };
        let moe = self.expert_count.map(|experts| MoeShape {
            experts,
            active: self.expert_used_count.unwrap_or(0),
            shared_intermediate: opt("expert_shared_feed_forward_length")
                .unwrap_or(0)
                .saturating_mul(opt("expert_shared_count").unwrap_or(0)),
        });
        let intermediate = match (&moe, opt("expert_feed_forward_length")) {
            (Some(_), Some(ff)) => ff,
            _ => uniform("the FFN width", &self.ffn_per_layer)?,
        };
        let has = |name: &str| header.tensor(name).is_some();
        let norms_per_layer = header
            .tensors
            .iter()
            .filter(|t| {
                t.name.starts_with("blk.0.")
                    && t.name.ends_with("norm.weight")
                    && !matches!(
                        t.name.as_str(),
                        "blk.0.attn_q_norm.weight" | "blk.0.attn_k_norm.weight"
                    )
            })
            .count() as u32;
        let full = self.layers - self.sliding_layer_count();
        let vocab = u32::try_from(self.vocab).map_err(|_| {
            GgufError::NotAModelShape(format!("vocabulary of {} does not fit u32", self.vocab))
        })?;
        let shape = ModelShape {
            name: self
                .name
                .clone()
                .unwrap_or_else(|| self.architecture.clone()),
            layers: self.layers,
            hidden: self.hidden,
            heads,
            kv_heads,
            head_dim: self.key_length,
            intermediate,
            vocab,
            tied_embeddings: self.tied_embeddings,
            qkv_bias: has("blk.0.attn_q.bias"),
            qk_norm: has("blk.0.attn_q_norm.weight"),
            norms_per_layer,
            sliding_window: self
                .sliding_window
                .filter(|_| self.sliding_layer_count() > 0),
            full_attention_layers: if self.sliding_layer_count() > 0 {
                full
            } else {
                0
            },
            moe,
        };
        shape
            .validate()
            .map_err(|e| GgufError::NotAModelShape(e.to_string()))?;
        Ok(shape)
    }
}
