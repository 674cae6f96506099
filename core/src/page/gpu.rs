//! The protocol between the page and its GPU module (`web-gpu/`, the kernel harness
//! compiled to wasm32 with wgpu's WebGPU backend). The two are separate wasm modules
//! (the GPU one loads only when the GPU view opens), so they talk in JSON strings;
//! these are the shapes of those strings, shared so neither side spells them twice.
//!
//! The events are externally tagged and carry the report as JSON text: the page
//! then reads a report with the same code as a file (`KernelReport::from_json`) and
//! exports that text as it is, so neither a second deserializer (serde's buffering
//! of internally tagged enums) nor a report serializer weighs on the page's wasm.

use serde::{Deserialize, Serialize};

use crate::report::kernels::{AdapterReport, FeatureReport, LimitsReport};

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
}

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
        }
    }
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
    Report {
        /// The `tokenscope.kernels/1` report so far, as JSON text.
        json: String,
    },
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
