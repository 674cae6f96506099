// bandwidth_read.wgsl: read-only streaming kernel, the bandwidth ceiling.
//
// Every thread streams 16-byte words with a grid stride (UNROLL independent loads in
// flight per step) and adds them up (wrapping), so no load can be optimized away;
// each workgroup writes one checksum, which the host compares with the CPU's sum.
//
// The variant (kernel-harness/src/kernels/bandwidth.rs, `StreamVariant`): WG_SIZE
// threads, UNROLL loads in flight, and on the host the grid (16-byte words a thread).
// Host-substituted constants: WG_SIZE, UNROLL. Flags: SUBGROUPS.

const WG_SIZE: u32 = {{WG_SIZE}}u;    // threads per workgroup
const UNROLL: u32 = {{UNROLL}}u;      // independent 16-byte loads per loop step
const MAX_SUBGROUPS: u32 = WG_SIZE / 4u;  // smallest subgroup size is 4

struct Params {
    vec4s: u32,   // 16-byte words in src
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;      // [vec4s]
@group(0) @binding(2) var<storage, read_write> partial: array<u32>;  // [workgroups]: wrapping sum of the words read

#ifdef SUBGROUPS
var<workgroup> red: array<u32, MAX_SUBGROUPS>;
#else
var<workgroup> red: array<u32, WG_SIZE>;
#endif

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
    let wg = wid.x + wid.y * nwg.x;
    let stride = nwg.x * nwg.y * WG_SIZE;
    let n = params.vec4s;
    // UNROLL independent sums: no load waits for another's add.
    var accs: array<vec4<u32>, UNROLL>;
    var i = wg * WG_SIZE + lid;
    loop {
        if (i + (UNROLL - 1u) * stride >= n) {
            break;
        }
        for (var j = 0u; j < UNROLL; j++) {
            accs[j] += src[i + j * stride];
        }
        i += UNROLL * stride;
    }
    for (; i < n; i += stride) {
        accs[0] += src[i];
    }
    var acc = vec4<u32>(0u);
    for (var j = 0u; j < UNROLL; j++) {
        acc += accs[j];
    }
    let s = acc.x + acc.y + acc.z + acc.w;

#ifdef SUBGROUPS
    let t = subgroupAdd(s);
    if (sg_lane == 0u) {
        red[sg_id] = t;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var total = 0u;
        for (var j = 0u; j < n_sg; j++) {
            total += red[j];
        }
        partial[wg] = total;
    }
#else
    red[lid] = s;
    workgroupBarrier();
    for (var off = WG_SIZE / 2u; off > 0u; off >>= 1u) {
        if (lid < off) {
            red[lid] += red[lid + off];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        partial[wg] = red[0];
    }
#endif
}
