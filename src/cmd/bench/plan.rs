//! What `bench` runs (the configuration at each tier) and where its reports go.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tokenscope_core::report::ClientReport;
use tokenscope_render as render;
use tokenscope_workload::tokens::Tier;

use tokenscope_loadgen::{BenchConfig, Prompts};

/// What `bench` runs: the configuration at each tier, in turn.
#[derive(Debug)]
pub struct Plan {
    /// The first tier's configuration; the others differ only in prompt length
    /// and `max_tokens`.
    pub cfg: BenchConfig,
    /// The input x output tiers (one: no tiers).
    pub tiers: Vec<Tier>,
    /// Synthetic prompts (a tier's input length applies).
    pub(super) synthetic: bool,
    /// A prompts file whose prompts each tier picks by length.
    pub(super) pick_by_length: bool,
    /// The quality checks after the sweep (`--quality`).
    pub quality: Option<QualityPlan>,
    /// The run's own gates (`--max-error-rate`, `--allow-unevaluated`).
    pub gates: super::outcome::RunGates,
}

/// The quality checks after the sweep: `tokenscope quality`'s settings with the
/// bench's endpoint as the candidate (its model and key filled in at run time).
pub struct QualityPlan {
    /// The settings (`--ref` is `--quality`, `--cand` the bench's URL).
    pub args: crate::cmd::quality::QualityArgs,
    /// `--fail-on`.
    pub gates: Vec<tokenscope_quality::report::Gate>,
    /// Where the report goes: `X.quality.json` beside `--json X.json`.
    pub json: Option<PathBuf>,
}

impl std::fmt::Debug for QualityPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // (Never the key.)
        f.debug_struct("QualityPlan")
            .field(
                "reference",
                &tokenscope_measure::parse::redact_url(&self.args.reference),
            )
            .field("gates", &self.gates)
            .field("json", &self.json)
            .finish()
    }
}

impl Plan {
    /// The configuration at tier `i`, with its raw file named for the tier when
    /// there are several.
    pub fn tier_config(&self, i: usize) -> BenchConfig {
        let t = self.tiers[i];
        let mut cfg = self.cfg.clone();
        cfg.max_tokens = t.max_tokens;
        if self.synthetic {
            cfg.prompts = Prompts::Synthetic { tokens: t.input };
        }
        if self.pick_by_length {
            cfg.prompt_tier = t.input.tokens();
        }
        if self.tiers.len() > 1 {
            cfg.raw = cfg.raw.map(|p| tier_path(&p, &t));
        }
        cfg
    }
}

/// `report.json` -> `report.quality.json` (`page::compare::quality_name`).
pub fn quality_path(report: &Path) -> PathBuf {
    let name = report
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    report.with_file_name(tokenscope_render::page::compare::quality_name(&name))
}

/// `report.json` -> `report.in256-out128.json`; a raw file keeps its
/// `.raw.jsonl` last (`report.in256-out128.raw.jsonl`), the name `compare`
/// and `report` look for beside the tier's report.
fn tier_path(path: &Path, tier: &Tier) -> PathBuf {
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (stem, ext) = match name.strip_suffix(".raw.jsonl") {
        Some(stem) => (stem.to_owned(), Some("raw.jsonl".to_owned())),
        None => (
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            path.extension().map(|e| e.to_string_lossy().into_owned()),
        ),
    };
    let name = match ext {
        Some(ext) => format!("{stem}.{}.{ext}", tier.label()),
        None => format!("{stem}.{}", tier.label()),
    };
    path.with_file_name(name)
}

/// What `bench` keeps.
#[derive(Debug, Clone, PartialEq)]
pub enum Save {
    /// What the output flags name (`--out`, `--raw`, `--csv`, `--markdown`).
    Given,
    /// No output flag: a new folder under this one ([`results_folder`]).
    Folder(PathBuf),
    /// Nothing (`--no-save`).
    Nothing,
}

impl Save {
    /// From the flags; `env_dir` is `TOKENSCOPE_RESULTS_DIR`.
    pub fn of(args: &super::BenchArgs, env_dir: Option<PathBuf>) -> Self {
        if args.no_save {
            Save::Nothing
        } else if args.json.is_some()
            || args.out.is_some()
            || args.raw.is_some()
            || args.csv.is_some()
            || args.markdown.is_some()
        {
            Save::Given
        } else {
            Save::Folder(
                args.results_dir
                    .clone()
                    .or(env_dir.filter(|d| !d.as_os_str().is_empty()))
                    .unwrap_or_else(|| PathBuf::from(RESULTS_DIR)),
            )
        }
    }
}

/// The results folder's parent when none is named.
pub const RESULTS_DIR: &str = "tokenscope-results";

/// A new folder for this run's results under `parent`, named for the time
/// (UTC, `2026-12-06T07-41-55Z`; `-2`, `-3`... when taken), created.
pub fn results_folder(parent: &Path, rfc3339: &str) -> anyhow::Result<PathBuf> {
    // `2026-12-06T07:41:55.123Z` -> `2026-12-06T07-41-55Z` (no `:` in a file name).
    let secs = rfc3339.split('.').next().unwrap_or(rfc3339);
    let stamp = format!("{}Z", secs.trim_end_matches('Z').replace(':', "-"));
    std::fs::create_dir_all(parent).with_context(|| {
        format!(
            "--results-dir {}: cannot create the folder",
            parent.display()
        )
    })?;
    for n in 1..1000 {
        let dir = match n {
            1 => parent.join(&stamp),
            n => parent.join(format!("{stamp}-{n}")),
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "--results-dir {}: cannot create a folder in it",
                        parent.display()
                    )
                });
            }
        }
    }
    anyhow::bail!(
        "--results-dir {}: every name for {stamp} is taken",
        parent.display()
    )
}

/// Where the report goes.
#[derive(Debug, Default, Clone)]
pub struct Outputs {
    /// JSON.
    pub json: Option<PathBuf>,
    /// CSV.
    pub csv: Option<PathBuf>,
    /// Markdown.
    pub markdown: Option<PathBuf>,
}

impl Outputs {
    /// The same outputs, named for `tier`.
    pub(super) fn for_tier(&self, tier: &Tier) -> Self {
        let name = |p: &Option<PathBuf>| p.as_deref().map(|p| tier_path(p, tier));
        Self {
            json: name(&self.json),
            csv: name(&self.csv),
            markdown: name(&self.markdown),
        }
    }

    /// The outputs of a results folder: `report.json`, `report.md`.
    pub(super) fn in_folder(dir: &Path) -> Self {
        Self {
            json: Some(dir.join("report.json")),
            csv: None,
            markdown: Some(dir.join("report.md")),
        }
    }

    /// The raw file of a results folder, beside `report.json` under the name
    /// `compare` and `report` look for (`page::compare::raw_names`).
    pub(super) fn raw_in_folder(dir: &Path) -> PathBuf {
        dir.join(&tokenscope_render::page::compare::raw_names("report.json")[0])
    }

    /// The files written, for the closing lines.
    pub(super) fn paths(&self) -> Vec<&Path> {
        [&self.json, &self.csv, &self.markdown]
            .into_iter()
            .filter_map(|p| p.as_deref())
            .collect()
    }

    /// Write every requested export.
    pub fn write(&self, report: &ClientReport) -> anyhow::Result<()> {
        use crate::cmd::output::write_file;
        if let Some(p) = &self.json {
            write_file("--json", p, &(report.to_json() + "\n"))?;
        }
        if let Some(p) = &self.csv {
            write_file("--csv", p, &render::client::csv(report))?;
        }
        if let Some(p) = &self.markdown {
            write_file("--markdown", p, &render::client::markdown(report))?;
        }
        Ok(())
    }
}
