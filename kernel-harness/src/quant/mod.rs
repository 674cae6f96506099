//! GGUF's q8_0 and q4_0 block formats and the repacked layout the GPU reads;
//! q4_1, q5_0, q5_1 in [`legacy`], bf16 in [`bf16`].
//!
//! **GGUF blocks** (ggml `block_q8_0` / `block_q4_0`), 32 weights each:
//!
//! | format | bytes | layout | weight `j` |
//! |---|---|---|---|
//! | q8_0 | 34 | `d: f16`, `qs: [i8; 32]` | `d * qs[j]` |
//! | q4_0 | 18 | `d: f16`, `qs: [u8; 16]` | `d * ((qs[j] & 0xF) - 8)` for j < 16, `d * ((qs[j-16] >> 4) - 8)` for j >= 16 |
//!
//! 34- and 18-byte blocks are not 4-byte aligned, and WGSL can only load aligned
//! 32-bit words. **The repacked layout** keeps every byte but splits each matrix in two
//! arrays, so the kernels issue aligned 16-byte loads:
//!
//! - `qs`: the quant bytes of block `b` of row `r` at byte `(r * nb + b) * 32` (q8_0)
//!   or `(r * nb + b) * 16` (q4_0), exactly as in the GGUF block;
//! - `d`: the f16 scale of block `(r, b)` at f16 index `r * nb + b` (two per 32-bit word,
//!   the even index in the low half).
//!
//! Bytes per weight are unchanged (34/32 and 18/32), so bandwidth figures compare with
//! GGUF files one to one.

use half::f16;

mod kquants;

pub use kquants::{
    BlockQ4K, BlockQ5K, BlockQ6K, QK_K, RepackedK, dequantize_q4_k, dequantize_q5_k,
    dequantize_q6_k, pack_scale_min_k4, q5k_qh_from_steps, q5k_qh_to_steps, q6k_qh_from_steps,
    q6k_qh_to_steps, quantize_q4_k, quantize_q5_k, quantize_q6_k, repack_q4_k, repack_q5_k,
    repack_q6_k, scale_min_k4,
};
pub mod bf16;
pub mod legacy;

pub use bf16::{bf16_to_f32, f32_to_bf16, quantize_bf16};
pub use legacy::{
    BlockQ4_1, BlockQ5_0, BlockQ5_1, RepackedLegacy, quantize_q4_1, quantize_q5_0, quantize_q5_1,
    repack_q4_1, repack_q5_0, repack_q5_1,
};

/// Weights per block.
pub const QK: usize = 32;

/// A GGUF q8_0 block: 34 bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ8_0 {
    /// Scale.
    pub d: f16,
    /// Quants.
    pub qs: [i8; QK],
}

/// A GGUF q4_0 block: 18 bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ4_0 {
    /// Scale.
    pub d: f16,
    /// Quants: byte `j` holds weight `j` (low nibble) and weight `j + 16` (high nibble).
    pub qs: [u8; QK / 2],
}

impl BlockQ8_0 {
    /// Size of the block in a GGUF file.
    pub const BYTES: usize = 34;

    /// Quantizes 32 weights as ggml's `quantize_row_q8_0_ref` does.
    pub fn quantize(x: &[f32; QK]) -> Self {
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut qs = [0i8; QK];
        for (q, v) in qs.iter_mut().zip(x) {
            *q = (v * id).round() as i8;
        }
        Self {
            d: f16::from_f32(d),
            qs,
        }
    }

    /// The 32 weights.
    pub fn dequantize(&self) -> [f32; QK] {
        let d = self.d.to_f32();
        std::array::from_fn(|j| d * f32::from(self.qs[j]))
    }

    /// The block as stored in a GGUF file.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0u8; Self::BYTES];
        out[..2].copy_from_slice(&self.d.to_le_bytes());
        for (o, q) in out[2..].iter_mut().zip(self.qs) {
            *o = q as u8;
        }
        out
    }

    /// Reads a block from GGUF bytes.
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        Self {
            d: f16::from_le_bytes([b[0], b[1]]),
            qs: std::array::from_fn(|j| b[2 + j] as i8),
        }
    }
}

impl BlockQ4_0 {
    /// Size of the block in a GGUF file.
    pub const BYTES: usize = 18;

    /// Quantizes 32 weights as ggml's `quantize_row_q4_0_ref` does.
    pub fn quantize(x: &[f32; QK]) -> Self {
        let mut amax = 0f32;
        let mut max = 0f32;
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut qs = [0u8; QK / 2];
        for (j, q) in qs.iter_mut().enumerate() {
            let lo = ((x[j] * id + 8.5) as i8).min(15) as u8;
            let hi = ((x[j + QK / 2] * id + 8.5) as i8).min(15) as u8;
            *q = lo | (hi << 4);
        }
        Self {
            d: f16::from_f32(d),
            qs,
        }
    }

    /// The 32 weights (GGUF element order: low nibbles first).
    pub fn dequantize(&self) -> [f32; QK] {
        let d = self.d.to_f32();
        std::array::from_fn(|j| {
            let byte = self.qs[j % (QK / 2)];
            let nib = if j < QK / 2 { byte & 0xf } else { byte >> 4 };
            d * (f32::from(nib) - 8.0)
        })
    }

    /// The block as stored in a GGUF file.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0u8; Self::BYTES];
        out[..2].copy_from_slice(&self.d.to_le_bytes());
        out[2..].copy_from_slice(&self.qs);
        out
    }

    /// Reads a block from GGUF bytes.
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        Self {
            d: f16::from_le_bytes([b[0], b[1]]),
            qs: std::array::from_fn(|j| b[2 + j]),
        }
    }
}

/// A block-quantized matrix in the repacked layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Repacked {
    /// Quant bytes, block after block, row after row.
    pub qs: Vec<u8>,
    /// Scales, one per block, row after row.
    pub d: Vec<f16>,
}

impl Repacked {
    /// The scales as 32-bit words (two per word, even index low), padded to a whole word.
    pub fn d_words(&self) -> Vec<u32> {
        f16_words(&self.d)
    }
}

/// f16 values as 32-bit words, two per word (even index low), padded to a whole word:
/// how the shaders read scale arrays.
pub(crate) fn f16_words(d: &[f16]) -> Vec<u32> {
    d.chunks(2)
        .map(|c| u32::from(c[0].to_bits()) | (u32::from(c.get(1).map_or(0, |h| h.to_bits())) << 16))
        .collect()
}

/// Repacks a row-major matrix of GGUF q8_0 blocks.
pub fn repack_q8_0(gguf: &[u8]) -> Repacked {
    let mut out = Repacked {
        qs: Vec::with_capacity(gguf.len() / BlockQ8_0::BYTES * QK),
        d: Vec::with_capacity(gguf.len() / BlockQ8_0::BYTES),
    };
    for chunk in gguf.chunks_exact(BlockQ8_0::BYTES) {
        out.d.push(f16::from_le_bytes([chunk[0], chunk[1]]));
        out.qs.extend_from_slice(&chunk[2..]);
    }
    out
}

/// Repacks a row-major matrix of GGUF q4_0 blocks.
pub fn repack_q4_0(gguf: &[u8]) -> Repacked {
    let mut out = Repacked {
        qs: Vec::with_capacity(gguf.len() / BlockQ4_0::BYTES * QK / 2),
        d: Vec::with_capacity(gguf.len() / BlockQ4_0::BYTES),
    };
    for chunk in gguf.chunks_exact(BlockQ4_0::BYTES) {
        out.d.push(f16::from_le_bytes([chunk[0], chunk[1]]));
        out.qs.extend_from_slice(&chunk[2..]);
    }
    out
}

/// Quantizes a row-major f32 matrix (`cols` a multiple of 32) to GGUF q8_0 bytes.
pub fn quantize_q8_0(x: &[f32]) -> Vec<u8> {
    x.chunks_exact(QK)
        .flat_map(|c| BlockQ8_0::quantize(c.try_into().unwrap_or(&[0.0; QK])).to_bytes())
        .collect()
}

/// Quantizes a row-major f32 matrix (`cols` a multiple of 32) to GGUF q4_0 bytes.
pub fn quantize_q4_0(x: &[f32]) -> Vec<u8> {
    x.chunks_exact(QK)
        .flat_map(|c| BlockQ4_0::quantize(c.try_into().unwrap_or(&[0.0; QK])).to_bytes())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp() -> [f32; QK] {
        std::array::from_fn(|j| (j as f32 - 12.5) / 7.0)
    }

    #[test]
    fn q8_0_round_trip_is_within_half_a_step() {
        let x = ramp();
        let b = BlockQ8_0::quantize(&x);
        let y = b.dequantize();
        let step = b.d.to_f32();
        for (a, b) in x.iter().zip(y) {
            assert!((a - b).abs() <= step * 0.5 + 1e-3, "{a} vs {b}");
        }
        assert_eq!(BlockQ8_0::from_bytes(&b.to_bytes()), b);
        assert_eq!(b.to_bytes().len(), 34);
    }

    #[test]
    fn q4_0_follows_gguf_nibble_order() {
        // Hand-made block: d = 0.5, byte j = (lo j % 16) | (hi (15 - j % 16)) << 4.
        let mut bytes = [0u8; 18];
        bytes[..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        for j in 0..16 {
            bytes[2 + j] = (j as u8) | ((15 - j as u8) << 4);
        }
        let b = BlockQ4_0::from_bytes(&bytes);
        let y = b.dequantize();
        for j in 0..16 {
            assert_eq!(y[j], 0.5 * (j as f32 - 8.0), "low nibble {j}");
            assert_eq!(y[j + 16], 0.5 * (7.0 - j as f32), "high nibble {j}");
        }
        assert_eq!(b.to_bytes(), bytes);
    }

    #[test]
    fn q4_0_round_trip() {
        let x = ramp();
        let b = BlockQ4_0::quantize(&x);
        let y = b.dequantize();
        let step = b.d.to_f32().abs();
        for (a, b) in x.iter().zip(y) {
            assert!((a - b).abs() <= step * 0.5 + 1e-3, "{a} vs {b}");
        }
        // The extreme value maps to -8 exactly.
        let imax = x
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .unwrap()
            .0;
        assert!((y[imax] - x[imax]).abs() < 1e-2);
    }

    #[test]
    fn repack_keeps_every_byte() {
        let x: Vec<f32> = (0..3 * 64)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 13.0)
            .collect();
        let g8 = quantize_q8_0(&x);
        assert_eq!(g8.len(), 6 * 34);
        let r8 = repack_q8_0(&g8);
        assert_eq!((r8.qs.len(), r8.d.len()), (6 * 32, 6));
        for blk in 0..6 {
            let b = BlockQ8_0::from_bytes(g8[blk * 34..(blk + 1) * 34].try_into().unwrap());
            assert_eq!(r8.d[blk], b.d);
            assert_eq!(&r8.qs[blk * 32..(blk + 1) * 32], &b.qs.map(|q| q as u8)[..]);
        }
        let g4 = quantize_q4_0(&x);
        let r4 = repack_q4_0(&g4);
        assert_eq!((r4.qs.len(), r4.d.len()), (6 * 16, 6));
        assert_eq!(r4.d_words().len(), 3);
        assert_eq!(r4.d_words()[1] & 0xffff, u32::from(r4.d[2].to_bits()));
    }
}
