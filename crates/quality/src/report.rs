//! The quality report (`tokenscope.quality/1`): what each server could do, the
//! candidate against the reference at each concurrency, the reference against
//! itself (the noise floor), the verdict in words with the calibration it rests
//! on, and the CI gate.

use serde::{Deserialize, Serialize};

use super::measure::{Distribution, PairFigures};
use super::tasks::TaskFigures;

/// The report's schema tag.
pub const SCHEMA: &str = "tokenscope.quality/1";

/// llama.cpp's KLD calibration: mean KL divergence of quantisations of
/// LLaMA-3-8B from its FP16 weights (llama.cpp's perplexity docs), nats.
pub const CALIBRATION: [(&str, f64); 3] = [("q8_0", 0.0014), ("q4_K_M", 0.031), ("q2_K", 0.445)];

/// What a server offered, as probed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Capabilities {
    /// It answered a chat completion.
    pub chat: bool,
    /// It gave each generated token's log-probability and top-k alternatives.
    pub top_logprobs: bool,
    /// It scored a prompt's own tokens (`echo` with `logprobs` on its
    /// completions API): teacher-forced scoring.
    #[serde(default)]
    pub prompt_logprobs: bool,
    /// How: `echo` (completions) or `generate` (SGLang's native API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_logprobs_via: Option<String>,
    /// It named its tokens by id (vLLM's `return_tokens_as_token_ids`:
    /// `token_id:N`), so tokens of the same text are told apart.
    #[serde(default)]
    pub token_ids: bool,
    /// The model it named.
    pub model: String,
}

/// The two servers' tokenizers compared on one text through `/tokenize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenizerCheck {
    /// The reference's token count of the text.
    pub reference_tokens: usize,
    /// The candidate's.
    pub candidate_tokens: usize,
    /// The first token whose id differs (`None`: the same ids throughout).
    pub first_difference: Option<usize>,
}

impl TokenizerCheck {
    /// Compare two id lists of the same text.
    pub fn of(reference: &[u64], candidate: &[u64]) -> TokenizerCheck {
        let first_difference = reference
            .iter()
            .zip(candidate)
            .position(|(a, b)| a != b)
            .or((reference.len() != candidate.len()).then(|| reference.len().min(candidate.len())));
        TokenizerCheck {
            reference_tokens: reference.len(),
            candidate_tokens: candidate.len(),
            first_difference,
        }
    }

    /// The same ids for the whole text.
    pub fn same(&self) -> bool {
        self.first_difference.is_none()
    }
}

/// One side of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// URL (scheme, host, path: never credentials or query) or golden file path.
    pub source: String,
    /// What it offered.
    pub capabilities: Capabilities,
}

/// The candidate at one concurrency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QualityLevel {
    /// Requests in flight at once.
    pub concurrency: u32,
    /// Against the reference.
    pub figures: PairFigures,
    /// The tasks against the reference's (absent: no tasks asked).
    pub tasks: Option<TaskFigures>,
    /// The distribution teacher-forced on the fixed text: every position of
    /// each chunk's second half scored on both sides (absent: a side could not
    /// score a prompt, or their tokens differ).
    #[serde(default)]
    pub teacher_forced: Option<Distribution>,
    /// The candidate's answers here against its own at the first level (the
    /// same prompts, less load): what load alone changed (absent at the first
    /// level).
    #[serde(default)]
    pub against_first_level: Option<PairFigures>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QualityReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// tokenscope's version.
    pub tool_version: String,
    /// The reference.
    pub reference: Side,
    /// The candidate.
    pub candidate: Side,
    /// Prompts, `max_tokens` and `top_logprobs` asked.
    pub prompts: usize,
    /// `max_tokens`.
    pub max_tokens: u32,
    /// `top_logprobs`.
    pub top_logprobs: u32,
    /// The reference against itself (the same prompts again): the noise floor;
    /// for a golden file, the one measured when it was made (absent from
    /// files that did not keep one).
    pub self_check: Option<PairFigures>,
    /// The candidate was said to decode batch-invariantly
    /// (`--batch-invariant`): answers that change with load are a defect.
    #[serde(default)]
    pub batch_invariant_claimed: bool,
    /// The tokenizers compared on the fixed text's first chunk (absent: a
    /// side has no `/tokenize`).
    #[serde(default)]
    pub tokenizer: Option<TokenizerCheck>,
    /// Chunks of the fixed text scored teacher-forced (0: none).
    #[serde(default)]
    pub teacher_forced_chunks: usize,
    /// The reference's teacher-forced scores against themselves (the same
    /// chunks again): the noise floor of [`QualityLevel::teacher_forced`].
    #[serde(default)]
    pub teacher_forced_self_check: Option<Distribution>,
    /// The candidate per concurrency.
    pub levels: Vec<QualityLevel>,
    /// Checks that did not run, and why.
    pub not_run: Vec<String>,
    /// The verdict, a sentence each.
    pub verdict: Vec<String>,
}

impl QualityReport {
    /// Whether the candidate at `level` differs beyond the reference's own noise.
    pub fn changed(&self, level: &QualityLevel) -> bool {
        let f = &level.figures;
        // Fewer identical answers than the reference gives itself, counted in
        // whole answers over the candidate's prompts.
        let floor_match = self.self_check.as_ref().map_or(1.0, |s| s.exact_match);
        let n = f.prompts as f64;
        let fewer_matches = (f.exact_match * n).round() < (floor_match * n).round();
        // The distribution: teacher-forced where measured, else generated;
        // each against its own noise floor.
        let (d, floor) = match &level.teacher_forced {
            Some(t) => (Some(t), self.teacher_forced_self_check.as_ref()),
            None => (
                f.distribution.as_ref(),
                self.self_check
                    .as_ref()
                    .and_then(|s| s.distribution.as_ref()),
            ),
        };
        let floor_kld = floor.map_or(0.0, |d| d.kld.ci95[1]);
        let kld_above = d.is_some_and(|d| d.kld.ci95[0] > floor_kld.max(1e-6));
        let flips = level.tasks.as_ref().is_some_and(|t| t.mcnemar_p < 0.05);
        fewer_matches || kld_above || flips
    }

    /// Write the verdict sentences.
    pub fn write_verdict(&mut self) {
        let mut out = Vec::new();
        if let Some(t) = &self.tokenizer {
            out.push(match t.first_difference {
                None => format!(
                    "Tokenizers: the same {} token ids for the probe text on both servers.",
                    t.reference_tokens
                ),
                Some(i) => format!(
                    "Tokenizers differ: the probe text is {} tokens on the reference and {} on the candidate, the ids parting at token {i}; token-by-token figures compare texts, not the same tokens.",
                    t.reference_tokens, t.candidate_tokens
                ),
            });
        }
        if let Some(s) = &self.self_check {
            out.push(format!(
                "The reference against itself: {} of greedy answers identical{}.",
                pct(s.exact_match),
                s.distribution
                    .as_ref()
                    .map_or(String::new(), |d| format!(", mean KLD {:.5}", d.kld.mean))
            ));
        }
        for l in &self.levels {
            let f = &l.figures;
            let mut s = format!(
                "At concurrency {}: {}",
                l.concurrency,
                if self.changed(l) {
                    "the candidate answers differently from the reference"
                } else {
                    "no change from the reference seen"
                }
            );
            s.push_str(&format!(
                " ({} of {} greedy answers identical",
                pct(f.exact_match),
                f.prompts
            ));
            if let Some(d) = &f.divergence {
                s.push_str(&format!(
                    "; the others first differ at token {} (median)",
                    d.median
                ));
            }
            s.push(')');
            // Teacher-forced where measured (llama.cpp's reading), else the
            // generated positions up to where the answers part.
            let (d, how) = match &l.teacher_forced {
                Some(t) => (Some(t), "teacher-forced on the fixed text"),
                None => (f.distribution.as_ref(), "on the generated tokens"),
            };
            if let Some(d) = d {
                s.push_str(&format!(
                    ". Mean KLD {:.5} nats {how} ({}, 95% {:.5}-{:.5}): {}; same top token at {} of {} positions",
                    d.kld.mean,
                    match (d.kld.exact, d.kld.reference_top_k) {
                        (true, _) => "exact",
                        (false, true) => "on the reference's top k and the rest, the candidate asked for the reference's own ids",
                        (false, false) => "a lower bound: only the top k are seen",
                    },
                    d.kld.ci95[0],
                    d.kld.ci95[1],
                    calibrated(d.kld.mean),
                    pct(d.same_top_p),
                    d.positions
                ));
            }
            if let Some(a) = &l.against_first_level {
                let first = self.levels.first().map_or(1, |f| f.concurrency);
                if a.prompts == 0 {
                    s.push_str(&format!(
                        ". Against its own answers at concurrency {first}: no prompt answered at both levels, nothing compared"
                    ));
                } else {
                    s.push_str(&format!(
                        ". Against its own answers at concurrency {first}: {} identical{}",
                        pct(a.exact_match),
                        if self.claim_broken(l) {
                            " although it claims batch-invariant decoding: load changed its answers"
                        } else {
                            ""
                        }
                    ));
                }
            }
            if let Some(t) = &l.tasks {
                s.push_str(&format!(
                    ". Tasks: {} right against the reference's {} (flexible; 95% {}-{}), {} flipped to wrong and {} to right of {} (McNemar p = {:.3})",
                    pct(t.candidate_flexible.accuracy),
                    pct(t.reference_flexible.accuracy),
                    pct(t.candidate_flexible.ci95[0]),
                    pct(t.candidate_flexible.ci95[1]),
                    t.flips_lost,
                    t.flips_gained,
                    t.tasks,
                    t.mcnemar_p
                ));
            }
            s.push('.');
            out.push(s);
        }
        self.verdict = out;
    }
}

/// Where a mean KLD sits on llama.cpp's LLaMA-3-8B scale.
pub fn calibrated(kld: f64) -> String {
    let scale = "on llama.cpp's LLaMA-3-8B scale";
    let [(n0, v0), (n1, v1), (n2, v2)] = CALIBRATION;
    if kld < v0 {
        format!("below q8_0's {v0} {scale} (a change that small is rarely visible)")
    } else if kld < v1 {
        format!("between {n0} ({v0}) and {n1} ({v1}) {scale}")
    } else if kld < v2 {
        format!("between {n1} ({v1}) and {n2} ({v2}) {scale}")
    } else {
        format!("above {n2}'s {v2} {scale}: a large change")
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

impl QualityReport {
    /// The levels whose answers changed with load although the candidate
    /// claims batch-invariant decoding (none when it does not claim it).
    pub fn batch_invariance_broken(&self) -> Vec<&QualityLevel> {
        self.levels
            .iter()
            .filter(|l| self.claim_broken(l))
            .collect()
    }

    /// Whether `level` breaks a batch-invariance claim: answers compared with
    /// the first level's, and not all the same.
    pub fn claim_broken(&self, level: &QualityLevel) -> bool {
        self.batch_invariant_claimed
            && level
                .against_first_level
                .as_ref()
                .is_some_and(|a| a.prompts > 0 && a.exact_match < 1.0)
    }
}

/// One `--fail-on` threshold: `METRIC:>N`, `METRIC:<N%`, ...
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// The term as given (`kld_mean:>0.01`).
    pub term: String,
    /// The metric's name.
    pub metric: String,
    /// Fails above (`>`) or below (`<`) the value.
    pub above: bool,
    /// The value (a `%` is divided by 100).
    pub value: f64,
}

/// A gate at one level: the figure and whether it crossed, or why it could
/// not be checked.
pub type GateAt = Result<(f64, bool), String>;

/// The metrics `--fail-on` knows.
pub const GATE_METRICS: [&str; 9] = [
    "kld_mean",
    "kld_p99",
    "same_top_p",
    "exact_match",
    "delta_p_rms",
    "ppl_ratio",
    "accuracy",
    "accuracy_drop",
    "flips",
];

impl Gate {
    /// Parse `kld_mean:>0.01,exact_match:<90%`.
    pub fn parse_list(s: &str) -> Result<Vec<Gate>, String> {
        s.split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                let (metric, rest) = p
                    .trim()
                    .split_once(':')
                    .ok_or_else(|| format!("{p:?}: expected METRIC:>N or METRIC:<N"))?;
                if !GATE_METRICS.contains(&metric) {
                    return Err(format!(
                        "{metric:?}: not a quality metric (one of {})",
                        GATE_METRICS.join(", ")
                    ));
                }
                let above = match rest.chars().next() {
                    Some('>') => true,
                    Some('<') => false,
                    _ => return Err(format!("{p:?}: expected > or < after the colon")),
                };
                let num = rest[1..].trim();
                let (num, scale) = match num.strip_suffix('%') {
                    Some(n) => (n, 0.01),
                    None => (num, 1.0),
                };
                let value: f64 = num
                    .parse()
                    .map_err(|_| format!("{p:?}: {num:?} is not a number"))?;
                Ok(Gate {
                    term: p.trim().to_owned(),
                    metric: metric.to_owned(),
                    above,
                    value: value * scale,
                })
            })
            .collect()
    }

    /// The metric's value at a level (`None`: not measured there). Task
    /// metrics are the flexible reading: `accuracy` the candidate's,
    /// `accuracy_drop` the reference's minus it, `flips` the share of tasks
    /// answered right on one side only.
    pub fn value_of(&self, level: &QualityLevel) -> Option<f64> {
        let f = &level.figures;
        // Teacher-forced where measured (every position of a fixed text, as
        // llama.cpp), else the generated positions.
        let d = level.teacher_forced.as_ref().or(f.distribution.as_ref());
        let t = level.tasks.as_ref().filter(|t| t.tasks > 0);
        match self.metric.as_str() {
            "accuracy" => t.map(|t| t.candidate_flexible.accuracy),
            "accuracy_drop" => {
                t.map(|t| t.reference_flexible.accuracy - t.candidate_flexible.accuracy)
            }
            "flips" => t.map(|t| (t.flips_lost + t.flips_gained) as f64 / t.tasks as f64),
            "kld_mean" => d.map(|d| d.kld.mean),
            "kld_p99" => d.map(|d| d.kld.spread.p99),
            "same_top_p" => d.map(|d| d.same_top_p),
            "exact_match" => Some(f.exact_match),
            "delta_p_rms" => d.and_then(|d| d.delta_p.as_ref()).map(|p| p.rms),
            "ppl_ratio" => d.and_then(|d| d.ppl_ratio),
            _ => None,
        }
    }

    /// Why this gate's figure is missing at a level of `report`, and what
    /// would measure it.
    pub fn not_measured(&self, report: &QualityReport) -> String {
        let needs = match self.metric.as_str() {
            "accuracy" | "accuracy_drop" | "flips" => "tasks (--tasks N, or --tasks-file)",
            "exact_match" => "an answer from both servers",
            _ => {
                "top-k log-probabilities from both servers (--top-logprobs; a server that returns them)"
            }
        };
        let why = if report.not_run.is_empty() {
            "no answer carried it".to_owned()
        } else {
            report.not_run.join("; ")
        };
        format!(
            "{} not measured at this level ({why}): it needs {needs}",
            self.metric
        )
    }

    /// This gate at every level of `report`: the figure and whether it
    /// crossed, or why it could not be checked ([`Gate::not_measured`]).
    pub fn at_levels(&self, report: &QualityReport) -> Vec<(u32, GateAt)> {
        report
            .levels
            .iter()
            .map(|l| {
                let r = match self.value_of(l) {
                    Some(v) => Ok((v, self.crossed(l).is_some())),
                    None => Err(self.not_measured(report)),
                };
                (l.concurrency, r)
            })
            .collect()
    }

    /// Crossed at this level?
    pub fn crossed(&self, level: &QualityLevel) -> Option<f64> {
        let v = self.value_of(level)?;
        let crossed = if self.above {
            v > self.value
        } else {
            v < self.value
        };
        crossed.then_some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_parse_and_cross() {
        let g = Gate::parse_list("kld_mean:>0.01, exact_match:<90%").unwrap();
        assert_eq!(g.len(), 2);
        assert!(g[0].above && (g[1].value - 0.9).abs() < 1e-12 && !g[1].above);
        assert!(
            Gate::parse_list("speed:>1")
                .unwrap_err()
                .contains("not a quality metric")
        );
        assert!(Gate::parse_list("kld_mean:=1").is_err());
        assert!(Gate::parse_list("kld_mean:>x").is_err());
        let f = QualityLevel {
            concurrency: 1,
            figures: PairFigures {
                prompts: 10,
                exact_match: 0.8,
                divergence: None,
                distribution: None,
                without_logprobs: 0,
                token_overlap: None,
            },
            tasks: None,
            teacher_forced: None,
            against_first_level: None,
        };
        assert_eq!(g[1].crossed(&f), Some(0.8));
        assert_eq!(g[0].crossed(&f), None, "not measured: not crossed");
        let flips = Gate::parse_list("flips:>2%").unwrap();
        assert_eq!(flips[0].crossed(&f), None, "no tasks: not crossed");
    }

    #[test]
    fn tokenizers_part_where_their_ids_do() {
        assert!(TokenizerCheck::of(&[1, 2, 3], &[1, 2, 3]).same());
        assert_eq!(
            TokenizerCheck::of(&[1, 2, 3], &[1, 5, 3]).first_difference,
            Some(1)
        );
        assert_eq!(
            TokenizerCheck::of(&[1, 2, 3], &[1, 2]).first_difference,
            Some(2)
        );
    }

    #[test]
    fn the_calibration_names_its_neighbours() {
        assert!(calibrated(0.0005).contains("below q8_0"));
        assert!(calibrated(0.01).contains("between q8_0 (0.0014) and q4_K_M (0.031)"));
        assert!(calibrated(1.0).contains("above q2_K"));
    }
}
