//! `tokenscope demo`: start the simulated server and benchmark it, in one command.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;

use crate::cmd::bench::BenchArgs;

/// Start the simulated inference server on a free loopback port and benchmark it
/// with the real client over real HTTP: a concurrency sweep with a knee, printed
/// as the summary table, with the report written to --dir.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Folder for the report files.
    #[arg(long, default_value = "tokenscope-demo")]
    pub dir: PathBuf,

    /// Smaller sweep (about 10 s).
    #[arg(long)]
    pub quick: bool,

    /// Skip the GPU kernel harness (it runs `tokenscope kernels --quick` when a GPU or
    /// a Vulkan driver such as Mesa lavapipe is present).
    #[arg(long)]
    pub no_kernels: bool,

    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Run the subcommand.
pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("--dir {}: cannot create the folder", args.dir.display()))?;
    // The server runs on its own runtime and threads, like a separate process.
    let sim = tokenscope_sim::SimConfig {
        itl_ms: 10.0,
        ttft_ms: 30.0,
        ..tokenscope_sim::SimConfig::default()
    };
    let url = crate::mock::start_in_thread(sim.clone(), None, Some(1))?;
    // Per round max(10, 2 x concurrency) requests (the bench default): enough waves at
    // every level without making c=1 the slowest part.
    let (levels, rounds, max_tokens) = if args.quick {
        ("1,8,32", 2, 24)
    } else {
        ("1,4,8,16,32", 3, 32)
    };
    if !args.quiet {
        eprintln!(
            "simulated server at {url} (continuous batching up to {} sequences, ITL {} ms at batch 1)",
            sim.max_batch, sim.itl_ms
        );
    }
    let out = args.dir.join("client.json");
    // Paths as they are (OsString): a folder name need not be UTF-8.
    let path = |name: &str| args.dir.join(name).into_os_string();
    let mut flags: Vec<OsString> = vec![
        "--url".into(),
        url.into(),
        "--api".into(),
        "chat".into(),
        "--concurrency".into(),
        levels.into(),
        "--rounds".into(),
        rounds.to_string().into(),
        "--max-tokens".into(),
        max_tokens.to_string().into(),
        "--ignore-eos".into(),
        "--slo".into(),
        "ttft_ms:p95<=500,tpot_ms:p95<=30".into(),
        "--grace".into(),
        "5s".into(),
        "--scrape-interval".into(),
        "1s".into(),
        "--json".into(),
        out.clone().into_os_string(),
        "--raw".into(),
        path("requests.jsonl"),
        "--csv".into(),
        path("client.csv"),
        "--markdown".into(),
        path("client.md"),
    ];
    if args.quiet {
        flags.push("--quiet".into());
    }
    let mut bench = bench_args(flags)?;
    // The report below prints the verdict, with the GPU's floor.
    bench.verdict_elsewhere = true;
    let code = crate::cmd::bench::run(bench)?;
    let kernels = if args.no_kernels {
        None
    } else {
        run_kernels(&args.dir, args.quiet)
    };
    let html = args.dir.join("report.html");
    let report = crate::cmd::report::ReportArgs {
        client: vec![out.clone()],
        raw: Vec::new(),
        kernels,
        model: None,
        model_config: None,
        gguf: None,
        quant: "f16".into(),
        context: 4096,
        gpu_memory: None,
        html: Some(html.clone()),
        out: None,
        markdown: Some(args.dir.join("report.md")),
        client_out: None,
        quality: None,
    };
    println!();
    crate::cmd::report::run(report)?;
    println!(
        "\nopen {} (the full report); client data in {} and, per request, {}",
        html.display(),
        out.display(),
        args.dir.join("requests.jsonl").display()
    );
    Ok(code)
}

/// `bench`'s arguments from its flags, through its own parser: every flag the
/// demo does not set takes the default `tokenscope bench --help` shows.
fn bench_args(flags: Vec<OsString>) -> anyhow::Result<BenchArgs> {
    #[derive(clap::Parser)]
    struct Bench {
        #[command(flatten)]
        args: BenchArgs,
    }
    use clap::Parser as _;
    let argv = std::iter::once(OsString::from("bench")).chain(flags);
    Ok(Bench::try_parse_from(argv)?.args)
}

/// `tokenscope kernels --quick` as a child process (a GPU driver failure cannot take
/// the demo down). `None`, with a note, when there is no adapter or it fails.
fn run_kernels(dir: &std::path::Path, quiet: bool) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let out = dir.join("kernels.json");
    if !quiet {
        eprintln!("\nrunning the GPU kernel harness (tokenscope kernels --quick)...");
    }
    let status = std::process::Command::new(exe)
        .args([
            "kernels",
            "--quick",
            "--models",
            "llama-3.1-8b,gemma-3-270m",
            "--json",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(if quiet {
            std::process::Stdio::null()
        } else {
            std::process::Stdio::inherit()
        })
        .status();
    match status {
        Ok(s) if s.success() => {
            // Say so when the harness fell back to the CPU (GL llvmpipe without a
            // Vulkan driver): its figures are not a GPU's.
            let note = std::fs::read_to_string(&out)
                .ok()
                .and_then(|t| tokenscope_kernel_report::KernelReport::from_json(&t).ok())
                .and_then(|k| k.adapter.fallback_note());
            if let (Some(note), false) = (note, quiet) {
                eprintln!("note: {note}");
            }
            Some(out)
        }
        _ => {
            eprintln!(
                "note: the GPU kernel harness did not run (no GPU or Vulkan driver? see `tokenscope kernels --help`); the report covers the client only"
            );
            None
        }
    }
}
