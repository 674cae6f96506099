//! Shards' reports merged into the one report a single client sending all their
//! requests would have written (`tokenscope merge`).
//!
//! The shards must be every part of one plan ([`tokenscope_workload::shard`]): the
//! same count, each index once, the same configuration apart from each shard's
//! parts of the levels and counts. Then, level by level:
//! - **from raw files** (every shard's given): the shards' requests, moved onto
//!   one time axis by the wall-clock time of each shard's clock zero, replayed
//!   through the run's own [`RunRecorder`]: every figure is computed from the
//!   union of the samples, as one client would have; the throughput's window runs
//!   from the first send to the last answer over all shards;
//! - **from the reports' histograms** (otherwise): counts summed, every metric's
//!   samples rebuilt from its HdrHistogram (exact count, mean, std, min and max
//!   from the summaries) and merged, so percentiles are the union's within
//!   [`stats::HISTOGRAM_PRECISION`]; throughputs summed over the shards (each
//!   over its own window); goodput, error and timeout rates from the summed
//!   counts; rounds' counts and throughputs summed (their medians not kept), no
//!   snapshots or turns (a raw merge has them).
//!
//! The sweep (knee, SLO capacity) is recomputed either way. Latencies are
//! durations on each shard's own monotonic clock, so they are exact whatever the
//! clocks' offsets; only what is placed in time (the window, snapshots) relies on
//! the shards' wall clocks: the report states the spread of the shards' starts.
//! The server view, when the shards scraped one, is shard 0's (they all watched
//! the same server).

use std::collections::BTreeMap;

use thiserror::Error;

use super::assemble::{ReportParts, RunRecorder, assemble};
use super::raw::{Phase, RawEntry, RawEvent, RawFile, RawLine};
use super::{
    ClientReport, Environment, LevelReport, Load, ReportWarning, RoundReport, RoundSpread,
    RunConfig, WarningKind,
};
use crate::analyze::level_samples::{LevelSamples, SamplesError};
use tokenscope_stats::stats;
use tokenscope_workload::shard::ShardInfo;

pub use crate::model::{MergeInfo, MergeMethod};

/// One shard's report, and its raw file when there is one.
#[derive(Debug, Clone)]
pub struct ShardRun {
    /// Its name in messages (the file's).
    pub name: String,
    /// The report.
    pub report: ClientReport,
    /// The raw file.
    pub raw: Option<RawFile>,
}

/// Shards that do not make one plan, or cannot be merged.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("no shard reports given")]
    Empty,
    /// A report without `config.shard`.
    #[error("{0}: not a shard's report (it was not run with bench --shard K/N)")]
    NotAShard(String),
    /// A shard of a plan split another way.
    #[error("{name} is shard {index}/{count}, but {first} is of {first_count} shards")]
    Count {
        /// The file.
        name: String,
        /// Its index.
        index: u32,
        /// Its count.
        count: u32,
        /// The first file.
        first: String,
        /// Its count.
        first_count: u32,
    },
    /// The same shard twice.
    #[error("shard {index}/{count} given twice: {a} and {b}")]
    Duplicate {
        /// The index.
        index: u32,
        /// The count.
        count: u32,
        /// One file.
        a: String,
        /// The other.
        b: String,
    },
    /// Shards missing.
    #[error("shards missing: {} (every shard of the plan is needed)", .0.join(", "))]
    Missing(Vec<String>),
    /// A shard of another plan.
    #[error(
        "{name} is from another plan than {first}: config.{field} differs ({theirs} vs {ours})"
    )]
    OtherPlan {
        /// The file.
        name: String,
        /// The first file.
        first: String,
        /// The field that differs.
        field: String,
        /// Its value in `name`.
        theirs: String,
        /// Its value in `first`.
        ours: String,
    },
    /// A shard without every level.
    #[error(
        "{name} has {has} level(s), the plan {plan}: one of its levels sent nothing or it was interrupted"
    )]
    Levels {
        /// The file.
        name: String,
        /// Its levels.
        has: usize,
        /// The plan's.
        plan: usize,
    },
    /// A report without the histograms a merge needs.
    #[error("{name}, level {level}: {source}; give its raw file (X.raw.jsonl beside it, or --raw)")]
    Histograms {
        /// The file.
        name: String,
        /// 0-based level.
        level: usize,
        /// What was wrong.
        source: SamplesError,
    },
}

/// Merge every shard of one plan into one report.
pub fn merge(shards: &[ShardRun]) -> Result<ClientReport, MergeError> {
    let ordered = check(shards)?;
    let infos: Vec<&ShardInfo> = ordered.iter().map(|s| shard_info(s)).collect();
    let config = plan_config(&ordered[0].report.config, infos[0]);
    let origin = infos
        .iter()
        .map(|i| i.clock_origin_unix_ms)
        .fold(f64::INFINITY, f64::min);
    let spread = infos
        .iter()
        .map(|i| i.clock_origin_unix_ms)
        .fold(f64::NEG_INFINITY, f64::max)
        - origin;
    let all_raw = ordered.iter().all(|s| s.raw.is_some());
    let method = if all_raw {
        MergeMethod::Raw
    } else {
        MergeMethod::Histograms
    };
    let info = MergeInfo {
        shards: infos[0].count,
        method,
        percentile_precision: (method == MergeMethod::Histograms)
            .then_some(stats::HISTOGRAM_PRECISION),
        start_spread_ms: spread,
        started_at: ordered
            .iter()
            .map(|s| s.report.environment.started_at.clone())
            .collect(),
    };
    let mut report = if all_raw {
        from_raw(&ordered, config, origin)
    } else {
        from_histograms(&ordered, config)?
    };
    report.environment = environment(&ordered, info.clone());
    if method == MergeMethod::Histograms {
        // Said by the merge's own warning, with the precision.
        report
            .warnings
            .retain(|w| w.kind != WarningKind::HistogramSummaries);
    }
    report.warnings.insert(0, merge_warning(&info, &ordered));
    attach_server(&mut report, ordered[0], origin);
    Ok(report)
}

/// The server view: shard 0's scrapes (every shard watched the same server)
/// joined to the merged levels, so its token counts are checked against all the
/// shards' requests; without shard 0's raw file, its report's view as it was,
/// without the token check (it counted shard 0's requests only).
fn attach_server(report: &mut ClientReport, shard0: &ShardRun, origin_unix_ms: f64) {
    match &shard0.raw {
        Some(raw) => {
            let dt = shard_info(shard0).clock_origin_unix_ms - origin_unix_ms;
            let mut log = super::server::ScrapeLog::default();
            for e in &raw.entries {
                match e {
                    RawEntry::Event(RawEvent::LevelStart { level, t_ms, .. }) => {
                        log.level_started(*level, t_ms + dt);
                    }
                    RawEntry::Event(RawEvent::LevelEnd { .. }) => log.level_ended(),
                    RawEntry::Scrape(s) => {
                        let mut s = s.as_ref().clone();
                        s.t_ms += dt;
                        log.scrape(s);
                    }
                    _ => {}
                }
            }
            log.attach(report);
        }
        None => {
            report.server.clone_from(&shard0.report.server);
            for (l, s0) in report.levels.iter_mut().zip(&shard0.report.levels) {
                l.server.clone_from(&s0.server);
                if let Some(s) = l.server.as_mut() {
                    s.tokens = None;
                }
            }
        }
    }
}

fn shard_info(s: &ShardRun) -> &ShardInfo {
    s.report
        .config
        .shard
        .as_ref()
        .expect("checked: every report is a shard's")
}

/// The shards in index order, after checking they are every part of one plan.
fn check(shards: &[ShardRun]) -> Result<Vec<&ShardRun>, MergeError> {
    let first = shards.first().ok_or(MergeError::Empty)?;
    let info0 = first
        .report
        .config
        .shard
        .as_ref()
        .ok_or_else(|| MergeError::NotAShard(first.name.clone()))?;
    let count = info0.count;
    let mut slots: Vec<Option<&ShardRun>> = vec![None; count as usize];
    let plan0 = comparable(&first.report.config);
    for s in shards {
        let info = s
            .report
            .config
            .shard
            .as_ref()
            .ok_or_else(|| MergeError::NotAShard(s.name.clone()))?;
        if info.count != count {
            return Err(MergeError::Count {
                name: s.name.clone(),
                index: info.index,
                count: info.count,
                first: first.name.clone(),
                first_count: count,
            });
        }
        let slot = &mut slots[info.index as usize];
        if let Some(other) = slot {
            return Err(MergeError::Duplicate {
                index: info.index,
                count,
                a: other.name.clone(),
                b: s.name.clone(),
            });
        }
        *slot = Some(s);
        if let Some((field, theirs, ours)) = first_difference(&comparable(&s.report.config), &plan0)
        {
            return Err(MergeError::OtherPlan {
                name: s.name.clone(),
                first: first.name.clone(),
                field,
                theirs,
                ours,
            });
        }
        let plan = info.plan_levels.len();
        if s.report.levels.len() != plan {
            return Err(MergeError::Levels {
                name: s.name.clone(),
                has: s.report.levels.len(),
                plan,
            });
        }
    }
    let missing: Vec<String> = slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(i, _)| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing(missing));
    }
    Ok(slots.into_iter().flatten().collect())
}

/// A shard's configuration without what differs between shards of one plan.
fn comparable(c: &RunConfig) -> serde_json::Value {
    let mut c = c.clone();
    if let Some(info) = c.shard.take() {
        c.levels = info.plan_levels;
        c.requests_per_level = info.plan_requests_per_level;
    }
    c.warmup_requests = 0;
    c.trace = None;
    c.distinct_prompts = None;
    serde_json::to_value(&c).unwrap_or_default()
}

fn first_difference(
    a: &serde_json::Value,
    b: &serde_json::Value,
) -> Option<(String, String, String)> {
    let (a, b) = (a.as_object()?, b.as_object()?);
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter().find_map(|k| {
        let (x, y) = (a.get(k), b.get(k));
        (x != y).then(|| {
            let show = |v: Option<&serde_json::Value>| {
                v.map_or_else(|| "absent".to_owned(), |v| v.to_string())
            };
            (k.clone(), show(x), show(y))
        })
    })
}

/// The whole plan's configuration, from shard 0's.
fn plan_config(c: &RunConfig, info: &ShardInfo) -> RunConfig {
    let mut c = c.clone();
    c.levels.clone_from(&info.plan_levels);
    c.requests_per_level = info.plan_requests_per_level;
    c.shard = None;
    c
}

/// The union of the shards' requests through one recorder.
fn from_raw(shards: &[&ShardRun], config: RunConfig, origin_unix_ms: f64) -> ClientReport {
    let mut rec = RunRecorder::new(shards[0].report.source, config.clone());
    let offsets: Vec<f64> = shards
        .iter()
        .map(|s| shard_info(s).clock_origin_unix_ms - origin_unix_ms)
        .collect();
    for s in shards {
        let raw = s
            .raw
            .as_ref()
            .expect("checked: every shard has its raw file");
        for e in &raw.entries {
            if let RawEntry::Event(RawEvent::Warning(w)) = e {
                rec.warn(shard_warning(s, w));
            }
        }
    }
    for level in 0..config.levels.len() {
        let load = config.level_load(level).unwrap_or(Load::Concurrency(1));
        let start = shards
            .iter()
            .zip(&offsets)
            .filter_map(|(s, dt)| level_start(s, level).map(|t| t + dt))
            .fold(f64::INFINITY, f64::min);
        rec.start_level(level, load, if start.is_finite() { start } else { 0.0 });
        for (s, dt) in shards.iter().zip(&offsets) {
            for line in s.raw.as_ref().into_iter().flat_map(|r| r.requests()) {
                if line.level != level || line.phase() == Phase::Warmup {
                    continue;
                }
                let mut record = line.record.clone();
                record.shift(*dt);
                let moved =
                    RawLine::new(line.request_id.clone(), level, load, line.phase(), record);
                rec.record(&moved);
            }
        }
        rec.end_level();
    }
    let interrupted = shards.iter().any(|s| s.report.interrupted);
    rec.finish(Environment::default(), interrupted)
}

fn level_start(s: &ShardRun, level: usize) -> Option<f64> {
    s.raw.as_ref()?.entries.iter().find_map(|e| match e {
        RawEntry::Event(RawEvent::LevelStart { level: l, t_ms, .. }) if *l == level => Some(*t_ms),
        _ => None,
    })
}

/// The shards' levels combined from their counts and histograms.
fn from_histograms(shards: &[&ShardRun], config: RunConfig) -> Result<ClientReport, MergeError> {
    let mut levels = Vec::new();
    for level in 0..config.levels.len() {
        let parts: Vec<&LevelReport> = shards.iter().map(|s| &s.report.levels[level]).collect();
        let mut samples = LevelSamples::new(0);
        for (s, l) in shards.iter().zip(&parts) {
            let theirs = LevelSamples::from_report(&l.metrics, &l.itl_by_position, &l.histograms)
                .map_err(|source| MergeError::Histograms {
                name: s.name.clone(),
                level,
                source,
            })?;
            samples.merge(&theirs);
        }
        levels.push(combine(
            config.level_load(level).unwrap_or(Load::Concurrency(1)),
            &parts,
            &samples,
            &config,
        ));
    }
    let mut warnings = Vec::new();
    for s in shards {
        for w in &s.report.warnings {
            // Those drawn from the levels are drawn again from the merged ones.
            if !drawn_from_levels(w.kind) {
                warnings.push(shard_warning(s, w));
            }
        }
    }
    Ok(assemble(ReportParts {
        source: shards[0].report.source,
        config,
        environment: Environment::default(),
        levels,
        warnings,
        interrupted: shards.iter().any(|s| s.report.interrupted),
    }))
}

fn drawn_from_levels(kind: WarningKind) -> bool {
    matches!(
        kind,
        WarningKind::ClientBound | WarningKind::NoSuccess | WarningKind::HistogramSummaries
    )
}

/// One level from its shards' parts.
fn combine(
    load: Load,
    parts: &[&LevelReport],
    samples: &LevelSamples,
    config: &RunConfig,
) -> LevelReport {
    let sum = |f: fn(&LevelReport) -> u64| parts.iter().map(|l| f(l)).sum::<u64>();
    let sumf = |f: fn(&LevelReport) -> f64| parts.iter().map(|l| f(l)).sum::<f64>();
    let add_maps = |f: fn(&LevelReport) -> &BTreeMap<String, u64>| {
        let mut out = BTreeMap::new();
        for l in parts {
            for (k, v) in f(l) {
                *out.entry(k.clone()).or_insert(0) += v;
            }
        }
        out
    };
    let (sent, ok, errors, timeouts) = (
        sum(|l| l.sent),
        sum(|l| l.ok),
        sum(|l| l.errors),
        sum(|l| l.timeouts),
    );
    let sent_f = sent.max(1) as f64;
    let metrics = samples.metrics();
    let has_slos = !config.slos.is_empty() || !config.slo_classes.is_empty();
    let goodput: f64 = parts
        .iter()
        .map(|l| (l.goodput_fraction.unwrap_or(0.0) * l.sent as f64).round())
        .sum();
    let token_events: f64 = sumf(|l| l.output_tokens_total as f64);
    let shared = sumf(|l| l.shared_read_fraction * l.output_tokens_total as f64);
    let mut stalls = parts[0].stalls.clone();
    stalls.count = sum(|l| l.stalls.count);
    stalls.requests = sum(|l| l.stalls.requests);
    stalls.longest_ms = parts
        .iter()
        .filter_map(|l| l.stalls.longest_ms)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let (concurrency, rate_per_s) = match load {
        Load::Concurrency(c) => (Some(c), None),
        Load::Rate(r) => (None, Some(r)),
    };
    let rounds = (0..parts.iter().map(|l| l.rounds.len()).max().unwrap_or(0))
        .map(|i| {
            let of = |l: &&LevelReport| l.rounds.get(i).cloned();
            let rs: Vec<RoundReport> = parts.iter().filter_map(of).collect();
            RoundReport {
                round: i as u32 + 1,
                sent: rs.iter().map(|r| r.sent).sum(),
                ok: rs.iter().map(|r| r.ok).sum(),
                ttft_ms_p50: None,
                tpot_ms_p50: None,
                e2e_ms_p50: None,
                output_tokens_per_s: rs
                    .iter()
                    .map(|r| r.output_tokens_per_s)
                    .sum::<Option<f64>>(),
                outlier_metrics: Vec::new(),
            }
        })
        .collect();
    LevelReport {
        concurrency,
        rate_per_s,
        sent,
        ok,
        errors,
        timeouts,
        error_kinds: add_maps(|l| &l.error_kinds),
        timeout_phases: add_maps(|l| &l.timeout_phases),
        window_s: parts.iter().map(|l| l.window_s).fold(0.0, f64::max),
        output_tokens_per_s: sumf(|l| l.output_tokens_per_s),
        requests_per_s: sumf(|l| l.requests_per_s),
        error_rate: errors as f64 / sent_f,
        timeout_rate: timeouts as f64 / sent_f,
        goodput_per_s: has_slos.then(|| sumf(|l| l.goodput_per_s.unwrap_or(0.0))),
        goodput_fraction: has_slos.then(|| goodput / sent_f),
        reached: merged_reach(parts),
        slo_checks: samples.slo_checks(&metrics, &config.slos),
        output_tokens_total: sum(|l| l.output_tokens_total),
        output_tokens_estimated: parts.iter().any(|l| l.output_tokens_estimated),
        shared_read_fraction: if token_events > 0.0 {
            shared / token_events
        } else {
            0.0
        },
        itl_by_position: samples.positions(),
        quantiles: samples.quantiles(),
        histograms: BTreeMap::new(),
        metrics,
        stalls,
        rounds,
        round_spread: RoundSpread::default(),
        paint_methods: add_maps(|l| &l.paint_methods),
        ttft_at_network_stack: sum(|l| l.ttft_at_network_stack),
        protocols: add_maps(|l| &l.protocols),
        connections: parts.iter().filter_map(|l| l.connections).reduce(|a, b| {
            crate::report::ConnectionCounts {
                new: a.new + b.new,
                reused: a.reused + b.reused,
            }
        }),
        snapshots: Vec::new(),
        drift: Vec::new(),
        usage_prompt_tokens: sum(|l| l.usage_prompt_tokens),
        usage_completion_tokens: sum(|l| l.usage_completion_tokens),
        requests_without_usage: sum(|l| l.requests_without_usage),
        prompt_tokens_checked: sum(|l| l.prompt_tokens_checked),
        prompt_tokens_differ: sum(|l| l.prompt_tokens_differ),
        output_tokens_checked: sum(|l| l.output_tokens_checked),
        output_tokens_differ: sum(|l| l.output_tokens_differ),
        // The shards' cache counts add up (what prices cached tokens apart).
        prompt_cache: parts
            .iter()
            .filter_map(|l| l.prompt_cache)
            .reduce(|mut a, b| {
                a.requests += b.requests;
                a.prompt_tokens += b.prompt_tokens;
                a.cached_tokens += b.cached_tokens;
                a
            }),
        event_tokens: None,
        answers: parts
            .iter()
            .filter_map(|l| l.answers.clone())
            .reduce(|a, b| a.merged(&b)),
        classes: crate::analyze::classes::merge_classes(
            &parts
                .iter()
                .map(|l| l.classes.as_slice())
                .collect::<Vec<_>>(),
        ),
        images: crate::analyze::images::merge_images(
            &parts
                .iter()
                .map(|l| l.images.as_slice())
                .collect::<Vec<_>>(),
        ),
        turns: Vec::new(),
        server: None,
        cost: None,
        group: parts.first().and_then(|l| l.group.clone()),
        rum: None,
    }
}

fn shard_warning(s: &ShardRun, w: &ReportWarning) -> ReportWarning {
    let mut w = w.clone();
    let label = s
        .report
        .config
        .shard
        .as_ref()
        .map_or_else(String::new, |i| format!("{}/{}", i.index, i.count));
    w.message = format!("shard {label}: {}", w.message);
    w
}

fn merge_warning(info: &MergeInfo, shards: &[&ShardRun]) -> ReportWarning {
    let how = match info.method {
        MergeMethod::Raw => "from their raw files (the union of their requests: exact)".to_owned(),
        MergeMethod::Histograms => {
            let without: Vec<&str> = shards
                .iter()
                .filter(|s| s.raw.is_none())
                .map(|s| s.name.as_str())
                .collect();
            format!(
                "from their reports' histograms (percentiles within {}% or 1 µs of the union's; no raw file for {}); rounds' medians, snapshots and turns are not merged",
                stats::HISTOGRAM_PRECISION * 100.0,
                without.join(", ")
            )
        }
    };
    ReportWarning::new(
        WarningKind::Merged,
        format!(
            "merged from {} shards {how}; the shards' clocks started {:.0} ms apart (latencies are exact whatever the offset; only the window and snapshots rely on wall clocks)",
            info.shards, info.start_spread_ms
        ),
    )
}

/// The merged run's environment: shard 0's, with the CPU time summed and the
/// worst event-loop lag.
fn environment(shards: &[&ShardRun], info: MergeInfo) -> Environment {
    let mut env = shards[0].report.environment.clone();
    env.started_at = shards
        .iter()
        .filter_map(|s| s.report.environment.started_at.clone())
        .min();
    env.client_cpu_s = shards
        .iter()
        .map(|s| s.report.environment.client_cpu_s)
        .sum();
    env.cpus = shards.iter().map(|s| s.report.environment.cpus).sum();
    env.event_loop_lag_ms = shards
        .iter()
        .filter_map(|s| s.report.environment.event_loop_lag_ms)
        .max_by(|a, b| a.p99.unwrap_or(0.0).total_cmp(&b.p99.unwrap_or(0.0)));
    env.rebuilt_from_raw = false;
    env.merged = Some(info);
    env
}

/// The shards' reached loads summed (each ran its part of the level's load):
/// under-loaded when a shard's part was; unknown when a shard's is.
fn merged_reach(parts: &[&LevelReport]) -> Option<crate::model::ReachedLoad> {
    let reached: Vec<crate::model::ReachedLoad> =
        parts.iter().map(|l| l.reached).collect::<Option<_>>()?;
    Some(crate::model::ReachedLoad {
        client_in_flight_max: reached.iter().map(|r| r.client_in_flight_max).sum(),
        client_in_flight_mean: reached.iter().map(|r| r.client_in_flight_mean).sum(),
        under_loaded: reached.iter().any(|r| r.under_loaded),
    })
}
