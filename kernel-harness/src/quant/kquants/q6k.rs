//! q6_K: 210-byte super-blocks of 256 weights, `d * scales[w / 16] * (q - 32)`, q in
//! 0..64, and its `qh` regrouped per step (layout in the parent module's doc).

use half::f16;

use super::scales::{GROUP_MAX_EPS, QK_K, STEPS, f16_at, make_qx_quants, nearest_int};

/// A GGUF q6_K super-block: 210 bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ6K {
    /// Low four bits.
    pub ql: [u8; 128],
    /// High two bits.
    pub qh: [u8; 64],
    /// Scales of the 16 groups of 16 weights.
    pub scales: [i8; 16],
    /// Super-block scale.
    pub d: f16,
}

impl BlockQ6K {
    /// Size of the super-block in a GGUF file.
    pub const BYTES: usize = 210;

    /// Quantizes 256 weights as ggml's `quantize_row_q6_K_ref` does.
    pub fn quantize(x: &[f32; QK_K]) -> Self {
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; 16];
        let mut max_scale = 0f32;
        let mut max_abs_scale = 0f32;
        for (ib, s) in scales.iter_mut().enumerate() {
            *s = make_qx_quants(32, &x[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16]);
            if s.abs() > max_abs_scale {
                max_abs_scale = s.abs();
                max_scale = *s;
            }
        }
        if max_abs_scale < GROUP_MAX_EPS {
            return Self {
                ql: [0; 128],
                qh: [0; 64],
                scales: [0; 16],
                d: f16::ZERO,
            };
        }
        let iscale = -128.0 / max_scale;
        let d = f16::from_f32(1.0 / iscale);
        let sc: [i8; 16] =
            std::array::from_fn(|ib| nearest_int(iscale * scales[ib]).min(127) as i8);
        for j in 0..16 {
            let dj = d.to_f32() * f32::from(sc[j]);
            if dj == 0.0 {
                continue;
            }
            for i in 0..16 {
                let q = nearest_int(x[16 * j + i] / dj).clamp(-32, 31);
                l[16 * j + i] = (q + 32) as i8;
            }
        }
        let l = l.map(|v| v as u8);
        let mut ql = [0u8; 128];
        let mut qh = [0u8; 64];
        for n in 0..2 {
            let (j, o) = (128 * n, 64 * n);
            for i in 0..32 {
                let q = |k: usize| l[j + i + 32 * k];
                ql[o + i] = (q(0) & 0xf) | ((q(2) & 0xf) << 4);
                ql[o + 32 + i] = (q(1) & 0xf) | ((q(3) & 0xf) << 4);
                qh[32 * n + i] =
                    (q(0) >> 4) | ((q(1) >> 4) << 2) | ((q(2) >> 4) << 4) | ((q(3) >> 4) << 6);
            }
        }
        Self {
            ql,
            qh,
            scales: sc,
            d,
        }
    }

    /// The 256 weights, as ggml's `dequantize_row_q6_K` computes them
    /// (`d * scale * q`, left to right).
    pub fn dequantize(&self) -> [f32; QK_K] {
        let d = self.d.to_f32();
        let mut y = [0f32; QK_K];
        for n in 0..2 {
            let (ql, qh) = (&self.ql[64 * n..], &self.qh[32 * n..]);
            let sc = &self.scales[8 * n..];
            for l in 0..32 {
                let is = l / 16;
                let q1 = ((ql[l] & 0xf) | ((qh[l] & 3) << 4)) as i8 - 32;
                let q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
                let y = &mut y[128 * n..];
                y[l] = d * f32::from(sc[is]) * f32::from(q1);
                y[l + 32] = d * f32::from(sc[is + 2]) * f32::from(q2);
                y[l + 64] = d * f32::from(sc[is + 4]) * f32::from(q3);
                y[l + 96] = d * f32::from(sc[is + 6]) * f32::from(q4);
            }
        }
        y
    }

    /// The super-block as stored in a GGUF file.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0u8; Self::BYTES];
        out[..128].copy_from_slice(&self.ql);
        out[128..192].copy_from_slice(&self.qh);
        for (o, s) in out[192..208].iter_mut().zip(self.scales) {
            *o = s as u8;
        }
        out[208..].copy_from_slice(&self.d.to_le_bytes());
        out
    }

    /// Reads a super-block from GGUF bytes.
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        Self {
            ql: std::array::from_fn(|j| b[j]),
            qh: std::array::from_fn(|j| b[128 + j]),
            scales: std::array::from_fn(|j| b[192 + j] as i8),
            d: f16_at(b, 208),
        }
    }
}

/// q6_K's `qh` regrouped per step (module doc): step `c = 4 n + 2 a + h` gets two
/// words; bits `2 i, 2 i + 1` of the first are bits `2 a, 2 a + 1` of
/// `qh[32 n + 16 h + i]`, of the second bits `4 + 2 a, 5 + 2 a`.
pub fn q6k_qh_to_steps(qh: &[u8; 64]) -> [u8; 64] {
    let mut out = [0u8; 64];
    for c in 0..STEPS {
        let (n, a, h) = (c / 4, (c / 2) % 2, c % 2);
        let (mut lo, mut hi) = (0u32, 0u32);
        for i in 0..16 {
            let b = u32::from(qh[32 * n + 16 * h + i]);
            lo |= ((b >> (2 * a)) & 3) << (2 * i);
            hi |= ((b >> (4 + 2 * a)) & 3) << (2 * i);
        }
        out[8 * c..8 * c + 4].copy_from_slice(&lo.to_le_bytes());
        out[8 * c + 4..8 * c + 8].copy_from_slice(&hi.to_le_bytes());
    }
    out
}

/// Inverse of [`q6k_qh_to_steps`].
pub fn q6k_qh_from_steps(steps: &[u8; 64]) -> [u8; 64] {
    let word = |k: usize| {
        u32::from_le_bytes([
            steps[4 * k],
            steps[4 * k + 1],
            steps[4 * k + 2],
            steps[4 * k + 3],
        ])
    };
    let mut qh = [0u8; 64];
    for c in 0..STEPS {
        let (n, a, h) = (c / 4, (c / 2) % 2, c % 2);
        let (lo, hi) = (word(2 * c), word(2 * c + 1));
        for i in 0..16 {
            let l = ((lo >> (2 * i)) & 3) as u8;
            let u = ((hi >> (2 * i)) & 3) as u8;
            qh[32 * n + 16 * h + i] |= (l << (2 * a)) | (u << (4 + 2 * a));
        }
    }
    qh
}
