//! What both clients send: the run plan (rounds, warm-up, requests per round) and
//! the synthetic prompts.

pub mod plan;
pub mod prompts;
