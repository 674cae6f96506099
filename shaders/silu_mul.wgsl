// silu_mul.wgsl: the gated FFN activation, out[i] = act(gate[i]) * up[i], with gate and
// up side by side in the output of the fused gate/up GEMV.
// act = SiLU (Llama, Qwen, Mistral), or tanh-approximated GELU with the GELU flag (Gemma).

const WG_SIZE: u32 = 256u;  // threads per workgroup

struct Params {
    n: u32,      // d_ff
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> gu: array<f32>;          // [2 * n]: gate then up
@group(0) @binding(2) var<storage, read_write> out: array<f32>;   // [n]

fn act(g: f32) -> f32 {
#ifdef GELU
    let c = 0.7978845608028654;  // sqrt(2 / pi)
    return 0.5 * g * (1.0 + tanh(c * (g + 0.044715 * g * g * g)));
#else
    return g / (1.0 + exp(-g));
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG_SIZE;
    if (i >= params.n) {
        return;
    }
    out[i] = act(gu[i]) * gu[params.n + i];
}
