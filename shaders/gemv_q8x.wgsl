// gemv_q8x.wgsl: helpers of the XQ8 variants of the quantized GEMVs (included by them,
// not a kernel itself). With XQ8, x comes quantized by quantize_x.wgsl: int8 in blocks
// of 32 with one f32 scale, stored per half-block of 16 weights (one vec4<u32> of int8
// in xq, and (d of its block, sum of its 16 int8) in xm). A unit's integer quants meet
// them in dot4I8Packed (4 multiply-adds per instruction, exact integer sums), and the
// scales are applied once per half-block: as llama.cpp's q8_1 path. The weights' quants
// (0..63, or -128..127 for q8_0) are exact in int8 bytes.

const NIB: u32 = 0x0F0F0F0Fu;  // the low nibble of every byte

// Half-block hb (16 weights) of column b of x.
fn xq_at(b: u32, hb: u32) -> u32 {
    return b * (params.cols / 16u) + hb;
}

// Exact integer dot product of 16 byte quants with 16 int8 of x.
fn dot16(w: vec4<u32>, v: vec4<u32>) -> i32 {
    return dot4I8Packed(w.x, v.x) + dot4I8Packed(w.y, v.y)
         + dot4I8Packed(w.z, v.z) + dot4I8Packed(w.w, v.w);
}

// Bits 0..3 of t to bit 0 of bytes 0..3 (the four shifted copies never overlap, so
// the multiply is an OR).
fn spread1(t: u32) -> u32 {
    return ((t & 15u) * 0x00204081u) & 0x01010101u;
}

// Bit pairs 0..3 of t (bits 2i, 2i + 1) to bits 0..1 of bytes 0..3.
fn spread2(t: u32) -> u32 {
    let s = t & 255u;
    return (s | (s << 6u) | (s << 12u) | (s << 18u)) & 0x03030303u;
}
