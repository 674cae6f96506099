// bandwidth_copy.wgsl: device-to-device copy by a compute kernel (not
// copy_buffer_to_buffer), 16-byte words, grid stride, UNROLL loads in flight.
// Bytes moved = read + written. The variant as bandwidth_read.wgsl's.
// Host-substituted constants: WG_SIZE, UNROLL.

const WG_SIZE: u32 = {{WG_SIZE}}u;  // threads per workgroup
const UNROLL: u32 = {{UNROLL}}u;    // independent 16-byte loads per loop step

struct Params {
    vec4s: u32,   // 16-byte words to copy
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;        // [vec4s]
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;  // [vec4s]

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * nwg.y * WG_SIZE;
    let n = params.vec4s;
    var i = (wid.x + wid.y * nwg.x) * WG_SIZE + lid;
    loop {
        if (i + (UNROLL - 1u) * stride >= n) {
            break;
        }
        for (var j = 0u; j < UNROLL; j++) {
            dst[i + j * stride] = src[i + j * stride];
        }
        i += UNROLL * stride;
    }
    for (; i < n; i += stride) {
        dst[i] = src[i];
    }
}
