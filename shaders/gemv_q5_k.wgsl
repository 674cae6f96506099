// gemv_q5_k.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with W in GGUF q5_K super-blocks
// (256 weights: f16 d and dmin, 8 sub-blocks of 32 with 6-bit scale sc and min m packed
// in 12 bytes, 128 bytes of low 4 bits and 32 bytes of fifth bits; weight =
// d * sc * q - dmin * m, q in 0..32), f32 accumulation. BATCH = 1 is the decode GEMV.
//
// Repacked layout (kernel-harness/src/quant/kquants.rs): as gemv_q4_k.wgsl, plus the
// fifth bits regrouped into one 32-bit word per unit (bit i: low-nibble weight i, bit
// 16 + i: high-nibble weight i); bits per weight stay GGUF's 5.5. Unit c = 2p + h of a
// super-block holds, in byte i, weight 64p + 16h + i (low nibble, sub-block 2p) and
// weight 64p + 32 + 16h + i (high nibble, sub-block 2p + 1). Unpacking:
// gemv_nibbles.wgsl; x: gemv_kx.wgsl; loop and variant: gemv_driver.wgsl.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qs: array<vec4<u32>>;  // [rows, cols / 32]: 16 quant bytes per unit
@group(0) @binding(2) var<storage, read> qh: array<u32>;        // [rows, cols / 32]: fifth bits, one word per unit
@group(0) @binding(3) var<storage, read> sc: array<u32>;        // [rows, cols / 256, 3]: 12 packed scale/min bytes per super-block
@group(0) @binding(4) var<storage, read> dm: array<u32>;        // [rows, cols / 256]: f16 d (low half) and dmin (high half)
#ifdef XQ8
@group(0) @binding(5) var<storage, read> xq: array<vec4<u32>>;  // [BATCH, cols / 16]: 16 int8 of x each
@group(0) @binding(6) var<storage, read> xm: array<vec2<f32>>;  // [BATCH, cols / 16]: (d of its block, sum of the 16)
@group(0) @binding(7) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]
#else
@group(0) @binding(5) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(6) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]
#endif

const VEC: u32 = 32u;  // weights per unit
#ifdef DEQ16
const Q_BIAS: f16 = 16.0h;  // the quants come centred (gemv_kscales.wgsl adds d1 * Q_BIAS back)
#endif

#include gemv_kscales.wgsl
#include gemv_nibbles.wgsl
#include gemv_kx.wgsl

struct Unit { q: vec4<u32>, h: u32, s0: u32, s1: u32, s2: u32, dm: u32, p: u32 }

fn load_unit(row: u32, u: u32) -> Unit {
    let units = params.cols / VEC;
    let i = row * units + u;
    let sb = row * (units / STEPS) + u / STEPS;
    return Unit(qs[i], qh[i], sc[3u * sb], sc[3u * sb + 1u], sc[3u * sb + 2u], dm[sb], (u % STEPS) >> 1u);
}

fn dequant(q: Unit) -> Deq {
    let f = k4_scales(q.s0, q.s1, q.s2, q.dm, q.p);
#ifdef XQ8
    return Deq(nib_lo(q.q) | fifth_lo(q.h), nib_hi(q.q) | fifth_hi(q.h), f);
#else
    return Deq(quants5(q.q, q.h), f);
#endif
}

#include gemv_driver.wgsl
