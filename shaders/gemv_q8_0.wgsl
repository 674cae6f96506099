// gemv_q8_0.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with W in GGUF q8_0 blocks
// (32 weights: one f16 scale d and 32 int8 quants, weight = d * q), dequantized in
// registers, f32 accumulation. BATCH = 1 is the decode GEMV; BATCH > 1 skinny matmul.
//
// Repacked layout (kernel-harness/src/quant/mod.rs): the quant bytes of all blocks in one
// array, the f16 scales in another, so quants load as aligned 16-byte words; the bytes
// per weight stay GGUF's 34/32.
// Each thread step handles half a block (16 quants, one 16-byte load) per row.
//
// Host-substituted constants: ROWS, BATCH, ACC (= ROWS * BATCH), PASS.
// Flags: SUBGROUPS.

const WG_SIZE: u32 = 256u;        // threads per workgroup
const ROWS: u32 = {{ROWS}}u;      // rows of W per workgroup
const BATCH: u32 = {{BATCH}}u;    // columns of x and y
const ACC: u32 = {{ACC}}u;        // ROWS * BATCH accumulators per thread
const PASS: u32 = {{PASS}}u;      // accumulators reduced per round
const MAX_SUBGROUPS: u32 = 64u;   // WG_SIZE / smallest subgroup size (4)
const VEC: u32 = 16u;             // weights per 16-byte step (half a block)

struct Params {
    rows: u32,        // rows of W in this binding (a chunk of the matrix)
    cols: u32,        // K, a multiple of 32
    row_offset: u32,  // index of the chunk's first row in y
    y_stride: u32,    // N, total rows: stride between the batch columns of y
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qs: array<vec4<u32>>;  // [rows, cols / 16]: 16 int8 quants each
@group(0) @binding(2) var<storage, read> d: array<u32>;         // [ceil(rows * cols / 32 / 2)]: f16 scales, two per word
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(4) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]

#include gemv_reduce.wgsl

// Four int8 quants of a word, sign-extended, as f32.
fn sext4(v: u32) -> vec4<f32> {
    let s = vec4<i32>(bitcast<i32>(v << 24u), bitcast<i32>(v << 16u), bitcast<i32>(v << 8u), bitcast<i32>(v));
    return vec4<f32>(s >> vec4<u32>(24u));
}

fn scale(block: u32) -> f32 {
    return unpack2x16float(d[block >> 1u])[block & 1u];
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
        var wv: array<vec4<f32>, 4 * ROWS>;
        var sc: array<f32, ROWS>;
        for (var r = 0u; r < ROWS; r++) {
            // Rows past the end re-read the last row; their sums are never stored.
            let row = min(row0 + r, params.rows - 1u);
            let q = qs[row * units + u];
            sc[r] = scale((row * units + u) >> 1u);
            wv[4u * r] = sext4(q.x);
            wv[4u * r + 1u] = sext4(q.y);
            wv[4u * r + 2u] = sext4(q.z);
            wv[4u * r + 3u] = sext4(q.w);
        }
        for (var b = 0u; b < BATCH; b++) {
            let xb = b * xs + 4u * u;
            let x0 = x[xb];
            let x1 = x[xb + 1u];
            let x2 = x[xb + 2u];
            let x3 = x[xb + 3u];
            for (var r = 0u; r < ROWS; r++) {
                let s = dot(wv[4u * r], x0) + dot(wv[4u * r + 1u], x1)
                      + dot(wv[4u * r + 2u], x2) + dot(wv[4u * r + 3u], x3);
                acc[r * BATCH + b] += sc[r] * s;
            }
        }
    }
#ifdef SUBGROUPS
    reduce_store(acc, lid, row0, sg_lane, sg_id, n_sg);
#else
    reduce_store(acc, lid, row0);
#endif
}
