//! Histogram bucket edges other projects fixed, written once: vLLM's (the
//! simulated server's `/metrics` uses them, `vllm/v1/metrics/loggers.py`) and
//! OpenTelemetry GenAI's advised ones (`collect`'s real-user histograms). GenAI's
//! are the first edges of vLLM's, so each is a prefix of one table, not a copy.
//! Every edge is an upper bound (`le`), seconds, ascending.

/// vLLM's time-to-first-token edges: GenAI's [`GENAI_TTFT_BOUNDS_S`], then
/// vLLM's longer tail.
pub const VLLM_TTFT_BOUNDS_S: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];

/// vLLM's inter-token latency edges: GenAI's [`GENAI_TPOT_BOUNDS_S`], then
/// vLLM's longer tail.
pub const VLLM_ITL_BOUNDS_S: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];

/// vLLM's edges for a request's phases (queue, prefill, decode) and its
/// end-to-end latency.
pub const VLLM_REQUEST_BOUNDS_S: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// OpenTelemetry GenAI's advised edges for `gen_ai.server.time_to_first_token`:
/// vLLM's up to 10 s.
pub const GENAI_TTFT_BOUNDS_S: &[f64] = VLLM_TTFT_BOUNDS_S.split_at(16).0;

/// OpenTelemetry GenAI's advised edges for
/// `gen_ai.server.time_per_output_token`: vLLM's inter-token edges up to 2.5 s.
pub const GENAI_TPOT_BOUNDS_S: &[f64] = VLLM_ITL_BOUNDS_S.split_at(13).0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn genai_edges_end_where_the_advised_ones_do_and_every_table_ascends() {
        // OpenTelemetry semantic conventions, gen-ai-metrics.md: 16 edges up to
        // 10 s for TTFT, 13 up to 2.5 s per output token.
        assert_eq!(
            (GENAI_TTFT_BOUNDS_S.len(), GENAI_TTFT_BOUNDS_S.last()),
            (16, Some(&10.0))
        );
        assert_eq!(
            (GENAI_TPOT_BOUNDS_S.len(), GENAI_TPOT_BOUNDS_S.last()),
            (13, Some(&2.5))
        );
        for t in [
            VLLM_TTFT_BOUNDS_S,
            VLLM_ITL_BOUNDS_S,
            VLLM_REQUEST_BOUNDS_S,
            GENAI_TTFT_BOUNDS_S,
            GENAI_TPOT_BOUNDS_S,
        ] {
            assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
        }
    }
}
