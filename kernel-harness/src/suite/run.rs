//! Running the suite: every item in order (bandwidth, GEMV and skinny matmul,
//! attention, decode steps), each fitted to the device's limits and the memory
//! budget, measured, verified and added to the report.

use tokenscope_kernel_report::{
    DRIFT_LIMIT, DriftCheck, KernelReport, KernelResult, RunConfig, SCHEMA, SkippedKernel,
    TimingMethod, VerificationReport,
};

use super::{FileGemv, Progress, SuiteConfig, finish};
use crate::clock::Clock;
use crate::context::GpuContext;
use crate::decode::{self, DecodeStepSpec};
use crate::error::{HarnessError, Result};
use crate::kernels::attention::{AttentionBench, AttentionSpec};
use crate::kernels::bandwidth::{self, BandwidthPlan};
use crate::kernels::compute;
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

/// One thing the run measures.
#[derive(Clone)]
pub(super) enum Item {
    Gemv(GemvSpec),
    /// Index into `cfg.file_gemvs`.
    FileGemv(usize),
    Attention(AttentionSpec),
    Step(DecodeStepSpec),
}

impl Item {
    /// The kernel group (for the drift check: one sentinel each).
    fn group(&self) -> u8 {
        match self {
            Item::Gemv(s) if s.batch == 1 => 0,
            Item::Gemv(_) => 1,
            Item::FileGemv(_) => 2,
            Item::Attention(_) => 3,
            Item::Step(_) => 4,
        }
    }
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
    let mut report = empty_report(ctx, cfg);
    // 1. The ceiling everything else is divided by.
    if progress.cancelled() {
        return Err(HarnessError::Cancelled);
    }
    let read_gbps = run_bandwidth(ctx, clock, cfg, progress, &mut report).await?;
    // 2. The other roof.
    run_compute(ctx, clock, cfg, progress, &mut report).await?;
    // 3..6. Kernels and decode steps.
    let mut steps = Vec::new();
    // The first measured kernel of each group, timed again at the end (drift).
    let mut sentinels: Vec<(Item, String, f64)> = Vec::new();
    for item in items(cfg) {
        if progress.cancelled() {
            return Err(HarnessError::Cancelled);
        }
        let (label, shape) = match &item {
            Item::Gemv(s) => (
                s.id().to_string(),
                vec![u64::from(s.rows), u64::from(s.cols)],
            ),
            Item::FileGemv(i) => {
                let f = &cfg.file_gemvs[*i];
                (
                    format!("{} ({})", f.spec.id(), file_label(f)),
                    vec![u64::from(f.spec.rows), u64::from(f.spec.cols)],
                )
            }
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
            (Item::Gemv(s), None) => run_gemv(ctx, clock, cfg, *s, None, read_gbps)
                .await
                .map(Some),
            (Item::FileGemv(i), None) => {
                let f = &cfg.file_gemvs[*i];
                run_gemv(ctx, clock, cfg, f.spec, Some(f), read_gbps)
                    .await
                    .map(Some)
            }
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
                if !sentinels.iter().any(|(i, _, _)| i.group() == item.group()) {
                    sentinels.push((item.clone(), label.clone(), k.median_us));
                }
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
                    Item::FileGemv(i) => (
                        cfg.file_gemvs[*i].spec.name().to_string(),
                        cfg.file_gemvs[*i].spec.dtype.to_string(),
                    ),
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
        report.decode_steps = finish::step_results(&report, &steps);
        finish::finish(&mut report, cfg);
        progress.report(&report);
    }
    // 7. Drift: the read bandwidth and each group's first kernel again, after all.
    if !progress.cancelled() {
        drift(
            ctx,
            clock,
            cfg,
            progress,
            &mut report,
            &sentinels,
            read_gbps,
        )
        .await;
        finish::finish(&mut report, cfg);
        progress.report(&report);
    }
    Ok(report)
}

/// Times again, at the end of the run, the read kernel and the first kernel of each
/// group, and records how far each moved from its first figure
/// ([`tokenscope_kernel_report::DriftCheck`]). A kernel that cannot run again
/// is reported as an error, not a drift.
async fn drift(
    ctx: &GpuContext,
    clock: &dyn Clock,
    cfg: &SuiteConfig,
    progress: &mut dyn Progress,
    report: &mut KernelReport,
    sentinels: &[(Item, String, f64)],
    read_gbps: f64,
) {
    let label = "drift check (the read kernel and each group's first kernel, again)";
    progress.start(label);
    let mut lines = Vec::new();
    if let Some(bw) = &report.bandwidth {
        let plan = BandwidthPlan::new(
            ctx,
            cfg.cache_bytes,
            cfg.bandwidth_multiple,
            cfg.bandwidth_cap_bytes,
        );
        match bandwidth::run(ctx, clock, plan, cfg.seed, &cfg.timing).await {
            Ok((again, _, _)) => {
                let d = DriftCheck::new(
                    "bandwidth_read".into(),
                    bw.read.median_us,
                    again.read.median_us,
                );
                lines.push(format!("read {:+.1}%", 100.0 * d.change));
                report.drift.push(d);
            }
            Err(e) => report.errors.push(format!("drift check, read: {e}")),
        }
    }
    for (item, name, first_us) in sentinels {
        let again = match item {
            Item::Gemv(s) => run_gemv(ctx, clock, cfg, *s, None, read_gbps).await,
            Item::Attention(s) => run_attention(ctx, clock, cfg, *s, read_gbps).await,
            _ => continue,
        };
        match again {
            Ok(k) => {
                let d = DriftCheck::new(name.clone(), *first_us, k.median_us);
                lines.push(format!("{name} {:+.1}%", 100.0 * d.change));
                report.drift.push(d);
            }
            Err(e) => report.errors.push(format!("drift check, {name}: {e}")),
        }
        let _ = ctx.take_uncaptured_errors();
    }
    let drifted = report.drift.iter().filter(|d| d.drifted).count();
    progress.done(
        label,
        &format!(
            "{}{}",
            lines.join(", "),
            if drifted > 0 {
                format!(" ({drifted} moved more than {:.0}%)", 100.0 * DRIFT_LIMIT)
            } else {
                String::new()
            }
        ),
    );
}

/// The arithmetic roof, into the report.
async fn run_compute(
    ctx: &GpuContext,
    clock: &dyn Clock,
    cfg: &SuiteConfig,
    progress: &mut dyn Progress,
    report: &mut KernelReport,
) -> Result<()> {
    let label = "compute roof (FMA, f32 and f16)";
    progress.start(label);
    let (c, err) = compute::run(ctx, clock, &cfg.timing).await?;
    if let Some(e) = err {
        report.errors.push(e.to_string());
    }
    progress.done(
        label,
        &format!(
            "f32 {:.0} GFLOP/s{}",
            c.f32_gflops,
            c.f16_gflops
                .map_or_else(String::new, |g| format!(", f16 {g:.0} GFLOP/s"))
        ),
    );
    report.compute = Some(c);
    finish::finish(report, cfg);
    progress.report(report);
    Ok(())
}

/// The report before anything ran: where, with what, and how it will be timed.
fn empty_report(ctx: &GpuContext, cfg: &SuiteConfig) -> KernelReport {
    KernelReport {
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
        compute: None,
        tuning: ctx.tuning().usage.clone(),
        kernels: Vec::new(),
        skipped: Vec::new(),
        decode_floor: Vec::new(),
        decode_steps: Vec::new(),
        roofline: Vec::new(),
        goals: Vec::new(),
        drift: Vec::new(),
        errors: Vec::new(),
        verified: false,
        gguf: None,
    }
}

/// The bandwidth ceiling, into the report; returns the read bandwidth.
async fn run_bandwidth(
    ctx: &GpuContext,
    clock: &dyn Clock,
    cfg: &SuiteConfig,
    progress: &mut dyn Progress,
    report: &mut KernelReport,
) -> Result<f64> {
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
    finish::finish(report, cfg);
    progress.report(report);
    Ok(read_gbps)
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
    items
}

/// The item's largest operand, when it exceeds the run's memory budget.
fn over_budget(item: &Item, cfg: &SuiteConfig) -> Option<HarnessError> {
    let budget = cfg.memory_budget_bytes?;
    let (kernel, bytes) = match item {
        Item::Gemv(s) => (s.id(), s.weight_bytes()),
        Item::FileGemv(i) => (
            cfg.file_gemvs[*i].spec.id(),
            cfg.file_gemvs[*i].spec.weight_bytes(),
        ),
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
    let measured = measure(ctx, clock, &spec.id(), &bench, &cfg.timing).await?;
    let timing = measured.summary(&spec.id())?;
    let mut notes: Vec<String> = bench
        .kernel
        .f16
        .map(|p| p.note().into())
        .into_iter()
        .collect();
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

async fn run_attention(
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
    ))
}

/// What a file GEMV stands for: the tensor whose weights it runs, or how many of
/// the file's tensors share its type and shape.
fn file_label(f: &FileGemv) -> String {
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
