//! # tokenscope-core
//!
//! The measurement core of tokenscope. It is pure Rust with no I/O and no clock:
//! every function takes the timestamps it needs as arguments (f64 milliseconds on
//! one monotonic clock), so every metric can be tested on exact inputs and the same
//! code runs natively and in the browser (wasm32).
//!
//! Data flow: [`measure::sse::Decoder`] -> [`measure::openai::parse_event`] ->
//! [`measure::timeline::RequestTimeline`] -> [`measure::metrics::RequestMetrics`] ->
//! [`analyze::level::LevelAccumulator`] -> [`report::assemble::RunRecorder`] ->
//! [`report::ClientReport`] -> [`render`].
//!
//! The modules are the layers of that flow (`measure`, `model`, `analyze`,
//! `report`, `render`) and those beside them; `docs/architecture.md` describes
//! each and which way each dependency points.

pub mod analyze;
pub mod gguf;
pub mod measure;
pub mod model;
pub mod page;
pub mod parse;
pub mod quality;
pub mod render;
pub mod report;
pub mod rng;
pub mod rum;
pub mod sim;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod workload;

/// This crate's version (also tokenscope's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
