//! # tokenscope-core
//!
//! The measurement core of tokenscope. It is pure Rust with no I/O and no clock:
//! every function takes the timestamps it needs as arguments (f64 milliseconds on
//! one monotonic clock), so every metric can be tested on exact inputs and the same
//! code runs natively and in the browser (wasm32).
//!
//! Data flow: `tokenscope_measure` (a request's bytes to its record and metrics)
//! -> [`analyze::level::LevelAccumulator`] -> [`report::assemble::RunRecorder`] ->
//! [`report::ClientReport`] -> `tokenscope_render`.
//!
//! This crate is the report model and the analysis over it: [`model`] (the
//! documents' types), [`analyze`] (levels, sweeps, SLOs, the server view, the
//! verdict and the diagnosis), [`report`] (assembling, merging, comparing,
//! the combined report) and [`rum`] (real users' turns). The crates below it
//! (stats, measure, hw, workload, the kernels report) and above it (render, the
//! CLI, the page) are described in `docs/architecture.md`.

pub mod analyze;
pub mod model;
pub mod report;
pub mod rum;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

/// This crate's version (also tokenscope's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
