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

/// The roofline: every kernel that does arithmetic at its FLOPs per byte (x) and
/// GFLOP/s (y), both logarithmic, under the two measured roofs: the read bandwidth
/// (a slope: GFLOP/s = GB/s x FLOP/byte) and the f32 FMA rate (flat), meeting at the
/// ridge. A developer's own kernels (`kernels --shader`) are drawn large and named,
/// and tokenscope's GEMV run beside them at the same bytes is named too; kernels
/// with no FLOPs (a pure read or copy) cannot sit on it and are counted below (the
/// bandwidth chart holds them).
pub fn roofline(report: &tokenscope_kernel_report::KernelReport) -> String {
    let title = "Roofline: FLOP/s against arithmetic intensity".to_owned();
    let read = report.bandwidth.as_ref().map_or(0.0, |b| b.read_gbps);
    let fma = report.compute.as_ref().map_or(0.0, |c| c.f32_gflops);
    if read <= 0.0 || fma <= 0.0 {
        return empty_chart(
            &title,
            "The read bandwidth or the FMA rate was not measured: no roofs to draw.",
        );
    }
    let placed: Vec<&tokenscope_kernel_report::KernelResult> = report
        .kernels
        .iter()
        .filter(|k| k.flops > 0 && k.bytes_moved > 0 && k.gflops > 0.0 && k.gflops.is_finite())
        .collect();
    let unplaced = report.kernels.len() - placed.len();
    if placed.is_empty() {
        return empty_chart(
            &title,
            "No kernel does arithmetic (none has FLOPs): the bandwidth chart holds them.",
        );
    }
    let intensity =
        |k: &tokenscope_kernel_report::KernelResult| k.flops as f64 / k.bytes_moved as f64;
    let ridge = fma / read;
    let xs: Vec<f64> = placed.iter().map(|k| intensity(k)).chain([ridge]).collect();
    let (x_lo, x_hi) = min_max(&xs);
    let ys: Vec<f64> = placed.iter().map(|k| k.gflops).chain([fma]).collect();
    let (y_lo, y_hi) = min_max(&ys);
    let x_axis = Axis::log10(x_lo / 2.0, x_hi * 2.0, "arithmetic intensity (FLOP/byte)");
    let y_axis = Axis::log10(y_lo / 2.0, y_hi * 2.0, "GFLOP/s");
    let desc = format!(
        "{} kernels on {} at their FLOP/byte and GFLOP/s (log scales) under the read bandwidth roof of {} GB/s and the f32 FMA roof of {} GFLOP/s, meeting at {} FLOP/byte{}.",
        placed.len(),
        report.adapter.name,
        fmt_num(read),
        fmt_num(fma),
        fmt_num(ridge),
        if unplaced > 0 {
            format!("; {unplaced} kernels with no FLOPs are not on it")
        } else {
            String::new()
        }
    );
    let mut svg = Svg::new(WIDTH, HEIGHT, &title, &desc);
    svg.title_text(&title);
    let plot = Plot::new(&mut svg, WIDTH, HEIGHT, x_axis, y_axis);
    let at = |ai: f64, g: f64| (plot.sx(ai.log10()), plot.sy(g.log10()));
    // The roofs, clipped to the plot: the slope up to the ridge, flat after it.
    let x0 = 10f64.powf(plot.x.lo);
    let x1 = 10f64.powf(plot.x.hi);
    let y_floor = 10f64.powf(plot.y.as_ref().map_or(0.0, |y| y.lo));
    let start = x0.max(y_floor / read);
    svg.polyline(
        &[at(start, read * start), at(ridge, fma), at(x1, fma)],
        GREEN,
        2.0,
        Dash::Solid,
    );
    legend(
        &mut svg,
        plot.left,
        44.0,
        &[
            (
                format!(
                    "roofs: read {} GB/s, FMA {} GFLOP/s",
                    fmt_num(read),
                    fmt_num(fma)
                ),
                GREEN,
                Dash::Solid,
            ),
            ("tokenscope's kernels".into(), BLUE, Dash::Block),
            ("your kernel".into(), VERMILLION, Dash::Block),
        ],
    );
    // tokenscope's own first, yours on top.
    let mut order: Vec<&&tokenscope_kernel_report::KernelResult> = placed.iter().collect();
    order.sort_by_key(|k| k.is_user());
    let mut yours_drawn = 0;
    for k in order {
        let ai = intensity(k);
        let (px, py) = at(ai, k.gflops);
        let name = format!(
            "{} {} {}{}",
            k.name,
            k.dtype,
            crate::kernels::shape_label(&k.shape),
            if k.batch > 1 {
                format!(" b{}", k.batch)
            } else {
                String::new()
            }
        );
        let roof = (read * ai).min(fma);
        let tip = format!(
            "{name}: {} FLOP/byte, {} GFLOP/s, {:.0}% of its roof{}",
            fmt_num(ai),
            fmt_num(k.gflops),
            100.0 * k.gflops / roof,
            if k.verified { "" } else { ", NOT VERIFIED" }
        );
        if k.is_user() {
            // Each parameter set named, the labels staggered (sets of one kernel
            // often sit close together).
            let set = k
                .variant
                .as_ref()
                .map_or(String::new(), |v| format!(" {}", v.name));
            svg.circle_titled(px, py, 6.0, VERMILLION, &tip);
            svg.text(
                px + 9.0,
                py - 6.0 + 13.0 * f64::from(yours_drawn % 3),
                &format!("{}{set}", k.name),
                11.0,
                Anchor::Start,
                TEXT,
            );
            yours_drawn += 1;
        } else if let Some(user) = &k.beside {
            svg.circle_titled(px, py, 5.0, BLUE, &tip);
            svg.text(
                px + 8.0,
                py + 14.0,
                &format!("tokenscope {} {}, bytes of {user}", k.name, k.dtype),
                10.0,
                Anchor::Start,
                MUTED,
            );
        } else {
            svg.circle_titled(px, py, 3.0, BLUE, &tip);
        }
        if !k.verified {
            svg.ring(px, py, 8.0, VERMILLION);
        }
    }
    if unplaced > 0 {
        svg.text(
            plot.right,
            HEIGHT - 6.0,
            &format!("{unplaced} kernels with no FLOPs (reads, copies) are not on the roofline"),
            10.0,
            Anchor::End,
            MUTED,
        );
    }
    svg.finish()
}
