// quantize_x.wgsl: the input of the XQ8 GEMV variants. x (f32, BATCH columns of cols)
// to int8 in blocks of 32, as llama.cpp's q8_1: d = max |x| / 127, q = round(x / d)
// (0 when the block is all zero). Per half-block of 16: the int8 in one vec4<u32>
// (byte i of word j = element 4j + i), and (d of its block, sum of the 16 int8).
// One thread per block; the GEMV's verification reads xq and xm back, so its CPU
// reference uses exactly these values (and this pass is checked on its own).

const WG_SIZE: u32 = 64u;  // threads per workgroup

struct Params {
    blocks: u32,  // 32-element blocks in all columns of x
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;         // [blocks * 8]
@group(0) @binding(2) var<storage, read_write> xq: array<vec4<u32>>;  // [blocks * 2]: 16 int8 each
@group(0) @binding(3) var<storage, read_write> xm: array<vec2<f32>>;  // [blocks * 2]: (d, sum of the 16)

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let blk = gid.x + gid.y * nwg.x * WG_SIZE;
    if (blk >= params.blocks) {
        return;
    }
    var v: array<vec4<f32>, 8>;
    var amax = vec4<f32>(0.0);
    for (var j = 0u; j < 8u; j++) {
        v[j] = x[8u * blk + j];
        amax = max(amax, abs(v[j]));
    }
    let d = max(max(amax.x, amax.y), max(amax.z, amax.w)) / 127.0;
    let id = select(0.0, 1.0 / d, d > 0.0);
    for (var h = 0u; h < 2u; h++) {
        var words: vec4<u32>;
        var sum = 0;
        for (var j = 0u; j < 4u; j++) {
            let q = clamp(vec4<i32>(round(v[4u * h + j] * id)), vec4<i32>(-127), vec4<i32>(127));
            words[j] = pack4xI8(q);
            sum += q.x + q.y + q.z + q.w;
        }
        xq[2u * blk + h] = words;
        xm[2u * blk + h] = vec2<f32>(d, f32(sum));
    }
}
