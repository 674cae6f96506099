// gemv_w16.wgsl: what the 16-bit weight formats share (included by gemv_f16.wgsl and
// gemv_bf16.wgsl, not a kernel itself): their bindings, and a unit of one 16-byte load,
// 8 weights read as u32 words; the includer widens them to f32 (`dequant`).

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;   // [rows, cols / 8]: 8 16-bit weights per element
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

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return dot(q.a, v.a) + dot(q.b, v.b);
}
