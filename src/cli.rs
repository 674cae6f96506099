//! Command-line definition and dispatch.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::cmd;

/// How fast an LLM service really feels: user-perceived latency and the GPU's bandwidth floor.
#[derive(Debug, Parser)]
#[command(name = "tokenscope", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Benchmark an OpenAI-compatible streaming endpoint (TTFT, TPOT, ITL, goodput, knee).
    Bench(Box<cmd::bench::BenchArgs>),
    /// Measure this machine's client timing error against server truth at rising concurrency.
    Calibrate(cmd::calibrate::CalibrateArgs),
    /// Collect real users' chat turns from the browser probe (rum/): painted TTFT per route and browser.
    Collect(cmd::collect::CollectArgs),
    /// Compare runs: each change with its 95% interval and a verdict; a CI gate (--fail-on).
    Compare(cmd::compare::CompareArgs),
    /// Track runs over time: each metric per run with its interval, changes flagged.
    History(cmd::history::HistoryArgs),
    /// Merge shards' reports (bench --shard K/N) into one, exactly as one client would have measured.
    Merge(cmd::merge::MergeArgs),
    /// Start the simulated server and benchmark it: the whole client pipeline in one command.
    Demo(cmd::demo::DemoArgs),
    /// Run a simulated OpenAI-compatible inference server (demos and tests).
    Mock(cmd::mock::MockArgs),
    /// The KV-cache memory plan: bytes per token and sequence, weights, sequences that fit a GPU.
    Plan(cmd::plan::PlanArgs),
    /// Is the candidate server still the same model? KLD, top-1 and greedy agreement against a reference.
    Quality(cmd::quality::QualityArgs),
    /// One report (HTML/Markdown) from client runs, the GPU kernels and the model served.
    Report(cmd::report::ReportArgs),
    /// Serve the web page on localhost (--mock co-hosts the simulated server).
    Serve(cmd::serve::ServeArgs),
    /// Run the GPU kernel harness: memory bandwidth, decode kernels and the TPOT floor.
    Kernels(Box<cmd::kernels::KernelsArgs>),
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Bench(args) => cmd::bench::run(*args),
        Command::Calibrate(args) => cmd::calibrate::run(args),
        Command::Collect(args) => cmd::collect::run(args),
        Command::Compare(args) => cmd::compare::run(args),
        Command::History(args) => cmd::history::run(args).map(|()| ExitCode::SUCCESS),
        Command::Merge(args) => cmd::merge::run(args),
        Command::Demo(args) => cmd::demo::run(args),
        Command::Mock(args) => cmd::mock::run(args),
        Command::Kernels(args) => cmd::kernels::run(*args),
        Command::Plan(args) => cmd::plan::run(args),
        Command::Quality(args) => cmd::quality::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Serve(args) => cmd::serve::run(args),
    }
}
