//! The whole client report (`tokenscope.client/1`): the run's configuration and
//! environment, its levels, the sweep's results (the knee, the SLO capacity) and
//! its warnings; reading it back, refusing unknown schemas.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::level::LevelReport;
use super::load::Source;
use super::run::{Environment, RunConfig};
use super::warning::ReportWarning;
use crate::analyze::server::view::ServerRun;

/// The schema name and version this crate writes.
pub const CLIENT_SCHEMA: &str = "tokenscope.client/1";

/// The knee of the throughput-latency curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Knee {
    /// Concurrency of the knee level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Rate of the knee level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// Index into `levels`.
    pub level_index: usize,
    /// Latency metric used (`e2e_ms.p95`).
    pub metric: String,
    /// `ln(latency ratio) / ln(throughput ratio)` on the segment after the knee;
    /// `None` when throughput did not grow at all there (infinite elasticity).
    pub elasticity_after: Option<f64>,
    /// How it was found.
    pub method: String,
}

/// A level of the sweep, by its index and its load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadPoint {
    /// Index into `levels`.
    pub level_index: usize,
    /// Its concurrency (closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Its rate, req/s (open loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
}

/// How far an SLO capacity is pinned down by the levels tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacityBound {
    /// A higher level tested failed (`failed_at`): the capacity lies between.
    Bracketed,
    /// No higher level tested failed: the capacity is at least this level's.
    Floor,
}

/// The most load that still meets every SLO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloCapacity {
    /// Concurrency of the highest-throughput level meeting every SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Rate of that level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// Index into `levels`.
    pub level_index: usize,
    /// Output throughput there.
    pub output_tokens_per_s: f64,
    /// Request throughput there.
    pub requests_per_s: f64,
    /// The SLOs checked.
    pub slos: Vec<String>,
    /// Bracketed (a higher level failed) or only a floor (none above failed);
    /// absent in reports written before it was said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<CapacityBound>,
    /// The lowest level above it that failed the SLOs (bracketed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<LoadPoint>,
}

/// Results across the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SweepReport {
    /// The knee, or null when latency never grew faster than throughput.
    pub knee: Option<Knee>,
    /// SLO capacity, or null (no SLOs, or no level met them).
    pub slo_capacity: Option<SloCapacity>,
    /// No level met the SLOs: the capacity is below this one, the lowest level
    /// whose checks were evaluated (a ceiling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_below: Option<LoadPoint>,
    /// No knee: the highest level it was looked for up to (absent with a knee,
    /// or with fewer than two levels to compare).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee_not_reached_up_to: Option<LoadPoint>,
    /// Levels left out of the knee and the SLO capacity: under-loaded ones
    /// (their client never had their concurrency in flight).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<usize>,
}

/// The whole client report. `Default`: an empty one (what a partial reading,
/// [`super::shown`], fills in around what it read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ClientReport {
    /// `tokenscope.client/1`.
    pub schema: String,
    /// Who measured.
    pub source: Source,
    /// Everything needed to rerun.
    pub config: RunConfig,
    /// Where it ran.
    pub environment: Environment,
    /// One entry per load level, in the order run.
    pub levels: Vec<LevelReport>,
    /// Knee and SLO capacity.
    pub sweep: SweepReport,
    /// Warnings (client-bound, connection limits, ...).
    #[serde(default)]
    pub warnings: Vec<ReportWarning>,
    /// The run was stopped early (Ctrl-C); the levels hold what ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// What scraping the server's and the GPU's `/metrics` gave, over the run
    /// (as `LevelReport::server`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerRun>,
}

/// A report that could not be read.
#[derive(Debug, Error)]
pub enum ReportError {
    /// Not JSON, or not the shape of a report.
    #[error("not a tokenscope report: {0}")]
    Json(#[from] serde_json::Error),
    /// A different document, or a major version this build does not know.
    #[error("unsupported schema {found:?}: this tokenscope reads {expected:?} (major version 1)")]
    Schema {
        /// The schema field found.
        found: String,
        /// What is supported.
        expected: &'static str,
    },
}

/// Check a document's `schema` field: same name, a major version we know.
pub fn check_schema(found: &str, expected: &'static str) -> Result<(), ReportError> {
    let (name, version) = expected.split_once('/').expect("schema has a version");
    let ok = found
        .split_once('/')
        .is_some_and(|(n, v)| n == name && v.split('.').next() == version.split('.').next());
    if ok {
        Ok(())
    } else {
        Err(ReportError::Schema {
            found: found.to_owned(),
            expected,
        })
    }
}

/// Check a client report's `schema` before reading the rest: refuse what is not
/// JSON, another document, or a major version this build does not know.
pub(crate) fn check_client_schema(text: &str) -> Result<(), ReportError> {
    /// The schema alone (every other field skipped unread).
    #[derive(Deserialize)]
    struct Schema {
        #[serde(default)]
        schema: Option<String>,
    }
    // Read as the report itself, not through `serde_json::Value`: one set of
    // deserializing code in the page's wasm (the Value path was 2 KB
    // gzipped more there).
    let schema = match serde_json::from_str::<Schema>(text) {
        Ok(head) => head.schema,
        Err(e) if e.is_syntax() || e.is_eof() => return Err(e.into()),
        // JSON, but not an object with a text `schema`.
        Err(_) => None,
    };
    check_schema(schema.as_deref().unwrap_or("(none)"), CLIENT_SCHEMA)
}

impl ClientReport {
    /// The run's server side, if it was scraped.
    pub fn server_run(&self) -> Option<&ServerRun> {
        self.server.as_ref()
    }

    /// The lowest-load level with successes (where batch-1 decode is measured);
    /// for real users' levels (groups, not loads), the one of all turns.
    pub fn lowest_level(&self) -> Option<&LevelReport> {
        if let Some(all) = self.levels.iter().find(|l| l.group.is_some()) {
            return (all.ok > 0).then_some(all);
        }
        self.levels
            .iter()
            .filter(|l| l.ok > 0)
            .min_by(|a, b| a.load().value().total_cmp(&b.load().value()))
    }

    /// Read a report, refusing unknown schemas or major versions.
    pub fn from_json(text: &str) -> Result<Self, ReportError> {
        check_client_schema(text)?;
        Ok(serde_json::from_str(text)?)
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_check() {
        assert!(check_schema("tokenscope.client/1", CLIENT_SCHEMA).is_ok());
        assert!(check_schema("tokenscope.client/1.2", CLIENT_SCHEMA).is_ok());
        let e = check_schema("tokenscope.client/2", CLIENT_SCHEMA).unwrap_err();
        assert!(e.to_string().contains("tokenscope.client/2"));
        assert!(check_schema("tokenscope.kernels/1", CLIENT_SCHEMA).is_err());
        assert!(ClientReport::from_json("{\"schema\": \"x/1\"}").is_err());
    }
}
