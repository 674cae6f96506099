// fma.wgsl: the arithmetic roof. Each thread runs CHAINS independent chains of ITERS
// fused multiply-adds on 4-vectors (f32, or f16 with SHADER_F16), enough chains that the
// multiply-add units and not the latency of one chain set the pace. FLOPs per call:
// threads * CHAINS * 4 * ITERS * 2.
//
// a = a * 0.5 + 0.25 is exact in either format (the products are halvings), so the
// chains end where the CPU says (each lane converges to 0.5) whatever the hardware's
// fusing; the result is stored so that no compiler can drop the work.
//
// Host-substituted constants: ITERS. Flags: SHADER_F16 (f16 chains; the host prepends
// `enable f16;`).

const WG_SIZE: u32 = 256u;   // threads per workgroup
const CHAINS: u32 = 8u;      // independent chains per thread
const ITERS: u32 = {{ITERS}}u;  // multiply-adds per chain

struct Params {
    mul: f32,   // 0.5
    add: f32,   // 0.25
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;  // [threads]: the sum of each thread's chains

#ifdef SHADER_F16
alias T = f16;
#else
alias T = f32;
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * WG_SIZE;
    let m = vec4<T>(T(params.mul));
    let c = vec4<T>(T(params.add));
    var a: array<vec4<T>, CHAINS>;
    for (var k = 0u; k < CHAINS; k++) {
        // Start values in 0..3 that differ per thread and chain.
        a[k] = vec4<T>(T(f32((t + k) % 4u)), T(f32((t + 2u * k) % 4u)), T(1.0), T(2.0));
    }
    for (var i = 0u; i < ITERS; i++) {
        for (var k = 0u; k < CHAINS; k++) {
            a[k] = fma(a[k], m, c);
        }
    }
    var s = vec4<f32>(0.0);
    for (var k = 0u; k < CHAINS; k++) {
        s += vec4<f32>(a[k]);
    }
    out[t] = s.x + s.y + s.z + s.w;
}
