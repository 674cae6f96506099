//! The kernels' achieved bandwidth against the measured read bandwidth.

use super::svg::*;

/// Achieved bandwidth of every kernel against the measured read bandwidth (the
/// ceiling): how close each kernel gets to the memory bus. Cache-resident results
/// (above the ceiling) are drawn hatched-grey and labelled, never as bandwidth.
pub fn kernel_roofline(report: &tokenscope_kernel_report::KernelReport) -> String {
    let title = "Kernels against the measured memory bandwidth".to_owned();
    let read = report.bandwidth.as_ref().map_or(0.0, |b| b.read_gbps);
    let rows: Vec<(String, f64, bool, bool)> = report
        .kernels
        .iter()
        .filter(|k| k.effective_gbps.is_finite())
        .map(|k| {
            let shape = match k.context {
                Some(c) => format!("ctx {c}"),
                None => crate::kernels::shape_label(&k.shape),
            };
            let batch = if k.batch > 1 {
                format!(" b{}", k.batch)
            } else {
                String::new()
            };
            (
                format!("{} {} {shape}{batch} ({})", k.name, k.dtype, k.reduction),
                k.effective_gbps,
                k.cache_resident,
                k.verified,
            )
        })
        .collect();
    if rows.is_empty() || read <= 0.0 {
        return empty_chart(
            &title,
            "No kernel or no bandwidth measured: nothing to plot.",
        );
    }
    let hi = rows.iter().map(|r| r.1).fold(read, f64::max);
    let row_h = 17.0;
    let height = MARGIN_TOP + MARGIN_BOTTOM + row_h * rows.len() as f64 + 10.0;
    let desc = format!(
        "Effective GB/s of {} kernels on {} (bars) against the read bandwidth ceiling of {} GB/s (dashed line).",
        rows.len(),
        report.adapter.name,
        fmt_num(read)
    );
    let mut svg = Svg::new(WIDTH, height, &title, &desc);
    svg.title_text(&title);
    let x_label = format!("achieved bandwidth (GB/s) on {}", report.adapter.name);
    let plot = Plot::new_rows_at(
        &mut svg,
        WIDTH,
        height,
        280.0,
        Axis::new(0.0, hi * 1.05, &x_label),
    );
    legend(
        &mut svg,
        plot.left,
        44.0,
        &[
            ("from memory".into(), BLUE, Dash::Block),
            ("cache-resident (not bandwidth)".into(), MUTED, Dash::Block),
            (
                format!("read ceiling {} GB/s", fmt_num(read)),
                GREEN,
                Dash::Dashed,
            ),
        ],
    );
    for (i, (label, gbps, cached, verified)) in rows.iter().enumerate() {
        let y = plot.top + 6.0 + row_h * i as f64;
        let name = if *verified {
            label.clone()
        } else {
            format!("{label} (NOT VERIFIED)")
        };
        svg.text(
            plot.left - 6.0,
            y + 11.0,
            &name,
            10.0,
            Anchor::End,
            if *verified { TEXT } else { VERMILLION },
        );
        svg.rect_titled(
            plot.sx(0.0),
            y + 2.0,
            plot.sx(*gbps) - plot.sx(0.0),
            12.0,
            if *cached { MUTED } else { BLUE },
            &format!(
                "{label}: {} GB/s, {:.0}% of read{}",
                fmt_num(*gbps),
                100.0 * gbps / read,
                if *cached { ", cache-resident" } else { "" }
            ),
        );
    }
    let fx = plot.sx(read);
    svg.line((fx, plot.top), (fx, plot.bottom), GREEN, 2.0, Dash::Dashed);
    svg.finish()
}
