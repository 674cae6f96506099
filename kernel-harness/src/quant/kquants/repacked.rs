//! K-quant matrices: whole GGUF matrices quantized, dequantized, and repacked into
//! the layout the GPU reads (the parent module's doc).

use half::f16;

use super::q4k::BlockQ4K;
use super::q5k::{BlockQ5K, q5k_qh_from_steps, q5k_qh_to_steps};
use super::q6k::{BlockQ6K, q6k_qh_from_steps, q6k_qh_to_steps};
use super::scales::QK_K;

/// A K-quant matrix in the repacked layout (module doc), super-block after
/// super-block, row after row.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RepackedK {
    /// Quant bytes (`qs`, q6_K's `ql`): 128 per super-block, GGUF order.
    pub qs: Vec<u8>,
    /// High bits regrouped per step: 32 (q5_K) or 64 (q6_K) bytes per super-block,
    /// none for q4_K.
    pub qh: Vec<u8>,
    /// Packed scales, GGUF bytes: 12 (q4_K, q5_K) or 16 (q6_K) per super-block.
    pub scales: Vec<u8>,
    /// f16 super-block scales: `d, dmin` (q4_K, q5_K) or `d` (q6_K) per super-block.
    pub d: Vec<f16>,
}

impl RepackedK {
    /// The f16 scales as 32-bit words (two per word, even index low), padded.
    pub fn d_words(&self) -> Vec<u32> {
        crate::quant::f16_words(&self.d)
    }

    /// Super-block `b` as a GGUF q4_K block.
    pub fn q4_k(&self, b: usize) -> BlockQ4K {
        BlockQ4K {
            d: self.d[2 * b],
            dmin: self.d[2 * b + 1],
            scales: self.scales[12 * b..12 * b + 12]
                .try_into()
                .unwrap_or([0; 12]),
            qs: self.qs[128 * b..128 * b + 128]
                .try_into()
                .unwrap_or([0; 128]),
        }
    }

    /// Super-block `b` as a GGUF q5_K block.
    pub fn q5_k(&self, b: usize) -> BlockQ5K {
        BlockQ5K {
            d: self.d[2 * b],
            dmin: self.d[2 * b + 1],
            scales: self.scales[12 * b..12 * b + 12]
                .try_into()
                .unwrap_or([0; 12]),
            qh: q5k_qh_from_steps(self.qh[32 * b..32 * b + 32].try_into().unwrap_or(&[0; 32])),
            qs: self.qs[128 * b..128 * b + 128]
                .try_into()
                .unwrap_or([0; 128]),
        }
    }

    /// Super-block `b` as a GGUF q6_K block.
    pub fn q6_k(&self, b: usize) -> BlockQ6K {
        BlockQ6K {
            ql: self.qs[128 * b..128 * b + 128]
                .try_into()
                .unwrap_or([0; 128]),
            qh: q6k_qh_from_steps(self.qh[64 * b..64 * b + 64].try_into().unwrap_or(&[0; 64])),
            scales: std::array::from_fn(|j| self.scales[16 * b + j] as i8),
            d: self.d[b],
        }
    }

    fn push_q4_k(&mut self, b: &BlockQ4K) {
        self.qs.extend_from_slice(&b.qs);
        self.scales.extend_from_slice(&b.scales);
        self.d.extend([b.d, b.dmin]);
    }

    fn push_q5_k(&mut self, b: &BlockQ5K) {
        self.qs.extend_from_slice(&b.qs);
        self.qh.extend_from_slice(&q5k_qh_to_steps(&b.qh));
        self.scales.extend_from_slice(&b.scales);
        self.d.extend([b.d, b.dmin]);
    }

    fn push_q6_k(&mut self, b: &BlockQ6K) {
        self.qs.extend_from_slice(&b.ql);
        self.qh.extend_from_slice(&q6k_qh_to_steps(&b.qh));
        self.scales.extend(b.scales.map(|s| s as u8));
        self.d.push(b.d);
    }
}

/// Repacks a row-major matrix of GGUF q4_K super-blocks.
pub fn repack_q4_k(gguf: &[u8]) -> RepackedK {
    let mut out = RepackedK::default();
    for c in gguf.chunks_exact(BlockQ4K::BYTES) {
        out.push_q4_k(&BlockQ4K::from_bytes(c.try_into().unwrap_or(&[0; 144])));
    }
    out
}

/// Repacks a row-major matrix of GGUF q5_K super-blocks.
pub fn repack_q5_k(gguf: &[u8]) -> RepackedK {
    let mut out = RepackedK::default();
    for c in gguf.chunks_exact(BlockQ5K::BYTES) {
        out.push_q5_k(&BlockQ5K::from_bytes(c.try_into().unwrap_or(&[0; 176])));
    }
    out
}

/// Repacks a row-major matrix of GGUF q6_K super-blocks.
pub fn repack_q6_k(gguf: &[u8]) -> RepackedK {
    let mut out = RepackedK::default();
    for c in gguf.chunks_exact(BlockQ6K::BYTES) {
        out.push_q6_k(&BlockQ6K::from_bytes(c.try_into().unwrap_or(&[0; 210])));
    }
    out
}

fn quantize_rows<const N: usize>(x: &[f32], f: impl Fn(&[f32; QK_K]) -> [u8; N]) -> Vec<u8> {
    x.chunks_exact(QK_K)
        .flat_map(|c| f(c.try_into().unwrap_or(&[0.0; QK_K])))
        .collect()
}

/// Quantizes a row-major f32 matrix (`cols` a multiple of 256) to GGUF q4_K bytes.
pub fn quantize_q4_k(x: &[f32]) -> Vec<u8> {
    quantize_rows(x, |c| BlockQ4K::quantize(c).to_bytes())
}

/// Quantizes a row-major f32 matrix (`cols` a multiple of 256) to GGUF q5_K bytes.
pub fn quantize_q5_k(x: &[f32]) -> Vec<u8> {
    quantize_rows(x, |c| BlockQ5K::quantize(c).to_bytes())
}

/// Quantizes a row-major f32 matrix (`cols` a multiple of 256) to GGUF q6_K bytes.
pub fn quantize_q6_k(x: &[f32]) -> Vec<u8> {
    quantize_rows(x, |c| BlockQ6K::quantize(c).to_bytes())
}

/// Dequantizes GGUF q4_K bytes (whole super-blocks).
pub fn dequantize_q4_k(gguf: &[u8]) -> Vec<f32> {
    gguf.chunks_exact(BlockQ4K::BYTES)
        .flat_map(|c| BlockQ4K::from_bytes(c.try_into().unwrap_or(&[0; 144])).dequantize())
        .collect()
}

/// Dequantizes GGUF q5_K bytes (whole super-blocks).
pub fn dequantize_q5_k(gguf: &[u8]) -> Vec<f32> {
    gguf.chunks_exact(BlockQ5K::BYTES)
        .flat_map(|c| BlockQ5K::from_bytes(c.try_into().unwrap_or(&[0; 176])).dequantize())
        .collect()
}

/// Dequantizes GGUF q6_K bytes (whole super-blocks).
pub fn dequantize_q6_k(gguf: &[u8]) -> Vec<f32> {
    gguf.chunks_exact(BlockQ6K::BYTES)
        .flat_map(|c| BlockQ6K::from_bytes(c.try_into().unwrap_or(&[0; 210])).dequantize())
        .collect()
}
