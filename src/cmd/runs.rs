//! What `compare` and `history` share: client reports read with their raw files
//! (given, or found beside them), and their outputs written.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tokenscope_core::report::ClientReport;
use tokenscope_core::report::kernels::KernelReport;
use tokenscope_core::report::raw::{self, RawFile};

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
    tokenscope_core::page::compare::raw_names(&name)
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
pub fn write(path: &Path, text: &str, what: &str) -> anyhow::Result<()> {
    if path == Path::new("-") {
        print!("{text}");
        return Ok(());
    }
    std::fs::write(path, text)
        .with_context(|| format!("--{what} {}: cannot write the file", path.display()))
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
            let p = path.with_file_name(tokenscope_core::page::compare::kernels_name(&name));
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
