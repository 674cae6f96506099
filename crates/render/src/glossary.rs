//! The glossary printed at the end of every combined report: each metric's
//! definition and what other tools call it (the same as `docs/metrics.md`).

use tokenscope_core::model::metric_defs::DEFINITIONS;

/// One glossary entry.
#[derive(Debug, Clone, Copy)]
pub struct GlossaryEntry {
    /// Metric name as reported.
    pub name: &'static str,
    /// Its definition.
    pub definition: &'static str,
    /// What other tools call it.
    pub peers: &'static str,
}

/// The glossary's entries in order: the metrics' own definitions from the
/// registry ([`tokenscope_core::model::metric_defs::DEFINITIONS`], by key), and the concepts
/// that are not a level's metric (the same as docs/metrics.md).
pub const GLOSSARY: &[GlossaryEntry] = &[
    metric("ttft_ms"),
    metric("rendered_ttft_ms"),
    metric("render_delay_ms"),
    metric("time_to_first_answer_ms"),
    metric("time_to_first_tool_call_ms"),
    metric("browser_delivery_ms"),
    metric("time_to_headers_ms"),
    metric("tpot_ms"),
    metric("itl_ms"),
    metric("max_gap_ms"),
    GlossaryEntry {
        name: "Turn TTFT",
        definition: "TTFT of the requests that were turn k of a conversation (--conversation), each sending the history so far; below turn 1's when the server reuses the history's cached tokens",
        peers: "multi-turn TTFT (vLLM multi-turn bench, AIPerf)",
    },
    GlossaryEntry {
        name: "Cached prompt tokens",
        definition: "the prompt tokens the server said it took from its prefix cache (usage.prompt_tokens_details.cached_tokens, llama.cpp timings.cache_n), as a share of the prompt tokens of the requests that said",
        peers: "prefix cache hit rate",
    },
    metric("ttft_cached_ms"),
    metric("ttft_uncached_ms"),
    GlossaryEntry {
        name: "Dollars per million output tokens",
        definition: "a level's dollars (--price: GPUs by the hour over the level's window, idle time included; or a hosted API's prices on each request's usage, cached prompt tokens apart) over its output tokens, x 1e6",
        peers: "cost per million tokens (inference-perf)",
    },
    GlossaryEntry {
        name: "Joules per output token",
        definition: "the GPUs' energy over a level (the GPU exporter's energy counter, else its mean power x the window) over the level's output tokens",
        peers: "vLLM bench's joules per output token; AIPerf's energy per token",
    },
    metric("e2e_ms"),
    metric("output_tokens_per_s"),
    metric("goodput_per_s"),
    GlossaryEntry {
        name: "Knee",
        definition: "the first level after which p95 E2E grows faster than output throughput (elasticity > 1, latency +10% or more)",
        peers: "-",
    },
    GlossaryEntry {
        name: "TPOT floor",
        definition: "weight bytes / GEMV bandwidth + KV bytes / attention bandwidth, both measured on the GPU",
        peers: "memory-bandwidth roofline",
    },
];

/// The glossary entry of the metric with this key (a key the registry lacks
/// fails the build).
const fn metric(key: &str) -> GlossaryEntry {
    let mut i = 0;
    while i < DEFINITIONS.len() {
        let d = &DEFINITIONS[i];
        if same(d.metric.key.as_bytes(), key.as_bytes()) {
            return GlossaryEntry {
                name: d.metric.name,
                definition: d.definition,
                peers: d.peers,
            };
        }
        i += 1;
    }
    panic!("the glossary names a metric the registry lacks")
}

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

// ---------------------------------------------------------------------------
// Rendering
