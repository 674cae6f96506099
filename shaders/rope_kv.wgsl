// rope_kv.wgsl: rotary position embedding of the new token's q and k (rotate-half
// pairing (i, i + d_h/2), as HF Llama/Qwen/Mistral/Gemma), and its k and v appended to
// the KV cache at position `pos`.
//
// The rotation's cos/sin for this position come from the host (`cs`), so the angle
// is computed once in f64 on the host and the kernel's result does not depend on the
// GPU's sin/cos accuracy. One thread per rotation pair of one head; f16 caches are
// written as pairs of neighbouring dims packed in one 32-bit word.
// Flags: KV_F16 (f16 cache, else f32).

const WG_SIZE: u32 = 64u;  // threads per workgroup

struct Params {
    heads: u32,      // query heads h
    kv_heads: u32,   // key/value heads h_kv
    head_dim: u32,   // d_h, a multiple of 4
    pos: u32,        // cache position of the new token
    capacity: u32,   // positions allocated per KV head
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;            // [(h + 2 h_kv) d_h]: q, then k, then v
@group(0) @binding(2) var<storage, read> cs: array<vec2<f32>>;       // [d_h / 2]: (cos, sin) of each frequency at pos
@group(0) @binding(3) var<storage, read_write> q_out: array<f32>;    // [h d_h]
#ifdef KV_F16
@group(0) @binding(4) var<storage, read_write> k_cache: array<u32>;  // [h_kv, capacity, d_h / 2]: 2 f16 per word
@group(0) @binding(5) var<storage, read_write> v_cache: array<u32>;  // [h_kv, capacity, d_h / 2]: 2 f16 per word
#else
@group(0) @binding(4) var<storage, read_write> k_cache: array<f32>;  // [h_kv, capacity, d_h]
@group(0) @binding(5) var<storage, read_write> v_cache: array<f32>;  // [h_kv, capacity, d_h]
#endif

fn rotate(x0: f32, x1: f32, c: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(x0 * c.x - x1 * c.y, x1 * c.x + x0 * c.y);
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    // Work items: for each of h + h_kv heads, d_h / 4 items; item j rotates the pairs
    // (2j, 2j + half) and (2j + 1, 2j + 1 + half).
    let d = params.head_dim;
    let half = d / 2u;
    let per_head = d / 4u;
    let item = gid.x;
    let head = item / per_head;
    if (head >= params.heads + params.kv_heads) {
        return;
    }
    let j = item % per_head;
    let i0 = 2u * j;
    let i1 = 2u * j + 1u;
    let src = head * d;  // q heads first, then k heads, in qkv
    let a = rotate(qkv[src + i0], qkv[src + i0 + half], cs[i0]);
    let b = rotate(qkv[src + i1], qkv[src + i1 + half], cs[i1]);
    if (head < params.heads) {
        q_out[src + i0] = a.x;
        q_out[src + i0 + half] = a.y;
        q_out[src + i1] = b.x;
        q_out[src + i1 + half] = b.y;
        return;
    }
    let kvh = head - params.heads;
    let vsrc = (params.heads + params.kv_heads + kvh) * d;
    let row = kvh * params.capacity + params.pos;
#ifdef KV_F16
    let wrow = row * half;
    k_cache[wrow + j] = pack2x16float(vec2<f32>(a.x, b.x));
    k_cache[wrow + j + half / 2u] = pack2x16float(vec2<f32>(a.y, b.y));
    v_cache[wrow + j] = pack2x16float(vec2<f32>(qkv[vsrc + i0], qkv[vsrc + i1]));
    v_cache[wrow + j + half / 2u] = pack2x16float(vec2<f32>(qkv[vsrc + i0 + half], qkv[vsrc + i1 + half]));
#else
    let frow = row * d;
    k_cache[frow + i0] = a.x;
    k_cache[frow + i0 + half] = a.y;
    k_cache[frow + i1] = b.x;
    k_cache[frow + i1 + half] = b.y;
    v_cache[frow + i0] = qkv[vsrc + i0];
    v_cache[frow + i0 + half] = qkv[vsrc + i0 + half];
    v_cache[frow + i1] = qkv[vsrc + i1];
    v_cache[frow + i1 + half] = qkv[vsrc + i1 + half];
#endif
}
