//! q5_K: 176-byte super-blocks of 256 weights, `d * sc[s] * q - dmin * m[s]`, q in
//! 0..32, and its `qh` regrouped per step (layout in the parent module's doc).

use half::f16;

use super::scales::{QK_K, STEPS, f16_at, quantize_k_scale_min, scale_min_k4};

/// A GGUF q5_K super-block: 176 bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ5K {
    /// Super-block scale of the scales.
    pub d: f16,
    /// Super-block scale of the mins.
    pub dmin: f16,
    /// 8 six-bit scales and 8 six-bit mins, packed ([`scale_min_k4`]).
    pub scales: [u8; 12],
    /// Fifth bits: bit `s` of byte `l` belongs to weight `32 s + l`.
    pub qh: [u8; 32],
    /// Low four bits, as in q4_K.
    pub qs: [u8; 128],
}

impl BlockQ5K {
    /// Size of the super-block in a GGUF file.
    pub const BYTES: usize = 176;

    /// Quantizes 256 weights as ggml's `quantize_row_q5_K_ref` does.
    pub fn quantize(x: &[f32; QK_K]) -> Self {
        let (l, scales, d, dmin) = quantize_k_scale_min(x, 31, -0.5, 15);
        let mut qs = [0u8; 128];
        let mut qh = [0u8; 32];
        for p in 0..4 {
            for j in 0..32 {
                let (l1, l2) = (l[64 * p + j], l[64 * p + 32 + j]);
                qh[j] |= ((l1 >> 4) << (2 * p)) | ((l2 >> 4) << (2 * p + 1));
                qs[32 * p + j] = (l1 & 0xf) | ((l2 & 0xf) << 4);
            }
        }
        Self {
            d,
            dmin,
            scales,
            qh,
            qs,
        }
    }

    /// The 256 weights, as ggml's `dequantize_row_q5_K` computes them.
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
                let h1 = ((self.qh[l] >> (2 * p)) & 1) << 4;
                let h2 = ((self.qh[l] >> (2 * p + 1)) & 1) << 4;
                y[64 * p + l] = d1 * f32::from((q & 0xf) + h1) - m1;
                y[64 * p + 32 + l] = d2 * f32::from((q >> 4) + h2) - m2;
            }
        }
        y
    }

    /// The weights less their sub-block's centre `16 d sc - dmin m`: `d sc (q - 16)`,
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
                let h1 = ((self.qh[l] >> (2 * p)) & 1) << 4;
                let h2 = ((self.qh[l] >> (2 * p + 1)) & 1) << 4;
                y[64 * p + l] = d1 * (f32::from((q & 0xf) + h1) - 16.0);
                y[64 * p + 32 + l] = d2 * (f32::from((q >> 4) + h2) - 16.0);
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
        out[16..48].copy_from_slice(&self.qh);
        out[48..].copy_from_slice(&self.qs);
        out
    }

    /// Reads a super-block from GGUF bytes.
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        Self {
            d: f16_at(b, 0),
            dmin: f16_at(b, 2),
            scales: std::array::from_fn(|j| b[4 + j]),
            qh: std::array::from_fn(|j| b[16 + j]),
            qs: std::array::from_fn(|j| b[48 + j]),
        }
    }
}

/// q5_K's `qh` regrouped per step (module doc): word `c = 2 p + h` has bit `2 p` of
/// `qh[16 h + i]` at bit `i` and bit `2 p + 1` at bit `16 + i`.
pub fn q5k_qh_to_steps(qh: &[u8; 32]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for c in 0..STEPS {
        let (p, h) = (c / 2, c % 2);
        let mut w = 0u32;
        for i in 0..16 {
            let b = u32::from(qh[16 * h + i]);
            w |= ((b >> (2 * p)) & 1) << i;
            w |= ((b >> (2 * p + 1)) & 1) << (16 + i);
        }
        out[4 * c..4 * c + 4].copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// Inverse of [`q5k_qh_to_steps`].
pub fn q5k_qh_from_steps(steps: &[u8; 32]) -> [u8; 32] {
    let mut qh = [0u8; 32];
    for c in 0..STEPS {
        let (p, h) = (c / 2, c % 2);
        let w = u32::from_le_bytes([
            steps[4 * c],
            steps[4 * c + 1],
            steps[4 * c + 2],
            steps[4 * c + 3],
        ]);
        for i in 0..16 {
            let lo = ((w >> i) & 1) as u8;
            let hi = ((w >> (16 + i)) & 1) as u8;
            qh[16 * h + i] |= (lo << (2 * p)) | (hi << (2 * p + 1));
        }
    }
    qh
}
