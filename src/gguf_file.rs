//! A GGUF file on disk: its header read by growing prefixes (never the whole
//! file), its SHA-256, and one tensor's bytes at a time as the harness's host
//! matrix (`kernels --gguf --real-weights`).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use half::f16;
use kernel_harness::kernels::gemv::{GemvSpec, HostMatrix};
use kernel_harness::quant;
use kernel_harness::suite::{FileGemv, TensorLoader};
use sha2::{Digest, Sha256};
use tokenscope_hw::floor::Quant;
use tokenscope_hw::gguf::{GgufError, GgufHeader, TensorInfo, parse_header};

/// A GGUF file's header and where it came from.
pub struct GgufFile {
    /// The path given.
    pub path: PathBuf,
    /// The parsed header.
    pub header: GgufHeader,
    /// SHA-256 of the header bytes, hex.
    pub header_sha256: String,
}

impl GgufFile {
    /// Reads the header of `path`: a 1 MiB prefix, grown as the parser asks.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let what = || format!("--gguf {}", path.display());
        let mut f = File::open(path).with_context(|| format!("{}: cannot open", what()))?;
        let len = f
            .metadata()
            .with_context(|| format!("{}: cannot read its size", what()))?
            .len();
        let mut want: u64 = (1 << 20).min(len);
        loop {
            let mut prefix = vec![0u8; want as usize];
            f.seek(SeekFrom::Start(0))?;
            f.read_exact(&mut prefix)
                .with_context(|| format!("{}: cannot read", what()))?;
            match parse_header(&prefix, len) {
                Err(GgufError::NeedMore { needed_bytes, .. }) if want < len => {
                    want = needed_bytes.max(want.saturating_mul(2)).min(len);
                }
                Err(e) => bail!("{}: {e}", what()),
                Ok(header) => {
                    let n = (header.data_offset as usize).min(prefix.len());
                    let header_sha256 = hex(&Sha256::digest(&prefix[..n]));
                    return Ok(Self {
                        path: path.to_path_buf(),
                        header,
                        header_sha256,
                    });
                }
            }
        }
    }

    /// The file name without its directory.
    pub fn name(&self) -> String {
        self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }

    /// The GEMVs a decode step runs on this file's matrices: every 2-D weight of a
    /// type with a kernel, grouped by type and shape (`token_embd` only when the
    /// output projection reuses it; else only one row of it is read). With
    /// `real_weights`, each group runs on up to `per_group` of its tensors' own
    /// weights, read one at a time when the harness comes to it.
    pub fn gemvs(&self, tied: bool, real_weights: bool, per_group: usize) -> Vec<FileGemv> {
        let mut out = Vec::new();
        for g in self.header.gemv_groups(tied) {
            let spec = GemvSpec {
                dtype: g.dtype,
                rows: g.rows as u32,
                cols: g.cols as u32,
                batch: 1,
            };
            if real_weights {
                for t in g
                    .tensors
                    .iter()
                    .filter_map(|n| self.header.tensor(n))
                    .take(per_group.max(1))
                {
                    out.push(FileGemv {
                        spec,
                        tensors: vec![t.name.clone()],
                        weights: Some(self.loader(t, spec)),
                    });
                }
            } else {
                out.push(FileGemv {
                    spec,
                    tensors: g.tensors,
                    weights: None,
                });
            }
        }
        out
    }
    fn loader(&self, t: &TensorInfo, spec: GemvSpec) -> TensorLoader {
        let path = self.path.clone();
        let at = self.header.data_offset + t.offset_bytes;
        let len = t.size_bytes;
        let name = t.name.clone();
        TensorLoader::new(
            name.clone(),
            Arc::new(move || {
                read_tensor(&path, at, len, spec).map_err(|e| format!("tensor {name}: {e:#}"))
            }),
        )
    }
}

/// One tensor's bytes (`len` at `at`) as the harness's host matrix.
pub fn read_tensor(path: &Path, at: u64, len: u64, spec: GemvSpec) -> anyhow::Result<HostMatrix> {
    let mut f = File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    f.seek(SeekFrom::Start(at))?;
    let mut b = vec![0u8; len as usize];
    f.read_exact(&mut b)
        .with_context(|| format!("{}: cannot read {len} bytes at {at}", path.display()))?;
    host_matrix(spec.dtype, &b)
}

/// GGUF tensor bytes of `dtype` as the harness's host matrix (repacked where the
/// kernel reads a repacked layout).
pub fn host_matrix(dtype: Quant, b: &[u8]) -> anyhow::Result<HostMatrix> {
    let words16 = || -> Vec<u16> {
        b.chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect()
    };
    Ok(match dtype {
        Quant::F32 => HostMatrix::F32(
            b.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        Quant::F16 => HostMatrix::F16(words16().into_iter().map(f16::from_bits).collect()),
        Quant::Bf16 => HostMatrix::Bf16(words16()),
        Quant::Q8_0 => HostMatrix::Q8_0(quant::repack_q8_0(b)),
        Quant::Q4_0 => HostMatrix::Q4_0(quant::repack_q4_0(b)),
        Quant::Q4_1 => HostMatrix::Q4_1(quant::repack_q4_1(b)),
        Quant::Q5_0 => HostMatrix::Q5_0(quant::repack_q5_0(b)),
        Quant::Q5_1 => HostMatrix::Q5_1(quant::repack_q5_1(b)),
        Quant::Q4K => HostMatrix::Q4K(quant::repack_q4_k(b)),
        Quant::Q5K => HostMatrix::Q5K(quant::repack_q5_k(b)),
        Quant::Q6K => HostMatrix::Q6K(quant::repack_q6_k(b)),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
