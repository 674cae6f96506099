//! What a merged report says of its making (`environment.merged`): how many
//! shards, how their figures were merged, and how far apart they started.

/// How the merged figures were computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeMethod {
    /// From the union of the shards' requests (their raw files): exact.
    Raw,
    /// From the reports' histograms: percentiles within the stated precision.
    Histograms,
}

/// What a merged report says of its making (`environment.merged`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MergeInfo {
    /// Shards merged.
    pub shards: u32,
    /// How.
    pub method: MergeMethod,
    /// Histograms: how far a percentile can be from the union's exact one (a
    /// fraction of the value, or 1 µs, whichever is larger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile_precision: Option<f64>,
    /// The latest shard's clock zero minus the earliest's, ms (wall clocks).
    pub start_spread_ms: f64,
    /// Each shard's start (RFC 3339), by index.
    pub started_at: Vec<Option<String>>,
}
