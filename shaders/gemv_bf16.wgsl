// gemv_bf16.wgsl: y[b, r] = sum_k W[r, k] * x[b, k] with bf16 weights, f32 x and
// f32 accumulation. BATCH = 1 is the decode GEMV; BATCH > 1 the skinny matmul.
//
// bf16 is the top half of an f32, so widening is a shift: word w holds weights 2i (low
// half) and 2i + 1 (high half): bitcast<f32>(w << 16) and bitcast<f32>(w & 0xffff0000).
// The layout is GGUF's (row-major little-endian u16), 2 bytes per weight.
// One workgroup computes ROWS consecutive rows; threads stride along k, 8 weights
// (16 bytes) per step.
//
// Host-substituted constants: ROWS, BATCH, ACC (= ROWS * BATCH), PASS.
// Flags: SUBGROUPS.

const WG_SIZE: u32 = 256u;        // threads per workgroup
const ROWS: u32 = {{ROWS}}u;      // rows of W per workgroup
const BATCH: u32 = {{BATCH}}u;    // columns of x and y
const ACC: u32 = {{ACC}}u;        // ROWS * BATCH accumulators per thread
const PASS: u32 = {{PASS}}u;      // accumulators reduced per round
const MAX_SUBGROUPS: u32 = 64u;   // WG_SIZE / smallest subgroup size (4)
const VEC: u32 = 8u;              // weights per 16-byte step

struct Params {
    rows: u32,        // rows of W in this binding (a chunk of the matrix)
    cols: u32,        // K, a multiple of VEC
    row_offset: u32,  // index of the chunk's first row in y
    y_stride: u32,    // N, total rows: stride between the batch columns of y
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;   // [rows, cols / 8]: 8 bf16 per element
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;   // [BATCH, cols / 4]
@group(0) @binding(3) var<storage, read_write> y: array<f32>;   // [BATCH, y_stride]

#include gemv_reduce.wgsl


// Weights 8 unit .. 8 unit + 7 of the matrix's flat index space (16 bytes).
fn load8(unit: u32) -> array<vec4<f32>, 2> {
    let q = w[unit];
    let a = vec4<u32>(q.x, q.x, q.y, q.y);
    let b = vec4<u32>(q.z, q.z, q.w, q.w);
    let lo = vec4<u32>(16u, 0u, 16u, 0u);
    let mask = vec4<u32>(0xffffffffu, 0xffff0000u, 0xffffffffu, 0xffff0000u);
    return array<vec4<f32>, 2>(
        bitcast<vec4<f32>>((a << lo) & mask),
        bitcast<vec4<f32>>((b << lo) & mask));
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
        var wv: array<vec4<f32>, 2 * ROWS>;
        for (var r = 0u; r < ROWS; r++) {
            // Rows past the end re-read the last row; their sums are never stored.
            let row = min(row0 + r, params.rows - 1u);
            let v = load8(row * units + u);
            wv[2u * r] = v[0];
            wv[2u * r + 1u] = v[1];
        }
        for (var b = 0u; b < BATCH; b++) {
            let x0 = x[b * xs + 2u * u];
            let x1 = x[b * xs + 2u * u + 1u];
            for (var r = 0u; r < ROWS; r++) {
                acc[r * BATCH + b] += dot(wv[2u * r], x0) + dot(wv[2u * r + 1u], x1);
            }
        }
    }
#ifdef SUBGROUPS
    reduce_store(acc, lid, row0, sg_lane, sg_id, n_sg);
#else
    reduce_store(acc, lid, row0);
#endif
}
