// attention_decode.wgsl: decode attention, one new query per head over a KV cache,
// grouped-query heads, single pass or split-KV (flash-decoding).
//
// One workgroup = one KV head x one split of the context. It scores all GROUP query
// heads that share the KV head, so each K and V row is read from memory once:
//   scores:  s[g, p] = scale * q[g] . K[p]      (LANES threads per position)
//   softmax: online; a tile's max comes from a workgroup atomicMax on order-preserving
//            u32 keys, every thread keeps the running max m privately, and what came
//            before is rescaled by exp(m_old - m_new): 3 barriers per tile, no serial loop
//   values:  o[g] = sum_p exp(s[g, p] - m) * V[p], l[g] = sum_p exp(s[g, p] - m)
//            (threads own VEC dims each; each position group keeps its own o and l);
//            with KV_TOGETHER a tile's V rows are loaded right after its K rows,
//            before the softmax's barriers, so both are in flight together; the
//            value loop's trip count is a constant either way
// With splits == 1 the workgroup writes o / l; with splits > 1 it writes the partial
// (o, m, l) and attention_combine.wgsl merges the splits with log-sum-exp.
//
// The variant (kernel-harness/src/kernels/attention/variant.rs): WG_SIZE threads, VEC
// cache elements per load (4, or 8 f16 in one 16-byte load), and on the host the
// positions per split (how many workgroups share a KV head).
//
// Host-substituted constants: WG_SIZE, HEAD_DIM, GROUP, LANES, VEC.
// Flags: KV_TOGETHER (V loaded with K), KV_F16 (f16 cache; else f32), WIDE (with VEC = 8: 8 f16 per 16-byte load,
// unpacked with unpack2x16float), SHADER_F16 (4 f16 per load as vec4<f16>; else
// unpack2x16float).

const WG_SIZE: u32 = {{WG_SIZE}}u;   // threads per workgroup
const HEAD_DIM: u32 = {{HEAD_DIM}}u; // d_h
const GROUP: u32 = {{GROUP}}u;       // query heads per KV head (h / h_kv)
const LANES: u32 = {{LANES}}u;       // threads per position in the score phase
const VEC: u32 = {{VEC}}u;           // cache elements per load (4 or 8)
const HALVES: u32 = VEC / 4u;        // 4-element vectors per load
const TILE: u32 = WG_SIZE / LANES;   // positions per tile
const HQ: u32 = HEAD_DIM / 4u;       // 4-element vectors per head row
const HV: u32 = HEAD_DIM / VEC;      // loads per head row
const LQ: u32 = HV / LANES;          // loads per lane in the score phase
const DG: u32 = HV;                  // value phase: threads per position (VEC dims each)
const PG: u32 = WG_SIZE / DG;        // value phase: positions in flight
const VT: u32 = (TILE + PG - 1u) / PG;  // value phase: positions per thread per tile
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
#ifdef WIDE
@group(0) @binding(2) var<storage, read> k: array<vec4<u32>>;             // [kv heads in binding, capacity, HEAD_DIM / 8]: 8 f16 each
@group(0) @binding(3) var<storage, read> v: array<vec4<u32>>;             // [kv heads in binding, capacity, HEAD_DIM / 8]: 8 f16 each
#else
#ifdef SHADER_F16
@group(0) @binding(2) var<storage, read> k: array<vec4<f16>>;             // [kv heads in binding, capacity, HEAD_DIM / 4]
@group(0) @binding(3) var<storage, read> v: array<vec4<f16>>;             // [kv heads in binding, capacity, HEAD_DIM / 4]
#else
@group(0) @binding(2) var<storage, read> k: array<vec2<u32>>;             // [kv heads in binding, capacity, HEAD_DIM / 4]: 4 f16 each
@group(0) @binding(3) var<storage, read> v: array<vec2<u32>>;             // [kv heads in binding, capacity, HEAD_DIM / 4]: 4 f16 each
#endif
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
var<workgroup> o_sh: array<vec4<f32>, PG * HQ>;            // final reduction of o
var<workgroup> l_sh: array<f32, PG>;                       // final reduction of l
var<workgroup> max_sh: array<atomic<u32>, GROUP>;          // tile max, as order-preserving keys

// f32 -> u32 preserving order (negative: flip all bits; positive: flip the sign bit).
fn key(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn unkey(kk: u32) -> f32 {
    return bitcast<f32>(select(~kk, kk & 0x7fffffffu, (kk & 0x80000000u) != 0u));
}

// One load of the cache (VEC elements) as HALVES 4-vectors of f32.
#ifdef KV_F16
#ifdef WIDE
fn widen(w: vec4<u32>) -> array<vec4<f32>, HALVES> {
    return array<vec4<f32>, HALVES>(vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)),
                                    vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)));
}
#else
#ifdef SHADER_F16
fn widen(w: vec4<f16>) -> array<vec4<f32>, HALVES> {
    return array<vec4<f32>, HALVES>(vec4<f32>(w));
}
#else
fn widen(w: vec2<u32>) -> array<vec4<f32>, HALVES> {
    return array<vec4<f32>, HALVES>(vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)));
}
#endif
#endif
#else
fn widen(w: vec4<f32>) -> array<vec4<f32>, HALVES> {
    return array<vec4<f32>, HALVES>(w);
}
#endif

// Load i (in units of VEC elements) of K, of V.
fn load_k(i: u32) -> array<vec4<f32>, HALVES> {
    return widen(k[i]);
}

fn load_v(i: u32) -> array<vec4<f32>, HALVES> {
    return widen(v[i]);
}

// The load of V at position t of the tile at base that thread column dg reads: past
// the tile or the split's end, the last row (its probability is 0).
fn v_row(base: u32, t: u32, p_end: u32, row_base: u32, dg: u32) -> u32 {
    let p = min(base + min(t, TILE - 1u), p_end - 1u);
    return (row_base + p) * HV + dg;
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
        atomicStore(&max_sh[lid], key(NEG_BIG));
    }
    workgroupBarrier();

    let lane = lid % LANES;
    let slot = lid / LANES;
    let dg = lid % DG;
    let pg = lid / DG;
    // Running max (identical in every thread), and this thread's share of l and o.
    var m: array<f32, GROUP>;
    var l: array<f32, GROUP>;
    var acc: array<vec4<f32>, GROUP * HALVES>;  // [GROUP][HALVES]
    for (var g = 0u; g < GROUP; g++) {
        m[g] = NEG_BIG;
    }

    for (var base = p_begin; base < p_end; base += TILE) {
        // Scores: LANES threads per position, each LQ loads of the head row.
        // Zeroed explicitly each tile: a `var` declared in a loop must start at zero
        // every iteration, which not every WGSL compiler honours (Dawn/Tint on
        // SwiftShader carried the previous tile's dots over).
        var dots: array<f32, GROUP>;
        for (var g = 0u; g < GROUP; g++) {
            dots[g] = 0.0;
        }
        let pos = base + slot;
        if (pos < p_end) {
            let kb = (row_base + pos) * HV + lane * LQ;
            for (var i = 0u; i < LQ; i++) {
                let kv = load_k(kb + i);
                for (var h = 0u; h < HALVES; h++) {
                    let qi = (lane * LQ + i) * HALVES + h;
                    for (var g = 0u; g < GROUP; g++) {
                        dots[g] += dot(q_sh[g * HQ + qi], kv[h]);
                    }
                }
            }
        }
        for (var g = 0u; g < GROUP; g++) {
            dot_sh[(slot * GROUP + g) * LANES + lane] = dots[g];
        }
        // This thread's V rows of the tile (VT of them, a constant count), loaded
        // with K and in flight through the softmax's barriers. Rows past the end
        // re-read the last one; their probabilities are 0.
        // (KV_TOGETHER; else each row is loaded in the value phase, after the softmax.)
#ifdef KV_TOGETHER
        var vpre: array<array<vec4<f32>, HALVES>, VT>;
        for (var j = 0u; j < VT; j++) {
            vpre[j] = load_v(v_row(base, pg + j * PG, p_end, row_base, dg));
        }
#endif
        workgroupBarrier();
        for (var i = lid; i < TILE * GROUP; i += WG_SIZE) {
            let t = i % TILE;
            let g = i / TILE;
            var s = NEG_BIG;
            if (base + t < p_end) {
                s = 0.0;
                for (var j = 0u; j < LANES; j++) {
                    s += dot_sh[(t * GROUP + g) * LANES + j];
                }
            }
            p_sh[i] = s;
            atomicMax(&max_sh[g], key(s));
        }
        workgroupBarrier();
        // New running max; what came before is rescaled by alpha.
        var alpha: array<f32, GROUP>;
        for (var g = 0u; g < GROUP; g++) {
            let m_new = max(m[g], unkey(atomicLoad(&max_sh[g])));
            alpha[g] = exp(m[g] - m_new);
            m[g] = m_new;
        }
        for (var i = lid; i < TILE * GROUP; i += WG_SIZE) {
            p_sh[i] = exp(p_sh[i] - m[i / TILE]);
        }
        workgroupBarrier();
        // Every thread has read max_sh (before the barrier): reset it for the next tile.
        if (lid < GROUP) {
            atomicStore(&max_sh[lid], key(NEG_BIG));
        }
        // Values: DG threads cover one row (VEC dims each), PG rows in flight, the
        // rows loaded above (a position past the end has probability exp(-3e38 - m)
        // = 0: it adds nothing).
        // (PG x DG may fall short of WG_SIZE: the threads past it sit out.)
        if (pg < PG) {
            for (var g = 0u; g < GROUP; g++) {
                for (var h = 0u; h < HALVES; h++) {
                    acc[g * HALVES + h] *= alpha[g];
                }
                l[g] *= alpha[g];
            }
            for (var j = 0u; j < VT; j++) {
                let t = pg + j * PG;
#ifdef KV_TOGETHER
                let live = t < TILE;
#else
                let live = t < TILE && base + t < p_end;  // loaded here: only real rows
#endif
                if (live) {
#ifdef KV_TOGETHER
                    let vv = vpre[j];
#else
                    let vv = load_v(v_row(base, t, p_end, row_base, dg));
#endif
                    for (var g = 0u; g < GROUP; g++) {
                        let w = p_sh[g * TILE + t];
                        for (var h = 0u; h < HALVES; h++) {
                            acc[g * HALVES + h] += w * vv[h];
                        }
                        l[g] += w;
                    }
                }
            }
        }
    }

    // Sum the PG position groups' o and l of each head and write the result.
    for (var g = 0u; g < GROUP; g++) {
        if (pg < PG) {
            for (var h = 0u; h < HALVES; h++) {
                o_sh[pg * HQ + dg * HALVES + h] = acc[g * HALVES + h];
            }
            if (dg == 0u) {
                l_sh[pg] = l[g];
            }
        }
        workgroupBarrier();
        // One 4-vector of the head a thread (the host keeps HQ <= WG_SIZE).
        if (lid < HQ) {
            let c = lid;
            var o = vec4<f32>(0.0);
            var lt = 0.0;
            for (var j = 0u; j < PG; j++) {
                o += o_sh[j * HQ + c];
                lt += l_sh[j];
            }
            let h = kvh * GROUP + g;
            if (params.splits == 1u) {
                out[h * HQ + c] = o / lt;
            } else {
                part_o[(h * params.splits + split) * HQ + c] = o;
                if (c == 0u) {
                    part_ml[h * params.splits + split] = vec2<f32>(m[g], lt);
                }
            }
        }
        workgroupBarrier();
    }
}
