//! The exposition checked with the project's own parser, and the series for
//! remote write checked against it.

use super::histogram::max_bucket_ratio;
use super::*;
use tokenscope_core::testing;
use tokenscope_measure::metrics::MetricOptions;
use tokenscope_measure::prometheus::{MetricKind, Sample, Scrape};
use tokenscope_measure::record::{ErrorKind, TimeoutPhase};
use tokenscope_stats::stats::percentile;

const C4: Load = Load::Concurrency(4);

fn finish(live: &Live, load: Load, measured: bool, r: &RequestRecord) -> RequestMetrics {
    let m = RequestMetrics::from_record(r, &MetricOptions::default());
    live.request_started(load);
    live.request_finished(load, measured, r, &m);
    m
}

/// A parsed scrape with no line skipped.
fn scrape(live: &Live) -> Scrape {
    let text = live.render();
    let s = Scrape::parse(&text);
    assert!(s.skipped.is_empty(), "{:?}\n{text}", s.skipped);
    s
}

fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    s.samples(name)
        .find(|x| labels.iter().all(|(k, v)| x.label(k) == Some(v)))
        .map(|x| x.value)
}

/// One histogram's `(le, cumulative count)` buckets, `+Inf` last.
fn buckets(s: &Scrape, name: &str, level: &str) -> Vec<(f64, f64)> {
    s.samples(&format!("{name}_bucket"))
        .filter(|x| x.label("level") == Some(level))
        .map(|x| (x.label("le").unwrap().parse::<f64>().unwrap(), x.value))
        .collect()
}

/// `histogram_quantile` as Prometheus computes it (promql/quantile.go,
/// bucketQuantile): linear interpolation inside the bucket holding rank `q *
/// count`, the first bucket starting at 0, the `+Inf` bucket answering the last
/// finite boundary.
fn histogram_quantile(q: f64, b: &[(f64, f64)]) -> f64 {
    let count = b.last().unwrap().1;
    let rank = q * count;
    let i = b.iter().position(|(_, c)| *c >= rank).unwrap();
    if i == b.len() - 1 {
        return b[b.len() - 2].0;
    }
    let (lo, below) = if i == 0 { (0.0, 0.0) } else { b[i - 1] };
    let (hi, c) = b[i];
    lo + (hi - lo) * (rank - below) / (c - below)
}

#[test]
fn every_family_parses_with_its_type_and_the_labels_every_series_needs() {
    let live = Live::new(LiveLabels::default());
    live.level_started(0, C4);
    finish(&live, C4, true, &testing::record(0.0, 120.0, 20.0, 5));
    live.event_loop_lag_ms(0.5);
    let s = scrape(&live);
    let kinds: Vec<(&str, MetricKind)> = s
        .families
        .iter()
        .map(|f| (f.name.as_str(), f.kind))
        .collect();
    use MetricKind::*;
    assert_eq!(
        kinds,
        [
            ("tokenscope_ttft_seconds", Histogram),
            ("tokenscope_tpot_seconds", Histogram),
            ("tokenscope_itl_seconds", Histogram),
            ("tokenscope_e2e_seconds", Histogram),
            ("tokenscope_event_loop_lag_seconds", Histogram),
            ("tokenscope_requests_total", Counter),
            ("tokenscope_warmup_requests_total", Counter),
            ("tokenscope_input_tokens_total", Counter),
            ("tokenscope_output_tokens_total", Counter),
            ("tokenscope_in_flight_requests", Gauge),
            ("tokenscope_level_load", Gauge),
            ("tokenscope_level_index", Gauge),
        ]
    );
    for f in &s.families {
        assert!(f.help.as_ref().is_some_and(|h| !h.is_empty()), "{}", f.name);
        for x in &f.samples {
            assert_eq!(x.label("shard"), Some("0/1"), "{x:?}");
            assert_eq!(x.label("label"), None, "{x:?}");
            let per_level = !matches!(
                f.name.as_str(),
                "tokenscope_event_loop_lag_seconds"
                    | "tokenscope_level_load"
                    | "tokenscope_level_index"
            );
            assert_eq!(x.label("level").is_some(), per_level, "{x:?}");
        }
    }
    assert_eq!(
        value(&s, "tokenscope_level_load", &[("mode", "concurrency")]),
        Some(4.0)
    );
    assert_eq!(value(&s, "tokenscope_level_index", &[]), Some(0.0));
    assert_eq!(value(&s, "tokenscope_in_flight_requests", &[]), Some(0.0));
}

#[test]
fn histograms_are_cumulative_and_hold_the_reports_values() {
    let live = Live::new(LiveLabels::default());
    let records: Vec<RequestRecord> = (0..50)
        .map(|i| testing::record(0.0, 50.0 + 10.0 * f64::from(i), 5.0 + f64::from(i % 7), 6))
        .collect();
    let metrics: Vec<RequestMetrics> = records.iter().map(|r| finish(&live, C4, true, r)).collect();
    let s = scrape(&live);
    let cases: [(&str, Vec<f64>); 4] = [
        (
            "tokenscope_ttft_seconds",
            metrics.iter().filter_map(|m| m.ttft_ms).collect(),
        ),
        (
            "tokenscope_tpot_seconds",
            metrics.iter().filter_map(|m| m.tpot_ms).collect(),
        ),
        (
            "tokenscope_e2e_seconds",
            metrics.iter().filter_map(|m| m.e2e_ms).collect(),
        ),
        (
            "tokenscope_itl_seconds",
            metrics
                .iter()
                .flat_map(|m| m.gaps.iter().map(|g| g.ms))
                .collect(),
        ),
    ];
    for (name, ms) in cases {
        let b = buckets(&s, name, "c=4");
        assert_eq!(b.len(), histogram::bounds().len() + 1, "{name}");
        assert!(
            b.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
            "{name}: not cumulative"
        );
        let (le, inf) = *b.last().unwrap();
        assert!(le.is_infinite());
        let count = value(&s, &format!("{name}_count"), &[("level", "c=4")]).unwrap();
        let sum = value(&s, &format!("{name}_sum"), &[("level", "c=4")]).unwrap();
        assert_eq!((inf, count), (ms.len() as f64, ms.len() as f64), "{name}");
        let want_sum: f64 = ms.iter().map(|v| v / 1000.0).sum();
        assert!((sum - want_sum).abs() < 1e-9, "{name}: {sum} vs {want_sum}");
        // Each observation in the first bucket at or above it.
        for v in &ms {
            let v = v / 1000.0;
            let at = b.iter().position(|(le, _)| v <= *le).unwrap();
            assert!(
                b[at].1 >= 1.0 && (at == 0 || b[at - 1].0 < v),
                "{name}: {v}"
            );
        }
    }
    // The ITL histogram holds one observation per gap: 5 per 6-token request.
    assert_eq!(value(&s, "tokenscope_itl_seconds_count", &[]), Some(250.0));
}

#[test]
fn histogram_quantile_is_within_the_bucket_resolution_of_the_exact_percentile() {
    let live = Live::new(LiveLabels::default());
    let mut rng = tokenscope_stats::rng::Rng::new(7);
    // TTFTs log-uniform from 1 ms to 20 s: every decade exercised.
    let mut ttft_ms = Vec::new();
    for _ in 0..5000 {
        let ttft = 10f64.powf(rng.next_f64() * 4.3);
        ttft_ms.push(
            finish(&live, C4, true, &testing::record(0.0, ttft, 10.0, 2))
                .ttft_ms
                .unwrap(),
        );
    }
    let s = scrape(&live);
    let b = buckets(&s, "tokenscope_ttft_seconds", "c=4");
    let resolution = max_bucket_ratio();
    for q in [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99] {
        let exact = percentile(&ttft_ms, q).unwrap() / 1000.0;
        let est = histogram_quantile(q, &b);
        let ratio = est.max(exact) / est.min(exact);
        assert!(
            ratio <= resolution,
            "p{}: {est} vs {exact} (ratio {ratio})",
            q * 100.0
        );
    }
}

#[test]
fn outcomes_errors_and_warmup_are_counted_as_the_report_counts_them() {
    let live = Live::new(LiveLabels::default());
    live.level_started(0, C4);
    // Warm-up: counted apart, never in the histograms nor the outcome counters.
    finish(&live, C4, false, &testing::record(0.0, 999.0, 10.0, 4));
    finish(
        &live,
        C4,
        false,
        &testing::failed(0.0, ErrorKind::Http(503)),
    );
    // Measured: 2 ok, 3 errors of two kinds, 1 timeout.
    let mut with_sent = testing::record(0.0, 100.0, 10.0, 4);
    with_sent.usage = None; // input tokens as sent, output tokens counted from events
    with_sent.prompt_tokens_sent = Some(77);
    finish(&live, C4, true, &with_sent);
    finish(&live, C4, true, &testing::record(0.0, 200.0, 10.0, 3));
    finish(&live, C4, true, &testing::failed(0.0, ErrorKind::Http(503)));
    finish(&live, C4, true, &testing::failed(0.0, ErrorKind::Http(503)));
    finish(&live, C4, true, &testing::failed(0.0, ErrorKind::Reset));
    finish(
        &live,
        C4,
        true,
        &testing::timed_out(0.0, TimeoutPhase::FirstToken),
    );
    let s = scrape(&live);
    let v = |name: &str, labels: &[(&str, &str)]| value(&s, name, labels);
    assert_eq!(v("tokenscope_warmup_requests_total", &[]), Some(2.0));
    assert_eq!(
        v("tokenscope_requests_total", &[("outcome", "ok")]),
        Some(2.0)
    );
    assert_eq!(
        v("tokenscope_requests_total", &[("outcome", "error")]),
        Some(3.0)
    );
    assert_eq!(
        v("tokenscope_requests_total", &[("outcome", "timeout")]),
        Some(1.0)
    );
    assert_eq!(
        v("tokenscope_request_errors_total", &[("kind", "http_503")]),
        Some(2.0)
    );
    assert_eq!(
        v("tokenscope_request_errors_total", &[("kind", "reset")]),
        Some(1.0)
    );
    assert_eq!(s.samples("tokenscope_request_errors_total").count(), 2);
    assert_eq!(v("tokenscope_input_tokens_total", &[]), Some(77.0 + 10.0));
    assert_eq!(v("tokenscope_output_tokens_total", &[]), Some(4.0 + 3.0));
    assert_eq!(v("tokenscope_ttft_seconds_count", &[]), Some(2.0));
    assert_eq!(v("tokenscope_ttft_seconds_sum", &[]), Some(0.1 + 0.2));
    assert_eq!(v("tokenscope_in_flight_requests", &[]), Some(0.0));
    // No browser: no rendered TTFT family at all.
    assert!(s.family("tokenscope_rendered_ttft_seconds").is_none());
}

#[test]
fn rendered_ttft_appears_with_a_records_paint() {
    let live = Live::new(LiveLabels::default());
    let mut r = testing::record(0.0, 100.0, 10.0, 3);
    r.t_first_paint_ms = Some(130.0);
    let m = finish(&live, C4, true, &r);
    let s = scrape(&live);
    let want = m.rendered_ttft_ms.unwrap() / 1000.0;
    assert_eq!(
        value(&s, "tokenscope_rendered_ttft_seconds_sum", &[]),
        Some(want)
    );
    assert_eq!(
        value(&s, "tokenscope_rendered_ttft_seconds_count", &[]),
        Some(1.0)
    );
}

#[test]
fn levels_keep_their_cumulative_series_and_the_gauges_follow_the_current_level() {
    let live = Live::new(LiveLabels::default());
    live.level_started(0, C4);
    finish(&live, C4, true, &testing::record(0.0, 100.0, 10.0, 3));
    live.request_started(C4); // still in flight when the next level starts
    let rate = Load::Rate(2.5);
    live.level_started(1, rate);
    finish(&live, rate, true, &testing::record(0.0, 100.0, 10.0, 3));
    finish(&live, rate, true, &testing::record(0.0, 100.0, 10.0, 3));
    live.request_started(rate);
    let s = scrape(&live);
    let ok = |level| {
        value(
            &s,
            "tokenscope_requests_total",
            &[("level", level), ("outcome", "ok")],
        )
    };
    assert_eq!((ok("c=4"), ok("2.5 req/s")), (Some(1.0), Some(2.0)));
    let flying = |level| value(&s, "tokenscope_in_flight_requests", &[("level", level)]);
    assert_eq!((flying("c=4"), flying("2.5 req/s")), (Some(1.0), Some(1.0)));
    assert_eq!(
        value(&s, "tokenscope_level_load", &[("mode", "rate")]),
        Some(2.5)
    );
    assert_eq!(s.samples("tokenscope_level_load").count(), 1);
    assert_eq!(value(&s, "tokenscope_level_index", &[]), Some(1.0));
}

#[test]
fn shard_and_label_are_on_every_series_and_escaped() {
    let label = "run \"A\" \\ new\nline ünïcode";
    let live = Live::new(LiveLabels {
        shard: Some((2, 4)),
        label: Some(label.into()),
    });
    live.level_started(0, C4);
    finish(&live, C4, true, &testing::record(0.0, 100.0, 10.0, 3));
    live.event_loop_lag_ms(1.0);
    let text = live.render();
    assert!(
        text.contains(r#"label="run \"A\" \\ new\nline ünïcode""#),
        "{text}"
    );
    let s = scrape(&live);
    let all: Vec<&Sample> = s.families.iter().flat_map(|f| &f.samples).collect();
    assert!(!all.is_empty());
    for x in all {
        assert_eq!(
            (x.label("shard"), x.label("label")),
            (Some("2/4"), Some(label)),
            "{x:?}"
        );
    }
}

#[test]
fn series_for_remote_write_are_the_rendered_samples_with_sorted_labels() {
    let live = Live::new(LiveLabels {
        shard: Some((1, 2)),
        label: Some("x".into()),
    });
    live.level_started(3, Load::Rate(5.0));
    finish(
        &live,
        Load::Rate(5.0),
        true,
        &testing::failed(0.0, ErrorKind::Connect),
    );
    finish(
        &live,
        Load::Rate(5.0),
        true,
        &testing::record(0.0, 100.0, 10.0, 3),
    );
    let series = live.series(1_700_000_000_123);
    let s = scrape(&live);
    let rendered: Vec<&Sample> = s.families.iter().flat_map(|f| &f.samples).collect();
    assert_eq!(series.len(), rendered.len());
    for (ts, x) in series.iter().zip(rendered) {
        assert_eq!(ts.samples, [(x.value, 1_700_000_000_123)]);
        let names: Vec<&str> = ts.labels.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names[0], "__name__");
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        let get = |k: &str| {
            ts.labels
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("__name__"), Some(x.name.as_str()));
        assert_eq!(
            (get("job"), get("instance")),
            (Some("tokenscope"), Some("1/2"))
        );
        for (k, v) in &x.labels {
            assert_eq!(get(k), Some(v.as_str()), "{k}");
        }
        assert_eq!(ts.labels.len(), x.labels.len() + 3);
    }
}

/// An HTTP client for the tests: the factory's side client, as the bench's
/// remote write has (the binary's `main` installs the TLS crypto provider; a
/// test must do it itself).
pub(crate) fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    crate::http_client::HttpOptions::default()
        .client(crate::http_client::ClientRole::Side {
            timeout: std::time::Duration::from_secs(10),
        })
        .unwrap()
}
