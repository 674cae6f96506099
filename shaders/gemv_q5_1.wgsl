// gemv_q5_1.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with W in GGUF q5_1 blocks (32
// weights: f16 scale d and minimum m, 16 bytes of low 4 bits and a word of fifth bits;
// weight = d * q + m, q in 0..32), f32 accumulation: per block d * sum q x + m * sum x.
// BATCH = 1 is the decode GEMV.
//
// Repacked layout (kernel-harness/src/quant/legacy.rs): quant bytes of all blocks in one
// array (one aligned 16-byte load per block), the fifth bits one word per block, (d, m)
// one word per block; bytes per weight stay GGUF's 24/32. Units and x:
// gemv_legacy.wgsl; loop and variant: gemv_driver.wgsl.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qs: array<vec4<u32>>;  // [rows, cols / 32]: one block's 16 low-4-bit bytes each
@group(0) @binding(2) var<storage, read> qh: array<u32>;        // [rows, cols / 32]: one block's 5th bits each
@group(0) @binding(3) var<storage, read> dm: array<u32>;        // [rows, cols / 32]: f16 d (low half) and m (high half) per block
#ifdef XQ8
@group(0) @binding(4) var<storage, read> xq: array<vec4<u32>>;  // [BATCH, cols / 16]: 16 int8 of x each
@group(0) @binding(5) var<storage, read> xm: array<vec2<f32>>;  // [BATCH, cols / 16]: (d of its block, sum of the 16)
@group(0) @binding(6) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]
#else
@group(0) @binding(4) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(5) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]
#endif

#include gemv_legacy.wgsl

struct Unit { q: vec4<u32>, h: u32, dm: u32 }

fn load_unit(row: u32, u: u32) -> Unit {
    let i = row * (params.cols / VEC) + u;
    return Unit(qs[i], qh[i], dm[i]);
}

#ifdef XQ8
struct Deq { lo: vec4<u32>, hi: vec4<u32>, dm: vec2<f32> }

fn dequant(q: Unit) -> Deq {
    return Deq(nib_lo(q.q) | fifth_lo(q.h), nib_hi(q.q) | fifth_hi(q.h), unpack2x16float(q.dm));
}

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return v.d * (q.dm.x * dot32(q.lo, q.hi, v) + q.dm.y * v.s);
}
#else
struct Deq { w: Quants, dm: vec2<f32> }

fn dequant(q: Unit) -> Deq {
    return Deq(quants5(q.q, q.h), unpack2x16float(q.dm));
}

#ifdef DEQ16
const Q_BIAS: f16 = 16.0h;  // the quants come centred: w = d (q - 16) + (m + 16 d)

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return q.dm.x * dot32(q.w, v) + (q.dm.y + 16.0 * q.dm.x) * v.s;
}
#else
fn dot_dx(q: Deq, v: Xu) -> f32 {
    return q.dm.x * dot32(q.w, v) + q.dm.y * v.s;
}
#endif
#endif

#include gemv_driver.wgsl
