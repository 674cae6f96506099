//! `tokenscope kernels` (filled by the kernel-harness work).

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct KernelsArgs {}

pub fn run(_args: KernelsArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
