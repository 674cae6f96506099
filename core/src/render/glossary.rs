//! The glossary printed at the end of every combined report: each metric's
//! definition and what other tools call it (the same as `docs/metrics.md`).

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

/// The metric definitions (the same as docs/metrics.md).
pub const GLOSSARY: &[GlossaryEntry] = &[
    GlossaryEntry {
        name: "TTFT",
        definition: "t_first_token - t_send: until the first event carrying generated text, reasoning or a tool-call delta arrives (a role-only or empty delta is not a token); in the browser, when that token came with the response head, when the browser's network stack had it (Resource Timing responseStart)",
        peers: "TTFT everywhere; vLLM's benchmark counts the role-only chunk",
    },
    GlossaryEntry {
        name: "Rendered TTFT",
        definition: "t_first_paint - t_send: until the first token is painted on screen (Element Timing renderTime, or the animation frame after the DOM update)",
        peers: "no peer measures it",
    },
    GlossaryEntry {
        name: "Render delay",
        definition: "t_first_paint - t_first_token",
        peers: "-",
    },
    GlossaryEntry {
        name: "Time to first answer",
        definition: "t_first_answer - t_send: a reasoning model's first answer token after its reasoning (TTFT counts the first token of any kind)",
        peers: "-",
    },
    GlossaryEntry {
        name: "Browser delivery",
        definition: "t_headers - t_response_start: from the browser's network stack having the response (Resource Timing responseStart) to the page's script having it",
        peers: "-",
    },
    GlossaryEntry {
        name: "Time to headers",
        definition: "t_headers - t_send",
        peers: "llm-load-test tt_ack",
    },
    GlossaryEntry {
        name: "TPOT",
        definition: "(t_last_token - t_first_token) / (output_tokens - 1), output tokens from the server's usage",
        peers: "vLLM/SGLang TPOT; GenAI-Perf, AIPerf, inference-benchmarker, GuideLLM call it ITL; GuideLLM's TPOT includes TTFT",
    },
    GlossaryEntry {
        name: "ITL",
        definition: "each gap between consecutive content events, over all requests (per token: the gap divided by the tokens in the later event)",
        peers: "vLLM ITL, AIPerf ICL",
    },
    GlossaryEntry {
        name: "Longest gap",
        definition: "a request's longest gap between content events (stream smoothness); gaps above the stall threshold (--stall-gap, 250 ms) are stalls; an SLO key: max_gap_ms:p95<=500",
        peers: "-",
    },
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
    GlossaryEntry {
        name: "E2E",
        definition: "t_done - t_send",
        peers: "E2EL, request latency",
    },
    GlossaryEntry {
        name: "Output throughput",
        definition: "output tokens of successful requests / measured window",
        peers: "output tok/s",
    },
    GlossaryEntry {
        name: "Goodput",
        definition: "requests per second that met every SLO",
        peers: "DistServe goodput",
    },
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

// ---------------------------------------------------------------------------
// Rendering
