// attention_decode.wgsl: decode attention, one new query per head over a KV cache,
// grouped-query heads, single pass or split-KV (flash-decoding).
//
// One workgroup = one KV head x one split of the context. It scores all GROUP query
// heads that share the KV head, so each K and V row is read from memory once:
//   scores:  s[g, p] = scale * q[g] . K[p]      (LANES threads per position)
//   softmax: online (running max m, running sum l, rescale by exp(m_old - m_new))
//   values:  o[g] = sum_p exp(s[g, p] - m) * V[p]   (threads own 4 dims each)
// With splits == 1 the workgroup writes o / l; with splits > 1 it writes the partial
// (o, m, l) and attention_combine.wgsl merges the splits with log-sum-exp.
//
// Host-substituted constants: HEAD_DIM, GROUP, LANES.
// Flags: KV_F16 (f16 cache; else f32), SHADER_F16 (f16 loads; else unpack2x16float).

const WG_SIZE: u32 = 128u;           // threads per workgroup
const HEAD_DIM: u32 = {{HEAD_DIM}}u; // d_h
const GROUP: u32 = {{GROUP}}u;       // query heads per KV head (h / h_kv)
const LANES: u32 = {{LANES}}u;       // threads per position in the score phase
const TILE: u32 = WG_SIZE / LANES;   // positions per tile
const HQ: u32 = HEAD_DIM / 4u;       // 4-element vectors per head row
const LQ: u32 = HQ / LANES;          // 4-element vectors per lane in the score phase
const DG: u32 = HQ;                  // value phase: threads per position (4 dims each)
const PG: u32 = WG_SIZE / DG;        // value phase: positions in flight
const NEG_BIG: f32 = -3.0e38;        // "minus infinity" that stays finite

struct Params {
    context: u32,         // positions in the cache
    capacity: u32,        // positions allocated per KV head (row stride of K and V)
    chunk: u32,           // positions per split, a multiple of TILE
    splits: u32,          // splits per KV head (1 = single pass)
    kv_head_offset: u32,  // first KV head held by this binding
    heads: u32,           // query heads h
    scale: f32,           // 1 / sqrt(HEAD_DIM)
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;             // [heads, HEAD_DIM / 4]
#ifdef KV_F16
#ifdef SHADER_F16
@group(0) @binding(2) var<storage, read> k: array<vec4<f16>>;             // [kv heads in binding, capacity, HEAD_DIM / 4]
@group(0) @binding(3) var<storage, read> v: array<vec4<f16>>;             // [kv heads in binding, capacity, HEAD_DIM / 4]
#else
@group(0) @binding(2) var<storage, read> k: array<vec2<u32>>;             // [kv heads in binding, capacity, HEAD_DIM / 4]: 4 f16 each
@group(0) @binding(3) var<storage, read> v: array<vec2<u32>>;             // [kv heads in binding, capacity, HEAD_DIM / 4]: 4 f16 each
#endif
#else
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;             // [kv heads in binding, capacity, HEAD_DIM / 4]
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;             // [kv heads in binding, capacity, HEAD_DIM / 4]
#endif
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;     // [heads, HEAD_DIM / 4] (splits == 1)
@group(0) @binding(5) var<storage, read_write> part_o: array<vec4<f32>>;  // [heads, splits, HEAD_DIM / 4] (splits > 1)
@group(0) @binding(6) var<storage, read_write> part_ml: array<vec2<f32>>; // [heads, splits]: (max m, sum l)

var<workgroup> q_sh: array<vec4<f32>, GROUP * HQ>;         // scaled queries
var<workgroup> dot_sh: array<f32, WG_SIZE * GROUP>;        // [TILE, GROUP, LANES] partial dots
var<workgroup> p_sh: array<f32, GROUP * TILE>;             // [GROUP, TILE] scores, then probabilities
var<workgroup> o_sh: array<vec4<f32>, PG * DG>;            // value-phase reduction
var<workgroup> m_sh: array<f32, GROUP>;                    // running max
var<workgroup> l_sh: array<f32, GROUP>;                    // running sum of exp
var<workgroup> alpha_sh: array<f32, GROUP>;                // rescale of this tile

fn load_k(i: u32) -> vec4<f32> {
#ifdef KV_F16
#ifdef SHADER_F16
    return vec4<f32>(k[i]);
#else
    let w = k[i];
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
#endif
#else
    return k[i];
#endif
}

fn load_v(i: u32) -> vec4<f32> {
#ifdef KV_F16
#ifdef SHADER_F16
    return vec4<f32>(v[i]);
#else
    let w = v[i];
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
#endif
#else
    return v[i];
#endif
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>) {
    let split = wid.x;
    let kvh_local = wid.y;
    let kvh = params.kv_head_offset + kvh_local;
    let p_begin = split * params.chunk;
    let p_end = min(p_begin + params.chunk, params.context);
    let row_base = kvh_local * params.capacity;

    for (var i = lid; i < GROUP * HQ; i += WG_SIZE) {
        q_sh[i] = q[kvh * GROUP * HQ + i] * params.scale;
    }
    if (lid < GROUP) {
        m_sh[lid] = NEG_BIG;
        l_sh[lid] = 0.0;
    }
    workgroupBarrier();

    let lane = lid % LANES;
    let slot = lid / LANES;
    let dg = lid % DG;
    let pg = lid / DG;
    var acc: array<vec4<f32>, GROUP>;

    for (var base = p_begin; base < p_end; base += TILE) {
        // Scores: LANES threads per position, each LQ vectors of the head row.
        var dots: array<f32, GROUP>;
        let pos = base + slot;
        if (pos < p_end) {
            let kb = (row_base + pos) * HQ + lane * LQ;
            for (var i = 0u; i < LQ; i++) {
                let kv4 = load_k(kb + i);
                for (var g = 0u; g < GROUP; g++) {
                    dots[g] += dot(q_sh[g * HQ + lane * LQ + i], kv4);
                }
            }
        }
        for (var g = 0u; g < GROUP; g++) {
            dot_sh[(slot * GROUP + g) * LANES + lane] = dots[g];
        }
        workgroupBarrier();
        for (var i = lid; i < TILE * GROUP; i += WG_SIZE) {
            let t = i % TILE;
            let g = i / TILE;
            var s = NEG_BIG;
            if (base + t < p_end) {
                s = 0.0;
                for (var l = 0u; l < LANES; l++) {
                    s += dot_sh[(t * GROUP + g) * LANES + l];
                }
            }
            p_sh[i] = s;
        }
        workgroupBarrier();
        // Online softmax: new running max and the rescale of what came before.
        if (lid < GROUP) {
            let m_old = m_sh[lid];
            var m_new = m_old;
            for (var t = 0u; t < TILE; t++) {
                m_new = max(m_new, p_sh[lid * TILE + t]);
            }
            alpha_sh[lid] = exp(m_old - m_new);
            m_sh[lid] = m_new;
        }
        workgroupBarrier();
        for (var i = lid; i < TILE * GROUP; i += WG_SIZE) {
            p_sh[i] = exp(p_sh[i] - m_sh[i / TILE]);
        }
        workgroupBarrier();
        if (lid < GROUP) {
            var sum = 0.0;
            for (var t = 0u; t < TILE; t++) {
                sum += p_sh[lid * TILE + t];
            }
            l_sh[lid] = l_sh[lid] * alpha_sh[lid] + sum;
        }
        // Values: DG threads cover one row (4 dims each), PG rows in flight.
        if (pg < PG) {
            for (var g = 0u; g < GROUP; g++) {
                acc[g] *= alpha_sh[g];
            }
            for (var t = pg; t < TILE; t += PG) {
                let p = base + t;
                if (p < p_end) {
                    let vv = load_v((row_base + p) * HQ + dg);
                    for (var g = 0u; g < GROUP; g++) {
                        acc[g] += p_sh[g * TILE + t] * vv;
                    }
                }
            }
        }
        workgroupBarrier();
    }

    // Sum the PG partial accumulators of each head and write the result.
    for (var g = 0u; g < GROUP; g++) {
        if (pg < PG) {
            o_sh[pg * DG + dg] = acc[g];
        }
        workgroupBarrier();
        if (lid < DG) {
            var o = vec4<f32>(0.0);
            for (var j = 0u; j < PG; j++) {
                o += o_sh[j * DG + lid];
            }
            let h = kvh * GROUP + g;
            if (params.splits == 1u) {
                out[h * HQ + lid] = o / l_sh[g];
            } else {
                part_o[(h * params.splits + split) * HQ + lid] = o;
                if (lid == 0u) {
                    part_ml[h * params.splits + split] = vec2<f32>(m_sh[g], l_sh[g]);
                }
            }
        }
        workgroupBarrier();
    }
}
