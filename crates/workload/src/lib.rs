//! # tokenscope-workload
//!
//! What both clients send: the run plan (rounds, warm-up, requests per round),
//! the synthetic prompts, datasets, conversations, and traces replayed as they
//! happened.
//! [`load`] is how a run applies it (closed or open loop, the arrival process).

pub mod conversation;
pub mod dataset;
pub mod images;
pub mod load;
pub mod plan;
pub mod prompts;
pub mod shard;
pub mod tokens;
pub mod trace;
