//! Timing: GPU timestamp queries when the device has them, the host clock around
//! submit-and-wait otherwise; warm-up first; one sample per call (timestamps) or per
//! batch of calls (wall clock). Where timestamps are coarse (browsers quantize them,
//! Chrome to 100 us), [`TimingOptions::min_timestamp_sample_ms`] batches several
//! calls into one timed compute pass so that a sample lasts long enough.

use tokenscope_kernel_report::{TimingMethod, TimingSummary};

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
    /// Timestamps: calls per sample (recorded in one compute pass between its two
    /// timestamps) so a sample lasts at least this long; 0 = one call per sample.
    pub min_timestamp_sample_ms: f64,
    /// Timestamps: find their step first ([`timestamp_step_ns`]) and batch calls
    /// until a sample lasts 100 steps (a user's kernel, whose length is unknown).
    pub detect_timestamp_step: bool,
}

impl Default for TimingOptions {
    fn default() -> Self {
        Self {
            warmup: 3,
            samples: 20,
            budget_ms: 8_000.0,
            min_sample_ms: 2.0,
            min_timestamp_sample_ms: 0.0,
            detect_timestamp_step: false,
        }
    }
}

/// Shortest timed pass of dispatches back to back, milliseconds: a 2 us dispatch
/// on a datacenter GPU is then one of about 250 (a pass holds at most 1000).
pub const BACK_TO_BACK_MS: f64 = 0.5;

/// Batch length (ms) of a timed sample in a browser: Chrome quantizes timestamps
/// (and `performance.now()`) to 100 us, so 10 ms keeps the quantization under 1%.
pub const BROWSER_MIN_SAMPLE_MS: f64 = 10.0;

impl TimingOptions {
    /// The same options with dispatches back to back in passes of at least
    /// [`BACK_TO_BACK_MS`] where the GPU has timestamps, as a decode step runs them
    /// (GEMVs, the attention combine; with a wall clock every call is already
    /// batched, [`TimingOptions::min_sample_ms`]).
    pub fn back_to_back(self) -> Self {
        Self {
            min_timestamp_sample_ms: self.min_timestamp_sample_ms.max(BACK_TO_BACK_MS),
            ..self
        }
    }

    /// The same options with every sample (timestamps and wall clock) batched to at
    /// least [`BROWSER_MIN_SAMPLE_MS`].
    pub fn for_browser(self) -> Self {
        Self {
            min_sample_ms: self.min_sample_ms.max(BROWSER_MIN_SAMPLE_MS),
            min_timestamp_sample_ms: self.min_timestamp_sample_ms.max(BROWSER_MIN_SAMPLE_MS),
            ..self
        }
    }
}

/// What [`measure`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// Per-call time of each sample, microseconds.
    pub samples: Vec<f64>,
    /// How they were taken.
    pub method: TimingMethod,
    /// Calls each sample spanned.
    pub calls_per_sample: u32,
    /// The timestamps' step, nanoseconds, where it was looked for
    /// ([`TimingOptions::detect_timestamp_step`]); `Some(None)`: every timestamp
    /// read the same.
    pub timestamp_step_ns: Option<Option<u64>>,
}

impl Measurement {
    /// Median and spread of the samples, recording the calls per sample.
    pub fn summary(&self, kernel: &KernelId) -> Result<TimingSummary> {
        TimingSummary::from_samples(&self.samples)
            .map(|t| t.with_calls_per_sample(self.calls_per_sample))
            .ok_or_else(|| HarnessError::Timing {
                kernel: kernel.clone(),
                reason: "no finite sample".into(),
            })
    }
}

/// Most calls batched into one sample.
const MAX_CALLS_PER_SAMPLE: usize = 1000;

/// Calls per sample so that a sample of calls costing `call_ms` each lasts at least
/// `min_ms` (1 when `min_ms` is 0).
pub fn calls_for(min_ms: f64, call_ms: f64) -> usize {
    if min_ms <= 0.0 {
        return 1;
    }
    ((min_ms / call_ms.max(1e-6)).ceil() as usize).clamp(1, MAX_CALLS_PER_SAMPLE)
}

/// Maximum queries in one query set (wgpu's limit is 4096).
const MAX_QUERIES: u32 = 4096;

/// Records `passes` compute passes of `per_pass` calls each (calls `first..`); with
/// a query set, pass `i` writes timestamps `2i` and `2i + 1`.
fn encode_calls(
    ctx: &GpuContext,
    w: &dyn Workload,
    first: usize,
    passes: usize,
    per_pass: usize,
    timestamps: Option<&wgpu::QuerySet>,
    label: &str,
) -> wgpu::CommandEncoder {
    let mut enc = ctx
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
    for i in 0..passes {
        let timestamp_writes = timestamps.map(|qs| wgpu::ComputePassTimestampWrites {
            query_set: qs,
            beginning_of_pass_write_index: Some(2 * i as u32),
            end_of_pass_write_index: Some(2 * i as u32 + 1),
        });
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(label),
            timestamp_writes,
        });
        for j in 0..per_pass {
            w.encode(&mut pass, first + i * per_pass + j);
        }
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
    let enc = encode_calls(ctx, w, first, calls, 1, None, &format!("{kernel} run"));
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
    let enc = encode_calls(ctx, w, first, calls, 1, None, label);
    let cmd = enc.finish();
    let t0 = clock.now_ms();
    ctx.queue.submit([cmd]);
    ctx.wait_idle().await;
    clock.now_ms() - t0
}

/// Times `passes` compute passes of `per_pass` calls each with timestamps (calls
/// `first..`) and returns the per-call time of each pass, microseconds (empty or
/// reversed pairs are dropped).
async fn timestamp_passes(
    ctx: &GpuContext,
    kernel: &KernelId,
    w: &dyn Workload,
    first: usize,
    passes: u32,
    per_pass: usize,
    label: &str,
) -> Result<Vec<f64>> {
    let pairs = timestamp_pairs_ns(ctx, kernel, w, first, passes, per_pass, label).await?;
    Ok(pairs
        .into_iter()
        .filter(|(begin, end)| end > begin)
        .map(|(begin, end)| (end - begin) as f64 / 1e3 / per_pass as f64)
        .collect())
}

/// The finest step GPU timestamps take here, nanoseconds, as seen over 16
/// passes of one call of `w` (calls `first..`): the greatest common divisor of
/// their distances from the first. A browser rounds them (Chrome: to 100 us
/// without its developer flag); a native driver gives about its tick. `None`
/// when every timestamp read the same (the calls are shorter than the step).
pub async fn timestamp_step_ns(
    ctx: &GpuContext,
    kernel: &KernelId,
    w: &dyn Workload,
    first: usize,
) -> Result<Option<u64>> {
    let pairs = timestamp_pairs_ns(ctx, kernel, w, first, 16, 1, "timestamp step").await?;
    let all: Vec<u64> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    let Some(&origin) = all.first() else {
        return Ok(None);
    };
    let step = all.iter().fold(0u64, |g, &t| gcd(g, t.abs_diff(origin)));
    Ok((step > 0).then_some(step))
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The begin and end timestamps (nanoseconds, rounded as
/// [`GpuContext::set_timestamp_quantum`] asks) of `passes` passes of `per_pass`
/// calls each.
async fn timestamp_pairs_ns(
    ctx: &GpuContext,
    kernel: &KernelId,
    w: &dyn Workload,
    first: usize,
    passes: u32,
    per_pass: usize,
    label: &str,
) -> Result<Vec<(u64, u64)>> {
    let period_ns = f64::from(ctx.queue.get_timestamp_period());
    let qs = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
        label: Some(label),
        ty: wgpu::QueryType::Timestamp,
        count: 2 * passes,
    });
    let bytes = u64::from(2 * passes) * 8;
    let resolve = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("timestamp resolve"),
        size: bytes,
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let mut enc = encode_calls(ctx, w, first, passes as usize, per_pass, Some(&qs), label);
    enc.resolve_query_set(&qs, 0..2 * passes, &resolve, 0);
    ctx.queue.submit([enc.finish()]);
    let raw = ctx.read_bytes(&resolve, 0, bytes).await?;
    ctx.check_errors(kernel)?;
    let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&raw);
    let quantum = ctx.timestamp_quantum_ns().unwrap_or(1);
    let ns = |t: u64| ((t as f64 * period_ns).round() as u64) / quantum * quantum;
    Ok(ticks
        .chunks_exact(2)
        .map(|pair| (ns(pair[0]), ns(pair[1])))
        .collect())
}

/// Samples whose median lasts less than this share of the minimum sample are
/// taken again with a larger batch ([`measure`]).
const SHORT_SAMPLE: f64 = 0.9;

/// How many samples of `sample_ms` each the time budget affords: at most
/// `opts.samples`, at least 3 (fewer only if `opts.samples` asks for fewer).
fn affordable_samples(opts: &TimingOptions, sample_ms: f64) -> u32 {
    let affordable = (opts.budget_ms / sample_ms.max(1e-6)).floor() as u32;
    opts.samples.min(affordable.max(3)).max(1)
}

/// Times `w`: per-call samples in microseconds, the method used and the calls each
/// sample spanned.
///
/// Warm-up first (its wall-clock time estimates a call's cost). With timestamps and
/// [`TimingOptions::min_timestamp_sample_ms`], the calls per sample are then
/// calibrated on the GPU's own clock (the wall-clock estimate includes submission
/// and, in a browser, a round trip through the event loop): timed passes growing
/// the batch until one lasts the minimum, then one more at that size, the batch
/// sized on the faster of the two. Samples whose median comes out short of the
/// minimum (the calibration ran slow) are taken once more with a batch sized on
/// that median.
pub async fn measure(
    ctx: &GpuContext,
    clock: &dyn Clock,
    kernel: &KernelId,
    w: &dyn Workload,
    opts: &TimingOptions,
) -> Result<Measurement> {
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

    if ctx.caps.timestamp_query {
        let mut min_ms = opts.min_timestamp_sample_ms;
        let mut step = None;
        if opts.detect_timestamp_step {
            let found = timestamp_step_ns(ctx, kernel, w, iter).await?;
            iter += 16;
            min_ms = min_ms
                .max(100.0 * found.map_or(BROWSER_MIN_SAMPLE_MS / 100.0, |ns| ns as f64 / 1e6));
            step = Some(found);
        }
        let mut per_sample = calls_for(min_ms, warm_ms);
        let mut call_ms = warm_ms;
        if min_ms > 0.0 {
            // Grow the batch on the GPU's clock; a batch inside one timestamp step
            // reads zero and is grown tenfold. Then one more pass at the size found:
            // a first pass slowed by something else would leave every later sample
            // short, so the batch follows the faster of the two.
            let mut timed = None;
            for _ in 0..6 {
                let t = timestamp_passes(ctx, kernel, w, iter, 1, per_sample, &label).await?;
                iter += per_sample;
                let want = match t.first() {
                    Some(us) => {
                        call_ms = us / 1e3;
                        timed = Some(per_sample);
                        calls_for(min_ms, call_ms)
                    }
                    None if opts.detect_timestamp_step => {
                        (per_sample * 10).min(MAX_CALLS_PER_SAMPLE)
                    }
                    None => break,
                };
                if want <= per_sample {
                    break;
                }
                per_sample = want;
            }
            if timed.is_some() {
                let t = timestamp_passes(ctx, kernel, w, iter, 1, per_sample, &label).await?;
                iter += per_sample;
                if let Some(us) = t.first() {
                    call_ms = call_ms.min(us / 1e3);
                    per_sample = per_sample.max(calls_for(min_ms, call_ms));
                }
            }
        }
        let mut out = Vec::new();
        // Sampled once; again with a batch sized on the samples' own median when
        // they came out short of the minimum (every calibration pass ran slow:
        // something else had the GPU or the CPU then).
        for _ in 0..2 {
            let samples = affordable_samples(opts, call_ms * per_sample as f64);
            out = Vec::with_capacity(samples as usize);
            let mut left = samples;
            while left > 0 {
                let n = left.min(MAX_QUERIES / 2);
                out.extend(timestamp_passes(ctx, kernel, w, iter, n, per_sample, &label).await?);
                iter += n as usize * per_sample;
                left -= n;
            }
            let Some(median_ms) = tokenscope_stats::stats::median(&out).map(|us| us / 1e3) else {
                break;
            };
            if min_ms <= 0.0 || median_ms * per_sample as f64 >= SHORT_SAMPLE * min_ms {
                break;
            }
            call_ms = median_ms;
            per_sample = calls_for(min_ms, call_ms).max(per_sample + 1);
        }
        if out.is_empty() {
            return Err(HarnessError::Timing {
                kernel: kernel.clone(),
                reason: "every timestamp pair was empty or reversed".into(),
            });
        }
        Ok(Measurement {
            samples: out,
            method: TimingMethod::TimestampQuery,
            calls_per_sample: per_sample as u32,
            timestamp_step_ns: step,
        })
    } else {
        let per_sample = calls_for(opts.min_sample_ms, warm_ms);
        let samples = affordable_samples(opts, warm_ms * per_sample as f64);
        let mut out = Vec::with_capacity(samples as usize);
        for _ in 0..samples {
            let ms = wall_batch(ctx, clock, w, iter, per_sample, &label).await;
            iter += per_sample;
            out.push(ms * 1e3 / per_sample as f64);
        }
        ctx.check_errors(kernel)?;
        Ok(Measurement {
            samples: out,
            method: TimingMethod::WallClock,
            calls_per_sample: per_sample as u32,
            timestamp_step_ns: None,
        })
    }
}
