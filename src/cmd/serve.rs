//! `tokenscope serve` (filled by the browser-client work).

use std::process::ExitCode;

/// Serve the built web page on localhost.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

/// Run the subcommand.
pub fn run(_args: ServeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
