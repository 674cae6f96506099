//! Which variant each kernel runs: the tuning file written by `tokenscope kernels
//! --tune` when it was made on this adapter, driver and tool version, else the
//! per-vendor default (each variant type's module: `kernels::gemv::defaults`,
//! `kernels::attention`'s and `kernels::bandwidth`'s); and the search that writes the
//! file ([`search`]).
//!
//! This module is below the kernels (they ask it for their variant); the search is
//! above them. The file's model is core's (`tokenscope.tuning/1`,
//! [`tokenscope_kernel_report::TuningFile`]); variant names are the kernels'.

pub mod search;
mod walk;

use tokenscope_kernel_report::{AdapterReport, SearchReport, TuningFile, TuningUse, VariantReport};

/// PCI vendor id of NVIDIA.
pub const NVIDIA: u32 = 0x10de;

/// Kinds of adapter with their own defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Runs on the CPU.
    Cpu,
    /// NVIDIA GPU.
    Nvidia,
    /// Any other GPU.
    OtherGpu,
}

impl Family {
    /// The family of an adapter (by PCI vendor, or its name where the backend gives
    /// no id, as browsers do).
    pub fn of(adapter: &AdapterReport) -> Family {
        if adapter.is_cpu() {
            Family::Cpu
        } else if adapter.vendor_id == NVIDIA
            || adapter.name.to_ascii_lowercase().contains("nvidia")
        {
            Family::Nvidia
        } else {
            Family::OtherGpu
        }
    }
}

/// The variants a run uses: a tuning file that applies to the adapter, or none.
#[derive(Debug, Clone, Default)]
pub struct Tuning {
    file: Option<TuningFile>,
    /// What the report says about it.
    pub usage: Option<TuningUse>,
}

/// A variant and the report of why it was chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice<V> {
    /// The variant.
    pub variant: V,
    /// Why (for the kernel's result).
    pub report: VariantReport,
}

impl<V: std::fmt::Display> Choice<V> {
    /// A variant asked for by name (tests, `--variant`).
    pub fn given(variant: V) -> Choice<V> {
        Choice {
            report: VariantReport {
                name: variant.to_string(),
                source: "given".into(),
                note: "asked for by name".into(),
                search: None,
            },
            variant,
        }
    }

    /// A default variant, with where it came from.
    pub fn default_of(variant: V, note: String) -> Choice<V> {
        Choice {
            report: VariantReport {
                name: variant.to_string(),
                source: "default".into(),
                note,
                search: None,
            },
            variant,
        }
    }
}

impl Tuning {
    /// No file: every kernel takes its default.
    pub fn none() -> Tuning {
        Tuning::default()
    }

    /// `file` (read from `path`) for `adapter` under `tool_version`: used when it was
    /// made there, else set aside with the reason in the report.
    pub fn from_file(
        file: TuningFile,
        path: &str,
        adapter: &AdapterReport,
        tool_version: &str,
    ) -> Tuning {
        match file.mismatch(adapter, tool_version) {
            None => Tuning {
                usage: Some(TuningUse {
                    file: path.into(),
                    used: true,
                    note: format!(
                        "{} tuned problems, searched in {:.0} s{}",
                        file.entries.len(),
                        file.spent_s,
                        if file.unsearched.is_empty() {
                            String::new()
                        } else {
                            format!(
                                "; {} left unsearched when the budget ran out (their defaults ran)",
                                file.unsearched.len()
                            )
                        }
                    ),
                    read_gbps: file.read_gbps(),
                }),
                file: Some(file),
            },
            Some(why) => Tuning::unused(path, format!("not used: {why}; defaults instead")),
        }
    }

    /// No usable file at `path`, for `note`'s reason.
    pub fn unused(path: &str, note: String) -> Tuning {
        Tuning {
            file: None,
            usage: Some(TuningUse {
                file: path.into(),
                used: false,
                note,
                read_gbps: None,
            }),
        }
    }

    /// The file in use, if any.
    pub fn file(&self) -> Option<&TuningFile> {
        self.file.as_ref()
    }

    /// The variant for a problem (kernel, format, shape, batch, KV heads): the tuned
    /// one when the file has the problem, or the nearest shape's, and `parse` accepts
    /// its name (a variant this device can run for this problem); else `default()`.
    pub fn choose<V: std::fmt::Display>(
        &self,
        problem: (&str, &str, &[u64], u32, Option<u32>),
        parse: impl Fn(&str) -> Option<V>,
        default: impl FnOnce() -> (V, String),
    ) -> Choice<V> {
        let (kernel, dtype, shape, batch, kv_heads) = problem;
        // A problem the search had but never reached runs its default: another
        // shape's variant (and figures) would claim a search that did not happen.
        if self.file.as_ref().is_some_and(|f| f.is_unsearched(problem)) {
            let (v, note) = default();
            let mut c = Choice::default_of(v, note);
            c.report.source = "unsearched".into();
            c.report.note = format!(
                "left unsearched when the tuning budget ran out: the default ran ({})",
                c.report.note
            );
            return c;
        }
        if let Some((entry, exact)) = self
            .file
            .as_ref()
            .and_then(|f| f.lookup(kernel, dtype, shape, batch, kv_heads))
            && let Some(v) = parse(&entry.best)
        {
            return Choice {
                variant: v,
                report: tuned_report(&entry.best, entry, exact),
            };
        }
        let (v, note) = default();
        Choice::default_of(v, note)
    }
}

fn tuned_report(
    name: &str,
    entry: &tokenscope_kernel_report::TuningEntry,
    exact: bool,
) -> VariantReport {
    if exact {
        return VariantReport {
            name: name.into(),
            source: "tuned".into(),
            note: "tuned on this adapter for this shape".into(),
            search: Some(SearchReport::of(entry)),
        };
    }
    // Another shape's choice: its name, never its figures.
    let shape: Vec<String> = entry.shape.iter().map(u64::to_string).collect();
    VariantReport {
        name: name.into(),
        source: "nearest".into(),
        note: format!(
            "this shape was not searched: the variant tuned on this adapter for the nearest shape searched, {}",
            shape.join("x")
        ),
        search: None,
    }
}
