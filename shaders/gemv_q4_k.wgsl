// gemv_q4_k.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with W in GGUF q4_K super-blocks
// (256 weights: f16 d and dmin, 8 sub-blocks of 32 with 6-bit scale sc and min m packed
// in 12 bytes, 128 bytes of 4-bit quants; weight = d * sc * q - dmin * m), dequantized
// in registers, f32 accumulation. BATCH = 1 is the decode GEMV.
//
// Repacked layout (kernel-harness/src/quant/kquants.rs): quant bytes in one array (one
// aligned 16-byte load per thread step of 32 weights), packed scales and (d, dmin) in
// others; bits per weight stay GGUF's 4.5. Step c = 2p + h of a super-block holds, in
// byte i, weight 64p + 16h + i (low nibble, sub-block 2p) and weight 64p + 32 + 16h + i
// (high nibble, sub-block 2p + 1). Per step and row: d1 * sum(q x) - m1 * sum(x) for
// each half.
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
@group(0) @binding(1) var<storage, read> qs: array<vec4<u32>>;  // [rows, cols / 32]: 16 quant bytes per step
@group(0) @binding(2) var<storage, read> sc: array<u32>;        // [rows, cols / 256, 3]: 12 packed scale/min bytes per super-block
@group(0) @binding(3) var<storage, read> dm: array<u32>;        // [rows, cols / 256]: f16 d (low half) and dmin (high half)
@group(0) @binding(4) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(5) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]

#include gemv_reduce.wgsl

const LO_SHIFT = vec4<u32>(0u, 8u, 16u, 24u);
const HI_SHIFT = vec4<u32>(4u, 12u, 20u, 28u);
const ONES = vec4<f32>(1.0);

fn lo4(v: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(v) >> LO_SHIFT) & vec4<u32>(15u));
}

fn hi4(v: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(v) >> HI_SHIFT) & vec4<u32>(15u));
}

// (d * sc[2p], d * sc[2p + 1], dmin * m[2p], dmin * m[2p + 1]) of super-block sb
// (ggml's get_scale_min_k4 on the 12 packed bytes).
fn scales(sb: u32, p: u32) -> vec4<f32> {
    let w0 = sc[3u * sb];
    let w1 = sc[3u * sb + 1u];
    let j = (2u * p) & 3u;
    let sh = vec2<u32>(8u * j, 8u * j + 8u);
    let a = (vec2<u32>(w0) >> sh) & vec2<u32>(255u);
    let b = (vec2<u32>(w1) >> sh) & vec2<u32>(255u);
    var s = a & vec2<u32>(63u);
    var m = b & vec2<u32>(63u);
    if (p >= 2u) {
        let c = (vec2<u32>(sc[3u * sb + 2u]) >> sh) & vec2<u32>(255u);
        s = (c & vec2<u32>(15u)) | ((a >> vec2<u32>(6u)) << vec2<u32>(4u));
        m = (c >> vec2<u32>(4u)) | ((b >> vec2<u32>(6u)) << vec2<u32>(4u));
    }
    let f = unpack2x16float(dm[sb]);
    return vec4<f32>(f.x * vec2<f32>(s), f.y * vec2<f32>(m));
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
        let p = c >> 1u;
        // x index (vec4) of the step's low weights; its high weights are 8 further.
        let xl = 64u * sbr + 16u * p + 4u * (c & 1u);
        var q: array<vec4<u32>, ROWS>;
        var s: array<vec4<f32>, ROWS>;
        for (var r = 0u; r < ROWS; r++) {
            // Rows past the end re-read the last row; their sums are never stored.
            let row = min(row0 + r, params.rows - 1u);
            q[r] = qs[row * units + u];
            s[r] = scales(row * nb + sbr, p);
        }
        if (BATCH == 1u) {
            let xl0 = x[xl];
            let xl1 = x[xl + 1u];
            let xl2 = x[xl + 2u];
            let xl3 = x[xl + 3u];
            let xh0 = x[xl + 8u];
            let xh1 = x[xl + 9u];
            let xh2 = x[xl + 10u];
            let xh3 = x[xl + 11u];
            let sxl = dot((xl0 + xl1) + (xl2 + xl3), ONES);
            let sxh = dot((xh0 + xh1) + (xh2 + xh3), ONES);
            for (var r = 0u; r < ROWS; r++) {
                let v = q[r];
                let sl = dot(lo4(v.x), xl0) + dot(lo4(v.y), xl1) + dot(lo4(v.z), xl2) + dot(lo4(v.w), xl3);
                let sh = dot(hi4(v.x), xh0) + dot(hi4(v.y), xh1) + dot(hi4(v.z), xh2) + dot(hi4(v.w), xh3);
                let f = s[r];
                acc[r] += (f.x * sl + f.y * sh) - (f.z * sxl + f.w * sxh);
            }
        } else {
            for (var r = 0u; r < ROWS; r++) {
                let v = q[r];
                let wl0 = lo4(v.x);
                let wl1 = lo4(v.y);
                let wl2 = lo4(v.z);
                let wl3 = lo4(v.w);
                let wh0 = hi4(v.x);
                let wh1 = hi4(v.y);
                let wh2 = hi4(v.z);
                let wh3 = hi4(v.w);
                let f = s[r];
                for (var b = 0u; b < BATCH; b++) {
                    let xb = b * xs + xl;
                    let x0 = x[xb];
                    let x1 = x[xb + 1u];
                    let x2 = x[xb + 2u];
                    let x3 = x[xb + 3u];
                    let x4 = x[xb + 8u];
                    let x5 = x[xb + 9u];
                    let x6 = x[xb + 10u];
                    let x7 = x[xb + 11u];
                    let sl = dot(wl0, x0) + dot(wl1, x1) + dot(wl2, x2) + dot(wl3, x3);
                    let sh = dot(wh0, x4) + dot(wh1, x5) + dot(wh2, x6) + dot(wh3, x7);
                    let sxl = dot((x0 + x1) + (x2 + x3), ONES);
                    let sxh = dot((x4 + x5) + (x6 + x7), ONES);
                    acc[r * BATCH + b] += (f.x * sl + f.y * sh) - (f.z * sxl + f.w * sxh);
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
