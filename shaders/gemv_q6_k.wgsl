// gemv_q6_k.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with W in GGUF q6_K super-blocks
// (256 weights: 128 bytes of low 4 bits, 64 bytes of high 2 bits, 16 int8 scales of 16
// weights each, f16 d; weight = d * scale * (q - 32), q in 0..64), dequantized in
// registers, f32 accumulation: per group d * scale * (sum q x - 32 sum x).
// BATCH = 1 is the decode GEMV.
//
// Repacked layout (kernel-harness/src/quant/kquants.rs): low bits in one array (one
// aligned 16-byte load per thread step of 32 weights), high bits regrouped into two
// 32-bit words per step, scales and d in others; bits per weight stay GGUF's 6.5625.
// Step c = 4n + m of a super-block holds, in byte i, weight 128n + 16m + i (low nibble,
// scale 8n + m) and weight 128n + 64 + 16m + i (high nibble, scale 8n + 4 + m); bits
// 2i, 2i + 1 of its first high-bit word are low weight i's, of its second high weight i's.
//
// Host-substituted constants: ROWS, BATCH, ACC (= ROWS * BATCH), PASS.
// Flags: SUBGROUPS.

const WG_SIZE: u32 = 128u;        // threads per workgroup (a 4096-wide row is 128 steps)
const ROWS: u32 = {{ROWS}}u;      // rows of W per workgroup
const BATCH: u32 = {{BATCH}}u;    // columns of x and y
const ACC: u32 = {{ACC}}u;        // ROWS * BATCH accumulators per thread
const PASS: u32 = {{PASS}}u;      // accumulators reduced per round
const MAX_SUBGROUPS: u32 = 32u;   // WG_SIZE / smallest subgroup size (4)
const VEC: u32 = 32u;             // weights per 16-byte step
const STEPS: u32 = 8u;            // steps per 256-weight super-block

struct Params {
    rows: u32,        // rows of W in this binding (a chunk of the matrix)
    cols: u32,        // K, a multiple of 256
    row_offset: u32,  // index of the chunk's first row in y
    y_stride: u32,    // N, total rows: stride between the batch columns of y
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> ql: array<vec4<u32>>;  // [rows, cols / 32]: 16 low-bit bytes per step
@group(0) @binding(2) var<storage, read> qh: array<vec2<u32>>;  // [rows, cols / 32]: high bits, two words per step
@group(0) @binding(3) var<storage, read> sc: array<u32>;        // [rows, cols / 256, 4]: 16 int8 scales per super-block
@group(0) @binding(4) var<storage, read> d: array<u32>;         // [ceil(rows * cols / 256 / 2)]: f16 d, two per word
@group(0) @binding(5) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(6) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]

#include gemv_reduce.wgsl

const LO_SHIFT = vec4<u32>(0u, 8u, 16u, 24u);
const HI_SHIFT = vec4<u32>(4u, 12u, 20u, 28u);
const ONES = vec4<f32>(1.0);

const H_SHIFT = vec4<u32>(0u, 2u, 4u, 6u);

// Low-nibble weights 4k..4k+3 of a step (word v of its low bits, high-bit word h).
fn lo6(v: u32, h: u32, k: u32) -> vec4<f32> {
    let hb = ((vec4<u32>(h) >> (H_SHIFT + vec4<u32>(8u * k))) & vec4<u32>(3u)) << vec4<u32>(4u);
    return vec4<f32>(((vec4<u32>(v) >> LO_SHIFT) & vec4<u32>(15u)) | hb);
}

// High-nibble weights 4k..4k+3 of a step.
fn hi6(v: u32, h: u32, k: u32) -> vec4<f32> {
    let hb = ((vec4<u32>(h) >> (H_SHIFT + vec4<u32>(8u * k))) & vec4<u32>(3u)) << vec4<u32>(4u);
    return vec4<f32>(((vec4<u32>(v) >> HI_SHIFT) & vec4<u32>(15u)) | hb);
}

// (d * scale[8n + m], d * scale[8n + 4 + m]) of super-block sb.
fn scales(sb: u32, n: u32, m: u32) -> vec2<f32> {
    let w = vec2<u32>(sc[4u * sb + 2u * n], sc[4u * sb + 2u * n + 1u]);
    let s = bitcast<vec2<i32>>(w << vec2<u32>(24u - 8u * m)) >> vec2<u32>(24u);
    return unpack2x16float(d[sb >> 1u])[sb & 1u] * vec2<f32>(s);
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
#ifdef SUBGROUPS
        @builtin(subgroup_invocation_id) sg_lane: u32,
        @builtin(subgroup_id) sg_id: u32,
        @builtin(num_subgroups) n_sg: u32,
#endif
) {
    let row0 = (wid.x + wid.y * nwg.x) * ROWS;
    let units = params.cols / VEC;
    let nb = units / STEPS;
    let xs = params.cols / 4u;
    var acc: array<f32, ACC>;
    for (var u = lid; u < units; u += WG_SIZE) {
        let sbr = u / STEPS;
        let c = u % STEPS;
        let n = c >> 2u;
        let m = c & 3u;
        // x index (vec4) of the step's low weights; its high weights are 16 further.
        let xl = 64u * sbr + 32u * n + 4u * m;
        var q: array<vec4<u32>, ROWS>;
        var hw: array<vec2<u32>, ROWS>;
        var s: array<vec2<f32>, ROWS>;
        for (var r = 0u; r < ROWS; r++) {
            // Rows past the end re-read the last row; their sums are never stored.
            let row = min(row0 + r, params.rows - 1u);
            q[r] = ql[row * units + u];
            hw[r] = qh[row * units + u];
            s[r] = scales(row * nb + sbr, n, m);
        }
        if (BATCH == 1u) {
            let xl0 = x[xl];
            let xl1 = x[xl + 1u];
            let xl2 = x[xl + 2u];
            let xl3 = x[xl + 3u];
            let xh0 = x[xl + 16u];
            let xh1 = x[xl + 17u];
            let xh2 = x[xl + 18u];
            let xh3 = x[xl + 19u];
            let sxl = 32.0 * dot((xl0 + xl1) + (xl2 + xl3), ONES);
            let sxh = 32.0 * dot((xh0 + xh1) + (xh2 + xh3), ONES);
            for (var r = 0u; r < ROWS; r++) {
                let v = q[r];
                let h = hw[r];
                let sl = dot(lo6(v.x, h.x, 0u), xl0) + dot(lo6(v.y, h.x, 1u), xl1) + dot(lo6(v.z, h.x, 2u), xl2) + dot(lo6(v.w, h.x, 3u), xl3);
                let sh = dot(hi6(v.x, h.y, 0u), xh0) + dot(hi6(v.y, h.y, 1u), xh1) + dot(hi6(v.z, h.y, 2u), xh2) + dot(hi6(v.w, h.y, 3u), xh3);
                let f = s[r];
                acc[r] += f.x * (sl - sxl) + f.y * (sh - sxh);
            }
        } else {
            for (var r = 0u; r < ROWS; r++) {
                let v = q[r];
                let h = hw[r];
                let wl0 = lo6(v.x, h.x, 0u);
                let wl1 = lo6(v.y, h.x, 1u);
                let wl2 = lo6(v.z, h.x, 2u);
                let wl3 = lo6(v.w, h.x, 3u);
                let wh0 = hi6(v.x, h.y, 0u);
                let wh1 = hi6(v.y, h.y, 1u);
                let wh2 = hi6(v.z, h.y, 2u);
                let wh3 = hi6(v.w, h.y, 3u);
                let f = s[r];
                for (var b = 0u; b < BATCH; b++) {
                    let xb = b * xs + xl;
                    let x0 = x[xb];
                    let x1 = x[xb + 1u];
                    let x2 = x[xb + 2u];
                    let x3 = x[xb + 3u];
                    let x4 = x[xb + 16u];
                    let x5 = x[xb + 17u];
                    let x6 = x[xb + 18u];
                    let x7 = x[xb + 19u];
                    let sl = dot(wl0, x0) + dot(wl1, x1) + dot(wl2, x2) + dot(wl3, x3);
                    let sh = dot(wh0, x4) + dot(wh1, x5) + dot(wh2, x6) + dot(wh3, x7);
                    let sxl = 32.0 * dot((x0 + x1) + (x2 + x3), ONES);
                    let sxh = 32.0 * dot((x4 + x5) + (x6 + x7), ONES);
                    acc[r * BATCH + b] += f.x * (sl - sxl) + f.y * (sh - sxh);
                }
            }
        }
    }
#ifdef SUBGROUPS
    reduce_store(acc, lid, row0, sg_lane, sg_id, n_sg);
#else
    reduce_store(acc, lid, row0);
#endif
}
