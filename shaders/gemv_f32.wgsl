// gemv_f32.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with f32 weights. BATCH = 1 is the
// decode GEMV; BATCH > 1 the skinny matmul (one weight load feeds BT columns, which is
// where decode stops being bandwidth-bound).
//
// A unit is one 16-byte load: 4 weights. The loop, the reduction and the variant
// constants are gemv_driver.wgsl's.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<f32>>;   // [rows, cols / 4]
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(3) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]

const VEC: u32 = 4u;  // weights per unit

struct Unit { v: vec4<f32> }
struct Xu { v: vec4<f32> }
alias Deq = Unit;

fn load_unit(row: u32, u: u32) -> Unit {
    return Unit(w[row * (params.cols / VEC) + u]);
}

fn load_xu(u: u32, b: u32) -> Xu {
    return Xu(x[b * (params.cols / 4u) + u]);
}

fn dequant(q: Unit) -> Deq {
    return q;
}

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return dot(q.v, v.v);
}

#include gemv_driver.wgsl
