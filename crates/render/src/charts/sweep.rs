//! Charts of a sweep: the throughput-latency curve (knee and SLO bounds marked),
//! the TTFT stage breakdown per level, and TPOT per level against the GPU floor.

use std::fmt::Write as _;

use super::svg::*;
use crate::fmt::escape_html;
use tokenscope_core::analyze::slo::Slo;
use tokenscope_core::model::metric::{E2E_MS, RENDERED_TTFT_MS, TTFT_MS};
use tokenscope_core::report::{Knee, LevelReport};

/// The throughput-latency curve of a sweep: output tokens/s on x, p50/p95/p99 of
/// E2E and TTFT (ms) on y, one point per level in the order run, the knee marked,
/// and the SLO bounds on those metrics drawn as horizontal lines.
pub fn throughput_latency(levels: &[LevelReport], knee: Option<&Knee>, slos: &[Slo]) -> String {
    let title = "Throughput vs latency";
    type Getter = fn(&LevelReport) -> Option<f64>;
    let series: [(&str, &str, Dash, Getter); 6] = [
        ("E2E p50", BLUE, Dash::Solid, |l| l.metrics.e2e_ms.p50),
        ("E2E p95", BLUE, Dash::Dashed, |l| l.metrics.e2e_ms.p95),
        ("E2E p99", BLUE, Dash::Dotted, |l| l.metrics.e2e_ms.p99),
        ("TTFT p50", VERMILLION, Dash::Solid, |l| {
            l.metrics.ttft_ms.p50
        }),
        ("TTFT p95", VERMILLION, Dash::Dashed, |l| {
            l.metrics.ttft_ms.p95
        }),
        ("TTFT p99", VERMILLION, Dash::Dotted, |l| {
            l.metrics.ttft_ms.p99
        }),
    ];
    let points: Vec<(usize, f64)> = levels
        .iter()
        .enumerate()
        .filter(|(_, l)| l.ok > 0 && l.output_tokens_per_s.is_finite())
        .map(|(i, l)| (i, l.output_tokens_per_s))
        .collect();
    let ys: Vec<f64> = points
        .iter()
        .flat_map(|&(i, _)| series.iter().filter_map(move |s| (s.3)(&levels[i])))
        .filter(|v| v.is_finite())
        .collect();
    if points.is_empty() || ys.is_empty() {
        return empty_chart(title, "No level completed a request: nothing to plot.");
    }
    let data_max = ys.iter().copied().fold(0.0, f64::max);
    let plotted_slos: Vec<&Slo> = slos
        .iter()
        .filter(|s| [TTFT_MS.key, E2E_MS.key, RENDERED_TTFT_MS.key].contains(&s.metric.as_str()))
        .collect();
    // Bounds within reach stretch the axis; far-off ones are named, not drawn.
    let y_max = plotted_slos
        .iter()
        .map(|s| s.max_ms)
        .filter(|b| *b <= 2.0 * data_max.max(1e-9))
        .fold(data_max, f64::max);
    let xs: Vec<f64> = points.iter().map(|p| p.1).collect();
    // Throughput from zero: the honest baseline.
    let (_, x_hi) = min_max(&xs);
    let x_axis = Axis::new(0.0, x_hi, "output throughput (tokens/s)");
    let y_axis = Axis::new(0.0, y_max, "latency (ms)");
    let desc = describe(levels, points.len(), knee);
    let mut svg = Svg::new(WIDTH, HEIGHT, title, &desc);
    let plot = Plot::new(&mut svg, WIDTH, HEIGHT, x_axis, y_axis);
    svg.title_text(title);
    slo_bounds(&mut svg, &plot, &plotted_slos, y_max);
    for (name, color, dash, get) in &series {
        let pts: Vec<(f64, f64, usize)> = points
            .iter()
            .filter_map(|&(i, x)| get(&levels[i]).filter(|v| v.is_finite()).map(|y| (x, y, i)))
            .collect();
        let px: Vec<(f64, f64)> = pts.iter().map(|p| (plot.sx(p.0), plot.sy(p.1))).collect();
        svg.polyline(&px, color, 1.8, *dash);
        for (p, (x, y)) in pts.iter().zip(&px) {
            let l = &levels[p.2];
            svg.circle_titled(
                *x,
                *y,
                3.0,
                color,
                &format!(
                    "{}: {} {} ms at {} tokens/s",
                    l.label(),
                    name,
                    fmt_num(p.1),
                    fmt_num(p.0)
                ),
            );
        }
    }
    // Level labels above the E2E p99 (or highest) point.
    for &(i, x) in &points {
        let l = &levels[i];
        let top = series
            .iter()
            .filter_map(|s| (s.3)(l))
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        svg.text(
            plot.sx(x),
            plot.sy(top) - 8.0,
            &l.label(),
            10.0,
            Anchor::Middle,
            TEXT,
        );
    }
    if let Some(k) = knee {
        knee_marker(&mut svg, &plot, levels, k);
    }
    legend(
        &mut svg,
        MARGIN_LEFT,
        40.0,
        &series
            .iter()
            .map(|s| (s.0.to_owned(), s.1, s.2))
            .collect::<Vec<_>>(),
    );
    svg.finish()
}

/// The chart's description for screen readers.
fn describe(levels: &[LevelReport], n_points: usize, knee: Option<&Knee>) -> String {
    format!(
        "Output tokens per second (x) against latency percentiles in milliseconds (y) for {} load levels; E2E in blue, TTFT in vermillion; solid p50, dashed p95, dotted p99.{}",
        n_points,
        match knee {
            Some(k) => format!(
                " The knee is at {}.",
                levels
                    .get(k.level_index)
                    .map_or_else(|| "?".into(), |l| l.label())
            ),
            None => " No knee was found.".into(),
        }
    )
}

/// The SLO bounds as guide lines; those above the chart are named at its top.
fn slo_bounds(svg: &mut Svg, plot: &Plot, slos: &[&Slo], y_max: f64) {
    let mut offscale = Vec::new();
    for s in slos {
        if s.max_ms <= y_max {
            let y = plot.sy(s.max_ms);
            svg.line((plot.left, y), (plot.right, y), MUTED, 1.0, Dash::Guide);
            svg.text(
                plot.right - 4.0,
                y - 4.0,
                &format!("SLO {}", s.label()),
                10.0,
                Anchor::End,
                MUTED,
            );
        } else {
            offscale.push(s.label());
        }
    }
    if !offscale.is_empty() {
        svg.text(
            plot.right,
            plot.top - 6.0,
            &format!("above the chart: SLO {}", offscale.join(", ")),
            10.0,
            Anchor::End,
            MUTED,
        );
    }
}

/// The knee: a dotted vertical line and a ring on its p95 E2E point.
fn knee_marker(svg: &mut Svg, plot: &Plot, levels: &[LevelReport], k: &Knee) {
    if let Some(l) = levels.get(k.level_index)
        && let Some(y) = l.metrics.e2e_ms.p95.filter(|v| v.is_finite())
        && l.output_tokens_per_s.is_finite()
    {
        let (x, y) = (plot.sx(l.output_tokens_per_s), plot.sy(y));
        svg.line((x, plot.top), (x, plot.bottom), TEXT, 1.0, Dash::Dotted);
        let _ = write!(
            svg.out,
            r#"<circle cx="{}" cy="{}" r="8" fill="none" stroke="{TEXT}" stroke-width="2"><title>{}</title></circle>"#,
            f(x),
            f(y),
            escape_html(&format!(
                "knee at {}: past it p95 E2E grows faster than throughput",
                l.label()
            ))
        );
        svg.text(
            x + 10.0,
            y + 14.0,
            &format!("knee ({})", l.label()),
            11.0,
            Anchor::Start,
            TEXT,
        );
    }
}

/// The TTFT stage breakdown per level (medians): a new connection's setup (over
/// the requests that opened one), time to headers, to the first body byte, to the
/// first token parsed and to the first token painted (browser).
pub fn ttft_stages(levels: &[LevelReport]) -> String {
    let title = "Where the time to first token goes (medians)";
    type Getter = fn(&LevelReport) -> Option<f64>;
    let stages: [(&str, &str, Getter); 5] = [
        ("new connection set up", SKY, |l| {
            l.metrics.connection_setup_ms.and_then(|s| s.p50)
        }),
        ("headers", PURPLE, |l| l.metrics.time_to_headers_ms.p50),
        ("first byte", ORANGE, |l| {
            l.metrics.time_to_first_byte_ms.p50
        }),
        ("first token parsed", VERMILLION, |l| l.metrics.ttft_ms.p50),
        ("first token painted", GREEN, |l| {
            l.metrics.rendered_ttft_ms.and_then(|s| s.p50)
        }),
    ];
    let rows: Vec<&LevelReport> = levels.iter().filter(|l| l.ok > 0).collect();
    let max = rows
        .iter()
        .flat_map(|l| stages.iter().filter_map(|s| (s.2)(l)))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    if rows.is_empty() || max <= 0.0 {
        return empty_chart(title, "No level completed a request: nothing to plot.");
    }
    let row_h = 28.0;
    let height = MARGIN_TOP + row_h * rows.len() as f64 + MARGIN_BOTTOM;
    let desc = format!(
        "For each of {} load levels, the median time from the send to a new connection's setup (requests that opened one), the response headers, the first body byte, the first token parsed and (in the browser) the first token painted, in milliseconds.",
        rows.len()
    );
    let mut svg = Svg::new(WIDTH, height, title, &desc);
    let x_axis = Axis::new(0.0, max, "ms since the request was sent (median)");
    let plot = Plot::new_rows(&mut svg, WIDTH, height, x_axis);
    svg.title_text(title);
    for (r, l) in rows.iter().enumerate() {
        let y = plot.top + row_h * (r as f64 + 0.5);
        svg.text(
            plot.left - 8.0,
            y + 4.0,
            &l.label(),
            11.0,
            Anchor::End,
            TEXT,
        );
        let values: Vec<(&str, &str, f64)> = stages
            .iter()
            .filter_map(|s| (s.2)(l).filter(|v| v.is_finite()).map(|v| (s.0, s.1, v)))
            .collect();
        let end = values.iter().map(|v| v.2).fold(0.0, f64::max);
        svg.line(
            (plot.left, y),
            (plot.sx(end), y),
            "#bbbbbb",
            3.0,
            Dash::Solid,
        );
        for (name, color, v) in &values {
            svg.circle_titled(
                plot.sx(*v),
                y,
                5.0,
                color,
                &format!("{}: {name} p50 {} ms", l.label(), fmt_num(*v)),
            );
        }
    }
    legend(
        &mut svg,
        MARGIN_LEFT,
        40.0,
        &stages
            .iter()
            .map(|s| (s.0.to_owned(), s.1, Dash::Dot))
            .collect::<Vec<_>>(),
    );
    svg.finish()
}

/// TPOT per load level against the GPU's bandwidth floor: a bar for the p50, a dot
/// for the p95, and the floor as a dashed line. Bars far to the right of the line
/// are time the server spends above what the GPU's memory bus needs.
pub fn tpot_vs_floor(levels: &[LevelReport], floor_ms: f64, gpu: &str) -> String {
    let title = format!("TPOT against the bandwidth floor of {gpu}");
    let rows: Vec<(String, f64, Option<f64>)> = levels
        .iter()
        .filter_map(|l| Some((l.label(), l.metrics.tpot_ms.p50?, l.metrics.tpot_ms.p95)))
        .filter(|r| r.1.is_finite())
        .collect();
    if rows.is_empty() || !floor_ms.is_finite() || floor_ms <= 0.0 {
        return empty_chart(&title, "No TPOT or no floor: nothing to compare.");
    }
    let hi = rows
        .iter()
        .map(|r| r.2.unwrap_or(r.1).max(r.1))
        .fold(floor_ms, f64::max);
    let height = MARGIN_TOP + MARGIN_BOTTOM + 26.0 * rows.len() as f64 + 10.0;
    let desc = format!(
        "TPOT p50 (bars) and p95 (dots) per load level, and the floor of {} ms per token (dashed line) from the GPU's measured bandwidth.",
        fmt_num(floor_ms)
    );
    let mut svg = Svg::new(WIDTH, height, &title, &desc);
    svg.title_text(&title);
    let plot = Plot::new_rows_at(
        &mut svg,
        WIDTH,
        height,
        90.0,
        Axis::new(0.0, hi * 1.08, "time per output token (ms)"),
    );
    legend(
        &mut svg,
        plot.left,
        44.0,
        &[
            ("TPOT p50".into(), BLUE, Dash::Block),
            ("TPOT p95".into(), VERMILLION, Dash::Dot),
            (
                format!("floor {} ms", fmt_num(floor_ms)),
                GREEN,
                Dash::Dashed,
            ),
        ],
    );
    for (i, (label, p50, p95)) in rows.iter().enumerate() {
        let y = plot.top + 8.0 + 26.0 * i as f64;
        svg.text(plot.left - 8.0, y + 13.0, label, 11.0, Anchor::End, TEXT);
        svg.rect_titled(
            plot.sx(0.0),
            y + 3.0,
            plot.sx(*p50) - plot.sx(0.0),
            16.0,
            BLUE,
            &format!(
                "{label}: TPOT p50 {} ms, {:.1}x the floor",
                fmt_num(*p50),
                p50 / floor_ms
            ),
        );
        if let Some(p95) = p95.filter(|v| v.is_finite()) {
            svg.circle_titled(
                plot.sx(p95),
                y + 11.0,
                4.5,
                VERMILLION,
                &format!("{label}: TPOT p95 {} ms", fmt_num(p95)),
            );
        }
    }
    let fx = plot.sx(floor_ms);
    svg.line((fx, plot.top), (fx, plot.bottom), GREEN, 2.0, Dash::Dashed);
    svg.finish()
}
