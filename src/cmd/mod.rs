//! One module per subcommand: options (clap) -> validated config -> runner -> exporters.

pub mod bench;
pub mod calibrate;
pub mod demo;
pub mod kernels;
pub mod mock;
pub mod report;
pub mod serve;
