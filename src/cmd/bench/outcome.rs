//! How a bench run ends: its exit code from its reports, once every output is
//! written (docs/cli.md, "Exit codes"). 4: the run failed as a run (no measured
//! request succeeded, or a level's errors and timeouts above `--max-error-rate`);
//! 3: an SLO check could not be evaluated at some level (too few requests for
//! its percentile, the metric absent), unless `--allow-unevaluated`; else 0. An
//! SLO that is evaluated and not met is analysis (the SLO capacity), not a gate:
//! it leaves the code alone.

use tokenscope_core::report::ClientReport;

/// The run's own gates (the quality checks' `--fail-on` are `quality`'s).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunGates {
    /// `--max-error-rate`: the largest share (0..1) of a level's requests that
    /// may fail or time out.
    pub max_error_rate: Option<f64>,
    /// `--allow-unevaluated`: an SLO check not evaluable does not exit 3.
    pub allow_unevaluated: bool,
}

/// A failed run's exit code.
pub const RUN_FAILED: u8 = 4;
/// An SLO check not evaluable.
pub const NOT_EVALUABLE: u8 = 3;

/// The exit code the reports call for (0, 3 or 4) and what to say of it on
/// stderr, one line each.
pub fn exit_code(reports: &[&ClientReport], gates: &RunGates) -> (u8, Vec<String>) {
    let mut said = Vec::new();
    let levels = || reports.iter().flat_map(|r| r.levels.iter());
    let sent: u64 = levels().map(|l| l.sent).sum();
    let ok: u64 = levels().map(|l| l.ok).sum();
    let mut failed = false;
    if ok == 0 {
        let mut kinds: std::collections::BTreeMap<&str, u64> = Default::default();
        for l in levels() {
            for (k, n) in &l.error_kinds {
                *kinds.entry(k.as_str()).or_default() += n;
            }
            for (k, n) in &l.timeout_phases {
                *kinds.entry(k.as_str()).or_default() += n;
            }
        }
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        said.push(format!(
            "error: the run failed: none of its {sent} measured requests succeeded{} (exit {RUN_FAILED})",
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            }
        ));
        failed = true;
    }
    if let Some(max) = gates.max_error_rate {
        for l in levels() {
            let rate = l.error_rate + l.timeout_rate;
            if l.sent > 0 && rate > max {
                said.push(format!(
                    "error: --max-error-rate {}: {} had {:.1}% errors and timeouts ({} of {} requests) (exit {RUN_FAILED})",
                    fmt_share(max),
                    l.label(),
                    100.0 * rate,
                    l.errors + l.timeouts,
                    l.sent
                ));
                failed = true;
            }
        }
    }
    if failed {
        return (RUN_FAILED, said);
    }
    let unevaluated: Vec<String> = levels()
        .flat_map(|l| {
            l.slo_checks.iter().filter_map(move |c| {
                let why = c.not_evaluable.as_deref()?;
                Some(format!("{}: {}: {why}", l.label(), c.slo))
            })
        })
        .collect();
    if unevaluated.is_empty() {
        return (0, said);
    }
    let n = unevaluated.len();
    let head = format!(
        "--slo: {n} check{} could not be evaluated",
        if n == 1 { "" } else { "s" }
    );
    if gates.allow_unevaluated {
        said.push(format!("note: {head} (allowed: --allow-unevaluated)"));
        return (0, said);
    }
    said.push(format!(
        "error: {head} (exit {NOT_EVALUABLE}; --allow-unevaluated to accept):"
    ));
    said.extend(unevaluated.into_iter().map(|u| format!("  {u}")));
    (NOT_EVALUABLE, said)
}

/// `--max-error-rate`: a fraction 0..1 (`0.05`) or a percentage (`5%`).
pub fn parse_share(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(p) => (p.trim(), 100.0),
        None => (t, 1.0),
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=scale).contains(&v) => Ok(v / scale),
        _ => Err(format!(
            "{s:?} is not a share of requests: a fraction from 0 to 1 (0.05) or a percentage (5%)"
        )),
    }
}

fn fmt_share(v: f64) -> String {
    let p = format!("{:.4}", 100.0 * v);
    format!("{}%", p.trim_end_matches('0').trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_read_as_fractions_or_percentages() {
        assert_eq!(parse_share("0.05"), Ok(0.05));
        assert_eq!(parse_share("5%"), Ok(0.05));
        assert_eq!(parse_share(" 0 "), Ok(0.0));
        assert_eq!(parse_share("100%"), Ok(1.0));
        for bad in ["5", "-1%", "101%", "x", "nan"] {
            assert!(parse_share(bad).is_err(), "{bad}");
        }
        assert_eq!(fmt_share(0.05), "5%");
        assert_eq!(fmt_share(0.125), "12.5%");
    }
}
