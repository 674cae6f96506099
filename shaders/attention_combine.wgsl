// attention_combine.wgsl: merges the split-KV partials of attention_decode.wgsl.
//
// For query head h with splits s = 0..S-1 holding (o_s, m_s, l_s):
//   M = max_s m_s,  L = sum_s l_s * exp(m_s - M),  out = sum_s o_s * exp(m_s - M) / L
// (the log-sum-exp merge of flash-decoding). One workgroup per query head.

const WG_SIZE: u32 = 64u;  // threads per workgroup (4 dims each)

struct Params {
    heads: u32,    // query heads
    splits: u32,   // splits per head
    hq: u32,       // HEAD_DIM / 4
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> part_o: array<vec4<f32>>;   // [heads, splits, HEAD_DIM / 4]
@group(0) @binding(2) var<storage, read> part_ml: array<vec2<f32>>;  // [heads, splits]: (m, l)
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>; // [heads, HEAD_DIM / 4]

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>) {
    let h = wid.x;
    let s_base = h * params.splits;
    var m = -3.0e38;
    for (var s = 0u; s < params.splits; s++) {
        m = max(m, part_ml[s_base + s].x);
    }
    var l = 0.0;
    for (var s = 0u; s < params.splits; s++) {
        let ml = part_ml[s_base + s];
        l += ml.y * exp(ml.x - m);
    }
    for (var i = lid; i < params.hq; i += WG_SIZE) {
        var o = vec4<f32>(0.0);
        for (var s = 0u; s < params.splits; s++) {
            o += part_o[(s_base + s) * params.hq + i] * exp(part_ml[s_base + s].x - m);
        }
        out[h * params.hq + i] = o / l;
    }
}
