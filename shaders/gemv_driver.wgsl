// gemv_driver.wgsl: the loop and reduction shared by every gemv_<format>.wgsl (included
// by them, not a kernel itself). y[b, r] = sum_k W[r, k] * x[b, k], f32 accumulation.
//
// The includer declares `params` (binding 0), its weight arrays, x and y, and the unit
// interface, a unit being what one 16-byte load of its main array holds:
//   const VEC: u32                           weights per unit
//   struct Unit; fn load_unit(row, u) -> Unit   unit u of a row: loads only
//   struct Xu;   fn load_xu(u, b) -> Xu         what column b of x meets unit u with
//   struct Deq;  fn dequant(w: Unit) -> Deq     the unit unpacked (once per row and unit)
//   fn dot_dx(w: Deq, v: Xu) -> f32             the unit's contribution to y[b, row]
//
// The variant, chosen per device and shape (kernel-harness/src/kernels/gemv/variant.rs):
//   TEAM_SG     a team is one subgroup: its lanes stride the team's rows, one subgroupAdd
//               per output, no workgroup memory and no barrier; TEAMS teams a workgroup;
//   otherwise   a team is the whole workgroup: WG_SIZE threads stride the rows, then the
//               workgroup reduction below (subgroupAdd then workgroup memory with
//               SUBGROUPS, workgroup memory alone without);
//   ROWS        rows per team: x is loaded once for all of them;
//   UNROLL      units each lane loads before it uses any (loads in flight);
//   BT          batch columns per pass over the row (ACC = ROWS * BT accumulators),
//               in one of three orders (add_unit), which the host derives from them;
//   UNROLLED    (derived by the host: the default order with ROWS * BT * UNROLL at
//               most 16) the loops over the register arrays w and acc unrolled by the
//               preprocessor, every index a constant: WGSL has no unroll hint and
//               naga adds a counter to every loop, and a register array indexed by a
//               loop variable can be spilled to memory. Bounded: unrolling them all
//               (up to 8 x 64 copies of a unit's dot product) made lavapipe's
//               compiles run for minutes.

const WG_SIZE: u32 = {{WG_SIZE}}u;   // threads per workgroup
const ROWS: u32 = {{ROWS}}u;         // rows per team
const BATCH: u32 = {{BATCH}}u;       // columns of x and y
const BT: u32 = {{BT}}u;             // columns per pass over the row
const ACC: u32 = {{ACC}}u;           // ROWS * BT accumulators per thread
const UNROLL: u32 = {{UNROLL}}u;     // units per lane loaded before use
const TEAMS: u32 = {{TEAMS}}u;       // teams per workgroup (1 without TEAM_SG)
const PASS: u32 = {{PASS}}u;         // accumulators reduced per round (workgroup teams)
const MAX_SUBGROUPS: u32 = WG_SIZE / 4u;  // smallest subgroup size is 4

struct Params {
    rows: u32,        // rows of W in this binding (a chunk of the matrix)
    cols: u32,        // K, a multiple of VEC
    row_offset: u32,  // index of the chunk's first row in y
    y_stride: u32,    // N, total rows: stride between the batch columns of y
}

// Rows past the end re-read the last row; their sums are never stored.
fn row_at(row0: u32, r: u32) -> u32 {
    return min(row0 + r, params.rows - 1u);
}

// Adds unit u of each row (its raw loads in w[j * ROWS ..]) times columns b0.. of x
// to the accumulators, in the order that keeps the fewest values live (the host picks):
//   default      the BT columns' x loaded first, each row unpacked once against them all
//                (BT x and one row live: for BT <= ROWS);
//   DEQ_ROWS     the rows unpacked first, the columns' x streamed past them (ROWS rows
//                and one x live: many columns, small units);
//   ROW_BY_ROW   each row unpacked and met by every column, x reloaded per row (from
//                cache; one row and one x live: many columns, large units).
fn add_unit(acc: ptr<function, array<f32, ACC>>, w: ptr<function, array<Unit, ROWS * UNROLL>>, j: u32, u: u32, b0: u32) {
#ifdef DEQ_ROWS
    var wd: array<Deq, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        wd[r] = dequant((*w)[j * ROWS + r]);
    }
    for (var c = 0u; c < BT; c++) {
        let xv = load_xu(u, min(b0 + c, BATCH - 1u));
        for (var r = 0u; r < ROWS; r++) {
            (*acc)[r * BT + c] += dot_dx(wd[r], xv);
        }
    }
#else
#ifdef ROW_BY_ROW
    for (var r = 0u; r < ROWS; r++) {
        let wd = dequant((*w)[j * ROWS + r]);
        for (var c = 0u; c < BT; c++) {
            (*acc)[r * BT + c] += dot_dx(wd, load_xu(u, min(b0 + c, BATCH - 1u)));
        }
    }
#else
    var xv: array<Xu, BT>;
#ifdef UNROLLED
#unroll c BT
    xv[{{c}}] = load_xu(u, min(b0 + {{c}}, BATCH - 1u));
#endunroll
#unroll r ROWS
    {
        let wd = dequant((*w)[j * ROWS + {{r}}]);
#unroll c BT
        (*acc)[{{r}} * BT + {{c}}] += dot_dx(wd, xv[{{c}}]);
#endunroll
    }
#endunroll
#else
    for (var c = 0u; c < BT; c++) {
        xv[c] = load_xu(u, min(b0 + c, BATCH - 1u));
    }
    for (var r = 0u; r < ROWS; r++) {
        let wd = dequant((*w)[j * ROWS + r]);
        for (var c = 0u; c < BT; c++) {
            (*acc)[r * BT + c] += dot_dx(wd, xv[c]);
        }
    }
#endif
#endif
#endif
}

// This thread's share of rows row0.. (ROWS) and columns b0.. (BT): units lane,
// lane + lanes, ..., UNROLL of them loaded before any is used.
fn accumulate(row0: u32, b0: u32, lane: u32, lanes: u32) -> array<f32, ACC> {
    var acc: array<f32, ACC>;
    var w: array<Unit, ROWS * UNROLL>;
    let units = params.cols / VEC;
#ifdef UNROLLED
    // Every unit loaded (UNROLL of each row) before any is used; j a constant in
    // each copy of add_unit (inlined by the driver).
    for (var base = lane; base < units; base += lanes * UNROLL) {
#unroll j UNROLL
#unroll r ROWS
        w[{{j}} * ROWS + {{r}}] = load_unit(row_at(row0, {{r}}), min(base + {{j}} * lanes, units - 1u));
#endunroll
#endunroll
#unroll j UNROLL
        if (base + {{j}} * lanes < units) {
            add_unit(&acc, &w, {{j}}, base + {{j}} * lanes, b0);
        }
#endunroll
    }
    return acc;
#else
    if (UNROLL == 1u) {
        for (var u = lane; u < units; u += lanes) {
            for (var r = 0u; r < ROWS; r++) {
                w[r] = load_unit(row_at(row0, r), u);
            }
            add_unit(&acc, &w, 0u, u, b0);
        }
        return acc;
    }
    for (var base = lane; base < units; base += lanes * UNROLL) {
        for (var j = 0u; j < UNROLL; j++) {
            let u = min(base + j * lanes, units - 1u);
            for (var r = 0u; r < ROWS; r++) {
                w[j * ROWS + r] = load_unit(row_at(row0, r), u);
            }
        }
        for (var j = 0u; j < UNROLL; j++) {
            let u = base + j * lanes;
            if (u < units) {
                add_unit(&acc, &w, j, u, b0);
            }
        }
    }
    return acc;
#endif
}

// Accumulator i is row i / BT of the team, column b0 + i % BT.
fn store_acc(i: u32, row0: u32, b0: u32, value: f32) {
    let r = i / BT;
    let b = b0 + i % BT;
    if (i < ACC && b < BATCH && row0 + r < params.rows) {
        y[b * params.y_stride + params.row_offset + row0 + r] = value;
    }
}

#ifndef TEAM_SG
#ifdef SUBGROUPS
var<workgroup> red: array<f32, MAX_SUBGROUPS * PASS>;

// subgroupAdd inside each subgroup, then one slot per subgroup (indexed by
// subgroup_id, so nothing assumes how invocations map to subgroups).
fn reduce_store(acc_in: array<f32, ACC>, lid: u32, row0: u32, b0: u32, sg_lane: u32, sg_id: u32, n_sg: u32) {
    var acc = acc_in;
    for (var p = 0u; p < ACC; p += PASS) {
        for (var j = 0u; j < PASS; j++) {
            let s = subgroupAdd(acc[min(p + j, ACC - 1u)]);
            if (sg_lane == 0u) {
                red[sg_id * PASS + j] = s;
            }
        }
        workgroupBarrier();
        if (lid < PASS) {
            var total = 0.0;
            for (var s = 0u; s < n_sg; s++) {
                total += red[s * PASS + lid];
            }
            store_acc(p + lid, row0, b0, total);
        }
        workgroupBarrier();
    }
}
#else
var<workgroup> red: array<f32, WG_SIZE * PASS>;

// Two stages, three barriers per round: 16 threads per accumulator each add
// WG_SIZE / 16 strided partials (in place, each into its own slot), then one thread
// adds the 16. Needs 16 * PASS <= WG_SIZE (the host keeps PASS <= WG_SIZE / 16).
const STRIDE: u32 = 16u;

fn reduce_store(acc_in: array<f32, ACC>, lid: u32, row0: u32, b0: u32) {
    var acc = acc_in;
    for (var p = 0u; p < ACC; p += PASS) {
        for (var j = 0u; j < PASS; j++) {
            red[j * WG_SIZE + lid] = acc[min(p + j, ACC - 1u)];
        }
        workgroupBarrier();
        if (lid < STRIDE * PASS) {
            let j = lid / STRIDE;
            let t = lid % STRIDE;
            var s = 0.0;
            for (var k = t; k < WG_SIZE; k += STRIDE) {
                s += red[j * WG_SIZE + k];
            }
            red[j * WG_SIZE + t] = s;
        }
        workgroupBarrier();
        if (lid < PASS) {
            var total = 0.0;
            for (var t = 0u; t < STRIDE; t++) {
                total += red[lid * WG_SIZE + t];
            }
            store_acc(p + lid, row0, b0, total);
        }
        workgroupBarrier();
    }
}
#endif
#endif

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
#ifdef SUBGROUPS
        @builtin(subgroup_invocation_id) sg_lane: u32,
        @builtin(subgroup_size) sg_size: u32,
        @builtin(subgroup_id) sg_id: u32,
        @builtin(num_subgroups) n_sg: u32,
#endif
) {
    let wg = wid.x + wid.y * nwg.x;
#ifdef TEAM_SG
    // Subgroup s runs teams s, s + n_sg, ...: the same number of rounds in every
    // subgroup (a subgroup past the last team computes and stores nothing), so each
    // subgroupAdd is reached in uniform control flow.
    let rounds = (TEAMS + n_sg - 1u) / n_sg;
    for (var k = 0u; k < rounds; k++) {
        let team = sg_id + k * n_sg;
        let row0 = (wg * TEAMS + min(team, TEAMS - 1u)) * ROWS;
        for (var b0 = 0u; b0 < BATCH; b0 += BT) {
            let acc = accumulate(row0, b0, sg_lane, sg_size);
#ifdef UNROLLED
#unroll i ACC
            {
                let s = subgroupAdd(acc[{{i}}]);
                if (sg_lane == 0u && team < TEAMS) {
                    store_acc({{i}}, row0, b0, s);
                }
            }
#endunroll
#else
            for (var i = 0u; i < ACC; i++) {
                let s = subgroupAdd(acc[i]);
                if (sg_lane == 0u && team < TEAMS) {
                    store_acc(i, row0, b0, s);
                }
            }
#endif
        }
    }
#else
    let row0 = wg * ROWS;
    for (var b0 = 0u; b0 < BATCH; b0 += BT) {
        let acc = accumulate(row0, b0, lid, WG_SIZE);
#ifdef SUBGROUPS
        reduce_store(acc, lid, row0, b0, sg_lane, sg_id, n_sg);
#else
        reduce_store(acc, lid, row0, b0);
#endif
    }
#endif
}
