//! The diagnosis rules that read the server view (`LevelReport::server`): each
//! looks for one symptom of the troubleshooting table, fires only when its
//! evidence is in the scrapes, and quotes that evidence. Thresholds are in
//! `docs/metrics.md` ("Server metrics").

use super::engines::Series;
use super::view::ServerLevel;
use crate::model::{ClientReport, LevelReport};
use crate::report::combined::{Finding, RuleId};
use tokenscope_stats::fmt::fmt_ms;

/// KV-cache usage above which the cache counts as near full.
pub const KV_FULL: f64 = 0.90;
/// GPU utilisation below which the GPU counts as idle.
pub const GPU_IDLE: f64 = 0.50;
/// Client TTFT above the server's by more than this many ms (and [`CLIENT_GAP_FRACTION`]).
pub const CLIENT_GAP_MS: f64 = 5.0;
/// ... and by more than this fraction of the server's TTFT.
pub const CLIENT_GAP_FRACTION: f64 = 0.2;
/// A prefix-cache hit rate below this, on prompts the run repeated, is low.
pub const PREFIX_HIT_LOW: f64 = 0.2;

/// Every server-side rule for one client report.
pub fn diagnose(c: &ClientReport, who: &str) -> Vec<Finding> {
    [
        rule_kv_cache_full(c, who),
        rule_gpu_idle(c, who),
        rule_queue_grows(c, who),
        rule_client_far_above_server(c, who),
        rule_prefix_cache_low(c, who),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn server_levels(c: &ClientReport) -> impl Iterator<Item = (&LevelReport, &ServerLevel)> {
    c.levels
        .iter()
        .filter_map(|l| l.server_view().map(|s| (l, s)))
}

/// KV cache near full with preemptions or requests queued.
fn rule_kv_cache_full(c: &ClientReport, who: &str) -> Option<Finding> {
    let evidence: Vec<String> = server_levels(c)
        .filter_map(|(l, s)| {
            let (kv_mean, kv_max) = s.gauge(Series::KvCacheUsage)?;
            if kv_max <= KV_FULL {
                return None;
            }
            let preempted = s.increase(Series::Preemptions).unwrap_or(0.0);
            let waiting = s.gauge(Series::RequestsWaiting).map_or(0.0, |w| w.0);
            (preempted > 0.0 || waiting >= 1.0).then(|| {
                format!(
                    "{}: KV cache up to {:.0}% used (mean {:.0}%), {preempted:.0} preemptions, {waiting:.1} requests waiting on average",
                    l.label(),
                    kv_max * 100.0,
                    kv_mean * 100.0
                )
            })
        })
        .collect();
    (!evidence.is_empty()).then(|| Finding {
        rule: RuleId::KvCacheFull,
        title: format!("{who}: the KV cache is full: requests wait for room or are preempted and recomputed"),
        evidence,
        advice: "Fewer concurrent sequences (vLLM --max-num-seqs, llama.cpp fewer slots), a shorter context (--max-model-len), KV-cache quantisation (fp8 / q8_0 KV), or more GPU memory for the cache (--gpu-memory-utilization); `tokenscope plan` says how many sequences fit.".into(),
    })
}

/// The GPU mostly idle at a level whose latency is high: the load does not reach it.
fn rule_gpu_idle(c: &ClientReport, who: &str) -> Option<Finding> {
    let base = c.lowest_level()?.metrics.ttft_ms.p50?;
    let evidence: Vec<String> = server_levels(c)
        .filter_map(|(l, s)| {
            let (util, _) = s.gauge(Series::GpuUtilization)?;
            let ttft = l.metrics.ttft_ms.p50?;
            let waiting = s.gauge(Series::RequestsWaiting).map_or(0.0, |w| w.0);
            let slow = ttft >= 2.0 * base || waiting >= 1.0;
            (util < GPU_IDLE && slow).then(|| {
                format!(
                    "{}: GPU utilisation {:.0}% on average while TTFT p50 is {} ms ({:.1}x the lowest load's), {waiting:.1} requests waiting",
                    l.label(),
                    util * 100.0,
                    fmt_ms(Some(ttft)),
                    ttft / base.max(1e-9)
                )
            })
        })
        .collect();
    (!evidence.is_empty()).then(|| Finding {
        rule: RuleId::GpuIdleWhileSlow,
        title: format!("{who}: latency is high while the GPU is mostly idle"),
        evidence,
        advice: "The time goes before the GPU: batching off or a batch limit too small, a CPU-bound server (tokenisation, scheduling, detokenisation), or load too sparse to batch; check the engine's batch settings and its CPU use.".into(),
    })
}

/// Requests waiting on the server grow level over level: past capacity.
fn rule_queue_grows(c: &ClientReport, who: &str) -> Option<Finding> {
    let waits: Vec<(String, f64)> = server_levels(c)
        .filter_map(|(l, s)| Some((l.label(), s.gauge(Series::RequestsWaiting)?.0)))
        .collect();
    if waits.len() < 3 {
        return None;
    }
    // The longest run of strictly growing means that ends at the last level.
    let mut start = waits.len() - 1;
    while start > 0 && waits[start - 1].1 < waits[start].1 {
        start -= 1;
    }
    let run = &waits[start..];
    let last = run.last()?.1;
    if run.len() < 3 || last < 1.0 {
        return None;
    }
    Some(Finding {
        rule: RuleId::QueueGrows,
        title: format!("{who}: the server's queue grows level over level: these levels are past its capacity"),
        evidence: vec![format!(
            "requests waiting (mean): {}",
            run.iter()
                .map(|(l, w)| format!("{l} {w:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        )],
        advice: "Added load only waits: the levels where the queue grows measure queueing, not serving. Capacity is below them (see the knee); add replicas, or raise the batch limit if the KV cache has room.".into(),
    })
}

/// The client's TTFT far above the server's: the time goes on the way.
fn rule_client_far_above_server(c: &ClientReport, who: &str) -> Option<Finding> {
    let evidence: Vec<String> = server_levels(c)
        .filter_map(|(l, s)| {
            let st = s.stages.as_ref()?;
            let gap = st.network_and_client_ms;
            (st.client_requests >= 3
                && gap > CLIENT_GAP_MS
                && gap > CLIENT_GAP_FRACTION * st.server_ttft_ms)
                .then(|| {
                    format!(
                        "{}: client TTFT {} ms (mean) vs the server's own {} ms: {} ms between them",
                        l.label(),
                        fmt_ms(Some(st.client_ttft_ms)),
                        fmt_ms(Some(st.server_ttft_ms)),
                        fmt_ms(Some(gap))
                    )
                })
        })
        .collect();
    (!evidence.is_empty()).then(|| Finding {
        rule: RuleId::ClientFarAboveServer,
        title: format!("{who}: the client sees its first token much later than the server sends it"),
        evidence,
        advice: "The network or the client: a proxy or gateway buffering the stream, TLS or connection setup per request, a long route, or a loaded client machine (`tokenscope calibrate` measures the client's own error).".into(),
    })
}

/// A low prefix-cache hit rate although the run sent the same prompts again, or
/// began every request with the same system prompt (`--shared-prefix`).
fn rule_prefix_cache_low(c: &ClientReport, who: &str) -> Option<Finding> {
    let distinct = c.config.distinct_prompts;
    let shared = c.config.shared_prefix_tokens;
    if distinct.is_none() && shared.is_none() {
        return None;
    }
    let evidence: Vec<String> = server_levels(c)
        .filter_map(|(l, s)| {
            let repeats = match (shared, distinct) {
                (Some(p), _) if l.sent > 1 => {
                    format!("every one of {} requests began with the same {p}-token system prompt", l.sent)
                }
                (_, Some(d)) if l.sent > d => {
                    format!("{} requests reused {d} distinct prompts", l.sent)
                }
                _ => return None,
            };
            let (hits, asked) = s.prefix_hits()?;
            let rate = hits / asked;
            (asked > 0.0 && rate < PREFIX_HIT_LOW).then(|| {
                format!(
                    "{}: prefix-cache hit rate {:.0}% ({hits:.0} of {asked:.0} prompt tokens) while {repeats}",
                    l.label(),
                    rate * 100.0,
                )
            })
        })
        .collect();
    (!evidence.is_empty()).then(|| Finding {
        rule: RuleId::PrefixCacheLow,
        title: format!("{who}: the prefix cache misses prompts the run repeats"),
        evidence,
        advice: "Turn prefix caching on (vLLM --enable-prefix-caching, SGLang's radix cache, llama.cpp cache_prompt), check that the shared part comes first and byte-identical (templates, timestamps), and that the cache is large enough to keep it.".into(),
    })
}
