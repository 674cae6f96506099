//! Runs tracked over time (`tokenscope history`, `tokenscope.history/1`): the
//! runs ordered by their label (`bench --label v1.2`) or start time, and per
//! level and metric each run's value with its own 95% interval (how precisely
//! that run measured it) and whether it changed significantly from the run
//! before: the same test as `tokenscope compare` on the two runs (bootstrap over
//! requests, rounds, Newcombe; the noise floor; Holm's control over the pair's
//! cells).

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use super::LevelReport;
use super::compare::{
    CompareOptions, CompareRun, LevelSamples, PERCENTILES, better, compare, samples, stored,
};
use crate::model::metric::{self, OUTPUT_TOKENS_PER_S};
use tokenscope_stats::compare::{Direction, Interval, Verdict, bootstrap_one, wilson};
use tokenscope_stats::stats::t_critical_95;

/// The history's schema.
pub const HISTORY_SCHEMA: &str = "tokenscope.history/1";

/// The metrics shown when none are chosen (each a comparison's cell:
/// `tests::the_default_metrics_are_known`).
pub const DEFAULT_METRICS: [&str; 5] = [
    "ttft_ms:p95",
    "tpot_ms:p50",
    "itl_ms:p95",
    "output_tokens_per_s",
    "error_rate",
];

/// How the runs are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// By `bench --label`, numbers in it compared as numbers (v1.9 < v1.10).
    Label,
    /// By the run's start time.
    Time,
    /// As given (a run lacks both).
    Given,
}

/// The runs, ordered, and their series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// [`HISTORY_SCHEMA`].
    pub schema: String,
    /// How the runs are ordered.
    pub order: Order,
    /// The noise floor of the run-to-run test, a fraction of the earlier value.
    pub min_change: f64,
    /// The runs in order.
    pub runs: Vec<HistoryRun>,
    /// One series per level and metric.
    pub series: Vec<Series>,
}

/// One run of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryRun {
    /// As the user named it (the file).
    pub name: String,
    /// `bench --label`.
    pub label: Option<String>,
    /// Its start (RFC 3339).
    pub started_at: Option<String>,
    /// Its raw file was read: percentiles have intervals.
    pub intervals: bool,
}

/// One metric at one level across the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// The load (`c=4`).
    pub load: String,
    /// `ttft_ms:p95`, `output_tokens_per_s`, `error_rate`.
    pub metric: String,
    /// Which way is better.
    pub direction: Direction,
    /// A point per run that ran the level.
    pub points: Vec<Point>,
}

/// One run's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The run's index in [`History::runs`].
    pub run: usize,
    /// The value.
    pub value: f64,
    /// Its own 95% interval (a percentile: bootstrap over the run's requests;
    /// throughput: t over its rounds; a rate: Wilson's).
    pub interval: Option<Interval>,
    /// Against the run before it (`None` for the first run, or when the run
    /// before did not run this level): better, worse or no change.
    pub vs_previous: Option<Verdict>,
}

/// `a` before `b` with numbers compared as numbers: `v1.9` < `v1.10`.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let b = s.as_bytes();
        for i in 1..=b.len() {
            if i == b.len() || b[i].is_ascii_digit() != b[start].is_ascii_digit() {
                out.push((b[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (x, y) = (chunks(a), chunks(b));
    for (p, q) in x.iter().zip(&y) {
        let o = match (p.0, q.0) {
            (true, true) => {
                let (m, n) = (p.1.trim_start_matches('0'), q.1.trim_start_matches('0'));
                m.len().cmp(&n.len()).then_with(|| m.cmp(n))
            }
            _ => p.1.cmp(q.1),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    x.len().cmp(&y.len())
}

/// Sort `runs` by label when every run has one, else by start time when every
/// run has one, else leave them as given; which it was.
pub fn sort_runs(runs: &mut [CompareRun<'_>]) -> Order {
    if runs.iter().all(|r| r.report.config.label.is_some()) {
        runs.sort_by(|a, b| {
            natural_cmp(
                a.report.config.label.as_deref().unwrap_or_default(),
                b.report.config.label.as_deref().unwrap_or_default(),
            )
        });
        Order::Label
    } else if runs
        .iter()
        .all(|r| r.report.environment.started_at.is_some())
    {
        // RFC 3339 in UTC sorts as text.
        runs.sort_by(|a, b| {
            a.report
                .environment
                .started_at
                .cmp(&b.report.environment.started_at)
        });
        Order::Time
    } else {
        Order::Given
    }
}

/// One run's value of `metric` at `level` with its own interval.
fn point(
    level: &LevelReport,
    metric: &str,
    samples: Option<&LevelSamples>,
    level_index: usize,
    opts: &CompareOptions,
) -> Option<(f64, Option<Interval>, Direction)> {
    match metric {
        "output_tokens_per_s" => {
            let rounds: Vec<f64> = level
                .rounds
                .iter()
                .filter_map(|r| r.output_tokens_per_s)
                .collect();
            let n = rounds.len();
            let interval = (n >= 2).then(|| {
                let mean = rounds.iter().sum::<f64>() / n as f64;
                let var = rounds.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
                let half = t_critical_95(n as u64 - 1) * (var / n as f64).sqrt();
                Interval {
                    lo: level.output_tokens_per_s - half,
                    hi: level.output_tokens_per_s + half,
                }
            });
            let v = level.output_tokens_per_s;
            v.is_finite()
                .then_some((v, interval, better(&OUTPUT_TOKENS_PER_S)))
        }
        "error_rate" | "timeout_rate" | "goodput_fraction" => {
            let k = match metric {
                "error_rate" => level.errors,
                "timeout_rate" => level.timeouts,
                _ => (level.goodput_fraction? * level.sent as f64).round() as u64,
            };
            let direction = better(metric::by_key(metric)?);
            (level.sent > 0).then(|| {
                let (lo, hi) = wilson(k, level.sent);
                (
                    k as f64 / level.sent as f64,
                    Some(Interval { lo, hi }),
                    direction,
                )
            })
        }
        _ => {
            let (name, p) = metric.split_once(':')?;
            let q = PERCENTILES.iter().find(|(n, _)| *n == p)?.1;
            let from_raw = samples.and_then(|s| {
                let groups: Vec<Vec<f64>> = s
                    .get(&level_index)?
                    .get(name)?
                    .values()
                    .flatten()
                    .cloned()
                    .collect();
                bootstrap_one(&groups, q, opts.resamples, opts.seed)
            });
            let (v, i) = from_raw.or_else(|| Some((stored(level, name, p)?, None)))?;
            Some((v, i, better(metric::by_key(name)?)))
        }
    }
}

/// The history of `runs` (already ordered: [`sort_runs`]) for `metrics`.
pub fn history(
    runs: &[CompareRun<'_>],
    metrics: &[String],
    order: Order,
    opts: &CompareOptions,
) -> History {
    let sampled: Vec<Option<LevelSamples>> = runs
        .iter()
        .map(|r| r.raw.map(|raw| samples(r.report, raw)))
        .collect();
    // Each run against the one before: the comparison's verdicts.
    let pairs: Vec<Option<super::compare::Comparison>> = (0..runs.len())
        .map(|i| (i > 0).then(|| compare(&[runs[i - 1], runs[i]], opts)))
        .collect();
    // Every level any run ran (a load, or a group of real users' turns), in the
    // order first met; one of each.
    let mut loads: Vec<&LevelReport> = Vec::new();
    for r in runs {
        for l in &r.report.levels {
            if !loads.iter().any(|m| super::compare::same_level(m, l)) {
                loads.push(l);
            }
        }
    }
    let mut series = Vec::new();
    for load in loads {
        for metric in metrics {
            let mut direction = Direction::LowerIsBetter;
            let mut points = Vec::new();
            for (i, r) in runs.iter().enumerate() {
                let Some((li, level)) = r
                    .report
                    .levels
                    .iter()
                    .enumerate()
                    .find(|(_, l)| super::compare::same_level(l, load))
                else {
                    continue;
                };
                let Some((value, interval, d)) =
                    point(level, metric, sampled[i].as_ref(), li, opts)
                else {
                    continue;
                };
                direction = d;
                let vs_previous = pairs[i].as_ref().and_then(|c| {
                    c.runs
                        .first()?
                        .levels
                        .iter()
                        .find(|l| l.load == load.label())?
                        .cells
                        .iter()
                        .find(|c| c.metric == *metric)
                        .map(|c| c.verdict)
                });
                points.push(Point {
                    run: i,
                    value,
                    interval,
                    vs_previous,
                });
            }
            if !points.is_empty() {
                series.push(Series {
                    load: load.label(),
                    metric: metric.clone(),
                    direction,
                    points,
                });
            }
        }
    }
    History {
        schema: HISTORY_SCHEMA.into(),
        order,
        min_change: opts.min_change,
        runs: runs
            .iter()
            .zip(&sampled)
            .map(|(r, s)| HistoryRun {
                name: r.name.to_owned(),
                label: r.report.config.label.clone(),
                started_at: r.report.environment.started_at.clone(),
                intervals: s.is_some(),
            })
            .collect(),
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_metrics_are_known() {
        for m in DEFAULT_METRICS {
            assert!(super::super::compare::known_metric(m), "{m}");
        }
    }

    /// Real users' reports of two weeks: their groups line up by name (their
    /// rates differ), one series per group, each with both weeks.
    #[test]
    fn real_users_reports_line_up_by_group() {
        use crate::rum::report::{ReportOptions, build};
        use crate::rum::summary::StoredTurn;
        let week = |n: usize, ttft: f64| {
            let turns: Vec<StoredTurn> = (0..n)
                .map(|i| {
                    let mut turn = crate::testing::rum_turn();
                    turn.started_unix_ms += i as f64 * 60_000.0;
                    turn.ms.first_chunk = Some(ttft);
                    StoredTurn {
                        turn,
                        browser: "Chrome 131".into(),
                    }
                })
                .collect();
            build(&turns, &ReportOptions::default()).client
        };
        let (a, b) = (week(5, 40.0), week(9, 45.0));
        assert_ne!(a.levels[0].load(), b.levels[0].load());
        let run = |name, report| CompareRun {
            name,
            report,
            raw: None,
            kernels: None,
        };
        let runs = [run("a", &a), run("b", &b)];
        let h = history(
            &runs,
            &["ttft_ms:p50".to_string()],
            Order::Given,
            &CompareOptions::default(),
        );
        let loads: Vec<&str> = h.series.iter().map(|s| s.load.as_str()).collect();
        assert_eq!(
            loads,
            ["all", "route /v1/chat/completions", "browser Chrome 131"]
        );
        assert!(h.series.iter().all(|s| s.points.len() == 2), "{h:?}");
        assert!(h.series[0].points[1].vs_previous.is_some(), "{h:?}");
    }

    #[test]
    fn labels_sort_as_versions() {
        let mut v = vec!["v1.10", "v1.9", "v1.9.1", "v2", "v1.2", "v1.09"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["v1.2", "v1.9", "v1.09", "v1.9.1", "v1.10", "v2"]);
    }
}
