// gemv_kscales.wgsl: what q4_K and q5_K share (included by them, not a kernel itself):
// their 6-bit scales and minimums, their units' x halves, and the dot product of an
// unpacked unit (low and high runs, each with its sub-block's scale and minimum).

// ggml's get_scale_min_k4 on the 12 packed bytes (words s0..s2) of a super-block, for
// the sub-block pair p of a unit, times the super-block's f16 d and dmin (word dm):
// (d * sc[2p], d * sc[2p + 1], dmin * m[2p], dmin * m[2p + 1]).
fn k4_scales(s0: u32, s1: u32, s2: u32, dmw: u32, p: u32) -> vec4<f32> {
    let j = (2u * p) & 3u;
    let sh = vec2<u32>(8u * j, 8u * j + 8u);
    let a = (vec2<u32>(s0) >> sh) & vec2<u32>(255u);
    let b = (vec2<u32>(s1) >> sh) & vec2<u32>(255u);
    var s = a & vec2<u32>(63u);
    var m = b & vec2<u32>(63u);
    if (p >= 2u) {
        let c = (vec2<u32>(s2) >> sh) & vec2<u32>(255u);
        s = (c & vec2<u32>(15u)) | ((a >> vec2<u32>(6u)) << vec2<u32>(4u));
        m = (c >> vec2<u32>(4u)) | ((b >> vec2<u32>(6u)) << vec2<u32>(4u));
    }
    let f = unpack2x16float(dmw);
    return vec4<f32>(f.x * vec2<f32>(s), f.y * vec2<f32>(m));
}

// Units per super-block (256 weights).
const STEPS: u32 = 8u;

// Unit c = 2p + h of a super-block: its low weights 64p + 16h.. (half-block 4p + h),
// its high weights 64p + 32 + 16h.. (half-block 4p + 2 + h).
fn x_halves(u: u32) -> vec2<u32> {
    let c = u % STEPS;
    let lo = 16u * (u / STEPS) + 4u * (c >> 1u) + (c & 1u);
    return vec2<u32>(lo, lo + 2u);
}

// An unpacked unit: its quants (as bytes for dot4I8Packed with XQ8, else as f32)
// and its scales; d1 * sum(q x) - m1 * sum(x) for each run.
#ifdef XQ8
struct Deq { lo: vec4<u32>, hi: vec4<u32>, f: vec4<f32> }

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return v.ml.x * (q.f.x * f32(dot16(q.lo, v.lo)) - q.f.z * v.ml.y)
         + v.mh.x * (q.f.y * f32(dot16(q.hi, v.hi)) - q.f.w * v.mh.y);
}
#else
struct Deq { w: Quants, f: vec4<f32> }

// Each run's quants times x (in f16 with DEQ16: the quants centred by the
// includer's Q_BIAS, whose share, d1 * Q_BIAS, joins the minimum's), as f32.
fn dot_dx(q: Deq, v: Xu) -> f32 {
    let sl = f32(dot(q.w.l[0], v.l[0]) + dot(q.w.l[1], v.l[1]) + dot(q.w.l[2], v.l[2]) + dot(q.w.l[3], v.l[3]));
    let sh = f32(dot(q.w.h[0], v.h[0]) + dot(q.w.h[1], v.h[1]) + dot(q.w.h[2], v.h[2]) + dot(q.w.h[3], v.h[3]));
#ifdef DEQ16
    let m = q.f.zw - f32(Q_BIAS) * q.f.xy;
#else
    let m = q.f.zw;
#endif
    return (q.f.x * sl + q.f.y * sh) - (m.x * v.sl + m.y * v.sh);
}
#endif
