//! The server view's tables: per level, what the server's `/metrics` (and the GPU
//! exporter's) said, and where the client's TTFT went, stage by stage. The CLI's
//! text, the Markdown and the HTML report all take these rows.

use super::fmt::{fmt_ms, fmt_rate};
use tokenscope_core::analyze::server::engines::Series;
use tokenscope_core::analyze::server::level::HistogramSummary;
use tokenscope_core::analyze::server::view::ServerLevel;
use tokenscope_core::report::{ClientReport, LevelReport};

type Table = (Vec<String>, Vec<Vec<String>>);

fn levels_with_server(r: &ClientReport) -> Vec<(&LevelReport, &ServerLevel)> {
    r.levels
        .iter()
        .filter_map(|l| l.server_view().map(|s| (l, s)))
        .collect()
}

fn gauge(s: &ServerLevel, series: Series, scale: f64, digits: usize) -> String {
    match s.get(series) {
        Some(x) => match (x.mean, x.max) {
            (Some(mean), Some(max)) => {
                format!("{:.digits$} / {:.digits$}", mean * scale, max * scale)
            }
            _ => "-".into(),
        },
        None => "-".into(),
    }
}

fn rate(s: &ServerLevel, series: Series) -> String {
    s.get(series)
        .and_then(|x| x.rate_per_s)
        .map_or("-".into(), fmt_rate)
}

fn prefix_hit_percent(s: &ServerLevel) -> String {
    match s.prefix_hits() {
        Some((h, q)) if q > 0.0 => format!("{:.0}%", 100.0 * h / q),
        _ => "-".into(),
    }
}

/// The server's resources per level (`None` when no level was scraped): gauges
/// as mean / max over the level, counters as rates.
pub fn resource_rows(r: &ClientReport) -> Option<Table> {
    let levels = levels_with_server(r);
    if levels.is_empty() {
        return None;
    }
    let headers = [
        "load",
        "running (mean / max)",
        "waiting (mean / max)",
        "KV cache % (mean / max)",
        "batch (mean / max)",
        "gen tok/s (server)",
        "prefix hits",
        "preemptions",
        "GPU util % (mean / max)",
        "scrapes (failed)",
    ]
    .map(str::to_owned)
    .to_vec();
    let rows = levels
        .iter()
        .map(|(l, s)| {
            vec![
                l.label(),
                gauge(s, Series::RequestsRunning, 1.0, 1),
                gauge(s, Series::RequestsWaiting, 1.0, 1),
                gauge(s, Series::KvCacheUsage, 100.0, 1),
                gauge(s, Series::BatchSize, 1.0, 1),
                rate(s, Series::GenerationTokens),
                prefix_hit_percent(s),
                s.increase(Series::Preemptions)
                    .map_or("-".into(), |n| format!("{n:.0}")),
                gauge(s, Series::GpuUtilization, 100.0, 0),
                format!("{} ({})", s.scrapes, s.failed_scrapes),
            ]
        })
        .collect();
    Some(drop_empty_columns(headers, rows))
}

/// Columns where every row is `-` (series this engine does not have) are left out.
fn drop_empty_columns(headers: Vec<String>, rows: Vec<Vec<String>>) -> Table {
    let keep: Vec<bool> = (0..headers.len())
        .map(|i| i == 0 || rows.iter().any(|r| r.get(i).is_some_and(|c| c != "-")))
        .collect();
    let pick = |v: Vec<String>| {
        v.into_iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(c, _)| c)
            .collect::<Vec<_>>()
    };
    (pick(headers), rows.into_iter().map(pick).collect())
}

fn hist_ms(
    s: &ServerLevel,
    series: Series,
    q: fn(&HistogramSummary) -> Option<f64>,
) -> Option<f64> {
    s.get(series)
        .and_then(|x| x.histogram.as_ref())
        .and_then(q)
        .map(|v| v * 1000.0)
}

/// Where each level's TTFT went (`None` when no level has the server's TTFT
/// histogram): the client's and the server's means, their difference (network +
/// client), the server's queue and prefill, the page's paint, the server's own
/// TTFT percentiles (interpolated in its buckets), and the token cross-check.
pub fn stage_rows(r: &ClientReport) -> Option<Table> {
    let levels: Vec<_> = levels_with_server(r)
        .into_iter()
        .filter(|(_, s)| s.stages.is_some() || s.tokens.is_some())
        .collect();
    if levels.is_empty() {
        return None;
    }
    let paint = levels
        .iter()
        .any(|(_, s)| s.stages.as_ref().is_some_and(|x| x.paint_ms.is_some()));
    let delivery = levels.iter().any(|(_, s)| {
        s.stages
            .as_ref()
            .is_some_and(|x| x.browser_delivery_ms.is_some())
    });
    let mut headers = vec![
        "load",
        "client TTFT",
        "server TTFT",
        "network + client",
        "queue",
        "prefill",
    ];
    if paint {
        headers.push("paint");
    }
    if delivery {
        headers.extend(["browser send", "browser delivery"]);
    }
    headers.extend(["server TTFT p50 / p95 / p99", "tokens (server / usage)"]);
    let rows = levels
        .iter()
        .map(|(l, s)| {
            let st = s.stages.as_ref();
            let mut row = vec![
                l.label(),
                fmt_ms(st.map(|x| x.client_ttft_ms)),
                fmt_ms(st.map(|x| x.server_ttft_ms)),
                fmt_ms(st.map(|x| x.network_and_client_ms)),
                fmt_ms(st.and_then(|x| x.queue_ms)),
                fmt_ms(st.and_then(|x| x.prefill_ms)),
            ];
            if paint {
                row.push(fmt_ms(st.and_then(|x| x.paint_ms)));
            }
            if delivery {
                row.push(fmt_ms(st.and_then(|x| x.browser_send_ms)));
                row.push(fmt_ms(st.and_then(|x| x.browser_delivery_ms)));
            }
            row.push(format!(
                "{} / {} / {}",
                fmt_ms(hist_ms(s, Series::TtftSeconds, |h| h.p50)),
                fmt_ms(hist_ms(s, Series::TtftSeconds, |h| h.p95)),
                fmt_ms(hist_ms(s, Series::TtftSeconds, |h| h.p99)),
            ));
            row.push(match &s.tokens {
                Some(t) => format!(
                    "{:.0} / {}{}",
                    t.server_generated,
                    t.client_completion,
                    if t.agrees { "" } else { " (differ)" }
                ),
                None => "-".into(),
            });
            row
        })
        .collect();
    Some(drop_empty_columns(
        headers.into_iter().map(str::to_owned).collect(),
        rows,
    ))
}

/// One line naming what was scraped (or why nothing was).
pub fn source_line(r: &ClientReport) -> Option<String> {
    let run = r.server_run()?;
    let parts: Vec<String> = run
        .targets
        .iter()
        .map(|t| {
            let url = match t.target {
                tokenscope_core::analyze::server::scrape::ScrapeTarget::Server => {
                    r.config.server_metrics_url.as_deref()
                }
                tokenscope_core::analyze::server::scrape::ScrapeTarget::Gpu => {
                    r.config.gpu_metrics_url.as_deref()
                }
            };
            format!(
                "{} {} ({}): {} scrapes, {} failed",
                t.target.label(),
                url.unwrap_or("-"),
                t.engine.map_or("no engine recognised", |e| e.label()),
                t.scrapes,
                t.failed
            )
        })
        .collect();
    Some(format!(
        "Server metrics, every {} s and at each level's start and end: {}. Means of the server's histograms are exact (sum / count over the level); its percentiles are interpolated within buckets.",
        r.config.scrape_interval_s.map_or("-".into(), fmt_rate),
        parts.join("; ")
    ))
}
