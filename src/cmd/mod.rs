//! One module per subcommand: options (clap) -> validated config -> runner -> exporters.

pub mod kernels;
