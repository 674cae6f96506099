//! Which variants ran and what the search saw: counts that agree with the kernel
//! table, and the search's figures only for the shapes it searched.

use std::fmt::Write as _;

use super::labels::{kernel_shape_label, rows_table};
use tokenscope_kernel_report::{KernelReport, KernelResult, SearchReport};

/// Kernels by where their variant came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VariantCounts {
    /// Kernels in the report.
    pub kernels: usize,
    /// Ran the variant searched for their own shape.
    pub tuned: usize,
    /// Ran the variant of the nearest shape searched (theirs was not).
    pub nearest: usize,
    /// Ran their default: the search had them but its budget ran out first.
    pub unsearched: usize,
    /// Ran their default (no tuning file, or none for them).
    pub default: usize,
    /// Ran a variant asked for by name.
    pub given: usize,
}

impl VariantCounts {
    /// The counts of a report's kernels.
    pub fn of(r: &KernelReport) -> VariantCounts {
        let own = || r.kernels.iter().filter(|k| !k.is_user());
        let mut c = VariantCounts {
            kernels: own().count(),
            ..VariantCounts::default()
        };
        for k in own() {
            match k.variant.as_ref().map(|v| v.source.as_str()) {
                Some("tuned") => c.tuned += 1,
                Some("nearest") => c.nearest += 1,
                Some("unsearched") => c.unsearched += 1,
                Some("given") => c.given += 1,
                _ => c.default += 1,
            }
        }
        c
    }

    /// In words: `23 of 30 kernels ran the variant searched for their shape, 7 their
    /// default (left unsearched when the budget ran out)`. The parts add up to the
    /// kernels.
    pub fn sentence(&self) -> String {
        let mut parts = vec![format!(
            "{} of {} kernels ran the variant searched for their shape",
            self.tuned, self.kernels
        )];
        if self.nearest > 0 {
            parts.push(format!(
                "{} the variant of the nearest shape searched (theirs was not)",
                self.nearest
            ));
        }
        if self.unsearched > 0 {
            parts.push(format!(
                "{} their default (left unsearched when the tuning budget ran out)",
                self.unsearched
            ));
        }
        if self.default > 0 {
            parts.push(format!("{} their default", self.default));
        }
        if self.given > 0 {
            parts.push(format!("{} a variant asked for by name", self.given));
        }
        parts.join(", ")
    }
}

/// Which variants ran: the tuning file used, or why not.
pub(super) fn tuning_section(s: &mut String, r: &KernelReport) {
    if let Some(t) = r
        .tuning
        .as_ref()
        .filter(|_| VariantCounts::of(r).kernels > 0)
    {
        let _ = writeln!(
            s,
            "Variants: {}; tuning file {}: {}\n",
            VariantCounts::of(r).sentence(),
            t.file,
            t.note
        );
    }
}

/// The search's figures of a kernel that ran the variant searched for its own shape
/// (a nearest shape's or an unsearched problem's never carry another's figures).
pub fn own_search(k: &KernelResult) -> Option<&SearchReport> {
    let v = k.variant.as_ref().filter(|v| v.source == "tuned")?;
    v.search.as_ref().filter(|s| s.shape == k.shape)
}

/// For each kernel tuned for its own shape, what the search saw: best, default
/// and slowest from the same interleaved pass, the spread between its repeats, and
/// what the figures cannot carry.
pub(super) fn search_section(s: &mut String, r: &KernelReport) {
    let tuned: Vec<(&KernelResult, &SearchReport)> = r
        .kernels
        .iter()
        .filter_map(|k| Some((k, own_search(k)?)))
        .collect();
    if tuned.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "Variant search on this adapter: the fastest, the default and the slowest variant, timed interleaved in one final pass"
    );
    let mut rows = vec![
        [
            "kernel",
            "dtype",
            "shape",
            "batch",
            "ran",
            "best us",
            "default us",
            "worst",
            "worst us",
            "tried",
            "rounds",
            "spread",
        ]
        .map(String::from)
        .to_vec(),
    ];
    let mut remarks = Vec::new();
    for (k, sr) in tuned {
        let name = k.variant.as_ref().map_or("-", |v| v.name.as_str());
        rows.push(vec![
            k.name.clone(),
            k.dtype.clone(),
            kernel_shape_label(k),
            k.batch.to_string(),
            name.to_owned(),
            format!("{:.1}", sr.best_us),
            sr.default_us
                .map_or_else(|| "-".into(), |t| format!("{t:.1}")),
            sr.worst.clone(),
            format!("{:.1}", sr.worst_us),
            sr.tried.to_string(),
            sr.rounds.to_string(),
            sr.spread
                .map_or_else(|| "-".into(), |x| format!("{:.1}%", 100.0 * x)),
        ]);
        for m in sr.remarks() {
            remarks.push(format!(
                "  ! {} {} {}: {m}",
                k.name,
                k.dtype,
                kernel_shape_label(k)
            ));
        }
    }
    s.push_str(&rows_table(&rows, &[3, 5, 6, 8, 9, 10, 11]));
    for m in remarks {
        let _ = writeln!(s, "{m}");
    }
    s.push('\n');
}
