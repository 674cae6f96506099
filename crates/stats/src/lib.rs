//! # tokenscope-stats
//!
//! The numbers every other crate stands on, with no tokenscope type in them:
//!
//! - [`stats`]: summaries, percentiles, histograms, linear fits;
//! - [`bootstrap`]: the cluster bootstrap, defined once;
//! - [`compare`]: whether a difference between two runs is real (intervals,
//!   rounds as a random effect, Holm, Wilson);
//! - [`rng`]: the seeded generator every simulation and schedule draws from;
//! - [`fmt`]: numbers and escaped text for people and HTML.

pub mod bootstrap;
pub mod compare;
pub mod fmt;
pub mod rng;
pub mod stats;
