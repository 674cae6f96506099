//! `tokenscope report`: one report from client runs (native and/or browser), the
//! GPU kernels and the model being served.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use tokenscope_core::analyze::verdict;
use tokenscope_core::report::ClientReport;
use tokenscope_core::report::combined::{ModelChoice, ReportInput};
use tokenscope_hw::floor::{ModelShape, Quant};
use tokenscope_kernel_report::{GgufReport, KernelReport};
use tokenscope_quality::report::QualityReport;
use tokenscope_render as render;
use tokenscope_render::combined;

/// Combine client reports (native and/or browser) with a GPU kernels report into
/// one verdict, diagnosis and set of charts: a self-contained HTML file and/or
/// Markdown.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
  tokenscope report --client client.json --html report.html
  tokenscope report --client native.json --client browser.json --kernels kernels.json \\
      --model llama-3.1-8b --quant q4_0 --context 4096 --html report.html --markdown report.md
  tokenscope report --client report.in*.json --html tiers.html   # a tiered bench's reports
  tokenscope report --raw requests.jsonl --markdown -      # a report from a raw file alone
  tokenscope report --raw requests.jsonl --client-out client.json   # the client report rebuilt")]
pub struct ReportArgs {
    /// Client reports (tokenscope.client/1) from `bench --json` or the page's
    /// export: one or more after the flag, or the flag repeated (a tiered
    /// bench's reports: `--client report.in*.json`).
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub client: Vec<PathBuf>,

    /// A raw per-request file (`bench --raw`): the client report is rebuilt from it.
    #[arg(long, value_name = "FILE")]
    pub raw: Vec<PathBuf>,

    /// A kernels report (tokenscope.kernels/1) from `tokenscope kernels --json`.
    #[arg(long, value_name = "FILE")]
    pub kernels: Option<PathBuf>,

    /// The model being served: a preset name (for the TPOT floor).
    #[arg(long, value_name = "NAME", conflicts_with = "model_config")]
    pub model: Option<String>,

    /// The model being served: a Hugging Face config.json.
    #[arg(long, value_name = "FILE", conflicts_with = "gguf")]
    pub model_config: Option<PathBuf>,

    /// The model being served: the GGUF file itself (its header is read). With
    /// --kernels, the floor is this file's on that GPU, each tensor type at its
    /// own GEMV's bandwidth (--quant is the file's).
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    pub gguf: Option<PathBuf>,

    /// Its weight format: f16, q8_0 or q4_0.
    #[arg(long, default_value = "f16")]
    pub quant: String,

    /// Context length at which to evaluate the floor (KV cache read per token).
    #[arg(long, default_value_t = 4096)]
    pub context: u64,

    /// The GPU's memory (e.g. 80GiB): adds the KV-cache plan of --model at
    /// --context (f16 KV cache, 0.9 of the memory, as vLLM).
    #[arg(long, value_name = "SIZE")]
    pub gpu_memory: Option<String>,

    /// Write the HTML report here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// The old spelling of --html (kept for one release).
    #[arg(long, value_name = "FILE", hide = true, conflicts_with = "html")]
    pub out: Option<PathBuf>,

    /// Write the Markdown report here (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// A quality report (tokenscope.quality/1) from `tokenscope quality --json`
    /// or `bench --quality` (found beside a `--client X.json` as
    /// `X.quality.json` when not given): its figures and verdict join the report.
    #[arg(long, value_name = "FILE")]
    pub quality: Option<PathBuf>,

    /// Write the client report rebuilt from the one --raw file here
    /// (tokenscope.client/1: the same levels, sweep and warnings as the run's).
    #[arg(long, value_name = "FILE")]
    pub client_out: Option<PathBuf>,
}

fn read(path: &Path, what: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .with_context(|| format!("--{what} {}: cannot read the file", path.display()))
}

/// Load and validate every input.
pub fn inputs(args: &ReportArgs) -> anyhow::Result<ReportInput> {
    if args.client.is_empty()
        && args.raw.is_empty()
        && args.kernels.is_none()
        && args.quality.is_none()
    {
        anyhow::bail!(
            "nothing to report: give --client FILE, --raw FILE, --kernels FILE and/or --quality FILE"
        );
    }
    let mut clients = Vec::new();
    for p in &args.client {
        let text = read(p, "client")?;
        clients.push(
            ClientReport::from_json(&text)
                .map_err(|e| anyhow::anyhow!("--client {}: {e}", p.display()))?,
        );
    }
    for p in &args.raw {
        let text = read(p, "raw")?;
        let raw = tokenscope_core::report::raw::parse(&text)
            .map_err(|e| anyhow::anyhow!("--raw {}: {e}", p.display()))?;
        clients.push(tokenscope_core::report::raw::rebuild_report(&raw));
    }
    let mut kernels = match &args.kernels {
        Some(p) => Some(
            KernelReport::from_json(&read(p, "kernels")?)
                .map_err(|e| anyhow::anyhow!("--kernels {}: {e}", p.display()))?,
        ),
        None => None,
    };
    let quant: Quant = args
        .quant
        .parse()
        .map_err(|e| anyhow::anyhow!("--quant {:?}: {e}", args.quant))?;
    if args.context == 0 {
        anyhow::bail!("--context: 0 must be at least 1");
    }
    let mut quant = quant;
    let shape = match (&args.model, &args.model_config, &args.gguf) {
        (None, None, Some(path)) => {
            let file = crate::gguf_file::GgufFile::open(path)?;
            let bad = |e: tokenscope_hw::gguf::GgufError| {
                anyhow::anyhow!("--gguf {}: {e}", path.display())
            };
            let model = file.header.model().map_err(bad)?;
            let mut section = GgufReport::new(
                &file.name(),
                &file.header,
                model.clone(),
                file.header_sha256.clone(),
                &[args.context],
                Quant::F16,
            );
            if let Some(k) = kernels.as_mut() {
                section.measure(k);
                k.gguf = Some(section.clone());
            }
            quant = section.main_quant();
            Some(model.to_model_shape(&file.header).map_err(bad)?)
        }
        (Some(name), _, _) => {
            Some(ModelShape::preset(name).map_err(|e| anyhow::anyhow!("--model {name:?}: {e}"))?)
        }
        (None, Some(p), _) => Some(tokenscope_loadgen::util::model_from_config(
            p,
            "--model-config",
        )?),
        (None, None, None) => None,
    };
    let gpu_memory_bytes = match &args.gpu_memory {
        Some(s) => Some(
            tokenscope_measure::parse::parse_bytes(s)
                .map_err(|e| anyhow::anyhow!("--gpu-memory {e}"))?,
        ),
        None => None,
    };
    if gpu_memory_bytes.is_some() && shape.is_none() {
        anyhow::bail!("--gpu-memory: the KV-cache plan needs --model or --model-config");
    }
    Ok(ReportInput {
        clients,
        kernels,
        model: shape.map(|shape| ModelChoice {
            shape,
            quant,
            context: args.context,
            gpu_memory_bytes,
        }),
    })
}

/// The quality report: `--quality`, else one kept beside a client report.
fn quality(args: &ReportArgs) -> anyhow::Result<Option<QualityReport>> {
    let path = match &args.quality {
        Some(p) => p.clone(),
        None => match args
            .client
            .iter()
            .map(|c| crate::cmd::bench::quality_path(c))
            .find(|p| p.is_file())
        {
            Some(p) => p,
            None => return Ok(None),
        },
    };
    crate::cmd::quality::read_report(&path, "--quality").map(Some)
}

/// Run the subcommand.
pub fn run(mut args: ReportArgs) -> anyhow::Result<ExitCode> {
    args.html = super::output::renamed(args.html.take(), args.out.take(), "--out", "--html");
    let input = inputs(&args)?;
    let quality = quality(&args)?;
    let analysis = verdict::analyze(&input);
    let markdown = || {
        let mut md = combined::markdown(&input, &analysis);
        if let Some(q) = &quality {
            md.push('\n');
            md.push_str(&render::quality::markdown(q));
        }
        md
    };
    // A kernels report alone, to the terminal: the kernels' own tables (as
    // `tokenscope kernels` prints them), not a serving verdict without a run.
    if input.clients.is_empty()
        && input.model.is_none()
        && quality.is_none()
        && args.html.is_none()
        && args.markdown.is_none()
        && let Some(k) = &input.kernels
    {
        print!("{}", render::kernels::text(k));
        println!(
            "(a kernels report alone: --client or --raw adds the serving side, --model the TPOT against the floor)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut wrote = false;
    if let Some(p) = &args.client_out {
        let [_] = args.raw.as_slice() else {
            anyhow::bail!(
                "--client-out: give exactly one --raw FILE (got {})",
                args.raw.len()
            );
        };
        let rebuilt = input.clients.last().expect("the --raw file's report");
        super::output::write("--client-out", p, &(rebuilt.to_json() + "\n"))?;
        wrote = true;
    }
    if let Some(p) = &args.html {
        let mut html = combined::html(&input, &analysis);
        if let Some(q) = &quality {
            // The quality section before the document's end.
            let at = html.rfind("</body>").unwrap_or(html.len());
            html.insert_str(at, &render::quality::html(q));
        }
        super::output::write("--html", p, &html)?;
        wrote = true;
    }
    match &args.markdown {
        Some(p) => {
            super::output::write("--markdown", p, &markdown())?;
            wrote = p.as_os_str() != "-";
        }
        None if !wrote => print!("{}", markdown()),
        None => {}
    }
    // The verdict on the terminal either way.
    if wrote {
        for v in &analysis.verdict {
            println!("{v}");
        }
        for v in quality.iter().flat_map(|q| &q.verdict) {
            println!("{v}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
