//! GGUF's K-quant super-blocks (q4_K, q5_K, q6_K: 256 weights each) and the repacked
//! layout the GPU reads.
//!
//! **GGUF super-blocks** (ggml `block_q4_K` / `block_q5_K` / `block_q6_K`, `QK_K` = 256):
//!
//! | format | bytes | fields, in file order | weight |
//! |---|---|---|---|
//! | q4_K | 144 | `d: f16`, `dmin: f16`, `scales: [u8; 12]`, `qs: [u8; 128]` | `d * sc[s] * q - dmin * m[s]`, q in 0..16 |
//! | q5_K | 176 | `d`, `dmin`, `scales: [u8; 12]`, `qh: [u8; 32]`, `qs: [u8; 128]` | `d * sc[s] * q - dmin * m[s]`, q in 0..32 |
//! | q6_K | 210 | `ql: [u8; 128]`, `qh: [u8; 64]`, `scales: [i8; 16]`, `d: f16` | `d * scales[w / 16] * (q - 32)`, q in 0..64 |
//!
//! q4_K/q5_K have 8 sub-blocks `s` of 32 weights, each with a 6-bit scale `sc[s]` and a
//! 6-bit min `m[s]` packed in 12 bytes ([`scale_min_k4`], ggml's `get_scale_min_k4`).
//! Weight order (as ggml's `dequantize_row_q*_K`): q4_K/q5_K take 32 bytes of `qs` per
//! 64 weights, low nibbles first (sub-block `2p`), then high nibbles (sub-block
//! `2p + 1`); q5_K's fifth bit of weight `32 s + l` is bit `s` of `qh[l]`. q6_K takes
//! each 128-weight half `n` from 64 bytes of `ql` and 32 of `qh`: weight
//! `128 n + 32 g + l` (g = 0..4) is nibble `g / 2` of `ql[64 n + 32 (g % 2) + l]` with
//! bits `2 g, 2 g + 1` of `qh[32 n + l]` on top.
//!
//! **The repacked layout.** A thread step reads one aligned 16-byte word of quant
//! bytes (32 weights: 16 low and 16 high nibbles); the other fields go to separate
//! arrays, so consecutive threads read consecutive words of each. Every byte is kept,
//! and bits per weight stay GGUF's:
//!
//! | format | `qs` (GGUF order) | `qh` (regrouped per step) | `scales` (GGUF bytes) | `d` (f16) | bits/weight |
//! |---|---|---|---|---|---|
//! | q4_K | 128 B | - | 12 B | 2 (`d`, `dmin`) | 144 * 8 / 256 = 4.5 |
//! | q5_K | 128 B | 32 B: one u32 per step | 12 B | 2 (`d`, `dmin`) | 176 * 8 / 256 = 5.5 |
//! | q6_K | 128 B (`ql`) | 64 B: two u32 per step | 16 B | 1 | 210 * 8 / 256 = 6.5625 |
//!
//! (bytes per super-block). Step `c` (0..8) of a super-block is `qs[16 c..16 c + 16]`.
//! - q4_K/q5_K: byte `i` of step `c = 2 p + h` holds weights `64 p + 16 h + i` (low
//!   nibble, sub-block `2 p`) and `64 p + 32 + 16 h + i` (high nibble, sub-block `2 p + 1`).
//!   q5_K's `qh` word `c` has the fifth bit of low weight `i` at bit `i` and of high
//!   weight `i` at bit `16 + i`.
//! - q6_K: byte `i` of step `c = 4 n + 2 a + h` holds weights `128 n + 32 a + 16 h + i`
//!   (low nibble, scale `8 n + 2 a + h`) and that plus 64 (high nibble, scale + 4). Its
//!   two `qh` words have the top two bits of low weight `i` at bits `2 i, 2 i + 1` of
//!   the first word, of high weight `i` in the second.
//!
//! The 6-bit scales stay packed (12 bytes); the kernels unpack the two they need per
//! step. `d` holds f16s two per 32-bit word, even index low: `(d, dmin)` of super-block
//! `b` at indices `2 b, 2 b + 1` (q4_K/q5_K), `d` at `b` (q6_K).
//!
//! Quantizers: ggml's reference ones (`quantize_row_q{4,5,6}_K_ref`, with
//! `make_qkx2_quants` / `make_qx_quants`), in the same f32 operation order.

use half::f16;

/// Weights per super-block.
pub const QK_K: usize = 256;

/// 16-byte steps per super-block.
pub const STEPS: usize = 8;

/// ggml's `nearest_int`: round to nearest, ties to even (for |x| < 2^22).
fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

const GROUP_MAX_EPS: f32 = 1e-15;

/// Scale and min of sub-block `j` (0..8) from the 12 packed bytes (ggml's
/// `get_scale_min_k4`).
pub fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Packs 8 six-bit scales and mins as ggml's q4_K/q5_K quantizers do (inverse of
/// [`scale_min_k4`]).
pub fn pack_scale_min_k4(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut out = [0u8; 12];
    for j in 0..8 {
        let (ls, lm) = (sc[j].min(63), m[j].min(63));
        if j < 4 {
            out[j] = ls;
            out[j + 4] = lm;
        } else {
            out[j + 4] = (ls & 0xf) | ((lm & 0xf) << 4);
            out[j - 4] |= (ls >> 4) << 6;
            out[j] |= (lm >> 4) << 6;
        }
    }
    out
}

/// ggml's `make_qkx2_quants`: scale and (negated) min of `x` on `nmax + 1` levels,
/// weighted least squares over a few candidate scales. Returns `(scale, -min)`.
#[allow(clippy::too_many_arguments)]
fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l_out: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
) -> (f32, f32) {
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l_out.fill(0);
        return (0.0, -min);
    }
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l_out[i] = l as u8;
        let diff = scale * l as f32 + min - x[i];
        best_error += weights[i] * (diff * diff);
    }
    let mut laux = [0u8; 32];
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = l as u8;
            let w = weights[i];
            let lf = l as f32;
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut mad = 0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                mad += weights[i] * (diff * diff);
            }
            if mad < best_error {
                l_out[..n].copy_from_slice(&laux[..n]);
                best_error = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// ggml's `make_qx_quants` with `rmse_type` 1 and no importance weights: a symmetric
/// scale for `x` on levels `-nmax..nmax`; `l_out` gets `l + nmax`.
fn make_qx_quants(nmax: i32, x: &[f32], l_out: &mut [i8]) -> f32 {
    let mut max = 0f32;
    let mut amax = 0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l_out.fill(0);
        return 0.0;
    }
    let mut iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for (i, &v) in x.iter().enumerate() {
        let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        l_out[i] = (l + nmax) as i8;
        let w = v * v;
        let lf = l as f32;
        sumlx += w * v * lf;
        suml2 += w * lf * lf;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for &v in x {
            let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1) as f32;
            let w = v * v;
            sumlx += w * v * l;
            suml2 += w * l * l;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (i, &v) in x.iter().enumerate() {
                let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
                l_out[i] = (nmax + l) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// The shared part of ggml's q4_K / q5_K reference quantizers: levels `L` (0..=nmax)
/// of the 256 weights, packed scales, `d`, `dmin`.
fn quantize_k_scale_min(
    x: &[f32; QK_K],
    nmax: i32,
    rmin: f32,
    nstep: i32,
) -> ([u8; QK_K], [u8; 12], f16, f16) {
    let mut l = [0u8; QK_K];
    let mut scales = [0f32; 8];
    let mut mins = [0f32; 8];
    let mut max_scale = 0f32;
    let mut max_min = 0f32;
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let weights: [f32; 32] = std::array::from_fn(|i| av_x + xs[i].abs());
        let (s, m) = make_qkx2_quants(
            nmax,
            xs,
            &weights,
            &mut l[32 * j..32 * j + 32],
            rmin,
            0.1,
            nstep,
        );
        scales[j] = s;
        mins[j] = m;
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    // `uint8_t ls = nearest_int(...)`: C truncates to 8 bits before MIN(63, ls).
    let ls: [u8; 8] = std::array::from_fn(|j| nearest_int(inv_scale * scales[j]) as u8);
    let lm: [u8; 8] = std::array::from_fn(|j| nearest_int(inv_min * mins[j]) as u8);
    let packed = pack_scale_min_k4(&ls, &lm);
    let d = f16::from_f32(max_scale / 63.0);
    let dmin = f16::from_f32(max_min / 63.0);
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, &packed);
        let dj = d.to_f32() * f32::from(sc);
        if dj == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * f32::from(m);
        for i in 0..32 {
            l[32 * j + i] = nearest_int((x[32 * j + i] + dm) / dj).clamp(0, nmax) as u8;
        }
    }
    (l, packed, d, dmin)
}

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

fn f16_at(b: &[u8], i: usize) -> f16 {
    f16::from_le_bytes([b[i], b[i + 1]])
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
        self.d
            .chunks(2)
            .map(|c| {
                u32::from(c[0].to_bits()) | (u32::from(c.get(1).map_or(0, |h| h.to_bits())) << 16)
            })
            .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|i| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let u = (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
                u * (1.0 + (i % 37) as f32 / 10.0)
            })
            .collect()
    }

    fn max_err(x: &[f32], y: &[f32]) -> f32 {
        x.iter().zip(y).fold(0f32, |m, (a, b)| m.max((a - b).abs()))
    }

    #[test]
    fn nearest_int_rounds_ties_to_even() {
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(3.5), 4);
        assert_eq!(nearest_int(-2.5), -2);
        assert_eq!(nearest_int(-2.6), -3);
        assert_eq!(nearest_int(63.4), 63);
    }

    #[test]
    fn scale_min_k4_unpacks_the_ggml_packing() {
        let sc = [0, 1, 17, 63, 16, 33, 48, 62];
        let m = [63, 5, 32, 0, 47, 15, 31, 16];
        let packed = pack_scale_min_k4(&sc, &m);
        for j in 0..8 {
            assert_eq!(scale_min_k4(j, &packed), (sc[j], m[j]), "sub-block {j}");
        }
        // Hand-packed: sub-block 4's scale 0b10_1101 = low nibble in byte 8, top two
        // bits in byte 0's bits 6..8; its min 0b01_0011 = byte 8's high nibble, byte 4's top bits.
        let mut q = [0u8; 12];
        q[8] = 0b1101 | (0b0011 << 4);
        q[0] = 0b10 << 6 | 7;
        q[4] = 0b01 << 6 | 9;
        assert_eq!(scale_min_k4(4, &q), (0b10_1101, 0b01_0011));
        assert_eq!(scale_min_k4(0, &q), (7, 9));
    }

    #[test]
    fn q4_k_hand_built_block_dequantizes_in_ggml_order() {
        // d = 0.5, dmin = 0.25, sub-block s: scale s + 1, min s; qs byte 32 p + l:
        // low nibble l % 16, high nibble 15 - l % 16.
        let sc: [u8; 8] = std::array::from_fn(|s| s as u8 + 1);
        let m: [u8; 8] = std::array::from_fn(|s| s as u8);
        let b = BlockQ4K {
            d: f16::from_f32(0.5),
            dmin: f16::from_f32(0.25),
            scales: pack_scale_min_k4(&sc, &m),
            qs: std::array::from_fn(|j| (j % 16) as u8 | ((15 - (j % 16) as u8) << 4)),
        };
        let y = b.dequantize();
        for (w, &got) in y.iter().enumerate() {
            let s = w / 32;
            let l = w % 32;
            let q = if s % 2 == 0 { l % 16 } else { 15 - l % 16 } as f32;
            let want = 0.5 * (s as f32 + 1.0) * q - 0.25 * s as f32;
            assert_eq!(got, want, "weight {w}");
        }
        assert_eq!(BlockQ4K::from_bytes(&b.to_bytes()), b);
    }

    #[test]
    fn q5_k_hand_built_block_uses_the_fifth_bit() {
        let sc = [1u8; 8];
        let m = [0u8; 8];
        // qh[l] = bits of sub-blocks whose weight l has the fifth bit: l odd -> all.
        let b = BlockQ5K {
            d: f16::from_f32(1.0),
            dmin: f16::from_f32(1.0),
            scales: pack_scale_min_k4(&sc, &m),
            qh: std::array::from_fn(|l| if l % 2 == 1 { 0xff } else { 0x05 }),
            qs: [0x21; 128],
        };
        let y = b.dequantize();
        for (w, &got) in y.iter().enumerate() {
            let (s, l) = (w / 32, w % 32);
            let lo = if s % 2 == 0 { 1.0 } else { 2.0 };
            let high = l % 2 == 1 || s == 0 || s == 2;
            assert_eq!(got, lo + if high { 16.0 } else { 0.0 }, "weight {w}");
        }
        assert_eq!(BlockQ5K::from_bytes(&b.to_bytes()), b);
    }

    #[test]
    fn q6_k_hand_built_block_dequantizes_in_ggml_order() {
        // Weight w: low 4 bits w % 16, high 2 bits (w / 16) % 4; scale of group g: g - 8.
        let mut ql = [0u8; 128];
        let mut qh = [0u8; 64];
        let q = |w: usize| ((w % 16) | (((w / 16) % 4) << 4)) as u8;
        for n in 0..2 {
            for l in 0..32 {
                let w = |k: usize| q(128 * n + 32 * k + l);
                ql[64 * n + l] = (w(0) & 0xf) | ((w(2) & 0xf) << 4);
                ql[64 * n + 32 + l] = (w(1) & 0xf) | ((w(3) & 0xf) << 4);
                qh[32 * n + l] =
                    (w(0) >> 4) | ((w(1) >> 4) << 2) | ((w(2) >> 4) << 4) | ((w(3) >> 4) << 6);
            }
        }
        let b = BlockQ6K {
            ql,
            qh,
            scales: std::array::from_fn(|g| g as i8 - 8),
            d: f16::from_f32(0.125),
        };
        let y = b.dequantize();
        for (w, &got) in y.iter().enumerate() {
            let want = 0.125 * ((w / 16) as f32 - 8.0) * (f32::from(q(w)) - 32.0);
            assert_eq!(got, want, "weight {w}");
        }
        assert_eq!(BlockQ6K::from_bytes(&b.to_bytes()), b);
    }

    #[test]
    fn quantizers_round_trip_within_a_step() {
        let x = data(4 * QK_K, 7);
        for (name, g, y, levels) in [
            (
                "q4_K",
                quantize_q4_k(&x),
                dequantize_q4_k as fn(&[u8]) -> Vec<f32>,
                15.0,
            ),
            ("q5_K", quantize_q5_k(&x), dequantize_q5_k, 31.0),
            ("q6_K", quantize_q6_k(&x), dequantize_q6_k, 63.0),
        ] {
            let y = y(&g);
            assert_eq!(y.len(), x.len());
            // Each weight is within about one step of its sub-block's range.
            for (sb, (xs, ys)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
                let lo = xs.iter().fold(0f32, |m, v| m.min(*v));
                let hi = xs.iter().fold(0f32, |m, v| m.max(*v));
                let step = (hi - lo) / levels;
                let e = max_err(xs, ys);
                assert!(
                    e <= 1.5 * step,
                    "{name} sub-block {sb}: error {e}, step {step}"
                );
            }
        }
        assert_eq!(quantize_q4_k(&x).len(), 4 * 144);
        assert_eq!(quantize_q5_k(&x).len(), 4 * 176);
        assert_eq!(quantize_q6_k(&x).len(), 4 * 210);
    }

    #[test]
    fn qh_regrouping_is_a_bijection() {
        let mut s = 3u32;
        let mut next = || {
            s = s.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
            (s >> 24) as u8
        };
        let qh5: [u8; 32] = std::array::from_fn(|_| next());
        assert_eq!(q5k_qh_from_steps(&q5k_qh_to_steps(&qh5)), qh5);
        let qh6: [u8; 64] = std::array::from_fn(|_| next());
        assert_eq!(q6k_qh_from_steps(&q6k_qh_to_steps(&qh6)), qh6);
        // One bit: qh[17] bit 3 (q5_K) is sub-block 3 = p 1, high nibble, h 1: step 3, bit 16 + 1.
        let mut one = [0u8; 32];
        one[17] = 1 << 3;
        let st = q5k_qh_to_steps(&one);
        assert_eq!(u32::from_le_bytes(st[12..16].try_into().unwrap()), 1 << 17);
        // q6_K: qh[32 + 20] bits 6..8 = weight 128 + 96 + 20: n 1, a 1, h 1 -> step 7, high word, bits 8..10.
        let mut one = [0u8; 64];
        one[52] = 0b11 << 6;
        let st = q6k_qh_to_steps(&one);
        assert_eq!(
            u32::from_le_bytes(st[60..64].try_into().unwrap()),
            0b11 << 8
        );
    }

    #[test]
    fn repack_keeps_every_byte_and_round_trips() {
        let x = data(3 * 2 * QK_K, 11);
        let g4 = quantize_q4_k(&x);
        let r4 = repack_q4_k(&g4);
        assert_eq!(
            (r4.qs.len(), r4.qh.len(), r4.scales.len(), r4.d.len()),
            (6 * 128, 0, 6 * 12, 12)
        );
        assert_eq!(
            r4.qs.len() + r4.qh.len() + r4.scales.len() + 2 * r4.d.len(),
            g4.len()
        );
        let g5 = quantize_q5_k(&x);
        let r5 = repack_q5_k(&g5);
        assert_eq!(
            r5.qs.len() + r5.qh.len() + r5.scales.len() + 2 * r5.d.len(),
            g5.len()
        );
        let g6 = quantize_q6_k(&x);
        let r6 = repack_q6_k(&g6);
        assert_eq!(
            r6.qs.len() + r6.qh.len() + r6.scales.len() + 2 * r6.d.len(),
            g6.len()
        );
        assert_eq!(r6.d_words().len(), 3);
        for b in 0..6 {
            assert_eq!(r4.q4_k(b).to_bytes()[..], g4[144 * b..144 * (b + 1)]);
            assert_eq!(r5.q5_k(b).to_bytes()[..], g5[176 * b..176 * (b + 1)]);
            assert_eq!(r6.q6_k(b).to_bytes()[..], g6[210 * b..210 * (b + 1)]);
        }
    }
}
