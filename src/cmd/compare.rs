//! `tokenscope compare`: runs compared against the first, change by change, with
//! 95% intervals and verdicts (`core::report::compare`), and a CI gate.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tokenscope_core::render;
use tokenscope_core::report::compare::{CompareRun, Threshold, compare, crossings};

use super::runs;

/// Compare client reports (native or browser) against the first: levels matched
/// by load; per metric both values, the change, its 95% interval (bootstrap over
/// requests from the raw files, Welch over rounds for throughput, Newcombe for
/// error and timeout rates) and a verdict. What differs between the runs besides
/// the change under test is a warning (`--strict`: an error).
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
  tokenscope compare before.json after.json
  tokenscope compare before.json after.json --raw before.jsonl after.jsonl
  tokenscope compare base.json new.json --fail-on 'ttft_ms:p95:+5%,error_rate:+1pp,out_tok_s:-3%'
  tokenscope compare base.json new.json --json compare.json --markdown compare.md --html compare.html

A report's raw file is found beside it when --raw is not given: report.json ->
report.raw.jsonl or report.jsonl. Exit status: 0, 1 when --fail-on is crossed, 2
on an error (or, with --strict, runs that differ in more than the change).")]
pub struct CompareArgs {
    /// The base report, then one or more to compare with it.
    #[arg(value_name = "REPORT", num_args = 2.., required = true)]
    pub reports: Vec<PathBuf>,

    /// The reports' raw files (`bench --raw`), in the same order.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub raw: Vec<PathBuf>,

    /// The kernels reports measured beside the runs (`tokenscope kernels --out`),
    /// in the same order: their adapters join the compatibility check. Found
    /// beside a report as `X.kernels.json` when not given.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub kernels: Vec<PathBuf>,

    #[command(flatten)]
    pub stats: runs::StatsArgs,

    /// Refuse runs that differ in more than the change under test (model, tiers,
    /// prompts, tokenizer, load, tool version, client).
    #[arg(long)]
    pub strict: bool,

    /// Exit 1 when a significant change crosses one of these:
    /// `METRIC[:PCTL]:±N(%|pp)`, e.g. `ttft_ms:p95:+5%,error_rate:+1pp,out_tok_s:-3%`.
    #[arg(long, value_name = "THRESHOLDS")]
    pub fail_on: Option<String>,

    #[command(flatten)]
    pub output: runs::OutputArgs,
}

/// Run `tokenscope compare`.
pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let opts = args.stats.options()?;
    let thresholds = match &args.fail_on {
        Some(s) => Threshold::parse_list(s).map_err(|e| anyhow::anyhow!("--fail-on {e}"))?,
        None => Vec::new(),
    };
    let loaded = runs::load(&args.reports, &args.raw, &args.kernels)?;
    let names: Vec<String> = args
        .reports
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let runs: Vec<CompareRun<'_>> = (0..loaded.reports.len())
        .map(|i| CompareRun {
            name: &names[i],
            report: &loaded.reports[i],
            raw: loaded.raws[i].as_ref(),
            kernels: loaded.kernels[i].as_ref(),
        })
        .collect();
    let c = compare(&runs, &opts);
    if args.strict
        && let Some(run) = c.runs.iter().find(|r| !r.mismatches.is_empty())
    {
        let fields: Vec<String> = run
            .mismatches
            .iter()
            .map(|m| format!("{} ({} vs {})", m.field, m.base, m.new))
            .collect();
        anyhow::bail!(
            "--strict: {} and {} differ in more than the change: {}",
            c.base,
            run.name,
            fields.join(", ")
        );
    }
    args.output.emit(
        || render::compare::text(&c),
        || Ok(serde_json::to_string_pretty(&c)?),
        || render::compare::markdown(&c),
        || render::compare::html(&c, &runs),
    )?;
    let crossed = crossings(&c, &thresholds);
    if crossed.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for (run, level, cell) in &crossed {
        eprintln!(
            "fail-on: {run} {level} {}: {} -> {} ({:+.1}%), significant",
            cell.metric,
            cell.base,
            cell.new,
            cell.relative.unwrap_or(0.0) * 100.0
        );
    }
    Ok(ExitCode::from(1))
}
