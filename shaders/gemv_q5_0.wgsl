// gemv_q5_0.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with W in GGUF q5_0 blocks
// (32 weights: f16 scale d, 4 bytes qh of 5th bits and 16 bytes qs of
// low 4 bits; byte j of qs holds weight j in its low nibble and weight j + 16 in its
// high nibble, bit j of qh (a little-endian u32) is weight j's 5th bit;
// weight = d * (q - 16)), dequantized in registers, f32 accumulation: per block
// d * (sum q*x - 16 sum x).
// BATCH = 1 is the decode GEMV; BATCH > 1 the skinny matmul.
//
// Repacked layout (kernel-harness/src/quant/legacy.rs): quant bytes of all blocks in
// one array (16 bytes per block, one aligned 16-byte load), qh one word per block in
// a second, f16 scales two per word in a third (as q4_0); bytes per weight stay
// GGUF's 22/32. Each thread step handles one whole block per row.
//
// Host-substituted constants: ROWS, BATCH, ACC (= ROWS * BATCH), PASS.
// Flags: SUBGROUPS.

const WG_SIZE: u32 = 128u;        // threads per workgroup (a 4096-wide row is 128 blocks)
const ROWS: u32 = {{ROWS}}u;      // rows of W per workgroup
const BATCH: u32 = {{BATCH}}u;    // columns of x and y
const ACC: u32 = {{ACC}}u;        // ROWS * BATCH accumulators per thread
const PASS: u32 = {{PASS}}u;      // accumulators reduced per round
const MAX_SUBGROUPS: u32 = 32u;   // WG_SIZE / smallest subgroup size (4)
const VEC: u32 = 32u;             // weights per 16-byte step (one block)

struct Params {
    rows: u32,        // rows of W in this binding (a chunk of the matrix)
    cols: u32,        // K, a multiple of 32
    row_offset: u32,  // index of the chunk's first row in y
    y_stride: u32,    // N, total rows: stride between the batch columns of y
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qs: array<vec4<u32>>;  // [rows, cols / 32]: one block's 16 low-4-bit bytes each
@group(0) @binding(2) var<storage, read> qh: array<u32>;        // [rows, cols / 32]: one block's 5th bits each
@group(0) @binding(3) var<storage, read> d: array<u32>;         // [ceil(rows * cols / 32 / 2)]: f16 scales, two per word
@group(0) @binding(4) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(5) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]

#include gemv_reduce.wgsl

const LO_SHIFT = vec4<u32>(0u, 8u, 16u, 24u);
const HI_SHIFT = vec4<u32>(4u, 12u, 20u, 28u);
const ONES = vec4<f32>(1.0);

fn scale(block: u32) -> f32 {
    return unpack2x16float(d[block >> 1u])[block & 1u];
}

const BIT_UP = vec4<u32>(4u, 3u, 2u, 1u);  // moves bit i of h to bit 4

// 5-bit quants of weights 4j..4j+3: low nibbles of qs word j, 5th bits = the low four
// bits of h = qh >> 4j.
fn lo5(v: u32, h: u32) -> vec4<f32> {
    return vec4<f32>(((vec4<u32>(v) >> LO_SHIFT) & vec4<u32>(15u)) | ((vec4<u32>(h) << BIT_UP) & vec4<u32>(16u)));
}

// 5-bit quants of weights 16+4j..16+4j+3: high nibbles of word j, h = qh >> (16 + 4j).
fn hi5(v: u32, h: u32) -> vec4<f32> {
    return vec4<f32>(((vec4<u32>(v) >> HI_SHIFT) & vec4<u32>(15u)) | ((vec4<u32>(h) << BIT_UP) & vec4<u32>(16u)));
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
    let xs = params.cols / 4u;
    var acc: array<f32, ACC>;
    for (var u = lid; u < units; u += WG_SIZE) {
        var q: array<vec4<u32>, ROWS>;
        var hb: array<u32, ROWS>;
        var sc: array<f32, ROWS>;
        for (var r = 0u; r < ROWS; r++) {
            // Rows past the end re-read the last row; their sums are never stored.
            let row = min(row0 + r, params.rows - 1u);
            q[r] = qs[row * units + u];
            hb[r] = qh[row * units + u];
            sc[r] = scale(row * units + u);
        }
        if (BATCH == 1u) {
            // Decode: x is read once per step and shared by the ROWS rows.
            let xb = 8u * u;
            let xl0 = x[xb];
            let xl1 = x[xb + 1u];
            let xl2 = x[xb + 2u];
            let xl3 = x[xb + 3u];
            let xh0 = x[xb + 4u];
            let xh1 = x[xb + 5u];
            let xh2 = x[xb + 6u];
            let xh3 = x[xb + 7u];
            let sx16 = 16.0 * dot((xl0 + xl1) + (xl2 + xl3) + (xh0 + xh1) + (xh2 + xh3), ONES);
            for (var r = 0u; r < ROWS; r++) {
                let v = q[r];
                let h = hb[r];
                let s = dot(lo5(v.x, h), xl0) + dot(lo5(v.y, h >> 4u), xl1)
                      + dot(lo5(v.z, h >> 8u), xl2) + dot(lo5(v.w, h >> 12u), xl3)
                      + dot(hi5(v.x, h >> 16u), xh0) + dot(hi5(v.y, h >> 20u), xh1)
                      + dot(hi5(v.z, h >> 24u), xh2) + dot(hi5(v.w, h >> 28u), xh3);
                acc[r] += sc[r] * (s - sx16);
            }
        } else {
            // Skinny matmul: unpack each block once, reuse it for every column.
            for (var r = 0u; r < ROWS; r++) {
                let v = q[r];
                let h = hb[r];
                let wl0 = lo5(v.x, h);
                let wl1 = lo5(v.y, h >> 4u);
                let wl2 = lo5(v.z, h >> 8u);
                let wl3 = lo5(v.w, h >> 12u);
                let wh0 = hi5(v.x, h >> 16u);
                let wh1 = hi5(v.y, h >> 20u);
                let wh2 = hi5(v.z, h >> 24u);
                let wh3 = hi5(v.w, h >> 28u);
                for (var b = 0u; b < BATCH; b++) {
                    let xb = b * xs + 8u * u;
                    let x0 = x[xb];
                    let x1 = x[xb + 1u];
                    let x2 = x[xb + 2u];
                    let x3 = x[xb + 3u];
                    let x4 = x[xb + 4u];
                    let x5 = x[xb + 5u];
                    let x6 = x[xb + 6u];
                    let x7 = x[xb + 7u];
                    let sx16 = 16.0 * dot((x0 + x1) + (x2 + x3) + (x4 + x5) + (x6 + x7), ONES);
                    let s = dot(wl0, x0) + dot(wl1, x1) + dot(wl2, x2) + dot(wl3, x3)
                          + dot(wh0, x4) + dot(wh1, x5) + dot(wh2, x6) + dot(wh3, x7);
                    acc[r * BATCH + b] += sc[r] * (s - sx16);
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
