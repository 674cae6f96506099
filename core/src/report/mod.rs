//! The report documents. The client report (`tokenscope.client/1`) is the result
//! model ([`crate::model`]), re-exported here under its paths. Beside it:
//! [`warning`] (the warnings a run draws from its figures), [`assemble`] (the one
//! way a client report is put together, live or from a raw file), [`raw`]
//! (`tokenscope.raw/1`) and [`combined`] (the combined report's analysed form).
//! The kernels report (`tokenscope.kernels/1`) is its own crate,
//! `tokenscope-kernel-report`, below this one (the kernel harness writes it).

pub mod assemble;
pub mod combined;
pub mod compare;
mod compare_cell;
pub mod compare_gate;
pub mod history;
pub mod merge;
pub mod raw;
pub mod server;
pub mod warning;

pub use crate::model::transport;
pub use crate::model::{
    Arrival, CLIENT_SCHEMA, CapacityBound, ClientReport, ConnectionCounts, Drift, Environment,
    Knee, LevelMetrics, LevelReport, Load, LoadMode, LoadPoint, PositionBucket, PromptCache,
    ReachedLoad, ReasoningDisplay, ReportError, ReportWarning, RoundReport, RoundSpread, RunConfig,
    SloCapacity, SloCheck, Snapshot, Source, Spread, StallReport, SweepReport, TokenCounting,
    TraceInfo, TurnReport, WarningKind, check_schema,
};
