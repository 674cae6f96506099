//! # tokenscope-quality
//!
//! The quality guard: is a candidate server still the same model as a reference?
//! Compared token by token over the API (docs/quality.md):
//!
//! - [`sample`]: one answer as the API gave it (each generated token, its
//!   log-probability and the top-k alternatives), read from an OpenAI-style
//!   chat completion; [`golden`]: the file that keeps a reference's answers.
//! - [`measure`]: a reference's and a candidate's answers to the same prompts
//!   compared: greedy exact match, where the outputs first diverge, top-1
//!   agreement, and the distribution figures under llama.cpp's names and
//!   definitions (KLD, "same top p", Δp, the perplexity ratio), exact or a lower
//!   bound depending on what the top-k lists cover.
//! - [`teacher`]: teacher-forced scoring of a fixed text (prompt
//!   log-probabilities through `echo`), every position scored on both sides.
//! - [`tasks`]: tasks with one right answer (a seeded built-in set, GSM8K- and
//!   MMLU-style imports), graded strictly and flexibly; accuracy, flips both
//!   ways and McNemar's test.
//! - [`report`]: the report (`tokenscope.quality/1`), the figures in words against llama.cpp's calibration, and the
//!   CI gate (`--fail-on kld_mean:>0.01,exact_match:<90%`).
//! - [`session`]: the conversation with one server over a [`session::Transport`]
//!   (the CLI's HTTP client, the page's `fetch` or simulator); [`run`]: one
//!   measurement, the reference then the candidate at each concurrency.
//! - [`toy_lm`]: a seeded next-token distribution the simulated server serves
//!   and can state exactly (the ground truth of the tests); [`toy_serve`]: its
//!   answers as a server gives them (the mock, the page's simulator).

pub mod golden;
pub mod measure;
pub mod report;
pub mod run;
pub mod sample;
pub mod session;
pub mod tasks;
pub mod teacher;
pub mod toy_lm;
pub mod toy_serve;
