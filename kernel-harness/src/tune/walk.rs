//! The walk behind the variant search, for any variant type: seeds, hill climbing
//! while a neighbour is faster, and the final interleaved pass whose figures the
//! tuning file keeps (see [`super::search`]).

use std::collections::HashMap;
use std::fmt::Display;
use std::hash::Hash;

use tokenscope_kernel_report::{TriedVariant, TuningEntry};

use crate::clock::Clock;
use crate::error::Result;
use crate::kernels::VariantCaps;
use crate::timing::TimingOptions;

/// A variant type the search can walk: its neighbours, and whether one can run a
/// problem here.
pub trait Searchable: Copy + Eq + Hash + Display {
    /// The problem it runs.
    type Spec;
    /// The variants one step away.
    fn neighbours(&self) -> Vec<Self>;
    /// Why it cannot run `spec` here (None: it can).
    fn check(&self, spec: &Self::Spec, caps: &VariantCaps) -> Option<String>;
}

/// Relative gain a neighbour needs for the walk to move to it.
pub const IMPROVEMENT: f64 = 0.02;

/// Rounds of the final, interleaved pass.
pub const FINAL_ROUNDS: u32 = 3;

/// What one problem's walk found.
pub(super) struct Walk<V> {
    /// Every variant timed (brief timing), fastest first.
    tried: Vec<(V, f64)>,
    /// Variants that gave a wrong answer.
    failed: Vec<V>,
    /// The final pass: each variant's median over its rounds, fastest first (the
    /// only variant's brief figure when one ran).
    finals: Vec<(V, f64)>,
    /// Rounds of the final pass (0: one variant, no pass).
    rounds: u32,
    /// The largest `(max - min) / median` of a variant's rounds.
    spread: Option<f64>,
}

/// How a walk times a variant: briefly (verified first) while searching, or one
/// round of the final pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Verify, then a brief timing.
    Brief,
    /// One round of the final pass (no verification: it passed already).
    Final,
}

/// The timing of one round of the final pass: its share of `full`.
pub fn final_round(full: &TimingOptions) -> TimingOptions {
    TimingOptions {
        samples: (full.samples / FINAL_ROUNDS).max(5),
        budget_ms: full.budget_ms / f64::from(FINAL_ROUNDS),
        ..*full
    }
}

/// The variants of the final pass: the two fastest, the default and the slowest
/// (each once), from the brief timings ranked fastest first.
fn finalists<V: Copy + PartialEq>(ranked: &[(V, f64)], default: V) -> Vec<V> {
    let mut out: Vec<V> = Vec::new();
    let picks = ranked
        .iter()
        .take(2)
        .map(|(v, _)| *v)
        .chain(ranked.iter().find(|(v, _)| *v == default).map(|(v, _)| *v))
        .chain(ranked.last().map(|(v, _)| *v));
    for v in picks {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// Each variant's rounds summarised: its median round, and the largest spread
/// `(max - min) / median` over the variants. Variants are listed fastest first.
fn summarise_rounds<V: Copy>(rounds: &[(V, Vec<f64>)]) -> (Vec<(V, f64)>, Option<f64>) {
    let mut finals = Vec::new();
    let mut spread: Option<f64> = None;
    for (v, times) in rounds {
        let Some(med) = tokenscope_stats::stats::median(times) else {
            continue;
        };
        finals.push((*v, med));
        if times.len() >= 2 && med > 0.0 {
            let (lo, hi) = times.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), t| {
                (lo.min(*t), hi.max(*t))
            });
            let s = (hi - lo) / med;
            spread = Some(spread.map_or(s, |x| x.max(s)));
        }
    }
    finals.sort_by(|a, b| a.1.total_cmp(&b.1));
    (finals, spread)
}

/// Walks the space from `seeds` (the default first; see the module's
/// documentation). `eval(v, pass)` compiles, verifies (brief pass) and times `v`:
/// `Ok(None)` when it gave a wrong answer, `Err` when it cannot run here.
pub(super) async fn walk<V, F>(
    seeds: Vec<V>,
    spec: &V::Spec,
    caps: &VariantCaps,
    mut eval: F,
    clock: &dyn Clock,
    deadline_ms: f64,
) -> Walk<V>
where
    V: Searchable,
    F: AsyncFnMut(V, Pass) -> Result<Option<f64>>,
{
    let neighbours = |v: &V| -> Vec<V> {
        v.neighbours()
            .into_iter()
            .filter(|n| n.check(spec, caps).is_none())
            .collect()
    };
    let mut times: HashMap<V, f64> = HashMap::new();
    let mut order = Vec::new();
    let mut failed = Vec::new();
    let mut skipped = Vec::new();
    let mut try_one = async |v: V, times: &mut HashMap<V, f64>| {
        if times.contains_key(&v) || failed.contains(&v) || skipped.contains(&v) {
            return;
        }
        match eval(v, Pass::Brief).await {
            Ok(Some(us)) => {
                times.insert(v, us);
                order.push(v);
            }
            Ok(None) => failed.push(v),
            Err(_) => skipped.push(v),
        }
    };
    for (i, v) in seeds.iter().enumerate() {
        // The first seed (the default) always; the others while time is left.
        if i > 0 && clock.now_ms() > deadline_ms {
            break;
        }
        try_one(*v, &mut times).await;
    }
    let fastest = |times: &HashMap<V, f64>| {
        times
            .iter()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map(|(v, t)| (*v, *t))
    };
    let mut current = fastest(&times);
    while let Some((at, at_us)) = current {
        if clock.now_ms() > deadline_ms {
            break;
        }
        for n in neighbours(&at) {
            if clock.now_ms() > deadline_ms {
                break;
            }
            try_one(n, &mut times).await;
        }
        match fastest(&times) {
            Some((v, us)) if us < at_us * (1.0 - IMPROVEMENT) => current = Some((v, us)),
            _ => break,
        }
    }
    let mut ranked: Vec<(V, f64)> = order.iter().map(|v| (*v, times[v])).collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    // A walk that timed one variant only (its share was spent on the default) has
    // nothing to choose between: the brief figure stands, and the budget goes to the
    // problems after it.
    if ranked.len() < 2 {
        return Walk {
            finals: ranked.clone(),
            tried: ranked,
            failed,
            rounds: 0,
            spread: None,
        };
    }
    let default = seeds[0];
    let set = finalists(&ranked, default);
    let mut rounds: Vec<(V, Vec<f64>)> = set.iter().map(|v| (*v, Vec::new())).collect();
    for r in 0..FINAL_ROUNDS as usize {
        // The order rotates: no variant always runs first (or after the same one).
        for i in 0..rounds.len() {
            let j = (i + r) % rounds.len();
            if let Ok(Some(us)) = eval(rounds[j].0, Pass::Final).await {
                rounds[j].1.push(us);
            }
        }
    }
    let (finals, spread) = summarise_rounds(&rounds);
    Walk {
        tried: ranked,
        failed,
        finals,
        rounds: FINAL_ROUNDS,
        spread,
    }
}

/// The entry of a finished walk (None when nothing ran). Best, default and worst
/// are the final pass's figures (the best is its fastest, so never slower than the
/// others); the tried list keeps the brief ones.
pub(super) fn entry<V: Display + Copy + PartialEq>(
    walk: Walk<V>,
    problem: (&str, &str, Vec<u64>, u32, Option<u32>),
    default: V,
) -> Option<TuningEntry> {
    let (best, best_us) = *walk.finals.first()?;
    let in_final = |v: V| walk.finals.iter().find(|(x, _)| *x == v).map(|(_, t)| *t);
    // The slowest other variant by its brief timing, with its final-pass figure
    // (the winner alone: itself).
    let (worst, worst_us) = walk
        .tried
        .iter()
        .rev()
        .find(|(v, _)| *v != best)
        .map_or((best, best_us), |(v, t)| (*v, in_final(*v).unwrap_or(*t)));
    let (kernel, dtype, shape, batch, kv_heads) = problem;
    Some(TuningEntry {
        kernel: kernel.into(),
        dtype: dtype.into(),
        shape,
        batch,
        kv_heads,
        best: best.to_string(),
        best_us,
        worst: worst.to_string(),
        worst_us,
        default: default.to_string(),
        default_us: in_final(default).or_else(|| {
            walk.tried
                .iter()
                .find(|(v, _)| *v == default)
                .map(|(_, t)| *t)
        }),
        rounds: walk.rounds,
        spread: walk.spread,
        tried: walk
            .tried
            .iter()
            .map(|(v, t)| TriedVariant {
                variant: v.to_string(),
                median_us: *t,
            })
            .collect(),
        failed: walk.failed.iter().map(ToString::to_string).collect(),
    })
}
