//! GEMV (`y = W x`, decode) and skinny matmul (`Y = W X` for a batch of 2..64 columns):
//! `shaders/gemv_{f32,f16,bf16,q8_0,q6_k,q5_1,q5_0,q5_k,q4_1,q4_0,q4_k}.wgsl`.
//!
//! `W` is `[rows, cols]` row-major (outputs x inputs), `x` is `[batch, cols]` f32, `y`
//! is `[batch, rows]` f32. Matrices larger than one storage binding are split into
//! chunks of whole rows, one binding and one dispatch each.
//!
//! Timed as a decode step runs them: dispatches back to back in one compute pass
//! ([`crate::timing::TimingOptions::back_to_back`]), each on the next rotation slot's weights and
//! output, so a
//! sample holds many dispatches and the launch, ramp-up and drain of each is what it
//! costs there, not the two timestamps around one dispatch. The report fits that
//! fixed cost over the shapes (`dispatch_cost`).

use std::sync::Arc;

use crate::context::GpuContext;
use crate::data;
use crate::error::{HarnessError, Result};
use crate::kernels::fill::Filler;
use crate::kernels::{Check, sample_indices};
use crate::timing::Workload;

pub mod defaults;
mod input;
mod kernel;
mod matrix;
mod spec;
mod variant;

pub use input::{GemvInput, XArg, quantize_blocks};
pub use kernel::{GemvKernel, encode_gemv};
pub use matrix::{Chunk, GpuMatrix, HostMatrix, WeightSource};
pub use spec::{GemvSpec, MAX_BATCH};
pub use variant::{GemvVariant, Order, Team, XPath};

/// A GEMV benchmark: `rotation` matrices with the same shape and different data,
/// one shared x and y.
#[derive(Debug)]
pub struct GemvBench {
    /// The problem.
    pub spec: GemvSpec,
    /// The kernel.
    pub kernel: GemvKernel,
    /// Matrices rotated through.
    pub matrices: Vec<GpuMatrix>,
    /// Input, `[batch, cols]` (and its int8 form for XQ8 kernels, quantized once
    /// before anything is timed, as a decode step quantizes each activation once).
    pub input: GemvInput,
    /// Output, `[batch, rows]`, one per rotation slot (back-to-back dispatches write
    /// different buffers, as a decode step's do).
    pub ys: Vec<wgpu::Buffer>,
    x_key: u32,
    groups: Vec<Vec<(wgpu::BindGroup, (u32, u32))>>,
}

impl Workload for GemvBench {
    fn rotation(&self) -> usize {
        self.matrices.len()
    }
    fn encode(&self, pass: &mut wgpu::ComputePass<'_>, iter: usize) {
        encode_gemv(pass, &self.kernel, &self.groups[iter % self.groups.len()]);
    }
}

/// Stream keys of the generated data of rotation slot `slot`.
pub fn weight_source(seed: u64, slot: u32) -> WeightSource {
    WeightSource::Generated {
        weights: data::key(seed, 1000 + 2 * slot),
        scales: data::key(seed, 1001 + 2 * slot),
    }
}

impl GemvBench {
    /// Allocates `rotation` generated matrices (or one host matrix) and the vectors,
    /// for the kernel the run's tuning chooses.
    pub async fn new(
        ctx: &GpuContext,
        spec: GemvSpec,
        seed: u64,
        rotation: u32,
        host: Option<Arc<HostMatrix>>,
    ) -> Result<Self> {
        spec.validate()?;
        let kernel = GemvKernel::new(ctx, &spec).await?;
        Self::with_kernel(ctx, spec, seed, rotation, host, kernel).await
    }

    /// The same with a given kernel.
    pub async fn with_kernel(
        ctx: &GpuContext,
        spec: GemvSpec,
        seed: u64,
        rotation: u32,
        host: Option<Arc<HostMatrix>>,
        kernel: GemvKernel,
    ) -> Result<Self> {
        spec.validate()?;
        let id = spec.id();
        let filler = Filler::new(ctx, &id).await?;
        let mut matrices = Vec::new();
        match host {
            Some(h) => {
                matrices.push(GpuMatrix::new(ctx, spec, WeightSource::Host(h), &filler).await?)
            }
            None => {
                for slot in 0..rotation.max(1) {
                    matrices
                        .push(GpuMatrix::new(ctx, spec, weight_source(seed, slot), &filler).await?);
                }
            }
        }
        let x_key = data::key(seed, 999);
        let x_len = u64::from(spec.batch) * u64::from(spec.cols);
        let x = ctx.storage_init(
            &format!("{id} x"),
            bytemuck::cast_slice(&data::f32_vec(x_key, x_len as usize)),
        );
        let ys = (0..matrices.len())
            .map(|slot| {
                ctx.storage(
                    &format!("{id} y{slot}"),
                    4 * u64::from(spec.batch) * u64::from(spec.rows),
                )
            })
            .collect::<Vec<_>>();
        let input = GemvInput::new(ctx, &id, x, spec.batch, spec.cols, kernel.q8()).await?;
        input.quantize_once(ctx, &id).await?;
        let groups = matrices
            .iter()
            .zip(&ys)
            .map(|(m, y)| m.bind(ctx, &kernel, input.arg(), y))
            .collect();
        ctx.check_errors(&id)?;
        Ok(Self {
            spec,
            kernel,
            matrices,
            input,
            ys,
            x_key,
            groups,
        })
    }

    /// Runs the same matrices with another kernel (another variant).
    pub async fn set_kernel(&mut self, ctx: &GpuContext, kernel: GemvKernel) -> Result<()> {
        let id = self.spec.id();
        if kernel.q8() != self.input.quantized.is_some() {
            self.input = GemvInput::new(
                ctx,
                &id,
                self.input.x.clone(),
                self.spec.batch,
                self.spec.cols,
                kernel.q8(),
            )
            .await?;
            self.input.quantize_once(ctx, &id).await?;
        }
        self.groups = self
            .matrices
            .iter()
            .zip(&self.ys)
            .map(|(m, y)| m.bind(ctx, &kernel, self.input.arg(), y))
            .collect();
        self.kernel = kernel;
        ctx.check_errors(&id)
    }

    /// The x the kernel saw, `[batch, cols]`: the generated f32 x, or for XQ8 kernels
    /// the GPU's own int8 blocks times their scales (read back, after the GPU's
    /// quantization is checked against the host's: the same scale to 2^-20, each int8
    /// within one of round(x / d), and the stored sums exact).
    async fn x_seen(&self, ctx: &GpuContext) -> Result<(Vec<f32>, Option<Check>)> {
        let b = u64::from(self.spec.batch);
        let cols = u64::from(self.spec.cols);
        let x = data::f32_vec(self.x_key, (b * cols) as usize);
        let Some(q) = &self.input.quantized else {
            return Ok((x, None));
        };
        let mut check = Check::new(&self.spec.id(), b * cols);
        let halves = b * cols / 16;
        let words = ctx.read_u32(&q.xq, 0, halves * 4).await?;
        let meta = ctx.read_f32(&q.xm, 0, halves * 2).await?;
        let host = quantize_blocks(&x);
        let mut seen = vec![0f32; x.len()];
        for (h, chunk) in words.chunks_exact(4).enumerate() {
            let (d, sum) = (meta[2 * h], meta[2 * h + 1]);
            let (hd, hq) = &host[h / 2];
            let mut total = 0i32;
            for (j, w) in chunk.iter().enumerate() {
                for byte in 0..4 {
                    let k = 16 * h + 4 * j + byte;
                    let qv = (w >> (8 * byte)) as u8 as i8;
                    total += i32::from(qv);
                    seen[k] = f32::from(qv) * d;
                    let off = (i32::from(qv) - i32::from(hq[k % 32])).abs();
                    check.compare(
                        || format!("x int8 [{k}]"),
                        f64::from(off.min(2) as u8),
                        0.0,
                        1.0,
                    );
                }
            }
            check.compare(
                || format!("x scale [block {}]", h / 2),
                f64::from(d),
                f64::from(*hd),
                f64::from(*hd) * 2f64.powi(-20) + 1e-30,
            );
            check.compare_exact(
                || format!("x sum [half-block {h}]"),
                u64::from(sum as i32 as u32),
                u64::from(total as u32),
            );
        }
        Ok((seen, Some(check)))
    }

    /// Runs rotation slot `slot` once and compares `y` with the CPU reference (f64 dot
    /// products of the dequantized rows with the x the kernel saw). All rows when
    /// `rows * cols * batch` is at most `full_macs`, else a sample including every
    /// chunk boundary.
    ///
    /// Tolerance per output: `(v + n + 64) * 2^-23 * sum_k |w_k x_k|`, where v is the
    /// weights per unit and n the units one thread sums in sequence (a row's units
    /// over the threads that stride it): the f32 rounding bound of the kernel's
    /// summation order, with headroom for any subgroup reduction order. (XQ8: the
    /// integer sums are exact, each unit adds at most 3 roundings. The f16 path adds
    /// `(v + 3) * 2^-11 * sum_k |c_k x_k|`, c_k the weight less its block's centre
    /// ([`GpuMatrix::centred_row`]): each unit's sum in f16.)
    pub async fn verify(
        &self,
        ctx: &GpuContext,
        slot: usize,
        full_macs: u64,
    ) -> Result<(
        tokenscope_kernel_report::VerificationReport,
        Option<HarnessError>,
    )> {
        let id = self.spec.id();
        crate::timing::run_calls(ctx, &id, self, slot, 1).await?;
        let b = u64::from(self.spec.batch);
        let n = u64::from(self.spec.rows);
        let cols = self.spec.cols as usize;
        let y = ctx
            .read_f32(&self.ys[slot % self.ys.len()], 0, b * n)
            .await?;
        let (x, x_check) = self.x_seen(ctx).await?;
        if let Some(c) = x_check {
            let (report, error) = c.finish();
            if error.is_some() {
                return Ok((report, error));
            }
        }
        let mut check = Check::new(&id, b * n);
        let m = &self.matrices[slot % self.matrices.len()];
        let per_row = u64::from(self.spec.cols) * b;
        let rows = sample_indices(n, (full_macs / per_row.max(1)).max(1), &m.boundaries());
        let steps = u64::from(self.spec.cols / self.spec.vec())
            .div_ceil(u64::from(self.kernel.lanes_per_row.max(1)));
        let rel = (u64::from(self.spec.vec()) + steps + 64) as f64 * f64::from(f32::EPSILON);
        // The f16 path: each unit's products of centred weights and x (rounded to
        // f16 too) summed in f16: (v + 3) roundings of 2^-11 relative to
        // sum |w_c x| over the unit, w_c the weight less its block's centre.
        let f16_rel = (self.kernel.choice.variant.x == XPath::F16)
            .then(|| (u64::from(self.spec.vec()) + 3) as f64 * 2f64.powi(-11));
        let mut w = vec![0f32; cols];
        let mut wc = vec![0f32; if f16_rel.is_some() { cols } else { 0 }];
        for &r in &rows {
            m.row(r, &mut w);
            if f16_rel.is_some() {
                m.centred_row(r, &mut wc);
            }
            for bi in 0..b as usize {
                let xs = &x[bi * cols..(bi + 1) * cols];
                let (dot, abs) = w.iter().zip(xs).fold((0f64, 0f64), |(d, a), (&wk, &xk)| {
                    let t = f64::from(wk) * f64::from(xk);
                    (d + t, a + t.abs())
                });
                let abs_c: f64 = wc
                    .iter()
                    .zip(xs)
                    .map(|(&wk, &xk)| (f64::from(wk) * f64::from(xk)).abs())
                    .sum();
                let gpu = f64::from(y[bi * n as usize + r as usize]);
                check.compare(
                    || format!("y[batch {bi}, row {r}]"),
                    gpu,
                    dot,
                    rel * abs + f16_rel.unwrap_or(0.0) * abs_c + 1e-30,
                );
            }
        }
        Ok(check.finish())
    }
}
