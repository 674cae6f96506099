//! The things a run measures (kernels and decode steps), and how each one runs:
//! fitted to the device's limits and the memory budget, measured and verified.

use tokenscope_kernel_report::{KernelResult, TimingMethod, VerificationReport};

use super::{FileGemv, SuiteConfig};
use crate::clock::Clock;
use crate::context::GpuContext;
use crate::decode::DecodeStepSpec;
use crate::error::{HarnessError, Result};
use crate::kernels::attention::{AttentionBench, AttentionSpec};
use crate::kernels::gemv::{GemvBench, GemvSpec};
use crate::kernels::{Outcome, Reduction, ResultId, kernel_result, rotation_for};
use crate::timing::measure;

fn merge(a: VerificationReport, b: VerificationReport) -> VerificationReport {
    VerificationReport {
        checked: a.checked + b.checked,
        outputs: a.outputs.max(b.outputs),
        max_abs_err: a.max_abs_err.max(b.max_abs_err),
        max_err_over_tol: a.max_err_over_tol.max(b.max_err_over_tol),
        failure: a.failure.or(b.failure),
    }
}

/// One thing the run measures.
#[derive(Clone)]
pub(super) enum Item {
    Gemv(GemvSpec),
    /// Index into `cfg.file_gemvs`.
    FileGemv(usize),
    Attention(AttentionSpec),
    Step(DecodeStepSpec),
    /// A user's kernel (index into `cfg.user_kernels`) and its parameter set.
    User(usize, usize),
    /// tokenscope's own GEMV beside a user's kernel (its index), at its bytes.
    Beside(usize),
}

impl Item {
    /// The kernel group (for the drift check: one sentinel each).
    pub(super) fn group(&self) -> u8 {
        match self {
            Item::Gemv(s) if s.batch == 1 => 0,
            Item::Gemv(_) => 1,
            Item::FileGemv(_) => 2,
            Item::Attention(_) => 3,
            Item::Step(_) => 4,
            Item::User(..) => 5,
            Item::Beside(_) => 6,
        }
    }
}

/// Every kernel and decode step the configuration asks for, in order.
pub(super) fn items(cfg: &SuiteConfig) -> Vec<Item> {
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
    items.extend((0..cfg.file_gemvs.len()).map(Item::FileGemv));
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
    for (k, kernel) in cfg.user_kernels.iter().enumerate() {
        items.extend((0..kernel.param_sets().len()).map(|set| Item::User(k, set)));
        items.push(Item::Beside(k));
    }
    items
}

/// tokenscope's GEMV to run beside user kernel `k`: f16 weights (the format decode
/// reads most), 4096 columns (1024 below 512 KiB), and as many rows as make its
/// bytes those of the kernel's largest parameter set.
pub(super) fn beside_spec(cfg: &SuiteConfig, k: usize) -> Result<GemvSpec> {
    let kernel = &cfg.user_kernels[k];
    let bytes = (0..kernel.param_sets().len())
        .filter_map(|set| kernel.instance(set).ok())
        .map(|inst| inst.bytes)
        .max()
        .ok_or_else(|| HarnessError::InvalidShape {
            kernel: crate::error::KernelId {
                name: "gemv".into(),
                dtype: "f16".into(),
                shape: format!("beside {}", kernel.name),
            },
            reason: format!("no parameter set of {} could be sized", kernel.name),
        })?;
    let cols: u32 = if bytes >= 512 << 10 { 4096 } else { 1024 };
    // bytes_moved = 2 rows cols + 4 (rows + cols)
    let per_row = 2 * u64::from(cols) + 4;
    let rows = (bytes.saturating_sub(4 * u64::from(cols)) / per_row).clamp(1, u64::from(u32::MAX));
    Ok(GemvSpec {
        dtype: tokenscope_hw::floor::Quant::F16,
        rows: rows as u32,
        cols,
        batch: 1,
    })
}

/// The item's largest operand, when it exceeds the run's memory budget.
pub(super) fn over_budget(item: &Item, cfg: &SuiteConfig) -> Option<HarnessError> {
    let budget = cfg.memory_budget_bytes?;
    let (kernel, bytes) = match item {
        Item::Gemv(s) => (s.id(), s.weight_bytes()),
        Item::FileGemv(i) => (
            cfg.file_gemvs[*i].spec.id(),
            cfg.file_gemvs[*i].spec.weight_bytes(),
        ),
        Item::Attention(s) => (s.id(), s.kv_bytes()),
        Item::Step(s) => (s.id(), s.largest_operand_bytes()),
        Item::Beside(k) => {
            let s = beside_spec(cfg, *k).ok()?;
            (s.id(), s.weight_bytes())
        }
        Item::User(k, set) => {
            let kernel = &cfg.user_kernels[*k];
            let inst = kernel.instance(*set).ok()?;
            let bytes = kernel
                .bindings
                .iter()
                .zip(&inst.elements)
                .map(|(b, &n)| b.bytes(n))
                .sum();
            (crate::user::kernel_id(kernel, &inst), bytes)
        }
    };
    (bytes > budget).then_some(HarnessError::OverBudget {
        kernel,
        bytes,
        budget,
    })
}

pub(super) async fn run_user(
    ctx: &GpuContext,
    clock: &dyn Clock,
    cfg: &SuiteConfig,
    kernel: usize,
    set: usize,
    read_gbps: f64,
) -> Result<KernelResult> {
    let opts = crate::user::UserRunOptions {
        timing: cfg.timing,
        cache_bytes: cfg.cache_bytes,
        max_rotation: cfg.max_rotation,
        rotation_budget_bytes: cfg.rotation_budget_bytes,
        seed: cfg.seed,
    };
    crate::user::run_user(ctx, clock, &cfg.user_kernels[kernel], set, &opts, read_gbps).await
}

/// tokenscope's GEMV beside user kernel `k` (see [`beside_spec`]).
pub(super) async fn run_beside(
    ctx: &GpuContext,
    clock: &dyn Clock,
    cfg: &SuiteConfig,
    k: usize,
    read_gbps: f64,
) -> Result<KernelResult> {
    let spec = beside_spec(cfg, k)?;
    let mut r = run_gemv(ctx, clock, cfg, spec, None, read_gbps).await?;
    r.beside = Some(cfg.user_kernels[k].name.clone());
    Ok(r)
}

pub(super) async fn run_gemv(
    ctx: &GpuContext,
    clock: &dyn Clock,
    cfg: &SuiteConfig,
    spec: GemvSpec,
    file: Option<&FileGemv>,
    read_gbps: f64,
) -> Result<KernelResult> {
    spec.validate()?;
    let weights = match file.and_then(|f| f.weights.as_ref()) {
        Some(loader) => Some(std::sync::Arc::new(loader.load().map_err(|reason| {
            HarnessError::Weights {
                kernel: spec.id(),
                reason,
            }
        })?)),
        None => None,
    };
    // A file's own weights are one copy: nothing to rotate through.
    let rotation = if weights.is_some() {
        1
    } else {
        rotation_for(
            spec.weight_bytes(),
            cfg.cache_bytes,
            cfg.max_rotation,
            cfg.rotation_budget_bytes,
        )
    };
    let bench = GemvBench::new(ctx, spec, cfg.seed, rotation, weights).await?;
    if cfg.inject_fault {
        for m in &bench.matrices {
            let c = &m.chunks[0];
            ctx.write_slice(&c.main, 0, &[0x5a; 16]);
        }
    }
    let (mut ver, _) = bench.verify(ctx, 0, cfg.verify_full_macs).await?;
    if rotation > 1 {
        let (v2, _) = bench
            .verify(ctx, rotation as usize - 1, cfg.verify_full_macs)
            .await?;
        ver = merge(ver, v2);
    }
    let measured = measure(ctx, clock, &spec.id(), &bench, &cfg.timing.back_to_back()).await?;
    let timing = measured.summary(&spec.id())?;
    let mut notes: Vec<String> = bench
        .kernel
        .f16
        .map(|p| p.note().into())
        .into_iter()
        .collect();
    if measured.calls_per_sample > 1 && measured.method == TimingMethod::TimestampQuery {
        notes.push(format!(
            "{} dispatches back to back per timed pass",
            measured.calls_per_sample
        ));
    }
    if bench.kernel.q8() {
        notes.push("x quantized to int8 once, before the timed dispatches".into());
    }
    if spec.dtype.block_elems() > 1 {
        notes.push("repacked GGUF blocks (quants and scales in separate arrays)".into());
    }
    if let Some(f) = file {
        notes.push(format!("the file's {}", file_label(f)));
    }
    Ok(kernel_result(
        ResultId {
            name: spec.name().into(),
            dtype: spec.dtype.to_string(),
            shape: vec![u64::from(spec.rows), u64::from(spec.cols)],
            batch: spec.batch,
            tensors: file.map(|f| f.tensors.clone()).unwrap_or_default(),
            ..Default::default()
        },
        Outcome {
            timing,
            samples_us: measured.samples,
            verification: ver,
            bytes_moved: spec.bytes_moved(),
            flops: spec.flops(),
            reduction: bench.kernel.reduction.as_str(),
            bindings: bench.matrices[0].chunks.len() as u32,
            rotation,
            notes,
            variant: Some(bench.kernel.choice.report.clone()),
        },
        read_gbps,
    ))
}

pub(super) async fn run_attention(
    ctx: &GpuContext,
    clock: &dyn Clock,
    cfg: &SuiteConfig,
    spec: AttentionSpec,
    read_gbps: f64,
) -> Result<KernelResult> {
    spec.validate()?;
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
    let measured = measure(ctx, clock, &spec.id(), &bench, &cfg.timing).await?;
    let timing = measured.summary(&spec.id())?;
    let mut notes: Vec<String> = bench.f16().map(|p| p.note().into()).into_iter().collect();
    // The combine's share, timed alone (back to back: a few microseconds each) on
    // the partials the calls above left. Best effort: where it cannot be timed the
    // result keeps its figure and says so.
    let mut combine_us = None;
    if let Some(c) = bench.combine_only() {
        let timed = match measure(ctx, clock, &spec.id(), &c, &cfg.timing.back_to_back()).await {
            Ok(m) => m.summary(&spec.id()),
            Err(e) => Err(e),
        };
        notes.push(match timed {
            Ok(t) => {
                combine_us = Some(t.median_us);
                format!(
                    "the combine of its {} splits alone: {} us",
                    bench.splits(),
                    tokenscope_stats::fmt::fmt_sig3(t.median_us)
                )
            }
            Err(e) => format!("the combine alone could not be timed: {e}"),
        });
    }
    let mut result = kernel_result(
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
            tensors: Vec::new(),
        },
        Outcome {
            timing,
            samples_us: measured.samples,
            verification: ver,
            bytes_moved: spec.bytes_moved(),
            flops: spec.flops(),
            reduction: Reduction::Shared.as_str(),
            bindings: bench.caches[0].parts.len() as u32,
            rotation,
            notes,
            variant: Some(bench.kernels.choice.report.clone()),
        },
        read_gbps,
    );
    result.combine_us = combine_us;
    Ok(result)
}

/// What a file GEMV stands for: the tensor whose weights it runs, or how many of
/// the file's tensors share its type and shape.
pub(super) fn file_label(f: &FileGemv) -> String {
    match (&f.weights, f.tensors.as_slice()) {
        (Some(_), [one]) => format!("{one}, its own weights"),
        (Some(_), names) => format!("{}, their own weights", names.join(", ")),
        (None, [one]) => format!("{one}'s type and shape, generated data"),
        (None, names) => format!(
            "{} tensors of this type and shape, generated data",
            names.len()
        ),
    }
}
