//! Seeded, counter-based input data.
//!
//! Every word of every input buffer is a pure function of `(seed, index)` (a PCG hash),
//! so the GPU fills its buffers itself (`shaders/fill.wgsl`, no upload of gigabytes) and
//! the CPU reference regenerates any element it needs without storing the matrix.
//! The values are chosen to be exactly representable in f16 and f32, so the GPU's
//! float conversions cannot round them differently from the CPU's.

use half::f16;

/// How a fill turns hash words into buffer words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum FillMode {
    /// The hash itself (quant bytes, bandwidth data).
    Bits = 0,
    /// One f32 in [-1, 1) on a 2^-23 grid.
    F32 = 1,
    /// Two f16 in [-1, 1) on a 2^-10 grid (low half = even element).
    F16Pair = 2,
    /// Two f16 block scales in [2^-7, 2^-6) on a 2^-13 grid.
    ScalePair = 3,
    /// Two bf16 in [-1, 1) on a 2^-7 grid (low half = even element).
    Bf16Pair = 4,
}

/// The PCG RXS-M-XS 32-bit hash (a bijection on u32), as in `shaders/fill.wgsl`.
pub fn pcg(v: u32) -> u32 {
    let state = v.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let word = ((state >> ((state >> 28) + 4)) ^ state).wrapping_mul(277_803_737);
    (word >> 22) ^ word
}

/// Derives the per-buffer key from a seed and a stream id (weights, x, k, v, ...).
pub fn key(seed: u64, stream: u32) -> u32 {
    let lo = seed as u32;
    let hi = (seed >> 32) as u32;
    pcg(pcg(lo ^ 0x9e37_79b9).wrapping_add(hi) ^ pcg(stream.wrapping_add(0x85eb_ca6b)))
}

/// The raw hash word at `index` of the stream keyed `key`.
pub fn hash_word(key: u32, index: u32) -> u32 {
    pcg(index ^ key)
}

/// The buffer word a fill writes at `index`.
pub fn fill_word(mode: FillMode, key: u32, index: u32) -> u32 {
    let h = hash_word(key, index);
    match mode {
        FillMode::Bits => h,
        FillMode::F32 => f32_from_hash(h).to_bits(),
        FillMode::F16Pair => {
            let [a, b] = f16_pair_from_hash(h);
            u32::from(a.to_bits()) | (u32::from(b.to_bits()) << 16)
        }
        FillMode::ScalePair => {
            let [a, b] = scale_pair_from_hash(h);
            u32::from(a.to_bits()) | (u32::from(b.to_bits()) << 16)
        }
        FillMode::Bf16Pair => {
            let [a, b] = bf16_pair_from_hash(h);
            (a.to_bits() >> 16) | (b.to_bits() & 0xffff_0000)
        }
    }
}

fn f32_from_hash(h: u32) -> f32 {
    ((h >> 8) as i32 - (1 << 23)) as f32 / (1u32 << 23) as f32
}

fn f16_pair_from_hash(h: u32) -> [f16; 2] {
    let a = ((h & 0x7ff) as i32 - 1024) as f32 / 1024.0;
    let b = (((h >> 16) & 0x7ff) as i32 - 1024) as f32 / 1024.0;
    [f16::from_f32(a), f16::from_f32(b)]
}

fn scale_pair_from_hash(h: u32) -> [f16; 2] {
    let a = (64 + (h & 63)) as f32 / 8192.0;
    let b = (64 + ((h >> 16) & 63)) as f32 / 8192.0;
    [f16::from_f32(a), f16::from_f32(b)]
}

fn bf16_pair_from_hash(h: u32) -> [f32; 2] {
    // 8 significant bits at most: exact in bf16.
    let a = ((h & 0xff) as i32 - 128) as f32 / 128.0;
    let b = (((h >> 16) & 0xff) as i32 - 128) as f32 / 128.0;
    [a, b]
}

/// Element `i` of a bf16 stream (two elements per word), widened to f32 (exact).
pub fn bf16_at(key: u32, i: u64) -> f32 {
    bf16_pair_from_hash(hash_word(key, (i / 2) as u32))[(i % 2) as usize]
}

/// The key of the 5th-bit (`qh`) stream of a q5 matrix whose quant bytes use `weights`.
pub fn qh_key(weights: u32) -> u32 {
    pcg(weights ^ 0x5135_0005)
}

/// Element `i` of an f32 stream.
pub fn f32_at(key: u32, i: u64) -> f32 {
    f32_from_hash(hash_word(key, i as u32))
}

/// Element `i` of an f16 stream (two elements per word).
pub fn f16_at(key: u32, i: u64) -> f16 {
    f16_pair_from_hash(hash_word(key, (i / 2) as u32))[(i % 2) as usize]
}

/// Block scale `i` of a scale stream (two scales per word).
pub fn scale_at(key: u32, i: u64) -> f16 {
    scale_pair_from_hash(hash_word(key, (i / 2) as u32))[(i % 2) as usize]
}

/// Byte `i` of a bits stream (little-endian within each word).
pub fn byte_at(key: u32, i: u64) -> u8 {
    hash_word(key, (i / 4) as u32).to_le_bytes()[(i % 4) as usize]
}

/// The first `n` elements of an f32 stream.
pub fn f32_vec(key: u32, n: usize) -> Vec<f32> {
    (0..n as u64).map(|i| f32_at(key, i)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_exact_and_in_range() {
        let k = key(42, 1);
        for i in 0..10_000u64 {
            let x = f32_at(k, i);
            assert!((-1.0..1.0).contains(&x));
            let h = f16_at(k, i);
            assert!((-1.0..1.0).contains(&h.to_f32()));
            // Exact: converting back and forth loses nothing.
            assert_eq!(f16::from_f32(h.to_f32()), h);
            let s = scale_at(k, i).to_f32();
            assert!((1.0 / 128.0..1.0 / 64.0).contains(&s), "{s}");
        }
        assert_ne!(key(1, 0), key(2, 0));
        assert_ne!(key(1, 0), key(1, 1));
        assert_eq!(pcg(0), 129_708_002); // pins the hash shared with fill.wgsl
    }

    #[test]
    fn words_match_element_accessors() {
        let k = key(7, 3);
        let w = fill_word(FillMode::F16Pair, k, 5);
        assert_eq!(w & 0xffff, u32::from(f16_at(k, 10).to_bits()));
        assert_eq!(w >> 16, u32::from(f16_at(k, 11).to_bits()));
        let w = fill_word(FillMode::Bits, k, 9);
        assert_eq!(w.to_le_bytes()[2], byte_at(k, 38));
        assert_eq!(fill_word(FillMode::F32, k, 4), f32_at(k, 4).to_bits());
        let w = fill_word(FillMode::Bf16Pair, k, 6);
        assert_eq!(f32::from_bits(w << 16), bf16_at(k, 12));
        assert_eq!(f32::from_bits(w & 0xffff_0000), bf16_at(k, 13));
        assert!((-1.0..1.0).contains(&bf16_at(k, 13)));
        assert_ne!(qh_key(k), k);
    }
}
