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

mod q4k;
mod q5k;
mod q6k;
mod repacked;
mod scales;

pub use q4k::BlockQ4K;
pub use q5k::{BlockQ5K, q5k_qh_from_steps, q5k_qh_to_steps};
pub use q6k::{BlockQ6K, q6k_qh_from_steps, q6k_qh_to_steps};
pub use repacked::{
    RepackedK, dequantize_q4_k, dequantize_q5_k, dequantize_q6_k, quantize_q4_k, quantize_q5_k,
    quantize_q6_k, repack_q4_k, repack_q5_k, repack_q6_k,
};
pub use scales::{QK_K, pack_scale_min_k4, scale_min_k4};

#[cfg(test)]
mod tests {
    use half::f16;

    use super::scales::*;
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
