//! `tokenscope history`: runs ordered by label or time, each metric's value per
//! run with its interval, and a flag where a run changed significantly from the
//! one before (`core::report::history`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use tokenscope_core::report::compare::{CompareRun, known_metric, metric_names};
use tokenscope_core::report::history::{DEFAULT_METRICS, history, sort_runs};
use tokenscope_render as render;

use super::runs;

/// Track runs over time: the runs ordered by `bench --label` (numbers compared
/// as numbers) or by start time; per level and metric each run's value with its
/// 95% interval, and whether it changed significantly from the run before (the
/// test `tokenscope compare` makes).
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
  tokenscope history runs/
  tokenscope history v1.json v2.json v3.json --metrics ttft_ms:p95,out_tok_s --html trend.html
  tokenscope history runs/ --level c=8 --json history.json

A folder is read for its client reports (*.json; other JSON files are skipped
and named). Each report's raw file is found beside it (report.json ->
report.raw.jsonl or report.jsonl); without it, percentiles have no interval.")]
pub struct HistoryArgs {
    /// Client reports, or folders of them.
    #[arg(value_name = "FILE|DIR", required = true)]
    pub inputs: Vec<PathBuf>,

    /// The metrics to track, comma-separated (as `compare` names its cells).
    #[arg(long, value_name = "LIST", default_value_t = DEFAULT_METRICS.join(","))]
    pub metrics: String,

    /// Only these levels (`c=8`, `2 req/s`), comma-separated.
    #[arg(long, value_name = "LIST")]
    pub level: Option<String>,

    #[command(flatten)]
    pub stats: runs::StatsArgs,

    #[command(flatten)]
    pub output: runs::OutputArgs,
}

/// The client reports in `dir` (sorted by name); other JSON files are named on
/// stderr and skipped.
fn reports_in(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot read the folder", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| !p.to_string_lossy().ends_with(".kernels.json"))
        .collect();
    files.sort();
    Ok(files
        .into_iter()
        .filter(|p| {
            let ok = std::fs::read_to_string(p)
                .is_ok_and(|t| tokenscope_core::report::ClientReport::from_json(&t).is_ok());
            if !ok {
                eprintln!("history: skipping {} (not a client report)", p.display());
            }
            ok
        })
        .collect())
}

/// Run `tokenscope history`.
pub fn run(args: HistoryArgs) -> anyhow::Result<()> {
    let opts = args.stats.options()?;
    let metrics: Vec<String> = args
        .metrics
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| {
            if m == "out_tok_s" {
                "output_tokens_per_s"
            } else {
                m
            }
            .to_owned()
        })
        .collect();
    if let Some(bad) = metrics.iter().find(|m| !known_metric(m)) {
        anyhow::bail!("--metrics: unknown metric {bad:?} ({})", metric_names());
    }
    let mut files = Vec::new();
    for input in &args.inputs {
        if input.is_dir() {
            files.extend(reports_in(input)?);
        } else {
            files.push(input.clone());
        }
    }
    anyhow::ensure!(
        files.len() >= 2,
        "history needs two runs or more; found {} in {}",
        files.len(),
        args.inputs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let runs::Loaded {
        mut reports,
        raws,
        kernels,
    } = runs::load(&files, &[], &[])?;
    if let Some(levels) = &args.level {
        let wanted: Vec<String> = levels.split(',').map(|l| l.trim().to_owned()).collect();
        for r in &mut reports {
            r.levels.retain(|l| wanted.iter().any(|w| *w == l.label()));
        }
        anyhow::ensure!(
            reports.iter().any(|r| !r.levels.is_empty()),
            "--level {levels}: no run has it"
        );
    }
    let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    let mut list: Vec<CompareRun<'_>> = (0..reports.len())
        .map(|i| CompareRun {
            name: &names[i],
            report: &reports[i],
            raw: raws[i].as_ref(),
            kernels: kernels[i].as_ref(),
        })
        .collect();
    let order = sort_runs(&mut list);
    let h = history(&list, &metrics, order, &opts);
    args.output.emit(
        || render::history::text(&h),
        || Ok(serde_json::to_string_pretty(&h)?),
        || render::history::markdown(&h),
        || render::history::html(&h),
    )?;
    Ok(())
}
