// gemv_q4_1.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with W in GGUF q4_1 blocks (32
// weights: f16 scale d and minimum m, 16 bytes of 4-bit quants q; weight = d * q + m),
// f32 accumulation: per block d * sum q x + m * sum x. BATCH = 1 is the decode GEMV.
//
// Repacked layout (kernel-harness/src/quant/legacy.rs): quant bytes of all blocks in one
// array (one aligned 16-byte load per block), (d, m) as one word per block in another;
// bytes per weight stay GGUF's 20/32. Units and x: gemv_legacy.wgsl; loop and variant:
// gemv_driver.wgsl.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qs: array<vec4<u32>>;  // [rows, cols / 32]: one block's 16 quant bytes each
@group(0) @binding(2) var<storage, read> dm: array<u32>;        // [rows, cols / 32]: f16 d (low half) and m (high half) per block
#ifdef XQ8
@group(0) @binding(3) var<storage, read> xq: array<vec4<u32>>;  // [BATCH, cols / 16]: 16 int8 of x each
@group(0) @binding(4) var<storage, read> xm: array<vec2<f32>>;  // [BATCH, cols / 16]: (d of its block, sum of the 16)
@group(0) @binding(5) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]
#else
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(4) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]
#endif

#include gemv_legacy.wgsl

struct Unit { q: vec4<u32>, dm: u32 }

fn load_unit(row: u32, u: u32) -> Unit {
    let i = row * (params.cols / VEC) + u;
    return Unit(qs[i], dm[i]);
}

#ifdef XQ8
struct Deq { lo: vec4<u32>, hi: vec4<u32>, dm: vec2<f32> }

fn dequant(q: Unit) -> Deq {
    return Deq(nib_lo(q.q), nib_hi(q.q), unpack2x16float(q.dm));
}

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return v.d * (q.dm.x * dot32(q.lo, q.hi, v) + q.dm.y * v.s);
}
#else
struct Deq { w: Quants, dm: vec2<f32> }

fn dequant(q: Unit) -> Deq {
    return Deq(quants4(q.q), unpack2x16float(q.dm));
}

#ifdef DEQ16
const Q_BIAS: f16 = 8.0h;  // the quants come centred: w = d (q - 8) + (m + 8 d)

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return q.dm.x * dot32(q.w, v) + (q.dm.y + 8.0 * q.dm.x) * v.s;
}
#else
fn dot_dx(q: Deq, v: Xu) -> f32 {
    return q.dm.x * dot32(q.w, v) + q.dm.y * v.s;
}
#endif
#endif

#include gemv_driver.wgsl
