//! `tokenscope merge`: shards' reports (`bench --shard K/N`) made into the one
//! report a single client sending all their requests would have written
//! (`core::report::merge`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tokenscope_core::analyze::verdict;
use tokenscope_core::report::combined::ReportInput;
use tokenscope_core::report::merge::{self, ShardRun};
use tokenscope_render as render;
use tokenscope_render::combined;

use super::runs;

/// Merge the reports of every shard of one plan into one report.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
  tokenscope merge shard-0.json shard-1.json shard-2.json shard-3.json --json merged.json
  tokenscope merge results/shard-*.json --json merged.json --html merged.html

Each shard's raw file is found beside its report (shard-0.raw.jsonl, shard-0.jsonl)
or given with --raw in the same order: with every raw file, the merge is exact
(the union of the requests); without, it merges the reports' histograms (the
percentiles within 0.1% of the union's), and says so. A report that is not a
shard's, a shard given twice or missing, or one of another plan is an error
naming it (exit 2).")]
pub struct MergeArgs {
    /// The shards' reports (`bench --shard K/N --json FILE`), every shard once.
    #[arg(value_name = "SHARD_REPORT", required = true)]
    pub reports: Vec<PathBuf>,

    /// Their raw files, in the same order (default: found beside each report).
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub raw: Vec<PathBuf>,

    /// Merge from the reports' histograms even when raw files are there.
    #[arg(long)]
    pub no_raw: bool,

    /// Write the merged report (tokenscope.client/1) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// The old spelling of --json (kept for one release).
    #[arg(long, value_name = "FILE", hide = true, conflicts_with = "json")]
    pub out: Option<PathBuf>,

    /// Write the merged report as HTML here (as `tokenscope report` would).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Write it as Markdown here (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
}

/// Run the subcommand: exit 2 on files that are not every shard of one plan.
pub fn run(mut args: MergeArgs) -> anyhow::Result<ExitCode> {
    args.json = super::output::renamed(args.json.take(), args.out.take(), "--out", "--json");
    let loaded = match runs::load(&args.reports, &args.raw, &[]) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let shards: Vec<ShardRun> = args
        .reports
        .iter()
        .zip(loaded.reports)
        .zip(loaded.raws)
        .map(|((path, report), raw)| ShardRun {
            name: path.display().to_string(),
            report,
            raw: if args.no_raw { None } else { raw },
        })
        .collect();
    let merged = match merge::merge(&shards) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    if args.markdown.as_deref() != Some(std::path::Path::new("-")) {
        print!("{}", render::client::text_summary(&merged));
    }
    if let Some(p) = &args.json {
        super::output::write("--json", p, &(merged.to_json() + "\n"))?;
    }
    if args.html.is_some() || args.markdown.is_some() {
        let input = ReportInput {
            clients: vec![merged],
            kernels: None,
            model: None,
        };
        let analysis = verdict::analyze(&input);
        if let Some(p) = &args.html {
            super::output::write("--html", p, &combined::html(&input, &analysis))?;
        }
        if let Some(p) = &args.markdown {
            super::output::write("--markdown", p, &combined::markdown(&input, &analysis))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
