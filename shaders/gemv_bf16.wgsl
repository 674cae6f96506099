// gemv_bf16.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with bf16 weights (the top half of
// an f32: widening is a shift), f32 x and f32 accumulation. BATCH = 1 is the decode
// GEMV; BATCH > 1 the skinny matmul.
//
// A unit is one 16-byte load: 8 weights (two per word, the first in the low half).
// The loop, the reduction and the variant constants are gemv_driver.wgsl's.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;   // [rows, cols / 8]: 8 bf16 per element
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(3) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]

const VEC: u32 = 8u;  // weights per unit

struct Unit { v: vec4<u32> }
struct Xu { a: vec4<f32>, b: vec4<f32> }
struct Deq { a: vec4<f32>, b: vec4<f32> }

fn load_unit(row: u32, u: u32) -> Unit {
    return Unit(w[row * (params.cols / VEC) + u]);
}

fn load_xu(u: u32, b: u32) -> Xu {
    let i = b * (params.cols / 4u) + 2u * u;
    return Xu(x[i], x[i + 1u]);
}

const LO = vec4<u32>(16u, 0u, 16u, 0u);
const MASK = vec4<u32>(0xffffffffu, 0xffff0000u, 0xffffffffu, 0xffff0000u);

fn dequant(q: Unit) -> Deq {
    let a = vec4<u32>(q.v.x, q.v.x, q.v.y, q.v.y);
    let b = vec4<u32>(q.v.z, q.v.z, q.v.w, q.v.w);
    return Deq(bitcast<vec4<f32>>((a << LO) & MASK), bitcast<vec4<f32>>((b << LO) & MASK));
}

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return dot(q.a, v.a) + dot(q.b, v.b);
}

#include gemv_driver.wgsl
