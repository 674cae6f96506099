// gemv_f32.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with f32 weights.
// BATCH = 1 is the decode GEMV; BATCH > 1 the skinny matmul (one weight load feeds
// BATCH columns, which is where decode stops being bandwidth-bound).
//
// One workgroup computes ROWS consecutive rows. Its threads stride along k with
// 16-byte loads (4 weights): each load instruction of the workgroup reads WG_SIZE * 16
// contiguous bytes of a row; x is loaded once per step and reused for the ROWS rows.
// f32 accumulation; reduction in gemv_reduce.wgsl.
//
// Host-substituted constants: ROWS, BATCH, ACC (= ROWS * BATCH), PASS.
// Flags: SUBGROUPS.

const WG_SIZE: u32 = 256u;        // threads per workgroup
const ROWS: u32 = {{ROWS}}u;      // rows of W per workgroup
const BATCH: u32 = {{BATCH}}u;    // columns of x and y
const ACC: u32 = {{ACC}}u;        // ROWS * BATCH accumulators per thread
const PASS: u32 = {{PASS}}u;      // accumulators reduced per round
const MAX_SUBGROUPS: u32 = 64u;   // WG_SIZE / smallest subgroup size (4)
const VEC: u32 = 4u;              // weights per 16-byte load

struct Params {
    rows: u32,        // rows of W in this binding (a chunk of the matrix)
    cols: u32,        // K, a multiple of VEC
    row_offset: u32,  // index of the chunk's first row in y
    y_stride: u32,    // N, total rows: stride between the batch columns of y
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<f32>>;   // [rows, cols / 4]
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(3) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]

#include gemv_reduce.wgsl

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
    var acc: array<f32, ACC>;
    for (var u = lid; u < units; u += WG_SIZE) {
        var wv: array<vec4<f32>, ROWS>;
        for (var r = 0u; r < ROWS; r++) {
            // Rows past the end re-read the last row; their sums are never stored.
            let row = min(row0 + r, params.rows - 1u);
            wv[r] = w[row * units + u];
        }
        for (var b = 0u; b < BATCH; b++) {
            let xv = x[b * units + u];
            for (var r = 0u; r < ROWS; r++) {
                acc[r * BATCH + b] += dot(wv[r], xv);
            }
        }
    }
#ifdef SUBGROUPS
    reduce_store(acc, lid, row0, sg_lane, sg_id, n_sg);
#else
    reduce_store(acc, lid, row0);
#endif
}
