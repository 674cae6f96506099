//! GGUF's q4_1, q5_0 and q5_1 block formats and their repacked layouts.
//!
//! **GGUF blocks** (ggml `block_q4_1` / `block_q5_0` / `block_q5_1`), 32 weights each.
//! `qs[j]` holds weight `j` in its low nibble and weight `j + 16` in its high nibble;
//! `qh` (little-endian u32) bit `j` is the 5th bit of weight `j`:
//!
//! | format | bytes | layout | weight `j` (q = its 4- or 5-bit quant) |
//! |---|---|---|---|
//! | q4_1 | 20 | `d: f16`, `m: f16`, `qs: [u8; 16]` | `d * q + m` |
//! | q5_0 | 22 | `d: f16`, `qh: [u8; 4]`, `qs: [u8; 16]` | `d * (q - 16)` |
//! | q5_1 | 24 | `d: f16`, `m: f16`, `qh: [u8; 4]`, `qs: [u8; 16]` | `d * q + m` |
//!
//! **Repacked layouts** (every byte kept, bytes per weight unchanged: 20/32, 22/32,
//! 24/32), one array per field so every load is aligned, block `i = r * nb + b` of
//! row `r`:
//!
//! | format | `qs` (16 B / block) | `qh` (4 B / block) | scales |
//! |---|---|---|---|
//! | q4_1 | byte `16 i`, one `vec4<u32>` | - | `dm`: word `i` = `d` (low half) \| `m` (high half) |
//! | q5_0 | byte `16 i`, one `vec4<u32>` | word `i` | `d`: f16 index `i`, two per word (even low), as q4_0 |
//! | q5_1 | byte `16 i`, one `vec4<u32>` | word `i` | `dm`: word `i` = `d` \| `m` << 16 |

use half::f16;

use super::QK;

/// A GGUF q4_1 block: 20 bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ4_1 {
    /// Scale.
    pub d: f16,
    /// Minimum (the offset added to every weight).
    pub m: f16,
    /// Quants: byte `j` holds weight `j` (low nibble) and weight `j + 16` (high nibble).
    pub qs: [u8; QK / 2],
}

/// A GGUF q5_0 block: 22 bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ5_0 {
    /// Scale.
    pub d: f16,
    /// 5th bits: bit `j` belongs to weight `j`.
    pub qh: u32,
    /// Low 4 bits, nibble order as q4_0.
    pub qs: [u8; QK / 2],
}

/// A GGUF q5_1 block: 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ5_1 {
    /// Scale.
    pub d: f16,
    /// Minimum.
    pub m: f16,
    /// 5th bits: bit `j` belongs to weight `j`.
    pub qh: u32,
    /// Low 4 bits, nibble order as q4_0.
    pub qs: [u8; QK / 2],
}

fn min_max(x: &[f32; QK]) -> (f32, f32) {
    // ggml starts from FLT_MAX / -FLT_MAX and compares with `<` / `>`.
    x.iter().fold((f32::MAX, -f32::MAX), |(lo, hi), &v| {
        (if v < lo { v } else { lo }, if v > hi { v } else { hi })
    })
}

/// The value of largest magnitude (the first one on ties), as ggml's `_ref` loops find it.
fn signed_absmax(x: &[f32; QK]) -> f32 {
    let mut amax = 0f32;
    let mut max = 0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

/// The 4-bit quant of weight `j` (`j < 32`) from GGUF's nibble order.
fn nibble(qs: &[u8; QK / 2], j: usize) -> u8 {
    let byte = qs[j % (QK / 2)];
    if j < QK / 2 { byte & 0xf } else { byte >> 4 }
}

/// Packs 32 quants of up to 5 bits into GGUF's `qs` nibbles and `qh` bits.
fn pack5(q: &[u8; QK]) -> ([u8; QK / 2], u32) {
    let mut qs = [0u8; QK / 2];
    let mut qh = 0u32;
    for j in 0..QK / 2 {
        let (a, b) = (q[j], q[j + QK / 2]);
        qs[j] = (a & 0x0f) | ((b & 0x0f) << 4);
        qh |= u32::from((a & 0x10) >> 4) << j;
        qh |= u32::from((b & 0x10) >> 4) << (j + QK / 2);
    }
    (qs, qh)
}

impl BlockQ4_1 {
    /// Size of the block in a GGUF file.
    pub const BYTES: usize = 20;

    /// Quantizes 32 weights as ggml's `quantize_row_q4_1_ref` does.
    pub fn quantize(x: &[f32; QK]) -> Self {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut qs = [0u8; QK / 2];
        for (j, q) in qs.iter_mut().enumerate() {
            let lo = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
            let hi = (((x[j + QK / 2] - min) * id + 0.5) as i8).min(15) as u8;
            *q = lo | (hi << 4);
        }
        Self {
            d: f16::from_f32(d),
            m: f16::from_f32(min),
            qs,
        }
    }

    /// The 32 weights, as ggml's `dequantize_row_q4_1`.
    pub fn dequantize(&self) -> [f32; QK] {
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        std::array::from_fn(|j| f32::from(nibble(&self.qs, j)) * d + m)
    }

    /// The weights less the block's centre `m + 8 d`: `d (q - 8)`, what the f16
    /// dequantization multiplies by x (it adds the centre times x's sum in f32).
    pub fn centred(&self) -> [f32; QK] {
        let d = self.d.to_f32();
        std::array::from_fn(|j| (f32::from(nibble(&self.qs, j)) - 8.0) * d)
    }

    /// The block as stored in a GGUF file.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0u8; Self::BYTES];
        out[..2].copy_from_slice(&self.d.to_le_bytes());
        out[2..4].copy_from_slice(&self.m.to_le_bytes());
        out[4..].copy_from_slice(&self.qs);
        out
    }

    /// Reads a block from GGUF bytes.
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        Self {
            d: f16::from_le_bytes([b[0], b[1]]),
            m: f16::from_le_bytes([b[2], b[3]]),
            qs: std::array::from_fn(|j| b[4 + j]),
        }
    }
}

impl BlockQ5_0 {
    /// Size of the block in a GGUF file.
    pub const BYTES: usize = 22;

    /// Quantizes 32 weights as ggml's `quantize_row_q5_0_ref` does.
    pub fn quantize(x: &[f32; QK]) -> Self {
        let max = signed_absmax(x);
        let d = max / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let q: [u8; QK] = std::array::from_fn(|j| ((x[j] * id + 16.5) as i8).min(31) as u8);
        let (qs, qh) = pack5(&q);
        Self {
            d: f16::from_f32(d),
            qh,
            qs,
        }
    }

    /// The 5-bit quant of weight `j`.
    pub fn quant(&self, j: usize) -> u8 {
        nibble(&self.qs, j) | ((((self.qh >> j) & 1) as u8) << 4)
    }

    /// The 32 weights, as ggml's `dequantize_row_q5_0`.
    pub fn dequantize(&self) -> [f32; QK] {
        let d = self.d.to_f32();
        std::array::from_fn(|j| f32::from(i16::from(self.quant(j)) - 16) * d)
    }

    /// The block as stored in a GGUF file.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0u8; Self::BYTES];
        out[..2].copy_from_slice(&self.d.to_le_bytes());
        out[2..6].copy_from_slice(&self.qh.to_le_bytes());
        out[6..].copy_from_slice(&self.qs);
        out
    }

    /// Reads a block from GGUF bytes.
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        Self {
            d: f16::from_le_bytes([b[0], b[1]]),
            qh: u32::from_le_bytes([b[2], b[3], b[4], b[5]]),
            qs: std::array::from_fn(|j| b[6 + j]),
        }
    }
}

impl BlockQ5_1 {
    /// Size of the block in a GGUF file.
    pub const BYTES: usize = 24;

    /// Quantizes 32 weights as ggml's `quantize_row_q5_1_ref` does.
    pub fn quantize(x: &[f32; QK]) -> Self {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        // ggml casts to uint8_t without a clamp; the value is at most 31.5.
        let q: [u8; QK] = std::array::from_fn(|j| ((x[j] - min) * id + 0.5) as u8);
        let (qs, qh) = pack5(&q);
        Self {
            d: f16::from_f32(d),
            m: f16::from_f32(min),
            qh,
            qs,
        }
    }

    /// The 5-bit quant of weight `j`.
    pub fn quant(&self, j: usize) -> u8 {
        nibble(&self.qs, j) | ((((self.qh >> j) & 1) as u8) << 4)
    }

    /// The 32 weights, as ggml's `dequantize_row_q5_1`.
    pub fn dequantize(&self) -> [f32; QK] {
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        std::array::from_fn(|j| f32::from(self.quant(j)) * d + m)
    }

    /// The weights less the block's centre `m + 16 d`: `d (q - 16)`, what the f16
    /// dequantization multiplies by x (it adds the centre times x's sum in f32).
    pub fn centred(&self) -> [f32; QK] {
        let d = self.d.to_f32();
        std::array::from_fn(|j| (f32::from(self.quant(j)) - 16.0) * d)
    }

    /// The block as stored in a GGUF file.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0u8; Self::BYTES];
        out[..2].copy_from_slice(&self.d.to_le_bytes());
        out[2..4].copy_from_slice(&self.m.to_le_bytes());
        out[4..8].copy_from_slice(&self.qh.to_le_bytes());
        out[8..].copy_from_slice(&self.qs);
        out
    }

    /// Reads a block from GGUF bytes.
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        Self {
            d: f16::from_le_bytes([b[0], b[1]]),
            m: f16::from_le_bytes([b[2], b[3]]),
            qh: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            qs: std::array::from_fn(|j| b[8 + j]),
        }
    }
}

/// A q4_1 / q5_0 / q5_1 matrix in the repacked layout (see the module doc).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RepackedLegacy {
    /// Quant bytes (low 4 bits), 16 per block, block after block, row after row.
    pub qs: Vec<u8>,
    /// 5th bits, one word per block (empty for q4_1).
    pub qh: Vec<u32>,
    /// Scales, one per block.
    pub d: Vec<f16>,
    /// Minimums, one per block (empty for q5_0).
    pub m: Vec<f16>,
}

impl RepackedLegacy {
    /// Blocks held.
    pub fn blocks(&self) -> usize {
        self.d.len()
    }

    /// Blocks `[b0, b1)` (a chunk of whole rows).
    pub fn slice(&self, b0: usize, b1: usize) -> RepackedLegacy {
        let opt = |v: &[f16]| {
            if v.is_empty() {
                Vec::new()
            } else {
                v[b0..b1].to_vec()
            }
        };
        RepackedLegacy {
            qs: self.qs[16 * b0..16 * b1].to_vec(),
            qh: if self.qh.is_empty() {
                Vec::new()
            } else {
                self.qh[b0..b1].to_vec()
            },
            d: opt(&self.d),
            m: opt(&self.m),
        }
    }

    /// The scale array the kernels read: `d | m << 16` per block when there are
    /// minimums (q4_1, q5_1), else the scales two per word, even index low (q5_0).
    pub fn scale_words(&self) -> Vec<u32> {
        if self.m.is_empty() {
            self.d
                .chunks(2)
                .map(|c| {
                    u32::from(c[0].to_bits())
                        | (u32::from(c.get(1).map_or(0, |h| h.to_bits())) << 16)
                })
                .collect()
        } else {
            self.d
                .iter()
                .zip(&self.m)
                .map(|(d, m)| u32::from(d.to_bits()) | (u32::from(m.to_bits()) << 16))
                .collect()
        }
    }

    /// Block `i` as a q4_1 block.
    pub fn q4_1(&self, i: usize) -> BlockQ4_1 {
        BlockQ4_1 {
            d: self.d[i],
            m: self.m[i],
            qs: std::array::from_fn(|j| self.qs[16 * i + j]),
        }
    }

    /// Block `i` as a q5_0 block.
    pub fn q5_0(&self, i: usize) -> BlockQ5_0 {
        BlockQ5_0 {
            d: self.d[i],
            qh: self.qh[i],
            qs: std::array::from_fn(|j| self.qs[16 * i + j]),
        }
    }

    /// Block `i` as a q5_1 block.
    pub fn q5_1(&self, i: usize) -> BlockQ5_1 {
        BlockQ5_1 {
            d: self.d[i],
            m: self.m[i],
            qh: self.qh[i],
            qs: std::array::from_fn(|j| self.qs[16 * i + j]),
        }
    }
}

/// Repacks a row-major matrix of GGUF q4_1 blocks.
pub fn repack_q4_1(gguf: &[u8]) -> RepackedLegacy {
    let mut out = RepackedLegacy::default();
    for chunk in gguf.chunks_exact(BlockQ4_1::BYTES) {
        let b = BlockQ4_1::from_bytes(chunk.try_into().unwrap_or(&[0; BlockQ4_1::BYTES]));
        out.d.push(b.d);
        out.m.push(b.m);
        out.qs.extend_from_slice(&b.qs);
    }
    out
}

/// Repacks a row-major matrix of GGUF q5_0 blocks.
pub fn repack_q5_0(gguf: &[u8]) -> RepackedLegacy {
    let mut out = RepackedLegacy::default();
    for chunk in gguf.chunks_exact(BlockQ5_0::BYTES) {
        let b = BlockQ5_0::from_bytes(chunk.try_into().unwrap_or(&[0; BlockQ5_0::BYTES]));
        out.d.push(b.d);
        out.qh.push(b.qh);
        out.qs.extend_from_slice(&b.qs);
    }
    out
}

/// Repacks a row-major matrix of GGUF q5_1 blocks.
pub fn repack_q5_1(gguf: &[u8]) -> RepackedLegacy {
    let mut out = RepackedLegacy::default();
    for chunk in gguf.chunks_exact(BlockQ5_1::BYTES) {
        let b = BlockQ5_1::from_bytes(chunk.try_into().unwrap_or(&[0; BlockQ5_1::BYTES]));
        out.d.push(b.d);
        out.m.push(b.m);
        out.qh.push(b.qh);
        out.qs.extend_from_slice(&b.qs);
    }
    out
}

fn blocks(x: &[f32]) -> impl Iterator<Item = &[f32; QK]> {
    x.chunks_exact(QK)
        .map(|c| c.try_into().unwrap_or(&[0.0; QK]))
}

/// Quantizes a row-major f32 matrix (`cols` a multiple of 32) to GGUF q4_1 bytes.
pub fn quantize_q4_1(x: &[f32]) -> Vec<u8> {
    blocks(x)
        .flat_map(|c| BlockQ4_1::quantize(c).to_bytes())
        .collect()
}

/// Quantizes a row-major f32 matrix (`cols` a multiple of 32) to GGUF q5_0 bytes.
pub fn quantize_q5_0(x: &[f32]) -> Vec<u8> {
    blocks(x)
        .flat_map(|c| BlockQ5_0::quantize(c).to_bytes())
        .collect()
}

/// Quantizes a row-major f32 matrix (`cols` a multiple of 32) to GGUF q5_1 bytes.
pub fn quantize_q5_1(x: &[f32]) -> Vec<u8> {
    blocks(x)
        .flat_map(|c| BlockQ5_1::quantize(c).to_bytes())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp() -> [f32; QK] {
        std::array::from_fn(|j| (j as f32 - 12.5) / 7.0)
    }

    fn assert_within(x: &[f32; QK], y: &[f32; QK], step: f32) {
        for (a, b) in x.iter().zip(y) {
            assert!(
                (a - b).abs() <= step * 0.5 + 2e-3,
                "{a} vs {b} (step {step})"
            );
        }
    }

    #[test]
    fn q4_1_round_trip_and_bytes() {
        let x = ramp();
        let b = BlockQ4_1::quantize(&x);
        assert_within(&x, &b.dequantize(), b.d.to_f32());
        // The minimum is stored as m and maps to quant 0.
        assert_eq!(b.m, f16::from_f32(x[0]));
        assert_eq!(b.qs[0] & 0xf, 0);
        assert_eq!(b.qs[15] >> 4, 15);
        assert_eq!(BlockQ4_1::from_bytes(&b.to_bytes()), b);
    }

    #[test]
    fn q5_round_trips() {
        let x = ramp();
        let b = BlockQ5_0::quantize(&x);
        assert_within(&x, &b.dequantize(), b.d.to_f32().abs());
        assert_eq!(BlockQ5_0::from_bytes(&b.to_bytes()), b);
        let b = BlockQ5_1::quantize(&x);
        assert_within(&x, &b.dequantize(), b.d.to_f32());
        assert_eq!((b.quant(0), b.quant(31)), (0, 31));
        assert_eq!(BlockQ5_1::from_bytes(&b.to_bytes()), b);
        // A constant block: d = 0, every weight is the minimum.
        let c = BlockQ5_1::quantize(&[0.25; QK]);
        assert_eq!(c.dequantize(), [0.25; QK]);
        assert_eq!(BlockQ5_0::quantize(&[0.0; QK]).dequantize(), [0.0; QK]);
    }

    #[test]
    fn q5_bit_order_is_ggml_s() {
        // Hand-made q5_0 block: d = 1, qs byte j = j | (15 - j) << 4, qh = 0xffff0000
        // (only the high-nibble weights get their 5th bit).
        let mut bytes = [0u8; 22];
        bytes[..2].copy_from_slice(&f16::from_f32(1.0).to_le_bytes());
        bytes[2..6].copy_from_slice(&0xffff_0000u32.to_le_bytes());
        for j in 0..16 {
            bytes[6 + j] = (j as u8) | ((15 - j as u8) << 4);
        }
        let y = BlockQ5_0::from_bytes(&bytes).dequantize();
        for j in 0..16 {
            assert_eq!(y[j], j as f32 - 16.0, "low {j}");
            assert_eq!(y[j + 16], 15.0 - j as f32, "high {j}");
        }
        // Bit j of qh is weight j's: set only bit 3 and bit 20.
        bytes[2..6].copy_from_slice(&((1u32 << 3) | (1 << 20)).to_le_bytes());
        let b = BlockQ5_0::from_bytes(&bytes);
        assert_eq!(b.quant(3), 16 + 3);
        assert_eq!(b.quant(4), 4);
        assert_eq!(b.quant(20), 16 + 11);
        assert_eq!(b.quant(21), 10);
        assert_eq!(b.to_bytes(), bytes);
        // And quantize puts them back: q5_1 of 0..31 has quant j at weight j.
        let x: [f32; QK] = std::array::from_fn(|j| j as f32);
        let q = BlockQ5_1::quantize(&x);
        assert_eq!(q.qh, 0xffff_0000);
        for j in 0..QK {
            assert_eq!(q.quant(j), j as u8);
        }
    }

    #[test]
    fn repack_keeps_every_byte() {
        let x: Vec<f32> = (0..3 * 64)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 13.0)
            .collect();
        let g = quantize_q5_1(&x);
        assert_eq!(g.len(), 6 * 24);
        let r = repack_q5_1(&g);
        assert_eq!((r.qs.len(), r.qh.len(), r.blocks()), (6 * 16, 6, 6));
        for i in 0..6 {
            let b = BlockQ5_1::from_bytes(g[i * 24..(i + 1) * 24].try_into().unwrap());
            assert_eq!(r.q5_1(i), b);
        }
        assert_eq!(
            r.scale_words()[4],
            u32::from(r.d[4].to_bits()) | (u32::from(r.m[4].to_bits()) << 16)
        );
        let r = repack_q5_0(&quantize_q5_0(&x));
        assert!(r.m.is_empty());
        assert_eq!(r.scale_words().len(), 3);
        assert_eq!(r.scale_words()[1] >> 16, u32::from(r.d[3].to_bits()));
        let g = quantize_q4_1(&x);
        let r = repack_q4_1(&g);
        assert!(r.qh.is_empty());
        assert_eq!(r.q4_1(5).to_bytes()[..], g[5 * 20..6 * 20]);
        assert_eq!(r.slice(2, 4).q4_1(1), r.q4_1(3));
    }
}
