//! Runs compared (`tokenscope compare BASE NEW...`, `tokenscope.compare/1`): a
//! compatibility check first (what differs between the runs besides the change
//! under test), then each level matched by its load, and per metric the two
//! values, the difference, its 95% interval and a verdict
//! ([`crate::analyze::compare`]). Per-request samples come from the runs' raw
//! files; without them the stored summaries are compared, with no interval.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::kernels::KernelReport;
use super::raw::RawFile;
use super::{ClientReport, LevelReport};
use crate::analyze::compare::{
    Difference, Direction, Interval, Verdict, bootstrap_clusters, holm, proportion_diff, verdict,
    welch_diff,
};
use crate::analyze::level::LevelOptions;
use crate::analyze::stats::percentile_sorted;
use crate::measure::metrics::RequestMetrics;
use crate::measure::record::Outcome;

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
            resamples: crate::analyze::compare::DEFAULT_RESAMPLES,
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

/// One metric compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// `ttft_ms:p95`, `error_rate`, `output_tokens_per_s`.
    pub metric: String,
    /// Which way is better.
    pub direction: Direction,
    /// The base's value.
    pub base: f64,
    /// The other run's.
    pub new: f64,
    /// `new - base`.
    pub diff: f64,
    /// `diff / base`, when the base is not zero.
    pub relative: Option<f64>,
    /// The difference's 95% interval.
    pub interval: Option<Interval>,
    /// The p-value of "no difference" (latencies and rates), before the
    /// comparison's multiplicity control.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// Better, worse, no change, or unknown (no interval).
    pub verdict: Verdict,
}

/// The latency metrics compared, each at p50, p95 and p99.
pub(crate) const LATENCIES: [&str; 5] =
    ["ttft_ms", "rendered_ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"];
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
        for (name, v) in [
            ("ttft_ms", m.ttft_ms),
            ("rendered_ttft_ms", m.rendered_ttft_ms),
            ("tpot_ms", m.tpot_ms),
            ("e2e_ms", m.e2e_ms),
        ] {
            if let Some(v) = v {
                let groups = level.entry(name).or_default().entry(round).or_default();
                groups.push(vec![v]);
            }
        }
        let gaps: Vec<f64> = m.gaps.iter().map(|g| g.ms).collect();
        if !gaps.is_empty() {
            let groups = level.entry("itl_ms").or_default().entry(round).or_default();
            groups.push(gaps);
        }
    }
    out
}

/// The difference of the `q` percentile of two runs' samples (by round): the
/// bootstrap over requests of all rounds pooled, its interval widened to the
/// rounds' when both runs have two rounds or more (Welch's interval over the
/// rounds' percentiles, centred on the pooled difference; a round's percentile
/// from few samples is noisy, which only widens the interval). The bootstrap sees the sampling noise within a run; the
/// rounds also see the drift between rounds of one run, which the bootstrap
/// takes for signal.
fn percentile_diff(
    base: &BTreeMap<u32, Vec<Vec<f64>>>,
    new: &BTreeMap<u32, Vec<Vec<f64>>>,
    q: f64,
    opts: &CompareOptions,
) -> Option<Difference> {
    let pooled = |r: &BTreeMap<u32, Vec<Vec<f64>>>| -> Vec<Vec<f64>> {
        r.values().flatten().cloned().collect()
    };
    let mut d = bootstrap_clusters(&pooled(base), &pooled(new), q, opts.resamples, opts.seed)?;
    let per_round = |r: &BTreeMap<u32, Vec<Vec<f64>>>| -> Option<Vec<f64>> {
        r.values()
            .map(|groups| {
                let mut v: Vec<f64> = groups.iter().flatten().copied().collect();
                v.sort_by(f64::total_cmp);
                (v.len() >= 2).then(|| percentile_sorted(&v, q))
            })
            .collect()
    };
    if let (Some(interval), Some(b), Some(n)) =
        (d.interval.as_mut(), per_round(base), per_round(new))
        && let Some(Difference {
            diff,
            interval: Some(rounds),
            ..
        }) = welch_diff(&b, &n)
    {
        interval.lo = interval.lo.min(d.diff - (diff - rounds.lo));
        interval.hi = interval.hi.max(d.diff + (rounds.hi - diff));
    }
    Some(d)
}

/// The level's stored summary of `metric` at `p` (no raw file).
pub(crate) fn stored(level: &LevelReport, metric: &str, p: &str) -> Option<f64> {
    let m = &level.metrics;
    let s = match metric {
        "ttft_ms" => Some(&m.ttft_ms),
        "rendered_ttft_ms" => m.rendered_ttft_ms.as_ref(),
        "tpot_ms" => Some(&m.tpot_ms),
        "itl_ms" => Some(&m.itl_ms),
        "e2e_ms" => Some(&m.e2e_ms),
        _ => None,
    }?;
    s.get(p)
}

fn cell(metric: String, direction: Direction, d: &Difference, min_change: f64) -> Cell {
    Cell {
        metric,
        direction,
        base: d.base,
        new: d.new,
        diff: d.diff,
        relative: (d.base != 0.0).then(|| d.diff / d.base),
        interval: d.interval,
        p_value: d.p_value,
        verdict: verdict(d, direction, min_change),
    }
}

/// The server's own figures, when both runs scraped it: its mean TTFT, queue,
/// prefill and decode time per request (`levels[].server.stages`). Means of the
/// server's histograms over the level, with no per-request samples: shown, not
/// judged (no interval).
#[cfg(feature = "server-view")]
fn server_cells(base: &LevelReport, new: &LevelReport) -> Vec<Cell> {
    let stages = |l: &LevelReport| l.server.as_ref().and_then(|s| s.stages.clone());
    let (Some(b), Some(n)) = (stages(base), stages(new)) else {
        return Vec::new();
    };
    [
        (
            "server_ttft_ms:mean",
            Some(b.server_ttft_ms),
            Some(n.server_ttft_ms),
        ),
        ("server_queue_ms:mean", b.queue_ms, n.queue_ms),
        ("server_prefill_ms:mean", b.prefill_ms, n.prefill_ms),
        ("server_decode_ms:mean", b.decode_ms, n.decode_ms),
    ]
    .into_iter()
    .filter_map(|(name, x, y)| {
        let (x, y) = (x?, y?);
        let d = Difference {
            base: x,
            new: y,
            diff: y - x,
            interval: None,
            p_value: None,
        };
        Some(cell(name.into(), Direction::LowerIsBetter, &d, 0.0))
    })
    .collect()
}

#[cfg(not(feature = "server-view"))]
fn server_cells(_: &LevelReport, _: &LevelReport) -> Vec<Cell> {
    Vec::new()
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
            for (p, q) in PERCENTILES {
                let from_raw = match (&bs, &ns) {
                    (Some(b), Some(n)) => {
                        let get = |s: &LevelSamples, i: usize| {
                            s.get(&i)
                                .and_then(|m| m.get(metric))
                                .cloned()
                                .unwrap_or_default()
                        };
                        percentile_diff(&get(b, bi), &get(n, ni), q, opts)
                    }
                    _ => None,
                };
                let d = from_raw.or_else(|| {
                    let (x, y) = (stored(bl, metric, p)?, stored(nl, metric, p)?);
                    Some(Difference {
                        base: x,
                        new: y,
                        diff: y - x,
                        interval: None,
                        p_value: None,
                    })
                });
                if let Some(d) = d {
                    let name = format!("{metric}:{p}");
                    cells.push(cell(name, Direction::LowerIsBetter, &d, opts.min_change));
                }
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
            let name = "output_tokens_per_s".to_owned();
            cells.push(cell(name, Direction::HigherIsBetter, &d, opts.min_change));
        }
        for (name, k) in [
            ("error_rate", (bl.errors, nl.errors)),
            ("timeout_rate", (bl.timeouts, nl.timeouts)),
        ] {
            if let Some(d) = proportion_diff(k.0, bl.sent, k.1, nl.sent) {
                // Rates' noise floor is absolute: no relative floor on a base of 0.
                cells.push(cell(name.to_owned(), Direction::LowerIsBetter, &d, 0.0));
            }
        }
        // Goodput: the share of sent requests that met every SLO (a rate, so
        // Newcombe's interval), when both runs checked SLOs.
        if let (Some(fb), Some(fnew)) = (bl.goodput_fraction, nl.goodput_fraction) {
            let met = |f: f64, sent: u64| (f * sent as f64).round() as u64;
            if let Some(d) = proportion_diff(met(fb, bl.sent), bl.sent, met(fnew, nl.sent), nl.sent)
            {
                cells.push(cell(
                    "goodput_fraction".into(),
                    Direction::HigherIsBetter,
                    &d,
                    0.0,
                ));
            }
        }
        cells.extend(server_cells(bl, nl));
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

/// The metrics a comparison's cells name, for messages.
pub const METRIC_NAMES: &str = "ttft_ms:p95, tpot_ms:p50, itl_ms:p99, e2e_ms:p95, rendered_ttft_ms:p95, output_tokens_per_s, goodput_fraction, error_rate, timeout_rate";

/// Whether `metric` names a comparison's cell (`ttft_ms:p95`, `error_rate`).
pub fn known_metric(metric: &str) -> bool {
    LATENCIES.iter().any(|m| {
        metric
            .strip_prefix(m)
            .is_some_and(|p| PERCENTILES.iter().any(|(n, _)| p == format!(":{n}")))
    }) || [
        "output_tokens_per_s",
        "goodput_fraction",
        "error_rate",
        "timeout_rate",
    ]
    .contains(&metric)
}

/// A CI gate's threshold (`--fail-on ttft_ms:p95:+5%,error_rate:+1pp,out_tok_s:-3%`):
/// a metric, the direction and size of change that fails.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The metric as the cells name it (`ttft_ms:p95`, `error_rate`,
    /// `output_tokens_per_s`; `out_tok_s` is an alias).
    pub metric: String,
    /// The change that fails: `+5%` (relative), `+1pp` (absolute, for rates, in
    /// percentage points), `+20` (absolute, in the metric's unit); the sign is
    /// the failing direction.
    pub limit: f64,
    /// `limit` is a fraction of the base (`%`), not an absolute change.
    pub relative: bool,
}

impl Threshold {
    /// Parse a comma-separated list.
    pub fn parse_list(s: &str) -> Result<Vec<Threshold>, String> {
        s.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(Threshold::parse)
            .collect()
    }

    /// Parse one: `METRIC[:PCTL]:±N(%|pp)`.
    pub fn parse(s: &str) -> Result<Threshold, String> {
        let (metric, change) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("{s:?}: expected METRIC:CHANGE, e.g. ttft_ms:p95:+5%"))?;
        let metric = match metric.trim() {
            "out_tok_s" => "output_tokens_per_s".to_owned(),
            m => m.to_owned(),
        };
        let change = change.trim();
        if !change.starts_with(['+', '-']) {
            return Err(format!(
                "{s:?}: the change needs its sign (+5% fails a rise, -3% a fall)"
            ));
        }
        let (number, relative, scale) = if let Some(n) = change.strip_suffix('%') {
            (n, true, 0.01)
        } else if let Some(n) = change.strip_suffix("pp") {
            (n, false, 0.01)
        } else {
            (change, false, 1.0)
        };
        let limit: f64 = number
            .parse()
            .map_err(|_| format!("{s:?}: {change:?} is not a number (+5%, +1pp, +20)"))?;
        if limit == 0.0 || !limit.is_finite() {
            return Err(format!("{s:?}: the change must not be zero"));
        }
        if !known_metric(&metric) {
            return Err(format!("{s:?}: unknown metric {metric:?} ({METRIC_NAMES})"));
        }
        Ok(Threshold {
            metric,
            limit: limit * scale,
            relative,
        })
    }

    /// Whether `cell` crosses this threshold: a significant change (its verdict
    /// better or worse) at least as large as the limit, in its direction. A cell
    /// without an interval never fails (it cannot be judged).
    pub fn crossed_by(&self, cell: &Cell) -> bool {
        let significant = matches!(cell.verdict, Verdict::Better | Verdict::Worse);
        if cell.metric != self.metric || !significant {
            return false;
        }
        let change = if self.relative {
            match cell.relative {
                Some(r) => r,
                None => return false,
            }
        } else {
            cell.diff
        };
        if self.limit > 0.0 {
            change >= self.limit
        } else {
            change <= self.limit
        }
    }
}

/// The cells of `c` that cross any of `thresholds`, with their run and level.
pub fn crossings<'a>(
    c: &'a Comparison,
    thresholds: &[Threshold],
) -> Vec<(&'a str, &'a str, &'a Cell)> {
    let mut out = Vec::new();
    for run in &c.runs {
        for level in &run.levels {
            for cell in &level.cells {
                if thresholds.iter().any(|t| t.crossed_by(cell)) {
                    out.push((run.name.as_str(), level.load.as_str(), cell));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(metric: &str, base: f64, new: f64, lo: f64, hi: f64) -> Cell {
        Cell {
            metric: metric.into(),
            direction: Direction::LowerIsBetter,
            base,
            new,
            diff: new - base,
            relative: Some((new - base) / base),
            interval: Some(Interval { lo, hi }),
            p_value: None,
            verdict: if lo > 0.0 || hi < 0.0 {
                Verdict::Worse
            } else {
                Verdict::NoChange
            },
        }
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

    #[test]
    fn thresholds_fail_significant_changes_past_them() {
        let t = Threshold::parse_list("ttft_ms:p95:+5%, error_rate:+1pp, out_tok_s:-3%").unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t[2].metric, "output_tokens_per_s");
        assert!((t[1].limit - 0.01).abs() < 1e-12 && !t[1].relative);
        // +10% and significant: fails; +10% with zero in the interval: does not;
        // +3%: under the limit.
        assert!(t[0].crossed_by(&cell("ttft_ms:p95", 100.0, 110.0, 4.0, 16.0)));
        assert!(!t[0].crossed_by(&cell("ttft_ms:p95", 100.0, 110.0, -2.0, 16.0)));
        assert!(!t[0].crossed_by(&cell("ttft_ms:p95", 100.0, 103.0, 1.0, 5.0)));
        // A fall in throughput past -3% fails; a rise does not.
        assert!(t[2].crossed_by(&cell("output_tokens_per_s", 100.0, 90.0, -15.0, -5.0)));
        assert!(!t[2].crossed_by(&cell("output_tokens_per_s", 100.0, 110.0, 5.0, 15.0)));
        assert!(t[1].crossed_by(&cell("error_rate", 0.0, 0.05, 0.01, 0.1)));
        for bad in [
            "ttft_ms:p95:5%",
            "ttft_ms:p95",
            "nope:+5%",
            "ttft_ms:p42:+5%",
            "e2e_ms:p95:+x%",
        ] {
            assert!(Threshold::parse(bad).is_err(), "{bad}");
        }
    }
}
