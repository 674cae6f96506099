// gemv_nibbles.wgsl: unpacking a 16-byte unit of 4-bit quants (included by the q4/q5
// GEMVs, legacy and K, not a kernel itself): byte i holds "low" weight i in its low
// nibble and "high" weight i in its high nibble (for q4_0..q5_1 the weights i and
// i + 16 of a block; for q4_K/q5_K those of two sub-blocks), and for the q5 formats
// their fifth bits in a word h (bit i: low weight i, bit 16 + i: high weight i).
// As f32 (x as f32), as bytes for dot4I8Packed (XQ8, x as int8), or as f16 minus the
// includer's Q_BIAS (DEQ16, x as f16: the 4- and 5-bit formats).

#ifdef XQ8
#include gemv_q8x.wgsl

// Quant bytes of the low weights (low nibbles) and the high weights (high nibbles).
fn nib_lo(q: vec4<u32>) -> vec4<u32> {
    return q & vec4<u32>(NIB);
}

fn nib_hi(q: vec4<u32>) -> vec4<u32> {
    return (q >> vec4<u32>(4u)) & vec4<u32>(NIB);
}

// Fifth bits of the low and the high weights, as bit 4 of their bytes.
fn fifth_lo(h: u32) -> vec4<u32> {
    return vec4<u32>(spread1(h), spread1(h >> 4u), spread1(h >> 8u), spread1(h >> 12u)) << vec4<u32>(4u);
}

fn fifth_hi(h: u32) -> vec4<u32> {
    return vec4<u32>(spread1(h >> 16u), spread1(h >> 20u), spread1(h >> 24u), spread1(h >> 28u)) << vec4<u32>(4u);
}
#else
const LO_SHIFT = vec4<u32>(0u, 8u, 16u, 24u);
const HI_SHIFT = vec4<u32>(4u, 12u, 20u, 28u);
const BIT_UP = vec4<u32>(4u, 3u, 2u, 1u);  // moves bit i of h to bit 4

#ifdef DEQ16
// f16: the quants minus the includer's Q_BIAS (8, 16), centred and exact in f16,
// for f16 products with x in f16 (gemv_legacy.wgsl, gemv_kx.wgsl); the includer
// adds the centre back through x's sum in f32 where its format has a minimum. Converted, not
// ORed into the mantissa of 1024.0h as llama.cpp does (two weights an operation):
// naga cannot bitcast a u32 to vec2<f16> yet (gfx-rs/wgpu#8896).
alias QF = f16;

fn as_weights(q: vec4<u32>) -> vec4<f16> {
    return vec4<f16>(q) - vec4<f16>(Q_BIAS);
}
#else
// f32: the quants as they are (the includer takes the offset through x's sum).
alias QF = f32;

fn as_weights(q: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(q);
}
#endif

struct Quants { l: array<vec4<QF>, 4>, h: array<vec4<QF>, 4> }  // low weights, high weights

// The 4-bit quants (low weights 4j..4j+3 in the low nibbles of word j, high weights
// 4j..4j+3 in its high nibbles).
fn quants4(q: vec4<u32>) -> Quants {
    var w: Quants;
    for (var j = 0u; j < 4u; j++) {
        w.l[j] = as_weights((vec4<u32>(q[j]) >> LO_SHIFT) & vec4<u32>(15u));
        w.h[j] = as_weights((vec4<u32>(q[j]) >> HI_SHIFT) & vec4<u32>(15u));
    }
    return w;
}

// The 5-bit quants: fifth bits from h (bit i: low weight i, bit 16 + i: high weight i).
fn quants5(q: vec4<u32>, h: u32) -> Quants {
    var w: Quants;
    for (var j = 0u; j < 4u; j++) {
        let hl = (vec4<u32>(h >> (4u * j)) << BIT_UP) & vec4<u32>(16u);
        let hh = (vec4<u32>(h >> (16u + 4u * j)) << BIT_UP) & vec4<u32>(16u);
        w.l[j] = as_weights(((vec4<u32>(q[j]) >> LO_SHIFT) & vec4<u32>(15u)) | hl);
        w.h[j] = as_weights(((vec4<u32>(q[j]) >> HI_SHIFT) & vec4<u32>(15u)) | hh);
    }
    return w;
}
#endif
