//! `tokenscope compare`: runs compared against the first, change by change, with
//! 95% intervals and verdicts (`core::report::compare`), and a CI gate.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tokenscope_core::quality::report::{GATE_METRICS, QualityReport};
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
  tokenscope compare base.json new.json --fail-on 'ttft_ms:p95:+5%,kld_mean:>0.01,flips:>2%'
      (new.json from bench --quality URL|golden.json --out new.json: new.quality.json beside it)

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
    /// `METRIC[:PCTL]:±N(%|pp)`, e.g. `ttft_ms:p95:+5%,error_rate:+1pp,out_tok_s:-3%`;
    /// and when a compared run's quality report (`bench --quality`) crosses a
    /// quality threshold in the same list, `METRIC:>N` or `METRIC:<N[%]` over
    /// kld_mean, kld_p99, same_top_p, exact_match, delta_p_rms, ppl_ratio,
    /// accuracy, accuracy_drop, flips (e.g. `kld_mean:>0.01,flips:>2%`).
    #[arg(long, value_name = "THRESHOLDS")]
    pub fail_on: Option<String>,

    /// The runs' quality reports (`bench --quality`), in the same order; found
    /// beside a report as `X.quality.json` when not given. Shown after the
    /// comparison; quality thresholds in --fail-on apply to the compared runs.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub quality: Vec<PathBuf>,

    #[command(flatten)]
    pub output: runs::OutputArgs,
}

/// Run `tokenscope compare`.
pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    // Kernels reports (`tokenscope.kernels/1`): compared kernel by kernel.
    if super::kernels::compare::given(&args.reports)? {
        return super::kernels::compare::run(
            &args.reports,
            args.fail_on.as_deref(),
            &args.stats,
            &args.output,
            args.strict,
            false,
        );
    }
    let opts = args.stats.options()?;
    // Speed thresholds and quality thresholds share the list.
    let (quality_list, speed_list): (Vec<&str>, Vec<&str>) = args
        .fail_on
        .as_deref()
        .unwrap_or("")
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .partition(|p| {
            // A quality metric, or a quality gate's form (`:>N`, `:<N`).
            let (metric, rest) = p.trim().split_once(':').unwrap_or((p.trim(), ""));
            GATE_METRICS.contains(&metric) || rest.starts_with(['>', '<'])
        });
    let thresholds = Threshold::parse_list(&speed_list.join(","))
        .map_err(|e| anyhow::anyhow!("--fail-on {e}"))?;
    let gates = super::quality::parse_gates(Some(&quality_list.join(",")), "--fail-on")?;
    let loaded = runs::load(&args.reports, &args.raw, &args.kernels)?;
    let qualities = quality_reports(&args)?;
    if !gates.is_empty()
        && let Some(i) = (1..args.reports.len()).find(|&i| qualities[i].is_none())
    {
        anyhow::bail!(
            "--fail-on {}: {} has no quality report (bench --quality REF --out X.json writes X.quality.json beside it; or give --quality)",
            gates[0].metric,
            args.reports[i].display()
        );
    }
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
    let with_quality: Vec<(&String, &QualityReport)> = names
        .iter()
        .zip(&qualities)
        .filter_map(|(n, q)| Some((n, q.as_ref()?)))
        .collect();
    args.output.emit(
        || {
            let mut t = render::compare::text(&c);
            for (name, q) in &with_quality {
                let (h, rows) = render::quality::rows(q);
                t.push_str(&format!(
                    "\nquality of {name} (against {}):\n{}",
                    q.reference.source,
                    render::table::text_table(&h, &rows)
                ));
            }
            t
        },
        || Ok(serde_json::to_string_pretty(&c)?),
        || {
            let mut md = render::compare::markdown(&c);
            for (name, q) in &with_quality {
                md.push_str(&format!("\n### {name}\n\n"));
                md.push_str(&render::quality::markdown(q));
            }
            md
        },
        || {
            let mut html = render::compare::html(&c, &runs);
            let at = html.rfind("</body>").unwrap_or(html.len());
            let sections: String = with_quality
                .iter()
                .map(|(_, q)| render::quality::html(q))
                .collect();
            html.insert_str(at, &sections);
            html
        },
    )?;
    // The quality gates on each compared run (its own exit status: 2 when a
    // figure cannot be checked, 1 when crossed).
    // 2 (a quality figure that cannot be checked) outranks 1 (crossed).
    let mut quality_status = 0u8;
    for (i, q) in qualities.iter().enumerate().skip(1) {
        if let Some(q) = q
            && !gates.is_empty()
        {
            let status = super::quality::judge(q, &gates);
            if status == ExitCode::from(2) {
                quality_status = 2;
            } else if status != ExitCode::SUCCESS {
                eprintln!("fail-on: {} crossed a quality threshold", names[i]);
                quality_status = quality_status.max(1);
            }
        }
    }
    let crossed = crossings(&c, &thresholds);
    if crossed.is_empty() {
        return Ok(ExitCode::from(quality_status));
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
    Ok(ExitCode::from(quality_status.max(1)))
}

/// Each run's quality report: `--quality` in order, else `X.quality.json`
/// beside it (none: `None`).
fn quality_reports(args: &CompareArgs) -> anyhow::Result<Vec<Option<QualityReport>>> {
    anyhow::ensure!(
        args.quality.is_empty() || args.quality.len() == args.reports.len(),
        "--quality: {} files for {} reports (give one per report, in the same order, or none)",
        args.quality.len(),
        args.reports.len()
    );
    args.reports
        .iter()
        .enumerate()
        .map(|(i, report)| {
            let path = match args.quality.get(i) {
                Some(p) => p.clone(),
                None => {
                    let p = super::bench::quality_path(report);
                    if !p.is_file() {
                        return Ok(None);
                    }
                    p
                }
            };
            super::quality::read_report(&path, "--quality").map(Some)
        })
        .collect()
}
