// gemv_reduce.wgsl: included by the gemv_*.wgsl kernels (not a kernel itself).
//
// Sums each thread's ACC partial results over the workgroup and writes y. The
// includer defines WG_SIZE, BATCH, ACC, PASS, MAX_SUBGROUPS, `params` (with rows,
// row_offset, y_stride) and `y`. Accumulator i belongs to row i / BATCH of the
// workgroup and batch column i % BATCH. PASS accumulators are reduced per round so
// workgroup memory stays small at large batches.
//
// SUBGROUPS: subgroupAdd inside each subgroup, then one slot per subgroup (indexed by
// subgroup_id, so nothing assumes how invocations map to subgroups).
// Otherwise: shared memory, in two stages (see below).

#ifdef SUBGROUPS
var<workgroup> red: array<f32, MAX_SUBGROUPS * PASS>;
#else
var<workgroup> red: array<f32, WG_SIZE * PASS>;
#endif

fn store_y(i: u32, row0: u32, value: f32) {
    let r = i / BATCH;
    let b = i % BATCH;
    if (i < ACC && row0 + r < params.rows) {
        y[b * params.y_stride + params.row_offset + row0 + r] = value;
    }
}

#ifdef SUBGROUPS
fn reduce_store(acc_in: array<f32, ACC>, lid: u32, row0: u32, sg_lane: u32, sg_id: u32, n_sg: u32) {
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
            store_y(p + lid, row0, total);
        }
        workgroupBarrier();
    }
}
#else
// Two stages, three barriers per round: 16 threads per accumulator each add WG_SIZE/16
// strided partials (in place, each into its own slot), then one thread adds the 16.
// Needs 16 * PASS <= WG_SIZE (the host keeps PASS <= 8).
const STRIDE: u32 = 16u;

fn reduce_store(acc_in: array<f32, ACC>, lid: u32, row0: u32) {
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
            store_y(p + lid, row0, total);
        }
        workgroupBarrier();
    }
}
#endif
