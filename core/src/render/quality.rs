//! The quality report (`tokenscope quality`) as terminal text.

use crate::quality::measure::PairFigures;
use crate::quality::report::QualityReport;

/// The report as text: the reference against itself, each level's figures
/// and tasks, the checks not run, the verdict.
pub fn text(r: &QualityReport) -> String {
    let mut s = format!(
        "Quality: {} ({}) against the reference {} ({}), {} prompts x {} tokens\n",
        r.candidate.source,
        r.candidate.capabilities.model,
        r.reference.source,
        r.reference.capabilities.model,
        r.prompts,
        r.max_tokens
    );
    let row = |name: &str, f: &PairFigures| {
        let mut line = format!("  {name:<16} exact match {:>6.1}%", f.exact_match * 100.0);
        if let Some(d) = &f.divergence {
            line.push_str(&format!("  first diverge at token {} (median)", d.median));
        }
        if f.without_logprobs > 0 && f.distribution.is_some() {
            line.push_str(&format!(
                "  ({} answers without log-probabilities left out of the distribution)",
                f.without_logprobs
            ));
        }
        if let Some(d) = &f.distribution {
            line.push_str(&format!(
                "\n  {:<16} KLD mean {:.5} [{:.5}, {:.5}]{}  p99 {:.5}  same top p {:.1}%",
                "",
                d.kld.mean,
                d.kld.ci95[0],
                d.kld.ci95[1],
                if d.kld.exact { "" } else { " (lower bound)" },
                d.kld.spread.p99,
                d.same_top_p * 100.0
            ));
            if let (Some(p), Some(ppl)) = (&d.delta_p, d.ppl_ratio) {
                line.push_str(&format!(
                    "  Δp mean {:+.4} rms {:.4}  PPL ratio {ppl:.4}",
                    p.mean, p.rms
                ));
            }
        }
        line.push('\n');
        line
    };
    if let Some(f) = &r.self_check {
        s.push_str(&row("reference x2", f));
    }
    for l in &r.levels {
        s.push_str(&row(&format!("candidate c={}", l.concurrency), &l.figures));
        if let Some(t) = &l.tasks {
            s.push_str(&format!(
                "  {:<16} tasks: accuracy {:.1}% (reference {:.1}%; strict {:.1}% / {:.1}%), invalid {}, flips {} lost / {} gained of {}, McNemar p {:.3}\n",
                "",
                t.candidate_flexible.accuracy * 100.0,
                t.reference_flexible.accuracy * 100.0,
                t.candidate.accuracy * 100.0,
                t.reference.accuracy * 100.0,
                t.candidate.invalid,
                t.flips_lost,
                t.flips_gained,
                t.tasks,
                t.mcnemar_p
            ));
        }
    }
    for n in &r.not_run {
        s.push_str(&format!("  not run: {n}\n"));
    }
    for v in &r.verdict {
        s.push_str(&format!("{v}\n"));
    }
    s
}
