//! The combined report: everything measured (client reports, native and/or
//! browser; a GPU kernels report; the model being served) analysed into a verdict
//! in sentences ([`crate::analyze::verdict`]), a diagnosis whose every finding
//! quotes its evidence ([`crate::analyze::diagnosis`]), the native vs browser
//! difference per stage, and the server's TPOT against the GPU's bandwidth floor.
//! Rendered as Markdown or one self-contained HTML file by
//! `tokenscope_render::combined`; the web page shows the same analysis.

use serde::{Deserialize, Serialize};

use crate::report::ClientReport;
use tokenscope_hw::floor::{ModelShape, Quant};
use tokenscope_kernel_report::{FloorRow, KernelReport};

/// The model being served, for the floor comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelChoice {
    /// Its shape (a preset or a custom config).
    pub shape: ModelShape,
    /// Weight format served.
    pub quant: Quant,
    /// Context length to evaluate the floor at (KV cache read per token).
    pub context: u64,
    /// The GPU's memory, bytes: with it, the KV-cache plan (f16 KV, 0.9 of it).
    pub gpu_memory_bytes: Option<u64>,
}

/// Everything a report is made from.
#[derive(Debug, Clone, Default)]
pub struct ReportInput {
    /// Client reports, in the order given.
    pub clients: Vec<ClientReport>,
    /// The GPU kernel harness's report.
    pub kernels: Option<KernelReport>,
    /// The model being served.
    pub model: Option<ModelChoice>,
}

/// The diagnosis rules, by their stable ids (the JSON and the HTML's `data-rule`
/// carry these snake_case names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleId {
    /// TTFT grows much faster than TPOT with load: prefill and queueing.
    TtftPrefillQueueing,
    /// TPOT/ITL grows along the output.
    TpotGrowsWithLength,
    /// p99 far above p50.
    TailQueueing,
    /// Levels past the knee.
    PastTheKnee,
    /// Failures grow with load.
    FailuresGrowWithLoad,
    /// Rounds of a level disagree.
    RoundsDisagree,
    /// The browser's 6-connection HTTP/1.1 limit.
    Http1ConnectionLimit,
    /// The client was the bottleneck.
    ClientBound,
    /// Latency drifts over a long run.
    Drift,
    /// Client TPOT far from the server's own.
    ServerTimingGap,
    /// TTFT grows with the prompt across runs.
    TtftGrowsWithInput,
    /// The KV cache near full with preemptions or a queue.
    KvCacheFull,
    /// The GPU mostly idle while latency is high.
    GpuIdleWhileSlow,
    /// The server's queue grows level over level.
    QueueGrows,
    /// The client's TTFT far above the server's own.
    ClientFarAboveServer,
    /// A low prefix-cache hit rate on prompts the run repeats.
    PrefixCacheLow,
}

impl RuleId {
    /// Every rule, in the order the diagnosis runs them.
    pub const ALL: [RuleId; 16] = [
        RuleId::TtftPrefillQueueing,
        RuleId::TpotGrowsWithLength,
        RuleId::TailQueueing,
        RuleId::PastTheKnee,
        RuleId::FailuresGrowWithLoad,
        RuleId::RoundsDisagree,
        RuleId::Http1ConnectionLimit,
        RuleId::ClientBound,
        RuleId::Drift,
        RuleId::ServerTimingGap,
        RuleId::TtftGrowsWithInput,
        RuleId::KvCacheFull,
        RuleId::GpuIdleWhileSlow,
        RuleId::QueueGrows,
        RuleId::ClientFarAboveServer,
        RuleId::PrefixCacheLow,
    ];

    /// The stable id (`tail_queueing`, ...), as in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleId::TtftPrefillQueueing => "ttft_prefill_queueing",
            RuleId::TpotGrowsWithLength => "tpot_grows_with_length",
            RuleId::TailQueueing => "tail_queueing",
            RuleId::PastTheKnee => "past_the_knee",
            RuleId::FailuresGrowWithLoad => "failures_grow_with_load",
            RuleId::RoundsDisagree => "rounds_disagree",
            RuleId::Http1ConnectionLimit => "http1_connection_limit",
            RuleId::ClientBound => "client_bound",
            RuleId::Drift => "drift",
            RuleId::ServerTimingGap => "server_timing_gap",
            RuleId::TtftGrowsWithInput => "ttft_grows_with_input",
            RuleId::KvCacheFull => "kv_cache_full",
            RuleId::GpuIdleWhileSlow => "gpu_idle_while_slow",
            RuleId::QueueGrows => "queue_grows",
            RuleId::ClientFarAboveServer => "client_far_above_server",
            RuleId::PrefixCacheLow => "prefix_cache_low",
        }
    }
}

impl std::fmt::Display for RuleId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A diagnosis finding: shown only when its evidence is in the data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The rule that fired.
    pub rule: RuleId,
    /// What it means, in one line.
    pub title: String,
    /// The numbers that triggered it.
    pub evidence: Vec<String>,
    /// What to check or do.
    pub advice: String,
}

/// TPOT against the GPU floor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloorComparison {
    /// The floor row used.
    pub floor: FloorRow,
    /// GPU (adapter) name.
    pub gpu: String,
    /// Measured TPOT p50 at the lowest load, ms.
    pub tpot_p50_ms: f64,
    /// Which level it came from.
    pub level: String,
    /// `tpot_p50_ms / tpot_floor_ms`.
    pub ratio: f64,
    /// Where the floor came from (`kernels report`, `computed from measured bandwidth`).
    pub source: String,
}

/// One stage of the native vs browser comparison (p50s at one load level).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageDelta {
    /// Stage name.
    pub stage: String,
    /// Native p50, ms.
    pub native_ms: Option<f64>,
    /// Browser p50, ms.
    pub browser_ms: Option<f64>,
    /// Browser minus native, ms: the browser's own cost at this stage.
    pub delta_ms: Option<f64>,
}

/// The native vs browser comparison at one load level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The level compared (`c=1`).
    pub level: String,
    /// Stages.
    pub stages: Vec<StageDelta>,
    /// Browser protocol, when known.
    pub browser_protocol: Option<String>,
}

/// The analysed report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Combined {
    /// The verdict: sentences with numbers, most important first.
    pub verdict: Vec<String>,
    /// The diagnosis.
    pub findings: Vec<Finding>,
    /// Native vs browser, when both are given.
    pub comparison: Option<Comparison>,
    /// TPOT vs the floor, when a kernels report and a model are given.
    pub floor: Option<FloorComparison>,
    /// Notes on the inputs (missing pieces, warnings carried from the runs).
    pub notes: Vec<String>,
    /// The KV-cache plan of the model on the GPU, when its memory was given.
    pub kv_plan: Option<tokenscope_hw::floor::KvPlan>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_ids_serialize_as_their_names() {
        for r in RuleId::ALL {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.as_str()));
            assert_eq!(serde_json::from_str::<RuleId>(&json).unwrap(), r);
        }
    }
}
