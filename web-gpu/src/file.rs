//! The GPU view's picked files: a model file's header read by growing prefixes of
//! the `File` (`Blob.slice` + `arrayBuffer`, never the whole file), its SHA-256 by
//! `crypto.subtle`, and its GEMVs and head layout for the run (as `tokenscope
//! kernels --gguf` without `--real-weights`: generated data of the file's types
//! and shapes); and a developer's own kernel, its `.wgsl`, its spec and the
//! files the spec names, picked together (as `tokenscope kernels --shader`).

use kernel_harness::kernels::gemv::GemvSpec;
use kernel_harness::suite::{FileGemv, SuiteConfig};
use tokenscope_hw::gguf::{GgufError, GgufHeader, GgufModel, parse_header};
use tokenscope_kernel_report::{GgufReport, KernelReport};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// The first prefix read; grown as the parser asks.
const FIRST_READ_BYTES: u64 = 1 << 20;

/// A picked GGUF file's header.
#[derive(Debug, Clone)]
pub struct PickedFile {
    /// The file's name.
    pub name: String,
    /// Its header.
    pub header: GgufHeader,
    /// The model its metadata describes.
    pub model: GgufModel,
    /// SHA-256 of its first `data_offset` bytes, hex.
    pub header_sha256: String,
}

impl PickedFile {
    /// The file's section of the report for `cfg`'s contexts and KV type (before
    /// the run's figures).
    pub fn section(&self, cfg: &SuiteConfig) -> GgufReport {
        let contexts: Vec<u64> = cfg.contexts.iter().map(|&c| u64::from(c)).collect();
        GgufReport::new(
            &self.name,
            &self.header,
            self.model.clone(),
            self.header_sha256.clone(),
            &contexts,
            cfg.kv_dtype,
        )
    }

    /// Sets `cfg` to run this file's GEMVs (generated data) and its head layout.
    pub fn configure(&self, cfg: &mut SuiteConfig, only: &[kernel_harness::suite::KernelGroup]) {
        let gemvs = self
            .header
            .gemv_groups(self.model.tied_embeddings)
            .into_iter()
            .map(|g| FileGemv {
                spec: GemvSpec {
                    dtype: g.dtype,
                    rows: g.rows as u32,
                    cols: g.cols as u32,
                    batch: 1,
                },
                tensors: g.tensors,
                weights: None,
            })
            .collect();
        cfg.for_file(gemvs, &self.model, only);
    }

    /// The file's section measured by `report` (its `gguf`).
    pub fn measured(&self, cfg: &SuiteConfig, report: &KernelReport) -> GgufReport {
        let mut section = self.section(cfg);
        section.measure(report);
        section
    }
}

fn js_text(e: &JsValue) -> String {
    e.as_string()
        .or_else(|| {
            e.dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
        })
        .unwrap_or_else(|| format!("{e:?}"))
}

/// The first `n` bytes of `file`.
async fn prefix(file: &web_sys::File, n: u64) -> Result<Vec<u8>, String> {
    let blob = file
        .slice_with_f64_and_f64(0.0, n as f64)
        .map_err(|e| js_text(&e))?;
    let buf = JsFuture::from(blob.array_buffer())
        .await
        .map_err(|e| js_text(&e))?;
    Ok(js_sys::Uint8Array::new(&buf).to_vec())
}

/// SHA-256 of `bytes`, hex, by `crypto.subtle` ("" where the page has none: not
/// a secure context).
async fn sha256_hex(bytes: &[u8]) -> String {
    let Some(subtle) = web_sys::window()
        .and_then(|w| w.crypto().ok())
        .map(|c| c.subtle())
    else {
        return String::new();
    };
    let Ok(promise) = subtle.digest_with_str_and_u8_array("SHA-256", bytes) else {
        return String::new();
    };
    match JsFuture::from(promise).await {
        Ok(buf) => js_sys::Uint8Array::new(&buf)
            .to_vec()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        Err(_) => String::new(),
    }
}

/// Reads `file`'s header: a 1 MiB prefix, grown as the parser asks. The error
/// names the file (and, from the parser, the offset).
pub async fn read_header(file: &web_sys::File) -> Result<PickedFile, String> {
    let name = file.name();
    let what = |e: &dyn std::fmt::Display| format!("GGUF file {name}: {e}");
    let len = file.size() as u64;
    let mut want = FIRST_READ_BYTES.min(len);
    loop {
        let bytes = prefix(file, want)
            .await
            .map_err(|e| what(&format!("cannot read its first {want} bytes: {e}")))?;
        match parse_header(&bytes, len) {
            Err(GgufError::NeedMore { needed_bytes, .. }) if want < len => {
                want = needed_bytes.max(want.saturating_mul(2)).min(len);
            }
            Err(e) => return Err(what(&e)),
            Ok(header) => {
                let model = header.model().map_err(|e| what(&e))?;
                let n = (header.data_offset as usize).min(bytes.len());
                let header_sha256 = sha256_hex(&bytes[..n]).await;
                return Ok(PickedFile {
                    name,
                    header,
                    model,
                    header_sha256,
                });
            }
        }
    }
}

/// A developer's own kernel from files picked together: each read whole (a
/// kernel's files are small), then put together by name
/// ([`tokenscope_kernel_spec::UserKernel::from_picked`]).
pub async fn read_kernel(
    files: &web_sys::FileList,
) -> Result<tokenscope_kernel_spec::UserKernel, String> {
    let mut picked = std::collections::BTreeMap::new();
    for i in 0..files.length() {
        let Some(file) = files.get(i) else { continue };
        let name = file.name();
        let bytes = prefix(&file, file.size() as u64)
            .await
            .map_err(|e| format!("{name}: cannot read it: {e}"))?;
        picked.insert(name, bytes);
    }
    tokenscope_kernel_spec::UserKernel::from_picked(&picked)
}
