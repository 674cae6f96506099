//! What both clients send: the run plan (rounds, warm-up, requests per round),
//! the synthetic prompts, and traces replayed as they happened.

pub mod dataset;
pub mod plan;
pub mod prompts;
pub mod trace;
