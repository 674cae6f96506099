// add.wgsl: the residual connection, h[i] += delta[i].

const WG_SIZE: u32 = 256u;  // threads per workgroup

struct Params {
    n: u32,      // vector length
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> delta: array<f32>;     // [n]
@group(0) @binding(2) var<storage, read_write> h: array<f32>;   // [n]

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG_SIZE;
    if (i >= params.n) {
        return;
    }
    h[i] += delta[i];
}
