//! q4_K: 144-byte super-blocks of 256 weights, `d * sc[s] * q - dmin * m[s]`, q in
//! 0..16 (layout in the parent module's doc).

use half::f16;

use super::scales::{QK_K, f16_at, quantize_k_scale_min, scale_min_k4};

/// A GGUF q4_K super-block: 144 bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ4K {
    /// Super-block scale of the scales.
    pub d: f16,
    /// Super-block scale of the mins.
    pub dmin: f16,
    /// 8 six-bit scales and 8 six-bit mins, packed ([`scale_min_k4`]).
    pub scales: [u8; 12],
    /// Quants: 32 bytes per 64 weights, low nibbles first.
    pub qs: [u8; 128],
}

impl BlockQ4K {
    /// Size of the super-block in a GGUF file.
    pub const BYTES: usize = 144;

    /// Quantizes 256 weights as ggml's `quantize_row_q4_K_ref` does.
    pub fn quantize(x: &[f32; QK_K]) -> Self {
        let (l, scales, d, dmin) = quantize_k_scale_min(x, 15, -1.0, 20);
        let mut qs = [0u8; 128];
        for p in 0..4 {
            for i in 0..32 {
                qs[32 * p + i] = l[64 * p + i] | (l[64 * p + 32 + i] << 4);
            }
        }
        Self {
            d,
            dmin,
            scales,
            qs,
        }
    }

    /// The 256 weights, as ggml's `dequantize_row_q4_K` computes them.
    pub fn dequantize(&self) -> [f32; QK_K] {
        let (d, min) = (self.d.to_f32(), self.dmin.to_f32());
        let mut y = [0f32; QK_K];
        for p in 0..4 {
            let (sc1, m1) = scale_min_k4(2 * p, &self.scales);
            let (sc2, m2) = scale_min_k4(2 * p + 1, &self.scales);
            let (d1, m1) = (d * f32::from(sc1), min * f32::from(m1));
            let (d2, m2) = (d * f32::from(sc2), min * f32::from(m2));
            for l in 0..32 {
                let q = self.qs[32 * p + l];
                y[64 * p + l] = d1 * f32::from(q & 0xf) - m1;
                y[64 * p + 32 + l] = d2 * f32::from(q >> 4) - m2;
            }
        }
        y
    }

    /// The weights less their sub-block's centre `8 d sc - dmin m`: `d sc (q - 8)`,
    /// what the f16 dequantization multiplies by x (it adds the centre times x's
    /// sum in f32).
    pub fn centred(&self) -> [f32; QK_K] {
        let d = self.d.to_f32();
        let mut y = [0f32; QK_K];
        for p in 0..4 {
            let (sc1, _) = scale_min_k4(2 * p, &self.scales);
            let (sc2, _) = scale_min_k4(2 * p + 1, &self.scales);
            let d1 = d * f32::from(sc1);
            let d2 = d * f32::from(sc2);
            for l in 0..32 {
                let q = self.qs[32 * p + l];
                y[64 * p + l] = d1 * (f32::from(q & 0xf) - 8.0);
                y[64 * p + 32 + l] = d2 * (f32::from(q >> 4) - 8.0);
            }
        }
        y
    }

    /// The super-block as stored in a GGUF file.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0u8; Self::BYTES];
        out[..2].copy_from_slice(&self.d.to_le_bytes());
        out[2..4].copy_from_slice(&self.dmin.to_le_bytes());
        out[4..16].copy_from_slice(&self.scales);
        out[16..].copy_from_slice(&self.qs);
        out
    }

    /// Reads a super-block from GGUF bytes.
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        Self {
            d: f16_at(b, 0),
            dmin: f16_at(b, 2),
            scales: std::array::from_fn(|j| b[4 + j]),
            qs: std::array::from_fn(|j| b[16 + j]),
        }
    }
}
