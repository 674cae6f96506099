// gemv_kx.wgsl: x of a K-quant unit (included by gemv_q4_k/q5_k/q6_k.wgsl, not a kernel
// itself). A unit's 32 weights are two runs of 16 ("low" and "high"), each within one
// 32-weight block of x; the includer's x_halves(u) gives their half-block indices (16
// weights each). With XQ8: their int8 and (d, sum); else their f32 and sums.

#ifdef XQ8
#include gemv_q8x.wgsl

struct Xu { lo: vec4<u32>, hi: vec4<u32>, ml: vec2<f32>, mh: vec2<f32> }

fn load_xu(u: u32, b: u32) -> Xu {
    let h = x_halves(u);
    let i = xq_at(b, h.x);
    let j = xq_at(b, h.y);
    return Xu(xq[i], xq[j], xm[i], xm[j]);
}
#else
// x as f32, or as f16 with DEQ16 (QF, gemv_nibbles.wgsl); each run's sum in f32.
struct Xu { l: array<vec4<QF>, 4>, h: array<vec4<QF>, 4>, sl: f32, sh: f32 }

fn load_xu(u: u32, b: u32) -> Xu {
    let hv = x_halves(u);
    let i = b * (params.cols / 4u) + 4u * hv.x;
    let j = b * (params.cols / 4u) + 4u * hv.y;
    let l = array<vec4<f32>, 4>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
    let h = array<vec4<f32>, 4>(x[j], x[j + 1u], x[j + 2u], x[j + 3u]);
    let one = vec4<f32>(1.0);
    return Xu(array<vec4<QF>, 4>(vec4<QF>(l[0]), vec4<QF>(l[1]), vec4<QF>(l[2]), vec4<QF>(l[3])),
              array<vec4<QF>, 4>(vec4<QF>(h[0]), vec4<QF>(h[1]), vec4<QF>(h[2]), vec4<QF>(h[3])),
              dot((l[0] + l[1]) + (l[2] + l[3]), one), dot((h[0] + h[1]) + (h[2] + h[3]), one));
}
#endif
