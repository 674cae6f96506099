//! The server over the run: requests running and waiting, KV-cache usage and GPU
//! utilisation, and the server's own generated-token rate, one point per scrape.

use super::svg::{
    Axis, BLUE, Dash, GREEN, HEIGHT, MARGIN_LEFT, ORANGE, Plot, Svg, VERMILLION, WIDTH,
    empty_chart, fmt_num, legend, min_max,
};
use tokenscope_core::analyze::server::view::{ServerPoint, ServerRun};

type Getter = fn(&ServerPoint) -> Option<f64>;

/// A series drawn: its name, colour, line style and points `(t_s, value)`.
type Drawn<'a> = (&'a str, &'a str, Dash, Vec<(f64, f64)>);

/// The run's server timeline as three charts: requests, resources (percent) and
/// the server's throughput. A chart with no series to draw is left out.
pub fn server_timeline(run: &ServerRun) -> Vec<String> {
    let requests: [(&str, &str, Dash, Getter); 2] = [
        ("running", BLUE, Dash::Solid, |p| p.running),
        ("waiting", VERMILLION, Dash::Solid, |p| p.waiting),
    ];
    let resources: [(&str, &str, Dash, Getter); 2] = [
        ("KV cache used", GREEN, Dash::Solid, |p| {
            p.kv_cache_usage.map(|v| v * 100.0)
        }),
        ("GPU utilisation", ORANGE, Dash::Solid, |p| {
            p.gpu_utilization.map(|v| v * 100.0)
        }),
    ];
    let throughput: [(&str, &str, Dash, Getter); 1] =
        [("generated tokens/s", BLUE, Dash::Solid, |p| {
            p.generation_tokens_per_s
        })];
    [
        time_chart(
            run,
            "Requests on the server over the run",
            "requests",
            &requests,
            false,
        ),
        time_chart(
            run,
            "KV cache and GPU over the run",
            "percent",
            &resources,
            true,
        ),
        time_chart(
            run,
            "The server's output over the run",
            "tokens/s (server's counter)",
            &throughput,
            false,
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn time_chart(
    run: &ServerRun,
    title: &str,
    y_label: &str,
    series: &[(&str, &str, Dash, Getter)],
    percent: bool,
) -> Option<String> {
    let drawn: Vec<Drawn> = series
        .iter()
        .map(|(name, color, dash, get)| {
            let pts: Vec<(f64, f64)> = run
                .timeline
                .iter()
                .filter_map(|p| get(p).filter(|v| v.is_finite()).map(|v| (p.t_s, v)))
                .collect();
            (*name, *color, *dash, pts)
        })
        .filter(|s| !s.3.is_empty())
        .collect();
    if drawn.is_empty() {
        return None;
    }
    let ts: Vec<f64> = drawn.iter().flat_map(|s| s.3.iter().map(|p| p.0)).collect();
    let ys: Vec<f64> = drawn.iter().flat_map(|s| s.3.iter().map(|p| p.1)).collect();
    if ts.len() < 2 {
        return Some(empty_chart(
            title,
            "One scrape only: nothing to draw over time.",
        ));
    }
    let (t0, t1) = min_max(&ts);
    let (_, y_hi) = min_max(&ys);
    let x = Axis::new(t0, t1, "seconds into the run");
    let y = if percent {
        Axis::percent(y_label)
    } else {
        Axis::new(0.0, y_hi, y_label)
    };
    let desc = format!(
        "{} over {} s of the run, one point per scrape of the server's metrics: {}.",
        title,
        fmt_num(t1 - t0),
        drawn
            .iter()
            .map(|s| {
                let (_, hi) = min_max(&s.3.iter().map(|p| p.1).collect::<Vec<_>>());
                format!("{} up to {}", s.0, fmt_num(hi))
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut svg = Svg::new(WIDTH, HEIGHT, title, &desc);
    let plot = Plot::new(&mut svg, WIDTH, HEIGHT, x, y);
    svg.title_text(title);
    for (_, color, dash, pts) in &drawn {
        let px: Vec<(f64, f64)> = pts.iter().map(|&(t, v)| (plot.sx(t), plot.sy(v))).collect();
        svg.polyline(&px, color, 2.0, *dash);
    }
    legend(
        &mut svg,
        MARGIN_LEFT,
        40.0,
        &drawn
            .iter()
            .map(|s| (s.0.to_owned(), s.1, s.2))
            .collect::<Vec<_>>(),
    );
    Some(svg.finish())
}
