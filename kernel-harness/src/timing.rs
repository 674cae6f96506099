//! Timing: GPU timestamp queries when the device has them, the host clock around
//! submit-and-wait otherwise; warm-up first; one sample per call (timestamps) or per
//! batch of calls (wall clock).

use tokenscope_core::kernels::TimingMethod;

use crate::clock::Clock;
use crate::context::GpuContext;
use crate::error::{HarnessError, KernelId, Result};

/// Something the harness can time: one call is one compute pass.
pub trait Workload {
    /// Distinct buffer sets rotated through, so consecutive calls do not hit cache.
    fn rotation(&self) -> usize;
    /// Records call number `iter` (buffer set `iter % rotation()`) into `pass`.
    fn encode(&self, pass: &mut wgpu::ComputePass<'_>, iter: usize);
}

/// How to time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimingOptions {
    /// Untimed calls before the samples.
    pub warmup: u32,
    /// Timed samples wanted.
    pub samples: u32,
    /// Fewer samples (at least 3) when one call is slow: the total stays under this.
    pub budget_ms: f64,
    /// Wall clock: calls per sample so a sample lasts at least this long.
    pub min_sample_ms: f64,
}

impl Default for TimingOptions {
    fn default() -> Self {
        Self {
            warmup: 3,
            samples: 20,
            budget_ms: 8_000.0,
            min_sample_ms: 2.0,
        }
    }
}

/// Maximum queries in one query set (wgpu's limit is 4096).
const MAX_QUERIES: u32 = 4096;

fn encode_calls(
    ctx: &GpuContext,
    w: &dyn Workload,
    first: usize,
    calls: usize,
    timestamps: Option<&wgpu::QuerySet>,
    label: &str,
) -> wgpu::CommandEncoder {
    let mut enc = ctx
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
    for i in 0..calls {
        let timestamp_writes = timestamps.map(|qs| wgpu::ComputePassTimestampWrites {
            query_set: qs,
            beginning_of_pass_write_index: Some(2 * i as u32),
            end_of_pass_write_index: Some(2 * i as u32 + 1),
        });
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(label),
            timestamp_writes,
        });
        w.encode(&mut pass, first + i);
    }
    enc
}

/// Runs `w` once per call for `calls` calls and waits (untimed).
pub async fn run_calls(
    ctx: &GpuContext,
    kernel: &KernelId,
    w: &dyn Workload,
    first: usize,
    calls: usize,
) -> Result<()> {
    if calls == 0 {
        return Ok(());
    }
    let enc = encode_calls(ctx, w, first, calls, None, &format!("{kernel} run"));
    ctx.queue.submit([enc.finish()]);
    ctx.wait_idle().await;
    ctx.check_errors(kernel)
}

async fn wall_batch(
    ctx: &GpuContext,
    clock: &dyn Clock,
    w: &dyn Workload,
    first: usize,
    calls: usize,
    label: &str,
) -> f64 {
    let enc = encode_calls(ctx, w, first, calls, None, label);
    let cmd = enc.finish();
    let t0 = clock.now_ms();
    ctx.queue.submit([cmd]);
    ctx.wait_idle().await;
    clock.now_ms() - t0
}

/// Times `w`: returns per-call samples in microseconds and the method used.
pub async fn measure(
    ctx: &GpuContext,
    clock: &dyn Clock,
    kernel: &KernelId,
    w: &dyn Workload,
    opts: &TimingOptions,
) -> Result<(Vec<f64>, TimingMethod)> {
    let label = format!("{kernel} timing");
    let mut iter = 0usize;
    // Warm-up: one call first (it also estimates the cost of a call), the rest unless
    // they would eat more than a quarter of the budget.
    let mut warm_ms = wall_batch(ctx, clock, w, iter, 1, &label).await;
    iter += 1;
    let more = opts.warmup.saturating_sub(1) as usize;
    if more > 0 && warm_ms * more as f64 <= opts.budget_ms / 4.0 {
        warm_ms = wall_batch(ctx, clock, w, iter, more, &label).await / more as f64;
        iter += more;
    }
    ctx.check_errors(kernel)?;
    let affordable = (opts.budget_ms / warm_ms.max(1e-6)).floor() as u32;
    let samples = opts.samples.min(affordable.max(3)).max(1);

    if ctx.caps.timestamp_query {
        let period_ns = f64::from(ctx.queue.get_timestamp_period());
        let mut out = Vec::with_capacity(samples as usize);
        let mut left = samples;
        while left > 0 {
            let n = left.min(MAX_QUERIES / 2);
            let qs = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some(&label),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * n,
            });
            let bytes = u64::from(2 * n) * 8;
            let resolve = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timestamp resolve"),
                size: bytes,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let mut enc = encode_calls(ctx, w, iter, n as usize, Some(&qs), &label);
            enc.resolve_query_set(&qs, 0..2 * n, &resolve, 0);
            ctx.queue.submit([enc.finish()]);
            iter += n as usize;
            let raw = ctx.read_bytes(&resolve, 0, bytes).await?;
            ctx.check_errors(kernel)?;
            let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&raw);
            for pair in ticks.chunks_exact(2) {
                if pair[1] > pair[0] {
                    out.push((pair[1] - pair[0]) as f64 * period_ns / 1e3);
                }
            }
            left -= n;
        }
        if out.is_empty() {
            return Err(HarnessError::Timing {
                kernel: kernel.clone(),
                reason: "every timestamp pair was empty or reversed".into(),
            });
        }
        Ok((out, TimingMethod::TimestampQuery))
    } else {
        // Calls per sample so one sample lasts at least min_sample_ms.
        let per_sample = ((opts.min_sample_ms / warm_ms.max(1e-6)).ceil() as usize).clamp(1, 1000);
        let mut out = Vec::with_capacity(samples as usize);
        for _ in 0..samples {
            let ms = wall_batch(ctx, clock, w, iter, per_sample, &label).await;
            iter += per_sample;
            out.push(ms * 1e3 / per_sample as f64);
        }
        ctx.check_errors(kernel)?;
        Ok((out, TimingMethod::WallClock))
    }
}
