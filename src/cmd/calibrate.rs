//! `tokenscope calibrate`: how much load can this machine's client measure
//! faithfully? Runs the simulated server and the real client over loopback at
//! rising concurrency and compares every inter-token gap the client saw with the
//! gap the server logged when it sent the chunks (server truth).

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use tokenscope_core::analyze::stats::percentile;
use tokenscope_core::measure::openai::Api;
use tokenscope_core::render::fmt::fmt_ms;
use tokenscope_core::render::table::text_table;
use tokenscope_core::sim::SimConfig;

use crate::engine::{self, BenchConfig, LoadPlan, PerLevel, Prompts};
use crate::util::parse_u32_list;

/// Measure the client's own timing error against server truth at rising
/// concurrency, and report the largest concurrency whose ITL p99 error stays
/// under the bound. The server runs on the same machine, so the figure is a lower
/// bound for a client driving a remote server.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Concurrency levels to try.
    #[arg(long, default_value = "1,16,64,128,256,512")]
    pub levels: String,

    /// Tokens per request.
    #[arg(long, default_value_t = 48)]
    pub max_tokens: u32,

    /// Simulated decode step (ITL), ms.
    #[arg(long, default_value_t = 20.0)]
    pub itl_ms: f64,

    /// The error bound on ITL p99, ms.
    #[arg(long, default_value_t = 1.0)]
    pub bound_ms: f64,

    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

struct Row {
    c: u32,
    gaps: usize,
    itl_err_p50: f64,
    itl_err_p99: f64,
    ttft_err_p50: f64,
    ok: bool,
}

/// Run the subcommand.
pub fn run(args: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let levels = parse_u32_list(&args.levels).map_err(|e| anyhow::anyhow!("--levels: {e}"))?;
    let max_c = *levels.iter().max().expect("non-empty list");
    let dir = std::env::temp_dir().join(format!("tokenscope-calibrate-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let server_log = dir.join("server.jsonl");
    let sim = SimConfig {
        itl_ms: args.itl_ms,
        ttft_ms: 10.0,
        jitter_ms: 0.0,
        step_growth: 0.0,
        max_batch: max_c,
        ..SimConfig::default()
    };
    let url = crate::mock::start_in_thread(sim, Some(&server_log), None)?;
    let rt = super::runtime()?;
    let mut rows = Vec::new();
    for &c in &levels {
        let raw = dir.join(format!("raw-{c}.jsonl"));
        let cfg = BenchConfig {
            base_url: crate::util::parse_base_url(&url)
                .map_err(anyhow::Error::msg)?
                .0,
            api: Api::Completions,
            model: None,
            api_key: None,
            load: LoadPlan::Concurrency(vec![c]),
            per_level: PerLevel::Requests(u64::from(c.max(8)) * 2),
            rounds: 1,
            warmup: Some(c),
            prompts: Prompts::Synthetic {
                tokens: crate::engine::InputLength::Tokens(16),
            },
            max_tokens: args.max_tokens,
            ignore_eos: true,
            min_tokens: None,
            temperature: None,
            timeout: Duration::from_secs(120),
            slos: Vec::new(),
            stall_threshold_ms: 250.0,
            seed: u64::from(c),
            label: None,
            snapshot_interval: None,
            preflight: false,
            grace: Duration::from_secs(5),
            raw: Some(raw.clone()),
            progress: !args.quiet,
            sample_cap: tokenscope_core::analyze::stats::DEFAULT_SAMPLE_CAP,
            server_metrics: engine::scrape::ServerMetrics::Off,
            gpu_metrics: None,
            scrape_interval: Duration::from_secs(1),
            metrics_send_key: false,
            tokenizer: crate::engine::tokenize::TokenizerChoice::Approx,
            tokens: None,
            context_window: None,
            ramp: None,
            shared_prefix: None,
            conversation: None,
            prompt_tier: None,
            shard: None,
            start_at: None,
            metrics_listen: None,
            metrics_linger: Duration::ZERO,
            remote_write: None,
        };
        rt.block_on(async {
            let pre = engine::preflight::check(&cfg).await?;
            engine::run(cfg, pre).await
        })?;
        // Let the server's log writer catch up.
        std::thread::sleep(Duration::from_millis(300));
        let row = compare(c, &raw, &server_log, args.bound_ms)?;
        if !args.quiet {
            eprintln!(
                "c={c}: ITL error p99 {} ms over {} gaps",
                fmt_ms(Some(row.itl_err_p99)),
                row.gaps
            );
        }
        rows.push(row);
    }
    let headers: Vec<String> = [
        "concurrency",
        "gaps",
        "ITL |err| p50",
        "ITL |err| p99",
        "TTFT err p50",
        "within bound",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.c.to_string(),
                r.gaps.to_string(),
                format!("{:.3}", r.itl_err_p50),
                format!("{:.3}", r.itl_err_p99),
                format!("{:.3}", r.ttft_err_p50),
                if r.ok { "yes" } else { "no" }.into(),
            ]
        })
        .collect();
    print!("{}", text_table(&headers, &table));
    println!("(errors in ms: client-measured minus server-logged; the server shares this machine)");
    let best = rows.iter().take_while(|r| r.ok).last().map(|r| r.c);
    match best {
        Some(c) => println!(
            "largest concurrency with ITL p99 error under {} ms on this machine: {c}",
            args.bound_ms
        ),
        None => println!("no level kept the ITL p99 error under {} ms", args.bound_ms),
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(ExitCode::SUCCESS)
}

fn read_lines(path: &Path) -> anyhow::Result<Vec<serde_json::Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

fn times(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
        .unwrap_or_default()
}

fn compare(c: u32, raw: &Path, server_log: &Path, bound_ms: f64) -> anyhow::Result<Row> {
    let server = read_lines(server_log)?;
    let by_id: HashMap<&str, &serde_json::Value> = server
        .iter()
        .filter_map(|s| Some((s.get("request_id")?.as_str()?, s)))
        .collect();
    let mut itl_err = Vec::new();
    let mut ttft_err = Vec::new();
    for r in read_lines(raw)?.iter().skip(1) {
        if r["warmup"] == true || r["outcome"]["status"] != "ok" {
            continue;
        }
        let Some(s) = r["request_id"].as_str().and_then(|id| by_id.get(id)) else {
            continue;
        };
        let ct = times(&r["token_events_ms"]);
        let st = times(&s["chunk_times_ms"]);
        if ct.len() != st.len() || ct.is_empty() {
            continue;
        }
        for (cw, sw) in ct.windows(2).zip(st.windows(2)) {
            itl_err.push(((cw[1] - cw[0]) - (sw[1] - sw[0])).abs());
        }
        if let (Some(ts), Some(tr)) = (r["t_send_ms"].as_f64(), s["t_received_ms"].as_f64()) {
            ttft_err.push((ct[0] - ts) - (st[0] - tr));
        }
    }
    anyhow::ensure!(
        !itl_err.is_empty(),
        "c={c}: no request could be matched with the server log"
    );
    let p99 = percentile(&itl_err, 0.99).unwrap_or(f64::NAN);
    Ok(Row {
        c,
        gaps: itl_err.len(),
        itl_err_p50: percentile(&itl_err, 0.5).unwrap_or(f64::NAN),
        itl_err_p99: p99,
        ttft_err_p50: percentile(&ttft_err, 0.5).unwrap_or(f64::NAN),
        ok: p99 < bound_ms,
    })
}
