//! The quality report (`tokenscope quality`) as terminal text, Markdown and
//! HTML, and beside a bench's speed figures per level.

use super::fmt::{escape_html, fmt_ms};
use super::table;
use tokenscope_core::model::level::LevelReport;
use tokenscope_quality::measure::{Distribution, PairFigures};
use tokenscope_quality::report::QualityReport;
use tokenscope_quality::tasks::TaskFigures;

/// What was compared with what, in one line.
fn what(r: &QualityReport) -> String {
    format!(
        "{} ({}) against the reference {} ({}): {} prompts x {} tokens, top {} log-probabilities",
        r.candidate.source,
        r.candidate.capabilities.model,
        r.reference.source,
        r.reference.capabilities.model,
        r.prompts,
        r.max_tokens,
        r.top_logprobs
    )
}

/// The report as text: the reference against itself, each level's figures
/// and tasks, the checks not run, the verdict.
pub fn text(r: &QualityReport) -> String {
    let mut s = format!("Quality: {}\n", what(r));
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
                d.kld.label(),
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
    let forced = |name: &str, d: &Distribution| {
        format!(
            "  {:<16} teacher-forced ({} chunks, {} positions): KLD mean {:.5} [{:.5}, {:.5}]{}  p99 {:.5}  same top p {:.1}%{}\n",
            name,
            r.teacher_forced_chunks,
            d.positions,
            d.kld.mean,
            d.kld.ci95[0],
            d.kld.ci95[1],
            d.kld.label(),
            d.kld.spread.p99,
            d.same_top_p * 100.0,
            d.ppl_ratio
                .map_or(String::new(), |p| format!("  PPL ratio {p:.4}"))
        )
    };
    if let Some(f) = &r.self_check {
        s.push_str(&row("reference x2", f));
    }
    if let Some(d) = &r.teacher_forced_self_check {
        s.push_str(&forced("", d));
    }
    for l in &r.levels {
        s.push_str(&row(&format!("candidate c={}", l.concurrency), &l.figures));
        if let Some(d) = &l.teacher_forced {
            s.push_str(&forced("", d));
        }
        if let Some(a) = &l.against_first_level {
            s.push_str(&format!(
                "  {:<16} against its own answers at c={}: exact match {:.1}%{}\n",
                "",
                r.levels[0].concurrency,
                a.exact_match * 100.0,
                if r.claim_broken(l) {
                    " (claims batch-invariant decoding)"
                } else {
                    ""
                }
            ));
        }
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

/// The figures per row (the reference against itself, then each level), as
/// the Markdown and HTML tables show them.
pub fn rows(r: &QualityReport) -> (Vec<String>, Vec<Vec<String>>) {
    let headers: Vec<String> = [
        "",
        "exact match",
        "first diverge (median token)",
        "KLD mean [95% CI]",
        "KLD p99",
        "same top p",
        "Δp RMS",
        "PPL ratio",
        "task accuracy (reference)",
        "flips lost / gained",
        "McNemar p",
    ]
    .map(str::to_owned)
    .to_vec();
    let figures = |name: String, f: &PairFigures, tasks: Option<&TaskFigures>| {
        let d = f.distribution.as_ref();
        let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
        vec![
            name,
            format!("{:.1}%", f.exact_match * 100.0),
            or_dash(f.divergence.as_ref().map(|d| format!("{}", d.median))),
            or_dash(d.map(|d| {
                format!(
                    "{:.5} [{:.5}, {:.5}]{}",
                    d.kld.mean,
                    d.kld.ci95[0],
                    d.kld.ci95[1],
                    d.kld.label()
                )
            })),
            or_dash(d.map(|d| format!("{:.5}", d.kld.spread.p99))),
            or_dash(d.map(|d| format!("{:.1}%", d.same_top_p * 100.0))),
            or_dash(
                d.and_then(|d| d.delta_p.as_ref())
                    .map(|p| format!("{:.4}", p.rms)),
            ),
            or_dash(d.and_then(|d| d.ppl_ratio).map(|p| format!("{p:.4}"))),
            or_dash(tasks.map(|t| {
                format!(
                    "{:.1}% ({:.1}%)",
                    t.candidate_flexible.accuracy * 100.0,
                    t.reference_flexible.accuracy * 100.0
                )
            })),
            or_dash(tasks.map(|t| format!("{} / {} of {}", t.flips_lost, t.flips_gained, t.tasks))),
            or_dash(tasks.map(|t| format!("{:.3}", t.mcnemar_p))),
        ]
    };
    // A teacher-forced distribution: its own row, the behaviour columns empty.
    let forced = |name: String, d: &Distribution| {
        let f = PairFigures {
            prompts: 0,
            exact_match: 0.0,
            divergence: None,
            distribution: Some(d.clone()),
            without_logprobs: 0,
            token_overlap: None,
        };
        let mut row = figures(name, &f, None);
        row[1] = "-".to_owned();
        row
    };
    let mut rows = Vec::new();
    if let Some(f) = &r.self_check {
        rows.push(figures("reference x2".to_owned(), f, None));
    }
    if let Some(d) = &r.teacher_forced_self_check {
        rows.push(forced("reference x2, teacher-forced".to_owned(), d));
    }
    for l in &r.levels {
        rows.push(figures(
            format!("candidate c={}", l.concurrency),
            &l.figures,
            l.tasks.as_ref(),
        ));
        if let Some(d) = &l.teacher_forced {
            rows.push(forced(
                format!("candidate c={}, teacher-forced", l.concurrency),
                d,
            ));
        }
    }
    (headers, rows)
}

/// The report as a Markdown section (`## Quality`).
pub fn markdown(r: &QualityReport) -> String {
    let (headers, rows) = rows(r);
    let mut s = format!("## Quality\n\n{}.\n\n", what(r));
    s.push_str(&table::markdown_table(&headers, &rows));
    s.push('\n');
    for n in &r.not_run {
        s.push_str(&format!("- Not run: {n}\n"));
    }
    for v in &r.verdict {
        s.push_str(&format!("- {v}\n"));
    }
    s
}

/// The report as an HTML section (every text escaped).
pub fn html(r: &QualityReport) -> String {
    let (headers, rows) = rows(r);
    let mut s = format!(
        "<section id=\"quality\"><h2>Quality</h2><p>{}.</p>",
        escape_html(&what(r))
    );
    s.push_str(&table::html_table(&headers, &rows));
    s.push_str("<ul>");
    for n in &r.not_run {
        s.push_str(&format!("<li>Not run: {}</li>", escape_html(n)));
    }
    for v in &r.verdict {
        s.push_str(&format!("<li>{}</li>", escape_html(v)));
    }
    s.push_str("</ul></section>");
    s
}

/// Speed and quality per level: each bench level (labelled, e.g. `c=16`)
/// beside the candidate's answers at the same concurrency (`-` where none
/// was checked).
pub fn beside_speed(
    levels: &[(String, &LevelReport)],
    r: &QualityReport,
) -> (Vec<String>, Vec<Vec<String>>) {
    let headers: Vec<String> = [
        "level",
        "TTFT p50 ms",
        "ITL p50 ms",
        "out tok/s",
        "exact match",
        "KLD mean",
        "same top p",
        "task accuracy",
        "flips",
    ]
    .map(str::to_owned)
    .to_vec();
    let rows = levels
        .iter()
        .map(|(label, l)| {
            let q = l
                .concurrency
                .and_then(|c| r.levels.iter().find(|q| q.concurrency == c));
            // Teacher-forced where measured, as the gates read it.
            let d = q.and_then(|q| {
                q.teacher_forced
                    .as_ref()
                    .or(q.figures.distribution.as_ref())
            });
            let t = q.and_then(|q| q.tasks.as_ref()).filter(|t| t.tasks > 0);
            let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
            vec![
                label.clone(),
                fmt_ms(l.metrics.ttft_ms.p50),
                fmt_ms(l.metrics.itl_ms.p50),
                format!("{:.1}", l.output_tokens_per_s),
                or_dash(q.map(|q| format!("{:.1}%", q.figures.exact_match * 100.0))),
                or_dash(d.map(|d| {
                    format!("{:.5}{}", d.kld.mean, if d.kld.exact { "" } else { " (≥)" })
                })),
                or_dash(d.map(|d| format!("{:.1}%", d.same_top_p * 100.0))),
                or_dash(t.map(|t| format!("{:.1}%", t.candidate_flexible.accuracy * 100.0))),
                or_dash(t.map(|t| format!("{} of {}", t.flips_lost + t.flips_gained, t.tasks))),
            ]
        })
        .collect();
    (headers, rows)
}
