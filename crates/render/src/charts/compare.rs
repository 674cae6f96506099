//! Runs overlaid: the throughput-latency curves of every run of a comparison, one
//! colour a run, each with its knee.

use std::fmt::Write as _;

use super::svg::*;
use crate::fmt::escape_html;
use tokenscope_core::report::{Knee, LevelReport};

/// One run's curve: its name, its levels, its knee.
pub type RunCurve<'a> = (&'a str, &'a [LevelReport], Option<&'a Knee>);

/// The throughput-latency curves of several runs: output tokens/s on x, E2E p50
/// (solid) and p95 (dashed) in ms on y, one colour a run (the first is the base),
/// each run's knee ringed.
pub fn throughput_latency_runs(runs: &[RunCurve<'_>]) -> String {
    let title = "Throughput vs latency, runs overlaid";
    type Getter = fn(&LevelReport) -> Option<f64>;
    let series: [(&str, Dash, Getter); 2] = [
        ("E2E p50", Dash::Solid, |l| l.metrics.e2e_ms.p50),
        ("E2E p95", Dash::Dashed, |l| l.metrics.e2e_ms.p95),
    ];
    let usable = |l: &LevelReport| l.ok > 0 && l.output_tokens_per_s.is_finite();
    let points: Vec<(f64, f64)> = runs
        .iter()
        .flat_map(|(_, levels, _)| levels.iter().filter(|l| usable(l)))
        .flat_map(|l| {
            series
                .iter()
                .filter_map(move |s| (s.2)(l).map(|y| (l.output_tokens_per_s, y)))
        })
        .filter(|p| p.1.is_finite())
        .collect();
    if points.is_empty() {
        return empty_chart(title, "No run completed a request: nothing to plot.");
    }
    let (_, x_hi) = min_max(&points.iter().map(|p| p.0).collect::<Vec<_>>());
    let (_, y_hi) = min_max(&points.iter().map(|p| p.1).collect::<Vec<_>>());
    let desc = format!(
        "Output tokens per second (x) against E2E latency in milliseconds (y), p50 solid and p95 dashed, for {}; each run's knee ringed.",
        runs.iter().map(|r| r.0).collect::<Vec<_>>().join(", ")
    );
    let mut svg = Svg::new(WIDTH, HEIGHT, title, &desc);
    let plot = Plot::new(
        &mut svg,
        WIDTH,
        HEIGHT,
        Axis::new(0.0, x_hi, "output throughput (tokens/s)"),
        Axis::new(0.0, y_hi, "E2E latency (ms)"),
    );
    svg.title_text(title);
    let mut items = Vec::new();
    for (k, (name, levels, knee)) in runs.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        for (label, dash, get) in &series {
            let pts: Vec<(f64, f64, &LevelReport)> = levels
                .iter()
                .filter(|l| usable(l))
                .filter_map(|l| {
                    get(l)
                        .filter(|v| v.is_finite())
                        .map(|y| (l.output_tokens_per_s, y, l))
                })
                .collect();
            let px: Vec<(f64, f64)> = pts.iter().map(|p| (plot.sx(p.0), plot.sy(p.1))).collect();
            svg.polyline(&px, color, 1.8, *dash);
            for (p, (x, y)) in pts.iter().zip(&px) {
                let tip = format!(
                    "{name}, {}: {label} {} ms at {} tokens/s",
                    p.2.label(),
                    fmt_num(p.1),
                    fmt_num(p.0)
                );
                svg.circle_titled(*x, *y, 3.0, color, &tip);
            }
        }
        if let Some(l) = knee.and_then(|k| levels.get(k.level_index))
            && let Some(y) = l.metrics.e2e_ms.p95.filter(|v| v.is_finite())
            && usable(l)
        {
            let (x, y) = (plot.sx(l.output_tokens_per_s), plot.sy(y));
            let _ = write!(
                svg.out,
                r#"<circle cx="{}" cy="{}" r="8" fill="none" stroke="{color}" stroke-width="2"><title>{}</title></circle>"#,
                f(x),
                f(y),
                escape_html(&format!("{name}: knee at {}", l.label()))
            );
        }
        items.push(((*name).to_owned(), color, Dash::Solid));
    }
    legend(&mut svg, MARGIN_LEFT, 40.0, &items);
    svg.finish()
}
