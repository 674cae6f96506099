//! The diagnosis rules that read the server view: each fires on scrapes built to
//! show its symptom, quotes the evidence, and stays silent on a near miss. The
//! scrapes are real exposition text in vLLM's and dcgm-exporter's names, read by
//! the same code a run uses (`ScrapeRecord::read`, `ServerLevel::of`).

use tokenscope_core::analyze::diagnosis::diagnose;
use tokenscope_core::analyze::server::scrape::{ScrapeRecord, ScrapeTarget};
use tokenscope_core::analyze::server::view::ServerLevel;
use tokenscope_core::report::combined::{Finding, ReportInput};
use tokenscope_core::report::{ClientReport, LevelReport, Load, Source};
use tokenscope_core::testing;

/// What the server said at a level's start or end.
#[derive(Clone, Copy, Default)]
struct Said {
    running: f64,
    waiting: f64,
    kv: f64,
    preemptions: f64,
    prompt: f64,
    cached: f64,
    ttft_sum_s: f64,
    ttft_count: f64,
    gpu_util_percent: Option<f64>,
}

fn vllm(s: &Said) -> String {
    format!(
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running {}\n\
         # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting {}\n\
         # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc {}\n\
         # TYPE vllm:num_preemptions counter\nvllm:num_preemptions_total {}\n\
         # TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total {}\n\
         # TYPE vllm:prompt_tokens_cached counter\nvllm:prompt_tokens_cached_total {}\n\
         # TYPE vllm:time_to_first_token_seconds histogram\n\
         vllm:time_to_first_token_seconds_bucket{{le=\"0.1\"}} {}\n\
         vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {}\n\
         vllm:time_to_first_token_seconds_sum {}\n\
         vllm:time_to_first_token_seconds_count {}\n",
        s.running,
        s.waiting,
        s.kv,
        s.preemptions,
        s.prompt,
        s.cached,
        s.ttft_count,
        s.ttft_count,
        s.ttft_sum_s,
        s.ttft_count
    )
}

fn dcgm(util_percent: f64) -> String {
    format!("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{{gpu=\"0\"}} {util_percent}\n")
}

/// A level at concurrency `c` of 10 requests with TTFT `ttft_ms`, and the server
/// view from two scrapes (start, end).
fn level(c: u32, ttft_ms: f64, start: Said, end: Said) -> LevelReport {
    let records: Vec<_> = (0..10)
        .map(|i| testing::record(f64::from(i) * 1000.0, ttft_ms, 10.0, 8))
        .collect();
    let mut l = testing::level(Load::Concurrency(c), &records);
    let mut scrapes = Vec::new();
    for (t, s) in [(0.0, start), (10_000.0, end)] {
        scrapes.push(ScrapeRecord::read(ScrapeTarget::Server, t, &vllm(&s)));
        if let Some(u) = s.gpu_util_percent {
            scrapes.push(ScrapeRecord::read(ScrapeTarget::Gpu, t, &dcgm(u)));
        }
    }
    l.server = Some(ServerLevel::of(&scrapes, &l));
    l
}

fn findings(levels: Vec<LevelReport>, distinct_prompts: Option<u64>) -> Vec<Finding> {
    let mut c: ClientReport = testing::client_report(Source::Native, levels);
    c.config.distinct_prompts = distinct_prompts;
    diagnose(&ReportInput {
        clients: vec![c],
        kernels: None,
        model: None,
    })
}

fn fired<'a>(f: &'a [Finding], rule: &str) -> Option<&'a Finding> {
    f.iter().find(|x| x.rule.as_str() == rule)
}

fn quiet(kv: f64) -> (Said, Said) {
    let start = Said {
        kv,
        ..Said::default()
    };
    let end = Said {
        kv,
        ttft_count: 10.0,
        ttft_sum_s: 0.5,
        ..Said::default()
    };
    (start, end)
}

#[test]
fn a_full_kv_cache_with_preemptions_fires_and_a_full_but_calm_one_does_not() {
    let (start, mut end) = quiet(0.95);
    end.preemptions = 7.0;
    let f = findings(vec![level(1, 50.0, start, end)], None);
    let finding = fired(&f, "kv_cache_full").expect("fires");
    assert!(
        finding.evidence[0].contains("up to 95% used")
            && finding.evidence[0].contains("7 preemptions"),
        "{:?}",
        finding.evidence
    );
    // Near misses: 95% full but nothing waits or is preempted; 89% with preemptions.
    let (start, end) = quiet(0.95);
    assert!(
        fired(
            &findings(vec![level(1, 50.0, start, end)], None),
            "kv_cache_full"
        )
        .is_none()
    );
    let (start, mut end) = quiet(0.89);
    end.preemptions = 7.0;
    assert!(
        fired(
            &findings(vec![level(1, 50.0, start, end)], None),
            "kv_cache_full"
        )
        .is_none()
    );
}

#[test]
fn an_idle_gpu_under_high_latency_fires() {
    let mk = |util: f64, ttft: f64, c: u32| {
        let (mut start, mut end) = quiet(0.1);
        start.gpu_util_percent = Some(util);
        end.gpu_util_percent = Some(util);
        level(c, ttft, start, end)
    };
    let f = findings(vec![mk(30.0, 50.0, 1), mk(30.0, 150.0, 8)], None);
    let finding = fired(&f, "gpu_idle_while_slow").expect("fires");
    assert!(
        finding.evidence[0].starts_with("c=8: GPU utilisation 30%"),
        "{:?}",
        finding.evidence
    );
    // Near misses: the GPU busy (60%); idle but latency flat.
    assert!(
        fired(
            &findings(vec![mk(60.0, 50.0, 1), mk(60.0, 150.0, 8)], None),
            "gpu_idle_while_slow"
        )
        .is_none()
    );
    assert!(
        fired(
            &findings(vec![mk(30.0, 50.0, 1), mk(30.0, 60.0, 8)], None),
            "gpu_idle_while_slow"
        )
        .is_none()
    );
}

#[test]
fn a_queue_growing_over_three_levels_fires() {
    let mk = |c: u32, waiting: f64| {
        let (mut start, mut end) = quiet(0.2);
        start.waiting = waiting;
        end.waiting = waiting;
        level(c, 50.0, start, end)
    };
    let f = findings(vec![mk(1, 0.0), mk(8, 0.5), mk(16, 3.0), mk(32, 9.0)], None);
    let finding = fired(&f, "queue_grows").expect("fires");
    assert_eq!(
        finding.evidence[0],
        "requests waiting (mean): c=1 0.0, c=8 0.5, c=16 3.0, c=32 9.0"
    );
    // Near misses: growing but under one request waiting; growth that stops.
    let f = findings(vec![mk(1, 0.0), mk(8, 0.2), mk(16, 0.6)], None);
    assert!(fired(&f, "queue_grows").is_none());
    let f = findings(vec![mk(1, 0.0), mk(8, 3.0), mk(16, 2.0)], None);
    assert!(fired(&f, "queue_grows").is_none());
}

#[test]
fn a_client_ttft_far_above_the_servers_fires() {
    // The server's mean TTFT is 50 ms (0.5 s over 10); the client's 80 ms.
    let (start, end) = quiet(0.1);
    let f = findings(vec![level(1, 80.0, start, end)], None);
    let finding = fired(&f, "client_far_above_server").expect("fires");
    assert!(
        finding.evidence[0].contains("30.0 ms between them"),
        "{:?}",
        finding.evidence
    );
    // Near miss: 4 ms apart (under 5 ms).
    let f = findings(vec![level(1, 54.0, start, end)], None);
    assert!(fired(&f, "client_far_above_server").is_none());
}

#[test]
fn a_low_prefix_hit_rate_on_repeated_prompts_fires() {
    let mk = |cached: f64| {
        let (start, mut end) = quiet(0.1);
        end.prompt = 1000.0;
        end.cached = cached;
        level(1, 50.0, start, end)
    };
    // 10 requests over 2 distinct prompts, 5% of prompt tokens from the cache.
    let f = findings(vec![mk(50.0)], Some(2));
    let finding = fired(&f, "prefix_cache_low").expect("fires");
    assert!(
        finding.evidence[0].contains("hit rate 5%"),
        "{:?}",
        finding.evidence
    );
    // Near misses: the prompts never repeat (10 distinct); a hit rate of 50%.
    assert!(fired(&findings(vec![mk(50.0)], Some(10)), "prefix_cache_low").is_none());
    assert!(fired(&findings(vec![mk(1000.0)], Some(2)), "prefix_cache_low").is_none());
    assert!(fired(&findings(vec![mk(50.0)], None), "prefix_cache_low").is_none());
}
