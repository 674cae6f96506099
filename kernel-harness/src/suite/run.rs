//! Running the suite: every item in order (bandwidth, GEMV and skinny matmul,
//! attention, decode steps), each fitted to the device's limits and the memory
//! budget, measured, verified and added to the report.

use tokenscope_kernel_report::{
    KernelReport, KernelResult, RunConfig, SCHEMA, SkippedKernel, TimingMethod,
};

use super::items::{
    Item, beside_spec, file_label, items, over_budget, run_attention, run_beside, run_gemv,
    run_user,
};
use super::{Progress, SuiteConfig, finish};
use crate::clock::Clock;
use crate::context::GpuContext;
use crate::decode;
use crate::error::{HarnessError, Result};
use crate::kernels::bandwidth::{self, BandwidthPlan};
use crate::kernels::compute;

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
            Item::User(k, set) => {
                let kernel = &cfg.user_kernels[*k];
                let label = match kernel.instance(*set) {
                    Ok(inst) => crate::user::kernel_id(kernel, &inst).to_string(),
                    Err(_) => format!("{} parameter set {}", kernel.name, set + 1),
                };
                (label, Vec::new())
            }
            Item::Beside(k) => match beside_spec(cfg, *k) {
                Ok(s) => (
                    format!("{} beside {}", s.id(), cfg.user_kernels[*k].name),
                    vec![u64::from(s.rows), u64::from(s.cols)],
                ),
                Err(_) => (
                    format!("gemv beside {}", cfg.user_kernels[*k].name),
                    Vec::new(),
                ),
            },
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
            (Item::User(k, set), None) => run_user(ctx, clock, cfg, *k, *set, read_gbps)
                .await
                .map(Some),
            (Item::Beside(k), None) => run_beside(ctx, clock, cfg, *k, read_gbps).await.map(Some),
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
                    Item::User(k, _) => (
                        cfg.user_kernels[*k].name.clone(),
                        tokenscope_kernel_report::USER_KERNEL_DTYPE.into(),
                    ),
                    Item::Beside(_) => ("gemv".into(), "f16".into()),
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
        super::drift::drift(
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
        dispatch_cost: Vec::new(),
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
