//! The CI gate of a comparison (`compare --fail-on`): every term judged on
//! every level of every compared run, or said not evaluable with the reason and
//! the fix; where the data cannot resolve the term's limit, said with how much
//! more data could (`docs/metrics.md`, "Comparing runs", "The gate").

use super::compare::{
    Cell, Comparison, RunVsBase, TermOutcome, TermStatus, known_metric, metric_names,
};
use tokenscope_stats::compare::Verdict;

/// A CI gate's threshold (`--fail-on ttft_ms:p95:+5%,error_rate:+1pp,out_tok_s:-3%`):
/// a metric, the direction and size of change that fails.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The term as given (`tpot_ms:p95:+5%`).
    pub term: String,
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
            return Err(format!(
                "{s:?}: unknown metric {metric:?} ({})",
                metric_names()
            ));
        }
        Ok(Threshold {
            term: s.trim().to_owned(),
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

/// Why `metric` has no cell at a level both runs ran.
fn absent(metric: &str) -> String {
    let why = match metric.split(':').next().unwrap_or(metric) {
        "rendered_ttft_ms" => "rendered TTFT is measured by browser runs only",
        "goodput_fraction" => "goodput needs both runs to check SLOs (bench --slo)",
        "tpot_ms" | "itl_ms" => {
            "no answer of 2 tokens or more in one run (--max-tokens, --ignore-eos)"
        }
        "output_tokens_per_s" => "no round measured a throughput in one run",
        _ => "no successful request measured it in one run",
    };
    format!("not measured at this level: {why}")
}

/// Whether `cell`'s interval resolves a change of `asked` (in the metric's
/// unit, positive) and, where it does not, how much more data could: the
/// interval's half-width `h` shrinks with more requests only in its share
/// within rounds (`1 - s`, `s` the share between rounds), with more rounds of
/// the same size in all of it: `(h / asked)^2` the rounds, or
/// `(1 - s) / ((asked / h)^2 - s)` the requests when that is finite.
pub fn resolution(cell: &Cell, asked: f64, asked_text: &str) -> Option<String> {
    let i = cell.interval?;
    let half = (i.hi - i.lo) / 2.0;
    if asked.is_nan() || asked <= 0.0 || half <= asked {
        return None;
    }
    let shown = match cell.relative {
        Some(_) if cell.base != 0.0 && !is_rate(&cell.metric) => {
            format!("±{:.1}% of the base", half / cell.base.abs() * 100.0)
        }
        _ if is_rate(&cell.metric) => format!("±{:.2}pp", half * 100.0),
        _ => format!("±{half:.3}"),
    };
    let share = match cell.metric.as_str() {
        "output_tokens_per_s" => 1.0,
        _ => cell.between_rounds.unwrap_or(0.0),
    };
    let target = (asked / half).powi(2);
    let more = if target > share {
        let f = (1.0 - share) / (target - share);
        match cell.requests {
            Some([b, n]) => format!(
                "about {f:.1}x the requests ({} per level)",
                (b.max(n) as f64 * f).ceil()
            ),
            None => format!("about {f:.1}x the requests"),
        }
    } else {
        format!(
            "about {:.1}x the rounds (the spread between rounds is most of it; more requests a round would not do)",
            1.0 / target
        )
    };
    Some(format!(
        "the interval is {shown}: resolving {asked_text} needs {more}"
    ))
}

fn is_rate(metric: &str) -> bool {
    metric.ends_with("_rate") || metric == "goodput_fraction"
}

impl Threshold {
    /// The limit as a change of `cell` in its unit (positive), and as said.
    fn asked(&self, cell: &Cell) -> (f64, String) {
        if self.relative {
            (
                self.limit.abs() * cell.base.abs(),
                format!("±{}%", trim(self.limit.abs() * 100.0)),
            )
        } else if is_rate(&cell.metric) {
            (
                self.limit.abs(),
                format!("±{}pp", trim(self.limit.abs() * 100.0)),
            )
        } else {
            (self.limit.abs(), format!("±{}", trim(self.limit.abs())))
        }
    }

    /// This term at one level of `run` (its cell, if any).
    fn at(&self, run: &RunVsBase, load: &str, cell: Option<&Cell>) -> TermOutcome {
        let outcome = |status, value, reason: Option<String>| TermOutcome {
            term: self.term.clone(),
            run: run.name.clone(),
            level: load.to_owned(),
            status,
            value,
            reason,
        };
        let Some(cell) = cell else {
            return outcome(TermStatus::NotEvaluable, None, Some(absent(&self.metric)));
        };
        let value = if self.relative {
            cell.relative
        } else {
            Some(cell.diff)
        };
        if cell.interval.is_none() || cell.verdict == Verdict::Unknown {
            let why = cell
                .no_interval
                .clone()
                .unwrap_or_else(|| "no interval".into());
            return outcome(TermStatus::NotEvaluable, value, Some(why));
        }
        if value.is_none() {
            return outcome(
                TermStatus::NotEvaluable,
                None,
                Some("the base is 0: a relative change has no meaning (give an absolute limit: +20, +1pp)".into()),
            );
        }
        if self.crossed_by(cell) {
            return outcome(TermStatus::Crossed, value, None);
        }
        let (asked, text) = self.asked(cell);
        match resolution(cell, asked, &text) {
            Some(why) => outcome(TermStatus::Unresolved, value, Some(why)),
            None => outcome(TermStatus::Passed, value, None),
        }
    }
}

/// A number without trailing zeros (`5`, `2.5`).
fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Every term of `thresholds` on every level of every run of `c`: crossed,
/// passed, unresolved, or not evaluable (a cell without an interval, a metric
/// absent at a level, a level only one run ran), each with its reason.
pub fn judge(c: &Comparison, thresholds: &[Threshold]) -> Vec<TermOutcome> {
    let mut out = Vec::new();
    for run in &c.runs {
        for t in thresholds {
            for level in &run.levels {
                let cell = level.cells.iter().find(|x| x.metric == t.metric);
                out.push(t.at(run, &level.load, cell));
            }
            for (levels, who) in [
                (&run.only_in_base, "the base"),
                (&run.only_in_new, run.name.as_str()),
            ] {
                for load in levels {
                    out.push(TermOutcome {
                        term: t.term.clone(),
                        run: run.name.clone(),
                        level: load.clone(),
                        status: TermStatus::NotEvaluable,
                        value: None,
                        reason: Some(format!(
                            "the level ran only in {who}: nothing to compare it with (run the same levels)"
                        )),
                    });
                }
            }
            if run.levels.is_empty() && run.only_in_base.is_empty() && run.only_in_new.is_empty() {
                out.push(TermOutcome {
                    term: t.term.clone(),
                    run: run.name.clone(),
                    level: "-".into(),
                    status: TermStatus::NotEvaluable,
                    value: None,
                    reason: Some("no level in either run".into()),
                });
            }
        }
    }
    out
}

/// The gate's exit status from its terms: 1 when one crossed, else 3 when one
/// was not evaluable (unless `allow_unevaluated`), else 0.
pub fn exit_status(terms: &[TermOutcome], allow_unevaluated: bool) -> u8 {
    if terms.iter().any(|t| t.status == TermStatus::Crossed) {
        1
    } else if !allow_unevaluated && terms.iter().any(|t| t.status == TermStatus::NotEvaluable) {
        3
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_stats::compare::{Direction, Interval};

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
            requests: Some([60, 60]),
            df: None,
            between_rounds: Some(0.0),
            no_interval: None,
        }
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

    fn comparison(cells: Vec<Cell>, only_in_base: &[&str]) -> Comparison {
        use crate::report::compare::LevelVsBase;
        Comparison {
            schema: crate::report::compare::COMPARE_SCHEMA.into(),
            base: "b1.json".into(),
            min_change: 0.02,
            resamples: 100,
            seed: 1,
            gate: None,
            runs: vec![RunVsBase {
                name: "b2.json".into(),
                mismatches: Vec::new(),
                intervals: true,
                levels: vec![LevelVsBase {
                    load: "c=4".into(),
                    cells,
                }],
                only_in_base: only_in_base.iter().map(|s| (*s).to_owned()).collect(),
                only_in_new: Vec::new(),
            }],
        }
    }

    /// The silent gate of issue 35: a p95 of 24 requests has no interval, so it
    /// is not evaluable (the reason and the fix said), never a silent pass; so
    /// are a metric a level lacks and a level one run lacks. A judged cell
    /// whose interval is wider than the limit passes, said not resolved with
    /// how much more data would resolve it.
    #[test]
    fn every_term_is_judged_or_said_not_evaluable() {
        let mut p95 = cell("tpot_ms:p95", 10.0, 13.24, 0.0, 0.0);
        p95.interval = None;
        p95.verdict = Verdict::Unknown;
        p95.no_interval = Some(crate::report::compare::too_few(
            "tpot_ms",
            "p95",
            0.95,
            [24, 24],
        ));
        let wide = cell("tpot_ms:p50", 100.0, 101.0, 1.0 - 6.12, 1.0 + 6.12);
        let worse = cell("ttft_ms:p50", 100.0, 110.0, 6.0, 14.0);
        let mut zero = cell("error_rate", 0.0, 0.0, -0.004, 0.004);
        zero.relative = None;
        let c = comparison(vec![p95, wide, worse, zero], &["c=16"]);
        let t = Threshold::parse_list(
            "tpot_ms:p95:+5%,tpot_ms:p50:+5%,ttft_ms:p50:+5%,e2e_ms:p95:+5%,error_rate:+1%,error_rate:+1pp",
        )
        .unwrap();
        let terms = judge(&c, &t);
        // Six terms, each on the level both ran and on the one only the base ran.
        assert_eq!(terms.len(), 12);
        let at = |term: &str, level: &str| {
            terms
                .iter()
                .find(|o| o.term == term && o.level == level)
                .unwrap_or_else(|| panic!("{term} {level}: {terms:?}"))
        };
        let p95 = at("tpot_ms:p95:+5%", "c=4");
        assert_eq!(p95.status, TermStatus::NotEvaluable);
        let why = p95.reason.as_deref().unwrap();
        assert!(
            why.contains("24 requests (base) and 24 (new): a p95 needs 100 in each (tokenscope_stats::compare::min_samples)")
                && why.contains("--requests 100"),
            "{why}"
        );
        let wide = at("tpot_ms:p50:+5%", "c=4");
        assert_eq!(wide.status, TermStatus::Unresolved);
        let why = wide.reason.as_deref().unwrap();
        assert!(
            why.contains("the interval is ±6.1% of the base: resolving ±5% needs about 1.5x the requests (90 per level)"),
            "{why}"
        );
        assert_eq!(at("ttft_ms:p50:+5%", "c=4").status, TermStatus::Crossed);
        let absent = at("e2e_ms:p95:+5%", "c=4");
        assert_eq!(absent.status, TermStatus::NotEvaluable);
        assert!(
            absent
                .reason
                .as_deref()
                .unwrap()
                .contains("not measured at this level")
        );
        // A relative limit on a base of 0 cannot be read; an absolute one can
        // (and 0 of 60 against 0 of 60 does not resolve 1pp).
        let rel = at("error_rate:+1%", "c=4");
        assert_eq!(rel.status, TermStatus::NotEvaluable);
        assert!(rel.reason.as_deref().unwrap().contains("absolute limit"));
        assert_eq!(at("error_rate:+1pp", "c=4").status, TermStatus::Passed);
        let only = at("tpot_ms:p50:+5%", "c=16");
        assert_eq!(only.status, TermStatus::NotEvaluable);
        assert!(only.reason.as_deref().unwrap().contains("only in the base"));
        // Exit: crossed outranks not evaluable; without the crossing, 3, or 0
        // when allowed.
        assert_eq!(exit_status(&terms, false), 1);
        let rest: Vec<TermOutcome> = terms
            .into_iter()
            .filter(|o| o.status != TermStatus::Crossed)
            .collect();
        assert_eq!(exit_status(&rest, false), 3);
        assert_eq!(exit_status(&rest, true), 0);
    }
}
