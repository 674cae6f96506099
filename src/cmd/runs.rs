//! What `compare` and `history` share: client reports read with their raw files
//! (given, or found beside them), and their outputs written.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use tokenscope_core::report::ClientReport;
use tokenscope_core::report::compare::CompareOptions;
use tokenscope_core::report::raw::{self, RawFile};
use tokenscope_kernel_report::KernelReport;

/// `2%` or `0.02` as a fraction.
pub fn fraction(s: &str) -> anyhow::Result<f64> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| anyhow::anyhow!("--min-change {s:?}: expected a percentage like 2%"))?;
    anyhow::ensure!(
        (0.0..1.0).contains(&v),
        "--min-change {s:?}: between 0% and 100%"
    );
    Ok(v)
}

/// The raw file beside `report` (`X.json` -> `X.raw.jsonl`, `X.jsonl`: the names
/// the page pairs by too), if any.
fn beside(report: &Path) -> Option<PathBuf> {
    let name = report.file_name()?.to_string_lossy().into_owned();
    tokenscope_render::page::compare::raw_names(&name)
        .into_iter()
        .map(|n| report.with_file_name(n))
        .find(|p| p.is_file())
}

fn read_raw(path: &Path) -> anyhow::Result<RawFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--raw {}: cannot read the file", path.display()))?;
    raw::parse(&text).map_err(|e| anyhow::anyhow!("--raw {}: {e}", path.display()))
}

/// Write `text` to `path` (`-`: stdout); `what` names the flag in errors.
fn write(path: &Path, text: &str, what: &str) -> anyhow::Result<()> {
    super::output::write_file(&format!("--{what}"), path, text)
}

/// The statistics' settings `compare` and `history` share.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// A change smaller than this share of the base is no change (the noise
    /// floor): significant means the whole 95% interval lies beyond it.
    #[arg(long, value_name = "PERCENT", default_value = "2%")]
    pub min_change: String,

    /// Bootstrap resamples (100 at least).
    #[arg(long, default_value_t = tokenscope_stats::compare::DEFAULT_RESAMPLES)]
    pub resamples: u32,

    /// The bootstrap's seed (the same files and seed give the same intervals).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl StatsArgs {
    /// The options, or which flag is wrong.
    pub fn options(&self) -> anyhow::Result<CompareOptions> {
        Ok(CompareOptions {
            min_change: fraction(&self.min_change)?,
            resamples: self.resamples.max(100),
            seed: self.seed,
        })
    }
}

/// Where `compare` and `history` write their result besides the terminal.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Write it as JSON here (`tokenscope.compare/1`, `tokenscope.history/1`;
    /// `-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write it as Markdown here (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// Write it as a self-contained HTML page here, with its charts.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

impl OutputArgs {
    /// Print `text` unless an output goes to stdout, then write each output
    /// asked for (each made only if asked).
    pub fn emit(
        &self,
        text: impl FnOnce() -> String,
        json: impl FnOnce() -> anyhow::Result<String>,
        markdown: impl FnOnce() -> String,
        html: impl FnOnce() -> String,
    ) -> anyhow::Result<()> {
        let outputs = [&self.json, &self.markdown, &self.html];
        if !outputs.iter().any(|p| p.as_deref() == Some(Path::new("-"))) {
            print!("{}", text());
        }
        if let Some(p) = &self.json {
            write(p, &(json()? + "\n"), "json")?;
        }
        if let Some(p) = &self.markdown {
            write(p, &markdown(), "markdown")?;
        }
        if let Some(p) = &self.html {
            write(p, &html(), "html")?;
        }
        Ok(())
    }
}

/// Client reports read, with what was found for each.
pub struct Loaded {
    /// The reports, in order.
    pub reports: Vec<ClientReport>,
    /// Each one's raw file.
    pub raws: Vec<Option<RawFile>>,
    /// Each one's kernels report.
    pub kernels: Vec<Option<KernelReport>>,
}

/// Read `reports`, each with its raw file (`raws` in the same order, or found
/// beside each report) and its kernels report (`kernels` in the same order, or
/// `X.kernels.json` beside it). A file that is not what it should be is an error
/// naming it.
pub fn load(reports: &[PathBuf], raws: &[PathBuf], kernels: &[PathBuf]) -> anyhow::Result<Loaded> {
    for (flag, given) in [("--raw", raws), ("--kernels", kernels)] {
        anyhow::ensure!(
            given.is_empty() || given.len() == reports.len(),
            "{flag}: {} files for {} reports (give one per report, in the same order, or none)",
            given.len(),
            reports.len()
        );
    }
    let mut out = Loaded {
        reports: Vec::new(),
        raws: Vec::new(),
        kernels: Vec::new(),
    };
    for (i, path) in reports.iter().enumerate() {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read the file", path.display()))?;
        let report = ClientReport::from_json(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let raw_path = raws.get(i).cloned().or_else(|| beside(path));
        out.raws
            .push(raw_path.as_deref().map(read_raw).transpose()?);
        let kernels_path = kernels.get(i).cloned().or_else(|| {
            let name = path.file_name()?.to_string_lossy().into_owned();
            let p = path.with_file_name(tokenscope_render::page::compare::kernels_name(&name));
            p.is_file().then_some(p)
        });
        out.kernels
            .push(kernels_path.as_deref().map(read_kernels).transpose()?);
        out.reports.push(report);
    }
    Ok(out)
}

fn read_kernels(path: &Path) -> anyhow::Result<KernelReport> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--kernels {}: cannot read the file", path.display()))?;
    KernelReport::from_json(&text).map_err(|e| anyhow::anyhow!("--kernels {}: {e}", path.display()))
}
