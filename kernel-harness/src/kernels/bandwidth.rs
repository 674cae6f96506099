//! The bandwidth ceiling: `shaders/bandwidth_read.wgsl` (read-only streaming) and
//! `shaders/bandwidth_copy.wgsl` (copy by a kernel), over rotating buffers whose total
//! is several times the last-level cache.

use std::sync::Arc;

use tokenscope_kernel_report::{AdapterReport, BandwidthReport, TimingMethod, VerificationReport};

use crate::arena::Slice;
use crate::clock::Clock;
use crate::context::GpuContext;
use crate::data::{self, FillMode};
use crate::error::{HarnessError, KernelId, Result};
use crate::kernels::fill::{FillJob, Filler};
use crate::kernels::{Check, Reduction, VariantCaps};
use crate::shader::{self, Binding, Defines, Kernel};
use crate::timing::{Measurement, TimingOptions, Workload, measure, run_calls};
use crate::tune::{Choice, Family, Tuning};

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

    /// How a tuning file names the problem's shape: `[buffers, buffer_bytes]`.
    pub fn shape(&self) -> Vec<u64> {
        vec![u64::from(self.buffers), self.buffer_bytes]
    }

    /// Total bytes touched.
    pub fn working_set(&self) -> u64 {
        self.buffer_bytes * u64::from(self.buffers)
    }

    fn vec4s(&self) -> u64 {
        self.buffer_bytes / 16
    }

    fn groups(&self, v: &StreamVariant) -> u32 {
        self.vec4s()
            .div_ceil(u64::from(v.threads) * u64::from(v.words))
            .max(1) as u32
    }
}

/// Which streaming kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// bandwidth_read.wgsl.
    Read,
    /// bandwidth_copy.wgsl.
    Copy,
}

impl Stream {
    /// `bandwidth_read` or `bandwidth_copy`.
    pub fn name(self) -> &'static str {
        match self {
            Stream::Read => "bandwidth_read",
            Stream::Copy => "bandwidth_copy",
        }
    }
}

/// A variant of the streaming kernels, written `t256_u4_w16`: threads per workgroup,
/// 16-byte loads in flight per thread, 16-byte words per thread over a call (which
/// sets the grid).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamVariant {
    /// Threads per workgroup.
    pub threads: u32,
    /// Loads in flight per thread.
    pub unroll: u32,
    /// 16-byte words per thread over a call.
    pub words: u32,
}

impl StreamVariant {
    /// The layout the harness had before variants (and every adapter's default).
    pub const DEFAULT: StreamVariant = StreamVariant {
        threads: 256,
        unroll: 4,
        words: 16,
    };

    /// The variant `stream` runs over `plan`'s buffers here: the tuning's, else the
    /// default.
    pub fn choose(
        tuning: &Tuning,
        stream: Stream,
        plan: &BandwidthPlan,
        adapter: &AdapterReport,
    ) -> Choice<StreamVariant> {
        tuning.choose(
            (stream.name(), "u32", &plan.shape(), 1, None),
            |name| StreamVariant::parse(name).ok(),
            || stream_default(adapter),
        )
    }

    /// `t256_u4_w16`.
    pub fn name(&self) -> String {
        format!("t{}_u{}_w{}", self.threads, self.unroll, self.words)
    }

    /// Parses [`StreamVariant::name`].
    pub fn parse(s: &str) -> std::result::Result<StreamVariant, String> {
        let bad = || format!("`{s}` is not a streaming variant (expected e.g. t256_u4_w16)");
        let mut parts = s.split('_');
        let mut num = |prefix: &str| -> std::result::Result<u32, String> {
            parts
                .next()
                .and_then(|p| p.strip_prefix(prefix))
                .and_then(|n| n.parse().ok())
                .ok_or_else(bad)
        };
        let v = StreamVariant {
            threads: num("t")?,
            unroll: num("u")?,
            words: num("w")?,
        };
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(v)
    }

    /// Why it cannot run here (None: it can).
    pub fn check(&self, caps: &VariantCaps) -> Option<String> {
        if !matches!(self.threads, 64 | 128 | 256) || self.threads > caps.max_threads {
            return Some(format!("{} threads", self.threads));
        }
        if !matches!(self.unroll, 1 | 2 | 4 | 8) {
            return Some(format!("{} loads in flight (1, 2, 4, 8)", self.unroll));
        }
        if !matches!(self.words, 4 | 8 | 16 | 32 | 64) || self.words < self.unroll {
            return Some(format!(
                "{} words a thread (4..64, at least the loads in flight)",
                self.words
            ));
        }
        None
    }

    /// One step away in each parameter.
    pub fn neighbours(&self) -> Vec<StreamVariant> {
        let mut out = Vec::new();
        for threads in [self.threads / 2, self.threads * 2] {
            out.push(StreamVariant { threads, ..*self });
        }
        for unroll in [self.unroll / 2, self.unroll * 2] {
            out.push(StreamVariant { unroll, ..*self });
        }
        for words in [self.words / 2, self.words * 2] {
            out.push(StreamVariant { words, ..*self });
        }
        out
    }
}

/// The streaming kernels' default, on every adapter: the layout the harness had
/// before variants.
pub fn stream_default(adapter: &AdapterReport) -> (StreamVariant, String) {
    let note = match Family::of(adapter) {
        Family::Nvidia => {
            "default: 256 threads, 4 loads in flight, 16 words a thread (on an H200 it read 4,108 GB/s, 94% of PyTorch's own read, 2026-12-04)"
        }
        _ => {
            "default: 256 threads, 4 loads in flight, 16 words a thread (the layout CI's figures were measured with)"
        }
    };
    (StreamVariant::DEFAULT, note.into())
}

impl std::fmt::Display for StreamVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// The kernel id of a streaming kernel over `plan`'s buffers.
pub(crate) fn id(name: &str, plan: &BandwidthPlan) -> KernelId {
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

/// The streaming kernels' buffers, filled once: each variant only rebinds them.
#[derive(Debug)]
pub struct StreamBench {
    /// The sizes.
    pub plan: BandwidthPlan,
    bufs: Vec<Slice>,
    params: wgpu::Buffer,
    key0: u32,
}

impl StreamBench {
    /// Allocates and fills the buffers.
    pub async fn new(ctx: &GpuContext, plan: BandwidthPlan, seed: u64) -> Result<StreamBench> {
        let read_id = id("bandwidth_read", &plan);
        let filler = Filler::new(ctx, &read_id).await?;
        let bufs = ctx
            .scoped(&read_id, plan.working_set(), || {
                // Copies go 2j -> 2j + 1: each destination outside its source's buffer.
                let mut bufs: Vec<Slice> = Vec::new();
                for i in 0..plan.buffers as usize {
                    let apart = (i % 2 == 1).then(|| &bufs[i - 1]);
                    let s = ctx.operand_apart(
                        &format!("bandwidth buffer {i}"),
                        plan.buffer_bytes,
                        apart,
                    );
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
        let params = ctx.uniform(
            "bandwidth params",
            &Params {
                vec4s: plan.vec4s() as u32,
                _pad: [0; 3],
            },
        );
        Ok(StreamBench {
            plan,
            bufs,
            params,
            key0: stream_key(seed, 0),
        })
    }

    /// Times one kernel in one variant: the per-call timing, and its verification
    /// (the read's checksum of buffer 0, the copy's buffer 1 against buffer 0).
    pub async fn time(
        &self,
        ctx: &GpuContext,
        clock: &dyn Clock,
        stream: Stream,
        v: StreamVariant,
        timing: &TimingOptions,
    ) -> Result<(Measurement, VerificationReport, Option<HarnessError>)> {
        let kid = id(stream.name(), &self.plan);
        if let Some(reason) = v.check(&VariantCaps::of(ctx)) {
            return Err(HarnessError::InvalidShape {
                kernel: kid,
                reason: format!("variant {v}: {reason}"),
            });
        }
        let reduction = Reduction::of(ctx);
        let (file, flags) = match stream {
            Stream::Read => (
                shader::BANDWIDTH_READ,
                Defines::new().flag("SUBGROUPS", reduction == Reduction::Subgroup),
            ),
            Stream::Copy => (shader::BANDWIDTH_COPY, Defines::new()),
        };
        let kernel: Arc<Kernel> = ctx
            .kernel(
                &kid,
                file,
                &flags.value("WG_SIZE", v.threads).value("UNROLL", v.unroll),
                &[Binding::Uniform, Binding::Read, Binding::ReadWrite],
            )
            .await?;
        let groups = self.plan.groups(&v);
        let words = self.plan.buffer_bytes / 4;
        let partial = ctx.storage("bandwidth partial sums", u64::from(groups) * 4);
        let params = &self.params;
        let groups_of = |bufs: Vec<wgpu::BindGroup>| ReadWorkload {
            kernel: &kernel,
            groups: bufs,
            grid: ctx.grid(groups),
        };
        let w = match stream {
            // Read: one buffer per call, rotating.
            Stream::Read => groups_of(
                self.bufs
                    .iter()
                    .map(|b| {
                        ctx.bind(
                            &kernel,
                            "bandwidth read",
                            &crate::bufs![params, b, &partial],
                        )
                    })
                    .collect(),
            ),
            // Copy: pairs (2j -> 2j+1), so consecutive calls touch disjoint buffers.
            Stream::Copy => groups_of(
                self.bufs
                    .chunks_exact(2)
                    .map(|p| {
                        ctx.bind(
                            &kernel,
                            "bandwidth copy",
                            &crate::bufs![params, &p[0], &p[1]],
                        )
                    })
                    .collect(),
            ),
        };
        run_calls(ctx, &kid, &w, 0, 1).await?;
        let (ver, err) = match stream {
            Stream::Read => verify_read(ctx, &kid, &partial, groups, words, self.key0).await?,
            Stream::Copy => verify_copy(ctx, &kid, &self.bufs[1], words, self.key0).await?,
        };
        let m = measure(ctx, clock, &kid, &w, timing).await?;
        Ok((m, ver, err))
    }
}

/// Measures the read and copy bandwidth, each kernel in the variant the run's tuning
/// chooses.
pub async fn run(
    ctx: &GpuContext,
    clock: &dyn Clock,
    plan: BandwidthPlan,
    seed: u64,
    timing: &TimingOptions,
) -> Result<(BandwidthReport, TimingMethod, Option<HarnessError>)> {
    let bench = StreamBench::new(ctx, plan, seed).await?;
    let adapter = ctx.adapter_report();
    let read_v = StreamVariant::choose(ctx.tuning(), Stream::Read, &plan, &adapter);
    let copy_v = StreamVariant::choose(ctx.tuning(), Stream::Copy, &plan, &adapter);
    let (read_m, read_ver, read_err) = bench
        .time(ctx, clock, Stream::Read, read_v.variant, timing)
        .await?;
    let (copy_m, copy_ver, copy_err) = bench
        .time(ctx, clock, Stream::Copy, copy_v.variant, timing)
        .await?;
    let read_t = read_m.summary(&id("bandwidth_read", &plan))?;
    let copy_t = copy_m.summary(&id("bandwidth_copy", &plan))?;
    let report = BandwidthReport {
        read_gbps: plan.buffer_bytes as f64 / (read_t.median_us * 1e-6) / 1e9,
        copy_gbps: 2.0 * plan.buffer_bytes as f64 / (copy_t.median_us * 1e-6) / 1e9,
        working_set_bytes: plan.working_set(),
        buffer_bytes: plan.buffer_bytes,
        buffers: plan.buffers,
        read: read_t,
        copy: copy_t,
        read_samples_us: read_m.samples.clone(),
        read_verified: read_ver.failure.is_none(),
        copy_verified: copy_ver.failure.is_none(),
        read_reduction: Some(Reduction::of(ctx).as_str().into()),
        read_variant: Some(read_v.report),
        copy_variant: Some(copy_v.report),
    };
    Ok((report, read_m.method, read_err.or(copy_err)))
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
