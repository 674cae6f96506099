// matmul_tiled.wgsl: C[M, N] = A[M, K] x B[K, N] in f32, row-major, through
// workgroup memory: each TILE x TILE workgroup loads a tile of A and a tile of B
// once, then every thread reads them TILE times from there. TILE is a parameter
// (`{{TILE}}`), searched by `tokenscope kernels --shader` (matmul_tiled.toml).

const TILE: u32 = {{TILE}}u;

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

var<workgroup> tile_a: array<f32, TILE * TILE>;
var<workgroup> tile_b: array<f32, TILE * TILE>;

@compute @workgroup_size(TILE, TILE, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.y * TILE + lid.y;
    let col = wid.x * TILE + lid.x;
    var acc = 0.0;
    let tiles = (dims.k + TILE - 1u) / TILE;
    for (var t = 0u; t < tiles; t++) {
        // Outside the matrices a tile holds zeros (odd sizes).
        let ka = t * TILE + lid.x;
        var va = 0.0;
        if (row < dims.m && ka < dims.k) {
            va = a[row * dims.k + ka];
        }
        let kb = t * TILE + lid.y;
        var vb = 0.0;
        if (kb < dims.k && col < dims.n) {
            vb = b[kb * dims.n + col];
        }
        tile_a[lid.y * TILE + lid.x] = va;
        tile_b[lid.y * TILE + lid.x] = vb;
        workgroupBarrier();
        for (var i = 0u; i < TILE; i++) {
            acc += tile_a[lid.y * TILE + i] * tile_b[i * TILE + lid.x];
        }
        workgroupBarrier();
    }
    if (row < dims.m && col < dims.n) {
        c[row * dims.n + col] = acc;
    }
}
