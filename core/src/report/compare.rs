//! Runs compared (`tokenscope compare BASE NEW...`, `tokenscope.compare/1`): a
//! compatibility check first (what differs between the runs besides the change
//! under test), then each level matched by its load, and per metric the two
//! values, the difference, its 95% interval and a verdict
//! ([`tokenscope_stats::compare`]). Per-request samples come from the runs' raw
//! files; without them the stored summaries are compared, with no interval.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use super::compare_cell::Cell;
use super::compare_cell::{cell, cost_cells, server_cells};
use super::raw::RawFile;
use super::{ClientReport, LevelReport};
use crate::analyze::level::LevelOptions;
use crate::model::metric::{
    self, E2E_MS, ERROR_RATE, GOODPUT_FRACTION, ITL_MS, Metric, OUTPUT_TOKENS_PER_S,
    RENDERED_TTFT_MS, TIMEOUT_RATE, TPOT_MS, TTFT_MS,
};
use tokenscope_kernel_report::KernelReport;
use tokenscope_measure::metrics::RequestMetrics;
use tokenscope_measure::record::Outcome;
use tokenscope_stats::compare::{
    Difference, Direction, RoundsDiff, Verdict, holm, min_samples, proportion_diff, rounds_diff,
    welch_diff,
};

/// The comparison's schema.
pub const COMPARE_SCHEMA: &str = "tokenscope.compare/1";

/// How to compare.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareOptions {
    /// The noise floor: a change smaller than this fraction of the base is no
    /// change (`--min-change 2%`).
    pub min_change: f64,
    /// Bootstrap resamples.
    pub resamples: u32,
    /// The bootstrap's seed.
    pub seed: u64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            min_change: 0.02,
            resamples: tokenscope_stats::compare::DEFAULT_RESAMPLES,
            seed: 1,
        }
    }
}

/// One run to compare: its name (the file), its report, its raw file if read.
#[derive(Debug, Clone, Copy)]
pub struct CompareRun<'a> {
    /// As the user named it.
    pub name: &'a str,
    /// Its client report.
    pub report: &'a ClientReport,
    /// Its raw file (per-request samples), when there is one.
    pub raw: Option<&'a RawFile>,
    /// The kernels report measured beside it (`X.kernels.json`), when there is
    /// one: its adapter is part of the compatibility check.
    pub kernels: Option<&'a KernelReport>,
}

/// The whole comparison: every run against the first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// [`COMPARE_SCHEMA`].
    pub schema: String,
    /// The base run.
    pub base: String,
    /// The noise floor, a fraction of the base.
    pub min_change: f64,
    /// Bootstrap resamples and seed.
    pub resamples: u32,
    /// The bootstrap's seed.
    pub seed: u64,
    /// Each other run against the base.
    pub runs: Vec<RunVsBase>,
    /// The `--fail-on` terms, each judged on every level of every run or said
    /// not evaluable (`report::compare_gate`); absent without `--fail-on`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateReport>,
}

/// A CI gate's outcome: every term on every level of every compared run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateReport {
    /// `--allow-unevaluated`: terms not evaluable do not fail the run.
    pub allow_unevaluated: bool,
    /// One a term, run and level.
    pub terms: Vec<TermOutcome>,
}

/// One gate term at one level of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TermOutcome {
    /// The term as given (`tpot_ms:p95:+5%`, `kld_mean:>0.01`).
    pub term: String,
    /// The compared run.
    pub run: String,
    /// The level (`c=4`; a quality term: `quality c=4`).
    pub level: String,
    /// What the term found there.
    pub status: TermStatus,
    /// The change the term reads (relative for `%`, else absolute; a quality
    /// term: the figure), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Why the term is not evaluable or not resolved, and what would make it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a gate term found at a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TermStatus {
    /// A significant change past the limit: the gate fails (exit 1).
    Crossed,
    /// Judged, and not crossed.
    Passed,
    /// Judged and not crossed, but the interval is wider than the limit: the
    /// data cannot tell a change of that size from noise (said, with how much
    /// more data could).
    Unresolved,
    /// Could not be judged (no interval, absent, a level in one run only):
    /// exit 3 unless `--allow-unevaluated`.
    NotEvaluable,
}

/// One run against the base.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunVsBase {
    /// The run.
    pub name: String,
    /// What differs between the two besides the change under test.
    pub mismatches: Vec<Mismatch>,
    /// Both raw files were read: latencies have intervals.
    pub intervals: bool,
    /// The levels both ran, by load.
    pub levels: Vec<LevelVsBase>,
    /// Levels only the base ran.
    pub only_in_base: Vec<String>,
    /// Levels only this run ran.
    pub only_in_new: Vec<String>,
}

/// A field whose value differs between two runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    /// The field (`config.max_tokens`).
    pub field: String,
    /// The base's value.
    pub base: String,
    /// The other run's value.
    pub new: String,
}

/// One level of both runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelVsBase {
    /// The load (`c=4`, `2 req/s`).
    pub load: String,
    /// Each metric compared.
    pub cells: Vec<Cell>,
}

/// The latency metrics compared, each at p50, p95 and p99 (their order in a level).
pub(crate) const LATENCIES: [&Metric; 5] =
    [&TTFT_MS, &RENDERED_TTFT_MS, &TPOT_MS, &ITL_MS, &E2E_MS];
/// The level's figures compared (each with its own test).
const FIGURES: [&Metric; 4] = [
    &OUTPUT_TOKENS_PER_S,
    &GOODPUT_FRACTION,
    &ERROR_RATE,
    &TIMEOUT_RATE,
];
/// Their percentiles.
pub(crate) const PERCENTILES: [(&str, f64); 3] = [("p50", 0.5), ("p95", 0.95), ("p99", 0.99)];

/// Per-request samples of a run's measured requests, by level index, metric and
/// round: one group a request (a request's inter-token gaps are one group; the
/// other metrics one value a request).
pub(crate) type LevelSamples =
    BTreeMap<usize, BTreeMap<&'static str, BTreeMap<u32, Vec<Vec<f64>>>>>;

pub(crate) fn samples(report: &ClientReport, raw: &RawFile) -> LevelSamples {
    let opts = LevelOptions::from_config(&report.config).metric;
    let mut out = LevelSamples::new();
    for line in raw.requests().filter(|l| !l.warmup) {
        if line.record.outcome != Outcome::Ok {
            continue;
        }
        let m = RequestMetrics::from_record(&line.record, &opts);
        let level = out.entry(line.level).or_default();
        let round = line.round.unwrap_or(1);
        for metric in LATENCIES {
            let values = metric.request_values(&m);
            if !values.is_empty() {
                let groups = level.entry(metric.key).or_default();
                groups.entry(round).or_default().push(values);
            }
        }
    }
    out
}

/// The difference of the `q` percentile of two runs' samples (by round), rounds
/// as a random effect ([`rounds_diff`]).
fn percentile_diff(
    base: &BTreeMap<u32, Vec<Vec<f64>>>,
    new: &BTreeMap<u32, Vec<Vec<f64>>>,
    q: f64,
    opts: &CompareOptions,
) -> Option<RoundsDiff> {
    let rounds =
        |r: &BTreeMap<u32, Vec<Vec<f64>>>| -> Vec<Vec<Vec<f64>>> { r.values().cloned().collect() };
    rounds_diff(&rounds(base), &rounds(new), q, opts.resamples, opts.seed)
}

/// Why a percentile's cell of `metric` at `p` has no interval when the raw
/// files have `counts` (values: requests, or gaps for ITL) of it.
pub(crate) fn too_few(metric: &str, p: &str, q: f64, counts: [usize; 2]) -> String {
    let per_gap = metric::by_key(metric).is_some_and(|m| m.per_gap());
    let what = if per_gap { "gaps" } else { "requests" };
    let need = min_samples(q);
    format!(
        "{} {what} (base) and {} (new): a {p} needs {need} in each (tokenscope_stats::compare::min_samples): {}",
        counts[0],
        counts[1],
        if per_gap {
            "more requests or longer answers (--requests, --max-tokens)".to_owned()
        } else {
            format!("bench --requests {need} or more per level")
        }
    )
}

/// The level's stored summary of `metric` at `p` (no raw file).
pub(crate) fn stored(level: &LevelReport, metric: &str, p: &str) -> Option<f64> {
    metric::by_key(metric)?.summary(&level.metrics)?.get(p)
}

/// The family-wise error of a run's comparison: Holm's step-down over every
/// cell with a p-value (latency percentiles: bootstrap; throughput: Welch's t
/// over rounds; rates: the score test) at 5%; a change it does not keep is no
/// change.
fn control_family(levels: &mut [LevelVsBase]) {
    let tested: Vec<(usize, usize, f64)> = levels
        .iter()
        .enumerate()
        .flat_map(|(li, l)| {
            l.cells
                .iter()
                .enumerate()
                .filter_map(move |(ci, c)| c.p_value.map(|p| (li, ci, p)))
        })
        .collect();
    let p: Vec<f64> = tested.iter().map(|t| t.2).collect();
    for ((li, ci, _), keep) in tested.iter().zip(holm(&p, 0.05)) {
        let c = &mut levels[*li].cells[*ci];
        if !keep && matches!(c.verdict, Verdict::Better | Verdict::Worse) {
            c.verdict = Verdict::NoChange;
        }
    }
}

/// The fields that should be equal for a comparison to measure only the change
/// under test, with each run's value.
fn mismatches(base: &ClientReport, new: &ClientReport) -> Vec<Mismatch> {
    let text = |v: serde_json::Value| match v {
        serde_json::Value::String(s) => s,
        serde_json::Value::Null => "-".into(),
        other => other.to_string(),
    };
    let json = |r: &ClientReport| serde_json::to_value(r).unwrap_or_default();
    let (b, n) = (json(base), json(new));
    let fields: [(&str, &[&str]); 15] = [
        ("config.api", &["config", "api"]),
        ("config.model", &["config", "model"]),
        ("config.url", &["config", "url"]),
        ("config.mode", &["config", "mode"]),
        ("config.input_tokens", &["config", "input_tokens"]),
        ("config.max_tokens", &["config", "max_tokens"]),
        ("config.ignore_eos", &["config", "ignore_eos"]),
        ("config.prompts_file", &["config", "prompts_file"]),
        ("config.prompts_hash", &["config", "prompts_hash"]),
        ("config.seed", &["config", "seed"]),
        ("config.tokens.method", &["config", "tokens", "method"]),
        ("config.conversation", &["config", "conversation"]),
        ("config.levels", &["config", "levels"]),
        ("source", &["source"]),
        ("environment.tool_version", &["environment", "tool_version"]),
    ];
    let at = |v: &serde_json::Value, path: &[&str]| {
        path.iter()
            .try_fold(v, |v, k| v.get(k))
            .cloned()
            .unwrap_or(serde_json::Value::Null)
    };
    fields
        .iter()
        .filter_map(|(name, path)| {
            let (x, y) = (at(&b, path), at(&n, path));
            (x != y).then(|| Mismatch {
                field: (*name).to_owned(),
                base: text(x),
                new: text(y),
            })
        })
        .collect()
}

/// Compare every run after the first with the first.
pub fn compare(runs: &[CompareRun<'_>], opts: &CompareOptions) -> Comparison {
    let base = runs.first();
    Comparison {
        schema: COMPARE_SCHEMA.into(),
        base: base.map(|b| b.name.to_owned()).unwrap_or_default(),
        min_change: opts.min_change,
        resamples: opts.resamples,
        seed: opts.seed,
        gate: None,
        runs: runs
            .iter()
            .skip(1)
            .filter_map(|new| Some(against(base?, new, opts)))
            .collect(),
    }
}

/// Two runs' levels that are the same: the same group of real users' turns, or
/// (outside groups) the same load.
pub(crate) fn same_level(a: &LevelReport, b: &LevelReport) -> bool {
    a.group == b.group && (a.group.is_some() || a.load() == b.load())
}

fn against(base: &CompareRun<'_>, new: &CompareRun<'_>, opts: &CompareOptions) -> RunVsBase {
    let sampled = |r: &CompareRun<'_>| r.raw.map(|raw| samples(r.report, raw));
    let (bs, ns) = (sampled(base), sampled(new));
    let intervals = bs.is_some() && ns.is_some();
    let missing_raw = match (&bs, &ns) {
        (None, None) => "either run",
        (None, _) => "the base",
        _ => "the new run",
    };
    let label = |l: &LevelReport| l.label();
    let mut levels = Vec::new();
    for (bi, bl) in base.report.levels.iter().enumerate() {
        let Some((ni, nl)) = new
            .report
            .levels
            .iter()
            .enumerate()
            .find(|(_, l)| same_level(l, bl))
        else {
            continue;
        };
        let mut cells = Vec::new();
        for metric in LATENCIES {
            let direction = better(metric);
            let get = |s: &LevelSamples, i: usize| {
                s.get(&i)
                    .and_then(|m| m.get(metric.key))
                    .cloned()
                    .unwrap_or_default()
            };
            let raw = match (&bs, &ns) {
                (Some(b), Some(n)) => Some((get(b, bi), get(n, ni))),
                _ => None,
            };
            for (p, q) in PERCENTILES {
                let name = format!("{}:{p}", metric.key);
                if let Some(r) = raw
                    .as_ref()
                    .and_then(|(b, n)| percentile_diff(b, n, q, opts))
                {
                    let mut c = cell(name, direction, &r.diff, opts.min_change);
                    c.requests = Some(r.requests);
                    c.df = r.df;
                    c.between_rounds = Some(r.between_share);
                    if c.interval.is_none() {
                        let values = |s: &BTreeMap<u32, Vec<Vec<f64>>>| {
                            s.values().flatten().map(Vec::len).sum::<usize>()
                        };
                        let counts = raw.as_ref().map_or([0, 0], |(b, n)| [values(b), values(n)]);
                        c.no_interval = Some(too_few(metric.key, p, q, counts));
                    }
                    cells.push(c);
                    continue;
                }
                let (Some(x), Some(y)) = (stored(bl, metric.key, p), stored(nl, metric.key, p))
                else {
                    continue;
                };
                let d = Difference {
                    base: x,
                    new: y,
                    diff: y - x,
                    interval: None,
                    p_value: None,
                };
                let mut c = cell(name, direction, &d, opts.min_change);
                c.no_interval = Some(if raw.is_some() {
                    "no per-request samples of it in the raw files: the stored summaries only"
                        .into()
                } else {
                    format!(
                        "no raw file for {}: the stored summaries only (give --raw, or keep X.jsonl beside X.json)",
                        missing_raw
                    )
                });
                cells.push(c);
            }
        }
        let rounds = |l: &LevelReport| -> Vec<f64> {
            l.rounds
                .iter()
                .filter_map(|r| r.output_tokens_per_s)
                .collect()
        };
        if let Some(mut d) = welch_diff(&rounds(bl), &rounds(nl)) {
            // The level's own throughput (over its whole window), the rounds' spread
            // for the interval.
            let (x, y) = (bl.output_tokens_per_s, nl.output_tokens_per_s);
            if let Some(i) = d.interval.as_mut() {
                let shift = (y - x) - d.diff;
                i.lo += shift;
                i.hi += shift;
            }
            d.base = x;
            d.new = y;
            d.diff = y - x;
            let (name, direction) = (
                OUTPUT_TOKENS_PER_S.key.to_owned(),
                better(&OUTPUT_TOKENS_PER_S),
            );
            let mut c = cell(name, direction, &d, opts.min_change);
            if c.interval.is_none() {
                c.no_interval = Some(format!(
                    "{} round(s) (base) and {} (new): an interval over rounds needs 2 or more in each (bench --rounds 3)",
                    bl.rounds.len().max(1),
                    nl.rounds.len().max(1)
                ));
            }
            cells.push(c);
        }
        for (metric, k) in [
            (&ERROR_RATE, (bl.errors, nl.errors)),
            (&TIMEOUT_RATE, (bl.timeouts, nl.timeouts)),
        ] {
            if let Some(d) = proportion_diff(k.0, bl.sent, k.1, nl.sent) {
                // Rates' noise floor is absolute: no relative floor on a base of 0.
                let mut c = cell(metric.key.to_owned(), better(metric), &d, 0.0);
                c.requests = Some([bl.sent as usize, nl.sent as usize]);
                cells.push(c);
            }
        }
        // Goodput: the share of sent requests that met every SLO (a rate, so
        // Newcombe's interval), when both runs checked SLOs.
        if let (Some(fb), Some(fnew)) = (bl.goodput_fraction, nl.goodput_fraction) {
            let met = |f: f64, sent: u64| (f * sent as f64).round() as u64;
            if let Some(d) = proportion_diff(met(fb, bl.sent), bl.sent, met(fnew, nl.sent), nl.sent)
            {
                let direction = better(&GOODPUT_FRACTION);
                cells.push(cell(GOODPUT_FRACTION.key.into(), direction, &d, 0.0));
            }
        }
        cells.extend(server_cells(bl, nl));
        cells.extend(cost_cells(bl, nl));
        levels.push(LevelVsBase {
            load: label(bl),
            cells,
        });
    }
    control_family(&mut levels);
    let unmatched = |a: &ClientReport, b: &ClientReport| -> Vec<String> {
        a.levels
            .iter()
            .filter(|l| !b.levels.iter().any(|m| same_level(m, l)))
            .map(label)
            .collect()
    };
    RunVsBase {
        name: new.name.to_owned(),
        mismatches: {
            let mut m = mismatches(base.report, new.report);
            let adapter = |k: Option<&KernelReport>| {
                k.map_or_else(
                    || "-".to_owned(),
                    |k| {
                        format!(
                            "{} ({}, {})",
                            k.adapter.name, k.adapter.backend, k.adapter.driver
                        )
                    },
                )
            };
            let (x, y) = (adapter(base.kernels), adapter(new.kernels));
            if (base.kernels.is_some() || new.kernels.is_some()) && x != y {
                m.push(Mismatch {
                    field: "kernels.adapter".into(),
                    base: x,
                    new: y,
                });
            }
            m
        },
        intervals,
        levels,
        only_in_base: unmatched(base.report, new.report),
        only_in_new: unmatched(new.report, base.report),
    }
}

/// The metrics a comparison's cells name, for messages: read from the registry
/// (`ttft_ms:p50|p95|p99, ..., output_tokens_per_s, ...`).
pub fn metric_names() -> String {
    let percentiles: Vec<&str> = PERCENTILES.iter().map(|(n, _)| *n).collect();
    let percentiles = percentiles.join("|");
    LATENCIES
        .iter()
        .map(|m| format!("{}:{percentiles}", m.key))
        .chain(FIGURES.iter().map(|m| m.key.to_owned()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `metric` names a comparison's cell (`ttft_ms:p95`, `error_rate`).
pub fn known_metric(metric: &str) -> bool {
    LATENCIES.iter().any(|m| {
        metric
            .strip_prefix(m.key)
            .is_some_and(|p| PERCENTILES.iter().any(|(n, _)| p == format!(":{n}")))
    }) || FIGURES.iter().any(|m| m.key == metric)
}

/// The registry's better direction of a compared metric (every compared
/// metric has one: `tests::every_compared_metric_is_known_and_directed`).
pub(crate) fn better(metric: &Metric) -> Direction {
    metric.better.unwrap_or(Direction::LowerIsBetter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_compared_metric_is_known_and_directed() {
        for m in LATENCIES {
            for (p, _) in PERCENTILES {
                assert!(known_metric(&format!("{}:{p}", m.key)), "{}", m.key);
            }
            assert!(
                metric_names().contains(&format!("{}:p50|", m.key)),
                "{}",
                m.key
            );
            assert!(m.better.is_some() && m.request.is_some(), "{}", m.key);
        }
        for m in FIGURES {
            assert!(
                known_metric(m.key) && metric_names().contains(m.key),
                "{}",
                m.key
            );
            assert!(
                m.better.is_some() && matches!(m.level, metric::LevelValue::Figure(_)),
                "{}",
                m.key
            );
        }
        assert!(!known_metric("ttft_ms:p90") && !known_metric("output_tokens"));
    }

    #[test]
    fn what_each_token_cost_is_shown_not_judged() {
        use crate::model::cost::LevelCost;
        use crate::report::Source;
        let level = |usd: f64| {
            let mut l = crate::testing::level(
                crate::model::load::Load::Concurrency(1),
                &[crate::testing::record(0.0, 50.0, 10.0, 8)],
            );
            l.cost = Some(LevelCost {
                usd_per_million_output_tokens: Some(usd),
                ..LevelCost::default()
            });
            l
        };
        let base = crate::testing::client_report(Source::Native, vec![level(10.0)]);
        let new = crate::testing::client_report(Source::Native, vec![level(12.5)]);
        let run = |name, report| CompareRun {
            name,
            report,
            raw: None,
            kernels: None,
        };
        let c = compare(
            &[run("a", &base), run("b", &new)],
            &CompareOptions::default(),
        );
        let cell = c.runs[0].levels[0]
            .cells
            .iter()
            .find(|c| c.metric == "usd_per_million_output_tokens")
            .expect("a cost cell");
        assert_eq!((cell.base, cell.new), (10.0, 12.5));
        assert!(cell.interval.is_none() && cell.no_interval.is_some());
        assert!(
            !c.runs[0].levels[0]
                .cells
                .iter()
                .any(|c| c.metric == "joules_per_output_token"),
            "no energy in either run"
        );
    }

    #[test]
    fn mismatches_name_each_field_that_differs() {
        use crate::report::Source;
        let base = crate::testing::client_report(Source::Native, Vec::new());
        let mut new = base.clone();
        assert!(mismatches(&base, &new).is_empty());
        new.config.prompts_hash = Some("00000000000000aa".into());
        new.config.max_tokens += 1;
        new.source = Source::Browser;
        new.config.label = Some("v2".into());
        let fields: Vec<String> = mismatches(&base, &new)
            .into_iter()
            .map(|m| m.field)
            .collect();
        // The label names a run; it is not a difference in what was measured.
        assert_eq!(
            fields,
            ["config.max_tokens", "config.prompts_hash", "source"],
            "{fields:?}"
        );
    }
}
