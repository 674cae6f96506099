//! `tokenscope collect`: the intake of the browser probe (`rum/tokenscope-rum.js`),
//! real users' chat turns stored in SQLite; `--summary` reads them back as painted
//! and received TTFT per route and browser.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use tokenscope_core::rum::summary::{GroupSummary, Quantiles, StoredTurn, summarise_all};
use tokenscope_measure::parse::parse_duration;

use crate::collect::otlp::{self, OtlpTarget};
use crate::collect::store::Store;
use crate::collect::{CollectOptions, Collector, router, unix_ms, unix_ns};
use tokenscope_loadgen::util::rfc3339_of_ms;

/// Collect real users' chat turns from the browser probe.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
  tokenscope collect --db rum.sqlite --allow-origin https://chat.example.com
  tokenscope collect --db rum.sqlite --summary --since 24h
  tokenscope collect --db rum.sqlite --report this-week.json --since 7d
  tokenscope collect --db rum.sqlite --report last-week.json --since 14d --until 7d
  tokenscope compare last-week.json this-week.json
  tokenscope report --client this-week.json --html rum.html

The probe posts to a path on your own origin (e.g. /rum) that your proxy forwards to
this collector's /rum, passing the Origin header on (see docs/rum.md). GET /metrics
has the intake's counters.")]
pub struct CollectArgs {
    /// The SQLite file turns are stored in (created if missing).
    #[arg(long, default_value = "rum.sqlite", value_name = "FILE")]
    pub db: PathBuf,

    /// Print the stored turns' summary and exit (no server).
    #[arg(long)]
    pub summary: bool,

    /// Write the stored turns as a client report (`tokenscope.client/1`, a level
    /// per group: all, each route, each browser) and exit; beside it
    /// FILE.raw.jsonl when no turn was sampled, for `compare`'s intervals.
    #[arg(long, value_name = "FILE", conflicts_with = "summary")]
    pub report: Option<PathBuf>,

    /// With --summary or --report: only turns received since then: a duration
    /// ago (24h, 7d) or an RFC 3339 time.
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,

    /// With --summary or --report: only turns received before then: a duration
    /// ago (7d) or an RFC 3339 time.
    #[arg(long, value_name = "WHEN")]
    pub until: Option<String>,

    /// With --summary: the summary as JSON to FILE (the table still printed),
    /// or alone to stdout (`--json` or `--json -`, no table).
    #[arg(long, requires = "summary", value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,

    /// Address to bind. Anything but loopback is reachable from the network.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,

    /// Port (0 picks a free one; the URL is printed on the first line).
    #[arg(long, default_value_t = 8090)]
    pub port: u16,

    /// An origin allowed to post (repeat for more); none given: any origin.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,

    /// A public ingest key the probe's collector URL must carry (`/rum?key=...`).
    #[arg(long, value_name = "KEY")]
    pub ingest_key: Option<String>,

    /// Batches a minute per client address before 429 (behind a proxy, with
    /// --trust-forwarded, or every user shares the proxy's budget).
    #[arg(long, default_value_t = 120, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit: u32,

    /// Take the client address from the last X-Forwarded-For entry (the one your
    /// proxy adds): use it behind your own proxy, never when clients reach the
    /// collector directly.
    #[arg(long)]
    pub trust_forwarded: bool,

    /// Delete turns older than this (checked at start and hourly).
    #[arg(long, default_value = "30d", value_name = "DURATION")]
    pub retention: String,

    /// Also send the live figures as OTLP/HTTP JSON to this metrics URL (an
    /// OpenTelemetry Collector: http://localhost:4318/v1/metrics) every
    /// --otlp-interval and at shutdown.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,

    /// How often --otlp sends.
    #[arg(
        long,
        default_value = "60s",
        value_name = "DURATION",
        requires = "otlp"
    )]
    pub otlp_interval: String,

    /// A header --otlp sends (repeat for more), e.g. Authorization=Bearer ...:
    /// sent, never printed.
    #[arg(long = "otlp-header", value_name = "NAME=VALUE", requires = "otlp",
          value_parser = crate::collect::otlp::parse_header)]
    pub otlp_headers: Vec<(String, String)>,
}

/// Run the subcommand.
pub fn run(args: CollectArgs) -> anyhow::Result<ExitCode> {
    if args.summary || args.report.is_some() {
        return read_back(&args);
    }
    anyhow::ensure!(
        args.since.is_none() && args.until.is_none(),
        "--since and --until choose the turns --summary or --report read; the collector itself takes all"
    );
    let keep = parse_duration(&args.retention).map_err(|e| anyhow::anyhow!("--retention: {e}"))?;
    let mut origins = Vec::new();
    for o in &args.allow_origins {
        origins.push(origin(o).ok_or_else(|| {
            anyhow::anyhow!(
                "--allow-origin {o:?}: an origin is scheme://host[:port] (no path), e.g. https://chat.example.com"
            )
        })?);
    }
    let otlp = match &args.otlp {
        Some(u) => {
            let (url, _) = tokenscope_loadgen::util::parse_base_url(u)
                .map_err(|e| anyhow::anyhow!("--otlp: {e}"))?;
            let every = parse_duration(&args.otlp_interval)
                .map_err(|e| anyhow::anyhow!("--otlp-interval: {e}"))?;
            anyhow::ensure!(
                every >= Duration::from_secs(1),
                "--otlp-interval: at least 1s"
            );
            Some((url, every))
        }
        None => None,
    };
    let export_client = otlp.as_ref().map(|_| otlp::client()).transpose()?;
    let store = Store::open(&args.db)?;
    let collector = Collector::new(
        store,
        CollectOptions {
            allow_origins: origins,
            ingest_key: args.ingest_key.clone(),
            per_minute: args.rate_limit,
            trust_forwarded: args.trust_forwarded,
        },
    );
    let keep_ms = keep.as_secs_f64() * 1e3;
    let expired = collector.expire(keep_ms)?;
    if expired > 0 {
        eprintln!("deleted {expired} turns older than {}", args.retention);
    }
    let rt = super::runtime()?;
    rt.block_on(async move {
        let (listener, origin) = super::listen(args.host, args.port).await?;
        println!("tokenscope collect listening on {origin}/rum");
        eprintln!("storing turns in {}", args.db.display());
        let c = collector.clone();
        tokio::spawn(async move {
            let mut hourly = tokio::time::interval(Duration::from_secs(3600));
            hourly.tick().await;
            loop {
                hourly.tick().await;
                let c = c.clone();
                match tokio::task::spawn_blocking(move || c.expire(keep_ms)).await {
                    Ok(Err(e)) => eprintln!("error: {e}"),
                    Err(e) => eprintln!("error: the hourly expiry failed: {e}"),
                    Ok(Ok(_)) => {}
                }
            }
        });
        let exporter = otlp.zip(export_client).map(|((url, every), client)| {
            let target = OtlpTarget {
                url,
                headers: args.otlp_headers.clone(),
                instance: instance_id(),
            };
            Exporter::spawn(collector.clone(), client, target, every)
        });
        let app = router(collector).into_make_service_with_connect_info::<SocketAddr>();
        tokio::select! {
            r = axum::serve(listener, app) => r.context("the collector failed")?,
            _ = tokio::signal::ctrl_c() => {}
        }
        if let Some(e) = exporter {
            e.stop().await;
        }
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// This process among collectors: the host's name, the pid, and when it started
/// (replicas in containers share pids and bind addresses).
fn instance_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map_or_else(|| "host".to_string(), |h| h.trim().to_string());
    format!("{host}-{}-{:x}", std::process::id(), unix_ns())
}

/// `--otlp`: sends every interval, and once more when stopped.
struct Exporter {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Exporter {
    fn spawn(
        c: std::sync::Arc<Collector>,
        client: reqwest::Client,
        target: OtlpTarget,
        every: Duration,
    ) -> Exporter {
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let start_ns = unix_ns();
            let (mut sent, mut failed) = (0u64, 0u64);
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                let last = tokio::select! {
                    _ = ticks.tick() => false,
                    _ = &mut stopped => true,
                };
                let body = c.otlp_request(start_ns, unix_ns(), &target.instance);
                match otlp::send(&client, &target, &body).await {
                    Ok(()) => sent += 1,
                    Err(why) => {
                        failed += 1;
                        // Said once, then counted: a backend that is down must not
                        // flood the log.
                        if failed == 1 {
                            let url = tokenscope_loadgen::util::redact_url(&target.url);
                            eprintln!(
                                "warning: OTLP export to {url} failed: {why} (retrying every interval)"
                            );
                        }
                    }
                }
                if last {
                    eprintln!("OTLP: {sent} exports sent, {failed} failed");
                    return;
                }
            }
        });
        Exporter { stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// `--summary` or `--report`: the stored turns read back.
fn read_back(args: &CollectArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.db.is_file(),
        "{}: no such turn store (tokenscope collect --db FILE writes one)",
        args.db.display()
    );
    let now = unix_ms();
    let since = match &args.since {
        Some(s) => when(s, now).map_err(|e| anyhow::anyhow!("--since {s:?}: {e}"))?,
        None => 0.0,
    };
    let until = match &args.until {
        Some(s) => when(s, now).map_err(|e| anyhow::anyhow!("--until {s:?}: {e}"))?,
        None => f64::INFINITY,
    };
    anyhow::ensure!(
        since < until,
        "--since is not before --until: no turns between them"
    );
    let turns = Store::open_read_only(&args.db)?.turns_between(since, until)?;
    if let Some(path) = &args.report {
        return write_report(args, path, &turns, since, until);
    }
    let groups = summarise_all(&turns);
    let json = serde_json::to_string_pretty(&groups)? + "\n";
    match super::output::file_or_stdout(args.json.clone()) {
        Some(None) => print!("{json}"),
        Some(Some(path)) => {
            print!("{}", table(&groups));
            super::output::write("--json", &path, &json)?;
        }
        None => print!("{}", table(&groups)),
    }
    Ok(ExitCode::SUCCESS)
}

/// A time given as a duration ago (`7d`) or RFC 3339, as Unix ms.
fn when(s: &str, now_unix_ms: f64) -> Result<f64, String> {
    match parse_duration(s) {
        Ok(d) => Ok(now_unix_ms - d.as_secs_f64() * 1e3),
        Err(e) if s.contains('T') => tokenscope_measure::parse::rfc3339_ms(s)
            .map_err(|t| format!("{t} (nor a duration: {e})")),
        Err(e) => Err(format!("{e}, or an RFC 3339 time (2026-12-01T00:00:00Z)")),
    }
}

fn write_report(
    args: &CollectArgs,
    path: &std::path::Path,
    turns: &[StoredTurn],
    since: f64,
    until: f64,
) -> anyhow::Result<ExitCode> {
    use tokenscope_core::report::raw::RawHeader;
    use tokenscope_core::rum::report::{ReportOptions, build};
    anyhow::ensure!(
        !turns.is_empty(),
        "{}: no turns in that period: no report written",
        args.db.display()
    );
    let first = turns
        .iter()
        .map(|t| t.turn.started_unix_ms)
        .fold(f64::INFINITY, f64::min);
    let from = if since > 0.0 { since } else { first };
    let period = format!(
        "{}..{}",
        rfc3339_of_ms(from),
        if until.is_finite() {
            rfc3339_of_ms(until)
        } else {
            "now".into()
        }
    );
    let r = build(
        turns,
        &ReportOptions {
            source_name: args.db.display().to_string(),
            period: Some(period),
            started_at: Some(rfc3339_of_ms(from)),
            tool_version: tokenscope_core::VERSION.into(),
        },
    );
    let text = r.client.to_json();
    super::output::write_file("--report", path, &(text + "\n"))?;
    eprintln!(
        "wrote {} ({} turns, {} levels)",
        path.display(),
        turns.len(),
        r.client.levels.len()
    );
    let raw_path = path.with_extension("raw.jsonl");
    match r.raw {
        Some(lines) => {
            let mut out =
                serde_json::to_string(&RawHeader::new(r.client.source, r.client.config.clone()))?;
            out.push('\n');
            for l in &lines {
                out.push_str(&serde_json::to_string(l)?);
                out.push('\n');
            }
            std::fs::write(&raw_path, out)
                .with_context(|| format!("writing {}", raw_path.display()))?;
            eprintln!(
                "wrote {} (per-turn samples for compare's intervals)",
                raw_path.display()
            );
        }
        None => {
            // A raw file left from an earlier, unsampled report would be read
            // beside this one.
            if raw_path.is_file() {
                std::fs::remove_file(&raw_path)
                    .with_context(|| format!("removing the stale {}", raw_path.display()))?;
            }
            eprintln!("no raw file: the turns were sampled (compare gives no intervals)");
        }
    }
    print!("{}", tokenscope_render::client::text_summary(&r.client));
    Ok(ExitCode::SUCCESS)
}

/// An origin as browsers send it (`scheme://host[:port]`, host lower-case), or
/// `None` when `s` is not one.
fn origin(s: &str) -> Option<String> {
    let s = s.strip_suffix('/').unwrap_or(s);
    let (scheme, rest) = s.split_once("://")?;
    let ok = matches!(scheme, "http" | "https")
        && !rest.is_empty()
        && !rest.contains(['/', '?', '#', '@', ' ']);
    ok.then(|| format!("{scheme}://{}", rest.to_ascii_lowercase()))
}

fn table(groups: &[GroupSummary]) -> String {
    let q = |q: &Option<Quantiles>| {
        q.map_or_else(
            || "-".to_string(),
            |q| format!("{:.0} / {:.0}", q.p50, q.p95),
        )
    };
    let mut out = format!(
        "{:<36} {:>7} {:>16} {:>16} {:>14} {:>8} {:>8} {:>7}\n",
        "group",
        "turns",
        "painted p50/p95",
        "received p50/95",
        "render p50/95",
        "stall>1s",
        "aborted",
        "errors"
    );
    for g in groups {
        out.push_str(&format!(
            "{:<36} {:>7.0} {:>16} {:>16} {:>14} {:>7.1}% {:>7.1}% {:>6.1}%\n",
            g.group,
            g.weighted_turns,
            q(&g.ttft_painted_ms),
            q(&g.ttft_received_ms),
            q(&g.render_delay_ms),
            100.0 * g.stalled_1s_fraction,
            100.0 * g.aborted_fraction,
            100.0 * g.error_fraction
        ));
    }
    out.push_str("times in ms from the app's fetch call; turns weighted by their sampling\n");
    out
}
