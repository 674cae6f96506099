//! `tokenscope calibrate`: how much load can this machine's client measure
//! faithfully? Runs the simulated server (as a child process, `tokenscope mock`)
//! and the real client over loopback at rising concurrency, compares every
//! inter-token gap the client saw with the gap the server logged when it sent the
//! chunks (server truth), and measures the client's own CPU per token.

use std::collections::HashMap;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use tokenscope_measure::openai::Api;
use tokenscope_render::table::text_table;
use tokenscope_stats::fmt::fmt_ms;
use tokenscope_stats::stats::percentile;

use tokenscope_loadgen::util::{parse_u32_list, process_cpu_s};
use tokenscope_loadgen::{self as loadgen, BenchConfig, LoadPlan, PerLevel, Prompts};

/// Measure the client's own timing error against server truth at rising
/// concurrency, and report the largest concurrency whose ITL p99 error stays
/// under the bound, with the client's CPU cost per token and its faithful
/// capacity per core. The server runs on the same machine, so the figures are a
/// lower bound for a client driving a remote server.
#[derive(Debug, Args)]
#[command(after_help = "PER LEVEL:
  events/s, tokens/s  content events and output tokens the client parsed, over the
                      level's wall time (warm-up and measured requests together)
  client cores        the client process's CPU seconds over that wall time (1.0 =
                      one core fully busy); the server runs as a child process
                      (tokenscope mock), so its CPU is not counted
  CPU-us/token        the client's CPU microseconds per output token: HTTP, SSE
                      parsing, timing and recording, the whole process

FAITHFUL CAPACITY PER CORE:
  At the largest level within the bound: its tokens/s (events/s) divided by its
  client cores, i.e. output tokens (events) per client CPU-second. It is the
  tokens/s one fully busy core could parse while keeping the ITL p99 error under
  the bound, extrapolated linearly from that level; 1e6 / CPU-us per token.

PINNING:
  Where the process may use 2 CPUs or more (and taskset is installed), the client
  is pinned to the first allowed CPU and the server to the others (--no-pin: not).

EXAMPLES:
  tokenscope calibrate
  tokenscope calibrate --levels 1,16,64 --max-tokens 64 --itl-ms 5 --json calibrate.json")]
pub struct CalibrateArgs {
    /// Concurrency levels to try.
    #[arg(
        long,
        default_value = "1,16,64,128,256,512",
        allow_hyphen_values = true
    )]
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

    /// Write the figures (per level and the capacity per core) as JSON
    /// (`tokenscope.calibrate/1`, see docs/cli.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Pin neither the client nor the server to CPUs.
    #[arg(long)]
    pub no_pin: bool,

    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// What the client did during one level: its CPU, and what it parsed.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Cost {
    /// The level's wall time (the load generator's run, preflight excluded), s.
    wall_s: f64,
    /// The client process's CPU time over it (user + system), s.
    client_cpu_s: f64,
    /// `client_cpu_s / wall_s`.
    client_cores: f64,
    /// Content events parsed (every request of the level, warm-up included).
    events: u64,
    /// Output tokens received (`usage.completion_tokens`, else events).
    tokens: u64,
    events_per_s: f64,
    tokens_per_s: f64,
    /// Client CPU microseconds per output token.
    cpu_us_per_token: f64,
}

#[derive(serde::Serialize)]
struct Row {
    #[serde(rename = "concurrency")]
    c: u32,
    gaps: usize,
    #[serde(rename = "itl_err_p50_ms")]
    itl_err_p50: f64,
    #[serde(rename = "itl_err_p99_ms")]
    itl_err_p99: f64,
    #[serde(rename = "ttft_err_p50_ms")]
    ttft_err_p50: f64,
    #[serde(rename = "within_bound")]
    ok: bool,
    #[serde(flatten)]
    cost: Option<Cost>,
}

/// Which CPUs the client and the server were pinned to.
#[derive(Debug, Clone, serde::Serialize)]
struct Pinning {
    client_cpus: Vec<u32>,
    server_cpus: Vec<u32>,
}

/// The simulated server, a child process, killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run the subcommand.
pub fn run(args: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let levels = parse_u32_list(&args.levels).map_err(|e| anyhow::anyhow!("--levels: {e}"))?;
    let max_c = *levels.iter().max().expect("non-empty list");
    let dir = std::env::temp_dir().join(format!("tokenscope-calibrate-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let server_log = dir.join("server.jsonl");
    let result = calibrate(&args, &levels, max_c, &dir, &server_log);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn calibrate(
    args: &CalibrateArgs,
    levels: &[u32],
    max_c: u32,
    dir: &Path,
    server_log: &Path,
) -> anyhow::Result<ExitCode> {
    // Pin before the client's runtime starts its threads: they inherit the mask.
    let (pinning, pin_note) = pin_plan(args.no_pin);
    if let Some(p) = &pinning {
        pin_self(&p.client_cpus)?;
    }
    let server = start_server(args, max_c, server_log, pinning.as_ref())?;
    let rt = super::runtime()?;
    let mut rows = Vec::new();
    for &c in levels {
        let raw = dir.join(format!("raw-{c}.jsonl"));
        let cfg = BenchConfig {
            base_url: tokenscope_loadgen::util::parse_base_url(&server.url)
                .map_err(anyhow::Error::msg)?
                .0,
            api: Api::Completions,
            model: None,
            api_key: None,
            http: Default::default(),
            load: LoadPlan::Concurrency(vec![c]),
            per_level: PerLevel::Requests(u64::from(c.max(8)) * 2),
            rounds: 1,
            warmup: Some(c),
            prompts: Prompts::Synthetic {
                tokens: tokenscope_loadgen::InputLength::Tokens(16),
            },
            max_tokens: args.max_tokens,
            ignore_eos: true,
            min_tokens: None,
            temperature: None,
            timeout: Duration::from_secs(120),
            slos: Vec::new(),
            slo_classes: Vec::new(),
            images: Vec::new(),
            image_format: Default::default(),
            stall_threshold_ms: 250.0,
            seed: u64::from(c),
            label: None,
            snapshot_interval: None,
            preflight: false,
            grace: Duration::from_secs(5),
            raw: Some(raw.clone()),
            progress: !args.quiet,
            sample_cap: tokenscope_stats::stats::DEFAULT_SAMPLE_CAP,
            server_metrics: loadgen::scrape::ServerMetrics::Off,
            gpu_metrics: None,
            price: None,
            continuous_usage: false,
            answer: None,
            scrape_interval: Duration::from_secs(1),
            metrics_send_key: false,
            tokenizer: tokenscope_loadgen::TokenizerChoice::Approx,
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
        // The client's CPU and wall time over the load generator's run (warm-up and
        // measured requests, building the report, writing the raw records).
        let (cpu, wall) = rt.block_on(async {
            let pre = loadgen::preflight::check(&cfg).await?;
            let cpu0 = process_cpu_s();
            let t0 = Instant::now();
            loadgen::run(cfg, pre).await?;
            let wall = t0.elapsed().as_secs_f64();
            anyhow::Ok((cpu0.zip(process_cpu_s()).map(|(a, b)| b - a), wall))
        })?;
        // Let the server's log writer catch up.
        std::thread::sleep(Duration::from_millis(300));
        let mut row = compare(c, &raw, server_log, args.bound_ms)?;
        row.cost = cpu.map(|cpu| cost(&raw, cpu, wall)).transpose()?;
        if !args.quiet {
            eprintln!(
                "c={c}: ITL error p99 {} ms over {} gaps",
                fmt_ms(Some(row.itl_err_p99)),
                row.gaps
            );
        }
        rows.push(row);
    }
    drop(server);
    let headers: Vec<String> = [
        "concurrency",
        "gaps",
        "ITL |err| p50",
        "ITL |err| p99",
        "TTFT err p50",
        "within bound",
        "events/s",
        "tokens/s",
        "client cores",
        "CPU-us/token",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let dash = || "-".to_owned();
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let k = r.cost.as_ref();
            vec![
                r.c.to_string(),
                r.gaps.to_string(),
                format!("{:.3}", r.itl_err_p50),
                format!("{:.3}", r.itl_err_p99),
                format!("{:.3}", r.ttft_err_p50),
                if r.ok { "yes" } else { "no" }.into(),
                k.map_or_else(dash, |k| format!("{:.0}", k.events_per_s)),
                k.map_or_else(dash, |k| format!("{:.0}", k.tokens_per_s)),
                k.map_or_else(dash, |k| format!("{:.3}", k.client_cores)),
                k.map_or_else(dash, |k| format!("{:.2}", k.cpu_us_per_token)),
            ]
        })
        .collect();
    print!("{}", text_table(&headers, &table));
    println!("(errors in ms: client-measured minus server-logged; the server shares this machine)");
    println!("{pin_note}");
    let best = rows.iter().take_while(|r| r.ok).last();
    match best {
        Some(r) => println!(
            "largest concurrency with ITL p99 error under {} ms on this machine: {}",
            args.bound_ms, r.c
        ),
        None => println!("no level kept the ITL p99 error under {} ms", args.bound_ms),
    }
    let capacity = best.and_then(|r| r.cost).and_then(|k| Capacity::of(&k));
    match (&capacity, best) {
        (Some(k), Some(r)) => println!(
            "faithful capacity: ~{} tokens/s ({} events/s) per client core at ITL p99 error < {} ms \
             (c={}); client cost {:.2} CPU-us per token",
            sig3(k.tokens_per_s),
            sig3(k.events_per_s),
            args.bound_ms,
            r.c,
            k.cpu_us_per_token
        ),
        _ => {
            let last = rows.last().and_then(|r| r.cost.map(|k| (r.c, k)));
            match last.filter(|(_, k)| k.cpu_us_per_token.is_finite()) {
                Some((c, k)) => println!(
                    "faithful capacity: not measured (no level within the bound, or no CPU \
                     time read); client cost {:.2} CPU-us per token at c={c}",
                    k.cpu_us_per_token
                ),
                None => println!(
                    "faithful capacity: not measured (no level within the bound, or no CPU \
                     time read)"
                ),
            }
        }
    }
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "schema": "tokenscope.calibrate/1",
            "bound_ms": args.bound_ms,
            "itl_ms": args.itl_ms,
            "max_tokens": args.max_tokens,
            "pinning": pinning,
            "levels": rows,
            "faithful_concurrency": best.map(|r| r.c),
            "capacity_per_core": capacity,
        });
        super::output::write_file(
            "--json",
            path,
            &(serde_json::to_string_pretty(&doc)? + "\n"),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The faithful capacity of one client core, from the largest level within the bound.
#[derive(Debug, serde::Serialize)]
struct Capacity {
    /// Output tokens per client CPU-second (tokens/s / client cores).
    tokens_per_s: f64,
    /// Content events per client CPU-second.
    events_per_s: f64,
    /// Client CPU microseconds per output token at that level.
    cpu_us_per_token: f64,
}

impl Capacity {
    fn of(k: &Cost) -> Option<Self> {
        (k.client_cpu_s > 0.0 && k.tokens > 0).then(|| Self {
            tokens_per_s: k.tokens as f64 / k.client_cpu_s,
            events_per_s: k.events as f64 / k.client_cpu_s,
            cpu_us_per_token: k.cpu_us_per_token,
        })
    }
}

/// Three significant figures, as an integer where it is one (12345 -> 12300).
fn sig3(x: f64) -> String {
    if !x.is_finite() || x <= 0.0 {
        return format!("{x}");
    }
    let digits = x.log10().floor() as i32;
    if digits >= 2 {
        let unit = 10f64.powi(digits - 2);
        format!("{:.0}", (x / unit).round() * unit)
    } else {
        format!("{:.*}", (2 - digits) as usize, x)
    }
}

/// What the client parsed during a level (every request in its raw records, warm-up
/// included: the CPU time covers them all) against its CPU and wall time.
fn cost(raw: &Path, cpu_s: f64, wall_s: f64) -> anyhow::Result<Cost> {
    let mut events = 0u64;
    let mut tokens = 0u64;
    for r in read_lines(raw)?.iter().skip(1) {
        let Some(ev) = r["token_events_ms"].as_array().map(|a| a.len() as u64) else {
            continue;
        };
        events += ev;
        tokens += r["usage"]["completion_tokens"].as_u64().unwrap_or(ev);
    }
    let per_s = |n: u64| if wall_s > 0.0 { n as f64 / wall_s } else { 0.0 };
    Ok(Cost {
        wall_s,
        client_cpu_s: cpu_s,
        client_cores: if wall_s > 0.0 { cpu_s / wall_s } else { 0.0 },
        events,
        tokens,
        events_per_s: per_s(events),
        tokens_per_s: per_s(tokens),
        cpu_us_per_token: if tokens > 0 {
            cpu_s * 1e6 / tokens as f64
        } else {
            f64::NAN
        },
    })
}

/// The CPUs this process may run on (`Cpus_allowed_list` of /proc/self/status).
fn allowed_cpus() -> Option<Vec<u32>> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim();
    parse_cpu_list(list)
}

/// `0-3,8,10-11` as a list of CPUs.
fn parse_cpu_list(list: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<u32>().ok()?..=b.parse::<u32>().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

fn cpu_list(cpus: &[u32]) -> String {
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether (and how) to pin: the client to the first allowed CPU, the server to the
/// others, where there are 2 or more and taskset runs. The note says which.
fn pin_plan(no_pin: bool) -> (Option<Pinning>, String) {
    if no_pin {
        return (
            None,
            "not pinned (--no-pin): client and server share the CPUs".into(),
        );
    }
    let Some(cpus) = allowed_cpus() else {
        return (
            None,
            "not pinned: the allowed CPUs could not be read".into(),
        );
    };
    if cpus.len() < 2 {
        return (
            None,
            format!(
                "not pinned: one CPU ({}) for the client and the server",
                cpus[0]
            ),
        );
    }
    let taskset = Command::new("taskset")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !taskset {
        return (
            None,
            "not pinned: taskset (util-linux) is not installed".into(),
        );
    }
    let p = Pinning {
        client_cpus: cpus[..1].to_vec(),
        server_cpus: cpus[1..].to_vec(),
    };
    let note = format!(
        "pinned: client on CPU {}, server (tokenscope mock, a child process) on CPU {}",
        cpu_list(&p.client_cpus),
        cpu_list(&p.server_cpus)
    );
    (Some(p), note)
}

/// Pin every thread of this process (and so the threads it starts later).
fn pin_self(cpus: &[u32]) -> anyhow::Result<()> {
    let ok = Command::new("taskset")
        .args(["-a", "-p", "-c", &cpu_list(cpus)])
        .arg(std::process::id().to_string())
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    anyhow::ensure!(
        ok,
        "taskset could not pin the client to CPU {}",
        cpu_list(cpus)
    );
    Ok(())
}

/// Start `tokenscope mock` (this executable) on a free port, logging to `log`, pinned
/// to the server's CPUs when there are.
fn start_server(
    args: &CalibrateArgs,
    max_c: u32,
    log: &Path,
    pinning: Option<&Pinning>,
) -> anyhow::Result<Server> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let mut cmd = match pinning {
        Some(p) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpu_list(&p.server_cpus)]).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args(["mock", "--port", "0", "--ttft-ms", "10", "--jitter-ms", "0"])
        .args(["--step-growth", "0", "--error-rate", "0"])
        .arg("--itl-ms")
        .arg(args.itl_ms.to_string())
        .arg("--max-batch")
        .arg(max_c.to_string())
        .arg("--log")
        .arg(log)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().context("cannot start the simulated server")?;
    let stdout = child.stdout.take().expect("piped");
    let mut server = Server {
        child,
        url: String::new(),
    };
    let mut first = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut first)
        .context("the simulated server said nothing")?;
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .ok_or_else(|| anyhow::anyhow!("the simulated server did not start: {first:?}"))?;
    url.clone_into(&mut server.url);
    Ok(server)
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
        cost: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("5"), Some(vec![5]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn three_significant_figures() {
        assert_eq!(sig3(123_456.0), "123000");
        assert_eq!(sig3(987.6), "988");
        assert_eq!(sig3(12.345), "12.3");
        assert_eq!(sig3(0.5), "0.500");
    }
}
