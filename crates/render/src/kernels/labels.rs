//! The labels and the per-kernel table every view of a kernels report shares (the
//! CLI, the combined report, the page's GPU view).

use crate::fmt::fmt_rate;
use crate::table::{Align, text_table_with};
use tokenscope_kernel_report::{KernelReport, KernelResult};

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
        _ if k.is_user() => format!("grid {}", shape_label(&k.shape)),
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
                check_label(k).to_owned(),
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

/// The variant that ran and where it came from: `sg128_r2_u4_b1 (tuned)`,
/// `c64_w128_v8 (default: unsearched)`, `sg128_r2_u4_b1 (nearest shape's)`.
pub fn variant_label(k: &KernelResult) -> String {
    k.variant.as_ref().map_or_else(
        || "-".into(),
        |v| {
            let source = match v.source.as_str() {
                "unsearched" => "default: unsearched",
                "nearest" => "nearest shape's",
                other => other,
            };
            format!("{} ({source})", v.name)
        },
    )
}

/// A kernel's check: `yes`, a loud `NO`, or `unchecked` for a user's kernel run
/// without a check (nothing was compared, so nothing passed).
pub fn check_label(k: &KernelResult) -> &'static str {
    if k.verified && k.verification.checked == 0 {
        "unchecked"
    } else {
        verified_label(k.verified)
    }
}

/// `yes`, or a loud `NO` for a kernel that did not match its CPU reference.
pub fn verified_label(verified: bool) -> &'static str {
    if verified { "yes" } else { "NO" }
}

/// A table whose first row is its headers; columns listed in `right` are
/// right-aligned, the others left-aligned.
pub(super) fn rows_table(rows: &[Vec<String>], right: &[usize]) -> String {
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

/// Bytes as GB (10^9), two decimals.
pub(super) fn gb(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / 1e9)
}
