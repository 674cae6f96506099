//! The kernels report rendered: the per-kernel table every view shows (the CLI,
//! the combined report, the page's GPU view), the labels it uses, and the whole
//! report as text for the terminal (`tokenscope kernels`).

use std::fmt::Write as _;

use super::fmt::fmt_rate;
use super::table::{Align, text_table_with};
use crate::report::kernels::{GgufReport, KernelReport, KernelResult, ROOFLINE_TURN};

/// A buffer size as tables show it: `128 MiB`, or `2 GiB` when a whole number of GiB.
pub fn mib_label(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else {
        format!("{} MiB", bytes >> 20)
    }
}

/// A matrix shape as tables show it: `4096x14336`.
pub fn shape_label(shape: &[u64]) -> String {
    shape
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join("x")
}

/// A kernel's shape as tables show it: `4096x14336` for GEMV and skinny
/// matmul; `h32/kv8 d128 ctx 8192 (4 splits)` for attention.
pub fn kernel_shape_label(k: &KernelResult) -> String {
    match (k.context, k.heads, k.kv_heads, k.head_dim) {
        (Some(c), Some(h), Some(kv), Some(d)) => format!(
            "h{h}/kv{kv} d{d} ctx {c}{}",
            k.splits
                .filter(|s| *s > 1)
                .map_or(String::new(), |s| format!(" ({s} splits)"))
        ),
        _ => shape_label(&k.shape),
    }
}

/// The per-kernel table every view shows (the CLI, the combined report, the page):
/// headers and one row per kernel. A cache-resident kernel has no GB/s and its
/// fraction of the read ceiling is marked `(cached)`.
pub fn kernel_table(report: &KernelReport) -> (Vec<String>, Vec<Vec<String>>) {
    let headers = [
        "kernel",
        "dtype",
        "shape",
        "batch",
        "reduction",
        "median us",
        "p25..p75 us",
        "calls/sample",
        "GB/s",
        "of read bw",
        "GFLOP/s",
        "of roof",
        "variant",
        "verified",
    ]
    .map(str::to_owned)
    .to_vec();
    let rows = report
        .kernels
        .iter()
        .map(|k| {
            vec![
                k.name.clone(),
                k.dtype.clone(),
                kernel_shape_label(k),
                k.batch.to_string(),
                k.reduction.clone(),
                format!("{:.1}", k.median_us),
                format!("{:.1}..{:.1}", k.timing.p25_us, k.timing.p75_us),
                k.timing.calls_per_sample.to_string(),
                k.gbps.map_or_else(|| "cache".into(), fmt_rate),
                format!(
                    "{:.0}%{}",
                    100.0 * k.fraction_of_read,
                    if k.cache_resident { " (cached)" } else { "" }
                ),
                fmt_rate(k.gflops),
                roof_label(k),
                variant_label(k),
                verified_label(k.verified).to_owned(),
            ]
        })
        .collect();
    (headers, rows)
}

/// The kernel's fraction of the roof that bounds it: `92% bw` or `61% fma`.
pub fn roof_label(k: &KernelResult) -> String {
    match (&k.fraction_of_roof, k.roof.as_deref()) {
        (Some(f), Some(roof)) => format!(
            "{:.0}% {}",
            100.0 * f,
            if roof == "compute" { "fma" } else { "bw" }
        ),
        _ => "-".into(),
    }
}

/// The variant that ran and where it came from: `sg128_r2_u4_b1 (tuned)`.
pub fn variant_label(k: &KernelResult) -> String {
    k.variant
        .as_ref()
        .map_or_else(|| "-".into(), |v| format!("{} ({})", v.name, v.source))
}

/// `yes`, or a loud `NO` for a kernel that did not match its CPU reference.
pub fn verified_label(verified: bool) -> &'static str {
    if verified { "yes" } else { "NO" }
}

/// A table whose first row is its headers; columns listed in `right` are
/// right-aligned, the others left-aligned.
fn rows_table(rows: &[Vec<String>], right: &[usize]) -> String {
    let Some((headers, body)) = rows.split_first() else {
        return String::new();
    };
    text_table_with(headers, body, |c| {
        if right.contains(&c) {
            Align::Right
        } else {
            Align::Left
        }
    })
}

fn gb(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / 1e9)
}

/// The kernels report as the terminal shows it: the bandwidth ceiling, the kernel
/// table, the roofline turn, the decode steps, the decode floor and the goals.
pub fn text(r: &KernelReport) -> String {
    let mut s = String::new();
    bandwidth_section(&mut s, r);
    compute_section(&mut s, r);
    tuning_section(&mut s, r);
    kernels_section(&mut s, r);
    search_section(&mut s, r);
    roofline_section(&mut s, r);
    decode_steps_section(&mut s, r);
    floor_section(&mut s, r);
    if let Some(g) = &r.gguf {
        s.push_str(&gguf_floor_text(g));
    }
    goals_section(&mut s, r);
    drift_section(&mut s, r);
    let _ = writeln!(
        s,
        "verified: {}",
        if r.verified {
            "every kernel matched its CPU reference"
        } else {
            "NO (see above)"
        }
    );
    s
}

/// The read and copy ceiling.
fn bandwidth_section(s: &mut String, r: &KernelReport) {
    let timing = r.timing.label();
    if let Some(b) = &r.bandwidth {
        let variant = |v: &Option<crate::report::kernels::VariantReport>| {
            v.as_ref()
                .map_or_else(String::new, |v| format!(" {} ({})", v.name, v.source))
        };
        let _ = writeln!(
            s,
            "Bandwidth ceiling: read {:.1} GB/s{}, copy {:.1} GB/s{} (working set {} in {} x {} buffers; median of {} samples, {timing})\n",
            b.read_gbps,
            variant(&b.read_variant),
            b.copy_gbps,
            variant(&b.copy_variant),
            mib_label(b.working_set_bytes),
            b.buffers,
            mib_label(b.buffer_bytes),
            b.read.samples
        );
    }
}

/// The arithmetic roof.
fn compute_section(s: &mut String, r: &KernelReport) {
    if let Some(c) = &r.compute {
        let read = r.bandwidth.as_ref().map_or(0.0, |b| b.read_gbps);
        let _ = writeln!(
            s,
            "Compute roof: f32 FMA {:.0} GFLOP/s{}{}; a kernel below {:.1} FLOP/byte is bandwidth-bound\n",
            c.f32_gflops,
            c.f16_gflops
                .map_or_else(String::new, |g| format!(", f16 FMA {g:.0} GFLOP/s")),
            if c.verified { "" } else { " (NOT verified)" },
            if read > 0.0 { c.f32_gflops / read } else { 0.0 }
        );
    }
}

/// Which variants ran: the tuning file used, or why not.
fn tuning_section(s: &mut String, r: &KernelReport) {
    let tuned = r
        .kernels
        .iter()
        .filter(|k| k.variant.as_ref().is_some_and(|v| v.source == "tuned"))
        .count();
    if let Some(t) = &r.tuning {
        let _ = writeln!(
            s,
            "Variants: {tuned} of {} kernels tuned; tuning file {}: {}\n",
            r.kernels.len(),
            t.file,
            t.note
        );
    }
}

/// For each tuned kernel, what the search saw: how much the choice of variant matters
/// on this GPU.
fn search_section(s: &mut String, r: &KernelReport) {
    let tuned: Vec<&KernelResult> = r
        .kernels
        .iter()
        .filter(|k| {
            k.variant
                .as_ref()
                .is_some_and(|v| v.search.is_some() && v.source == "tuned")
        })
        .collect();
    if tuned.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "Variant search on this adapter (brief timings): the fastest and slowest variant tried, and the default's"
    );
    let mut rows = vec![
        [
            "kernel",
            "dtype",
            "shape",
            "batch",
            "ran",
            "best us",
            "worst",
            "worst us",
            "default us",
            "tried",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for k in tuned {
        let (Some(v), Some(sr)) = (
            &k.variant,
            k.variant.as_ref().and_then(|v| v.search.as_ref()),
        ) else {
            continue;
        };
        rows.push(vec![
            k.name.clone(),
            k.dtype.clone(),
            kernel_shape_label(k),
            k.batch.to_string(),
            v.name.clone(),
            format!("{:.1}", sr.best_us),
            sr.worst.clone(),
            format!("{:.1}", sr.worst_us),
            sr.default_us
                .map_or_else(|| "-".into(), |t| format!("{t:.1}")),
            sr.tried.to_string(),
        ]);
    }
    s.push_str(&rows_table(&rows, &[3, 5, 7, 8, 9]));
    s.push('\n');
}

/// The kernels timed twice: whether a figure depends on what ran before it.
fn drift_section(s: &mut String, r: &KernelReport) {
    if r.drift.is_empty() {
        return;
    }
    let moved = r.drift.iter().filter(|d| d.drifted).count();
    let _ = writeln!(
        s,
        "Drift (the same kernel early in the run and again at its end): {}",
        if moved == 0 {
            format!(
                "every figure within {:.0}%",
                100.0 * crate::report::kernels::DRIFT_LIMIT
            )
        } else {
            format!(
                "{moved} moved more than {:.0}%: figures depend on what ran before them",
                100.0 * crate::report::kernels::DRIFT_LIMIT
            )
        }
    );
    let mut rows = vec![
        ["kernel", "first us", "again us", "change", "drift"]
            .map(String::from)
            .to_vec(),
    ];
    for d in &r.drift {
        rows.push(vec![
            d.kernel.clone(),
            format!("{:.1}", d.first_us),
            format!("{:.1}", d.again_us),
            format!("{:+.1}%", 100.0 * d.change),
            if d.drifted { "DRIFT" } else { "ok" }.into(),
        ]);
    }
    s.push_str(&rows_table(&rows, &[1, 2, 3]));
    s.push('\n');
}

/// The per-kernel table, the skipped kernels and the errors.
fn kernels_section(s: &mut String, r: &KernelReport) {
    let (headers, kernel_rows) = kernel_table(r);
    let rows: Vec<Vec<String>> = std::iter::once(headers).chain(kernel_rows).collect();
    if !r.kernels.is_empty() {
        s.push_str(&rows_table(&rows, &[3, 5, 6, 7, 8, 9, 10, 11]));
        if r.kernels.iter().any(|k| k.cache_resident) {
            s.push_str("(cached): above 100%, the data sat in cache; not reported as bandwidth\n");
        }
        s.push('\n');
    }
    for k in &r.skipped {
        let _ = writeln!(
            s,
            "skipped {} {} {:?}: {}",
            k.name, k.dtype, k.shape, k.reason
        );
    }
    for e in &r.errors {
        let _ = writeln!(s, "error: {e}");
    }
    if !r.skipped.is_empty() || !r.errors.is_empty() {
        s.push('\n');
    }
}

/// Time per call against batch, relative to the GEMV: where the roofline turns.
fn roofline_section(s: &mut String, r: &KernelReport) {
    if !r.roofline.is_empty() {
        let _ = writeln!(
            s,
            "Roofline turn: time per call relative to the GEMV (1.00 = the weights' bytes still dominate; turn = first batch above {:.2})",
            ROOFLINE_TURN
        );
        let batches: std::collections::BTreeSet<u32> = r
            .roofline
            .iter()
            .flat_map(|row| row.points.iter().map(|p| p.batch))
            .collect();
        let mut header = vec!["dtype".to_string(), "shape".into()];
        header.extend(batches.iter().map(|b| format!("b={b}")));
        header.push("turn".into());
        let mut rows = vec![header];
        for row in &r.roofline {
            let mut line = vec![row.dtype.clone(), shape_label(&row.shape)];
            for b in &batches {
                line.push(
                    row.points
                        .iter()
                        .find(|p| p.batch == *b)
                        .map_or_else(|| "-".into(), |p| format!("{:.2}", p.time_vs_batch1)),
                );
            }
            line.push(
                row.turn_batch
                    .map_or_else(|| "> max".into(), |b| format!("batch {b}")),
            );
            rows.push(line);
        }
        let right: Vec<usize> = (2..2 + batches.len()).collect();
        s.push_str(&rows_table(&rows, &right));
        s.push('\n');
    }
}

/// The synthetic decode steps against their floor.
fn decode_steps_section(s: &mut String, r: &KernelReport) {
    if !r.decode_steps.is_empty() {
        let mut rows = vec![
            [
                "decode step",
                "quant",
                "context",
                "layers (distinct)",
                "dispatches",
                "layers ms",
                "lm head ms",
                "step ms",
                "floor ms",
                "step/floor",
                "GB/s",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for d in &r.decode_steps {
            rows.push(vec![
                d.model.clone(),
                d.quant.to_string(),
                d.context.to_string(),
                format!("{} ({})", d.layers, d.distinct_layers),
                d.dispatches.to_string(),
                format!("{:.2}", d.layers_ms),
                format!("{:.2}", d.lm_head_ms),
                format!("{:.2}", d.step_ms),
                format!("{:.2}", d.tpot_floor_ms),
                format!("{:.2}x", d.gap),
                format!("{:.1}", d.effective_gbps),
            ]);
        }
        s.push_str(&rows_table(&rows, &[2, 4, 5, 6, 7, 8, 9, 10]));
        s.push('\n');
    }
}

/// The decode floor of every model, quant and context.
fn floor_section(s: &mut String, r: &KernelReport) {
    if !r.decode_floor.is_empty() {
        let kv = r.decode_floor[0].estimate.kv_dtype;
        let _ = writeln!(
            s,
            "Decode floor (batch 1, KV cache {kv}): TPOT_floor = weight_bytes / B_gemv + kv_bytes / B_attention"
        );
        let mut rows = vec![
            [
                "model",
                "quant",
                "context",
                "weights GB",
                "KV GB",
                "GB/token",
                "B_gemv",
                "B_attn",
                "TPOT floor ms",
                "tok/s ceiling",
                "step ms",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for f in &r.decode_floor {
            let e = &f.estimate;
            rows.push(vec![
                e.model.clone(),
                e.quant.to_string(),
                e.context.to_string(),
                gb(e.weight_bytes),
                gb(e.kv_bytes),
                gb(e.bytes_per_token),
                format!("{:.1}", e.gemv_gbps),
                format!("{:.1}", e.attention_gbps),
                format!("{:.3}", e.tpot_floor_ms),
                format!("{:.1}", e.tokens_per_s_ceiling),
                f.decode_step_ms
                    .map_or_else(|| "-".into(), |m| format!("{m:.2}")),
            ]);
        }
        s.push_str(&rows_table(&rows, &[2, 3, 4, 5, 6, 7, 8, 9, 10]));
        let sources: std::collections::BTreeSet<String> = r
            .decode_floor
            .iter()
            .map(|f| {
                format!(
                    "{} <- {}; B_attn <- {}",
                    f.estimate.quant, f.gemv_source, f.attention_source
                )
            })
            .collect();
        for src in sources {
            let _ = writeln!(s, "  B_gemv {src}");
        }
        s.push('\n');
    }
}

/// A model file as read: the model, its tensor types (count, bytes read per
/// token, kernel or not) and the tensors without a kernel.
pub fn gguf_file_text(g: &GgufReport) -> String {
    let m = &g.model;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "File      {} ({}, header {} KiB, sha256 {}...)",
        g.file,
        mib_label(g.size_bytes),
        g.header_bytes / 1024,
        &g.header_sha256[..g.header_sha256.len().min(16)]
    );
    let _ = writeln!(
        s,
        "model     {} ({}): {} layers, hidden {}, {} heads / {} KV heads x {}, vocab {}, context {}{}{}",
        m.name.as_deref().unwrap_or(&m.architecture),
        m.architecture,
        m.layers,
        m.hidden,
        m.heads_per_layer.iter().copied().max().unwrap_or(0),
        m.kv_heads_per_layer.iter().copied().max().unwrap_or(0),
        m.key_length,
        m.vocab,
        m.context_length
            .map_or_else(|| "?".into(), |c| c.to_string()),
        m.sliding_window.map_or_else(String::new, |w| format!(
            ", window {w} on {} of {} layers",
            m.sliding_layers.iter().filter(|b| **b).count(),
            m.layers
        )),
        if m.tied_embeddings {
            ", tied embeddings"
        } else {
            ""
        }
    );
    let mut rows = vec![
        ["type", "tensors", "MB read per token", "kernel"]
            .map(String::from)
            .to_vec(),
    ];
    for t in &g.types {
        rows.push(vec![
            t.ggml_type.to_string(),
            t.tensors.to_string(),
            format!("{:.2}", t.bytes as f64 / 1e6),
            if t.kernel {
                "yes"
            } else {
                "none: not measured"
            }
            .into(),
        ]);
    }
    s.push_str(&rows_table(&rows, &[1, 2]));
    for u in &g.unsupported {
        let _ = writeln!(
            s,
            "  no {} kernel: {} (its bytes count in the floor; not measured)",
            u.ggml_type,
            u.tensors.join(", ")
        );
    }
    s.push('\n');
    s
}

/// A model file's decode floor on this GPU, per context.
pub fn gguf_floor_text(g: &GgufReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "This file on this GPU: {} (batch 1; each type's weights at its GEMV's bandwidth{})",
        g.file,
        if g.real_weights {
            ", measured on the file's own weights"
        } else {
            ""
        }
    );
    let mut rows = vec![
        [
            "context",
            "weights MB",
            "KV MB",
            "MB/token",
            "floor at read ms",
            "TPOT floor ms",
            "tok/s ceiling",
        ]
        .map(String::from)
        .to_vec(),
    ];
    let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |m| format!("{m:.3}"));
    for f in &g.floors {
        let b = &f.bytes;
        rows.push(vec![
            b.context_tokens.to_string(),
            format!("{:.2}", b.weight_bytes_per_token as f64 / 1e6),
            format!("{:.2}", b.kv_bytes_per_token as f64 / 1e6),
            format!("{:.2}", b.bytes_per_token as f64 / 1e6),
            ms(f.read_floor_ms),
            ms(f.tpot_floor_ms),
            f.tokens_per_s_ceiling
                .map_or_else(|| "-".into(), |t| format!("{t:.1}")),
        ]);
    }
    s.push_str(&rows_table(&rows, &[0, 1, 2, 3, 4, 5, 6]));
    let gemvs: Vec<String> = g
        .types
        .iter()
        .filter_map(|t| Some(format!("{} {:.1} GB/s", t.ggml_type, t.gemv_gbps?)))
        .collect();
    if !gemvs.is_empty() {
        let _ = writeln!(s, "  GEMV bandwidth by type: {}", gemvs.join(", "));
    }
    if let Some(f) = g.floors.first() {
        for a in &f.bytes.approximations {
            let _ = writeln!(s, "  note: {a}");
        }
    }
    s.push('\n');
    s
}

/// The bandwidth goals, met or not.
fn goals_section(s: &mut String, r: &KernelReport) {
    if !r.goals.is_empty() {
        let real_gpu = r.adapter.device_type != "Cpu";
        let _ = writeln!(
            s,
            "Goals (fraction of the measured read bandwidth, or of the roof that bounds the kernel){}",
            if real_gpu {
                ""
            } else {
                "; they apply to real GPUs, this adapter runs on the CPU"
            }
        );
        let mut rows = vec![
            ["goal", "target", "measured", "status", "from"]
                .map(String::from)
                .to_vec(),
        ];
        for g in &r.goals {
            rows.push(vec![
                g.goal.clone(),
                format!(">= {:.0}%", 100.0 * g.target_fraction),
                g.measured_fraction
                    .map_or_else(|| "-".into(), |m| format!("{:.0}%", 100.0 * m)),
                match g.met {
                    Some(true) => "met".into(),
                    Some(false) => "not met".into(),
                    None => "not measured".into(),
                },
                g.source.clone(),
            ]);
        }
        s.push_str(&rows_table(&rows, &[1, 2]));
        s.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_terminal_text_has_every_section_of_a_real_report() {
        let r = KernelReport::from_json(include_str!(
            "../../../tests/fixtures/reports/kernels-lavapipe.json"
        ))
        .unwrap();
        let t = text(&r);
        for part in [
            "Bandwidth ceiling: read ",
            "kernel                  dtype  shape",
            "Roofline turn:",
            "Decode floor (batch 1, KV cache ",
            "verified: every kernel matched its CPU reference",
        ] {
            assert!(t.contains(part), "{part:?} missing:\n{t}");
        }
        // Every table line ends without padding.
        assert!(t.lines().all(|l| !l.ends_with(' ')), "{t}");
        // One row per kernel in the kernel table.
        let (_, rows) = kernel_table(&r);
        assert_eq!(rows.len(), r.kernels.len());
    }
}
