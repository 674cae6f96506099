//! A reference's and a candidate's answers to the same prompts, compared.
//!
//! **Behaviour** (any chat API): the share of prompts whose greedy answers are
//! identical, and for the others the token index where they first differ.
//!
//! **Distribution** (where both gave top-k log-probabilities), on the positions
//! where both decoded the same context: every position up to and including the
//! first divergence (at the divergence itself the context is still shared; only
//! the token chosen differs). llama.cpp's `llama-perplexity --kl-divergence`
//! figures under its names and definitions:
//! - **KLD**: KL(reference || candidate) per position, in nats; its mean (with a
//!   95% interval by bootstrap over prompts, each prompt's positions kept
//!   together) and percentiles. Over an API only the top k are seen: the
//!   distributions are compared on the tokens both lists hold plus one shared
//!   "rest" bin (the mass outside them). Merging tokens into one bin can only
//!   lower a KL divergence, so this is a **lower bound**; it is **exact** when
//!   both lists hold the whole vocabulary (all of the mass on both sides).
//! - **Same top p**: the share of positions where both put the same token first.
//! - **Δp**: the candidate's probability of the reference's token minus the
//!   reference's, on the scored positions (at the divergence, where the
//!   candidate listed the reference's token in its top k): mean, RMS and
//!   percentiles, in probability (not %).
//! - **PPL ratio**: the candidate's perplexity over the reference's on the
//!   reference's tokens at those positions.
//!
//! Pairs where a side gave no top-k lists (an empty answer) are left out of
//! the distribution and counted (`without_logprobs`).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::sample::{Alt, Sample};
use tokenscope_stats::bootstrap;
use tokenscope_stats::rng::Rng;
use tokenscope_stats::stats::percentile;

/// Bootstrap resamples for the KLD interval.
const RESAMPLES: usize = 1000;
/// Mass closer to 1 than this counts as the whole distribution.
const WHOLE: f64 = 1e-6;

/// Percentiles under llama.cpp's names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Largest.
    pub max: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
    /// 99th.
    pub p99: f64,
    /// 95th.
    pub p95: f64,
    /// 90th.
    pub p90: f64,
    /// Median.
    pub median: f64,
    /// 10th.
    pub p10: f64,
    /// 5th.
    pub p5: f64,
    /// 1st.
    pub p1: f64,
    /// Smallest.
    pub min: f64,
}

impl Spread {
    fn of(v: &[f64]) -> Option<Spread> {
        let q = |x| percentile(v, x);
        Some(Spread {
            max: q(1.0)?,
            p99_9: q(0.999)?,
            p99: q(0.99)?,
            p95: q(0.95)?,
            p90: q(0.90)?,
            median: q(0.5)?,
            p10: q(0.10)?,
            p5: q(0.05)?,
            p1: q(0.01)?,
            min: q(0.0)?,
        })
    }
}

/// KL divergence figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kld {
    /// Mean over the scored positions, nats.
    pub mean: f64,
    /// 95% interval of the mean (bootstrap over prompts).
    pub ci95: [f64; 2],
    /// Per-position percentiles.
    pub spread: Spread,
    /// Exact (every position's lists held the whole vocabulary on both sides),
    /// or a lower bound.
    pub exact: bool,
    /// Every position compared on the reference's whole top k plus one rest
    /// bin: the candidate was asked for the reference's own ids (SGLang's
    /// `token_ids_logprob`), not only its own top k. Still a lower bound of
    /// the whole-vocabulary divergence, and the tightest one a top k allows.
    #[serde(default)]
    pub reference_top_k: bool,
}

impl Kld {
    /// What the figure is, for a table (empty when exact).
    pub fn label(&self) -> &'static str {
        match (self.exact, self.reference_top_k) {
            (true, _) => "",
            (false, true) => " (reference's top k + rest)",
            (false, false) => " (lower bound)",
        }
    }
}

/// Δp figures (probability, not %).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeltaP {
    /// Mean.
    pub mean: f64,
    /// Root mean square.
    pub rms: f64,
    /// Percentiles.
    pub spread: Spread,
}

/// The distribution figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Positions scored (KLD, same top p).
    pub positions: usize,
    /// KL(reference || candidate).
    pub kld: Kld,
    /// Share of positions whose most likely token is the same on both sides.
    pub same_top_p: f64,
    /// Δp on the scored positions (absent when none).
    pub delta_p: Option<DeltaP>,
    /// Perplexity ratio candidate / reference on those positions.
    pub ppl_ratio: Option<f64>,
}

/// Where greedy answers first differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// Answers that differ.
    pub count: usize,
    /// The first differing token's index: median, smallest, largest (by the
    /// reference's tokens when it gave them, else by words).
    pub median: f64,
    /// Smallest index.
    pub min: usize,
    /// Largest index.
    pub max: usize,
}

/// Behaviour and distribution of a candidate against a reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairFigures {
    /// Prompts compared.
    pub prompts: usize,
    /// Share of prompts with identical answers.
    pub exact_match: f64,
    /// Where the others first differ (absent when all match).
    pub divergence: Option<Divergence>,
    /// The distribution figures (absent: a side gave no top-k log-probabilities).
    pub distribution: Option<Distribution>,
    /// Pairs left out of the distribution: a side gave no top-k lists.
    pub without_logprobs: usize,
    /// Share of prompts whose first position's top-k lists share a token: near
    /// 0, the two servers do not speak the same tokens (another tokenizer or
    /// model), and the comparison means nothing.
    pub token_overlap: Option<f64>,
}

/// Compare answers pairwise (`reference[i]` with `candidate[i]`); `seed` drives
/// the bootstrap.
pub fn compare(reference: &[Sample], candidate: &[Sample], seed: u64) -> PairFigures {
    let n = reference.len().min(candidate.len());
    let pairs: Vec<(&Sample, &Sample)> = reference.iter().zip(candidate).take(n).collect();
    let same = pairs.iter().filter(|(r, c)| r.text == c.text).count();
    let firsts: Vec<usize> = pairs
        .iter()
        .filter(|(r, c)| r.text != c.text)
        .map(|(r, c)| first_difference(r, c))
        .collect();
    let divergence = (!firsts.is_empty()).then(|| {
        let f: Vec<f64> = firsts.iter().map(|&x| x as f64).collect();
        Divergence {
            count: firsts.len(),
            median: percentile(&f, 0.5).unwrap_or(0.0),
            min: firsts.iter().copied().min().unwrap_or(0),
            max: firsts.iter().copied().max().unwrap_or(0),
        }
    });
    let with_lists: Vec<(&Sample, &Sample)> = pairs
        .iter()
        .filter(|(r, c)| r.has_top_logprobs() && c.has_top_logprobs())
        .copied()
        .collect();
    let token_overlap = (!with_lists.is_empty()).then(|| {
        let overlapping = with_lists
            .iter()
            .filter(|(r, c)| {
                r.positions[0]
                    .top
                    .iter()
                    .any(|a| c.positions[0].top.iter().any(|b| b.token == a.token))
            })
            .count();
        overlapping as f64 / with_lists.len() as f64
    });
    PairFigures {
        prompts: n,
        exact_match: if n == 0 { 0.0 } else { same as f64 / n as f64 },
        divergence,
        distribution: distribution(&with_lists, seed),
        without_logprobs: n - with_lists.len(),
        token_overlap,
    }
}

/// The first index where two answers differ: by tokens when both gave them,
/// else by whitespace-separated words.
fn first_difference(r: &Sample, c: &Sample) -> usize {
    if !r.positions.is_empty() && !c.positions.is_empty() {
        return r
            .positions
            .iter()
            .zip(&c.positions)
            .position(|(a, b)| a.token != b.token)
            .unwrap_or(r.positions.len().min(c.positions.len()));
    }
    let (a, b): (Vec<&str>, Vec<&str>) = (
        r.text.split_whitespace().collect(),
        c.text.split_whitespace().collect(),
    );
    a.iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

/// KL over the tokens both lists hold plus one "rest" bin; exact when both
/// lists hold the whole mass. A token listed twice (two ids with one text) is
/// one outcome with their probabilities added, and the result is not exact.
pub fn kld_top_k(p: &[Alt], q: &[Alt]) -> (f64, bool) {
    let (pm, qm) = (merged(p), merged(q));
    let q_of: HashMap<&str, f64> = qm.iter().copied().collect();
    let (mut kl, mut p_in, mut q_in) = (0.0, 0.0, 0.0);
    for &(t, pp) in &pm {
        if let Some(&qq) = q_of.get(t) {
            kl += pp * (pp.ln() - qq.max(f64::MIN_POSITIVE).ln());
            p_in += pp;
            q_in += qq;
        }
    }
    let (p_rest, q_rest) = ((1.0 - p_in).max(0.0), (1.0 - q_in).max(0.0));
    if p_rest > 0.0 {
        // The candidate's rest is at least what its list's rounding may hide:
        // a larger rest only lowers the term, so the bound holds.
        kl += p_rest * (p_rest / q_rest.max(WHOLE)).ln();
    }
    let total = |m: &[(&str, f64)]| m.iter().map(|(_, p)| p).sum::<f64>();
    let exact = pm.len() == p.len()
        && qm.len() == q.len()
        && pm.len() == qm.len()
        && pm.iter().all(|(k, _)| q_of.contains_key(k))
        && (1.0 - total(&pm)).abs() <= WHOLE
        && (1.0 - total(&qm)).abs() <= WHOLE;
    (kl.max(0.0), exact)
}

/// A list's probabilities by token text (a text listed twice: added), in the
/// order first listed (sums in a fixed order: the same figures every run).
fn merged(l: &[Alt]) -> Vec<(&str, f64)> {
    let mut m: Vec<(&str, f64)> = Vec::with_capacity(l.len());
    for a in l {
        match m.iter_mut().find(|(t, _)| *t == a.token) {
            Some((_, p)) => *p += a.logprob.exp(),
            None => m.push((a.token.as_str(), a.logprob.exp())),
        }
    }
    m
}

fn distribution(pairs: &[(&Sample, &Sample)], seed: u64) -> Option<Distribution> {
    // Per prompt: its positions' KLDs (kept together for the bootstrap).
    let mut per_prompt: Vec<Vec<f64>> = Vec::with_capacity(pairs.len());
    let (mut same_top, mut positions, mut exact) = (0usize, 0usize, true);
    let mut covered = true;
    let (mut dps, mut ln_p, mut ln_q) = (Vec::new(), 0.0, 0.0);
    for (r, c) in pairs {
        let d = r
            .positions
            .iter()
            .zip(&c.positions)
            .position(|(a, b)| a.token != b.token);
        let shared = r.positions.len().min(c.positions.len());
        let scored = d.map_or(shared, |d| d + 1);
        let mut klds = Vec::with_capacity(scored);
        for (i, (a, b)) in r
            .positions
            .iter()
            .zip(&c.positions)
            .take(scored)
            .enumerate()
        {
            let (k, ex) = kld_top_k(&a.top, &b.top);
            klds.push(k);
            exact &= ex;
            covered &= a
                .top
                .iter()
                .all(|x| b.top.iter().any(|y| y.token == x.token));
            same_top += usize::from(a.top[0].token == b.top[0].token);
            positions += 1;
            // The candidate's probability of the reference's token: its own
            // choice before the divergence, its top-k entry at it (when listed).
            let q_of_ref = if d.is_none_or(|d| i < d) {
                b.logprob
            } else {
                b.top.iter().find(|x| x.token == a.token).map(|x| x.logprob)
            };
            if let (Some(p), Some(q)) = (a.logprob, q_of_ref) {
                dps.push(q.exp() - p.exp());
                ln_p += p;
                ln_q += q;
            }
        }
        per_prompt.push(klds);
    }
    let all: Vec<f64> = per_prompt.iter().flatten().copied().collect();
    if all.is_empty() {
        return None;
    }
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    let ci95 = bootstrap_mean(&per_prompt, seed);
    let delta_p = (!dps.is_empty()).then(|| DeltaP {
        mean: dps.iter().sum::<f64>() / dps.len() as f64,
        rms: (dps.iter().map(|x| x * x).sum::<f64>() / dps.len() as f64).sqrt(),
        spread: Spread::of(&dps).expect("not empty"),
    });
    let ppl_ratio = (!dps.is_empty()).then(|| ((ln_p - ln_q) / dps.len() as f64).exp());
    Some(Distribution {
        positions,
        kld: Kld {
            mean,
            ci95,
            spread: Spread::of(&all)?,
            exact,
            reference_top_k: covered,
        },
        same_top_p: same_top as f64 / positions as f64,
        delta_p,
        ppl_ratio,
    })
}

/// 95% interval of the mean over positions, resampling prompts (each with all
/// its positions: neighbouring positions of one answer are not independent).
fn bootstrap_mean(per_prompt: &[Vec<f64>], seed: u64) -> [f64; 2] {
    // Seeded as it always was (not `bootstrap::rng`), so its intervals stay put.
    let mut rng = Rng::new(seed);
    let mut means = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        let (mut sum, mut count) = (0.0, 0usize);
        for p in bootstrap::resample(per_prompt, &mut rng) {
            sum += p.iter().sum::<f64>();
            count += p.len();
        }
        if count > 0 {
            means.push(sum / count as f64);
        }
    }
    bootstrap::interval_95(&means).unwrap_or([f64::NAN; 2])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Position;

    fn alts(v: &[(&str, f64)]) -> Vec<Alt> {
        v.iter()
            .map(|(t, p)| Alt {
                token: (*t).into(),
                logprob: p.ln(),
                id: None,
            })
            .collect()
    }

    #[test]
    fn top_k_kld_is_exact_on_whole_lists_and_a_lower_bound_otherwise() {
        let p = alts(&[("a", 0.5), ("b", 0.3), ("c", 0.2)]);
        let q = alts(&[("a", 0.4), ("b", 0.4), ("c", 0.2)]);
        let exact = 0.5 * (0.5f64 / 0.4).ln() + 0.3 * (0.3f64 / 0.4).ln();
        let (k, ex) = kld_top_k(&p, &q);
        assert!(ex && (k - exact).abs() < 1e-12, "{k} vs {exact}");
        // The top 2 only: "c" goes into the rest bin (0.2 and 0.2): the same
        // here; with the rest split differently, lower.
        let (k2, ex2) = kld_top_k(&p[..2], &q[..2]);
        assert!(!ex2 && k2 <= exact + 1e-12, "{k2}");
        let q3 = alts(&[("a", 0.4), ("b", 0.4), ("d", 0.1), ("c", 0.1)]);
        let full = 0.5 * (0.5f64 / 0.4).ln() + 0.3 * (0.3f64 / 0.4).ln() + 0.2 * 2f64.ln();
        let (k3, _) = kld_top_k(&p[..2], &q3[..2]);
        assert!(k3 < full, "{k3} < {full}");
        // One text listed twice: one outcome, never called exact.
        let pd = alts(&[("x", 0.5), ("x", 0.3), ("y", 0.2)]);
        let qd = alts(&[("x", 0.7), ("x", 0.1), ("y", 0.2)]);
        let (kd, exd) = kld_top_k(&pd, &qd);
        assert!(!exd && kd.abs() < 1e-12, "{kd}");
        // A candidate list whose mass rounds above 1: the bound stays finite
        // and below the exact value for a true rest of 1e-6.
        let pr = alts(&[("a", 0.9)]);
        let qr = alts(&[("a", 1.0 + 1e-7)]);
        let (kr, _) = kld_top_k(&pr, &qr);
        assert!(
            kr < 0.9 * (0.9f64 / 1.0).ln() + 0.1 * (0.1f64 / 1e-6).ln() + 1e-9,
            "{kr}"
        );
    }

    fn sample(tokens: &[(&str, &[(&str, f64)])]) -> Sample {
        Sample {
            text: tokens.iter().map(|(t, _)| *t).collect(),
            positions: tokens
                .iter()
                .map(|(t, top)| {
                    let top = alts(top);
                    Position {
                        token: (*t).into(),
                        logprob: top.iter().find(|a| a.token == *t).map(|a| a.logprob),
                        top,
                    }
                })
                .collect(),
            model: "m".into(),
        }
    }

    #[test]
    fn positions_are_scored_up_to_the_first_divergence() {
        let r = sample(&[
            ("a", &[("a", 0.6), ("b", 0.4)]),
            ("b", &[("b", 0.7), ("a", 0.3)]),
            ("a", &[("a", 0.9), ("b", 0.1)]),
        ]);
        let c = sample(&[
            ("a", &[("a", 0.5), ("b", 0.5)]),
            ("a", &[("a", 0.6), ("b", 0.4)]),
            ("b", &[("b", 0.9), ("a", 0.1)]),
        ]);
        let f = compare(&[r.clone(), r.clone()], &[c, r], 1);
        assert_eq!(f.exact_match, 0.5);
        let d = f.divergence.unwrap();
        assert_eq!((d.count, d.min, d.max), (1, 1, 1));
        let dist = f.distribution.unwrap();
        // Prompt 1: positions 0 and 1 (the divergence), prompt 2: all three.
        assert_eq!(dist.positions, 5);
        assert!(dist.kld.exact);
        // Same top: p0 tie broken by order (a, a), p1 differs; prompt 2 all same.
        assert_eq!(dist.same_top_p, 4.0 / 5.0);
        // Δp: prompt 1 position 0 (0.5 - 0.6) and at the divergence the
        // candidate's 0.4 for the reference's "b" (0.4 - 0.7); prompt 2 zeros.
        let dp = dist.delta_p.unwrap();
        assert!((dp.mean - (-0.4 / 5.0)).abs() < 1e-12, "{}", dp.mean);
        assert_eq!(f.without_logprobs, 0);
        assert_eq!(f.token_overlap, Some(1.0));
    }
}
