// rmsnorm.wgsl: y = x / sqrt(mean(x^2) + eps) * w, one vector per workgroup.
// Used by the synthetic decode step (before attention, before the FFN, before the LM head).

const WG_SIZE: u32 = 256u;  // threads per workgroup

struct Params {
    n: u32,      // vector length
    eps: f32,    // added to the mean square
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;         // [n]
@group(0) @binding(2) var<storage, read> w: array<f32>;         // [n] norm weights
@group(0) @binding(3) var<storage, read_write> y: array<f32>;   // [n]

var<workgroup> red: array<f32, WG_SIZE>;

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32) {
    var s = 0.0;
    for (var i = lid; i < params.n; i += WG_SIZE) {
        s += x[i] * x[i];
    }
    red[lid] = s;
    workgroupBarrier();
    for (var off = WG_SIZE / 2u; off > 0u; off >>= 1u) {
        if (lid < off) {
            red[lid] += red[lid + off];
        }
        workgroupBarrier();
    }
    let inv = inverseSqrt(red[0] / f32(params.n) + params.eps);
    for (var i = lid; i < params.n; i += WG_SIZE) {
        y[i] = x[i] * inv * w[i];
    }
}
