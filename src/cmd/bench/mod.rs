//! `tokenscope bench`: benchmark an OpenAI-compatible streaming endpoint.
//!
//! [`args`] defines the flags, [`config`] checks them and builds the [`Plan`], and
//! [`run`] runs it tier by tier, writing each tier's reports ([`Outputs`]:
//! the flags', else a new results folder); [`say`] is what it prints around
//! the run (the plan and estimate, the verdict, the files written).

mod args;
mod config;
mod outcome;
mod plan;
mod say;

use std::process::ExitCode;

use tokenscope_core::report::ClientReport;
use tokenscope_render as render;
use tokenscope_render::tiers;
use tokenscope_workload::tokens::Tier;

use tokenscope_loadgen::{self as loadgen, InputLength};

pub use args::BenchArgs;
pub use plan::quality_path;
use plan::{Outputs, QualityPlan, Save};

/// Run the subcommand: the sweep at each tier in turn, each tier's report
/// written as soon as it ends.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let save = Save::of(
        &args,
        std::env::var_os("TOKENSCOPE_RESULTS_DIR").map(std::path::PathBuf::from),
    );
    let verdict_elsewhere = args.verdict_elsewhere;
    let (mut plan, mut outputs) = args.into_config()?;
    let rt = super::runtime()?;
    let pre = rt.block_on(async {
        let pre = loadgen::preflight::check(&plan.cfg).await?;
        if plan.cfg.progress {
            eprintln!(
                "benchmarking {} ({}) at {}",
                pre.model,
                plan.cfg.api.as_str(),
                tokenscope_loadgen::util::redact_url(&plan.cfg.base_url)
            );
        }
        anyhow::Ok(pre)
    })?;
    // The results folder once the endpoint answers (a failed pre-flight
    // leaves no empty folder).
    let folder = match &save {
        Save::Folder(parent) => {
            let dir = plan::results_folder(parent, &tokenscope_loadgen::util::now_rfc3339())?;
            outputs = Outputs::in_folder(&dir);
            plan.cfg.raw = Some(Outputs::raw_in_folder(&dir));
            if let Some(q) = plan.quality.as_mut() {
                q.json = outputs.json.as_deref().map(quality_path);
            }
            Some(dir)
        }
        Save::Given | Save::Nothing => None,
    };
    if plan.cfg.progress {
        let why_none = if !plan.cfg.preflight {
            "--no-preflight"
        } else {
            "the pre-flight request failed"
        };
        eprint!("{}", say::plan_lines(&plan, pre.timing, why_none));
    }
    let tiered = plan.tiers.len() > 1;
    let mut done = Vec::new();
    for (i, tier) in plan.tiers.iter().enumerate() {
        if tiered {
            println!(
                "\n== tier {}/{}: input {}, max_tokens {} ==",
                i + 1,
                plan.tiers.len(),
                match tier.input {
                    InputLength::Tokens(n) => format!("{n} tokens"),
                    InputLength::OfContext(f) => format!("{f} of the context window"),
                },
                tier.max_tokens
            );
        }
        let cfg = plan.tier_config(i);
        let cfg_raw = cfg.raw.clone();
        let report =
            rt.block_on(async { anyhow::Ok(loadgen::run(cfg, pre.clone()).await?.report) })?;
        // Exports first (a failing terminal must not lose the files), then the table.
        let out = if tiered {
            outputs.for_tier(tier)
        } else {
            outputs.clone()
        };
        out.write(&report)?;
        print!("{}", render::client::text_summary(&report));
        if !verdict_elsewhere {
            print!("\n{}", say::verdict(&report));
        }
        let mut written: Vec<std::path::PathBuf> = out
            .paths()
            .into_iter()
            .map(std::path::Path::to_path_buf)
            .collect();
        written.extend(cfg_raw);
        print!(
            "{}",
            say::written(&written, &save, folder.as_deref().filter(|_| !tiered))
        );
        let interrupted = report.interrupted;
        done.push((*tier, report));
        if interrupted {
            break;
        }
    }
    if tiered {
        print!("{}", tier_summary(&done));
    }
    if done.iter().any(|(_, r)| r.interrupted) {
        return Ok(ExitCode::from(130));
    }
    let quality_code = match &plan.quality {
        Some(q) => {
            let key = plan.cfg.api_key.as_ref().map(|k| k.expose());
            let allow = plan.gates.allow_unevaluated;
            Some(rt.block_on(quality(q, &done, &pre.model, key, &outputs, tiered, allow))?)
        }
        None => None,
    };
    Ok(finish(&done, &plan.gates, quality_code))
}

/// The run's exit code, once every output is written ([`outcome::exit_code`]):
/// 4 before the quality gate's own code, which comes before 3 (2 > 4 > 1 > 3).
fn finish(
    done: &[(Tier, ClientReport)],
    gates: &outcome::RunGates,
    quality: Option<ExitCode>,
) -> ExitCode {
    let reports: Vec<&ClientReport> = done.iter().map(|(_, r)| r).collect();
    let (code, said) = outcome::exit_code(&reports, gates);
    for line in said {
        eprintln!("{line}");
    }
    match quality {
        // Quality's 2 (tokenizers that differ) outranks a failed run's 4.
        Some(q) if q == ExitCode::from(2) => q,
        Some(q) if code != outcome::RUN_FAILED && q != ExitCode::SUCCESS => q,
        _ => ExitCode::from(code),
    }
}

/// `--quality`: the checks of `tokenscope quality` at the sweep's concurrency
/// levels (1 alone for an open-loop sweep), the report written beside the
/// speed reports, and each level's speed beside its answers. The speed
/// reports are already written: a failure here loses none of them.
async fn quality(
    q: &QualityPlan,
    done: &[(Tier, ClientReport)],
    model: &str,
    key: Option<&str>,
    outputs: &Outputs,
    tiered: bool,
    allow_unevaluated: bool,
) -> anyhow::Result<ExitCode> {
    let mut levels: Vec<u32> = done
        .iter()
        .flat_map(|(_, r)| r.levels.iter().filter_map(|l| l.concurrency))
        .collect();
    levels.sort_unstable();
    levels.dedup();
    if levels.is_empty() {
        eprintln!(
            "quality: an open-loop sweep has no concurrency levels; checked at concurrency 1"
        );
        levels.push(1);
    }
    let mut args = q.args.clone();
    // The bench's key is the candidate's: sent to the reference only on the
    // same origin (the same server or gateway).
    args.api_key = key.map(str::to_owned);
    args.key_is_candidates = args
        .candidate
        .as_deref()
        .is_none_or(|c| !crate::cmd::quality::same_origin(c, &args.reference));
    if args.cand_model.is_none() {
        args.cand_model = Some(model.to_owned());
    }
    println!();
    let report = crate::cmd::quality::measure_checked(&args, &levels)
        .await
        .map_err(|e| {
            e.context("--quality: the speed reports are written; the quality checks failed")
        })?
        .expect("a candidate is always given");
    print!("{}", render::quality::text(&report));
    if let Some(p) = &q.json {
        crate::cmd::quality::write_json(&report, p, "--json")?;
        println!("wrote {}", p.display());
    }
    let labelled: Vec<(String, &tokenscope_core::model::LevelReport)> = done
        .iter()
        .flat_map(|(t, r)| {
            r.levels.iter().map(move |l| {
                let load = l.label();
                (
                    if tiered {
                        format!("{} {load}", t.label())
                    } else {
                        load
                    },
                    l,
                )
            })
        })
        .collect();
    let (headers, rows) = render::quality::beside_speed(&labelled, &report);
    println!(
        "\nspeed and quality per level:\n{}",
        render::table::text_table(&headers, &rows)
    );
    // The Markdown reports gain the section.
    for (t, _) in done {
        let out = if tiered {
            outputs.for_tier(t)
        } else {
            outputs.clone()
        };
        if let Some(p) = &out.markdown {
            let mut text = std::fs::read_to_string(p).unwrap_or_default();
            text.push('\n');
            text.push_str(&render::quality::markdown(&report));
            std::fs::write(p, text)
                .map_err(|e| anyhow::anyhow!("--markdown {}: cannot write ({e})", p.display()))?;
        }
    }
    Ok(crate::cmd::quality::judge_with(
        &report,
        &q.gates,
        allow_unevaluated,
    ))
}

/// The tiers side by side ([`tiers::tier_rows`]).
fn tier_summary(done: &[(Tier, ClientReport)]) -> String {
    let labelled: Vec<(String, &ClientReport)> = done.iter().map(|(t, r)| (t.label(), r)).collect();
    let (headers, rows) = tiers::tier_rows(&labelled);
    format!(
        "\nall tiers (ms):\n{}",
        tokenscope_render::table::text_table(&headers, &rows)
    )
}
