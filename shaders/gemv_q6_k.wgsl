// gemv_q6_k.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with W in GGUF q6_K super-blocks
// (256 weights: 128 bytes of low 4 bits, 64 bytes of high 2 bits, 16 int8 scales of 16
// weights each, f16 d; weight = d * scale * (q - 32), q in 0..64), f32 accumulation:
// per group d * scale * (sum q x - 32 sum x). BATCH = 1 is the decode GEMV.
//
// Repacked layout (kernel-harness/src/quant/kquants.rs): low bits in one array (one
// aligned 16-byte load per unit of 32 weights), high bits regrouped into two 32-bit
// words per unit, scales and d in others; bits per weight stay GGUF's 6.5625. Unit
// c = 4n + m of a super-block holds, in byte i, weight 128n + 16m + i (low nibble,
// scale 8n + m) and weight 128n + 64 + 16m + i (high nibble, scale 8n + 4 + m); bits
// 2i, 2i + 1 of its first high-bit word are low weight i's, of its second high weight
// i's. x: gemv_kx.wgsl; loop and variant: gemv_driver.wgsl.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> ql: array<vec4<u32>>;  // [rows, cols / 32]: 16 low-bit bytes per unit
@group(0) @binding(2) var<storage, read> qh: array<vec2<u32>>;  // [rows, cols / 32]: high bits, two words per unit
@group(0) @binding(3) var<storage, read> sc: array<u32>;        // [rows, cols / 256, 4]: 16 int8 scales per super-block
@group(0) @binding(4) var<storage, read> d: array<u32>;         // [ceil(rows * cols / 256 / 2)]: f16 d, two per word
#ifdef XQ8
@group(0) @binding(5) var<storage, read> xq: array<vec4<u32>>;  // [BATCH, cols / 16]: 16 int8 of x each
@group(0) @binding(6) var<storage, read> xm: array<vec2<f32>>;  // [BATCH, cols / 16]: (d of its block, sum of the 16)
@group(0) @binding(7) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]
#else
@group(0) @binding(5) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(6) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]
#endif

const VEC: u32 = 32u;   // weights per unit
const STEPS: u32 = 8u;  // units per 256-weight super-block

// Unit c = 4n + m: low weights 128n + 16m.. (half-block 8n + m), high weights 64
// further (half-block 8n + m + 4).
fn x_halves(u: u32) -> vec2<u32> {
    let c = u % STEPS;
    let lo = 16u * (u / STEPS) + 8u * (c >> 2u) + (c & 3u);
    return vec2<u32>(lo, lo + 4u);
}

alias QF = f32;  // x as f32 (gemv_kx.wgsl; no f16 path for q6_K)

#include gemv_kx.wgsl

struct Unit { q: vec4<u32>, h: vec2<u32>, s: vec2<u32>, dw: u32, sb: u32, m: u32 }

fn load_unit(row: u32, u: u32) -> Unit {
    let units = params.cols / VEC;
    let i = row * units + u;
    let sb = row * (units / STEPS) + u / STEPS;
    let c = u % STEPS;
    let n = c >> 2u;
    return Unit(ql[i], qh[i], vec2<u32>(sc[4u * sb + 2u * n], sc[4u * sb + 2u * n + 1u]), d[sb >> 1u], sb, c & 3u);
}

// (d * scale[8n + m], d * scale[8n + 4 + m]) of the unit's super-block.
fn k6_scales(q: Unit) -> vec2<f32> {
    let s = bitcast<vec2<i32>>(q.s << vec2<u32>(24u - 8u * q.m)) >> vec2<u32>(24u);
    return unpack2x16float(q.dw)[q.sb & 1u] * vec2<f32>(s);
}

#ifdef XQ8
struct Deq { lo: vec4<u32>, hi: vec4<u32>, f: vec2<f32> }

fn dequant(q: Unit) -> Deq {
    var lo: vec4<u32>;
    var hi: vec4<u32>;
    for (var j = 0u; j < 4u; j++) {
        lo[j] = (q.q[j] & NIB) | (spread2(q.h.x >> (8u * j)) << 4u);
        hi[j] = ((q.q[j] >> 4u) & NIB) | (spread2(q.h.y >> (8u * j)) << 4u);
    }
    return Deq(lo, hi, k6_scales(q));
}

fn dot_dx(q: Deq, v: Xu) -> f32 {
    return q.f.x * v.ml.x * (f32(dot16(q.lo, v.lo)) - 32.0 * v.ml.y)
         + q.f.y * v.mh.x * (f32(dot16(q.hi, v.hi)) - 32.0 * v.mh.y);
}
#else
const LO_SHIFT = vec4<u32>(0u, 8u, 16u, 24u);
const HI_SHIFT = vec4<u32>(4u, 12u, 20u, 28u);
const H_SHIFT = vec4<u32>(0u, 2u, 4u, 6u);

struct Deq { l: array<vec4<f32>, 4>, h: array<vec4<f32>, 4>, f: vec2<f32> }

// Low weights 4k..4k+3 from low-bit word v and high-bit word h; high weights alike.
fn dequant(q: Unit) -> Deq {
    var w: Deq;
    for (var k = 0u; k < 4u; k++) {
        let bl = ((vec4<u32>(q.h.x) >> (H_SHIFT + vec4<u32>(8u * k))) & vec4<u32>(3u)) << vec4<u32>(4u);
        let bh = ((vec4<u32>(q.h.y) >> (H_SHIFT + vec4<u32>(8u * k))) & vec4<u32>(3u)) << vec4<u32>(4u);
        w.l[k] = vec4<f32>(((vec4<u32>(q.q[k]) >> LO_SHIFT) & vec4<u32>(15u)) | bl);
        w.h[k] = vec4<f32>(((vec4<u32>(q.q[k]) >> HI_SHIFT) & vec4<u32>(15u)) | bh);
    }
    w.f = k6_scales(q);
    return w;
}

fn dot_dx(q: Deq, v: Xu) -> f32 {
    let sl = dot(q.l[0], v.l[0]) + dot(q.l[1], v.l[1]) + dot(q.l[2], v.l[2]) + dot(q.l[3], v.l[3]);
    let sh = dot(q.h[0], v.h[0]) + dot(q.h[1], v.h[1]) + dot(q.h[2], v.h[2]) + dot(q.h[3], v.h[3]);
    return q.f.x * (sl - 32.0 * v.sl) + q.f.y * (sh - 32.0 * v.sh);
}
#endif

#include gemv_driver.wgsl
