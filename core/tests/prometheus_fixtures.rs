//! Real `/metrics` scrapes of vLLM, SGLang, TGI, llama.cpp, Triton (TensorRT-LLM)
//! and dcgm-exporter (`tests/fixtures/metrics/`, each naming its source on line 1)
//! through the one parser: every sample line lands in a family, none is lost, and
//! the values read are the ones written.

use tokenscope_core::analyze::server::engines::{Engine, Series};
use tokenscope_core::analyze::server::reading::Reading;
use tokenscope_measure::prometheus::{MetricKind, Scrape};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../tests/fixtures/metrics/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const ALL: [&str; 13] = [
    "dcgm-exporter-datadog-tesla-t4.prom",
    "dcgm-exporter-readme-sample.prom",
    "llamacpp-0c1e570-after.prom",
    "llamacpp-0c1e570-idle.prom",
    "llamacpp-0c1e570-under-load.prom",
    "llamacpp-b9041-after-1-request-head.prom",
    "llamacpp-b9041-idle.prom",
    "sglang-0.5.10.post1-datadog-fixture.prom",
    "sglang-2024-docs-llama3.1-8b.prom",
    "tgi-datadog-fixture-under-load.prom",
    "triton-trtllm-readme-sample.prom",
    "vllm-0.5-v0-datadog-opt125m.prom",
    "vllm-v1names-datadog-fixture-edited.prom",
];

/// The value of the one sample named `name` whose labels include `labels`.
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = s
        .samples(name)
        .filter(|x| labels.iter().all(|(k, v)| x.label(k) == Some(*v)))
        .map(|x| x.value)
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
    found[0]
}

#[test]
fn every_sample_line_is_read_and_every_typed_family_found() {
    for name in ALL {
        let text = fixture(name);
        let s = Scrape::parse(&text);
        // Counted without the parser: lines that are neither blank nor comments.
        let sample_lines = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .count();
        let read: usize = s.families.iter().map(|f| f.samples.len()).sum();
        assert_eq!(read + s.skipped.len(), sample_lines, "{name}");
        if name == "dcgm-exporter-readme-sample.prom" {
            // The README elides lines with "..."; its `gpu="0", UUID=` space is fine.
            let lines: Vec<usize> = s.skipped.iter().map(|l| l.line).collect();
            assert_eq!(lines, [8, 12], "{name}: {:?}", s.skipped);
        } else {
            assert!(s.skipped.is_empty(), "{name}: {:?}", s.skipped);
        }
        let typed: std::collections::BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        for t in &typed {
            let f = s.family(t).unwrap_or_else(|| panic!("{name}: family {t}"));
            assert_ne!(f.kind, MetricKind::Untyped, "{name}: {t}");
        }
        // Every histogram's buckets, sum and count sit in its own family.
        for f in s
            .families
            .iter()
            .filter(|f| f.kind == MetricKind::Histogram)
        {
            let has = |suffix: &str| {
                let n = format!("{}{suffix}", f.name);
                f.samples.iter().any(|x| x.name == n)
            };
            assert!(
                has("_bucket") && has("_sum") && has("_count"),
                "{name}: {}",
                f.name
            );
            assert!(s.family(&format!("{}_bucket", f.name)).is_none());
        }
    }
}

#[test]
fn vllm_v0_values() {
    let s = Scrape::parse(&fixture("vllm-0.5-v0-datadog-opt125m.prom"));
    let m = [("model_name", "facebook/opt-125m")];
    assert_eq!(value(&s, "vllm:num_requests_running", &m), 0.0);
    assert_eq!(value(&s, "vllm:prompt_tokens_total", &m), 5.0);
    assert_eq!(value(&s, "vllm:generation_tokens_total", &m), 7.0);
    assert_eq!(value(&s, "vllm:e2e_request_latency_seconds_count", &m), 1.0);
    assert_eq!(
        value(&s, "vllm:e2e_request_latency_seconds_sum", &m),
        0.5034303665161133
    );
    let e2e = s.family("vllm:e2e_request_latency_seconds").unwrap();
    assert_eq!(e2e.kind, MetricKind::Histogram);
    let buckets = e2e
        .samples
        .iter()
        .filter(|x| x.name.ends_with("_bucket"))
        .count();
    assert_eq!(buckets, 11);
    assert_eq!(
        e2e.samples
            .iter()
            .rev()
            .find(|x| x.name.ends_with("_bucket"))
            .and_then(|x| x.label("le")),
        Some("+Inf")
    );
}

#[test]
fn tgi_values_le_last_and_a_summary() {
    let s = Scrape::parse(&fixture("tgi-datadog-fixture-under-load.prom"));
    // A counter without `_total`.
    assert_eq!(value(&s, "tgi_request_success", &[]), 109.0);
    assert_eq!(value(&s, "tgi_request_duration_count", &[]), 109.0);
    assert_eq!(
        value(&s, "tgi_request_duration_sum", &[]),
        541.2140316159999
    );
    let d = s.family("tgi_request_duration").unwrap();
    assert_eq!(
        d.samples
            .iter()
            .filter(|x| x.name == "tgi_request_duration_bucket")
            .count(),
        36
    );
    let q = s.family("tgi_request_skipped_tokens").unwrap();
    assert_eq!(q.kind, MetricKind::Summary);
    assert_eq!(
        q.samples
            .iter()
            .filter(|x| x.label("quantile").is_some())
            .count(),
        7
    );
}

#[test]
fn llamacpp_sglang_triton_and_dcgm_values() {
    let l = Scrape::parse(&fixture("llamacpp-0c1e570-under-load.prom"));
    assert_eq!(value(&l, "llamacpp:requests_processing", &[]), 2.0);
    assert_eq!(value(&l, "llamacpp:requests_deferred", &[]), 2.0);
    assert_eq!(value(&l, "llamacpp:prompt_tokens_total", &[]), 524.0);
    assert_eq!(
        l.family("llamacpp:prompt_tokens_total").unwrap().kind,
        MetricKind::Counter
    );

    let g = Scrape::parse(&fixture("sglang-2024-docs-llama3.1-8b.prom"));
    let running: f64 = g.samples("sglang:num_running_reqs").map(|x| x.value).sum();
    let queued: f64 = g.samples("sglang:num_queue_reqs").map(|x| x.value).sum();
    assert_eq!((running, queued), (162.0, 2826.0));

    let t = Scrape::parse(&fixture("triton-trtllm-readme-sample.prom"));
    let waiting = [("request_type", "waiting")];
    assert_eq!(value(&t, "nv_trt_llm_request_metrics", &waiting), 1.0);
    assert_eq!(
        value(&t, "nv_trt_llm_request_metrics", &[("request_type", "max")]),
        512.0
    );

    let d = Scrape::parse(&fixture("dcgm-exporter-datadog-tesla-t4.prom"));
    let util = d.samples("DCGM_FI_DEV_GPU_UTIL").next().unwrap();
    assert_eq!(util.label("modelName"), Some("Tesla T4"));
    assert_eq!(
        util.label("DCGM_FI_PROCESS_NAME"),
        Some("/usr/bin/dcgm-exporter")
    );
    assert_eq!(
        value(
            &d,
            "DCGM_FI_DEV_FB_USED_PERCENT",
            &[("DCGM_FI_DEV_SERIAL", "1565220008176")]
        ),
        0.000008
    );
    assert_eq!(
        d.family("DCGM_FI_DEV_SLOWDOWN_TEMP")
            .and_then(|f| f.help.as_deref()),
        Some("")
    );
}

/// Each engine's scrape: recognised, and the series its names give.
#[test]
fn every_engine_is_recognised_with_its_series() {
    use Series::*;
    let cases: [(&str, Engine, &[Series]); 11] = [
        (
            "vllm-0.5-v0-datadog-opt125m.prom",
            Engine::Vllm,
            &[
                RequestsRunning,
                RequestsWaiting,
                KvCacheUsage,
                PromptTokens,
                GenerationTokens,
                Preemptions,
                TtftSeconds,
                InterTokenSeconds,
                E2eSeconds,
            ],
        ),
        (
            "vllm-v1names-datadog-fixture-edited.prom",
            Engine::Vllm,
            &[
                RequestsRunning,
                RequestsWaiting,
                KvCacheUsage,
                PromptTokens,
                CachedPromptTokens,
                GenerationTokens,
                PrefixCacheQueries,
                PrefixCacheHits,
                Preemptions,
                TtftSeconds,
                QueueSeconds,
                PrefillSeconds,
                DecodeSeconds,
                InterTokenSeconds,
                E2eSeconds,
            ],
        ),
        (
            "sglang-0.5.10.post1-datadog-fixture.prom",
            Engine::Sglang,
            &[
                RequestsRunning,
                RequestsWaiting,
                KvCacheUsage,
                PromptTokens,
                CachedPromptTokens,
                GenerationTokens,
                TtftSeconds,
                QueueSeconds,
                InterTokenSeconds,
                E2eSeconds,
            ],
        ),
        (
            "sglang-2024-docs-llama3.1-8b.prom",
            Engine::Sglang,
            &[
                RequestsRunning,
                RequestsWaiting,
                KvCacheUsage,
                PromptTokens,
                GenerationTokens,
                TtftSeconds,
                InterTokenSeconds,
                E2eSeconds,
            ],
        ),
        (
            "tgi-datadog-fixture-under-load.prom",
            Engine::Tgi,
            &[
                RequestsWaiting,
                BatchSize,
                QueueSeconds,
                PrefillSeconds,
                InterTokenSeconds,
                E2eSeconds,
            ],
        ),
        (
            "llamacpp-0c1e570-under-load.prom",
            Engine::LlamaCpp,
            &[
                RequestsRunning,
                RequestsWaiting,
                BatchSize,
                PromptTokens,
                CachedPromptTokens,
                GenerationTokens,
            ],
        ),
        (
            "llamacpp-0c1e570-idle.prom",
            Engine::LlamaCpp,
            &[
                RequestsRunning,
                RequestsWaiting,
                BatchSize,
                PromptTokens,
                CachedPromptTokens,
                GenerationTokens,
            ],
        ),
        (
            "llamacpp-b9041-idle.prom",
            Engine::LlamaCpp,
            &[
                RequestsRunning,
                RequestsWaiting,
                BatchSize,
                PromptTokens,
                GenerationTokens,
            ],
        ),
        (
            "triton-trtllm-readme-sample.prom",
            Engine::TritonTrtLlm,
            &[RequestsRunning, RequestsWaiting, KvCacheUsage],
        ),
        (
            "dcgm-exporter-datadog-tesla-t4.prom",
            Engine::DcgmExporter,
            &[
                GpuUtilization,
                GpuMemoryUsedBytes,
                GpuPowerWatts,
                GpuEnergyJoules,
            ],
        ),
        (
            "dcgm-exporter-readme-sample.prom",
            Engine::DcgmExporter,
            // Clocks and a temperature only.
            &[],
        ),
    ];
    for (name, engine, series) in cases {
        let r = Reading::of(&Scrape::parse(&fixture(name)));
        assert_eq!(r.engine, Some(engine), "{name}");
        let found: Vec<Series> = r.values.keys().copied().collect();
        let mut want = series.to_vec();
        want.sort();
        assert_eq!(found, want, "{name}");
    }
}

#[test]
fn engine_values_in_their_units() {
    let r = Reading::of(&Scrape::parse(&fixture("llamacpp-0c1e570-under-load.prom")));
    assert_eq!(r.scalar(Series::RequestsRunning), Some(2.0));
    assert_eq!(r.scalar(Series::RequestsWaiting), Some(2.0));
    assert_eq!(r.scalar(Series::PromptTokens), Some(524.0));
    // This build has no KV-usage gauge: none is read (nothing is invented).
    assert_eq!(r.scalar(Series::KvCacheUsage), None);

    let t = Reading::of(&Scrape::parse(&fixture("triton-trtllm-readme-sample.prom")));
    assert_eq!(t.scalar(Series::KvCacheUsage), Some(0.4875));
    assert_eq!(t.scalar(Series::RequestsWaiting), Some(1.0));

    let g = Reading::of(&Scrape::parse(&fixture(
        "tgi-datadog-fixture-under-load.prom",
    )));
    let e2e = g.histogram(Series::E2eSeconds).unwrap();
    assert_eq!(e2e.count, 109.0);
    assert_eq!(e2e.buckets.last().unwrap(), &(f64::INFINITY, 109.0));
    assert!((e2e.mean().unwrap() - 541.2140316159999 / 109.0).abs() < 1e-12);
    let p50 = e2e.quantile(0.5).unwrap();
    assert!(p50 > 0.0 && p50 <= e2e.quantile(0.99).unwrap());

    // An idle T4: 0 % utilisation, 0 MiB used, 8.969 W.
    let d = Reading::of(&Scrape::parse(&fixture(
        "dcgm-exporter-datadog-tesla-t4.prom",
    )));
    assert_eq!(d.scalar(Series::GpuUtilization), Some(0.0));
    assert_eq!(d.scalar(Series::GpuMemoryUsedBytes), Some(0.0));
    assert_eq!(d.scalar(Series::GpuPowerWatts), Some(8.969));
    // Its energy counter, in millijoules since boot: joules.
    assert_eq!(d.scalar(Series::GpuEnergyJoules), Some(128996.013));
}

/// vLLM's speculative-decoding counters (their names from the `vllm-names.txt`
/// fixture's source, `vllm/v1/spec_decode/metrics.py`; prometheus_client adds
/// `_total`), read from an exposition in vLLM's shape with made-up values.
#[test]
fn vllm_spec_decode_counters_are_read() {
    let text = "\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 400.0
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 1200.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 780.0
";
    let r = Reading::of(&Scrape::parse(text));
    assert_eq!(r.engine, Some(Engine::Vllm));
    assert_eq!(r.scalar(Series::SpecDecodeDrafts), Some(400.0));
    assert_eq!(r.scalar(Series::SpecDecodeDraftTokens), Some(1200.0));
    assert_eq!(r.scalar(Series::SpecDecodeAcceptedTokens), Some(780.0));
}
