//! Two kernels reports compared, rendered: text, Markdown and HTML of
//! [`tokenscope_kernel_report::KernelsComparison`].

use std::fmt::Write as _;

use crate::fmt::{escape_html, fmt_sig3};
use crate::table::{html_table, markdown_table, text_table};
use tokenscope_kernel_report::KernelsComparison;
use tokenscope_stats::compare::Verdict;

fn verdict_label(v: Verdict) -> &'static str {
    match v {
        Verdict::Better => "better",
        Verdict::Worse => "WORSE",
        Verdict::NoChange => "no change",
        Verdict::Unknown => "not judged",
    }
}

/// The table: per kernel, before and after (median us, GB/s), the change, its 95%
/// interval, the samples and the verdict.
pub fn compare_table(c: &KernelsComparison) -> (Vec<String>, Vec<Vec<String>>) {
    let headers = [
        "kernel",
        "before us",
        "after us",
        "change",
        "95% interval",
        "before GB/s",
        "after GB/s",
        "samples",
        "verdict",
    ]
    .map(String::from)
    .to_vec();
    let rows = c
        .rows
        .iter()
        .map(|r| {
            vec![
                r.kernel.clone(),
                fmt_sig3(r.before_us),
                fmt_sig3(r.after_us),
                format!("{:+.1}%", 100.0 * r.change),
                r.interval.map_or_else(
                    || "-".into(),
                    |i| format!("[{:+.1}%, {:+.1}%]", 100.0 * i.lo, 100.0 * i.hi),
                ),
                fmt_sig3(r.before_gbps),
                fmt_sig3(r.after_gbps),
                format!("{}/{}", r.samples[0], r.samples[1]),
                verdict_label(r.verdict).into(),
            ]
        })
        .collect();
    (headers, rows)
}

/// The lines around the table: the runs, what differs between them, the notes
/// and the kernels only one side ran.
fn preamble(c: &KernelsComparison) -> Vec<String> {
    let mut out = vec![format!(
        "Kernels: {} ({}) -> {} ({}); a change is significant when its 95% interval (bootstrap of the median over the samples) lies beyond {:.1}% of the base ({})",
        c.before,
        c.before_adapter.name,
        c.after,
        c.after_adapter.name,
        100.0 * c.noise_floor,
        c.noise_source
    )];
    out.extend(c.differences.iter().map(|d| format!("! {d}")));
    out
}

fn notes(c: &KernelsComparison) -> Vec<String> {
    let mut out: Vec<String> = c
        .rows
        .iter()
        .filter_map(|r| Some(format!("{}: {}", r.kernel, r.note.as_deref()?)))
        .collect();
    if !c.only_before.is_empty() {
        out.push(format!("only before: {}", c.only_before.join(", ")));
    }
    if !c.only_after.is_empty() {
        out.push(format!("only after: {}", c.only_after.join(", ")));
    }
    out
}

/// The comparison for the terminal.
pub fn compare_text(c: &KernelsComparison) -> String {
    let mut s = preamble(c).join("\n");
    s.push_str("\n\n");
    let (h, rows) = compare_table(c);
    s.push_str(&text_table(&h, &rows));
    for n in notes(c) {
        let _ = writeln!(s, "  {n}");
    }
    s
}

/// The comparison as Markdown.
pub fn compare_markdown(c: &KernelsComparison) -> String {
    let mut s = String::from("# tokenscope kernels comparison\n\n");
    for p in preamble(c) {
        let _ = writeln!(s, "{p}\n");
    }
    let (h, rows) = compare_table(c);
    s.push_str(&markdown_table(&h, &rows));
    let n = notes(c);
    if !n.is_empty() {
        s.push('\n');
        for n in n {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

/// The comparison as a self-contained HTML page.
pub fn compare_html(c: &KernelsComparison) -> String {
    let mut body = String::new();
    for p in preamble(c) {
        let _ = write!(body, "<p>{}</p>", escape_html(&p));
    }
    let (h, rows) = compare_table(c);
    body.push_str(&html_table(&h, &rows));
    let n = notes(c);
    if !n.is_empty() {
        body.push_str("<ul>");
        for n in n {
            let _ = write!(body, "<li>{}</li>", escape_html(&n));
        }
        body.push_str("</ul>");
    }
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>tokenscope kernels comparison</title></head><body><h1>tokenscope kernels comparison</h1>{body}</body></html>\n"
    )
}
