//! Which engine (or GPU exporter) a `/metrics` scrape comes from, and the series
//! tokenscope reads from it, by each engine's own metric names. One table per
//! engine: adding one is adding a table (CONTRIBUTING.md).

use serde::{Deserialize, Serialize};

use tokenscope_measure::prometheus::{MetricKind, Scrape};

/// A quantity read from a server's or a GPU exporter's `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Series {
    /// Requests being decoded or prefilled now (gauge).
    RequestsRunning,
    /// Requests queued, not yet scheduled (gauge).
    RequestsWaiting,
    /// Fraction of the KV cache in use, 0-1 (gauge).
    KvCacheUsage,
    /// Sequences in the current decode batch (gauge).
    BatchSize,
    /// Prompt tokens computed (counter).
    PromptTokens,
    /// Prompt tokens served from the prefix cache (counter).
    CachedPromptTokens,
    /// Generated tokens (counter).
    GenerationTokens,
    /// Prefix-cache lookups, in tokens (counter).
    PrefixCacheQueries,
    /// Prefix-cache hits, in tokens (counter).
    PrefixCacheHits,
    /// Requests preempted (counter).
    Preemptions,
    /// Server-side time to first token, seconds (histogram).
    TtftSeconds,
    /// Time queued before scheduling, seconds (histogram).
    QueueSeconds,
    /// Prefill time, seconds (histogram).
    PrefillSeconds,
    /// Decode time, seconds (histogram).
    DecodeSeconds,
    /// Time between output tokens, seconds (histogram).
    InterTokenSeconds,
    /// Server-side end-to-end latency, seconds (histogram).
    E2eSeconds,
    /// GPU utilisation, 0-1 (gauge, mean over GPUs).
    GpuUtilization,
    /// GPU memory used, bytes (gauge, summed over GPUs).
    GpuMemoryUsedBytes,
    /// GPU power draw, watts (gauge, summed over GPUs).
    GpuPowerWatts,
    /// GPU energy used since boot, joules (counter, summed over GPUs).
    GpuEnergyJoules,
    /// Speculative decoding: drafts proposed (counter).
    SpecDecodeDrafts,
    /// Speculative decoding: draft tokens proposed (counter).
    SpecDecodeDraftTokens,
    /// Speculative decoding: draft tokens the target model accepted (counter).
    SpecDecodeAcceptedTokens,
}

impl Series {
    /// Every series, in report order.
    pub const ALL: [Series; 23] = [
        Series::RequestsRunning,
        Series::RequestsWaiting,
        Series::KvCacheUsage,
        Series::BatchSize,
        Series::PromptTokens,
        Series::CachedPromptTokens,
        Series::GenerationTokens,
        Series::PrefixCacheQueries,
        Series::PrefixCacheHits,
        Series::Preemptions,
        Series::TtftSeconds,
        Series::QueueSeconds,
        Series::PrefillSeconds,
        Series::DecodeSeconds,
        Series::InterTokenSeconds,
        Series::E2eSeconds,
        Series::GpuUtilization,
        Series::GpuMemoryUsedBytes,
        Series::GpuPowerWatts,
        Series::GpuEnergyJoules,
        Series::SpecDecodeDrafts,
        Series::SpecDecodeDraftTokens,
        Series::SpecDecodeAcceptedTokens,
    ];

    /// How the series is read.
    pub fn kind(self) -> MetricKind {
        use Series::*;
        match self {
            PromptTokens
            | CachedPromptTokens
            | GenerationTokens
            | PrefixCacheQueries
            | PrefixCacheHits
            | Preemptions
            | GpuEnergyJoules
            | SpecDecodeDrafts
            | SpecDecodeDraftTokens
            | SpecDecodeAcceptedTokens => MetricKind::Counter,
            TtftSeconds | QueueSeconds | PrefillSeconds | DecodeSeconds | InterTokenSeconds
            | E2eSeconds => MetricKind::Histogram,
            _ => MetricKind::Gauge,
        }
    }

    /// How label sets (models, GPUs) combine: summed, or averaged for fractions.
    pub fn combine(self) -> Combine {
        match self {
            Series::KvCacheUsage | Series::GpuUtilization => Combine::Mean,
            _ => Combine::Sum,
        }
    }
}

/// How a series' label sets combine into one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// Added (requests, tokens, bytes).
    Sum,
    /// Averaged (fractions).
    Mean,
}

/// Where a scrape comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// vLLM (v0 and v1 names).
    Vllm,
    /// SGLang.
    Sglang,
    /// Hugging Face text-generation-inference.
    Tgi,
    /// llama.cpp's llama-server (`--metrics`).
    LlamaCpp,
    /// TensorRT-LLM behind Triton.
    TritonTrtLlm,
    /// NVIDIA dcgm-exporter (the GPU, not an engine).
    DcgmExporter,
}

impl Engine {
    /// Every source recognised.
    pub const ALL: [Engine; 6] = [
        Engine::Vllm,
        Engine::Sglang,
        Engine::Tgi,
        Engine::LlamaCpp,
        Engine::TritonTrtLlm,
        Engine::DcgmExporter,
    ];

    /// The name shown in reports.
    pub fn label(self) -> &'static str {
        match self {
            Engine::Vllm => "vLLM",
            Engine::Sglang => "SGLang",
            Engine::Tgi => "TGI",
            Engine::LlamaCpp => "llama.cpp",
            Engine::TritonTrtLlm => "TensorRT-LLM (Triton)",
            Engine::DcgmExporter => "dcgm-exporter",
        }
    }

    /// Its prompt-token counter leaves out the tokens served from its cache
    /// (llama.cpp: "excluding cached tokens"), so those are added back before it
    /// is compared with the client's `usage.prompt_tokens`.
    pub fn prompt_counter_excludes_cached(self) -> bool {
        self == Engine::LlamaCpp
    }

    /// The metric-name prefix only this source uses.
    fn prefix(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm:",
            Engine::Sglang => "sglang:",
            Engine::Tgi => "tgi_",
            Engine::LlamaCpp => "llamacpp:",
            Engine::TritonTrtLlm => "nv_trt_llm_",
            Engine::DcgmExporter => "DCGM_FI_",
        }
    }

    /// The source whose names fill most of `scrape`, if any.
    pub fn detect(scrape: &Scrape) -> Option<Engine> {
        Engine::ALL
            .into_iter()
            .map(|e| {
                let n = scrape
                    .families
                    .iter()
                    .filter(|f| f.name.starts_with(e.prefix()))
                    .count();
                (e, n)
            })
            .filter(|&(_, n)| n > 0)
            .max_by_key(|&(_, n)| n)
            .map(|(e, _)| e)
    }

    /// Where each series is read from, in order of preference (the first present wins).
    pub fn sources(self) -> &'static [Source] {
        match self {
            Engine::Vllm => VLLM,
            Engine::Sglang => SGLANG,
            Engine::Tgi => TGI,
            Engine::LlamaCpp => LLAMACPP,
            Engine::TritonTrtLlm => TRITON,
            Engine::DcgmExporter => DCGM,
        }
    }
}

/// One series' source: a metric (the family name), optionally one label's value,
/// and a factor to the series' unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Source {
    /// The series filled.
    pub series: Series,
    /// The family name.
    pub metric: &'static str,
    /// Only samples with this label value.
    pub select: Option<(&'static str, &'static str)>,
    /// Multiplies every value (percent -> fraction, MiB -> bytes); 1 for most.
    pub scale: f64,
}

const fn src(series: Series, metric: &'static str) -> Source {
    Source {
        series,
        metric,
        select: None,
        scale: 1.0,
    }
}

const fn pick(
    series: Series,
    metric: &'static str,
    label: &'static str,
    value: &'static str,
) -> Source {
    Source {
        series,
        metric,
        select: Some((label, value)),
        scale: 1.0,
    }
}

const fn scaled(series: Series, metric: &'static str, scale: f64) -> Source {
    Source {
        series,
        metric,
        select: None,
        scale,
    }
}

use Series as S;

/// vLLM: v1 names first, then v0's (`gpu_cache_usage_perc` is a 0-1 fraction
/// despite its name; v1 renamed it `kv_cache_usage_perc`).
const VLLM: &[Source] = &[
    src(S::RequestsRunning, "vllm:num_requests_running"),
    src(S::RequestsWaiting, "vllm:num_requests_waiting"),
    src(S::KvCacheUsage, "vllm:kv_cache_usage_perc"),
    src(S::KvCacheUsage, "vllm:gpu_cache_usage_perc"),
    src(S::PromptTokens, "vllm:prompt_tokens_total"),
    src(S::CachedPromptTokens, "vllm:prompt_tokens_cached_total"),
    src(S::GenerationTokens, "vllm:generation_tokens_total"),
    src(S::PrefixCacheQueries, "vllm:prefix_cache_queries_total"),
    src(S::PrefixCacheHits, "vllm:prefix_cache_hits_total"),
    src(S::Preemptions, "vllm:num_preemptions_total"),
    src(S::TtftSeconds, "vllm:time_to_first_token_seconds"),
    src(S::QueueSeconds, "vllm:request_queue_time_seconds"),
    src(S::PrefillSeconds, "vllm:request_prefill_time_seconds"),
    src(S::DecodeSeconds, "vllm:request_decode_time_seconds"),
    src(S::InterTokenSeconds, "vllm:inter_token_latency_seconds"),
    src(S::InterTokenSeconds, "vllm:time_per_output_token_seconds"),
    src(S::E2eSeconds, "vllm:e2e_request_latency_seconds"),
    // Speculative decoding (vLLM v1's `vllm/v1/spec_decode/metrics.py`:
    // prometheus_client counters, exposed with `_total`).
    src(S::SpecDecodeDrafts, "vllm:spec_decode_num_drafts_total"),
    src(
        S::SpecDecodeDraftTokens,
        "vllm:spec_decode_num_draft_tokens_total",
    ),
    src(
        S::SpecDecodeAcceptedTokens,
        "vllm:spec_decode_num_accepted_tokens_total",
    ),
];

/// SGLang: `token_usage` is the KV pool's used fraction.
const SGLANG: &[Source] = &[
    src(S::RequestsRunning, "sglang:num_running_reqs"),
    src(S::RequestsWaiting, "sglang:num_queue_reqs"),
    src(S::KvCacheUsage, "sglang:token_usage"),
    src(S::PromptTokens, "sglang:prompt_tokens_total"),
    src(S::CachedPromptTokens, "sglang:cached_tokens_total"),
    src(S::GenerationTokens, "sglang:generation_tokens_total"),
    src(S::TtftSeconds, "sglang:time_to_first_token_seconds"),
    src(S::QueueSeconds, "sglang:queue_time_seconds"),
    src(S::InterTokenSeconds, "sglang:inter_token_latency_seconds"),
    src(S::InterTokenSeconds, "sglang:time_per_output_token_seconds"),
    src(S::E2eSeconds, "sglang:e2e_request_latency_seconds"),
];

/// TGI: durations in seconds; no KV gauge, no token counters. Its prefill time is
/// per prefill batch (`tgi_batch_inference_duration{method="prefill"}`), which is
/// a request's prefill when batches hold one; its decode histograms are per step,
/// so no per-request decode time is read.
const TGI: &[Source] = &[
    src(S::RequestsWaiting, "tgi_queue_size"),
    src(S::BatchSize, "tgi_batch_current_size"),
    src(S::QueueSeconds, "tgi_request_queue_duration"),
    pick(
        S::PrefillSeconds,
        "tgi_batch_inference_duration",
        "method",
        "prefill",
    ),
    src(
        S::InterTokenSeconds,
        "tgi_request_mean_time_per_token_duration",
    ),
    src(S::E2eSeconds, "tgi_request_duration"),
];

/// llama.cpp (llama-server `--metrics`): no KV-usage gauge in current builds
/// (`kv_cache_usage_ratio` was removed), no latency histograms;
/// `n_busy_slots_per_decode` is the batch size.
const LLAMACPP: &[Source] = &[
    src(S::RequestsRunning, "llamacpp:requests_processing"),
    src(S::RequestsWaiting, "llamacpp:requests_deferred"),
    src(S::KvCacheUsage, "llamacpp:kv_cache_usage_ratio"),
    src(S::BatchSize, "llamacpp:n_busy_slots_per_decode"),
    src(S::PromptTokens, "llamacpp:prompt_tokens_total"),
    src(S::CachedPromptTokens, "llamacpp:prompt_tokens_cached_total"),
    src(S::GenerationTokens, "llamacpp:tokens_predicted_total"),
];

/// TensorRT-LLM's Triton backend: one gauge family per area, the quantity in a label.
const TRITON: &[Source] = &[
    pick(
        S::RequestsRunning,
        "nv_trt_llm_request_metrics",
        "request_type",
        "active",
    ),
    pick(
        S::RequestsWaiting,
        "nv_trt_llm_request_metrics",
        "request_type",
        "waiting",
    ),
    pick(
        S::KvCacheUsage,
        "nv_trt_llm_kv_cache_block_metrics",
        "kv_cache_block_type",
        "fraction",
    ),
];

/// dcgm-exporter: utilisation in percent, framebuffer in MiB.
const DCGM: &[Source] = &[
    scaled(S::GpuUtilization, "DCGM_FI_DEV_GPU_UTIL", 0.01),
    scaled(S::GpuMemoryUsedBytes, "DCGM_FI_DEV_FB_USED", 1_048_576.0),
    src(S::GpuPowerWatts, "DCGM_FI_DEV_POWER_USAGE"),
    // Millijoules since boot.
    scaled(
        S::GpuEnergyJoules,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        0.001,
    ),
];
