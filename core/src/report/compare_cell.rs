//! One metric compared (a [`Cell`]), and the cells that are shown, not judged:
//! one figure a level per run with no per-request samples (the server's means,
//! what each token cost), so no interval and no verdict.

use serde::{Deserialize, Serialize};

use super::LevelReport;
use tokenscope_stats::compare::{Difference, Direction, Interval, Verdict, verdict};

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
    /// Requests behind a percentile's cell: base, new.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<[usize; 2]>,
    /// The interval's degrees of freedom (Student's t), where finite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub df: Option<f64>,
    /// The share of the difference's variance between rounds (the rounds'
    /// random effect), for a percentile's cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub between_rounds: Option<f64>,
    /// Why the cell has no interval, and what would give it one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_interval: Option<String>,
}

pub(crate) fn cell(metric: String, direction: Direction, d: &Difference, min_change: f64) -> Cell {
    Cell {
        requests: None,
        df: None,
        between_rounds: None,
        no_interval: None,
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
pub(crate) fn server_cells(base: &LevelReport, new: &LevelReport) -> Vec<Cell> {
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
        shown(
            name,
            x?,
            y?,
            "the server's means over the level: no per-request samples, shown, not judged",
        )
    })
    .collect()
}

/// A lower-is-better figure of both runs, shown without an interval for `why`.
fn shown(name: &str, base: f64, new: f64, why: &str) -> Option<Cell> {
    let d = Difference {
        base,
        new,
        diff: new - base,
        interval: None,
        p_value: None,
    };
    let mut c = cell(name.into(), Direction::LowerIsBetter, &d, 0.0);
    c.no_interval = Some(why.into());
    Some(c)
}

/// What each token cost in both runs (`levels[].cost`): dollars per million
/// output tokens and joules per output token, where both runs have them. A
/// level's one figure, with no per-request samples: shown, not judged (under a
/// GPU-hour price it moves inversely with the output throughput, judged above).
pub(crate) fn cost_cells(base: &LevelReport, new: &LevelReport) -> Vec<Cell> {
    let (Some(b), Some(n)) = (base.cost.as_ref(), new.cost.as_ref()) else {
        return Vec::new();
    };
    [
        (
            "usd_per_million_output_tokens",
            b.usd_per_million_output_tokens,
            n.usd_per_million_output_tokens,
        ),
        (
            "joules_per_output_token",
            b.joules_per_output_token,
            n.joules_per_output_token,
        ),
    ]
    .into_iter()
    .filter_map(|(name, x, y)| {
        shown(
            name,
            x?,
            y?,
            "the level's one figure: no per-request samples, shown, not judged",
        )
    })
    .collect()
}
