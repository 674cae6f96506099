// matmul_naive.wgsl: C[M, N] = A[M, K] x B[K, N] in f32, row-major, one thread per
// output reading its row of A and its column of B straight from memory. The plain
// way: the reference the tiled kernel is checked against.

struct Dims {
    m: u32,
    n: u32,
    k: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> a: array<f32>;        // [M, K]
@group(0) @binding(2) var<storage, read> b: array<f32>;        // [K, N]
@group(0) @binding(3) var<storage, read_write> c: array<f32>;  // [M, N]

@compute @workgroup_size(8, 8, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let col = gid.x;
    let row = gid.y;
    if (row >= dims.m || col >= dims.n) {
        return;
    }
    var acc = 0.0;
    for (var i = 0u; i < dims.k; i++) {
        acc += a[row * dims.k + i] * b[i * dims.n + col];
    }
    c[row * dims.n + col] = acc;
}
