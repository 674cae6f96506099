//! The kernels report's model file (`tokenscope kernels --gguf`, the page's picked
//! file): what the file is, the types it holds, and its decode floor on this GPU,
//! each type's weights at the bandwidth its own GEMV kernel reached.

use serde::{Deserialize, Serialize};

use super::{FloorRow, KernelReport};
use tokenscope_hw::floor::{FloorEstimate, Quant, ms_at};
use tokenscope_hw::gguf::{
    FileFloor, GgmlType, GgufHeader, GgufModel, UnsupportedType, file_floor,
};

/// A GGUF file in a kernels report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GgufReport {
    /// The file's name (no directory).
    pub file: String,
    /// The file's size.
    pub size_bytes: u64,
    /// Bytes before the tensor data (the header, what was read).
    pub header_bytes: u64,
    /// SHA-256 of the header bytes, hex: which file this was, without hashing GBs.
    pub header_sha256: String,
    /// The model as the file's metadata describes it.
    pub model: GgufModel,
    /// The file's tensor types: count, bytes read per token, and whether
    /// tokenscope has a kernel for the type.
    pub types: Vec<TypeRow>,
    /// Types without a kernel, with their tensors (their bytes still count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsupported: Vec<UnsupportedType>,
    /// The GEMVs ran on the file's own weights (`--real-weights`), not on
    /// generated data of the same types and shapes.
    pub real_weights: bool,
    /// The decode floor at each context.
    pub floors: Vec<GgufFloorRow>,
}

/// One tensor type of the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypeRow {
    /// The ggml type (`q4_K`).
    #[serde(rename = "type")]
    pub ggml_type: GgmlType,
    /// Tensors of the type.
    pub tensors: u64,
    /// Their bytes read per decode step.
    pub bytes: u64,
    /// tokenscope has a GEMV kernel for it.
    pub kernel: bool,
    /// The bandwidth its GEMVs reached in this run, GB/s (`None` before the run,
    /// or for a type without a kernel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemv_gbps: Option<f64>,
}

/// The file's decode floor at one context on this GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GgufFloorRow {
    /// The bytes (weights by type, KV cache) and what they leave out.
    #[serde(flatten)]
    pub bytes: FileFloor,
    /// Every byte at the measured read bandwidth: the hardware's floor, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_floor_ms: Option<f64>,
    /// `1000 / read_floor_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_tokens_per_s_ceiling: Option<f64>,
    /// Each type's weights at its own GEMV's bandwidth (the read bandwidth for a
    /// type without a kernel or not measured), the KV cache at the attention
    /// kernel's: the floor with these kernels, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_floor_ms: Option<f64>,
    /// `1000 / tpot_floor_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_s_ceiling: Option<f64>,
    /// The weights' bandwidth over all types together (their bytes over their
    /// time at each type's GEMV bandwidth), GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemv_gbps: Option<f64>,
    /// The KV cache's bandwidth (the attention kernel's), GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_gbps: Option<f64>,
    /// Which measurement gave the KV cache's bandwidth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_source: Option<String>,
}

impl GgufReport {
    /// The file's section before any kernel ran: its types and byte counts at each
    /// of `contexts` (KV cache in `kv_dtype`). `header_sha256` is computed by the
    /// caller, which has the bytes.
    pub fn new(
        file: &str,
        header: &GgufHeader,
        model: GgufModel,
        header_sha256: String,
        contexts: &[u64],
        kv_dtype: Quant,
    ) -> Self {
        let floors: Vec<GgufFloorRow> = contexts
            .iter()
            .map(|&c| GgufFloorRow {
                bytes: file_floor(header, &model, c, kv_dtype),
                read_floor_ms: None,
                read_tokens_per_s_ceiling: None,
                tpot_floor_ms: None,
                tokens_per_s_ceiling: None,
                gemv_gbps: None,
                attention_gbps: None,
                attention_source: None,
            })
            .collect();
        let (types, unsupported) = match floors.first() {
            Some(f) => (
                f.bytes
                    .by_type
                    .iter()
                    .map(|t| TypeRow {
                        ggml_type: t.ggml_type,
                        tensors: t.tensors,
                        bytes: t.bytes,
                        kernel: t.ggml_type.to_quant().is_some(),
                        gemv_gbps: None,
                    })
                    .collect(),
                f.bytes.unsupported.clone(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        Self {
            file: file.to_string(),
            size_bytes: header.file_len_bytes,
            header_bytes: header.data_offset,
            header_sha256,
            model,
            types,
            unsupported,
            real_weights: false,
            floors,
        }
    }

    /// Fills the measured figures from a report's bandwidths: each type's GEMV
    /// bandwidth (all its verified GEMVs together), the read bandwidth, the
    /// attention bandwidth at each context.
    pub fn measure(&mut self, report: &KernelReport) {
        let Some(read) = report.read_gbps() else {
            return;
        };
        for t in &mut self.types {
            t.gemv_gbps = t
                .ggml_type
                .to_quant()
                .filter(|q| measured_gemv(report, *q))
                .map(|q| report.gemv_bandwidth(q).0);
        }
        for row in &mut self.floors {
            let b = &row.bytes;
            row.read_floor_ms = ms_at(b.bytes_per_token, read);
            row.read_tokens_per_s_ceiling = row.read_floor_ms.map(|ms| 1e3 / ms);
            let weights_ms: f64 = b
                .by_type
                .iter()
                .map(|t| {
                    let gbps = self
                        .types
                        .iter()
                        .find(|r| r.ggml_type == t.ggml_type)
                        .and_then(|r| r.gemv_gbps)
                        .unwrap_or(read);
                    ms_at(t.bytes, gbps).unwrap_or(0.0)
                })
                .sum();
            let (attn, source) = report.attention_bandwidth(b.kv_dtype, b.context_tokens);
            let attn = if attn > 0.0 { attn } else { read };
            let ms = weights_ms + ms_at(b.kv_bytes_per_token, attn).unwrap_or(0.0);
            row.tpot_floor_ms = Some(ms);
            row.tokens_per_s_ceiling = Some(1e3 / ms);
            row.gemv_gbps =
                (weights_ms > 0.0).then(|| b.weight_bytes_per_token as f64 / (weights_ms * 1e6));
            row.attention_gbps = Some(attn);
            row.attention_source = Some(source);
        }
    }

    /// The measured floor at exactly `context` tokens as the combined report's
    /// floor row: the weights at their types' GEMV bandwidths together, the weight
    /// format the one holding most bytes (`None` before [`Self::measure`]).
    pub fn floor_row(&self, context: u64) -> Option<FloorRow> {
        let f = self
            .floors
            .iter()
            .find(|f| f.bytes.context_tokens == context)?;
        let b = &f.bytes;
        let quant = self.main_quant();
        let types: Vec<String> = self
            .types
            .iter()
            .filter_map(|t| Some(format!("{} {:.1} GB/s", t.ggml_type, t.gemv_gbps?)))
            .collect();
        Some(FloorRow {
            estimate: FloorEstimate {
                model: format!(
                    "{} ({})",
                    self.file,
                    self.model
                        .name
                        .as_deref()
                        .unwrap_or(&self.model.architecture)
                ),
                quant,
                kv_dtype: b.kv_dtype,
                context,
                weight_bytes: b.weight_bytes_per_token,
                kv_bytes: b.kv_bytes_per_token,
                bytes_per_token: b.bytes_per_token,
                gemv_gbps: f.gemv_gbps?,
                attention_gbps: f.attention_gbps?,
                tpot_floor_ms: f.tpot_floor_ms?,
                tokens_per_s_ceiling: f.tokens_per_s_ceiling?,
            },
            gemv_source: format!("the file's GEMVs by type: {}", types.join(", ")),
            attention_source: f.attention_source.clone().unwrap_or_default(),
            read_gbps: f
                .read_floor_ms
                .filter(|ms| *ms > 0.0)
                .map(|ms| b.bytes_per_token as f64 / (ms * 1e6)),
            read_floor_ms: f.read_floor_ms,
            read_tokens_per_s_ceiling: f.read_tokens_per_s_ceiling,
            decode_step_ms: None,
            step_efficiency: None,
        })
    }

    /// The weight format holding most of the bytes read per token (f16 when no
    /// type has a kernel): the file's "quant" where one name is wanted.
    pub fn main_quant(&self) -> Quant {
        self.types
            .iter()
            .filter_map(|t| Some((t.ggml_type.to_quant()?, t.bytes)))
            .max_by_key(|(_, bytes)| *bytes)
            .map_or(Quant::F16, |(q, _)| q)
    }

    /// The floor row at `context` tokens, or the nearest larger one, or the largest.
    pub fn floor_at(&self, context: u64) -> Option<&GgufFloorRow> {
        self.floors
            .iter()
            .filter(|f| f.bytes.context_tokens >= context)
            .min_by_key(|f| f.bytes.context_tokens)
            .or_else(|| self.floors.iter().max_by_key(|f| f.bytes.context_tokens))
    }
}

/// Whether the report holds a verified, non-cache-resident GEMV of the format.
fn measured_gemv(report: &KernelReport, q: Quant) -> bool {
    report.kernels.iter().any(|k| {
        k.name == "gemv"
            && k.dtype == q.as_str()
            && k.verified
            && !k.cache_resident
            && k.beside.is_none()
    })
}
