//! The result model: the client report (`tokenscope.client/1`), one serde model
//! that every renderer (the terminal table, Markdown, CSV, the HTML report, the
//! page) reads. Types and their serde only: [`crate::analyze`] fills it,
//! [`crate::report`] assembles it (live or from a raw file), merges it and joins
//! the server view to it, and re-exports it under its paths.
//!
//! - [`load`]: who measured and how load was applied;
//! - [`run`]: the run's configuration and environment;
//! - [`level`]: one load level's results; [`cost`]: the run's price and what
//!   a level's tokens cost;
//! - [`client`]: the whole report, the sweep's results, reading it back;
//! - [`warning`]: typed run warnings; [`transport`]: how the client reached the
//!   endpoint; `merge`: what a merged report says of its making;
//! - [`metric`]: the metric registry, each metric's identity defined once;
//! - [`shown`]: what the page's first module reads of a report; [`rum`]: what a
//!   level of real users' turns adds.
//!
//! The committed JSON Schema is `schemas/client.schema.json`; a test checks that
//! what we write validates against it. Readers refuse a document whose major
//! schema version they do not know ([`ClientReport::from_json`]).

pub mod client;
pub mod cost;
pub mod images;
pub mod level;
pub use tokenscope_workload::load;
pub mod merge;
pub mod metric;
pub mod metric_defs;
pub mod rum;
pub mod run;
pub mod shown;
pub mod transport;
pub mod warning;

pub use client::{
    CLIENT_SCHEMA, CapacityBound, ClientReport, Knee, LoadPoint, ReportError, SloCapacity,
    SweepReport, check_schema,
};
pub use cost::{EnergySource, LevelCost, Price};
pub use images::ImageGroup;
pub use level::{
    AnswerProblem, Answers, ClassReport, ConnectionCounts, Drift, EventTokens, LevelMetrics,
    LevelReport, PositionBucket, PromptCache, ReachedLoad, RoundReport, RoundSpread, SloCheck,
    Snapshot, Spread, StallReport, TurnReport,
};
pub use load::{Arrival, Load, LoadMode, ReasoningDisplay, Source};
pub use merge::{MergeInfo, MergeMethod};
pub use rum::{RumLevel, TtftSplit};
pub use run::{AnswerAsked, Environment, RunConfig, TokenCounting, TraceInfo};
pub use warning::{ReportWarning, WarningKind};

/// Serde: leave a zero count out.
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}
