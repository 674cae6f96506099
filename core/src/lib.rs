//! # tokenscope-core
//!
//! The measurement core of tokenscope. It is pure Rust with no I/O and no clock:
//! every function takes the timestamps it needs as arguments (f64 milliseconds on
//! one monotonic clock), so every metric can be tested on exact inputs and the same
//! code runs natively and in the browser (wasm32).
//!
//! The modules are the layers of the data flow, in order:
//!
//! | layer | modules | what it does |
//! |---|---|---|
//! | [`measure`] | `sse`, `openai`, `timeline`, `metrics` | bytes stamped by the transport -> SSE events -> OpenAI chunks -> a request's record -> its metrics |
//! | [`analyze`] | `stats`, `level`, `rounds`, `long_run`, `sweep`, `slo`, `floor`, `verdict`, `diagnosis` | records -> level and sweep results; the decode floor; the verdict and the diagnosis rules |
//! | [`report`] | the client report (re-exported), `warning`, `assemble`, `raw`, `merge`, `server`, `kernels`, `combined` | the documents (`tokenscope.client/1`, `.raw/1`, `.kernels/1`) and the one function that assembles a client report |
//! | [`render`] | `fmt`, `table`, `client`, `kernels`, `combined`, `glossary`, `charts` | reports -> terminal tables, Markdown, CSV, HTML and SVG charts |
//!
//! Under them all, [`model`]: the result model (the client report's types and
//! their serde), which [`analyze`] fills and [`report`] assembles and re-exports.
//! Beside them: [`workload`] (the run plan and the synthetic prompts both clients
//! send), [`sim`] (the simulated server's model, driven by `tokenscope mock` and by
//! the page), [`parse`] (what people type: durations, lists, base URLs, fault
//! lists), [`rng`] (seeded randomness) and [`page`] (the messages between the page
//! and its lazily loaded modules: the GPU harness and the report renderer).
//! [`gguf`] reads a GGUF file's header from a prefix of the file (sans-IO) and
//! gives the file's model and its own decode floor. [`rum`] is real users' turns
//! (what the browser probe sends and `tokenscope collect` stores) and their
//! weighted summary.
//!
//! Data flow: [`measure::sse::Decoder`] -> [`measure::openai::parse_event`] ->
//! [`measure::timeline::RequestTimeline`] -> [`measure::metrics::RequestMetrics`] ->
//! [`analyze::level::LevelAccumulator`] -> [`report::assemble::RunRecorder`] ->
//! [`report::ClientReport`] -> [`render`].

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
pub mod testing;
pub mod workload;

/// This crate's version (also tokenscope's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
