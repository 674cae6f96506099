//! # tokenscope-hw
//!
//! The hardware and model arithmetic, from public numbers only:
//!
//! - [`floor`]: model shapes (presets, a Hugging Face `config.json`), bytes per
//!   decode step, the bandwidth floor of TPOT, the KV-cache plan;
//! - [`gguf`]: a GGUF file's header read into a model shape, and the one table of
//!   ggml's block sizes.

pub mod floor;
pub mod gguf;
