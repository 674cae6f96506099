// gemv_q4_0.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with W in GGUF q4_0 blocks (32
// weights: one f16 scale d and 16 bytes of 4-bit quants q; weight = d * (q - 8)), f32
// accumulation: per block d * (sum q x - 8 sum x). BATCH = 1 is the decode GEMV.
//
// Repacked layout (kernel-harness/src/quant/mod.rs): quant bytes of all blocks in one
// array (one aligned 16-byte load per block), f16 scales in another; bytes per weight
// stay GGUF's 18/32. Units and x: gemv_legacy.wgsl; loop and variant: gemv_driver.wgsl.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qs: array<vec4<u32>>;  // [rows, cols / 32]: one block's 16 quant bytes each
@group(0) @binding(2) var<storage, read> d: array<u32>;         // [ceil(rows * cols / 32 / 2)]: f16 scales, two per word
#ifdef XQ8
@group(0) @binding(3) var<storage, read> xq: array<vec4<u32>>;  // [BATCH, cols / 16]: 16 int8 of x each
@group(0) @binding(4) var<storage, read> xm: array<vec2<f32>>;  // [BATCH, cols / 16]: (d of its block, sum of the 16)
@group(0) @binding(5) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]
#else
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(4) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]
#endif

#include gemv_legacy.wgsl

struct Unit { q: vec4<u32>, dw: u32, odd: u32 }

fn load_unit(row: u32, u: u32) -> Unit {
    let i = row * (params.cols / VEC) + u;
    return Unit(qs[i], d[i >> 1u], i & 1u);
}

#ifdef XQ8
struct Deq { lo: vec4<u32>, hi: vec4<u32>, d: f32 }

fn dequant(q: Unit) -> Deq {
    return Deq(nib_lo(q.q), nib_hi(q.q), unpack2x16float(q.dw)[q.odd]);
}

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return q.d * v.d * (dot32(q.lo, q.hi, v) - 8.0 * v.s);
}
#else
struct Deq { w: Quants, d: f32 }

fn dequant(q: Unit) -> Deq {
    return Deq(quants4(q.q), unpack2x16float(q.dw)[q.odd]);
}

#ifdef DEQ16
const Q_BIAS: f16 = 8.0h;  // the quants come centred

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return q.d * dot32(q.w, v);
}
#else
fn dot_dx(q: Deq, v: Xu) -> f32 {
    return q.d * (dot32(q.w, v) - 8.0 * v.s);
}
#endif
#endif

#include gemv_driver.wgsl
