//! Typed run warnings: what a run saw that affects how its figures read, each with
//! the numbers and a hint. The kinds are an enum ([`WarningKind`]); the JSON carries
//! their snake_case names.

use serde::{Deserialize, Serialize};

/// The kinds of run warning, by their stable names in the JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// The client, not the server, limited the figures (late sends, a late event loop).
    ClientBound,
    /// A level where no request succeeded.
    NoSuccess,
    /// Some percentiles come from a histogram (the sample cap was passed).
    HistogramSummaries,
    /// The pre-flight request failed; the run went ahead.
    PreflightFailed,
    /// The raw file's last line was cut off (the run was killed).
    RawTruncated,
    /// The page's built-in simulator answered, not a server.
    SimulatedEndpoint,
    /// HTTP/1.1 with more than 6 streams: the browser queued requests itself.
    Http1ConnectionLimit,
    /// The browser did not say which protocol carried the requests.
    ProtocolUnknown,
    /// Successful requests without a first-paint time.
    PaintUnmeasured,
    /// The page was hidden during the run.
    PageHidden,
    /// The page's own measured costs (informational).
    PageOverhead,
    /// Some scrapes of the server's or the GPU exporter's `/metrics` failed.
    ServerMetrics,
    /// No `/metrics` at the endpoint's origin: the server view is off (informational).
    ServerMetricsOff,
    /// The engine's token counters disagree with the `usage` the client received.
    TokenMismatch,
    /// Requests whose `usage.prompt_tokens` was not their counted prompt plus the
    /// template's overhead: the server counts differently than the tokenizer used.
    PromptTokensDiffer,
    /// The browser hid when its network stack had the responses (Resource
    /// Timing's `responseStart`): its delivery delay is not measured (informational).
    DeliveryUnmeasured,
    /// The report merges shards' reports: how, and the shards' start spread
    /// (informational).
    Merged,
    /// Pushes to the Prometheus remote-write endpoint failed (`bench
    /// --prometheus-remote-write`); the run went on.
    RemoteWrite,
    /// TLS certificates were not verified (`bench --insecure`): anyone on the
    /// path could have answered.
    TlsNotVerified,
    /// Real users' turns were sampled: the figures are weighted estimates and
    /// there is no raw file (no intervals in `compare`).
    RumSampled,
    /// A closed-loop level whose client never had its concurrency in flight:
    /// the sweep's conclusions leave it out.
    UnderLoaded,
    /// Levels whose requests were raised so that each round has every worker
    /// busy (`--requests` fewer than concurrency x rounds).
    RequestsRaised,
    /// An SLO check a level's data cannot carry (too few requests for its
    /// percentile, the metric absent).
    SloNotEvaluable,
    /// A kind this build does not know (written by a newer tokenscope).
    #[serde(other)]
    Unknown,
}

impl WarningKind {
    /// The stable name, as in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            WarningKind::ClientBound => "client_bound",
            WarningKind::NoSuccess => "no_success",
            WarningKind::HistogramSummaries => "histogram_summaries",
            WarningKind::PreflightFailed => "preflight_failed",
            WarningKind::RawTruncated => "raw_truncated",
            WarningKind::SimulatedEndpoint => "simulated_endpoint",
            WarningKind::Http1ConnectionLimit => "http1_connection_limit",
            WarningKind::ProtocolUnknown => "protocol_unknown",
            WarningKind::PaintUnmeasured => "paint_unmeasured",
            WarningKind::PageHidden => "page_hidden",
            WarningKind::PageOverhead => "page_overhead",
            WarningKind::ServerMetrics => "server_metrics",
            WarningKind::ServerMetricsOff => "server_metrics_off",
            WarningKind::TokenMismatch => "token_mismatch",
            WarningKind::DeliveryUnmeasured => "delivery_unmeasured",
            WarningKind::PromptTokensDiffer => "prompt_tokens_differ",
            WarningKind::Merged => "merged",
            WarningKind::RemoteWrite => "remote_write",
            WarningKind::TlsNotVerified => "tls_not_verified",
            WarningKind::RumSampled => "rum_sampled",
            WarningKind::UnderLoaded => "under_loaded",
            WarningKind::RequestsRaised => "requests_raised",
            WarningKind::SloNotEvaluable => "slo_not_evaluable",
            WarningKind::Unknown => "unknown",
        }
    }

    /// Informational (the page shows it quietly): not a problem with the figures.
    pub fn is_info(self) -> bool {
        matches!(
            self,
            WarningKind::PageOverhead
                | WarningKind::SimulatedEndpoint
                | WarningKind::ServerMetricsOff
                | WarningKind::DeliveryUnmeasured
                | WarningKind::Merged
                | WarningKind::RumSampled
                | WarningKind::RequestsRaised
        )
    }
}

impl std::fmt::Display for WarningKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ReportWarning {
    /// A warning of `kind` saying `message`.
    pub fn new(kind: WarningKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// A typed warning with a hint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportWarning {
    /// What kind of problem (`client_bound`, `http1_connection_limit`, ...).
    pub kind: WarningKind,
    /// What was seen, with numbers.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_serialize_as_their_names_and_unknown_ones_still_read() {
        for k in [
            WarningKind::ClientBound,
            WarningKind::NoSuccess,
            WarningKind::HistogramSummaries,
            WarningKind::PreflightFailed,
            WarningKind::RawTruncated,
            WarningKind::SimulatedEndpoint,
            WarningKind::Http1ConnectionLimit,
            WarningKind::ProtocolUnknown,
            WarningKind::PaintUnmeasured,
            WarningKind::PageHidden,
            WarningKind::PageOverhead,
            WarningKind::ServerMetrics,
            WarningKind::ServerMetricsOff,
            WarningKind::TokenMismatch,
            WarningKind::RumSampled,
            WarningKind::UnderLoaded,
            WarningKind::RequestsRaised,
            WarningKind::SloNotEvaluable,
        ] {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(serde_json::from_str::<WarningKind>(&json).unwrap(), k);
        }
        let w: ReportWarning =
            serde_json::from_str(r#"{"kind": "from_the_future", "message": "m"}"#).unwrap();
        assert_eq!(w.kind, WarningKind::Unknown);
    }
}
