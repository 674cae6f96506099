//! `tokenscope quality`: is the candidate server still the same model as the
//! reference? The same seeded prompts to both at temperature 0 with top-k
//! log-probabilities; behaviour and distribution compared token by token
//! (`tokenscope_quality`), at each concurrency; the reference against itself as the
//! noise floor; a golden file to keep a reference; a CI gate.

mod args;
mod measure;
mod server;

use std::process::ExitCode;

use anyhow::Context as _;
use tokenscope_measure::parse::parse_u32_list;
use tokenscope_quality::report::{Gate, QualityReport};

pub use args::QualityArgs;
pub use server::same_origin;

/// Run `tokenscope quality`.
pub fn run(args: QualityArgs) -> anyhow::Result<ExitCode> {
    let gates = parse_gates(args.fail_on.as_deref(), "--fail-on")?;
    let levels =
        parse_u32_list(&args.concurrency).map_err(|e| anyhow::anyhow!("--concurrency {e}"))?;
    check(&args)?;
    for line in server::connections(&args)?.notices() {
        eprintln!("{line}");
    }
    let rt = super::runtime()?;
    let Some(report) = rt.block_on(measure::measure(&args, &levels))? else {
        return Ok(ExitCode::SUCCESS);
    };
    if let Some(path) = &args.json {
        write_json(&report, path, "--json")?;
    }
    print!("{}", tokenscope_render::quality::text(&report));
    Ok(judge_with(&report, &gates, args.allow_unevaluated))
}

/// `tokenscope quality`'s settings for `bench --quality REF`: the bench's
/// endpoint is the candidate, reached with the bench's connection options
/// `http`; `flags` the rest (`--quality-args`).
pub fn args_for_bench(
    reference: &str,
    candidate: &str,
    flags: &str,
    http: &super::http_args::HttpArgs,
) -> anyhow::Result<QualityArgs> {
    #[derive(clap::Parser)]
    #[command(no_binary_name = true, disable_help_flag = true)]
    struct Flags {
        #[command(flatten)]
        q: QualityArgs,
    }
    let words: Vec<&str> = flags.split_whitespace().collect();
    // What the bench decides itself.
    for own in [
        "--ref",
        "--cand",
        "--concurrency",
        "--json",
        "--fail-on",
        "--save-golden",
        "--api-key",
        "--ref-api-key",
    ] {
        if words
            .iter()
            .any(|w| *w == own || w.starts_with(&format!("{own}=")))
        {
            if own == "--ref-api-key" {
                // (A key on a command line is in `ps` and in shell history.)
                anyhow::bail!(
                    "--quality-args: give the reference's key in TOKENSCOPE_REF_API_KEY, not on the command line"
                );
            }
            anyhow::bail!(
                "--quality-args: {own} is the bench's own (--quality, --url, --concurrency, --json, --fail-on, --api-key)"
            );
        }
    }
    // The connection options are the bench's too, given to bench once.
    let connection =
        <super::http_args::HttpArgs as clap::Args>::augment_args(clap::Command::new("c"));
    for arg in connection.get_arguments() {
        let long = arg.get_long().map(|l| format!("--{l}"));
        let short = arg.get_short().map(|s| format!("-{s}"));
        let given = |w: &&str| {
            let by_long = long
                .as_ref()
                .is_some_and(|l| *w == l || w.starts_with(&format!("{l}=")));
            let by_short = short
                .as_ref()
                .is_some_and(|s| !w.starts_with("--") && w.starts_with(s.as_str()));
            (by_long, by_short)
        };
        // Named by the flag alone: the word may hold a header's value.
        let named = words.iter().find_map(|w| match given(w) {
            (true, _) => long.clone(),
            (_, true) => short.clone(),
            _ => None,
        });
        if let Some(name) = named {
            anyhow::bail!(
                "--quality-args: {name} is a connection option: give it to bench itself (the quality checks use the bench's --ca-cert, --client-cert, --insecure, --http1/--http2, --proxy, --header and --api-key-header)"
            );
        }
    }
    let mut argv = vec!["--ref", reference, "--cand", candidate];
    argv.extend(&words);
    use clap::Parser as _;
    let parsed = Flags::try_parse_from(argv).map_err(|e| {
        let text = e.to_string();
        let first = text
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ");
        anyhow::anyhow!("--quality-args: {first}")
    })?;
    Ok(QualityArgs {
        http: http.clone(),
        ..parsed.q
    })
}

/// Check the settings and read the files the checks will need (a golden
/// reference, `--text`, `--tasks-file`): what is wrong is said before anything
/// runs.
pub fn check(args: &QualityArgs) -> anyhow::Result<()> {
    if args.prompts == 0 || args.max_tokens == 0 {
        anyhow::bail!("--prompts and --max-tokens must be at least 1");
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        anyhow::bail!("--timeout {}: must be more than 0 seconds", args.timeout);
    }
    measure::check_files(args)
}

/// Parse quality gates given to `flag`.
pub fn parse_gates(s: Option<&str>, flag: &str) -> anyhow::Result<Vec<Gate>> {
    match s {
        Some(s) => Gate::parse_list(s).map_err(|e| anyhow::anyhow!("{flag} {e}")),
        None => Ok(Vec::new()),
    }
}

/// Check the settings, then measure; `None` when there was only a golden file
/// to save.
pub async fn measure_checked(
    args: &QualityArgs,
    levels: &[u32],
) -> anyhow::Result<Option<QualityReport>> {
    check(args)?;
    measure::measure(args, levels).await
}

/// Read a quality report (`tokenscope.quality/1`), named by `flag` in errors.
pub fn read_report(path: &std::path::Path, flag: &str) -> anyhow::Result<QualityReport> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{flag} {}: cannot read the file", path.display()))?;
    let report: QualityReport = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{flag} {}: not a quality report ({e})", path.display()))?;
    if report.schema != tokenscope_quality::report::SCHEMA {
        anyhow::bail!(
            "{flag} {}: schema {:?}, expected {}",
            path.display(),
            report.schema,
            tokenscope_quality::report::SCHEMA
        );
    }
    Ok(report)
}

/// Write the report as `tokenscope.quality/1` JSON.
pub fn write_json(
    report: &QualityReport,
    path: &std::path::Path,
    flag: &str,
) -> anyhow::Result<()> {
    super::output::write_file(flag, path, &(serde_json::to_string_pretty(report)? + "\n"))
}

/// The exit status the report earns, each reason said on stderr: 2 when the
/// servers share no tokens or their tokenizers differ (nothing compares); 1
/// when a gate is crossed at a level (or a batch-invariance claim is broken);
/// 3 when a gate's figure was not measured at a level (said with why and what
/// would measure it) unless `allow_unevaluated`; else 0. 2 > 1 > 3 > 0.
pub fn judge_with(report: &QualityReport, gates: &[Gate], allow_unevaluated: bool) -> ExitCode {
    // Servers that do not share tokens: nothing here means anything.
    if let Some(l) = report
        .levels
        .iter()
        .find(|l| l.figures.token_overlap.is_some_and(|o| o < 0.5))
    {
        eprintln!(
            "quality: the reference and the candidate share no top token at the first position for {:.0}% of the prompts: another tokenizer or another model. The figures above compare nothing.",
            (1.0 - l.figures.token_overlap.unwrap_or(0.0)) * 100.0
        );
        return ExitCode::from(2);
    }
    if let Some(t) = report.tokenizer.as_ref().filter(|t| !t.same()) {
        eprintln!(
            "quality: the two servers' tokenizers differ ({} and {} tokens for the probe text, the ids parting at token {}): another tokenizer or another model. The figures above compare nothing token for token.",
            t.reference_tokens,
            t.candidate_tokens,
            t.first_difference.unwrap_or(0)
        );
        return ExitCode::from(2);
    }
    let mut crossed = false;
    for l in report.batch_invariance_broken() {
        crossed = true;
        let a = l
            .against_first_level
            .as_ref()
            .map_or(1.0, |a| a.exact_match);
        eprintln!(
            "batch invariance: at concurrency {} only {:.1}% of the candidate's answers are its own at the first level, although it claims batch-invariant decoding",
            l.concurrency,
            a * 100.0
        );
    }
    let mut unevaluated = 0;
    for g in gates {
        let levels = g.at_levels(report);
        if levels.is_empty() {
            unevaluated += 1;
            eprintln!(
                "fail-on: {}: not evaluable: the report has no level",
                g.term
            );
        }
        for (c, r) in levels {
            match r {
                Ok((v, true)) => {
                    crossed = true;
                    eprintln!(
                        "fail-on: concurrency {c} {}: {v:.6} {} {}",
                        g.metric,
                        if g.above { ">" } else { "<" },
                        g.value
                    );
                }
                Ok(_) => {}
                Err(why) => {
                    unevaluated += 1;
                    eprintln!("fail-on: concurrency {c} {}: not evaluable: {why}", g.term);
                }
            }
        }
    }
    if crossed {
        ExitCode::from(1)
    } else if unevaluated > 0 && !allow_unevaluated {
        eprintln!(
            "fail-on: {unevaluated} term(s) could not be evaluated: exit 3 (--allow-unevaluated passes them)"
        );
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}
