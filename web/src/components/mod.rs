//! Small function components, one per file; each renders props and reports user
//! intent through `on<verb>` callbacks. None computes a metric: figures come from
//! core's `LevelReport`s, charts from `core::charts`.

pub mod analysis;
pub mod charts;
pub mod compare;
pub mod gpu;
pub mod header;
pub mod level_table;
pub mod outputs;
pub mod run_controls;
pub mod run_status;
pub mod settings_form;
pub mod streams;
pub mod tiers;
pub mod warnings;
