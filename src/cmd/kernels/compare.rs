//! `tokenscope compare a.kernels.json b.kernels.json`: two kernels reports
//! compared kernel by kernel (`tokenscope_kernel_report::compare_kernels`), the gate
//! `--fail-on gbps:-5%` on their figures. `compare` hands over here when its
//! reports are kernels reports.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use tokenscope_kernel_report::{
    GateOutcome, KernelCompareOptions, KernelGate, KernelReport, SCHEMA_PREFIX, compare_kernels,
    judge,
};
use tokenscope_render::kernels::{compare_html, compare_markdown, compare_text};

use crate::cmd::runs::{OutputArgs, StatsArgs};

/// Whether the file's `schema` is a kernels report's (`tokenscope.kernels/...`);
/// `false` for any other document or one that cannot be read (the caller's own
/// reading says why).
fn is_kernels_report(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("schema")?.as_str().map(str::to_owned))
        .is_some_and(|s| s.starts_with(SCHEMA_PREFIX))
}

/// Whether `compare` was given kernels reports: all of them (then this module
/// compares them), none (the client comparison), or a mix (an error naming them).
pub fn given(reports: &[PathBuf]) -> anyhow::Result<bool> {
    let kinds: Vec<bool> = reports.iter().map(|p| is_kernels_report(p)).collect();
    match (kinds.iter().all(|k| *k), kinds.iter().any(|k| *k)) {
        (true, _) => Ok(true),
        (false, false) => Ok(false),
        (false, true) => {
            let (k, other): (Vec<_>, Vec<_>) = reports.iter().zip(&kinds).partition(|(_, k)| **k);
            bail!(
                "compare takes kernels reports or client reports, not both: {} {} kernels report(s), {} not",
                k.iter()
                    .map(|(p, _)| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                if k.len() == 1 { "is a" } else { "are" },
                other
                    .iter()
                    .map(|(p, _)| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    }
}

fn read(path: &Path) -> anyhow::Result<KernelReport> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    KernelReport::from_json(&text).with_context(|| path.display().to_string())
}

/// Compares the kernels reports (the first is the base; each other against it),
/// writes the outputs, then gates: exit 1 when a term is crossed, 3 when a term
/// could not be evaluated on some kernel (unless `allow_unevaluated`), else 0;
/// `strict` refuses reports from different GPUs.
pub fn run(
    reports: &[PathBuf],
    fail_on: Option<&str>,
    stats: &StatsArgs,
    output: &OutputArgs,
    strict: bool,
    allow_unevaluated: bool,
) -> anyhow::Result<ExitCode> {
    let opts = stats.options()?;
    let gates = KernelGate::parse_list(fail_on.unwrap_or(""))
        .map_err(|e| anyhow::anyhow!("--fail-on {e}"))?;
    let opts = KernelCompareOptions {
        min_change: opts.min_change,
        resamples: opts.resamples,
        seed: opts.seed,
    };
    let base = read(&reports[0])?;
    let base_name = reports[0].display().to_string();
    let mut comparisons = Vec::new();
    for p in &reports[1..] {
        let other = read(p)?;
        let c = compare_kernels(
            (&base_name, &base),
            (&p.display().to_string(), &other),
            &opts,
        );
        if strict && !c.differences.is_empty() {
            bail!(
                "--strict: {} and {} differ in more than the change: {}",
                c.before,
                c.after,
                c.differences.join("; ")
            );
        }
        comparisons.push(c);
    }
    let joined = |f: &dyn Fn(&tokenscope_kernel_report::KernelsComparison) -> String| {
        comparisons.iter().map(f).collect::<Vec<_>>().join("\n")
    };
    output.emit(
        || joined(&compare_text),
        || {
            Ok(if comparisons.len() == 1 {
                serde_json::to_string_pretty(&comparisons[0])?
            } else {
                serde_json::to_string_pretty(&comparisons)?
            })
        },
        || joined(&compare_markdown),
        || joined(&compare_html),
    )?;
    let (mut crossed, mut unevaluated) = (0usize, 0usize);
    for c in &comparisons {
        for o in judge(c, &gates) {
            match o {
                GateOutcome::Crossed(m) => {
                    crossed += 1;
                    eprintln!("fail-on: {} -> {}: {m}", c.before, c.after);
                }
                GateOutcome::Unevaluated(m) => {
                    unevaluated += 1;
                    eprintln!(
                        "fail-on: not evaluable: {m} (time the kernels with at least {} samples, e.g. kernels --samples 20)",
                        tokenscope_kernel_report::min_kernel_samples()
                    );
                }
            }
        }
    }
    if crossed > 0 {
        return Ok(ExitCode::from(1));
    }
    if unevaluated > 0 && !allow_unevaluated {
        eprintln!(
            "fail-on: {unevaluated} term(s) could not be evaluated: exit 3 (--allow-unevaluated accepts that)"
        );
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::SUCCESS)
}
