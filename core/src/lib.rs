//! # tokenscope-core
//!
//! The measurement core of tokenscope. It is pure Rust with no I/O and no clock:
//! every function takes the timestamps it needs as arguments (f64 milliseconds on
//! one monotonic clock), so every metric can be tested on exact inputs and the same
//! code runs natively and in the browser (wasm32).
//!
//! Data flow: [`sse::Decoder`] -> [`openai::parse_event`] -> [`timeline::RequestTimeline`]
//! -> [`metrics::RequestMetrics`] -> [`stats::Summary`] -> [`analysis`] -> [`report::ClientReport`].
//! The simulator's model ([`sim`]) and the GPU decode-floor arithmetic ([`floor`]) live here
//! too, so the native CLI, the page and the report share one implementation.

pub mod analysis;
pub mod charts;
pub mod combined;
pub mod export;
pub mod floor;
pub mod gpu_page;
pub mod kernels;
pub mod metrics;
pub mod openai;
pub mod parse;
pub mod plan;
pub mod prompts;
pub mod raw;
pub mod report;
pub mod rng;
pub mod sim;
pub mod slo;
pub mod sse;
pub mod stats;
pub mod timeline;

/// This crate's version (also tokenscope's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
