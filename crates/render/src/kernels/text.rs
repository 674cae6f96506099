//! The whole kernels report as text for the terminal (`tokenscope kernels`).

use std::fmt::Write as _;

use super::floor::{decode_steps_section, floor_section, gguf_floor_text};
use super::labels::{kernel_table, mib_label, rows_table, shape_label};
use super::tuning::{search_section, tuning_section};
use crate::fmt::fmt_sig3;
use tokenscope_kernel_report::{KernelReport, ROOFLINE_TURN};

/// The kernels report as the terminal shows it: the bandwidth ceiling, the kernel
/// table, the roofline turn, the decode steps, the decode floor and the goals.
pub fn text(r: &KernelReport) -> String {
    let mut s = String::new();
    bandwidth_section(&mut s, r);
    compute_section(&mut s, r);
    tuning_section(&mut s, r);
    kernels_section(&mut s, r);
    s.push_str(&user_text(r));
    search_section(&mut s, r);
    roofline_section(&mut s, r);
    dispatch_cost_section(&mut s, r);
    decode_steps_section(&mut s, r);
    floor_section(&mut s, r);
    if let Some(g) = &r.gguf {
        s.push_str(&gguf_floor_text(g));
    }
    goals_section(&mut s, r);
    drift_section(&mut s, r);
    let unchecked = r
        .kernels
        .iter()
        .filter(|k| k.verified && k.verification.checked == 0)
        .count();
    let _ = writeln!(
        s,
        "verified: {}",
        match (r.verified, unchecked) {
            (false, _) => "NO (see above)".to_string(),
            (true, 0) if r.kernels.iter().any(|k| k.is_user()) => {
                "every kernel matched its reference".into()
            }
            (true, 0) => "every kernel matched its CPU reference".into(),
            (true, n) => format!(
                "every checked kernel matched its reference; {n} not checked (no check given)"
            ),
        }
    );
    s
}

/// A developer's own kernels (`kernels --shader`, the page's picked kernel): for
/// each, its parameter sets ranked, the fastest against the roof that binds it,
/// and what the timing did; empty without one.
pub fn user_text(r: &KernelReport) -> String {
    let mut s = String::new();
    user_section(&mut s, r);
    s
}

fn user_section(s: &mut String, r: &KernelReport) {
    let mut names: Vec<&str> = Vec::new();
    for k in r.kernels.iter().filter(|k| k.is_user()) {
        if !names.contains(&k.name.as_str()) {
            names.push(&k.name);
        }
    }
    let ridge = match (&r.compute, &r.bandwidth) {
        (Some(c), Some(b)) if b.read_gbps > 0.0 => Some(c.f32_gflops / b.read_gbps),
        _ => None,
    };
    for name in names {
        let mut sets: Vec<&tokenscope_kernel_report::KernelResult> = r
            .kernels
            .iter()
            .filter(|k| k.is_user() && k.name == name)
            .collect();
        sets.sort_by(|a, b| a.median_us.total_cmp(&b.median_us));
        let best = sets[0];
        let set_name = |k: &tokenscope_kernel_report::KernelResult| {
            k.variant
                .as_ref()
                .map_or_else(|| "as written".to_string(), |v| v.name.clone())
        };
        let intensity = if best.bytes_moved > 0 {
            best.flops as f64 / best.bytes_moved as f64
        } else {
            0.0
        };
        let roof = match (best.roof.as_deref(), best.fraction_of_roof) {
            (Some("compute"), Some(f)) => format!(
                "{:.0}% of the FMA roof (compute-bound: {:.1} FLOP/byte{})",
                100.0 * f,
                intensity,
                ridge.map_or(String::new(), |r| format!(", above the ridge at {r:.1}"))
            ),
            (Some(_), Some(f)) if best.cache_resident => format!(
                "above the read bandwidth ({:.0}%): its bindings were served from cache",
                100.0 * f
            ),
            (Some(_), Some(f)) => format!(
                "{:.0}% of the read bandwidth roof (bandwidth-bound: {:.1} FLOP/byte{})",
                100.0 * f,
                intensity,
                ridge.map_or(String::new(), |r| format!(", below the ridge at {r:.1}"))
            ),
            _ => "not placed on the roofline (no roofs measured)".into(),
        };
        // Far under both roofs, neither bytes nor FLOPs bound it.
        let far = best
            .fraction_of_roof
            .filter(|f| *f < 0.1 && !best.cache_resident)
            .map_or("", |_| {
                "; far under both roofs, so neither limits it: look at occupancy (too few workgroups or threads), barriers and dependent loads"
            });
        let _ = writeln!(
            s,
            "Your kernel {name}: {} {} us, {} GB/s, {} GFLOP/s: {roof}{far}{}",
            if sets.len() > 1 {
                format!(
                    "fastest of {} parameter sets, {}:",
                    sets.len(),
                    set_name(best)
                )
            } else {
                format!("{}:", set_name(best))
            },
            fmt_sig3(best.median_us),
            fmt_sig3(best.effective_gbps),
            fmt_sig3(best.gflops),
            if best.verified {
                ""
            } else {
                " (its output did NOT match)"
            }
        );
        if sets.len() > 1 {
            let ranked: Vec<String> = sets
                .iter()
                .map(|k| format!("{} {} us", set_name(k), fmt_sig3(k.median_us)))
                .collect();
            let _ = writeln!(s, "  ranked: {}", ranked.join(", "));
        }
        let mut notes: Vec<&str> = Vec::new();
        for k in &sets {
            for n in &k.notes {
                if !notes.contains(&n.as_str()) {
                    notes.push(n);
                }
            }
        }
        for n in notes {
            let _ = writeln!(s, "  {n}");
        }
        if let Some(g) = r.kernels.iter().find(|k| k.beside.as_deref() == Some(name)) {
            let _ = writeln!(
                s,
                "  beside it, tokenscope's {} {} {} moving {} bytes: {} us, {} GB/s ({:.0}% of the read bandwidth){}",
                g.name,
                g.dtype,
                shape_label(&g.shape),
                g.bytes_moved,
                fmt_sig3(g.median_us),
                fmt_sig3(g.effective_gbps),
                100.0 * g.fraction_of_read,
                if g.verified {
                    ""
                } else {
                    ", its output did NOT match"
                }
            );
        }
        s.push('\n');
    }
}

/// The read and copy ceiling.
fn bandwidth_section(s: &mut String, r: &KernelReport) {
    let timing = r.timing.label();
    if let Some(b) = &r.bandwidth {
        let variant = |v: &Option<tokenscope_kernel_report::VariantReport>| {
            v.as_ref()
                .map_or_else(String::new, |v| format!(" {} ({})", v.name, v.source))
        };
        let _ = writeln!(
            s,
            "Bandwidth ceiling: read {} GB/s{}, copy {} GB/s{} (working set {} in {} x {} buffers; median of {} samples, {timing})",
            fmt_sig3(b.read_gbps),
            variant(&b.read_variant),
            fmt_sig3(b.copy_gbps),
            variant(&b.copy_variant),
            mib_label(b.working_set_bytes),
            b.buffers,
            mib_label(b.buffer_bytes),
            b.read.samples
        );
        for m in r.ceiling_remarks() {
            let _ = writeln!(s, "  ! {m}");
        }
        s.push('\n');
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
                100.0 * tokenscope_kernel_report::DRIFT_LIMIT
            )
        } else {
            format!(
                "{moved} moved more than {:.0}%: figures depend on what ran before them",
                100.0 * tokenscope_kernel_report::DRIFT_LIMIT
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
/// Each GEMV format's time over its shapes as `a + bytes / B`: the fixed cost per
/// dispatch apart from the streaming rate, named only where the fit resolves it.
fn dispatch_cost_section(s: &mut String, r: &KernelReport) {
    if r.dispatch_cost.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "Fixed cost per dispatch: GEMV time over the shapes fitted as a + bytes / B (dispatches back to back; a with its 95% interval)"
    );
    let mut rows = vec![
        [
            "dtype",
            "shapes",
            "variants",
            "a (us)",
            "B (GB/s)",
            "B of read",
            "fixed cost",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for c in &r.dispatch_cost {
        rows.push(vec![
            c.dtype.clone(),
            c.shapes.to_string(),
            c.variants.to_string(),
            format!("{} ± {}", fmt_sig3(c.fixed_us), fmt_sig3(c.fixed_ci95_us)),
            c.stream_gbps.map_or_else(|| "-".into(), fmt_sig3),
            c.stream_fraction_of_read
                .map_or_else(|| "-".into(), |f| format!("{:.0}%", 100.0 * f)),
            if c.resolved && c.variants > 1 {
                format!(
                    "{} us a dispatch, the mix of {} variants",
                    fmt_sig3(c.fixed_us),
                    c.variants
                )
            } else if c.resolved {
                format!("{} us a dispatch", fmt_sig3(c.fixed_us))
            } else if c.fixed_us + c.fixed_ci95_us < 0.0 {
                "the fit does not hold (a below 0: time not linear in bytes)".into()
            } else {
                "not resolved (interval includes 0)".into()
            },
        ]);
    }
    s.push_str(&rows_table(&rows, &[1, 2, 3, 4, 5]));
    s.push('\n');
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
            "../../../../tests/fixtures/reports/kernels-lavapipe.json"
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
