//! Per-request metrics, exactly as `docs/metrics.md` defines them, derived from a
//! [`RequestRecord`] alone.
//!
//! | metric | formula |
//! |---|---|
//! | TTFT | `t_first_token - t_send` (`t_first_token`: see below) |
//! | time to headers | `t_headers - t_send` |
//! | time to first byte | `t_first_byte - t_send` |
//! | TPOT | `(t_last_token - t_first_token) / (output_tokens - 1)`, undefined below 2 tokens |
//! | ITL (per chunk) | each gap `t_event[i+1] - t_event[i]` between content events |
//! | ITL (per token) | a gap divided by the tokens in the later event |
//! | E2E | `t_done - t_send` |
//! | decode rate | `(output_tokens - 1) / (t_last_token - t_first_token)`, tokens/s |
//! | rendered TTFT | `t_first_paint - t_send` (browser) |
//! | render delay | `t_first_paint - t_first_token` (browser) |
//! | time to first answer | `t_first_answer - t_send`: the first answer token after a reasoning model's reasoning |
//! | browser send | `t_request_start - t_send` (browser, where exposed) |
//! | browser delivery | `t_headers - t_response_start` (browser, where exposed) |
//! | stall | an ITL gap longer than the stall threshold |
//!
//! `t_send` is the scheduled send time in open-loop rate mode (so a late send is
//! charged to the request), otherwise the actual send time. `t_first_token` is
//! the read that completed the first content event, except in the browser when
//! that event came in the response's first bytes and the browser exposes
//! Resource Timing's `responseStart`: then it is `responseStart`, when the
//! network stack had it ([`RequestRecord::t_first_token_arrival_ms`]). TPOT and
//! ITL use the reads throughout (differences of like stamps).

use serde::{Deserialize, Serialize};

use crate::record::RequestRecord;

/// Default stall threshold, ms.
pub const DEFAULT_STALL_THRESHOLD_MS: f64 = 250.0;

/// Options for deriving metrics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MetricOptions {
    /// An ITL gap longer than this is a stall, ms.
    pub stall_threshold_ms: f64,
    /// The page showed no reasoning (`reasoning_display: hidden`): its first
    /// paint is of the first answer token, so the render delay counts from that
    /// token's arrival.
    pub paint_follows_answer: bool,
}

impl Default for MetricOptions {
    fn default() -> Self {
        Self {
            stall_threshold_ms: DEFAULT_STALL_THRESHOLD_MS,
            paint_follows_answer: false,
        }
    }
}

/// One inter-token gap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gap {
    /// The gap between two content events, ms.
    pub ms: f64,
    /// The gap divided by the (estimated) tokens in the later event, ms.
    pub per_token_ms: f64,
    /// 1-based position in the output of the first token of the later event.
    pub position: u64,
}

/// Metrics of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestMetrics {
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Time to response headers, ms.
    pub time_to_headers_ms: Option<f64>,
    /// Time to first body byte, ms.
    pub time_to_first_byte_ms: Option<f64>,
    /// Time per output token after the first, ms.
    pub tpot_ms: Option<f64>,
    /// End-to-end latency, ms.
    pub e2e_ms: Option<f64>,
    /// Inter-token gaps between content events.
    pub gaps: Vec<Gap>,
    /// Output tokens (usage, else counted content events).
    pub output_tokens: u64,
    /// `output_tokens` was counted from events because the server sent no usage.
    pub tokens_estimated: bool,
    /// Tokens per second after the first token.
    pub decode_rate_tok_per_s: Option<f64>,
    /// Gaps longer than the stall threshold.
    pub stalls: u32,
    /// The longest gap, ms.
    pub longest_gap_ms: Option<f64>,
    /// Rendered (user-perceived) TTFT, ms (browser).
    pub rendered_ttft_ms: Option<f64>,
    /// Render delay, ms (browser).
    pub render_delay_ms: Option<f64>,
    /// Client lag (rate mode): actual minus scheduled send, ms.
    pub client_lag_ms: Option<f64>,
    /// The browser's own send delay (the page's send to its network stack
    /// beginning the request), ms.
    pub browser_send_ms: Option<f64>,
    /// The browser's own delivery delay (network stack to the page's script), ms.
    pub browser_delivery_ms: Option<f64>,
    /// TTFT was taken from the browser's network stack (`responseStart`).
    pub ttft_at_network_stack: bool,
    /// A reasoning model's time to its first answer token (after the reasoning),
    /// ms; only for a request that reasoned.
    pub time_to_first_answer_ms: Option<f64>,
    /// Time to the first piece of a tool call (its name or arguments), ms;
    /// only for a request whose answer called a tool.
    pub time_to_first_tool_call_ms: Option<f64>,
    /// Its reasoning tokens (`usage.completion_tokens_details.reasoning_tokens`,
    /// else the reasoning events counted); only for a request that reasoned.
    pub reasoning_tokens: Option<u64>,
    /// Whether the server said at least half of its prompt came from its prefix
    /// cache (`None`: the server did not say).
    pub prompt_cached: Option<bool>,
}

impl RequestMetrics {
    /// Derive every metric from a record.
    pub fn from_record(r: &RequestRecord, opts: &MetricOptions) -> Self {
        let t0 = r.t_reference_ms();
        let first = r.t_first_token_ms();
        let arrival = r.t_first_token_arrival_ms();
        let last = r.t_last_token_ms();
        let events = r.token_events_ms.len() as u64;
        let (output_tokens, tokens_estimated) = match r.usage.and_then(|u| u.completion_tokens) {
            Some(n) => (n, false),
            None => (events, true),
        };
        let tpot_ms = match (first, last) {
            (Some(f), Some(l)) if output_tokens >= 2 => Some((l - f) / (output_tokens - 1) as f64),
            _ => None,
        };
        let decode_rate_tok_per_s = match (first, last) {
            (Some(f), Some(l)) if output_tokens >= 2 && l > f => {
                Some((output_tokens - 1) as f64 / ((l - f) / 1000.0))
            }
            _ => None,
        };
        // Tokens per event: counted, where the server said in every event how
        // many it carried; else, when it reports more tokens than events, spread
        // evenly (the best estimate without a count).
        let counted = (!r.event_tokens.is_empty() && r.event_tokens.len() as u64 == events)
            .then_some(&r.event_tokens);
        let tokens_per_event = if events > 0 && output_tokens > events {
            output_tokens as f64 / events as f64
        } else {
            1.0
        };
        let mut position = counted.map_or(0, |c| u64::from(c[0]));
        let mut gaps = Vec::with_capacity(r.token_events_ms.len().saturating_sub(1));
        let mut stalls = 0;
        let mut longest: Option<f64> = None;
        for (i, w) in r.token_events_ms.windows(2).enumerate() {
            let ms = w[1] - w[0];
            if ms > opts.stall_threshold_ms {
                stalls += 1;
            }
            longest = Some(longest.map_or(ms, |l: f64| l.max(ms)));
            gaps.push(match counted {
                Some(c) => {
                    let n = c[i + 1].max(1);
                    let gap = Gap {
                        ms,
                        per_token_ms: ms / f64::from(n),
                        position: position + 1,
                    };
                    position += u64::from(n);
                    gap
                }
                None => Gap {
                    ms,
                    per_token_ms: ms / tokens_per_event,
                    position: ((i + 1) as f64 * tokens_per_event).floor() as u64 + 1,
                },
            });
        }
        // The token the first paint showed: the first of any kind, or the first
        // answer token when the page hid the reasoning.
        let painted = if opts.paint_follows_answer {
            r.t_first_answer_ms.or(arrival)
        } else {
            arrival
        };
        let prompt_cached = match (
            r.cached_prompt_tokens(),
            r.usage.and_then(|u| u.prompt_tokens),
        ) {
            (Some(cached), Some(prompt)) if prompt > 0 => Some(2 * cached >= prompt),
            _ => None,
        };
        Self {
            prompt_cached,
            ttft_ms: arrival.map(|f| f - t0),
            time_to_headers_ms: r.t_headers_ms.map(|t| t - t0),
            time_to_first_byte_ms: r.t_first_byte_ms.map(|t| t - t0),
            tpot_ms,
            e2e_ms: r.t_done_ms.map(|t| t - t0),
            gaps,
            output_tokens,
            tokens_estimated,
            decode_rate_tok_per_s,
            stalls,
            longest_gap_ms: longest,
            rendered_ttft_ms: r.t_first_paint_ms.map(|p| p - t0),
            render_delay_ms: match (r.t_first_paint_ms, painted) {
                (Some(p), Some(f)) => Some(p - f),
                _ => None,
            },
            client_lag_ms: r.client_lag_ms(),
            browser_send_ms: r.browser_send_ms(),
            browser_delivery_ms: r.browser_delivery_ms(),
            ttft_at_network_stack: arrival.is_some() && arrival != first,
            reasoning_tokens: r
                .usage
                .and_then(|u| u.reasoning_tokens())
                .filter(|n| *n > 0)
                .or((r.reasoning_events > 0).then_some(u64::from(r.reasoning_events))),
            time_to_first_answer_ms: (r.reasoning_events > 0
                || r.usage
                    .and_then(|u| u.reasoning_tokens())
                    .is_some_and(|n| n > 0))
            .then_some(r.t_first_answer_ms.map(|t| t - t0))
            .flatten(),
            time_to_first_tool_call_ms: r.t_first_tool_call_ms.map(|t| t - t0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::Usage;
    use crate::record::PaintMethod;

    /// Sent at 1000 ms, headers at 1010, first byte at 1012, done at 1500, with
    /// content events at `events` and `usage` of that many tokens (or none).
    fn record(events: &[f64], usage: Option<u64>) -> RequestRecord {
        RequestRecord {
            t_headers_ms: Some(1010.0),
            t_first_byte_ms: Some(1012.0),
            t_done_ms: Some(1500.0),
            usage: usage.map(|n| Usage {
                prompt_tokens: Some(5),
                completion_tokens: Some(n),
                completion_tokens_details: None,
                prompt_tokens_details: None,
            }),
            output_chars: 0,
            finish_reason: None,
            ..crate::testing::record_with_events(1000.0, events.to_vec())
        }
    }

    #[test]
    fn exact_values() {
        let r = record(&[1100.0, 1120.0, 1150.0, 1400.0], Some(4));
        let m = RequestMetrics::from_record(&r, &MetricOptions::default());
        assert_eq!(m.ttft_ms, Some(100.0));
        assert_eq!(m.time_to_headers_ms, Some(10.0));
        assert_eq!(m.time_to_first_byte_ms, Some(12.0));
        assert_eq!(m.tpot_ms, Some(100.0)); // (1400-1100)/3
        assert_eq!(m.e2e_ms, Some(500.0));
        assert_eq!(
            m.gaps.iter().map(|g| g.ms).collect::<Vec<_>>(),
            [20.0, 30.0, 250.0]
        );
        assert_eq!(m.stalls, 0, "a gap equal to the threshold is not a stall");
        assert_eq!(m.longest_gap_ms, Some(250.0));
        assert_eq!(m.decode_rate_tok_per_s, Some(10.0));
        assert!(!m.tokens_estimated);
        assert_eq!(
            m.gaps.iter().map(|g| g.position).collect::<Vec<_>>(),
            [2, 3, 4]
        );
    }

    #[test]
    fn counted_tokens_are_flagged_estimated() {
        let r = record(&[1100.0, 1120.0], None);
        let m = RequestMetrics::from_record(&r, &MetricOptions::default());
        assert_eq!(m.output_tokens, 2);
        assert!(m.tokens_estimated);
        assert_eq!(m.tpot_ms, Some(20.0));
    }

    #[test]
    fn multi_token_events_spread_the_gap() {
        // 3 events carrying 6 tokens (2 each).
        let r = record(&[1100.0, 1140.0, 1180.0], Some(6));
        let m = RequestMetrics::from_record(&r, &MetricOptions::default());
        assert_eq!(m.gaps[0].ms, 40.0);
        assert_eq!(m.gaps[0].per_token_ms, 20.0);
        assert_eq!(m.tpot_ms, Some(80.0 / 5.0));
        assert_eq!(
            m.gaps.iter().map(|g| g.position).collect::<Vec<_>>(),
            [3, 5]
        );
    }

    #[test]
    fn undefined_below_two_tokens() {
        let r = record(&[1100.0], Some(1));
        let m = RequestMetrics::from_record(&r, &MetricOptions::default());
        assert_eq!(m.tpot_ms, None);
        assert_eq!(m.decode_rate_tok_per_s, None);
        assert!(m.gaps.is_empty());
        let r = record(&[], Some(0));
        let m = RequestMetrics::from_record(&r, &MetricOptions::default());
        assert_eq!(m.ttft_ms, None);
    }

    #[test]
    fn stalls_and_paint() {
        let mut r = record(&[1100.0, 1400.0, 1410.0, 1700.0], Some(4));
        r.t_first_paint_ms = Some(1116.0);
        r.paint_method = Some(PaintMethod::ElementTiming);
        let m = RequestMetrics::from_record(&r, &MetricOptions::default());
        assert_eq!(m.stalls, 2);
        assert_eq!(m.longest_gap_ms, Some(300.0));
        assert_eq!(m.rendered_ttft_ms, Some(116.0));
        assert_eq!(m.render_delay_ms, Some(16.0));
    }

    #[test]
    fn with_the_reasoning_hidden_the_render_delay_counts_from_the_first_answer() {
        // Reasoning from 1100, the answer from 1400, painted at 1410.
        let mut r = record(&[1100.0, 1200.0, 1400.0, 1450.0], Some(4));
        r.t_first_answer_ms = Some(1400.0);
        r.t_first_paint_ms = Some(1410.0);
        let hidden = MetricOptions {
            paint_follows_answer: true,
            ..MetricOptions::default()
        };
        let m = RequestMetrics::from_record(&r, &hidden);
        assert_eq!(m.ttft_ms, Some(100.0), "TTFT: the first token of any kind");
        assert_eq!(m.rendered_ttft_ms, Some(410.0));
        assert_eq!(m.render_delay_ms, Some(10.0));
        let shown = RequestMetrics::from_record(&r, &MetricOptions::default());
        assert_eq!(shown.render_delay_ms, Some(310.0));
    }

    #[test]
    fn a_first_token_in_the_first_bytes_is_timed_at_the_network_stack() {
        // Head read at 1010 (the network stack had it at 1007.5); the first token's
        // read resolved 0.5 ms after the head: it came in the same bytes.
        let mut r = record(&[1010.5, 1030.0], Some(2));
        r.t_response_start_ms = Some(1007.5);
        r.t_request_start_ms = Some(1001.5);
        r.t_first_paint_ms = Some(1020.0);
        assert!(r.first_token_with_head());
        let m = RequestMetrics::from_record(&r, &MetricOptions::default());
        assert_eq!(m.ttft_ms, Some(7.5));
        assert!(m.ttft_at_network_stack);
        assert_eq!(m.browser_delivery_ms, Some(2.5));
        assert_eq!(m.browser_send_ms, Some(1.5));
        assert_eq!(m.render_delay_ms, Some(12.5), "paint minus the arrival");
        assert_eq!(m.rendered_ttft_ms, Some(20.0));
        assert_eq!(m.tpot_ms, Some(19.5), "TPOT stays on the reads");

        // A token 1.5 ms after the head came in later bytes: its read is the time.
        let mut later = record(&[1011.5], Some(1));
        later.t_response_start_ms = Some(1007.5);
        assert!(!later.first_token_with_head());
        let m = RequestMetrics::from_record(&later, &MetricOptions::default());
        assert_eq!(m.ttft_ms, Some(11.5));
        assert!(!m.ttft_at_network_stack);
        assert_eq!(m.browser_delivery_ms, Some(2.5), "the head's delivery");

        // No responseStart (hidden cross-origin): the read, and no delivery figure.
        let hidden = record(&[1010.5], Some(1));
        let m = RequestMetrics::from_record(&hidden, &MetricOptions::default());
        assert_eq!(m.ttft_ms, Some(10.5));
        assert_eq!(m.browser_delivery_ms, None);
    }

    #[test]
    fn rate_mode_measures_from_the_schedule() {
        let mut r = record(&[1100.0], Some(1));
        r.t_scheduled_ms = Some(990.0);
        let m = RequestMetrics::from_record(&r, &MetricOptions::default());
        assert_eq!(m.ttft_ms, Some(110.0));
        assert_eq!(m.client_lag_ms, Some(10.0));
    }
}
