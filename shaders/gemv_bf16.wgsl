// gemv_bf16.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with bf16 weights (the top half of
// an f32: widening is a shift), f32 x and f32 accumulation. BATCH = 1 is the decode
// GEMV; BATCH > 1 the skinny matmul.
//
// A unit is one 16-byte load: 8 weights (two per word, the first in the low half).
// Bindings and units: gemv_w16.wgsl; the loop, the reduction and the variant:
// gemv_driver.wgsl.

#include gemv_w16.wgsl

const LO = vec4<u32>(16u, 0u, 16u, 0u);
const MASK = vec4<u32>(0xffffffffu, 0xffff0000u, 0xffffffffu, 0xffff0000u);

fn dequant(q: Unit) -> Deq {
    let a = vec4<u32>(q.v.x, q.v.x, q.v.y, q.v.y);
    let b = vec4<u32>(q.v.z, q.v.z, q.v.w, q.v.w);
    return Deq(bitcast<vec4<f32>>((a << LO) & MASK), bitcast<vec4<f32>>((b << LO) & MASK));
}

#include gemv_driver.wgsl
