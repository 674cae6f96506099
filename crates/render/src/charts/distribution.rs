//! Distributions drawn from a level's quantile curves (`LevelReport::quantiles`:
//! 101 values, p0..p100): CDFs, and histograms derived by linear interpolation
//! between percentiles (exact at percentile resolution, 1% of the samples).

use super::svg::*;

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

/// The cumulative share (0..=1) at `x` of a quantile curve sampled at equal
/// probability steps, by linear interpolation (right-continuous at ties).
pub(super) fn cdf_at(q: &[f64], x: f64) -> f64 {
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
pub(super) fn quantile_points(q: &[f64]) -> Vec<(f64, f64)> {
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
