// gemv_q8_0.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with W in GGUF q8_0 blocks (32
// int8 quants and one f16 scale d; weight = d * q), f32 accumulation. BATCH = 1 is the
// decode GEMV.
//
// Repacked layout (kernel-harness/src/quant/mod.rs): quant bytes of all blocks in one
// array, f16 scales two per word in another; bytes per weight stay GGUF's 34/32. A unit
// is one 16-byte load: half a block. x as f32 (dequantized in registers), or with XQ8
// as int8 (gemv_q8x.wgsl). The loop and the variant are gemv_driver.wgsl's.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qs: array<vec4<u32>>;  // [rows, cols / 16]: 16 int8 quants each
@group(0) @binding(2) var<storage, read> d: array<u32>;         // [ceil(rows * cols / 32 / 2)]: f16 scales, two per word
#ifdef XQ8
@group(0) @binding(3) var<storage, read> xq: array<vec4<u32>>;  // [BATCH, cols / 16]: 16 int8 of x each
@group(0) @binding(4) var<storage, read> xm: array<vec2<f32>>;  // [BATCH, cols / 16]: (d of its block, sum of the 16)
@group(0) @binding(5) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]
#else
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(4) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]
#endif

const VEC: u32 = 16u;  // weights per unit

struct Unit { q: vec4<u32>, dw: u32, odd: u32 }

fn load_unit(row: u32, u: u32) -> Unit {
    let i = row * (params.cols / VEC) + u;
    let block = i >> 1u;
    return Unit(qs[i], d[block >> 1u], block & 1u);
}

fn scale_of(q: Unit) -> f32 {
    return unpack2x16float(q.dw)[q.odd];
}

#ifdef XQ8
#include gemv_q8x.wgsl

struct Xu { q: vec4<u32>, m: vec2<f32> }
struct Deq { q: vec4<u32>, d: f32 }

fn load_xu(u: u32, b: u32) -> Xu {
    let i = xq_at(b, u);
    return Xu(xq[i], xm[i]);
}

fn dequant(q: Unit) -> Deq {
    return Deq(q.q, scale_of(q));
}

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return q.d * v.m.x * f32(dot16(q.q, v.q));
}
#else
struct Xu { v: array<vec4<f32>, 4> }
struct Deq { v: array<vec4<f32>, 4>, d: f32 }

fn load_xu(u: u32, b: u32) -> Xu {
    let i = b * (params.cols / 4u) + 4u * u;
    return Xu(array<vec4<f32>, 4>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]));
}

// Four int8 quants of a word, sign-extended, as f32.
fn sext4(v: u32) -> vec4<f32> {
    let s = vec4<i32>(bitcast<i32>(v << 24u), bitcast<i32>(v << 16u), bitcast<i32>(v << 8u), bitcast<i32>(v));
    return vec4<f32>(s >> vec4<u32>(24u));
}

fn dequant(q: Unit) -> Deq {
    return Deq(array<vec4<f32>, 4>(sext4(q.q.x), sext4(q.q.y), sext4(q.q.z), sext4(q.q.w)), scale_of(q));
}

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return q.d * (dot(q.v[0], v.v[0]) + dot(q.v[1], v.v[1]) + dot(q.v[2], v.v[2]) + dot(q.v[3], v.v[3]));
}
#endif

#include gemv_driver.wgsl
