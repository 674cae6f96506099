//! Every metric's definition for the glossary: the formula in words and what
//! other tools call it (the same as `docs/metrics.md`, the spec), one per
//! registry entry ([`super::metric`]), apart from the registry so that only the
//! renderers carry the text.

use super::metric::*;

/// A metric's definition: the formula (when each timestamp is taken is in
/// `docs/metrics.md`) and what other tools call it.
#[derive(Debug, Clone, Copy)]
pub struct Definition {
    /// The metric.
    pub metric: &'static Metric,
    /// Its formula in words.
    pub definition: &'static str,
    /// What other tools call it (`-`: nothing).
    pub peers: &'static str,
}

const fn def(metric: &'static Metric, definition: &'static str, peers: &'static str) -> Definition {
    Definition {
        metric,
        definition,
        peers,
    }
}

/// Every metric's definition, in [`METRICS`]' order (the glossary picks its
/// own order and subset: `render::glossary`).
pub const DEFINITIONS: &[Definition] = &[
    def(
        &TTFT_MS,
        "t_first_token - t_send: until the first event carrying generated text, reasoning or a tool-call delta arrives (a role-only or empty delta is not a token); in the browser, when that token came with the response head, when the browser's network stack had it (Resource Timing responseStart)",
        "TTFT everywhere; vLLM's benchmark counts the role-only chunk",
    ),
    def(
        &TTFT_CACHED_MS,
        "the TTFT of the requests whose server said at least half of their prompt came from its prefix cache (usage.prompt_tokens_details.cached_tokens, the Messages API's cache_read_input_tokens, llama.cpp's timings.cache_n)",
        "-",
    ),
    def(
        &TTFT_UNCACHED_MS,
        "the TTFT of the requests whose server said less than half of their prompt came from its prefix cache",
        "-",
    ),
    def(
        &TPOT_MS,
        "(t_last_token - t_first_token) / (output_tokens - 1), output tokens from the server's usage",
        "vLLM/SGLang TPOT; GenAI-Perf, AIPerf, inference-benchmarker, GuideLLM call it ITL; GuideLLM's TPOT includes TTFT",
    ),
    def(
        &ITL_MS,
        "each gap between consecutive content events, over all requests (per token: the gap divided by the tokens in the later event)",
        "vLLM ITL, AIPerf ICL",
    ),
    def(
        &ITL_PER_TOKEN_MS,
        "a gap between content events divided by the tokens of the later event",
        "-",
    ),
    def(&E2E_MS, "t_done - t_send", "E2EL, request latency"),
    def(
        &TIME_TO_HEADERS_MS,
        "t_headers - t_send",
        "llm-load-test tt_ack",
    ),
    def(&TIME_TO_FIRST_BYTE_MS, "t_first_byte - t_send", "-"),
    def(
        &DECODE_RATE_TOK_PER_S,
        "(output_tokens - 1) / (t_last_token - t_first_token), tokens/s",
        "output tokens/s per user",
    ),
    def(
        &OUTPUT_TOKENS,
        "usage.completion_tokens, else the content events counted (flagged output_tokens_estimated)",
        "-",
    ),
    def(
        &RENDERED_TTFT_MS,
        "t_first_paint - t_send: until the first token is painted on screen (Element Timing renderTime, or the animation frame after the DOM update)",
        "no peer measures it",
    ),
    def(&RENDER_DELAY_MS, "t_first_paint - t_first_token", "-"),
    def(
        &MAX_GAP_MS,
        "a request's longest gap between content events (stream smoothness); gaps above the stall threshold (--stall-gap, 250 ms) are stalls; an SLO key: max_gap_ms:p95<=500",
        "-",
    ),
    def(
        &TIME_TO_FIRST_ANSWER_MS,
        "t_first_answer - t_send: a reasoning model's first answer token after its reasoning (TTFT counts the first token of any kind)",
        "-",
    ),
    def(
        &TIME_TO_FIRST_TOOL_CALL_MS,
        "t_first_tool_call - t_send: the first event carrying a tool call's name or arguments (chat's delta.tool_calls, the Responses API's function_call item, the Messages API's tool_use block); only for requests whose answer called a tool",
        "-",
    ),
    def(
        &REASONING_TOKENS,
        "usage.completion_tokens_details.reasoning_tokens, else the reasoning events counted; only for requests that reasoned",
        "-",
    ),
    def(
        &BROWSER_SEND_MS,
        "t_request_start - t_send: from the page's fetch() to the browser's network stack sending the request (Resource Timing requestStart)",
        "-",
    ),
    def(
        &BROWSER_DELIVERY_MS,
        "t_headers - t_response_start: from the browser's network stack having the response (Resource Timing responseStart) to the page's script having it",
        "-",
    ),
    def(
        &CLIENT_LAG_MS,
        "rate mode: actual minus scheduled send time",
        "-",
    ),
    def(
        &SERVER_TPOT_MS,
        "the server's own time per output token (llama.cpp timings.predicted_per_token_ms)",
        "-",
    ),
    def(
        &SERVER_PROMPT_MS,
        "the server's own prompt processing time (llama.cpp timings.prompt_ms)",
        "-",
    ),
    def(
        &CONNECTION_SETUP_MS,
        "the wait for a connection's setup, over the requests that waited for one (new connections, and HTTP/2 streams sent during a setup)",
        "-",
    ),
    def(
        &OUTPUT_TOKENS_PER_S,
        "output tokens of successful requests / measured window",
        "output tok/s",
    ),
    def(
        &REQUESTS_PER_S,
        "successful requests / measured window",
        "request throughput",
    ),
    def(
        &GOODPUT_PER_S,
        "requests per second that met every SLO",
        "DistServe goodput",
    ),
    def(
        &GOODPUT_FRACTION,
        "the fraction of sent requests that met every SLO",
        "-",
    ),
    def(&ERROR_RATE, "failed requests / sent", "-"),
    def(
        &TIMEOUT_RATE,
        "requests that hit the client timeout / sent; never folded into errors",
        "-",
    ),
];

/// The definition of the metric with this key.
pub fn definition(key: &str) -> Option<&'static Definition> {
    DEFINITIONS.iter().find(|d| d.metric.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_has_one_definition_in_order() {
        let keys: Vec<&str> = DEFINITIONS.iter().map(|d| d.metric.key).collect();
        let metrics: Vec<&str> = METRICS.iter().map(|m| m.key).collect();
        assert_eq!(keys, metrics);
        assert!(DEFINITIONS.iter().all(|d| !d.definition.is_empty()));
    }
}
