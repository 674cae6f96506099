// gemv_legacy.wgsl: what GGUF's 32-weight block formats (q4_0, q4_1, q5_0, q5_1) share
// (included by their gemv_<format>.wgsl, not a kernel itself). A unit is one block:
// one 16-byte load of its quant bytes, byte j holding weight j in its low nibble and
// weight j + 16 in its high nibble (and, for q5, their fifth bits in a word qh, bit j
// and bit j + 16). The x of a unit (f32, or int8 with XQ8), and the quants unpacked:
// as f32 (with x as f32), or as bytes for dot4I8Packed (XQ8): gemv_nibbles.wgsl.

const VEC: u32 = 32u;  // weights per unit (one block)

#include gemv_nibbles.wgsl

#ifdef XQ8
struct Xu { lo: vec4<u32>, hi: vec4<u32>, d: f32, s: f32 }  // int8 of weights 0..15, 16..31; d; their sum

fn load_xu(u: u32, b: u32) -> Xu {
    let i = xq_at(b, 2u * u);
    let ml = xm[i];
    let mh = xm[i + 1u];
    return Xu(xq[i], xq[i + 1u], ml.x, ml.y + mh.y);
}

// Sum of the unit's quants times x's int8, exact, as f32 (|sum| < 2^16).
fn dot32(lo: vec4<u32>, hi: vec4<u32>, v: Xu) -> f32 {
    return f32(dot16(lo, v.lo) + dot16(hi, v.hi));
}
#else
// x as f32, or as f16 with DEQ16 (QF, gemv_nibbles.wgsl); the sum of the 32 in f32
// (the f32 path takes the quants' offset through it).
struct Xu { l: array<vec4<QF>, 4>, h: array<vec4<QF>, 4>, s: f32 }  // x of weights 0..15, 16..31; their sum

fn load_xu(u: u32, b: u32) -> Xu {
    let i = b * (params.cols / 4u) + 8u * u;
    let l = array<vec4<f32>, 4>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
    let h = array<vec4<f32>, 4>(x[i + 4u], x[i + 5u], x[i + 6u], x[i + 7u]);
    let s = dot((l[0] + l[1]) + (l[2] + l[3]) + (h[0] + h[1]) + (h[2] + h[3]), vec4<f32>(1.0));
    return Xu(array<vec4<QF>, 4>(vec4<QF>(l[0]), vec4<QF>(l[1]), vec4<QF>(l[2]), vec4<QF>(l[3])),
              array<vec4<QF>, 4>(vec4<QF>(h[0]), vec4<QF>(h[1]), vec4<QF>(h[2]), vec4<QF>(h[3])), s);
}

// The unit's quants times x (in f16 with DEQ16), as f32.
fn dot32(w: Quants, v: Xu) -> f32 {
    return f32((dot(w.l[0], v.l[0]) + dot(w.l[1], v.l[1]) + dot(w.l[2], v.l[2]) + dot(w.l[3], v.l[3]))
             + (dot(w.h[0], v.h[0]) + dot(w.h[1], v.h[1]) + dot(w.h[2], v.h[2]) + dot(w.h[3], v.h[3])));
}
#endif
