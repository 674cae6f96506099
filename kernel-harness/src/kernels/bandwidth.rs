//! The bandwidth ceiling: `shaders/bandwidth_read.wgsl` (read-only streaming) and
//! `shaders/bandwidth_copy.wgsl` (copy by a kernel), over rotating buffers whose total
//! is several times the last-level cache.

use std::sync::Arc;

use tokenscope_core::report::kernels::{BandwidthReport, TimingMethod, VerificationReport};

use crate::arena::Slice;
use crate::clock::Clock;
use crate::context::GpuContext;
use crate::data::{self, FillMode};
use crate::error::{HarnessError, KernelId, Result};
use crate::kernels::fill::{FillJob, Filler};
use crate::kernels::{Check, Reduction};
use crate::shader::{self, Binding, Defines, Kernel};
use crate::timing::{TimingOptions, Workload, measure, run_calls};

/// Threads per workgroup of both kernels.
const WG_SIZE: u64 = 256;
/// 16-byte words each thread handles per call (sets the grid size).
const WORDS_PER_THREAD: u64 = 16;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    vec4s: u32,
    _pad: [u32; 3],
}

/// Sizes of the bandwidth test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BandwidthPlan {
    /// Bytes of each buffer.
    pub buffer_bytes: u64,
    /// Buffers (an even number >= 4).
    pub buffers: u32,
}

impl BandwidthPlan {
    /// A working set of `multiple` times `cache_bytes`, in buffers no larger than the
    /// binding limit, at least 4 buffers; `cap_bytes` bounds the total.
    pub fn new(ctx: &GpuContext, cache_bytes: u64, multiple: u64, cap_bytes: u64) -> Self {
        let want = (cache_bytes * multiple).clamp(16 << 20, cap_bytes.max(16 << 20));
        let max_buf = ctx.max_binding().min(u64::from(u32::MAX) * 16);
        let mut buffers = want.div_ceil(max_buf).max(4);
        buffers += buffers % 2;
        let buffer_bytes = (want / buffers).next_multiple_of(4096).min(max_buf & !4095);
        Self {
            buffer_bytes,
            buffers: buffers as u32,
        }
    }

    /// Total bytes touched.
    pub fn working_set(&self) -> u64 {
        self.buffer_bytes * u64::from(self.buffers)
    }

    fn vec4s(&self) -> u64 {
        self.buffer_bytes / 16
    }

    fn groups(&self) -> u32 {
        self.vec4s().div_ceil(WG_SIZE * WORDS_PER_THREAD).max(1) as u32
    }
}

fn id(name: &str, plan: &BandwidthPlan) -> KernelId {
    KernelId {
        name: name.to_string(),
        dtype: "u32".into(),
        shape: format!("{} x {} MiB", plan.buffers, plan.buffer_bytes >> 20),
    }
}

struct ReadWorkload<'a> {
    kernel: &'a Kernel,
    groups: Vec<wgpu::BindGroup>,
    grid: (u32, u32),
}

impl Workload for ReadWorkload<'_> {
    fn rotation(&self) -> usize {
        self.groups.len()
    }
    fn encode(&self, pass: &mut wgpu::ComputePass<'_>, iter: usize) {
        pass.set_pipeline(&self.kernel.pipeline);
        pass.set_bind_group(0, &self.groups[iter % self.groups.len()], &[]);
        pass.dispatch_workgroups(self.grid.0, self.grid.1, 1);
    }
}

fn stream_key(seed: u64, i: u32) -> u32 {
    data::key(seed, 100 + i)
}

/// Measures the read and copy bandwidth.
pub async fn run(
    ctx: &GpuContext,
    clock: &dyn Clock,
    plan: BandwidthPlan,
    seed: u64,
    timing: &TimingOptions,
) -> Result<(BandwidthReport, TimingMethod, Option<HarnessError>)> {
    let read_id = id("bandwidth_read", &plan);
    let copy_id = id("bandwidth_copy", &plan);
    let filler = Filler::new(ctx, &read_id).await?;
    let reduction = Reduction::of(ctx);
    let read_k: Arc<Kernel> = ctx
        .kernel(
            &read_id,
            shader::BANDWIDTH_READ,
            &Defines::new().flag("SUBGROUPS", reduction == Reduction::Subgroup),
            &[Binding::Uniform, Binding::Read, Binding::ReadWrite],
        )
        .await?;
    let copy_k = ctx
        .kernel(
            &copy_id,
            shader::BANDWIDTH_COPY,
            &Defines::new(),
            &[Binding::Uniform, Binding::Read, Binding::ReadWrite],
        )
        .await?;

    let bufs = ctx
        .scoped(&read_id, plan.working_set(), || {
            // Copies go 2j -> 2j + 1: each destination outside its source's buffer.
            let mut bufs: Vec<Slice> = Vec::new();
            for i in 0..plan.buffers as usize {
                let apart = (i % 2 == 1).then(|| &bufs[i - 1]);
                let s =
                    ctx.operand_apart(&format!("bandwidth buffer {i}"), plan.buffer_bytes, apart);
                bufs.push(s);
            }
            bufs
        })
        .await?;
    let words = plan.buffer_bytes / 4;
    let jobs: Vec<FillJob> = bufs
        .iter()
        .enumerate()
        .map(|(i, b)| FillJob {
            target: b.into(),
            words,
            key: stream_key(seed, i as u32),
            mode: FillMode::Bits,
            offset: 0,
        })
        .collect();
    filler.run(ctx, &read_id, &jobs).await?;

    let groups = plan.groups();
    let grid = ctx.grid(groups);
    let params = ctx.uniform(
        "bandwidth params",
        &Params {
            vec4s: plan.vec4s() as u32,
            _pad: [0; 3],
        },
    );
    let partial = ctx.storage("bandwidth partial sums", u64::from(groups) * 4);

    // Read: one buffer per call, rotating.
    let read = ReadWorkload {
        kernel: &read_k,
        groups: bufs
            .iter()
            .map(|b| {
                ctx.bind(
                    &read_k,
                    "bandwidth read",
                    &crate::bufs![&params, b, &partial],
                )
            })
            .collect(),
        grid,
    };
    run_calls(ctx, &read_id, &read, 0, 1).await?;
    let key0 = stream_key(seed, 0);
    let (read_ver, read_err) = verify_read(ctx, &read_id, &partial, groups, words, key0).await?;
    let read_m = measure(ctx, clock, &read_id, &read, timing).await?;

    // Copy: pairs (2j -> 2j+1), so consecutive calls touch disjoint buffers.
    let copy = ReadWorkload {
        kernel: &copy_k,
        groups: bufs
            .chunks_exact(2)
            .map(|p| {
                ctx.bind(
                    &copy_k,
                    "bandwidth copy",
                    &crate::bufs![&params, &p[0], &p[1]],
                )
            })
            .collect(),
        grid,
    };
    run_calls(ctx, &copy_id, &copy, 0, 1).await?;
    let (copy_ver, copy_err) = verify_copy(ctx, &copy_id, &bufs[1], words, key0).await?;
    let copy_m = measure(ctx, clock, &copy_id, &copy, timing).await?;

    let read_t = read_m.summary(&read_id)?;
    let copy_t = copy_m.summary(&copy_id)?;
    let method = read_m.method;
    let report = BandwidthReport {
        read_gbps: plan.buffer_bytes as f64 / (read_t.median_us * 1e-6) / 1e9,
        copy_gbps: 2.0 * plan.buffer_bytes as f64 / (copy_t.median_us * 1e-6) / 1e9,
        working_set_bytes: plan.working_set(),
        buffer_bytes: plan.buffer_bytes,
        buffers: plan.buffers,
        read: read_t,
        copy: copy_t,
        read_verified: read_ver.failure.is_none(),
        copy_verified: copy_ver.failure.is_none(),
        read_reduction: Some(reduction.as_str().into()),
    };
    Ok((report, method, read_err.or(copy_err)))
}

/// The read kernel's partial sums add up to buffer 0's checksum, computed on the CPU.
async fn verify_read(
    ctx: &GpuContext,
    id: &KernelId,
    partial: &wgpu::Buffer,
    groups: u32,
    words: u64,
    key0: u32,
) -> Result<(VerificationReport, Option<HarnessError>)> {
    let sums = ctx.read_u32(partial, 0, u64::from(groups)).await?;
    let gpu_sum = sums.iter().fold(0u32, |a, &b| a.wrapping_add(b));
    let cpu_sum = (0..words as u32).fold(0u32, |a, i| a.wrapping_add(data::hash_word(key0, i)));
    let mut check = Check::new(id, 1);
    check.compare_exact(
        || "checksum of buffer 0".into(),
        u64::from(gpu_sum),
        u64::from(cpu_sum),
    );
    Ok(check.finish())
}

/// Buffer 1 holds buffer 0's words after a copy: its head and its tail (a
/// quarter of it each, at most 4 MiB) are compared word by word.
async fn verify_copy(
    ctx: &GpuContext,
    id: &KernelId,
    copied_to: &Slice,
    words: u64,
    key0: u32,
) -> Result<(VerificationReport, Option<HarnessError>)> {
    let probe = (words / 4).min(1 << 20);
    let tail = ctx
        .read_u32(
            &copied_to.buffer,
            copied_to.offset / 4 + words - probe,
            probe,
        )
        .await?;
    let mut check = Check::new(id, words);
    for (j, w) in tail.iter().enumerate() {
        let i = (words - probe + j as u64) as u32;
        check.compare_exact(
            || format!("word {i} of buffer 1"),
            u64::from(*w),
            u64::from(data::hash_word(key0, i)),
        );
    }
    let head = ctx
        .read_u32(&copied_to.buffer, copied_to.offset / 4, probe)
        .await?;
    for (i, w) in head.iter().enumerate() {
        check.compare_exact(
            || format!("word {i} of buffer 1"),
            u64::from(*w),
            u64::from(data::hash_word(key0, i as u32)),
        );
    }
    Ok(check.finish())
}
