//! The whole run: bandwidth ceiling, GEMV, skinny matmul, decode attention, the
//! synthetic decode step and the decode floor, assembled into a
//! `tokenscope.kernels/1` report.

use tokenscope_hw::floor::{ModelShape, Quant};
use tokenscope_kernel_report::{KernelReport, RunEnvironment};

use crate::context::GpuContext;
use crate::timing::TimingOptions;

mod drift;
mod finish;
mod items;
mod problems;
mod run;

pub use finish::goals;
pub use run::run_suite;

/// Attention head layout of the attention kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadLayout {
    /// Query heads.
    pub heads: u32,
    /// KV heads.
    pub kv_heads: u32,
    /// Head dimension.
    pub head_dim: u32,
}

/// Everything a run does.
#[derive(Debug, Clone)]
pub struct SuiteConfig {
    /// Small shapes (CI).
    pub quick: bool,
    /// Version written into the report.
    pub tool_version: String,
    /// Seed of all generated data.
    pub seed: u64,
    /// Timing settings.
    pub timing: TimingOptions,
    /// Bytes of the last-level cache (see [`crate::cache_info`]).
    pub cache_bytes: u64,
    /// Where `cache_bytes` came from.
    pub cache_source: String,
    /// Bandwidth working set = this many times `cache_bytes`.
    pub bandwidth_multiple: u64,
    /// Cap on the bandwidth working set.
    pub bandwidth_cap_bytes: u64,
    /// GEMV formats.
    pub gemv_dtypes: Vec<Quant>,
    /// GEMV shapes `[rows, cols]`.
    pub gemv_shapes: Vec<(u32, u32)>,
    /// Skinny-matmul formats.
    pub skinny_dtypes: Vec<Quant>,
    /// Skinny-matmul shapes.
    pub skinny_shapes: Vec<(u32, u32)>,
    /// Skinny-matmul batches (> 1; batch 1 is the GEMV).
    pub skinny_batches: Vec<u32>,
    /// Attention head layouts.
    pub attention_layouts: Vec<HeadLayout>,
    /// Attention KV formats.
    pub attention_dtypes: Vec<Quant>,
    /// Attention contexts.
    pub attention_contexts: Vec<u32>,
    /// Models of the decode floor.
    pub models: Vec<ModelShape>,
    /// Weight formats of the floor and the decode step.
    pub quants: Vec<Quant>,
    /// Contexts of the floor and the decode step.
    pub contexts: Vec<u32>,
    /// KV format assumed by the floor and used by the decode step.
    pub kv_dtype: Quant,
    /// Models whose decode step is timed.
    pub step_models: Vec<ModelShape>,
    /// Weight formats of the decode step.
    pub step_quants: Vec<Quant>,
    /// GEMV verification: all rows up to this many multiply-adds, else a sample.
    pub verify_full_macs: u64,
    /// Most copies of a kernel's operand to rotate through.
    pub max_rotation: u64,
    /// Byte budget of one kernel's rotated operands.
    pub rotation_budget_bytes: u64,
    /// Testing aid: corrupt the weights of every GEMV after upload, so verification
    /// must fail (proves the failure path end to end).
    pub inject_fault: bool,
    /// Largest operand (a GEMV's weights, an attention's KV cache) one kernel may
    /// allocate; larger ones are listed under `skipped`. `None`: no limit (native;
    /// allocation failures are still skipped). A browser tab gets a budget.
    pub memory_budget_bytes: Option<u64>,
    /// Where the run happens (recorded in the report).
    pub environment: RunEnvironment,
    /// GEMVs of a model file's own matrices (`kernels --gguf`), run after the
    /// GEMV sweep: each at a tensor's type and shape, on generated data of that
    /// type or on the tensor's own weights.
    pub file_gemvs: Vec<FileGemv>,
    /// A kernel developer's own kernels (`kernels --shader`), each parameter set
    /// one item, run after tokenscope's own.
    pub user_kernels: Vec<tokenscope_kernel_spec::UserKernel>,
}

/// A GEMV of a model file's matrix: a tensor's type and shape, with the names of
/// the file's tensors it stands for, and the tensor's own weights when they were
/// read (`--real-weights`; else generated data of the same type).
#[derive(Debug, Clone)]
pub struct FileGemv {
    /// Type and shape (batch 1).
    pub spec: crate::kernels::gemv::GemvSpec,
    /// The file's tensors of this type and shape.
    pub tensors: Vec<String>,
    /// The tensor's own weights (one tensor), read when the harness comes to it.
    pub weights: Option<TensorLoader>,
}

/// Reads one tensor's weights when the harness needs them (a model's weights are
/// never all in memory at once).
#[derive(Clone)]
pub struct TensorLoader {
    name: String,
    load: LoadFn,
}

type LoadFn =
    std::sync::Arc<dyn Fn() -> std::result::Result<crate::kernels::gemv::HostMatrix, String>>;

impl TensorLoader {
    /// A loader of the tensor `name`.
    pub fn new(name: String, load: LoadFn) -> Self {
        Self { name, load }
    }

    /// Reads the weights.
    pub fn load(&self) -> std::result::Result<crate::kernels::gemv::HostMatrix, String> {
        (self.load)()
    }
}

impl std::fmt::Debug for TensorLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TensorLoader({})", self.name)
    }
}

/// Memory budget of one kernel's operand in a browser page (the f16 LM head of
/// Llama-3.1-8B, 1.05 GB, fits; its f32 copy, 2.1 GB, does not).
pub const BROWSER_MEMORY_BUDGET_BYTES: u64 = 1 << 30;

fn presets(names: &[&str]) -> Vec<ModelShape> {
    names
        .iter()
        .filter_map(|n| ModelShape::preset(n).ok())
        .collect()
}

/// A group of kernels a run can be restricted to (`tokenscope kernels --only`, the
/// page's `only`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelGroup {
    /// GEMV (batch 1).
    Gemv,
    /// Skinny matmul (batch 2..64).
    Skinny,
    /// Decode attention.
    Attention,
    /// The synthetic decode step.
    Step,
}

impl KernelGroup {
    /// Every group, by name.
    pub const NAMES: [&'static str; 4] = ["gemv", "skinny", "attention", "step"];
}

impl std::str::FromStr for KernelGroup {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "gemv" => Ok(Self::Gemv),
            "skinny" => Ok(Self::Skinny),
            "attention" => Ok(Self::Attention),
            "step" => Ok(Self::Step),
            _ => Err(format!(
                "unknown kernel group {s:?} (expected {})",
                Self::NAMES.join(", ")
            )),
        }
    }
}

impl SuiteConfig {
    /// Keeps only the kernel groups in `only`; an empty list keeps them all.
    pub fn keep_only(&mut self, only: &[KernelGroup]) {
        if only.is_empty() {
            return;
        }
        let has = |g| only.contains(&g);
        if !has(KernelGroup::Gemv) {
            self.gemv_dtypes.clear();
        }
        if !has(KernelGroup::Skinny) {
            self.skinny_dtypes.clear();
        }
        if !has(KernelGroup::Attention) {
            self.attention_dtypes.clear();
        }
        if !has(KernelGroup::Step) {
            self.step_models.clear();
        }
    }

    /// The suite for a model file (`kernels --gguf`, the page's picked file): its
    /// GEMVs (`gemvs`) and attention at its head layout at the floor's contexts in
    /// the KV cache's type; the generic GEMV, skinny and step sweeps only when
    /// named in `only` (and the file's GEMVs dropped when `only` names other
    /// groups but not `gemv`).
    pub fn for_file(
        &mut self,
        gemvs: Vec<FileGemv>,
        model: &tokenscope_hw::gguf::GgufModel,
        only: &[KernelGroup],
    ) {
        self.file_gemvs = gemvs;
        if !only.contains(&KernelGroup::Gemv) {
            self.gemv_dtypes.clear();
        }
        if !only.contains(&KernelGroup::Skinny) {
            self.skinny_dtypes.clear();
        }
        if !only.contains(&KernelGroup::Step) {
            self.step_models.clear();
        }
        if !only.is_empty() && !only.contains(&KernelGroup::Gemv) {
            self.file_gemvs.clear();
        }
        let heads = model.heads_per_layer.iter().copied().max().unwrap_or(0);
        let kv_heads = model.kv_heads_per_layer.iter().copied().max().unwrap_or(0);
        if heads > 0 && kv_heads > 0 && model.key_length > 0 {
            self.attention_layouts = vec![HeadLayout {
                heads,
                kv_heads,
                head_dim: model.key_length,
            }];
            self.attention_contexts = self.contexts.clone();
            self.attention_dtypes = vec![self.kv_dtype];
        }
    }

    /// Adjusts the run to the adapter: on a CPU adapter (lavapipe) the skinny-matmul
    /// sweep skips the two largest shapes (a batch-64 call over the 128256-row LM head
    /// takes minutes there).
    pub fn fit_to(&mut self, ctx: &GpuContext) {
        if ctx.is_cpu() && !self.quick {
            self.skinny_shapes
                .retain(|&(r, c)| u64::from(r) * u64::from(c) <= 14336 * 4096 && c <= 4096);
        }
    }

    /// Adjusts a run for a browser page on a CPU fallback adapter (Chrome's
    /// SwiftShader, which runs WebGPU about 5-10x slower than lavapipe runs Vulkan):
    /// the quick run drops the synthetic decode step (Gemma-3-270M's 94 MB LM head
    /// takes 20 s a call there) and the skinny sweep's batch 64, so it stays well
    /// under a minute. On a GPU nothing changes.
    pub fn fit_to_page(&mut self, ctx: &GpuContext) {
        if ctx.is_cpu() && self.quick {
            self.step_models.clear();
            self.skinny_batches.retain(|&b| b <= 8);
        }
    }

    /// The full run: real decode shapes (Llama-3.1-8B's, and its vocabulary).
    pub fn full(cache_bytes: u64, cache_source: &str) -> Self {
        Self {
            quick: false,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            seed: 0x70ce_5c0e,
            timing: TimingOptions::default(),
            cache_bytes,
            cache_source: cache_source.into(),
            bandwidth_multiple: 4,
            bandwidth_cap_bytes: 2 << 30,
            gemv_dtypes: vec![Quant::F32, Quant::F16, Quant::Q8_0, Quant::Q4_0],
            // The decode step's GEMVs: attention output (and q), k/v (1024 rows at 8
            // KV heads), gate/up, down, LM head.
            gemv_shapes: vec![
                (4096, 4096),
                (1024, 4096),
                (14336, 4096),
                (4096, 14336),
                (128_256, 4096),
            ],
            skinny_dtypes: vec![Quant::F16, Quant::Q8_0, Quant::Q4_0],
            skinny_shapes: vec![(4096, 4096), (14336, 4096), (4096, 14336), (128_256, 4096)],
            skinny_batches: vec![2, 4, 8, 16, 32, 64],
            attention_layouts: vec![HeadLayout {
                heads: 32,
                kv_heads: 8,
                head_dim: 128,
            }],
            attention_dtypes: vec![Quant::F16, Quant::F32],
            attention_contexts: vec![512, 2048, 8192, 32768],
            models: presets(&tokenscope_hw::floor::preset_names()),
            quants: vec![Quant::F16, Quant::Q8_0, Quant::Q4_0],
            contexts: vec![4096, 32768],
            kv_dtype: Quant::F16,
            step_models: presets(&["llama-3.1-8b"]),
            step_quants: vec![Quant::F16, Quant::Q8_0, Quant::Q4_0],
            verify_full_macs: 1 << 28,
            max_rotation: 64,
            rotation_budget_bytes: 1 << 30,
            inject_fault: false,
            memory_budget_bytes: None,
            environment: RunEnvironment::native(),
            file_gemvs: Vec::new(),
            user_kernels: Vec::new(),
        }
    }

    /// The same run adapted to a browser page: samples batched to at least
    /// [`crate::timing::BROWSER_MIN_SAMPLE_MS`] (browsers quantize timestamps and
    /// `performance.now()`), a per-kernel memory budget
    /// ([`BROWSER_MEMORY_BUDGET_BYTES`]), and the browser's user agent in the report.
    pub fn for_browser(self, user_agent: Option<String>) -> Self {
        Self {
            timing: self.timing.for_browser(),
            memory_budget_bytes: Some(BROWSER_MEMORY_BUDGET_BYTES),
            environment: RunEnvironment::browser(user_agent),
            file_gemvs: Vec::new(),
            ..self
        }
    }

    /// The quick run (CI, lavapipe): small and odd shapes, few samples, Gemma-3-270M's
    /// decode step.
    pub fn quick(cache_bytes: u64, cache_source: &str) -> Self {
        Self {
            quick: true,
            timing: TimingOptions {
                warmup: 1,
                samples: 5,
                budget_ms: 600.0,
                min_sample_ms: 1.0,
                min_timestamp_sample_ms: 0.0,
                detect_timestamp_step: false,
            },
            // Three sizes: the fixed cost per dispatch is fitted over them.
            gemv_shapes: vec![(1024, 1024), (1003, 800), (256, 1024)],
            skinny_dtypes: vec![Quant::F16, Quant::Q4_0],
            skinny_shapes: vec![(1024, 1024)],
            skinny_batches: vec![3, 8, 64],
            attention_layouts: vec![
                HeadLayout {
                    heads: 8,
                    kv_heads: 2,
                    head_dim: 128,
                },
                HeadLayout {
                    heads: 4,
                    kv_heads: 1,
                    head_dim: 256,
                },
            ],
            attention_contexts: vec![300, 1024],
            contexts: vec![1024],
            step_models: presets(&["gemma-3-270m"]),
            step_quants: vec![Quant::Q4_0],
            quants: vec![Quant::F16, Quant::Q8_0, Quant::Q4_0],
            verify_full_macs: u64::MAX,
            max_rotation: 8,
            rotation_budget_bytes: 256 << 20,
            ..Self::full(cache_bytes, cache_source)
        }
    }

    /// Number of items the run will go through (for progress bars).
    pub fn items(&self) -> usize {
        1 + self.gemv_dtypes.len() * self.gemv_shapes.len()
            + self.skinny_dtypes.len() * self.skinny_shapes.len() * self.skinny_batches.len()
            + self.attention_layouts.len()
                * self.attention_dtypes.len()
                * self.attention_contexts.len()
                * 2
            + self.step_models.len() * self.step_quants.len() * self.contexts.len()
            + self.file_gemvs.len()
            + self
                .user_kernels
                .iter()
                .map(|k| k.param_sets().len() + 1)
                .sum::<usize>()
    }

    /// The suite for a developer's own kernels (`kernels --shader`): the roofs,
    /// then `kernels`; tokenscope's own sweeps only when named in `only`.
    pub fn for_user_kernels(
        &mut self,
        kernels: Vec<tokenscope_kernel_spec::UserKernel>,
        only: &[KernelGroup],
    ) {
        self.user_kernels = kernels;
        if !only.contains(&KernelGroup::Gemv) {
            self.gemv_dtypes.clear();
            self.file_gemvs.clear();
        }
        if !only.contains(&KernelGroup::Skinny) {
            self.skinny_dtypes.clear();
        }
        if !only.contains(&KernelGroup::Attention) {
            self.attention_dtypes.clear();
        }
        if !only.contains(&KernelGroup::Step) {
            self.step_models.clear();
        }
    }
}

/// Progress callbacks of a run (all optional).
pub trait Progress {
    /// An item starts.
    fn start(&mut self, _label: &str) {}
    /// An item ended; `line` is a one-line summary.
    fn done(&mut self, _label: &str, _line: &str) {}
    /// The report so far (write it out: results survive a later crash).
    fn report(&mut self, _report: &KernelReport) {}
    /// Whether the user asked to stop: checked before each item; the run then ends
    /// with [`HarnessError::Cancelled`] (the report so far went to [`Self::report`]).
    fn cancelled(&self) -> bool {
        false
    }
}

/// Progress that ignores everything.
#[derive(Debug, Default)]
pub struct NoProgress;
impl Progress for NoProgress {}
