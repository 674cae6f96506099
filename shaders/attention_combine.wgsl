// attention_combine.wgsl: merges the split-KV partials of attention_decode.wgsl.
//
// For query head h with splits s = 0..S-1 holding (o_s, m_s, l_s):
//   M = max_s m_s,  L = sum_s l_s * exp(m_s - M),  out = sum_s o_s * exp(m_s - M) / L
// (the log-sum-exp merge of flash-decoding). One workgroup per query head, every
// step spread over its threads (S can be hundreds: a serial walk over the splits
// costs more than the splits' attention):
//   1. M: each thread the max of its strided splits, then across the workgroup
//      (with SUBGROUPS: subgroupMax, one slot per subgroup, one barrier; else a
//      tree in workgroup memory);
//   2. in rounds of WG_SIZE splits, each split's weight exp(m_s - M) once into
//      workgroup memory (its l times it summed per thread, then across the
//      workgroup for L), and
//      o: thread (c, r) takes 4-vector c of the head and the splits r, r + R, ... of
//      the round (R = WG_SIZE / hq rows of threads), summed over r at the end.

// Host-substituted: WG_SIZE, a power of two from 32 to 256, at least hq (the host
// sizes it to the splits: a few splits take a small workgroup).
const WG_SIZE: u32 = {{WG_SIZE}}u;

struct Params {
    heads: u32,    // query heads
    splits: u32,   // splits per head
    hq: u32,       // HEAD_DIM / 4, at most WG_SIZE
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> part_o: array<vec4<f32>>;   // [heads, splits, HEAD_DIM / 4]
@group(0) @binding(2) var<storage, read> part_ml: array<vec2<f32>>;  // [heads, splits]: (m, l)
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>; // [heads, HEAD_DIM / 4]

var<workgroup> red: array<f32, WG_SIZE>;        // reductions across the workgroup
var<workgroup> w_sh: array<f32, WG_SIZE>;       // a round's split weights
var<workgroup> o_sh: array<vec4<f32>, WG_SIZE>; // per-row sums of o

#ifdef SUBGROUPS
// The max (is_max) or the sum of every thread's `v`, in every thread: within each
// subgroup by subgroup operations, then its result in the subgroup's slot (indexed
// by subgroup_id: nothing assumes how invocations map to subgroups), read by all.
fn across(v: f32, is_max: bool, sg_lane: u32, sg_id: u32, n_sg: u32) -> f32 {
    var s: f32;
    if (is_max) {
        s = subgroupMax(v);
    } else {
        s = subgroupAdd(v);
    }
    if (sg_lane == 0u) {
        red[sg_id] = s;
    }
    workgroupBarrier();
    var r = red[0];
    for (var i = 1u; i < n_sg; i++) {
        r = select(r + red[i], max(r, red[i]), is_max);
    }
    workgroupBarrier();
    return r;
}
#else
// The max (is_max) or the sum of every thread's `v`, in every thread.
fn tree(lid: u32, v: f32, is_max: bool) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var half = WG_SIZE / 2u; half > 0u; half /= 2u) {
        if (lid < half) {
            let a = red[lid];
            let b = red[lid + half];
            red[lid] = select(a + b, max(a, b), is_max);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>,
#ifdef SUBGROUPS
        @builtin(subgroup_invocation_id) sg_lane: u32,
        @builtin(subgroup_id) sg_id: u32,
        @builtin(num_subgroups) n_sg: u32,
#endif
) {
    let h = wid.x;
    let s_base = h * params.splits;
    var m_part = -3.0e38;
    for (var s = lid; s < params.splits; s += WG_SIZE) {
        m_part = max(m_part, part_ml[s_base + s].x);
    }
#ifdef SUBGROUPS
    let m = across(m_part, true, sg_lane, sg_id, n_sg);
#else
    let m = tree(lid, m_part, true);
#endif

    let hq = params.hq;
    let rows = WG_SIZE / hq;
    let c = lid % hq;
    let r = lid / hq;
    var l_part = 0.0;
    var o = vec4<f32>(0.0);
    for (var s0 = 0u; s0 < params.splits; s0 += WG_SIZE) {
        let n = min(WG_SIZE, params.splits - s0);
        if (lid < n) {
            let ml = part_ml[s_base + s0 + lid];
            let w = exp(ml.x - m);
            w_sh[lid] = w;
            l_part += ml.y * w;
        }
        workgroupBarrier();
        if (r < rows) {
            for (var t = r; t < n; t += rows) {
                o += part_o[(s_base + s0 + t) * hq + c] * w_sh[t];
            }
        }
        workgroupBarrier();
    }
#ifdef SUBGROUPS
    let l = across(l_part, false, sg_lane, sg_id, n_sg);
#else
    let l = tree(lid, l_part, false);
#endif
    if (r < rows) {
        o_sh[r * hq + c] = o;
    }
    workgroupBarrier();
    if (lid < hq) {
        var total = vec4<f32>(0.0);
        for (var j = 0u; j < rows; j++) {
            total += o_sh[j * hq + lid];
        }
        out[h * hq + lid] = total / l;
    }
}
