// gemv_f16.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with f16 weights, f32 x and f32
// accumulation. BATCH = 1 is the decode GEMV; BATCH > 1 the skinny matmul.
//
// A unit is one 16-byte load: 8 weights, read as u32 words and converted with
// unpack2x16float (core WGSL: every adapter runs it, shader-f16 or not). The loop, the
// reduction and the variant constants are gemv_driver.wgsl's.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;   // [rows, cols / 8]: 8 f16 per element
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

fn dequant(q: Unit) -> Deq {
    return Deq(vec4<f32>(unpack2x16float(q.v.x), unpack2x16float(q.v.y)),
               vec4<f32>(unpack2x16float(q.v.z), unpack2x16float(q.v.w)));
}

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return dot(q.a, v.a) + dot(q.b, v.b);
}

#include gemv_driver.wgsl
