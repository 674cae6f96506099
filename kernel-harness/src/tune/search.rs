//! The search behind `tokenscope kernels --tune`: per kernel problem (kernel, format,
//! shape, batch), a bounded walk through the variant space on the adapter at hand.
//!
//! 1. Seeds: the default variant and a few structurally different ones (subgroup and
//!    workgroup teams, few and many loads in flight, both x paths), each compiled,
//!    verified against the CPU reference on a sample of outputs and timed briefly.
//! 2. Hill climbing from the fastest: every neighbour that can run (one parameter
//!    doubled or halved, the team or the x path switched) is timed; the walk moves
//!    while a neighbour is faster by more than [`IMPROVEMENT`], and stops at a local
//!    best or when the problem's share of the budget is spent. Variants that cannot
//!    run, or give a wrong answer, are never chosen (the latter are listed).
//! 3. A final pass times the two fastest, the default and the slowest again,
//!    interleaved over [`FINAL_ROUNDS`] rounds (a round times each once, in an order
//!    that rotates), so that every figure the file keeps (best, default, worst) comes
//!    from the same pass: the fastest there wins, and the spread between a variant's
//!    rounds is kept beside the figures. A walk that timed only the default keeps its
//!    brief figure.
//!
//! The data of a problem (its matrices or KV caches, rotated beyond the cache as in a
//! run) is made once; each variant only rebinds it. The bandwidth read and copy share
//! their buffers (gigabytes on a GPU: filled once).

use tokenscope_kernel_report::{ProblemKey, TUNING_SCHEMA, TuningEntry, TuningFile};

pub use super::walk::{FINAL_ROUNDS, IMPROVEMENT, Pass, Searchable, final_round};
use super::walk::{entry, walk};
use crate::clock::Clock;
use crate::context::GpuContext;
use crate::error::{HarnessError, Result};
use crate::kernels::attention::attention_default;
use crate::kernels::attention::{
    AttentionBench, AttentionKernels, AttentionSpec, AttentionVariant,
};
use crate::kernels::bandwidth::stream_default;
use crate::kernels::bandwidth::{BandwidthPlan, Stream, StreamBench, StreamVariant};
use crate::kernels::gemv::defaults::gemv_default;
use crate::kernels::gemv::{GemvBench, GemvKernel, GemvSpec, GemvVariant, Team, XPath};
use crate::kernels::{VariantCaps, rotation_for};
use crate::timing::{TimingOptions, measure};
use crate::tune::Choice;

impl Searchable for GemvVariant {
    type Spec = GemvSpec;
    fn neighbours(&self) -> Vec<Self> {
        GemvVariant::neighbours(self)
    }
    fn check(&self, spec: &GemvSpec, caps: &VariantCaps) -> Option<String> {
        GemvVariant::check(self, spec, caps)
    }
}

impl Searchable for StreamVariant {
    type Spec = BandwidthPlan;
    fn neighbours(&self) -> Vec<Self> {
        StreamVariant::neighbours(self)
    }
    fn check(&self, _plan: &BandwidthPlan, caps: &VariantCaps) -> Option<String> {
        StreamVariant::check(self, caps)
    }
}

impl Searchable for AttentionVariant {
    type Spec = AttentionSpec;
    fn neighbours(&self) -> Vec<Self> {
        AttentionVariant::neighbours(self)
    }
    fn check(&self, spec: &AttentionSpec, caps: &VariantCaps) -> Option<String> {
        AttentionVariant::check(self, spec, caps)
    }
}

/// A problem to tune.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Problem {
    /// GEMV or skinny matmul.
    Gemv(GemvSpec),
    /// Decode attention.
    Attention(AttentionSpec),
    /// The bandwidth ceiling's read or copy kernel.
    Stream(Stream, BandwidthPlan),
}

impl Problem {
    /// The key a run looks the problem up by (as its entry would name it).
    pub fn key(&self) -> ProblemKey {
        let (kernel, dtype, shape, batch, kv_heads) = match self {
            Problem::Gemv(s) => (
                s.name(),
                s.dtype.as_str(),
                vec![u64::from(s.rows), u64::from(s.cols)],
                s.batch,
                None,
            ),
            Problem::Attention(s) => (
                s.name(),
                s.kv_dtype.as_str(),
                s.shape(),
                1,
                Some(s.kv_heads),
            ),
            Problem::Stream(k, p) => (k.name(), "u32", p.shape(), 1, None),
        };
        ProblemKey {
            kernel: kernel.into(),
            dtype: dtype.into(),
            shape,
            batch,
            kv_heads,
        }
    }

    /// `gemv f16 [14336, 4096] batch 1`.
    pub fn label(&self) -> String {
        match self {
            Problem::Gemv(s) => format!(
                "{} {} [{}, {}] batch {}",
                s.name(),
                s.dtype,
                s.rows,
                s.cols,
                s.batch
            ),
            Problem::Attention(s) => format!(
                "{} {} heads {}/{} dim {} context {}",
                s.name(),
                s.kv_dtype,
                s.heads,
                s.kv_heads,
                s.head_dim,
                s.context
            ),
            Problem::Stream(k, p) => {
                format!("{} {} x {} MiB", k.name(), p.buffers, p.buffer_bytes >> 20)
            }
        }
    }
}

/// How to search.
#[derive(Debug, Clone)]
pub struct SearchOptions {
    /// Time for the whole search, milliseconds (each problem gets an equal share of
    /// what is left, and always its seeds).
    pub budget_ms: f64,
    /// Seed of the generated data.
    pub seed: u64,
    /// Brief timing of each candidate.
    pub quick: TimingOptions,
    /// Timing of the final pass, all rounds together (each round gets its share of
    /// the samples and the time).
    pub full: TimingOptions,
    /// Last-level cache to defeat (rotation as in a run).
    pub cache_bytes: u64,
    /// Most copies rotated.
    pub max_rotation: u64,
    /// Byte budget of the rotated copies.
    pub rotation_budget_bytes: u64,
    /// Multiply-adds each candidate's verification may cost (a sample of rows).
    pub verify_macs: u64,
    /// Tool version written into the file.
    pub tool_version: String,
    /// When the search runs, seconds since the Unix epoch (the caller's clock).
    pub created_unix_s: u64,
}

impl SearchOptions {
    /// Defaults for a GPU: a few minutes in all.
    pub fn new(budget_ms: f64, cache_bytes: u64) -> SearchOptions {
        SearchOptions {
            budget_ms,
            seed: 0x70ce_5c0e,
            quick: TimingOptions {
                warmup: 2,
                samples: 7,
                budget_ms: 400.0,
                min_sample_ms: 1.0,
                min_timestamp_sample_ms: 0.0,
                detect_timestamp_step: false,
            },
            full: TimingOptions::default(),
            cache_bytes,
            max_rotation: 64,
            rotation_budget_bytes: 1 << 30,
            verify_macs: 1 << 22,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            created_unix_s: 0,
        }
    }
}

/// Progress of a search.
pub trait TuneProgress {
    /// A problem starts (index, count, label).
    fn start(&mut self, _index: usize, _count: usize, _label: &str) {}
    /// A problem ended; `line` summarises it.
    fn done(&mut self, _label: &str, _line: &str) {}
    /// Whether to stop (the file so far is returned).
    fn cancelled(&self) -> bool {
        false
    }
}

/// Progress that ignores everything.
#[derive(Debug, Default)]
pub struct Quiet;
impl TuneProgress for Quiet {}

/// Structurally different starting points for a GEMV: the default first.
fn gemv_seeds(spec: &GemvSpec, default: GemvVariant, caps: &VariantCaps) -> Vec<GemvVariant> {
    let bt = spec.batch.next_power_of_two().min(8);
    let quantized = spec.dtype.block_elems() > 1;
    // The f16 path seeds only where it can run (check() below drops it elsewhere).
    let xs: &[XPath] = if quantized {
        &[XPath::Q8, XPath::F32, XPath::F16]
    } else {
        &[XPath::F32]
    };
    let mut seeds = vec![default];
    for &x in xs {
        for (team, threads, rows, unroll) in [
            (Team::Subgroup, 128, 1, 4),
            (Team::Subgroup, 256, 2, 2),
            (Team::Subgroup, 64, 4, 1),
            (Team::Workgroup, 256, 1, 2),
            (Team::Workgroup, 128, 4, 1),
        ] {
            let v = GemvVariant {
                team,
                threads,
                rows,
                unroll,
                batch_tile: bt,
                x,
                unrolled: false,
            };
            // Too many columns a pass for f32 x: fewer.
            let v = if v.check(spec, caps).is_some() {
                GemvVariant {
                    batch_tile: 2.min(bt),
                    ..v
                }
            } else {
                v
            };
            if v.check(spec, caps).is_none() && !seeds.contains(&v) {
                seeds.push(v);
            }
        }
    }
    seeds
}

/// Tunes one GEMV problem.
async fn tune_gemv(
    ctx: &GpuContext,
    clock: &dyn Clock,
    spec: GemvSpec,
    opts: &SearchOptions,
    deadline_ms: f64,
) -> Result<Option<TuningEntry>> {
    let caps = VariantCaps::of(ctx);
    let (default, _) = gemv_default(&spec, &caps, &ctx.adapter_report());
    let rotation = rotation_for(
        spec.weight_bytes(),
        opts.cache_bytes,
        opts.max_rotation,
        opts.rotation_budget_bytes,
    );
    let kernel = GemvKernel::with_variant(ctx, &spec, Choice::given(default)).await?;
    let mut bench = GemvBench::with_kernel(ctx, spec, opts.seed, rotation, None, kernel).await?;
    let id = spec.id();
    let bench_ref = &mut bench;
    let round = final_round(&opts.full);
    let eval = async |v: GemvVariant, pass: Pass| -> Result<Option<f64>> {
        if v.check(&spec, &caps).is_some() {
            return Err(HarnessError::InvalidShape {
                kernel: id.clone(),
                reason: format!("variant {v} cannot run here"),
            });
        }
        let kernel = GemvKernel::with_variant(ctx, &spec, Choice::given(v)).await?;
        bench_ref.set_kernel(ctx, kernel).await?;
        if pass == Pass::Brief {
            let (_, err) = bench_ref.verify(ctx, 0, opts.verify_macs).await?;
            if err.is_some() {
                return Ok(None);
            }
        }
        // Timed as a run times them: dispatches back to back.
        let timing = if pass == Pass::Final {
            round
        } else {
            opts.quick
        }
        .back_to_back();
        let m = measure(ctx, clock, &id, &*bench_ref, &timing).await?;
        Ok(Some(m.summary(&id)?.median_us))
    };
    let seeds = gemv_seeds(&spec, default, &caps);
    let w = walk(seeds, &spec, &caps, eval, clock, deadline_ms).await;
    Ok(entry(
        w,
        (
            spec.name(),
            spec.dtype.as_str(),
            vec![u64::from(spec.rows), u64::from(spec.cols)],
            spec.batch,
            None,
        ),
        default,
    ))
}

/// Tunes the read or the copy kernel of the bandwidth ceiling.
async fn tune_stream(
    ctx: &GpuContext,
    clock: &dyn Clock,
    stream: Stream,
    plan: BandwidthPlan,
    opts: &SearchOptions,
    deadline_ms: f64,
    buffers: &mut Option<StreamBench>,
) -> Result<Option<TuningEntry>> {
    let caps = VariantCaps::of(ctx);
    let (default, _) = stream_default(&ctx.adapter_report());
    let bench = match buffers.take() {
        Some(b) if b.plan == plan => buffers.insert(b),
        _ => buffers.insert(StreamBench::new(ctx, plan, opts.seed).await?),
    };
    let bench = &*bench;
    let round = final_round(&opts.full);
    let eval = async |v: StreamVariant, pass: Pass| -> Result<Option<f64>> {
        let timing = if pass == Pass::Final {
            &round
        } else {
            &opts.quick
        };
        let (m, _, err) = bench.time(ctx, clock, stream, v, timing).await?;
        if err.is_some() {
            return Ok(None);
        }
        let kid = crate::kernels::bandwidth::id(stream.name(), &plan);
        Ok(Some(m.summary(&kid)?.median_us))
    };
    let mut seeds = vec![default];
    for (threads, unroll, words) in [(128, 8, 16), (256, 8, 64), (256, 2, 4), (64, 4, 16)] {
        let v = StreamVariant {
            threads,
            unroll,
            words,
        };
        if v.check(&caps).is_none() && !seeds.contains(&v) {
            seeds.push(v);
        }
    }
    let w = walk(seeds, &plan, &caps, eval, clock, deadline_ms).await;
    Ok(entry(
        w,
        (stream.name(), "u32", plan.shape(), 1, None),
        default,
    ))
}

/// Tunes one attention problem.
async fn tune_attention(
    ctx: &GpuContext,
    clock: &dyn Clock,
    spec: AttentionSpec,
    opts: &SearchOptions,
    deadline_ms: f64,
) -> Result<Option<TuningEntry>> {
    let caps = VariantCaps::of(ctx);
    let (default, _) = attention_default(&spec, &caps, &ctx.adapter_report());
    let rotation = rotation_for(
        spec.kv_bytes(),
        opts.cache_bytes,
        opts.max_rotation,
        opts.rotation_budget_bytes,
    );
    let mut bench = AttentionBench::new(ctx, spec, opts.seed, rotation).await?;
    let id = spec.id();
    let bench_ref = &mut bench;
    let round = final_round(&opts.full);
    let eval = async |v: AttentionVariant, pass: Pass| -> Result<Option<f64>> {
        let kernels = AttentionKernels::with_variant(ctx, &spec, Choice::given(v)).await?;
        bench_ref.set_kernels(ctx, kernels);
        if pass == Pass::Brief {
            // One KV head's outputs: the variant's layout is the same for every head.
            let (_, err) = bench_ref.verify_heads(ctx, 0, 1).await?;
            if err.is_some() {
                return Ok(None);
            }
        }
        let timing = if pass == Pass::Final {
            &round
        } else {
            &opts.quick
        };
        let m = measure(ctx, clock, &id, &*bench_ref, timing).await?;
        Ok(Some(m.summary(&id)?.median_us))
    };
    let mut seeds = vec![default];
    for (chunk, threads, vec, kv_together) in [
        (64, 128, 8, true),
        (128, 256, 8, false),
        (256, 128, 4, true),
        (32, 64, 8, false),
    ] {
        let v = AttentionVariant {
            chunk: if spec.split { chunk } else { 0 },
            threads,
            vec,
            kv_together,
        };
        if v.check(&spec, &caps).is_none() && !seeds.contains(&v) {
            seeds.push(v);
        }
    }
    let w = walk(seeds, &spec, &caps, eval, clock, deadline_ms).await;
    Ok(entry(
        w,
        (
            spec.name(),
            spec.kv_dtype.as_str(),
            spec.shape(),
            1,
            Some(spec.kv_heads),
        ),
        default,
    ))
}

/// Searches every problem within the budget and returns the tuning file for this
/// adapter. A problem that cannot run here (too large, a missing feature) is left
/// out, with its reason in `progress`.
pub async fn tune(
    ctx: &GpuContext,
    clock: &dyn Clock,
    problems: &[Problem],
    opts: &SearchOptions,
    progress: &mut dyn TuneProgress,
) -> Result<TuningFile> {
    let start = clock.now_ms();
    let end = start + opts.budget_ms;
    let mut entries = Vec::new();
    let mut unsearched = Vec::new();
    let mut unsearched_problems = Vec::new();
    // The bandwidth buffers, kept from the read's problem to the copy's.
    let mut stream_buffers: Option<StreamBench> = None;
    for (i, p) in problems.iter().enumerate() {
        if !matches!(p, Problem::Stream(..)) {
            stream_buffers = None;
        }
        if progress.cancelled() {
            break;
        }
        let label = p.label();
        // The budget is a budget: once it is spent, the rest keep their defaults.
        if i > 0 && clock.now_ms() > end {
            unsearched.push(label);
            unsearched_problems.push(p.key());
            continue;
        }
        progress.start(i, problems.len(), &label);
        let now = clock.now_ms();
        let share = (end - now).max(0.0) / (problems.len() - i) as f64;
        let deadline = now + share;
        let found = match p {
            Problem::Gemv(s) => tune_gemv(ctx, clock, *s, opts, deadline).await,
            Problem::Attention(s) => tune_attention(ctx, clock, *s, opts, deadline).await,
            Problem::Stream(k, p) => {
                tune_stream(ctx, clock, *k, *p, opts, deadline, &mut stream_buffers).await
            }
        };
        // Anything the problem left in wgpu's error sink is its own.
        let _ = ctx.take_uncaptured_errors();
        match found {
            Ok(Some(e)) => {
                let line = format!(
                    "{} {:.1} us (default {} {}, slowest {} {:.1} us, {} tried; {}{})",
                    e.best,
                    e.best_us,
                    e.default,
                    e.default_us
                        .map_or_else(|| "not timed".to_string(), |t| format!("{t:.1} us")),
                    e.worst,
                    e.worst_us,
                    e.tried.len(),
                    match e.spread {
                        Some(s) =>
                            format!("{} interleaved rounds, spread {:.1}%", e.rounds, 100.0 * s),
                        None => "one variant, brief timing".into(),
                    },
                    if e.failed.is_empty() {
                        String::new()
                    } else {
                        format!(", {} WRONG: {}", e.failed.len(), e.failed.join(" "))
                    }
                );
                progress.done(&label, &line);
                entries.push(e);
            }
            Ok(None) => progress.done(&label, "no variant ran"),
            Err(e) => progress.done(&label, &format!("skipped: {e}")),
        }
    }
    Ok(TuningFile {
        schema: TUNING_SCHEMA.into(),
        tool_version: opts.tool_version.clone(),
        adapter: ctx.adapter_report(),
        created_unix_s: opts.created_unix_s,
        budget_s: opts.budget_ms / 1e3,
        spent_s: (clock.now_ms() - start) / 1e3,
        entries,
        unsearched,
        unsearched_problems,
    })
}
