//! Analysing: from request records to level and sweep results, and from results to
//! conclusions.
//!
//! - [`level`]: one load level from its requests, with [`rounds`], [`long_run`]
//!   (snapshots, drift) and [`turns`] (conversations, the prefix cache);
//! - [`in_flight`]: the load a level really offered (requests in flight);
//! - [`sweep`]: the knee and the SLO capacity across levels; [`slo`]: SLOs;
//! - [`verdict`] and [`diagnosis`]: the combined report's conclusions and the rules
//!   whose findings quote their evidence;
//! - [`server`]: the engine's and the GPU's `/metrics` read into series;
//! - [`cost`]: what a level's tokens cost, in dollars and in energy;
//!
//! The statistics they stand on are `tokenscope_stats`; the decode floor and model
//! shapes are `tokenscope_hw::floor`.

pub mod classes;
pub mod cost;
pub mod diagnosis;
pub mod images;
pub mod in_flight;
pub mod level;
pub mod level_samples;
pub mod long_run;
pub mod rounds;
pub mod server;
pub mod slo;
pub mod sweep;
pub mod turns;
pub mod verdict;
