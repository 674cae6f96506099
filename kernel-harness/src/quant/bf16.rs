//! bfloat16: the top half of an f32 (1 sign, 8 exponent, 7 mantissa bits), 2 bytes a
//! weight, stored in GGUF as little-endian u16.
//!
//! The GPU reads a row as 32-bit words, two weights each (even index in the low half),
//! and widens in-shader: `bitcast<f32>(w << 16)` and `bitcast<f32>(w & 0xffff0000)`.
//! No repacking: the GGUF bytes are the GPU's.

/// Converts as ggml's `ggml_compute_fp32_to_bf16`: round to nearest even, NaN kept a
/// (quiet) NaN.
pub fn f32_to_bf16(x: f32) -> u16 {
    let u = x.to_bits();
    if u & 0x7fff_ffff > 0x7f80_0000 {
        // NaN: truncate and force the quiet bit.
        return ((u >> 16) | 64) as u16;
    }
    ((u + (0x7fff + ((u >> 16) & 1))) >> 16) as u16
}

/// Widens as ggml's `ggml_compute_bf16_to_fp32` (exact).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// Converts a row-major f32 matrix to bf16 values.
pub fn quantize_bf16(x: &[f32]) -> Vec<u16> {
    x.iter().map(|&v| f32_to_bf16(v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_to_nearest_even() {
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even (1.0).
        assert_eq!(f32_to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
        assert_eq!(f32_to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
        // Just above halfway rounds up.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
        assert_eq!(f32_to_bf16(-2.5), 0xc020);
        assert_eq!(bf16_to_f32(0xc020), -2.5);
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7f80);
        // Overflows to infinity like ggml.
        assert_eq!(f32_to_bf16(f32::MAX), 0x7f80);
    }

    #[test]
    fn nan_stays_a_quiet_nan() {
        // A signalling NaN whose payload sits in the low half only.
        let snan = f32::from_bits(0x7f80_0001);
        let h = f32_to_bf16(snan);
        assert_eq!(h, 0x7fc0);
        assert!(bf16_to_f32(h).is_nan());
        assert_eq!(f32_to_bf16(f32::from_bits(0xffc1_2345)), 0xffc1);
    }

    #[test]
    fn round_trip_is_exact_on_bf16_values() {
        for h in (0u16..=0xffff).step_by(7) {
            let f = bf16_to_f32(h);
            if !f.is_nan() {
                assert_eq!(f32_to_bf16(f), h);
            }
        }
    }
}
