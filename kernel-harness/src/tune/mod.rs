//! Which variant each kernel runs: the tuning file written by `tokenscope kernels
//! --tune` when it was made on this adapter, driver and tool version, else the
//! per-vendor default ([`defaults`]); and the search that writes the file ([`search`]).
//!
//! The file's model is core's (`tokenscope.tuning/1`,
//! [`tokenscope_core::report::kernels::TuningFile`]); variant names are parsed here.

pub mod defaults;
pub mod search;

use tokenscope_core::report::kernels::{
    AdapterReport, SearchReport, TuningFile, TuningUse, VariantReport,
};

use crate::kernels::VariantCaps;
use crate::kernels::attention::{AttentionSpec, AttentionVariant};
use crate::kernels::bandwidth::{BandwidthPlan, Stream, StreamVariant};
use crate::kernels::gemv::{GemvSpec, GemvVariant};

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

    fn default_of(variant: V, note: String) -> Choice<V> {
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
            }),
        }
    }

    /// The file in use, if any.
    pub fn file(&self) -> Option<&TuningFile> {
        self.file.as_ref()
    }

    /// The GEMV variant for `spec`: the tuned one (the shape's entry, or the nearest
    /// shape's when it can run this one), else the default.
    pub fn gemv(
        &self,
        spec: &GemvSpec,
        caps: &VariantCaps,
        adapter: &AdapterReport,
    ) -> Choice<GemvVariant> {
        let shape = [u64::from(spec.rows), u64::from(spec.cols)];
        if let Some((entry, exact)) = self
            .file
            .as_ref()
            .and_then(|f| f.lookup(spec.name(), spec.dtype.as_str(), &shape, spec.batch, None))
            && let Ok(v) = GemvVariant::parse(&entry.best)
            && v.check(spec, caps).is_none()
        {
            return Choice {
                variant: v,
                report: tuned_report(&entry.best, entry, exact),
            };
        }
        let (v, note) = defaults::gemv(spec, caps, adapter);
        Choice::default_of(v, note)
    }

    /// The variant of a streaming kernel (the bandwidth ceiling's read or copy) over
    /// `plan`'s buffers: tuned, else [`StreamVariant::DEFAULT`].
    pub fn stream(
        &self,
        stream: Stream,
        plan: &BandwidthPlan,
        adapter: &AdapterReport,
    ) -> Choice<StreamVariant> {
        let shape = stream_shape(plan);
        if let Some((entry, exact)) = self
            .file
            .as_ref()
            .and_then(|f| f.lookup(stream.name(), "u32", &shape, 1, None))
            && let Ok(v) = StreamVariant::parse(&entry.best)
        {
            return Choice {
                variant: v,
                report: tuned_report(&entry.best, entry, exact),
            };
        }
        let (v, note) = defaults::stream(adapter);
        Choice::default_of(v, note)
    }

    /// The decode-attention variant for `spec`, likewise.
    pub fn attention(
        &self,
        spec: &AttentionSpec,
        caps: &VariantCaps,
        adapter: &AdapterReport,
    ) -> Choice<AttentionVariant> {
        let shape = spec.shape();
        if let Some((entry, exact)) = self.file.as_ref().and_then(|f| {
            f.lookup(
                spec.name(),
                spec.kv_dtype.as_str(),
                &shape,
                1,
                Some(spec.kv_heads),
            )
        }) && let Ok(v) = AttentionVariant::parse(&entry.best)
            && v.check(spec, caps).is_none()
        {
            return Choice {
                variant: v,
                report: tuned_report(&entry.best, entry, exact),
            };
        }
        let (v, note) = defaults::attention(spec, caps, adapter);
        Choice::default_of(v, note)
    }
}

/// How a tuning file names a streaming problem's shape: `[buffers, buffer_bytes]`.
pub fn stream_shape(plan: &BandwidthPlan) -> Vec<u64> {
    vec![u64::from(plan.buffers), plan.buffer_bytes]
}

fn tuned_report(
    name: &str,
    entry: &tokenscope_core::report::kernels::TuningEntry,
    exact: bool,
) -> VariantReport {
    let shape: Vec<String> = entry.shape.iter().map(u64::to_string).collect();
    VariantReport {
        name: name.into(),
        source: "tuned".into(),
        note: if exact {
            "tuned on this adapter for this shape".into()
        } else {
            format!(
                "tuned on this adapter for the nearest shape searched, {}",
                shape.join("x")
            )
        },
        search: Some(SearchReport::of(entry)),
    }
}
