//! The decode floors rendered: the floor at the memory's read bandwidth beside the
//! floor with these kernels, named the same in every view (the terminal, the
//! combined report, the page), and a model file's floor.

use std::fmt::Write as _;

use super::labels::{gb, mib_label, rows_table};
use crate::fmt::fmt_sig3;
pub use tokenscope_hw::floor::{FLOOR_AT_READ, FLOOR_WITH_KERNELS};
use tokenscope_kernel_report::{GgufReport, KernelReport};

/// The two floors in a sentence, for a table's legend: what each divides by.
pub fn floor_legend(read_gbps: Option<f64>) -> String {
    format!(
        "{FLOOR_AT_READ}: every byte at the memory's measured read bandwidth{} (the hardware's floor); {FLOOR_WITH_KERNELS}: each weight format at its own GEMV's bandwidth and the KV cache at the attention kernel's (B_gemv, B_attn)",
        read_gbps.map_or_else(String::new, |r| format!(" ({} GB/s)", fmt_sig3(r)))
    )
}

/// Milliseconds as the floor tables show them: three significant digits.
fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), fmt_sig3)
}

/// Tokens/s from a floor in milliseconds, three significant digits.
fn tok_s(floor_ms: Option<f64>) -> String {
    floor_ms
        .filter(|m| *m > 0.0)
        .map_or_else(|| "-".into(), |m| fmt_sig3(1e3 / m))
}

/// The decode floor table every view shows: headers and one row per model, quant
/// and context, the floor at the read bandwidth beside the floor with these kernels.
pub fn floor_table(r: &KernelReport) -> (Vec<String>, Vec<Vec<String>>) {
    let headers = vec![
        "model".to_owned(),
        "quant".into(),
        "context".into(),
        "GB/token".into(),
        format!("{FLOOR_AT_READ} ms"),
        "tok/s at read bw".into(),
        format!("{FLOOR_WITH_KERNELS} ms"),
        "tok/s with these kernels".into(),
        "B_gemv GB/s".into(),
        "B_attn GB/s".into(),
        "step ms".into(),
    ];
    let rows = r
        .decode_floor
        .iter()
        .map(|f| {
            let e = &f.estimate;
            vec![
                e.model.clone(),
                e.quant.to_string(),
                e.context.to_string(),
                gb(e.bytes_per_token),
                ms(f.read_floor_ms),
                tok_s(f.read_floor_ms),
                ms(Some(e.tpot_floor_ms)),
                tok_s(Some(e.tpot_floor_ms)),
                fmt_sig3(e.gemv_gbps),
                fmt_sig3(e.attention_gbps),
                ms(f.decode_step_ms),
            ]
        })
        .collect();
    (headers, rows)
}

/// The synthetic decode steps against both floors.
pub(super) fn decode_steps_section(s: &mut String, r: &KernelReport) {
    if r.decode_steps.is_empty() {
        return;
    }
    let mut rows = vec![vec![
        "decode step".to_owned(),
        "quant".into(),
        "context".into(),
        "layers (distinct)".into(),
        "dispatches".into(),
        "layers ms".into(),
        "lm head ms".into(),
        "step ms".into(),
        format!("{FLOOR_AT_READ} ms"),
        format!("{FLOOR_WITH_KERNELS} ms"),
        "step / kernels floor".into(),
        "GB/s".into(),
    ]];
    for d in &r.decode_steps {
        rows.push(vec![
            d.model.clone(),
            d.quant.to_string(),
            d.context.to_string(),
            format!("{} ({})", d.layers, d.distinct_layers),
            d.dispatches.to_string(),
            fmt_sig3(d.layers_ms),
            fmt_sig3(d.lm_head_ms),
            fmt_sig3(d.step_ms),
            ms(d.read_floor_ms),
            fmt_sig3(d.tpot_floor_ms),
            format!("{:.2}x", d.gap),
            fmt_sig3(d.effective_gbps),
        ]);
    }
    s.push_str(&rows_table(&rows, &[2, 4, 5, 6, 7, 8, 9, 10, 11]));
    s.push('\n');
}

/// The decode floor of every model, quant and context.
pub(super) fn floor_section(s: &mut String, r: &KernelReport) {
    if r.decode_floor.is_empty() {
        return;
    }
    let kv = r.decode_floor[0].estimate.kv_dtype;
    let _ = writeln!(
        s,
        "Decode floor (batch 1, KV cache {kv}): weight_bytes / B + kv_bytes / B per token"
    );
    let (headers, body) = floor_table(r);
    let rows: Vec<Vec<String>> = std::iter::once(headers).chain(body).collect();
    s.push_str(&rows_table(&rows, &[2, 3, 4, 5, 6, 7, 8, 9, 10]));
    let _ = writeln!(s, "  {}", floor_legend(r.read_gbps()));
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

/// A model file's decode floor on this GPU, per context: the floor at the read
/// bandwidth beside the floor with these kernels (each type at its GEMV's).
pub fn gguf_floor_text(g: &GgufReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "This file on this GPU: {} (batch 1{})",
        g.file,
        if g.real_weights {
            "; the GEMVs measured on the file's own weights"
        } else {
            ""
        }
    );
    let mut rows = vec![vec![
        "context".to_owned(),
        "weights MB".into(),
        "KV MB".into(),
        "MB/token".into(),
        format!("{FLOOR_AT_READ} ms"),
        "tok/s at read bw".into(),
        format!("{FLOOR_WITH_KERNELS} ms"),
        "tok/s with these kernels".into(),
    ]];
    for f in &g.floors {
        let b = &f.bytes;
        rows.push(vec![
            b.context_tokens.to_string(),
            format!("{:.2}", b.weight_bytes_per_token as f64 / 1e6),
            format!("{:.2}", b.kv_bytes_per_token as f64 / 1e6),
            format!("{:.2}", b.bytes_per_token as f64 / 1e6),
            ms(f.read_floor_ms),
            tok_s(f.read_floor_ms),
            ms(f.tpot_floor_ms),
            tok_s(f.tpot_floor_ms),
        ]);
    }
    s.push_str(&rows_table(&rows, &[0, 1, 2, 3, 4, 5, 6, 7]));
    let read = g.floors.iter().find_map(|f| {
        let ms = f.read_floor_ms.filter(|m| *m > 0.0)?;
        Some(f.bytes.bytes_per_token as f64 / (ms * 1e6))
    });
    let _ = writeln!(s, "  {}", floor_legend(read));
    let gemvs: Vec<String> = g
        .types
        .iter()
        .filter_map(|t| Some(format!("{} {} GB/s", t.ggml_type, fmt_sig3(t.gemv_gbps?))))
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_core::report::combined::ReportInput;
    use tokenscope_hw::floor::{ModelShape, ms_at};

    /// The lavapipe fixture's floors as a run makes them now (both floors).
    fn report() -> KernelReport {
        let text = include_str!("../../../../tests/fixtures/reports/kernels-lavapipe.json");
        let mut r = KernelReport::from_json(text).unwrap();
        r.decode_floor = r
            .decode_floor
            .iter()
            .filter_map(|f| {
                let e = &f.estimate;
                let m = ModelShape::preset(&e.model).ok()?;
                r.floor_row(&m, e.quant, e.context, e.kv_dtype)
            })
            .collect();
        r
    }

    #[test]
    fn the_floors_agree_with_each_other() {
        let r = report();
        let read = r.read_gbps().unwrap();
        assert_eq!(r.decode_floor.len(), 3);
        for f in &r.decode_floor {
            let e = &f.estimate;
            let at_read = f.read_floor_ms.unwrap();
            // Every byte at the read bandwidth.
            assert_eq!(Some(at_read), ms_at(e.bytes_per_token, read));
            assert_eq!(f.read_gbps, Some(read));
            assert!((f.read_tokens_per_s_ceiling.unwrap() * at_read - 1e3).abs() < 1e-9);
            // The hardware's floor is never above the kernels'.
            assert!(at_read <= e.tpot_floor_ms, "{f:?}");
        }
        // Fewer bytes, a lower floor at the read bandwidth: q4_0 <= q8_0 <= f16,
        // whatever the kernels (on lavapipe q4_0's floor with these kernels is
        // not below f16's: the "floor reads backwards").
        let at = |q: &str| {
            r.decode_floor
                .iter()
                .find(|f| f.estimate.quant.as_str() == q)
                .unwrap()
        };
        let (q4, q8, f16) = (at("q4_0"), at("q8_0"), at("f16"));
        assert!(q4.read_floor_ms < q8.read_floor_ms && q8.read_floor_ms < f16.read_floor_ms);
        assert!(q4.estimate.bytes_per_token < q8.estimate.bytes_per_token);
    }

    #[test]
    fn each_floor_reads_the_same_in_every_view() {
        let r = report();
        let (headers, rows) = floor_table(&r);
        let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
        let (read_col, kernels_col) = (
            col(&format!("{FLOOR_AT_READ} ms")),
            col(&format!("{FLOOR_WITH_KERNELS} ms")),
        );
        let text = super::super::text(&r);
        let view = crate::page::gpu::KernelsView::of(&r);
        let input = ReportInput {
            clients: Vec::new(),
            kernels: Some(r.clone()),
            model: None,
        };
        let analysis = tokenscope_core::analyze::verdict::analyze(&input);
        let md = crate::combined::markdown(&input, &analysis);
        let html = crate::combined::html(&input, &analysis);
        assert_eq!(view.floor_headers, headers);
        for (i, f) in r.decode_floor.iter().enumerate() {
            let read = fmt_sig3(f.read_floor_ms.unwrap());
            let kernels = fmt_sig3(f.estimate.tpot_floor_ms);
            assert_eq!(
                (&rows[i][read_col], &rows[i][kernels_col]),
                (&read, &kernels)
            );
            assert_eq!(view.floor[i], rows[i]);
            // The terminal's row, the Markdown's and the HTML's carry both figures.
            let line = |doc: &str| {
                doc.lines().any(|l| {
                    l.contains(&read)
                        && l.contains(&kernels)
                        && l.contains(f.estimate.quant.as_str())
                })
            };
            assert!(line(&text), "{read} / {kernels} not in:\n{text}");
            assert!(line(&md), "{read} / {kernels} not in:\n{md}");
            assert!(html.contains(&format!("<td>{read}</td>")), "{html}");
        }
        for doc in [&text, &md] {
            assert!(doc.contains(FLOOR_AT_READ) && doc.contains(FLOOR_WITH_KERNELS));
        }
        // No raw figures: three significant digits.
        assert!(!text.contains("8882.047"));
        let decimals = |s: &str| s.split('.').nth(1).map_or(0, str::len);
        for row in &rows {
            for cell in &row[read_col..=kernels_col + 1] {
                let digits = cell.replace('.', "").trim_start_matches('0').len();
                assert!(digits <= 3 || decimals(cell) == 0, "{cell}");
            }
        }
    }

    #[test]
    fn a_kernels_report_alone_says_what_it_is() {
        let r = report();
        let input = ReportInput {
            clients: Vec::new(),
            kernels: Some(r),
            model: None,
        };
        let analysis = tokenscope_core::analyze::verdict::analyze(&input);
        let md = crate::combined::markdown(&input, &analysis);
        assert!(!md.contains("no level had a successful request"), "{md}");
        assert!(md.contains("No client run given"), "{md}");
    }
}
