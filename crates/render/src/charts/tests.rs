//! Every chart: well-formed SVG, titled, no NaN, the marks the data asks for.

use super::distribution::cdf_at;
use super::svg::{Axis, f, fmt_tick, nice_step};
use super::*;
use crate::fmt::escape_html;
use tokenscope_core::analyze::level::{LevelAccumulator, LevelOptions};
use tokenscope_core::analyze::slo::Slo;
use tokenscope_core::analyze::sweep::analyze_sweep;
use tokenscope_core::report::LevelReport;
use tokenscope_core::report::Load;
use tokenscope_core::testing;
use tokenscope_measure::record::Outcome;
use tokenscope_measure::record::RequestRecord;
use tokenscope_measure::record::{ErrorKind, PaintMethod, TimeoutPhase};

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
    let r = testing::record(t0, ttft, itl, tokens);
    RequestRecord {
        t_headers_ms: Some(t0 + 2.0),
        t_first_byte_ms: Some(t0 + 3.0),
        t_done_ms: Some(r.t_last_token_ms().unwrap_or(t0 + ttft) + 1.0),
        t_first_paint_ms: paint.map(|p| t0 + ttft + p),
        paint_method: paint.map(|_| PaintMethod::ElementTiming),
        body_bytes: 100,
        ..r
    }
}

/// A sweep whose latency explodes at c=16 (so it has a knee).
fn sweep() -> Vec<LevelReport> {
    [(1u32, 50.0, 10.0), (4, 55.0, 11.0), (16, 300.0, 40.0)]
        .iter()
        .map(|&(c, ttft, itl)| {
            let mut acc = LevelAccumulator::new(Load::Concurrency(c), LevelOptions::default());
            // Closed-loop waves: `c` sent together each second (c in flight).
            for i in 0..20 {
                let t0 = f64::from(i / c) * 1000.0;
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

#[test]
fn log_axes_tick_whole_decades() {
    let a = Axis::log10(0.3, 2500.0, "x");
    assert_eq!((a.lo, a.hi), (-1.0, 4.0));
    let labels: Vec<String> = a.ticks.iter().map(|t| a.tick_label(*t)).collect();
    assert_eq!(labels, ["0.1", "1", "10", "100", "1k", "10k"]);
    assert_eq!(super::svg::decade_label(-3), "0.001");
    assert_eq!(super::svg::decade_label(7), "10M");
}

/// The lavapipe fixture with a compute roof, a developer's kernel and the GEMV run
/// beside it.
fn report_with_yours() -> tokenscope_kernel_report::KernelReport {
    use tokenscope_kernel_report::{ComputeReport, KernelReport, TimingSummary};
    let text = include_str!("../../../../tests/fixtures/reports/kernels-lavapipe.json");
    let mut r = KernelReport::from_json(text).unwrap();
    let t = TimingSummary::from_samples(&[1.0]).unwrap();
    r.compute = Some(ComputeReport {
        f32_gflops: 20.0,
        f16_gflops: None,
        f32: t,
        f16: None,
        flops_per_call: 1,
        verified: true,
    });
    let mut yours = r.kernels[0].clone();
    yours.name = "matmul_tiled<&>".into();
    yours.dtype = tokenscope_kernel_report::USER_KERNEL_DTYPE.into();
    yours.flops = 2 * 128 * 128 * 128;
    yours.bytes_moved = 3 * 128 * 128 * 4;
    yours.gflops = 4.0;
    yours.variant = Some(tokenscope_kernel_report::VariantReport {
        name: "TILE=8".into(),
        source: "searched".into(),
        note: String::new(),
        search: None,
    });
    let mut beside = r.kernels[2].clone();
    beside.beside = Some(yours.name.clone());
    r.kernels.push(yours);
    r.kernels.push(beside);
    r
}

#[test]
fn the_roofline_names_your_kernel_under_both_roofs() {
    let r = report_with_yours();
    let svg = roofline(&r);
    assert_well_formed(&svg);
    // Your kernel named (escaped), tokenscope's GEMV beside it named by it.
    assert!(svg.contains(">matmul_tiled&lt;&amp;&gt; TILE=8<"), "{svg}");
    assert!(svg.contains("tokenscope gemv f16, bytes of matmul_tiled&lt;&amp;&gt;"));
    // Its place: 2 x 128^3 FLOPs over 3 x 128^2 x 4 bytes = 21.3 FLOP/byte, at 4
    // GFLOP/s, under the FMA roof (the ridge is 20 / 3.7 = 5.4 FLOP/byte): 20%.
    assert!(
        svg.contains("21.3 FLOP/byte, 4.00 GFLOP/s, 20% of its roof"),
        "{svg}"
    );
    // Both roofs in the legend, and the kernels with no FLOPs counted, not placed.
    assert!(
        svg.contains("roofs: read 3.70 GB/s, FMA 20.0 GFLOP/s"),
        "{svg}"
    );
    let no_flops = r.kernels.iter().filter(|k| k.flops == 0).count();
    if no_flops > 0 {
        assert!(svg.contains(&format!("{no_flops} kernels with no FLOPs")));
    }
    // Without a compute roof there is nothing to draw, and the chart says why.
    let mut bare = r.clone();
    bare.compute = None;
    let svg = roofline(&bare);
    assert_well_formed(&svg);
    assert!(svg.contains("no roofs to draw"), "{svg}");
}
