//! A metric across runs (`tokenscope history`): each run's value with its 95%
//! interval as an error bar, the runs in order on x, and the runs that changed
//! significantly from the one before ringed.

use super::svg::*;

/// One run's point.
#[derive(Debug, Clone)]
pub struct TrendPoint {
    /// The run as the x axis names it (its label or file).
    pub run: String,
    /// The value, `None` when the run lacks it (the line breaks there).
    pub value: Option<f64>,
    /// Its 95% interval.
    pub interval: Option<(f64, f64)>,
    /// Changed significantly from the run before: `better` or `worse`.
    pub change: Option<&'static str>,
}

/// The trend of `y_label` across `points` (in run order).
pub fn trend(title: &str, y_label: &str, points: &[TrendPoint]) -> String {
    let ys: Vec<f64> = points
        .iter()
        .flat_map(|p| {
            p.value
                .into_iter()
                .chain(p.interval.into_iter().flat_map(|i| [i.0, i.1]))
        })
        .filter(|v| v.is_finite())
        .collect();
    if ys.is_empty() {
        return empty_chart(title, "No run has this metric: nothing to plot.");
    }
    let (_, hi) = min_max(&ys);
    let n = points.len();
    let x_axis = Axis {
        lo: -0.5,
        hi: n as f64 - 0.5,
        ticks: Vec::new(),
        step: 1.0,
        label: "run".into(),
        percent: false,
        log10: false,
    };
    let desc = format!(
        "{y_label} for {n} runs in order, each with its 95% interval; runs that changed significantly from the one before are ringed (green better, vermillion worse)."
    );
    let mut svg = Svg::new(WIDTH, HEIGHT, title, &desc);
    let plot = Plot::new(&mut svg, WIDTH, HEIGHT, x_axis, Axis::new(0.0, hi, y_label));
    svg.title_text(title);
    let mut line = Vec::new();
    for (k, p) in points.iter().enumerate() {
        let x = plot.sx(k as f64);
        let short: String = p.run.chars().take(14).collect();
        svg.text(x, plot.bottom + 16.0, &short, 10.0, Anchor::Middle, AXIS);
        let Some(v) = p.value.filter(|v| v.is_finite()) else {
            svg.polyline(&line, BLUE, 1.8, Dash::Solid);
            line.clear();
            continue;
        };
        if let Some((lo, hi)) = p.interval.filter(|i| i.0.is_finite() && i.1.is_finite()) {
            let (a, b) = (plot.sy(lo), plot.sy(hi));
            svg.line((x, a), (x, b), BLUE, 1.2, Dash::Solid);
            svg.line((x - 4.0, a), (x + 4.0, a), BLUE, 1.2, Dash::Solid);
            svg.line((x - 4.0, b), (x + 4.0, b), BLUE, 1.2, Dash::Solid);
        }
        let y = plot.sy(v);
        line.push((x, y));
        let interval = p
            .interval
            .map(|(lo, hi)| format!(" [{}, {}]", fmt_num(lo), fmt_num(hi)))
            .unwrap_or_default();
        let change = p
            .change
            .map(|c| format!(", {c} than the run before"))
            .unwrap_or_default();
        svg.circle_titled(
            x,
            y,
            3.5,
            BLUE,
            &format!("{}: {}{interval}{change}", p.run, fmt_num(v)),
        );
        if let Some(c) = p.change {
            let color = if c == "better" { GREEN } else { VERMILLION };
            svg.ring(x, y, 8.0, color);
        }
    }
    svg.polyline(&line, BLUE, 1.8, Dash::Solid);
    svg.finish()
}
