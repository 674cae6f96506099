//! `kernels --tune` and the tuning file: where it lives, when it is searched,
//! written or read, and the search's progress lines.

use std::path::PathBuf;

use anyhow::{Context, bail};
use kernel_harness::GpuContext;
use kernel_harness::clock::MonotonicClock;
use kernel_harness::suite::SuiteConfig;
use kernel_harness::tune::Tuning;
use kernel_harness::tune::search::{self, SearchOptions, TuneProgress};
use tokenscope_kernel_report::TuningFile;

use super::args::KernelsArgs;

/// The tuning file for this adapter (`--tuning`, or the one under the cache
/// directory): searched and written with `--tune`, else read when it exists. A file
/// named with `--tuning` that cannot be read is an error; the default one missing or
/// made elsewhere only means defaults (the report says why).
pub(super) fn tuning(
    args: &KernelsArgs,
    ctx: &GpuContext,
    cfg: &SuiteConfig,
    clock: &MonotonicClock,
) -> anyhow::Result<Tuning> {
    let adapter = ctx.adapter_report();
    let version = env!("CARGO_PKG_VERSION");
    let path = match &args.tuning {
        Some(p) => p.clone(),
        None => default_tuning_path(&adapter),
    };
    let shown = path.display().to_string();
    if args.no_tuning {
        return Ok(Tuning::unused(
            &shown,
            "not read (--no-tuning): defaults".into(),
        ));
    }
    if args.tune {
        let budget = args.tune_budget.unwrap_or(if args.quick {
            std::time::Duration::from_secs(20)
        } else {
            std::time::Duration::from_secs(180)
        });
        let problems = cfg.tune_problems(ctx);
        eprintln!(
            "tuning {} kernel problems on {} within {:.0} s (writing {shown})",
            problems.len(),
            adapter.name,
            budget.as_secs_f64()
        );
        let mut opts = SearchOptions::new(budget.as_secs_f64() * 1e3, cfg.cache_bytes);
        opts.seed = cfg.seed;
        opts.max_rotation = cfg.max_rotation;
        opts.rotation_budget_bytes = cfg.rotation_budget_bytes;
        opts.tool_version = version.into();
        opts.created_unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let file =
            kernel_harness::block_on(search::tune(ctx, clock, &problems, &opts, &mut TuneLines))
                .context("the variant search stopped")?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("--tuning {}: cannot create its folder", dir.display()))?;
        }
        std::fs::write(&path, file.to_json_pretty() + "\n")
            .with_context(|| format!("--tuning {shown}: cannot write"))?;
        eprintln!(
            "tuning file written: {shown} ({} problems in {:.0} s)",
            file.entries.len(),
            file.spent_s
        );
        return Ok(Tuning::from_file(file, &shown, &adapter, version));
    }
    match std::fs::read_to_string(&path) {
        Ok(text) => match TuningFile::from_json(&text) {
            Ok(file) => Ok(Tuning::from_file(file, &shown, &adapter, version)),
            Err(e) if args.tuning.is_some() => bail!("--tuning {shown}: {e}"),
            Err(e) => Ok(Tuning::unused(
                &shown,
                format!(
                    "unreadable ({e}): defaults (run `tokenscope kernels --tune` to rewrite it)"
                ),
            )),
        },
        Err(e) if args.tuning.is_some() => bail!("--tuning {shown}: cannot read: {e}"),
        Err(_) => Ok(Tuning::unused(
            &shown,
            "none for this adapter yet: per-vendor defaults (run `tokenscope kernels --tune`)"
                .into(),
        )),
    }
}

/// `~/.cache/tokenscope/tuning/<adapter>-<backend>.json` (`$XDG_CACHE_HOME` when set).
fn default_tuning_path(adapter: &tokenscope_kernel_report::AdapterReport) -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("."));
    let slug: String = format!("{}-{}", adapter.name, adapter.backend)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    base.join("tokenscope")
        .join("tuning")
        .join(format!("{slug}.json"))
}

/// The search's progress, a line per problem on stderr.
struct TuneLines;

impl TuneProgress for TuneLines {
    fn start(&mut self, index: usize, count: usize, label: &str) {
        eprint!("tune [{}/{count}] {label}: ", index + 1);
    }
    fn done(&mut self, _label: &str, line: &str) {
        eprintln!("{line}");
    }
}
