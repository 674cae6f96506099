//! Charts as self-contained SVG strings, for the page and for `tokenscope report`'s
//! HTML: the throughput-latency curve of a sweep (knee and SLO bounds marked), CDFs
//! and histograms drawn from a level's quantile curves, the TTFT stage breakdown and a
//! per-request timeline.
//!
//! Pure functions: data in, a string out; no I/O, no clock (builds for wasm32). Every
//! chart is one `<svg>` element with a `viewBox` (it scales to its container), a
//! `<title>` and `<desc>` (its accessible name and description), presentation
//! attributes only (no `style` attribute, no CSS, no external font, no script: it
//! passes a strict Content-Security-Policy when inlined), and every text escaped.
//! Non-finite values are skipped, never written: the output never holds `NaN`.
//!
//! Distributions come as quantile curves (`LevelReport::quantiles`: 101 values, the
//! percentiles p0..p100). A CDF plots them directly; a histogram is derived from
//! them by linear interpolation between percentiles, so it is exact at percentile
//! resolution (1% of the samples) and says so in its description.

use std::fmt::Write as _;

use crate::export::escape_html;
use crate::report::{Knee, LevelReport};
use crate::slo::{Slo, SloMetric};
use crate::timeline::{Outcome, RequestRecord};

/// Okabe-Ito colours: distinguishable with the common colour-vision deficiencies.
const PALETTE: [&str; 7] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
];
const BLUE: &str = PALETTE[0];
const VERMILLION: &str = PALETTE[1];
const GREEN: &str = PALETTE[2];
const PURPLE: &str = PALETTE[3];
const ORANGE: &str = PALETTE[4];
const GRID: &str = "#e3e3e3";
const AXIS: &str = "#555555";
const TEXT: &str = "#222222";
const MUTED: &str = "#666666";

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 400.0;
const MARGIN_LEFT: f64 = 70.0;
const MARGIN_RIGHT: f64 = 24.0;
const MARGIN_TOP: f64 = 64.0;
const MARGIN_BOTTOM: f64 = 52.0;

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
        .filter(|s| {
            matches!(
                s.metric,
                SloMetric::TtftMs | SloMetric::E2eMs | SloMetric::RenderedTtftMs
            )
        })
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
    let desc = format!(
        "Output tokens per second (x) against latency percentiles in milliseconds (y) for {} load levels; E2E in blue, TTFT in vermillion; solid p50, dashed p95, dotted p99.{}",
        points.len(),
        match knee {
            Some(k) => format!(
                " The knee is at {}.",
                levels
                    .get(k.level_index)
                    .map_or_else(|| "?".into(), |l| l.load().label())
            ),
            None => " No knee was found.".into(),
        }
    );
    let mut svg = Svg::new(WIDTH, HEIGHT, title, &desc);
    let plot = Plot::new(&mut svg, WIDTH, HEIGHT, x_axis, y_axis);
    svg.title_text(title);
    // SLO bounds.
    let mut offscale = Vec::new();
    for s in &plotted_slos {
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
                    l.load().label(),
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
            &l.load().label(),
            10.0,
            Anchor::Middle,
            TEXT,
        );
    }
    if let Some(k) = knee
        && let Some(l) = levels.get(k.level_index)
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
                l.load().label()
            ))
        );
        svg.text(
            x + 10.0,
            y + 14.0,
            &format!("knee ({})", l.load().label()),
            11.0,
            Anchor::Start,
            TEXT,
        );
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

/// Cumulative distributions, one line per named quantile curve (101 values p0..p100,
/// as `LevelReport::quantiles` holds them); empty curves are left out.
pub fn cdf(series: &[(&str, &[f64])], x_label: &str) -> String {
    let title = format!("CDF of {x_label}");
    let curves: Vec<(&str, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(name, q)| (*name, quantile_points(q)))
        .filter(|(_, pts)| !pts.is_empty())
        .collect();
    if curves.is_empty() {
        return empty_chart(&title, "No samples: nothing to plot.");
    }
    let xs: Vec<f64> = curves
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.0))
        .collect();
    let (lo, hi) = min_max(&xs);
    let x_axis = Axis::new(lo, hi, x_label);
    let y_axis = Axis::percent("requests at or below (%)");
    let desc = format!(
        "Cumulative distribution of {x_label}: the share of samples at or below each value, for {}.",
        curves.iter().map(|c| c.0).collect::<Vec<_>>().join(", ")
    );
    let mut svg = Svg::new(WIDTH, HEIGHT, &title, &desc);
    let plot = Plot::new(&mut svg, WIDTH, HEIGHT, x_axis, y_axis);
    svg.title_text(&title);
    // Guides at the median and p95.
    for (p, label) in [(50.0, "p50"), (95.0, "p95")] {
        let y = plot.sy(p);
        svg.line((plot.left, y), (plot.right, y), MUTED, 0.8, Dash::Guide);
        svg.text(plot.left + 4.0, y - 3.0, label, 10.0, Anchor::Start, MUTED);
    }
    let mut items = Vec::new();
    for (k, (name, pts)) in curves.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let px: Vec<(f64, f64)> = pts.iter().map(|&(x, y)| (plot.sx(x), plot.sy(y))).collect();
        svg.polyline(&px, color, 2.0, Dash::Solid);
        // Tooltips at the standard percentiles.
        for pct in [50usize, 90, 95, 99] {
            if let Some(&(x, y)) = pts.get(pct) {
                svg.circle_titled(
                    plot.sx(x),
                    plot.sy(y),
                    2.5,
                    color,
                    &format!("{name}: p{pct} = {}", fmt_num(x)),
                );
            }
        }
        items.push(((*name).to_owned(), color, Dash::Solid));
    }
    legend(&mut svg, MARGIN_LEFT, 40.0, &items);
    svg.finish()
}

/// A histogram of `bins` equal-width bins between p0 and p100, derived from a
/// quantile curve (101 values p0..p100): each bin's share of the samples by linear
/// interpolation between the percentiles.
pub fn histogram_from_quantiles(quantiles: &[f64], bins: usize, x_label: &str) -> String {
    let title = format!("Histogram of {x_label}");
    let Some(bars) = histogram_bins(quantiles, bins) else {
        return empty_chart(&title, "No samples: nothing to plot.");
    };
    let lo = bars.first().map_or(0.0, |b| b.0);
    let hi = bars.last().map_or(1.0, |b| b.1);
    let top = bars.iter().map(|b| b.2).fold(0.0, f64::max);
    let x_axis = Axis::new(lo, hi, x_label);
    let y_axis = Axis::new(0.0, top.max(1.0), "share of samples (%)");
    let desc = format!(
        "Histogram of {x_label} in {} bins from {} to {}, derived from the percentile curve (resolution: 1% of the samples).",
        bars.len(),
        fmt_num(lo),
        fmt_num(hi)
    );
    let mut svg = Svg::new(WIDTH, HEIGHT, &title, &desc);
    let plot = Plot::new(&mut svg, WIDTH, HEIGHT, x_axis, y_axis);
    svg.title_text(&title);
    for (a, b, pct) in &bars {
        let x0 = plot.sx(*a);
        let x1 = plot.sx(*b).max(x0 + 1.0);
        let y = plot.sy(*pct);
        svg.rect_titled(
            x0 + 0.5,
            y,
            (x1 - x0 - 1.0).max(1.0),
            plot.bottom - y,
            BLUE,
            &format!("{} to {}: {:.1}%", fmt_num(*a), fmt_num(*b), pct),
        );
    }
    svg.finish()
}

/// The TTFT stage breakdown per level (medians): time to headers, to the first
/// body byte, to the first token parsed and to the first token painted (browser).
pub fn ttft_stages(levels: &[LevelReport]) -> String {
    let title = "Where the time to first token goes (medians)";
    type Getter = fn(&LevelReport) -> Option<f64>;
    let stages: [(&str, &str, Getter); 4] = [
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
        "For each of {} load levels, the median time from the send to the response headers, the first body byte, the first token parsed and (in the browser) the first token painted, in milliseconds.",
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
            &l.load().label(),
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
                &format!("{}: {name} p50 {} ms", l.load().label(), fmt_num(*v)),
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

/// A per-request timeline: one row per request (the first `max_requests` by send
/// time), from its send to its end, with the response headers, every token event,
/// the first token and (browser) its paint marked; rows coloured by outcome.
pub fn request_timeline(records: &[RequestRecord], max_requests: usize) -> String {
    let title = "Request timeline";
    let mut sorted: Vec<&RequestRecord> =
        records.iter().filter(|r| r.t_send_ms.is_finite()).collect();
    sorted.sort_by(|a, b| a.t_reference_ms().total_cmp(&b.t_reference_ms()));
    let shown: Vec<&RequestRecord> = sorted.iter().take(max_requests).copied().collect();
    if shown.is_empty() {
        return empty_chart(title, "No requests: nothing to plot.");
    }
    let t0 = shown
        .iter()
        .map(|r| r.t_reference_ms())
        .fold(f64::INFINITY, f64::min);
    let end_of = |r: &RequestRecord| {
        [
            r.t_done_ms,
            r.t_first_paint_ms,
            r.t_last_token_ms(),
            r.t_headers_ms,
            Some(r.t_send_ms),
        ]
        .into_iter()
        .flatten()
        .filter(|v| v.is_finite())
        .fold(f64::NEG_INFINITY, f64::max)
    };
    let t1 = shown.iter().map(|r| end_of(r)).fold(t0, f64::max);
    let row_h = 14.0;
    let height = MARGIN_TOP + row_h * shown.len() as f64 + MARGIN_BOTTOM;
    let heading = if sorted.len() > shown.len() {
        format!(
            "{title} (first {} of {} requests)",
            shown.len(),
            sorted.len()
        )
    } else {
        format!("{title} ({} requests)", shown.len())
    };
    let desc = format!(
        "{heading}: one row per request from its send to its end, in milliseconds since the first send. Grey bar: waiting for headers; coloured bar: the response (blue ok, vermillion error, orange timeout); ticks: token events; circle: first token; diamond: first token painted."
    );
    let mut svg = Svg::new(WIDTH, height, &heading, &desc);
    let plot = Plot::new_rows(
        &mut svg,
        WIDTH,
        height,
        Axis::new(0.0, t1 - t0, "ms since the first send"),
    );
    svg.title_text(&heading);
    for (i, r) in shown.iter().enumerate() {
        let y = plot.top + row_h * i as f64;
        let mid = y + row_h / 2.0;
        let x = |t: f64| plot.sx(t - t0);
        let color = match r.outcome {
            Outcome::Ok => BLUE,
            Outcome::Error { .. } => VERMILLION,
            Outcome::Timeout { .. } => ORANGE,
        };
        let send = r.t_send_ms;
        let done = end_of(r);
        let headers = r.t_headers_ms.filter(|v| v.is_finite()).unwrap_or(done);
        let _ = write!(
            svg.out,
            "<g><title>{}</title>",
            escape_html(&row_summary(i, r))
        );
        if let Some(s) = r.t_scheduled_ms.filter(|s| s.is_finite() && *s < send) {
            svg.line((x(s), mid), (x(send), mid), MUTED, 1.0, Dash::Dotted);
        }
        svg.rect(
            x(send),
            y + 4.0,
            (x(headers) - x(send)).max(0.5),
            row_h - 8.0,
            "#b0b0b0",
        );
        svg.rect(
            x(headers),
            y + 3.0,
            (x(done) - x(headers)).max(0.5),
            row_h - 6.0,
            color,
        );
        // Token events as one path of short ticks.
        let events: Vec<f64> = r
            .token_events_ms
            .iter()
            .copied()
            .filter(|t| t.is_finite())
            .collect();
        if !events.is_empty() {
            let mut d = String::new();
            for t in &events {
                let _ = write!(d, "M{} {}v{}", f(x(*t)), f(y + 1.0), f(row_h - 2.0));
            }
            let _ = write!(
                svg.out,
                r##"<path d="{d}" stroke="#ffffff" stroke-width="0.8" stroke-opacity="0.8"/>"##
            );
        }
        if let Some(t) = r.t_first_token_ms().filter(|t| t.is_finite()) {
            svg.circle(x(t), mid, 3.2, TEXT);
        }
        if let Some(t) = r.t_first_paint_ms.filter(|t| t.is_finite()) {
            let (cx, s) = (x(t), 4.0);
            let _ = write!(
                svg.out,
                r##"<path d="M{} {}l{s} {s}l-{s} {s}l-{s} -{s}z" fill="{GREEN}" stroke="#ffffff" stroke-width="0.8"/>"##,
                f(cx),
                f(mid - s)
            );
        }
        svg.out.push_str("</g>");
        if shown.len() <= 40 || i.is_multiple_of(5) {
            svg.text(
                plot.left - 6.0,
                mid + 3.5,
                &format!("#{}", i + 1),
                9.0,
                Anchor::End,
                MUTED,
            );
        }
    }
    legend(
        &mut svg,
        MARGIN_LEFT,
        40.0,
        &[
            ("awaiting headers".into(), "#b0b0b0", Dash::Block),
            ("ok".into(), BLUE, Dash::Block),
            ("error".into(), VERMILLION, Dash::Block),
            ("timeout".into(), ORANGE, Dash::Block),
            ("first token".into(), TEXT, Dash::Dot),
            ("painted".into(), GREEN, Dash::Dot),
        ],
    );
    svg.finish()
}

fn row_summary(i: usize, r: &RequestRecord) -> String {
    let t0 = r.t_reference_ms();
    let rel = |t: Option<f64>| t.filter(|v| v.is_finite()).map(|t| t - t0);
    let outcome = match &r.outcome {
        Outcome::Ok => "ok".to_owned(),
        Outcome::Error { kind, .. } => format!("error {kind}"),
        Outcome::Timeout { phase } => format!("timeout ({phase:?})").to_lowercase(),
    };
    let mut s = format!("#{}: {outcome}", i + 1);
    for (name, v) in [
        ("headers", rel(r.t_headers_ms)),
        ("TTFT", rel(r.t_first_token_ms())),
        ("painted", rel(r.t_first_paint_ms)),
        ("E2E", rel(r.t_done_ms)),
    ] {
        if let Some(v) = v {
            let _ = write!(s, ", {name} {} ms", fmt_num(v));
        }
    }
    let _ = write!(s, ", {} token events", r.token_events_ms.len());
    s
}

/// Histogram bars `(from, to, percent)` derived from a quantile curve; `None`
/// when the curve is empty or holds no finite value.
pub fn histogram_bins(quantiles: &[f64], bins: usize) -> Option<Vec<(f64, f64, f64)>> {
    let q: Vec<f64> = quantiles
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let (&lo, &hi) = (q.first()?, q.last()?);
    if q.len() < 2 || hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        // All samples equal: one bar holding all of them.
        let half = (lo.abs() * 0.05).max(0.5);
        return Some(vec![(lo - half, lo + half, 100.0)]);
    }
    let bins = bins.max(1);
    let width = (hi - lo) / bins as f64;
    let mut out = Vec::with_capacity(bins);
    let mut prev = 0.0;
    for b in 0..bins {
        let a = lo + width * b as f64;
        let end = if b + 1 == bins { hi } else { a + width };
        let c = cdf_at(&q, end);
        out.push((a, end, ((c - prev) * 100.0).max(0.0)));
        prev = c;
    }
    Some(out)
}

/// TPOT per load level against the GPU's bandwidth floor: a bar for the p50, a dot
/// for the p95, and the floor as a dashed line. Bars far to the right of the line
/// are time the server spends above what the GPU's memory bus needs.
pub fn tpot_vs_floor(levels: &[LevelReport], floor_ms: f64, gpu: &str) -> String {
    let title = format!("TPOT against the bandwidth floor of {gpu}");
    let rows: Vec<(String, f64, Option<f64>)> = levels
        .iter()
        .filter_map(|l| {
            Some((
                l.load().label(),
                l.metrics.tpot_ms.p50?,
                l.metrics.tpot_ms.p95,
            ))
        })
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

/// Achieved bandwidth of every kernel against the measured read bandwidth (the
/// ceiling): how close each kernel gets to the memory bus. Cache-resident results
/// (above the ceiling) are drawn hatched-grey and labelled, never as bandwidth.
pub fn kernel_roofline(report: &crate::kernels::KernelReport) -> String {
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

/// The cumulative share (0..=1) at `x` of a quantile curve sampled at equal
/// probability steps, by linear interpolation (right-continuous at ties).
fn cdf_at(q: &[f64], x: f64) -> f64 {
    let n = q.len();
    if n == 0 || x < q[0] {
        return 0.0;
    }
    if x >= q[n - 1] {
        return 1.0;
    }
    // Last index with q[i] <= x (q is non-decreasing).
    let i = q.partition_point(|v| *v <= x).saturating_sub(1);
    let step = 1.0 / (n - 1) as f64;
    let (a, b) = (q[i], q[i + 1]);
    let frac = if b > a { (x - a) / (b - a) } else { 0.0 };
    (i as f64 + frac) * step
}

/// `(value, percent)` points of a quantile curve, skipping non-finite values.
fn quantile_points(q: &[f64]) -> Vec<(f64, f64)> {
    if q.len() < 2 {
        return Vec::new();
    }
    let step = 100.0 / (q.len() - 1) as f64;
    q.iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite())
        .map(|(i, v)| (*v, i as f64 * step))
        .collect()
}

fn min_max(v: &[f64]) -> (f64, f64) {
    let lo = v
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(f64::INFINITY, f64::min);
    let hi = v
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(f64::NEG_INFINITY, f64::max);
    if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

/// A chart that says why it is empty (still a valid, titled SVG).
fn empty_chart(title: &str, message: &str) -> String {
    let h = 120.0;
    let mut svg = Svg::new(WIDTH, h, title, message);
    svg.title_text(title);
    svg.text(WIDTH / 2.0, 80.0, message, 13.0, Anchor::Middle, MUTED);
    svg.finish()
}

/// Line styles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dash {
    Solid,
    Dashed,
    Dotted,
    Guide,
    /// Legend only: a dot marker.
    Dot,
    /// Legend only: a filled block.
    Block,
}

impl Dash {
    fn attr(self) -> &'static str {
        match self {
            Dash::Solid | Dash::Dot | Dash::Block => "",
            Dash::Dashed => r#" stroke-dasharray="7 4""#,
            Dash::Dotted => r#" stroke-dasharray="2 3""#,
            Dash::Guide => r#" stroke-dasharray="10 5""#,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn as_str(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// One axis: a data range widened to round ticks, and a label with its unit.
#[derive(Debug, Clone)]
struct Axis {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
    step: f64,
    label: String,
    percent: bool,
}

impl Axis {
    fn new(lo: f64, hi: f64, label: &str) -> Self {
        let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
            (lo.min(hi), lo.max(hi))
        } else {
            (0.0, 1.0)
        };
        if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
            let pad = (hi.abs() * 0.1).max(1.0);
            lo = (lo - pad).max(if lo >= 0.0 { 0.0 } else { f64::MIN });
            hi += pad;
        }
        let step = nice_step((hi - lo) / 5.0);
        let lo = (lo / step).floor() * step;
        let hi = (hi / step).ceil() * step;
        let n = ((hi - lo) / step).round() as usize;
        let ticks = (0..=n).map(|k| lo + step * k as f64).collect();
        Self {
            lo,
            hi,
            ticks,
            step,
            label: label.to_owned(),
            percent: false,
        }
    }

    fn percent(label: &str) -> Self {
        Self {
            lo: 0.0,
            hi: 100.0,
            ticks: vec![0.0, 25.0, 50.0, 75.0, 100.0],
            step: 25.0,
            label: label.to_owned(),
            percent: true,
        }
    }

    fn tick_label(&self, v: f64) -> String {
        let s = fmt_tick(v, self.step);
        if self.percent { format!("{s}%") } else { s }
    }
}

/// 1, 2, 2.5 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 2.5 {
        2.5
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// A tick label with as many decimals as the step needs (`12`, `0.25`, `15k`).
fn fmt_tick(v: f64, step: f64) -> String {
    let v = if v.abs() < step * 1e-9 { 0.0 } else { v };
    if step >= 1000.0 && v.abs() >= 10_000.0 && (v / 1000.0).fract().abs() < 1e-9 {
        return format!("{}k", (v / 1000.0).round());
    }
    // As many decimals as the step has (0.25 -> 2, 0.5 -> 1, 20 -> 0).
    let decimals = (0..=6)
        .find(|&d| {
            let scaled = step * 10f64.powi(d);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
        })
        .unwrap_or(6) as usize;
    format!("{v:.decimals$}")
}

/// A number for people: `0.42`, `12.3`, `420`.
fn fmt_num(v: f64) -> String {
    crate::export::fmt_ms(v.is_finite().then_some(v))
}

/// A coordinate: one decimal, never `NaN`.
fn f(v: f64) -> String {
    if v.is_finite() {
        let r = (v * 10.0).round() / 10.0;
        if r == r.trunc() {
            format!("{}", r as i64)
        } else {
            format!("{r:.1}")
        }
    } else {
        "0".into()
    }
}

/// The SVG being written.
struct Svg {
    out: String,
}

impl Svg {
    fn new(width: f64, height: f64, title: &str, desc: &str) -> Self {
        let mut out = String::with_capacity(8192);
        let _ = write!(
            out,
            r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif" font-size="12"><title>{}</title><desc>{}</desc><rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>"##,
            escape_html(title),
            escape_html(desc),
            w = f(width),
            h = f(height),
        );
        Self { out }
    }

    fn title_text(&mut self, title: &str) {
        self.text_weight(MARGIN_LEFT, 22.0, title, 15.0, Anchor::Start, TEXT, true);
    }

    fn line(
        &mut self,
        (x1, y1): (f64, f64),
        (x2, y2): (f64, f64),
        color: &str,
        width: f64,
        dash: Dash,
    ) {
        let _ = write!(
            self.out,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{color}" stroke-width="{}"{}/>"#,
            f(x1),
            f(y1),
            f(x2),
            f(y2),
            f(width),
            dash.attr()
        );
    }

    fn polyline(&mut self, pts: &[(f64, f64)], color: &str, width: f64, dash: Dash) {
        if pts.len() < 2 {
            return;
        }
        let mut d = String::new();
        for (i, (x, y)) in pts.iter().enumerate() {
            if i > 0 {
                d.push(' ');
            }
            let _ = write!(d, "{},{}", f(*x), f(*y));
        }
        let _ = write!(
            self.out,
            r#"<polyline points="{d}" fill="none" stroke="{color}" stroke-width="{}" stroke-linejoin="round"{}/>"#,
            f(width),
            dash.attr()
        );
    }

    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str) {
        let _ = write!(
            self.out,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{fill}"/>"#,
            f(x),
            f(y),
            f(w.max(0.0)),
            f(h.max(0.0))
        );
    }

    fn rect_titled(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, title: &str) {
        let _ = write!(
            self.out,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{fill}"><title>{}</title></rect>"#,
            f(x),
            f(y),
            f(w.max(0.0)),
            f(h.max(0.0)),
            escape_html(title)
        );
    }

    fn circle(&mut self, x: f64, y: f64, r: f64, fill: &str) {
        let _ = write!(
            self.out,
            r#"<circle cx="{}" cy="{}" r="{}" fill="{fill}"/>"#,
            f(x),
            f(y),
            f(r)
        );
    }

    fn circle_titled(&mut self, x: f64, y: f64, r: f64, fill: &str, title: &str) {
        let _ = write!(
            self.out,
            r#"<circle cx="{}" cy="{}" r="{}" fill="{fill}"><title>{}</title></circle>"#,
            f(x),
            f(y),
            f(r),
            escape_html(title)
        );
    }

    fn text(&mut self, x: f64, y: f64, s: &str, size: f64, anchor: Anchor, fill: &str) {
        self.text_weight(x, y, s, size, anchor, fill, false);
    }

    #[allow(clippy::too_many_arguments)]
    fn text_weight(
        &mut self,
        x: f64,
        y: f64,
        s: &str,
        size: f64,
        anchor: Anchor,
        fill: &str,
        bold: bool,
    ) {
        let _ = write!(
            self.out,
            r#"<text x="{}" y="{}" font-size="{}" text-anchor="{}" fill="{fill}"{}>{}</text>"#,
            f(x),
            f(y),
            f(size),
            anchor.as_str(),
            if bold { r#" font-weight="600""# } else { "" },
            escape_html(s)
        );
    }

    fn finish(mut self) -> String {
        self.out.push_str("</svg>");
        self.out
    }
}

/// The plotting area and its scales.
struct Plot {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    x: Axis,
    y: Option<Axis>,
}

impl Plot {
    /// Draw a grid, axes, ticks and labels for an x-y chart.
    fn new(svg: &mut Svg, width: f64, height: f64, x: Axis, y: Axis) -> Self {
        let p = Plot {
            left: MARGIN_LEFT,
            right: width - MARGIN_RIGHT,
            top: MARGIN_TOP,
            bottom: height - MARGIN_BOTTOM,
            x,
            y: Some(y),
        };
        p.draw_x(svg);
        if let Some(y) = &p.y {
            for t in &y.ticks {
                let py = p.sy(*t);
                svg.line((p.left, py), (p.right, py), GRID, 1.0, Dash::Solid);
                svg.text(
                    p.left - 6.0,
                    py + 4.0,
                    &y.tick_label(*t),
                    11.0,
                    Anchor::End,
                    AXIS,
                );
            }
            let cy = (p.top + p.bottom) / 2.0;
            let _ = write!(
                svg.out,
                r#"<text x="16" y="{}" font-size="12" text-anchor="middle" fill="{TEXT}" transform="rotate(-90 16 {})">{}</text>"#,
                f(cy),
                f(cy),
                escape_html(&y.label)
            );
        }
        svg.line(
            (p.left, p.bottom),
            (p.right, p.bottom),
            AXIS,
            1.0,
            Dash::Solid,
        );
        svg.line((p.left, p.top), (p.left, p.bottom), AXIS, 1.0, Dash::Solid);
        p
    }

    /// Rows (one per item) against an x axis: vertical grid lines only.
    fn new_rows(svg: &mut Svg, width: f64, height: f64, x: Axis) -> Self {
        Self::new_rows_at(svg, width, height, MARGIN_LEFT, x)
    }

    /// Rows with a left gutter of `left` px for the labels.
    fn new_rows_at(svg: &mut Svg, width: f64, height: f64, left: f64, x: Axis) -> Self {
        let p = Plot {
            left,
            right: width - MARGIN_RIGHT,
            top: MARGIN_TOP,
            bottom: height - MARGIN_BOTTOM,
            x,
            y: None,
        };
        p.draw_x(svg);
        svg.line(
            (p.left, p.bottom),
            (p.right, p.bottom),
            AXIS,
            1.0,
            Dash::Solid,
        );
        p
    }

    fn draw_x(&self, svg: &mut Svg) {
        for t in &self.x.ticks {
            let px = self.sx(*t);
            svg.line((px, self.top), (px, self.bottom), GRID, 1.0, Dash::Solid);
            svg.text(
                px,
                self.bottom + 16.0,
                &self.x.tick_label(*t),
                11.0,
                Anchor::Middle,
                AXIS,
            );
        }
        svg.text(
            (self.left + self.right) / 2.0,
            self.bottom + 38.0,
            &self.x.label,
            12.0,
            Anchor::Middle,
            TEXT,
        );
    }

    fn sx(&self, v: f64) -> f64 {
        let span = (self.x.hi - self.x.lo).max(f64::MIN_POSITIVE);
        self.left + (v - self.x.lo) / span * (self.right - self.left)
    }

    fn sy(&self, v: f64) -> f64 {
        match &self.y {
            Some(y) => {
                let span = (y.hi - y.lo).max(f64::MIN_POSITIVE);
                self.bottom - (v - y.lo) / span * (self.bottom - self.top)
            }
            None => self.top,
        }
    }
}

/// A one-row legend.
fn legend(svg: &mut Svg, x0: f64, y: f64, items: &[(String, &str, Dash)]) {
    let mut x = x0;
    for (name, color, dash) in items {
        match dash {
            Dash::Dot => svg.circle(x + 8.0, y - 4.0, 4.5, color),
            Dash::Block => svg.rect(x, y - 9.0, 16.0, 10.0, color),
            d => svg.line((x, y - 4.0), (x + 18.0, y - 4.0), color, 2.0, *d),
        }
        svg.text(x + 22.0, y, name, 11.0, Anchor::Start, TEXT);
        // About 6 px per character at 11 px.
        x += 34.0 + 6.2 * name.chars().count() as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{LevelAccumulator, LevelOptions, analyze_sweep};
    use crate::openai::Usage;
    use crate::report::Load;
    use crate::timeline::{ErrorKind, PaintMethod, TimeoutPhase};

    /// A minimal XML check: every tag closes in order, attributes are quoted, no
    /// stray `<` or `&` in text.
    fn assert_well_formed(svg: &str) {
        assert!(
            svg.starts_with("<svg "),
            "starts with <svg: {}",
            &svg[..40.min(svg.len())]
        );
        assert!(svg.ends_with("</svg>"));
        for bad in ["NaN", "inf", "undefined", "style="] {
            assert!(!svg.contains(bad), "contains {bad:?}");
        }
        let mut stack: Vec<String> = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let text = &rest[..start];
            assert!(!text.contains('>'), "stray > in text {text:?}");
            check_entities(text);
            let end = rest[start..].find('>').expect("tag closes") + start;
            let tag = &rest[start + 1..end];
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack
                    .pop()
                    .unwrap_or_else(|| panic!("closing {name} with nothing open"));
                assert_eq!(open, name, "tags nest");
            } else {
                let self_closing = tag.ends_with('/');
                let body = tag.trim_end_matches('/');
                let name: String = body.chars().take_while(|c| !c.is_whitespace()).collect();
                assert!(!name.is_empty(), "empty tag name");
                check_attributes(&body[name.len()..]);
                if !self_closing {
                    stack.push(name);
                }
            }
            rest = &rest[end + 1..];
        }
        assert!(stack.is_empty(), "unclosed {stack:?}");
    }

    fn check_entities(text: &str) {
        for (i, _) in text.match_indices('&') {
            let tail = &text[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"]
                    .iter()
                    .any(|e| tail.starts_with(e)),
                "bare & in {text:?}"
            );
        }
    }

    fn check_attributes(mut attrs: &str) {
        loop {
            attrs = attrs.trim_start();
            if attrs.is_empty() {
                return;
            }
            let eq = attrs.find('=').expect("attribute has a value");
            let name = &attrs[..eq];
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':'),
                "attribute name {name:?}"
            );
            let after = &attrs[eq + 1..];
            assert!(after.starts_with('"'), "attribute {name} is quoted");
            let close = after[1..].find('"').expect("quote closes") + 1;
            let value = &after[1..close];
            assert!(!value.contains('<'), "< in attribute {name}");
            check_entities(value);
            attrs = &after[close + 1..];
        }
    }

    fn record(t0: f64, ttft: f64, itl: f64, tokens: u64, paint: Option<f64>) -> RequestRecord {
        let events: Vec<f64> = (0..tokens).map(|i| t0 + ttft + i as f64 * itl).collect();
        RequestRecord {
            t_scheduled_ms: None,
            t_send_ms: t0,
            t_headers_ms: Some(t0 + 2.0),
            status: Some(200),
            t_first_byte_ms: Some(t0 + 3.0),
            t_done_ms: Some(events.last().copied().unwrap_or(t0 + ttft) + 1.0),
            t_first_paint_ms: paint.map(|p| t0 + ttft + p),
            paint_method: paint.map(|_| PaintMethod::ElementTiming),
            token_events_ms: events,
            shared_read_events: 0,
            usage: Some(Usage {
                prompt_tokens: Some(10),
                completion_tokens: Some(tokens),
            }),
            server_timings: None,
            output_chars: tokens * 4,
            body_bytes: 100,
            done_received: true,
            finish_reason: Some("length".into()),
            outcome: Outcome::Ok,
        }
    }

    /// A sweep whose latency explodes at c=16 (so it has a knee).
    fn sweep() -> Vec<LevelReport> {
        [(1u32, 50.0, 10.0), (4, 55.0, 11.0), (16, 300.0, 40.0)]
            .iter()
            .map(|&(c, ttft, itl)| {
                let mut acc = LevelAccumulator::new(Load::Concurrency(c), LevelOptions::default());
                for i in 0..20 {
                    let t0 = f64::from(i) * 1000.0 / f64::from(c);
                    acc.push(0, &record(t0, ttft + f64::from(i % 5), itl, 16, Some(8.0)));
                }
                acc.finish()
            })
            .collect()
    }

    #[test]
    fn throughput_latency_marks_knee_and_slos() {
        let levels = sweep();
        let slos = Slo::parse_list("ttft_ms:p95<=200,e2e_ms:p95<=100000,tpot_ms:p95<=50").unwrap();
        let sweep = analyze_sweep(&levels, &slos);
        let knee = sweep.knee.as_ref().expect("a knee");
        let svg = throughput_latency(&levels, Some(knee), &slos);
        assert_well_formed(&svg);
        assert!(svg.contains("<title>Throughput vs latency</title>"));
        assert!(svg.contains("knee (c=4)"), "knee label");
        assert!(
            svg.contains("SLO ttft_ms:p95&lt;=200"),
            "SLO line labelled, escaped"
        );
        assert!(svg.contains("above the chart: SLO e2e_ms:p95&lt;=100000"));
        assert!(
            !svg.contains("tpot_ms:p95"),
            "TPOT bounds are not latency lines"
        );
        assert!(svg.contains("output throughput (tokens/s)"));
        assert!(svg.contains("latency (ms)"));
        for label in [">c=1<", ">c=4<", ">c=16<", "E2E p95", "TTFT p99"] {
            assert!(svg.contains(label), "{label}");
        }
    }

    #[test]
    fn empty_inputs_give_valid_charts() {
        for svg in [
            throughput_latency(&[], None, &[]),
            cdf(&[], "TTFT (ms)"),
            cdf(&[("none", &[])], "TTFT (ms)"),
            histogram_from_quantiles(&[], 20, "ITL (ms)"),
            request_timeline(&[], 10),
            ttft_stages(&[]),
        ] {
            assert_well_formed(&svg);
            assert!(svg.contains("nothing to plot"), "{svg}");
        }
        // A level where every request failed has nothing to plot either.
        let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
        let mut r = record(0.0, 10.0, 1.0, 0, None);
        r.outcome = Outcome::Error {
            kind: ErrorKind::Http(503),
            message: "x".into(),
        };
        acc.push(0, &r);
        let l = acc.finish();
        assert_well_formed(&throughput_latency(std::slice::from_ref(&l), None, &[]));
    }

    #[test]
    fn cdf_and_histogram_from_quantile_curves() {
        let levels = sweep();
        let q = &levels[0].quantiles;
        let svg = cdf(
            &[
                ("network", q["ttft_ms"].as_slice()),
                ("painted", q["rendered_ttft_ms"].as_slice()),
            ],
            "TTFT (ms)",
        );
        assert_well_formed(&svg);
        assert!(svg.contains("network") && svg.contains("painted") && svg.contains("p95"));
        let svg = histogram_from_quantiles(&q["itl_ms"], 12, "ITL (ms)");
        assert_well_formed(&svg);
        assert!(svg.contains("percentile curve"));
    }

    #[test]
    fn histogram_bins_hold_all_samples() {
        // Uniform 0..100: equal bins hold equal shares.
        let q: Vec<f64> = (0..=100).map(f64::from).collect();
        let bins = histogram_bins(&q, 4).unwrap();
        assert_eq!(bins.len(), 4);
        for b in &bins {
            assert!((b.2 - 25.0).abs() < 1e-9, "{b:?}");
        }
        // Half the samples at 1, half spread over 1..=2: the first bin holds the tie.
        let mut q = vec![1.0; 51];
        q.extend((1..=50).map(|i| 1.0 + f64::from(i) / 50.0));
        let bins = histogram_bins(&q, 2).unwrap();
        let total: f64 = bins.iter().map(|b| b.2).sum();
        assert!((total - 100.0).abs() < 1e-9, "{bins:?}");
        assert!(bins[0].2 > 70.0, "{bins:?}");
        // All equal: one bar.
        assert_eq!(histogram_bins(&[5.0; 101], 10).unwrap().len(), 1);
        assert!(histogram_bins(&[], 10).is_none());
        assert!(histogram_bins(&[f64::NAN, f64::NAN], 10).is_none());
        assert_well_formed(&histogram_from_quantiles(&[5.0; 101], 10, "x"));
    }

    #[test]
    fn cdf_interpolates() {
        let q: Vec<f64> = (0..=100).map(|i| f64::from(i) * 2.0).collect();
        assert_eq!(cdf_at(&q, -1.0), 0.0);
        assert!((cdf_at(&q, 100.0) - 0.5).abs() < 1e-12);
        assert!((cdf_at(&q, 101.0) - 0.505).abs() < 1e-12);
        assert_eq!(cdf_at(&q, 200.0), 1.0);
    }

    #[test]
    fn timeline_rows_and_markers() {
        let mut records: Vec<RequestRecord> = (0..30)
            .map(|i| record(f64::from(i) * 7.0, 40.0, 5.0, 8, Some(6.0)))
            .collect();
        records[3].outcome = Outcome::Timeout {
            phase: TimeoutPhase::Stream,
        };
        records[4].outcome = Outcome::Error {
            kind: ErrorKind::Reset,
            message: "<b>reset</b> & gone".into(),
        };
        records[5].t_headers_ms = None;
        records[5].t_first_byte_ms = None;
        records[5].token_events_ms.clear();
        records[5].t_first_paint_ms = Some(f64::NAN);
        let svg = request_timeline(&records, 12);
        assert_well_formed(&svg);
        assert!(svg.contains("first 12 of 30 requests"));
        assert!(svg.contains("#12") && !svg.contains("#13"));
        assert!(svg.contains("timeout (stream)"));
        assert!(svg.contains("error reset"));
        assert!(svg.contains("painted 46.0 ms"), "{svg}");
        let all = request_timeline(&records, 100);
        assert!(all.contains("(30 requests)"));
    }

    #[test]
    fn stages_chart() {
        let levels = sweep();
        let svg = ttft_stages(&levels);
        assert_well_formed(&svg);
        // Every stage has a marker (with its value in the title) on every level's
        // line; the legend and the description name the stages whatever the data.
        for level in ["c=1", "c=4", "c=16"] {
            for stage in [
                "headers",
                "first byte",
                "first token parsed",
                "first token painted",
            ] {
                let marker = format!("<title>{level}: {stage} p50 ");
                assert!(svg.contains(&marker), "{marker}");
            }
        }
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_step(7.3), 10.0);
        assert_eq!(nice_step(0.23), 0.25);
        assert_eq!(nice_step(140.0), 200.0);
        let a = Axis::new(3.0, 97.0, "x");
        assert_eq!((a.lo, a.hi), (0.0, 100.0));
        assert_eq!(a.ticks.len(), 6);
        assert_eq!(fmt_tick(0.25, 0.25), "0.25");
        assert_eq!(fmt_tick(0.5, 0.5), "0.5");
        assert_eq!(fmt_tick(20000.0, 5000.0), "20k");
        assert_eq!(fmt_tick(150.0, 50.0), "150");
        // A degenerate range still has ticks.
        let a = Axis::new(5.0, 5.0, "x");
        assert!(a.hi > a.lo && a.ticks.len() >= 2);
        assert_eq!(f(f64::NAN), "0");
        assert_eq!(f(2.04), "2");
        assert_eq!(escape_html("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
