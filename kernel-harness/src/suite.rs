//! The whole run: bandwidth ceiling, GEMV, skinny matmul, decode attention, the
//! synthetic decode step and the decode floor, assembled into a
//! `tokenscope.kernels/1` report.

use tokenscope_core::analyze::floor::{ModelShape, Quant};
use tokenscope_core::report::kernels::{
    DecodeStepResult, FloorRow, GoalResult, KernelReport, KernelResult, RunConfig, RunEnvironment,
    SCHEMA, SkippedKernel, TimingMethod, VerificationReport,
};

use crate::clock::Clock;
use crate::context::GpuContext;
use crate::decode::{self, DecodeStepSpec};
use crate::error::{HarnessError, Result};
use crate::kernels::attention::{AttentionBench, AttentionSpec};
use crate::kernels::bandwidth::{self, BandwidthPlan};
use crate::kernels::gemv::{GemvBench, GemvSpec};
use crate::kernels::{Outcome, Reduction, ResultId, kernel_result, rotation_for};
use crate::timing::{TimingOptions, measure};

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
            gemv_shapes: vec![(4096, 4096), (14336, 4096), (4096, 14336), (128_256, 4096)],
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
            models: presets(&tokenscope_core::analyze::floor::preset_names()),
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
            },
            gemv_shapes: vec![(1024, 1024), (1003, 800)],
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

fn merge(a: VerificationReport, b: VerificationReport) -> VerificationReport {
    VerificationReport {
        checked: a.checked + b.checked,
        outputs: a.outputs.max(b.outputs),
        max_abs_err: a.max_abs_err.max(b.max_abs_err),
        max_err_over_tol: a.max_err_over_tol.max(b.max_err_over_tol),
        failure: a.failure.or(b.failure),
    }
}

fn summary_line(k: &KernelResult) -> String {
    let status = if k.verified { "ok" } else { "FAILED" };
    let bw = match k.gbps {
        Some(g) => format!("{g:.1} GB/s ({:.0}% of read)", 100.0 * k.fraction_of_read),
        None => format!(
            "cache-resident ({:.0}% of read)",
            100.0 * k.fraction_of_read
        ),
    };
    format!("{status}: {:.1} us, {bw}", k.median_us)
}

enum Item {
    Gemv(GemvSpec),
    Attention(AttentionSpec),
    Step(DecodeStepSpec),
}

/// Runs everything in `cfg` and returns the report. Verification failures do not stop
/// the run (they are in the report, `verified: false`); a kernel that cannot run here
/// (out of memory, too large a binding, missing feature) is listed under `skipped`.
pub async fn run_suite(
    ctx: &GpuContext,
    clock: &dyn Clock,
    cfg: &SuiteConfig,
    progress: &mut dyn Progress,
) -> Result<KernelReport> {
    let mut report = KernelReport {
        schema: SCHEMA.into(),
        tool_version: cfg.tool_version.clone(),
        adapter: ctx.adapter_report(),
        features: ctx.features_report(),
        limits: ctx.limits_report(),
        timing: if ctx.caps.timestamp_query {
            TimingMethod::TimestampQuery
        } else {
            TimingMethod::WallClock
        },
        environment: Some(cfg.environment.clone()),
        config: RunConfig {
            quick: cfg.quick,
            samples: cfg.timing.samples,
            warmup: cfg.timing.warmup,
            seed: cfg.seed,
            force_shared_reduction: ctx.available.subgroups && !ctx.caps.subgroups,
            models: cfg.models.iter().map(|m| m.name.clone()).collect(),
            quants: cfg.quants.clone(),
            contexts: cfg.contexts.iter().map(|&c| u64::from(c)).collect(),
            cache_bytes: cfg.cache_bytes,
            cache_source: cfg.cache_source.clone(),
            timestamp_batch_ms: cfg.timing.min_timestamp_sample_ms,
            wall_batch_ms: cfg.timing.min_sample_ms,
        },
        bandwidth: None,
        kernels: Vec::new(),
        skipped: Vec::new(),
        decode_floor: Vec::new(),
        decode_steps: Vec::new(),
        roofline: Vec::new(),
        goals: Vec::new(),
        errors: Vec::new(),
        verified: false,
    };

    // 1. The ceiling everything else is divided by.
    if progress.cancelled() {
        return Err(HarnessError::Cancelled);
    }
    let label = "bandwidth (read, copy)";
    progress.start(label);
    let plan = BandwidthPlan::new(
        ctx,
        cfg.cache_bytes,
        cfg.bandwidth_multiple,
        cfg.bandwidth_cap_bytes,
    );
    let (bw, method, bw_err) = bandwidth::run(ctx, clock, plan, cfg.seed, &cfg.timing).await?;
    report.timing = method;
    if let Some(e) = bw_err {
        report.errors.push(e.to_string());
    }
    progress.done(
        label,
        &format!(
            "read {:.1} GB/s, copy {:.1} GB/s over {} MiB",
            bw.read_gbps,
            bw.copy_gbps,
            bw.working_set_bytes >> 20
        ),
    );
    let read_gbps = bw.read_gbps;
    report.bandwidth = Some(bw);
    finish(&mut report, cfg);
    progress.report(&report);

    // 2..5. Kernels and decode steps.
    let mut items = Vec::new();
    for &dtype in &cfg.gemv_dtypes {
        for &(rows, cols) in &cfg.gemv_shapes {
            items.push(Item::Gemv(GemvSpec {
                dtype,
                rows,
                cols,
                batch: 1,
            }));
        }
    }
    for &dtype in &cfg.skinny_dtypes {
        for &(rows, cols) in &cfg.skinny_shapes {
            for &batch in &cfg.skinny_batches {
                items.push(Item::Gemv(GemvSpec {
                    dtype,
                    rows,
                    cols,
                    batch,
                }));
            }
        }
    }
    for layout in &cfg.attention_layouts {
        for &kv_dtype in &cfg.attention_dtypes {
            for &context in &cfg.attention_contexts {
                for split in [false, true] {
                    items.push(Item::Attention(AttentionSpec {
                        kv_dtype,
                        heads: layout.heads,
                        kv_heads: layout.kv_heads,
                        head_dim: layout.head_dim,
                        context,
                        split,
                    }));
                }
            }
        }
    }
    for model in &cfg.step_models {
        for &quant in &cfg.step_quants {
            for &context in &cfg.contexts {
                items.push(Item::Step(DecodeStepSpec {
                    model: model.clone(),
                    quant,
                    kv_dtype: cfg.kv_dtype,
                    context,
                }));
            }
        }
    }

    let mut steps = Vec::new();
    for item in items {
        if progress.cancelled() {
            return Err(HarnessError::Cancelled);
        }
        let (label, shape) = match &item {
            Item::Gemv(s) => (
                s.id().to_string(),
                vec![u64::from(s.rows), u64::from(s.cols)],
            ),
            Item::Attention(s) => (
                s.id().to_string(),
                vec![
                    u64::from(s.heads),
                    u64::from(s.context),
                    u64::from(s.head_dim),
                ],
            ),
            Item::Step(s) => (s.id().to_string(), vec![u64::from(s.context)]),
        };
        progress.start(&label);
        let outcome = match (&item, over_budget(&item, cfg)) {
            (_, Some(e)) => Err(e),
            (Item::Gemv(s), None) => run_gemv(ctx, clock, cfg, *s, read_gbps).await.map(Some),
            (Item::Attention(s), None) => run_attention(ctx, clock, cfg, *s, read_gbps)
                .await
                .map(Some),
            (Item::Step(s), None) => {
                match decode::run(ctx, clock, s, cfg.seed, cfg.cache_bytes, &cfg.timing).await {
                    Ok(t) => {
                        steps.push((s.clone(), t));
                        Ok(None)
                    }
                    Err(e) => Err(e),
                }
            }
        };
        // Anything an item left behind in wgpu's error sink belongs to it.
        let stray = ctx.take_uncaptured_errors();
        match outcome {
            Ok(Some(k)) => {
                progress.done(&label, &summary_line(&k));
                report.kernels.push(k);
            }
            Ok(None) => progress.done(&label, "timed"),
            Err(
                e @ (HarnessError::OutOfMemory { .. }
                | HarnessError::BindingTooLarge { .. }
                | HarnessError::MissingFeature { .. }
                | HarnessError::DeviceLimit { .. }
                | HarnessError::OverBudget { .. }
                | HarnessError::InvalidShape { .. }),
            ) => {
                progress.done(&label, &format!("skipped: {e}"));
                let (name, dtype) = match &item {
                    Item::Gemv(s) => (s.name().to_string(), s.dtype.to_string()),
                    Item::Attention(s) => (s.name().to_string(), s.kv_dtype.to_string()),
                    Item::Step(s) => ("decode_step".to_string(), s.quant.to_string()),
                };
                report.skipped.push(SkippedKernel {
                    name,
                    dtype,
                    shape,
                    reason: e.to_string(),
                });
            }
            Err(e) => {
                progress.done(&label, &format!("error: {e}"));
                report.errors.push(e.to_string());
            }
        }
        for s in stray {
            report.errors.push(format!("{label}: wgpu error: {s}"));
        }
        report.decode_steps = step_results(&report, &steps);
        finish(&mut report, cfg);
        progress.report(&report);
    }
    Ok(report)
}

/// The item's largest operand, when it exceeds the run's memory budget.
fn over_budget(item: &Item, cfg: &SuiteConfig) -> Option<HarnessError> {
    let budget = cfg.memory_budget_bytes?;
    let (kernel, bytes) = match item {
        Item::Gemv(s) => (s.id(), s.weight_bytes()),
        Item::Attention(s) => (s.id(), s.kv_bytes()),
        Item::Step(s) => (s.id(), s.largest_operand_bytes()),
    };
    (bytes > budget).then_some(HarnessError::OverBudget {
        kernel,
        bytes,
        budget,
    })
}

async fn run_gemv(
    ctx: &GpuContext,
    clock: &dyn Clock,
    cfg: &SuiteConfig,
    spec: GemvSpec,
    read_gbps: f64,
) -> Result<KernelResult> {
    spec.validate()?;
    let rotation = rotation_for(
        spec.weight_bytes(),
        cfg.cache_bytes,
        cfg.max_rotation,
        cfg.rotation_budget_bytes,
    );
    let bench = GemvBench::new(ctx, spec, cfg.seed, rotation, None).await?;
    if cfg.inject_fault {
        for m in &bench.matrices {
            let c = &m.chunks[0];
            ctx.queue.write_buffer(&c.main, 0, &[0x5a; 16]);
        }
    }
    let (mut ver, _) = bench.verify(ctx, 0, cfg.verify_full_macs).await?;
    if rotation > 1 {
        let (v2, _) = bench
            .verify(ctx, rotation as usize - 1, cfg.verify_full_macs)
            .await?;
        ver = merge(ver, v2);
    }
    let timing = measure(ctx, clock, &spec.id(), &bench, &cfg.timing)
        .await?
        .summary(&spec.id())?;
    let mut notes: Vec<String> = bench
        .kernel
        .f16
        .map(|p| p.note().into())
        .into_iter()
        .collect();
    if matches!(spec.dtype, Quant::Q8_0 | Quant::Q4_0) {
        notes.push("repacked GGUF blocks (quants and scales in separate arrays)".into());
    }
    Ok(kernel_result(
        ResultId {
            name: spec.name().into(),
            dtype: spec.dtype.to_string(),
            shape: vec![u64::from(spec.rows), u64::from(spec.cols)],
            batch: spec.batch,
            ..Default::default()
        },
        Outcome {
            timing,
            verification: ver,
            bytes_moved: spec.bytes_moved(),
            flops: spec.flops(),
            reduction: bench.kernel.reduction.as_str(),
            bindings: bench.matrices[0].chunks.len() as u32,
            rotation,
            notes,
        },
        read_gbps,
    ))
}

async fn run_attention(
    ctx: &GpuContext,
    clock: &dyn Clock,
    cfg: &SuiteConfig,
    spec: AttentionSpec,
    read_gbps: f64,
) -> Result<KernelResult> {
    spec.validate(ctx)?;
    let rotation = rotation_for(
        spec.kv_bytes(),
        cfg.cache_bytes,
        cfg.max_rotation,
        cfg.rotation_budget_bytes,
    );
    let bench = AttentionBench::new(ctx, spec, cfg.seed, rotation).await?;
    let (mut ver, _) = bench.verify(ctx, 0).await?;
    if rotation > 1 {
        let (v2, _) = bench.verify(ctx, rotation as usize - 1).await?;
        ver = merge(ver, v2);
    }
    let timing = measure(ctx, clock, &spec.id(), &bench, &cfg.timing)
        .await?
        .summary(&spec.id())?;
    let notes: Vec<String> = bench.f16().map(|p| p.note().into()).into_iter().collect();
    Ok(kernel_result(
        ResultId {
            name: spec.name().into(),
            dtype: spec.kv_dtype.to_string(),
            shape: vec![
                u64::from(spec.heads),
                u64::from(spec.context),
                u64::from(spec.head_dim),
            ],
            batch: 1,
            context: Some(u64::from(spec.context)),
            heads: Some(spec.heads),
            kv_heads: Some(spec.kv_heads),
            head_dim: Some(spec.head_dim),
            splits: Some(bench.splits()),
        },
        Outcome {
            timing,
            verification: ver,
            bytes_moved: spec.bytes_moved(),
            flops: spec.flops(),
            reduction: Reduction::Shared.as_str(),
            bindings: bench.caches[0].parts.len() as u32,
            rotation,
            notes,
        },
        read_gbps,
    ))
}

fn floors(report: &KernelReport, cfg: &SuiteConfig) -> Vec<FloorRow> {
    let mut rows = Vec::new();
    for model in &cfg.models {
        for &quant in &cfg.quants {
            for &context in &cfg.contexts {
                rows.extend(report.floor_row(model, quant, u64::from(context), cfg.kv_dtype));
            }
        }
    }
    rows
}

fn step_results(
    report: &KernelReport,
    steps: &[(DecodeStepSpec, decode::DecodeStepTiming)],
) -> Vec<DecodeStepResult> {
    steps
        .iter()
        .filter_map(|(spec, t)| {
            let f = report
                .floor_row(
                    &spec.model,
                    spec.quant,
                    u64::from(spec.context),
                    spec.kv_dtype,
                )?
                .estimate;
            Some(decode::result(spec, t, f.bytes_per_token, f.tpot_floor_ms))
        })
        .collect()
}

/// The goals of the harness (on a real GPU) and where this run stands.
pub fn goals(report: &KernelReport) -> Vec<GoalResult> {
    let read = report.bandwidth.as_ref().map_or(0.0, |b| b.read_gbps);
    let mut out = Vec::new();
    for (dtype, target) in [(Quant::F16, 0.90), (Quant::Q8_0, 0.90), (Quant::Q4_0, 0.80)] {
        let (gbps, source) = report.gemv_bandwidth(dtype);
        let measured = (read > 0.0 && source.starts_with("gemv")).then(|| gbps / read);
        out.push(GoalResult {
            goal: format!("gemv {dtype}"),
            target_fraction: target,
            measured_fraction: measured,
            met: measured.map(|m| m >= target),
            source,
        });
    }
    let attn = |context: u64, split_only: bool| {
        report
            .kernels
            .iter()
            .filter(|k| k.name.starts_with("attention") && k.verified && k.context == Some(context))
            .filter(|k| !split_only || k.name == "attention_decode_split")
            .filter(|k| k.dtype == "f16")
            .max_by(|a, b| a.fraction_of_read.total_cmp(&b.fraction_of_read))
    };
    for (label, context, split_only, target) in [
        ("attention f16 at 8k context", 8192, false, 0.60),
        ("attention f16 at 32k context, split-KV", 32768, true, 0.75),
    ] {
        let k = attn(context, split_only);
        let measured = k.map(|k| k.fraction_of_read);
        out.push(GoalResult {
            goal: label.into(),
            target_fraction: target,
            measured_fraction: measured,
            met: measured.map(|m| m >= target),
            source: k.map_or_else(
                || format!("not measured (no f16 attention at context {context})"),
                |k| format!("{} splits {}", k.name, k.splits.unwrap_or(1)),
            ),
        });
    }
    out
}

fn finish(report: &mut KernelReport, cfg: &SuiteConfig) {
    report.decode_floor = floors(report, cfg);
    report.roofline = report.roofline_rows();
    report.goals = goals(report);
    report.verified = report.all_verified() && report.errors.is_empty();
}
