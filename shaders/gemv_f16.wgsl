// gemv_f16.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with f16 weights, f32 x and f32
// accumulation. BATCH = 1 is the decode GEMV; BATCH > 1 the skinny matmul.
//
// A unit is one 16-byte load: 8 weights, read as u32 words and converted with
// unpack2x16float (core WGSL: every adapter runs it, shader-f16 or not). Bindings and
// units: gemv_w16.wgsl; the loop, the reduction and the variant: gemv_driver.wgsl.

#include gemv_w16.wgsl

fn dequant(q: Unit) -> Deq {
    return Deq(vec4<f32>(unpack2x16float(q.v.x), unpack2x16float(q.v.y)),
               vec4<f32>(unpack2x16float(q.v.z), unpack2x16float(q.v.w)));
}

#include gemv_driver.wgsl
