//! The `tokenscope.tuning/1` file that `tokenscope kernels --tune` writes: for one
//! adapter, driver and tool version, the variant each kernel problem runs fastest with,
//! and what the search saw (every variant it timed). Later runs on the same adapter read
//! it; the report says per kernel which variant ran and why
//! ([`VariantReport`]).
//!
//! Variant names are the harness's (`sg128_r2_u4_b1_q8`, `c64_w128_v8`); this model
//! stores them as text and never interprets them.

use serde::{Deserialize, Serialize};

use super::AdapterReport;

/// The schema id this build writes.
pub const TUNING_SCHEMA: &str = "tokenscope.tuning/1";

/// Errors reading a tuning file.
#[derive(Debug, thiserror::Error)]
pub enum TuningError {
    /// Not JSON of this model.
    #[error("not a tuning file: {0}")]
    Json(String),
    /// Another document, or another major version.
    #[error(
        "`schema` is \"{0}\", not \"{TUNING_SCHEMA}\" (a tuning file of another tokenscope version: run `tokenscope kernels --tune` again)"
    )]
    Schema(String),
}

/// A whole tuning file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuningFile {
    /// Always [`TUNING_SCHEMA`].
    pub schema: String,
    /// The tool version whose kernels were searched (a file of another version is not
    /// used: its variant names or kernels may differ).
    pub tool_version: String,
    /// The adapter searched on.
    pub adapter: AdapterReport,
    /// When the search ran, seconds since the Unix epoch.
    pub created_unix_s: u64,
    /// The search's time budget, seconds.
    pub budget_s: f64,
    /// Time it took, seconds.
    pub spent_s: f64,
    /// One entry per kernel problem searched.
    pub entries: Vec<TuningEntry>,
    /// Problems left unsearched when the budget ran out (they run their defaults).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsearched: Vec<String>,
    /// The same problems as keys (kernel, format, shape, batch, KV heads): a run
    /// gives them their default, never another shape's tuned variant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsearched_problems: Vec<ProblemKey>,
}

/// A kernel problem as the tuning file names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProblemKey {
    /// Kernel name.
    pub kernel: String,
    /// Weight or KV format.
    pub dtype: String,
    /// `[rows, cols]`; attention `[heads, context, head_dim]`.
    pub shape: Vec<u64>,
    /// Activation columns.
    pub batch: u32,
    /// Attention: KV heads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_heads: Option<u32>,
}

impl ProblemKey {
    /// Whether this is the problem `(kernel, dtype, shape, batch, kv_heads)`.
    pub fn is(&self, problem: (&str, &str, &[u64], u32, Option<u32>)) -> bool {
        let (kernel, dtype, shape, batch, kv_heads) = problem;
        self.kernel == kernel
            && self.dtype == dtype
            && self.shape == shape
            && self.batch == batch
            && self.kv_heads == kv_heads
    }
}

/// Relative change of the read ceiling (between the search and the run, or the
/// start and the end of a run) above which the report remarks it.
pub const CEILING_MOVE_LIMIT: f64 = 0.10;

/// What the search found for one problem (kernel, format, shape, batch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuningEntry {
    /// `gemv`, `matmul_skinny` or `attention_decode_split`.
    pub kernel: String,
    /// Weight or KV format.
    pub dtype: String,
    /// `[rows, cols]`; attention `[heads, context, head_dim]`.
    pub shape: Vec<u64>,
    /// Activation columns (1 for GEMV and attention).
    pub batch: u32,
    /// Attention: KV heads (absent for GEMV).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_heads: Option<u32>,
    /// The fastest variant.
    pub best: String,
    /// Its median time per call, microseconds (the final, longer measurement).
    pub best_us: f64,
    /// The slowest variant timed.
    pub worst: String,
    /// Its median, microseconds.
    pub worst_us: f64,
    /// The variant this adapter would run without the file (the per-vendor default).
    pub default: String,
    /// Its median, microseconds, when the search timed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_us: Option<f64>,
    /// Rounds of the final pass, in which the finalists, the default and the
    /// slowest were timed interleaved (`best_us`, `worst_us` and `default_us` are
    /// the medians of their rounds); 0 when only one variant ran (its brief figure).
    #[serde(default)]
    pub rounds: u32,
    /// The largest spread between the final pass's repeats of one variant,
    /// `(max - min) / median` of its rounds (absent with fewer than 2 rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
    /// Every variant timed, fastest first.
    pub tried: Vec<TriedVariant>,
    /// Variants that gave a wrong answer (none is ever chosen; any here is a bug).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
}

/// One variant the search timed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriedVariant {
    /// Its name.
    pub variant: String,
    /// Median time per call, microseconds (a short measurement).
    pub median_us: f64,
}

impl TuningFile {
    /// Reads a file, refusing another schema.
    pub fn from_json(text: &str) -> Result<TuningFile, TuningError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| TuningError::Json(e.to_string()))?;
        let schema = value
            .get("schema")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let minor = schema
            .strip_prefix(TUNING_SCHEMA)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'));
        if !minor {
            return Err(TuningError::Schema(schema.to_string()));
        }
        serde_json::from_value(value).map_err(|e| TuningError::Json(e.to_string()))
    }

    /// Pretty JSON.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Why this file does not apply to `adapter` under `tool_version` (None: it does).
    /// The adapter's name, backend, PCI ids and driver must match, and the tool version.
    pub fn mismatch(&self, adapter: &AdapterReport, tool_version: &str) -> Option<String> {
        let a = &self.adapter;
        let key = |x: &AdapterReport| {
            (
                x.name.clone(),
                x.backend.clone(),
                x.vendor_id,
                x.device_id,
                x.driver.clone(),
                x.driver_info.clone(),
            )
        };
        if key(a) != key(adapter) {
            return Some(format!(
                "it was tuned on {} ({}, driver {} {}), not on this {} ({}, driver {} {})",
                a.name,
                a.backend,
                a.driver,
                a.driver_info,
                adapter.name,
                adapter.backend,
                adapter.driver,
                adapter.driver_info
            ));
        }
        if self.tool_version != tool_version {
            return Some(format!(
                "it was tuned by tokenscope {}, this is {tool_version}",
                self.tool_version
            ));
        }
        None
    }

    /// The entry for a problem: the same kernel, format and batch (and KV heads), the
    /// shape itself or else the nearest in log scale. The flag says whether the shape
    /// matched exactly.
    pub fn lookup(
        &self,
        kernel: &str,
        dtype: &str,
        shape: &[u64],
        batch: u32,
        kv_heads: Option<u32>,
    ) -> Option<(&TuningEntry, bool)> {
        let distance = |e: &TuningEntry| -> f64 {
            e.shape
                .iter()
                .zip(shape)
                .map(|(&a, &b)| ((a.max(1) as f64) / (b.max(1) as f64)).ln().abs())
                .sum::<f64>()
                + if e.shape.len() == shape.len() {
                    0.0
                } else {
                    1e9
                }
        };
        self.entries
            .iter()
            .filter(|e| {
                e.kernel == kernel && e.dtype == dtype && e.batch == batch && e.kv_heads == kv_heads
            })
            .min_by(|a, b| distance(a).total_cmp(&distance(b)))
            .map(|e| (e, e.shape == shape))
    }

    /// Whether the search had the problem but left it unsearched (the budget ran
    /// out): it runs its default.
    pub fn is_unsearched(&self, problem: (&str, &str, &[u64], u32, Option<u32>)) -> bool {
        self.unsearched_problems.iter().any(|k| k.is(problem))
    }

    /// The read ceiling the search saw (its read kernel's best), GB/s: the read
    /// kernel reads one buffer (`shape[1]` bytes) a call.
    pub fn read_gbps(&self) -> Option<f64> {
        let e = self
            .entries
            .iter()
            .find(|e| e.kernel == "bandwidth_read" && e.shape.len() == 2)?;
        (e.best_us > 0.0).then(|| e.shape[1] as f64 / (e.best_us * 1e-6) / 1e9)
    }
}

/// Which variant a kernel ran, and why: in every [`super::KernelResult`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantReport {
    /// The variant's name.
    pub name: String,
    /// `tuned` (from the tuning file, searched for this shape), `nearest` (the
    /// variant the file has for the nearest shape searched; this shape was not),
    /// `default` (the per-vendor default), `unsearched` (the per-vendor default:
    /// the search had this problem but its budget ran out first) or `given`
    /// (asked for by name).
    pub source: String,
    /// Where the choice came from, in words (the tuning file's shape, or the default's
    /// origin).
    pub note: String,
    /// What the search saw for this problem, when it was tuned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchReport>,
}

/// The search's figures for one problem, beside the variant that ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchReport {
    /// The tuned shape (differs from the kernel's when the nearest was taken).
    pub shape: Vec<u64>,
    /// Variants timed.
    pub tried: u32,
    /// Fastest and its median, microseconds.
    pub best: String,
    /// Fastest's median, microseconds.
    pub best_us: f64,
    /// Slowest timed.
    pub worst: String,
    /// Slowest's median, microseconds.
    pub worst_us: f64,
    /// The default variant's median, microseconds, when timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_us: Option<f64>,
    /// Rounds of the interleaved final pass (0: figures of separate passes).
    #[serde(default)]
    pub rounds: u32,
    /// The largest relative spread between a final-pass variant's repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
}

impl SearchReport {
    /// The search's figures of an entry.
    pub fn of(e: &TuningEntry) -> SearchReport {
        SearchReport {
            shape: e.shape.clone(),
            tried: e.tried.len() as u32,
            best: e.best.clone(),
            best_us: e.best_us,
            worst: e.worst.clone(),
            worst_us: e.worst_us,
            default_us: e.default_us,
            rounds: e.rounds,
            spread: e.spread,
        }
    }

    /// What the figures cannot carry, in words: a best slower than the worst
    /// (figures of different passes), a gain over the default within the spread
    /// between repeats, a spread above [`SPREAD_LIMIT`]. Empty when none applies.
    pub fn remarks(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.best_us > self.worst_us {
            out.push(format!(
                "best {:.1} us slower than worst {:.1} us: timed in different passes, the choice is noise",
                self.best_us, self.worst_us
            ));
        }
        let spread = self.spread.unwrap_or(0.0);
        let mut within = false;
        if let Some(d) = self.default_us.filter(|d| *d > 0.0)
            && self.best != self.worst
        {
            let gain = 1.0 - self.best_us / d;
            if gain > 0.0 && gain <= spread {
                within = true;
                out.push(format!(
                    "beats the default by {:.1}%, within the {:.1}% spread between repeats: the choice may be noise",
                    100.0 * gain,
                    100.0 * spread
                ));
            }
        }
        // An unsteady pass is said once (the line above says it with its effect).
        if spread > SPREAD_LIMIT && !within {
            out.push(format!(
                "repeats spread {:.0}% (over {:.0}%): figures unsteady",
                100.0 * spread,
                100.0 * SPREAD_LIMIT
            ));
        }
        if self.rounds == 0 && self.tried > 1 {
            out.push("best and worst from different passes (a file of an older search)".into());
        }
        out
    }
}

/// Spread between a variant's repeats in the final pass above which the search's
/// figures are remarked as unsteady.
pub const SPREAD_LIMIT: f64 = 0.10;

/// Whether the run used a tuning file: in the kernels report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuningUse {
    /// The file looked for or given.
    pub file: String,
    /// Whether it exists and applies to this adapter and version.
    pub used: bool,
    /// Why not, or how many entries it has.
    pub note: String,
    /// The read ceiling the search saw, GB/s (when the file was used and timed it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_gbps: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(name: &str) -> AdapterReport {
        AdapterReport {
            name: name.into(),
            backend: "vulkan".into(),
            device_type: "DiscreteGpu".into(),
            driver: "NVIDIA".into(),
            driver_info: "580.159.04".into(),
            vendor_id: 0x10de,
            device_id: 0x2335,
            subgroup_min_size: 32,
            subgroup_max_size: 32,
        }
    }

    fn entry(shape: Vec<u64>, best: &str) -> TuningEntry {
        TuningEntry {
            kernel: "gemv".into(),
            dtype: "f16".into(),
            shape,
            batch: 1,
            kv_heads: None,
            best: best.into(),
            best_us: 10.0,
            worst: "w".into(),
            worst_us: 40.0,
            default: "d".into(),
            default_us: Some(12.0),
            rounds: 3,
            spread: Some(0.01),
            tried: vec![TriedVariant {
                variant: best.into(),
                median_us: 10.0,
            }],
            failed: vec![],
        }
    }

    fn file() -> TuningFile {
        TuningFile {
            schema: TUNING_SCHEMA.into(),
            tool_version: "0.1.0".into(),
            adapter: adapter("NVIDIA H200"),
            created_unix_s: 1,
            budget_s: 180.0,
            spent_s: 170.0,
            unsearched: Vec::new(),
            unsearched_problems: Vec::new(),
            entries: vec![
                entry(vec![4096, 4096], "a"),
                entry(vec![14336, 4096], "b"),
                entry(vec![4096, 14336], "c"),
            ],
        }
    }

    #[test]
    fn lookups_take_the_shape_or_the_nearest() {
        let f = file();
        let (e, exact) = f.lookup("gemv", "f16", &[14336, 4096], 1, None).unwrap();
        assert_eq!((e.best.as_str(), exact), ("b", true));
        // Llama's gate|up (28672 x 4096) is nearest to 14336 x 4096.
        let (e, exact) = f.lookup("gemv", "f16", &[28672, 4096], 1, None).unwrap();
        assert_eq!((e.best.as_str(), exact), ("b", false));
        assert!(f.lookup("gemv", "q4_0", &[4096, 4096], 1, None).is_none());
        assert!(f.lookup("gemv", "f16", &[4096, 4096], 2, None).is_none());
    }

    #[test]
    fn a_file_applies_to_its_adapter_and_version_only() {
        let f = file();
        assert_eq!(f.mismatch(&adapter("NVIDIA H200"), "0.1.0"), None);
        let e = f.mismatch(&adapter("NVIDIA H100"), "0.1.0").unwrap();
        assert!(e.contains("H200") && e.contains("H100"), "{e}");
        let mut other_driver = adapter("NVIDIA H200");
        other_driver.driver_info = "590.1".into();
        assert!(f.mismatch(&other_driver, "0.1.0").is_some());
        let e = f.mismatch(&adapter("NVIDIA H200"), "0.2.0").unwrap();
        assert!(e.contains("0.1.0") && e.contains("0.2.0"), "{e}");
    }

    #[test]
    fn unsearched_problems_are_known_by_their_key() {
        let mut f = file();
        f.unsearched_problems.push(ProblemKey {
            kernel: "attention_decode_split".into(),
            dtype: "f16".into(),
            shape: vec![32, 1024, 128],
            batch: 1,
            kv_heads: Some(8),
        });
        let p = (
            "attention_decode_split",
            "f16",
            &[32u64, 1024, 128][..],
            1,
            Some(8),
        );
        assert!(f.is_unsearched(p));
        assert!(!f.is_unsearched((
            "attention_decode_split",
            "f16",
            &[32, 4096, 128],
            1,
            Some(8)
        )));
        assert!(!f.is_unsearched(("gemv", "f16", &[4096, 4096], 1, None)));
        assert_eq!(f.read_gbps(), None);
        let mut read = entry(vec![8, 256 << 20], "t256");
        read.kernel = "bandwidth_read".into();
        read.best_us = 1000.0;
        f.entries.push(read);
        // 256 MiB in 1 ms.
        let gbps = f.read_gbps().unwrap();
        assert!((gbps - 268.435_456).abs() < 1e-9, "{gbps}");
    }

    #[test]
    fn search_remarks_say_what_the_figures_cannot_carry() {
        let mut e = entry(vec![4096, 4096], "a");
        e.tried.push(TriedVariant {
            variant: "w".into(),
            median_us: 40.0,
        });
        // 10 us against the default's 12 with a 1% spread: no remark.
        assert!(SearchReport::of(&e).remarks().is_empty());
        // The issue's row: best 720.6 us, worst 704.0 us.
        e.best_us = 720.6;
        e.worst_us = 704.0;
        e.default_us = Some(730.0);
        let r = SearchReport::of(&e).remarks();
        assert!(r.iter().any(|x| x.contains("slower than worst")), "{r:?}");
        // A gain within the spread between repeats.
        e.worst_us = 800.0;
        e.spread = Some(0.05);
        let r = SearchReport::of(&e).remarks();
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].contains("within the 5.0% spread"), "{r:?}");
        // An unsteady pass, and an old file's figures from different passes.
        // (a gain beyond the spread: the spread is said on its own).
        e.default_us = Some(2000.0);
        e.spread = Some(0.25);
        e.rounds = 0;
        let r = SearchReport::of(&e).remarks();
        assert!(r.iter().any(|x| x.contains("unsteady")), "{r:?}");
        assert!(r.iter().any(|x| x.contains("different passes")), "{r:?}");
    }

    #[test]
    fn round_trips_and_refuses_other_documents() {
        let f = file();
        assert_eq!(TuningFile::from_json(&f.to_json_pretty()).unwrap(), f);
        let e = TuningFile::from_json(r#"{"schema": "tokenscope.kernels/1"}"#).unwrap_err();
        assert!(e.to_string().contains("tokenscope.kernels/1"), "{e}");
        assert!(TuningFile::from_json("{").is_err());
    }
}
