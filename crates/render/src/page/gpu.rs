//! The protocol between the page and its GPU module (`web-gpu/`, the kernel harness
//! compiled to wasm32 with wgpu's WebGPU backend). The two are separate wasm modules
//! (the GPU one loads only when the GPU view opens), so they talk in JSON strings;
//! these are the shapes of those strings, shared so neither side spells them twice.
//!
//! The events are externally tagged and carry the report as JSON text with what
//! the page shows of it ([`KernelsRead`]): the page exports that text as it is and
//! never reads the report itself, so neither the report's deserializer nor a
//! serializer weighs on the page's wasm.

use serde::{Deserialize, Serialize};

use tokenscope_kernel_report::{AdapterReport, FeatureReport, KernelReport, LimitsReport};

/// Which run the page asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuPreset {
    /// Small and odd shapes, few samples (seconds on a GPU, under a minute on a
    /// CPU fallback adapter): `tokenscope kernels --quick`.
    #[default]
    Quick,
    /// Real decode shapes (Llama-3.1-8B's), within the page's memory budget.
    Full,
}

impl GpuPreset {
    /// The URL / JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            GpuPreset::Quick => "quick",
            GpuPreset::Full => "full",
        }
    }
}

impl std::str::FromStr for GpuPreset {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "quick" => Ok(GpuPreset::Quick),
            "full" => Ok(GpuPreset::Full),
            other => Err(format!("preset={other:?}: expected quick or full")),
        }
    }
}

/// The page's request to the GPU module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuRunRequest {
    /// The preset.
    #[serde(default)]
    pub preset: GpuPreset,
    /// Use timestamp queries when the adapter has them (false: wall clock).
    #[serde(default = "yes")]
    pub timestamps: bool,
    /// Use subgroup operations when the adapter has them (false: the shared-memory
    /// reductions).
    #[serde(default = "yes")]
    pub subgroups: bool,
    /// Run only these groups (`gemv`, `skinny`, `attention`, `step`; the bandwidth
    /// ceiling always runs); empty: all, as `tokenscope kernels --only`.
    #[serde(default)]
    pub only: Vec<String>,
    /// Search the kernel variants on this GPU first (a bounded search, as
    /// `tokenscope kernels --tune`), then run with the fastest; false: the per-vendor
    /// defaults.
    #[serde(default)]
    pub tune: bool,
    /// The search's time budget, seconds ([`PAGE_TUNE_BUDGET_S`] when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune_budget_s: Option<f64>,
}

/// The page's variant search budget: well under a minute.
pub const PAGE_TUNE_BUDGET_S: f64 = 40.0;

fn yes() -> bool {
    true
}

impl Default for GpuRunRequest {
    fn default() -> Self {
        GpuRunRequest {
            preset: GpuPreset::Quick,
            timestamps: true,
            subgroups: true,
            only: Vec::new(),
            tune: false,
            tune_budget_s: None,
        }
    }
}

/// What the page hands the GPU module's view when it shows it (from the URL).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GpuViewSettings {
    /// The kernel preset.
    #[serde(default)]
    pub preset: GpuPreset,
    /// Allow timestamp queries (false: wall clock).
    #[serde(default = "yes")]
    pub timestamps: bool,
    /// Start a run as soon as the adapter is known (`view=gpu&autorun=1`).
    #[serde(default)]
    pub autorun: bool,
    /// Search the variants first (`tune=1`).
    #[serde(default)]
    pub tune: bool,
    /// The search's budget, seconds (`tune=10`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune_budget_s: Option<f64>,
    /// Notes about the URL's GPU parameters (ignored values).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// What the GPU module reports while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuEvent {
    /// An item starts (`index` of `total`, from 0).
    Start {
        /// What (`gemv f16 [4096, 4096] batch 1`).
        label: String,
        /// Its position.
        index: usize,
        /// Items in the run.
        total: usize,
    },
    /// An item ended; `line` summarises it.
    Done {
        /// What.
        label: String,
        /// One line (`ok: 812.3 us, 41.2 GB/s (77% of read)`).
        line: String,
        /// Its position.
        index: usize,
        /// Items in the run.
        total: usize,
    },
    /// The report so far.
    Report(Box<KernelsRead>),
}

/// A kernels report as the GPU module (or the report module, for a file) read it:
/// the JSON text (exported as it is) and what the page shows of it. The page
/// never reads the report itself: its types' reading code would weigh on the
/// first load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelsRead {
    /// The `tokenscope.kernels/1` report, as JSON text.
    pub json: String,
    /// What the page shows of it.
    pub view: KernelsView,
}

/// What the page shows of a kernels report, rendered by core in the module that
/// has the report: the same table and chart as the CLI and the combined report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct KernelsView {
    /// The adapter's name.
    pub adapter: String,
    /// Its backend (`vulkan`, `webgpu`).
    pub backend: String,
    /// Kernels measured.
    pub kernels: usize,
    /// Every kernel matched its CPU reference (and the bandwidth checksums).
    pub verified: bool,
    /// How the kernels were timed, in a sentence.
    pub timing: String,
    /// The bandwidth ceiling, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<String>,
    /// Which variants ran, in a sentence (searched here, or the defaults).
    #[serde(default)]
    pub variants: String,
    /// The kernels against the bandwidth (SVG).
    pub chart_svg: String,
    /// The roofline: FLOP/s against FLOP/byte under both roofs, the developer's own
    /// kernel named (SVG, `charts::roofline`).
    #[serde(default)]
    pub roofline_svg: String,
    /// The kernel table's headers (`render::kernels::kernel_table`).
    pub headers: Vec<String>,
    /// Its rows.
    pub rows: Vec<Vec<String>>,
    /// The decode floor table's headers (`render::kernels::floor_table`: the floor
    /// at the read bandwidth beside the floor with these kernels).
    #[serde(default)]
    pub floor_headers: Vec<String>,
    /// Its rows.
    pub floor: Vec<Vec<String>>,
    /// What the two floors divide by, in a sentence.
    #[serde(default)]
    pub floor_legend: String,
    /// The read ceiling's moves (during the run, since the variant search), each
    /// in a sentence.
    #[serde(default)]
    pub ceiling_remarks: Vec<String>,
    /// Kernels skipped, each in a line.
    pub skipped: Vec<String>,
    /// Errors, each in a line.
    pub errors: Vec<String>,
    /// A developer's own kernel on the roofline, in sentences
    /// (`render::kernels::user_text`); empty without one.
    #[serde(default)]
    pub yours: String,
}

impl KernelsView {
    /// What the page shows of `r`.
    pub fn of(r: &KernelReport) -> KernelsView {
        use crate::kernels::{floor_legend, floor_table, kernel_table, mib_label};
        use tokenscope_kernel_report::TimingMethod;
        let timing = match r.timing {
            TimingMethod::TimestampQuery if r.config.timestamp_batch_ms > 0.0 => format!(
                "GPU timestamp queries, each sample a batch of calls lasting at least {} ms (the browser quantizes timestamps)",
                r.config.timestamp_batch_ms
            ),
            TimingMethod::TimestampQuery => "GPU timestamp queries, one call per sample".into(),
            TimingMethod::WallClock => format!(
                "wall clock (performance.now()) around submit-and-wait, batches of at least {} ms",
                r.config.wall_batch_ms
            ),
        };
        let bandwidth = r.bandwidth.as_ref().map(|b| {
            format!(
                "read {:.2} GB/s, copy {:.2} GB/s (working set {} in {} buffers; {})",
                b.read_gbps,
                b.copy_gbps,
                mib_label(b.working_set_bytes),
                b.buffers,
                if b.read_verified && b.copy_verified {
                    "verified"
                } else {
                    "NOT verified"
                }
            )
        });
        let (headers, rows) = kernel_table(r);
        let (floor_headers, floor) = floor_table(r);
        let variants = match &r.tuning {
            Some(t) if t.used => format!(
                "{} ({}: {})",
                crate::kernels::VariantCounts::of(r).sentence(),
                t.file,
                t.note
            ),
            Some(t) => format!("per-vendor default variants ({})", t.note),
            None => "per-vendor default variants".into(),
        };
        KernelsView {
            variants,
            adapter: r.adapter.name.clone(),
            backend: r.adapter.backend.clone(),
            kernels: r.kernels.len(),
            verified: r.verified && r.all_verified(),
            timing,
            bandwidth,
            chart_svg: crate::charts::kernel_roofline(r),
            roofline_svg: crate::charts::roofline(r),
            headers,
            rows,
            floor_headers,
            floor,
            floor_legend: floor_legend(r.read_gbps()),
            ceiling_remarks: r.ceiling_remarks(),
            skipped: r
                .skipped
                .iter()
                .map(|s| format!("skipped {} {} {:?}: {}", s.name, s.dtype, s.shape, s.reason))
                .collect(),
            errors: r.errors.iter().map(|e| format!("error: {e}")).collect(),
            yours: crate::kernels::user_text(r),
        }
    }

    /// Read a kernels report's text: the text and its view, or why it is not one.
    pub fn read(json: String) -> Result<KernelsRead, String> {
        let report = KernelReport::from_json(&json)
            .map_err(|e| format!("could not open the kernels report: {e}"))?;
        Ok(KernelsRead {
            view: KernelsView::of(&report),
            json,
        })
    }
}

/// Why a GPU run (or the adapter probe) gave no report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuFailureKind {
    /// The browser has no WebGPU (`navigator.gpu` is missing).
    NoWebgpu,
    /// WebGPU exists but gave no adapter (blocklisted GPU, disabled, headless).
    NoAdapter,
    /// The GPU module could not be loaded.
    NotLoaded,
    /// The user cancelled.
    Cancelled,
    /// The harness stopped with an error.
    Failed,
}

/// A failure with its message, as the GPU module returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuFailure {
    /// The kind.
    pub kind: GpuFailureKind,
    /// What happened, in a sentence.
    pub message: String,
}

impl GpuFailure {
    /// Reads a failure the GPU module returned; any other text is a `Failed` with it
    /// as the message (a trap, a JS exception).
    pub fn parse(text: &str) -> GpuFailure {
        serde_json::from_str(text).unwrap_or_else(|_| GpuFailure {
            kind: GpuFailureKind::Failed,
            message: text.to_owned(),
        })
    }
}

/// The adapter the GPU view would run on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdapterProbe {
    /// The adapter.
    pub adapter: AdapterReport,
    /// Its features (used and available).
    pub features: FeatureReport,
    /// Its limits (the device is created with them).
    pub limits: LimitsReport,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_events_and_failures_round_trip() {
        let r: GpuRunRequest = serde_json::from_str("{}").unwrap();
        assert_eq!(r, GpuRunRequest::default());
        let r: GpuRunRequest =
            serde_json::from_str(r#"{"preset":"full","timestamps":false}"#).unwrap();
        assert_eq!((r.preset, r.timestamps), (GpuPreset::Full, false));
        assert_eq!("Quick".parse::<GpuPreset>(), Ok(GpuPreset::Quick));
        assert!(
            "fast"
                .parse::<GpuPreset>()
                .unwrap_err()
                .contains("quick or full")
        );

        let e = GpuEvent::Done {
            label: "gemv".into(),
            line: "ok".into(),
            index: 3,
            total: 9,
        };
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.starts_with(r#"{"done":{"#), "{text}");
        assert_eq!(serde_json::from_str::<GpuEvent>(&text).unwrap(), e);

        let f = GpuFailure {
            kind: GpuFailureKind::NoWebgpu,
            message: "no".into(),
        };
        assert_eq!(GpuFailure::parse(&serde_json::to_string(&f).unwrap()), f);
        let trap = GpuFailure::parse("RuntimeError: unreachable");
        assert_eq!(trap.kind, GpuFailureKind::Failed);
        assert_eq!(trap.message, "RuntimeError: unreachable");
    }
}
