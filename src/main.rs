//! `tokenscope`: how fast an LLM service really feels.
//!
//! Thin entry point: parse the command line, hand the validated options to the
//! subcommand's runner, print `{:#}` of any error and exit non-zero.

mod cli;
#[cfg(test)]
mod cli_examples;
mod cmd;
mod collect;
#[cfg(test)]
mod doc_paths;
mod gguf_file;
mod mock;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = <cli::Cli as clap::Parser>::parse();
    // TLS for https endpoints (ring: no C toolchain beyond cc needed).
    let _ = rustls::crypto::ring::default_provider().install_default();
    match cli::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
