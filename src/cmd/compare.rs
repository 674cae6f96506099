//! `tokenscope compare`: runs compared against the first, change by change, with
//! 95% intervals and verdicts (`core::report::compare`), and a CI gate.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tokenscope_core::report::compare::{
    CompareRun, Comparison, GateReport, TermOutcome, TermStatus, compare,
};
use tokenscope_core::report::compare_gate::{self, Threshold};
use tokenscope_quality::report::{GATE_METRICS, Gate, QualityReport};
use tokenscope_render as render;

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
  tokenscope compare base.json new.json --json compare.json --markdown compare.md \\
      --html compare.html
  tokenscope compare base.json new.json --fail-on 'ttft_ms:p95:+5%,kld_mean:>0.01,flips:>2%'
      (new.json from bench --quality URL|golden.json --json new.json: new.quality.json beside it)

A report's raw file is found beside it when --raw is not given: report.json ->
report.raw.jsonl or report.jsonl. Every --fail-on term is judged on every level
of every compared run, or said not evaluable with the reason and the fix (a p95
of 24 requests: it needs 100; a metric or a level one run lacks). Exit status: 0;
1 when --fail-on is crossed; 2 on an error (or, with --strict, runs that differ in
more than the change; a quality report whose servers share no tokenizer); 3 when
a --fail-on term could not be evaluated (--allow-unevaluated passes it). 2
outranks 1, 1 outranks 3.")]
pub struct CompareArgs {
    /// The base report, then one or more to compare with it.
    #[arg(value_name = "REPORT", num_args = 2.., required = true)]
    pub reports: Vec<PathBuf>,

    /// The reports' raw files (`bench --raw`), in the same order.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub raw: Vec<PathBuf>,

    /// The kernels reports measured beside the runs (`tokenscope kernels --json`),
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

    /// A --fail-on term that cannot be evaluated at a level (no interval, a
    /// metric or a level one run lacks) does not fail the run; without it: exit
    /// 3, each said with the reason and the fix.
    #[arg(long)]
    pub allow_unevaluated: bool,

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
            args.allow_unevaluated,
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
            "--fail-on {}: {} has no quality report (bench --quality REF --json X.json writes X.quality.json beside it; or give --quality)",
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
    let mut c = compare(&runs, &opts);
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
    if !thresholds.is_empty() || !gates.is_empty() {
        let mut terms = compare_gate::judge(&c, &thresholds);
        terms.extend(quality_terms(&names, &qualities, &gates));
        c.gate = Some(GateReport {
            allow_unevaluated: args.allow_unevaluated,
            terms,
        });
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
    // The quality gates on each compared run: 2 (the servers share no
    // tokenizer) outranks 1 (crossed), which outranks 3 (not evaluable).
    let mut quality_status = 0u8;
    for (i, q) in qualities.iter().enumerate().skip(1) {
        if let Some(q) = q
            && !gates.is_empty()
        {
            let status = super::quality::judge_with(q, &gates, args.allow_unevaluated);
            if status == ExitCode::from(2) {
                quality_status = 2;
            } else if status == ExitCode::from(1) {
                eprintln!("fail-on: {} crossed a quality threshold", names[i]);
                quality_status = if quality_status == 2 { 2 } else { 1 };
            } else if status == ExitCode::from(3) && quality_status == 0 {
                quality_status = 3;
            }
        }
    }
    Ok(ExitCode::from(gate_status(&c, quality_status)))
}

/// The exit status of the speed terms (each crossing and each term not
/// evaluable said on stderr) with the quality terms' `quality`: 2 > 1 > 3 > 0.
fn gate_status(c: &Comparison, quality: u8) -> u8 {
    let Some(gate) = &c.gate else {
        return quality;
    };
    let speed: Vec<&TermOutcome> = gate
        .terms
        .iter()
        .filter(|t| !t.level.starts_with("quality"))
        .collect();
    for t in &speed {
        let cell = c
            .runs
            .iter()
            .find(|r| r.name == t.run)
            .and_then(|r| r.levels.iter().find(|l| l.load == t.level))
            .and_then(|l| {
                let metric = Threshold::parse(&t.term).ok()?.metric;
                l.cells.iter().find(|x| x.metric == metric)
            });
        match (t.status, cell) {
            (TermStatus::Crossed, Some(cell)) => eprintln!(
                "fail-on: {} {} {}: {} -> {} ({:+.1}%), significant",
                t.run,
                t.level,
                cell.metric,
                cell.base,
                cell.new,
                cell.relative.unwrap_or(0.0) * 100.0
            ),
            (TermStatus::NotEvaluable, _) => eprintln!(
                "fail-on: {} {} {}: not evaluable: {}",
                t.run,
                t.level,
                t.term,
                t.reason.as_deref().unwrap_or("")
            ),
            (TermStatus::Unresolved, _) => eprintln!(
                "fail-on: {} {} {}: passed, not resolved: {}",
                t.run,
                t.level,
                t.term,
                t.reason.as_deref().unwrap_or("")
            ),
            _ => {}
        }
    }
    let own: Vec<TermOutcome> = speed.into_iter().cloned().collect();
    let status = match (
        compare_gate::exit_status(&own, gate.allow_unevaluated),
        quality,
    ) {
        (_, 2) | (2, _) => 2,
        (1, _) | (_, 1) => 1,
        (3, _) | (_, 3) => 3,
        _ => 0,
    };
    if status == 3 {
        let n = gate
            .terms
            .iter()
            .filter(|t| t.status == TermStatus::NotEvaluable)
            .count();
        eprintln!(
            "fail-on: {n} term(s) at a level could not be evaluated: exit 3 (--allow-unevaluated passes them)"
        );
    }
    status
}

/// The quality terms on each compared run's quality report, level by level
/// (`quality c=N`), for the comparison's gate.
fn quality_terms(
    names: &[String],
    qualities: &[Option<QualityReport>],
    gates: &[Gate],
) -> Vec<TermOutcome> {
    let mut out = Vec::new();
    for (name, q) in names.iter().zip(qualities).skip(1) {
        let Some(q) = q else { continue };
        for g in gates {
            for (c, r) in g.at_levels(q) {
                let (status, value, reason) = match r {
                    Ok((v, true)) => (TermStatus::Crossed, Some(v), None),
                    Ok((v, false)) => (TermStatus::Passed, Some(v), None),
                    Err(why) => (TermStatus::NotEvaluable, None, Some(why)),
                };
                out.push(TermOutcome {
                    term: g.term.clone(),
                    run: name.clone(),
                    level: format!("quality c={c}"),
                    status,
                    value,
                    reason,
                });
            }
        }
    }
    out
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
