//! GEMV (`y = W x`, decode) and skinny matmul (`Y = W X` for a batch of 2..64 columns):
//! `shaders/gemv_{f32,f16,bf16,q8_0,q6_k,q5_1,q5_0,q5_k,q4_1,q4_0,q4_k}.wgsl`.
//!
//! `W` is `[rows, cols]` row-major (outputs x inputs), `x` is `[batch, cols]` f32, `y`
//! is `[batch, rows]` f32. Matrices larger than one storage binding are split into
//! chunks of whole rows, one binding and one dispatch each.

use std::sync::Arc;

use tokenscope_core::analyze::floor::Quant;

use crate::context::GpuContext;
use crate::data;
use crate::error::{HarnessError, KernelId, Result};
use crate::kernels::fill::Filler;
use crate::kernels::{Check, F16Path, Reduction, VariantCaps, sample_indices};
use crate::quant::{QK, QK_K};
use crate::shader::{self, Binding, Defines, Kernel, ShaderFile};
use crate::timing::Workload;
use crate::tune::Choice;

pub mod defaults;
mod input;
mod matrix;
mod variant;

pub use input::{GemvInput, XArg, quantize_blocks};
pub use matrix::{Chunk, GpuMatrix, HostMatrix, WeightSource};
pub use variant::{GemvVariant, Order, Team, XPath};

/// One K-quant array after the quant bytes (`quant::RepackedK`'s `qh`, `scales`, `d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KArrayKind {
    /// High bits regrouped per step.
    Qh,
    /// Packed scales.
    Scales,
    /// f16 super-block scales.
    D,
}

/// A K-quant array: what it holds and its bytes per super-block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KArray {
    pub(crate) kind: KArrayKind,
    pub(crate) bytes_per_block: u64,
}

impl KArray {
    const QH_32: KArray = KArray {
        kind: KArrayKind::Qh,
        bytes_per_block: 32,
    };
    const QH_64: KArray = KArray {
        kind: KArrayKind::Qh,
        bytes_per_block: 64,
    };
    const SCALES_12: KArray = KArray {
        kind: KArrayKind::Scales,
        bytes_per_block: 12,
    };
    const SCALES_16: KArray = KArray {
        kind: KArrayKind::Scales,
        bytes_per_block: 16,
    };
    const D_PAIR: KArray = KArray {
        kind: KArrayKind::D,
        bytes_per_block: 4,
    };
    const D_ONE: KArray = KArray {
        kind: KArrayKind::D,
        bytes_per_block: 2,
    };
}

/// Largest batch the skinny-matmul kernels take.
pub const MAX_BATCH: u32 = 64;

/// A GEMV or skinny-matmul problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemvSpec {
    /// Weight format.
    pub dtype: Quant,
    /// Output features (rows of W).
    pub rows: u32,
    /// Input features (cols of W, the reduction length).
    pub cols: u32,
    /// Columns of x (1 = GEMV).
    pub batch: u32,
}

impl GemvSpec {
    /// `gemv` for batch 1, `matmul_skinny` otherwise.
    pub fn name(&self) -> &'static str {
        if self.batch == 1 {
            "gemv"
        } else {
            "matmul_skinny"
        }
    }

    /// Identity for errors.
    pub fn id(&self) -> KernelId {
        KernelId {
            name: self.name().into(),
            dtype: self.dtype.as_str().into(),
            shape: format!("[{}, {}] batch {}", self.rows, self.cols, self.batch),
        }
    }

    /// Weights per 16-byte step of one thread (the required divisor of `cols`).
    pub fn vec(&self) -> u32 {
        match self.dtype {
            Quant::F32 => 4,
            Quant::F16 | Quant::Bf16 => 8,
            Quant::Q8_0 => 16,
            Quant::Q5_1 | Quant::Q5_0 | Quant::Q4_1 | Quant::Q4_0 => 32,
            Quant::Q4K | Quant::Q5K | Quant::Q6K => 32,
        }
    }

    fn col_multiple(&self) -> u32 {
        match self.dtype {
            Quant::F32 => 4,
            Quant::F16 | Quant::Bf16 => 8,
            Quant::Q4K | Quant::Q5K | Quant::Q6K => QK_K as u32,
            _ => self.dtype.block_elems() as u32,
        }
    }

    /// Checks the shape before any GPU work.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| {
            Err(HarnessError::InvalidShape {
                kernel: self.id(),
                reason,
            })
        };
        if self.rows == 0 || self.cols == 0 {
            return bad("rows and cols must be positive".into());
        }
        if !self.cols.is_multiple_of(self.col_multiple()) {
            return bad(format!(
                "cols = {} is not a multiple of {} ({} rows are read in 16-byte steps{})",
                self.cols,
                self.col_multiple(),
                self.dtype,
                match self.col_multiple() {
                    32 => " of whole 32-weight blocks",
                    256 => " of whole 256-weight super-blocks",
                    _ => "",
                }
            ));
        }
        if self.batch == 0 || self.batch > MAX_BATCH {
            return bad(format!(
                "batch = {} must be between 1 and {MAX_BATCH}",
                self.batch
            ));
        }
        Ok(())
    }

    /// Bytes of W as stored (GGUF block scales included).
    pub fn weight_bytes(&self) -> u64 {
        let n = u64::from(self.rows) * u64::from(self.cols);
        (n as f64 * self.dtype.bytes_per_elem()) as u64
    }

    /// Bytes one call moves: W once, x in, y out.
    pub fn bytes_moved(&self) -> u64 {
        let b = u64::from(self.batch);
        self.weight_bytes() + 4 * b * (u64::from(self.cols) + u64::from(self.rows))
    }

    /// FLOPs of one call (a multiply-add counts 2).
    pub fn flops(&self) -> u64 {
        2 * u64::from(self.rows) * u64::from(self.cols) * u64::from(self.batch)
    }

    fn main_row_bytes(&self) -> u64 {
        let c = u64::from(self.cols);
        match self.dtype {
            Quant::F32 => 4 * c,
            Quant::F16 | Quant::Bf16 => 2 * c,
            Quant::Q8_0 => c,
            Quant::Q5_1 | Quant::Q5_0 | Quant::Q4_1 | Quant::Q4_0 => c / 2,
            Quant::Q4K | Quant::Q5K | Quant::Q6K => c / 2,
        }
    }

    /// Blocks (super-blocks for the K-quants) per row.
    fn blocks_per_row(&self) -> u64 {
        match self.dtype {
            Quant::Q4K | Quant::Q5K | Quant::Q6K => u64::from(self.cols) / QK_K as u64,
            _ => u64::from(self.cols) / QK as u64,
        }
    }

    /// The K-quant arrays after the quant bytes, in binding order (empty for other
    /// formats): bytes per super-block and how generated data fills them.
    fn k_arrays(&self) -> &'static [KArray] {
        const Q4K: &[KArray] = &[KArray::SCALES_12, KArray::D_PAIR];
        const Q5K: &[KArray] = &[KArray::QH_32, KArray::SCALES_12, KArray::D_PAIR];
        const Q6K: &[KArray] = &[KArray::QH_64, KArray::SCALES_16, KArray::D_ONE];
        match self.dtype {
            Quant::Q4K => Q4K,
            Quant::Q5K => Q5K,
            Quant::Q6K => Q6K,
            _ => &[],
        }
    }

    fn shader(&self) -> ShaderFile {
        match self.dtype {
            Quant::F32 => shader::GEMV_F32,
            Quant::F16 => shader::GEMV_F16,
            Quant::Bf16 => shader::GEMV_BF16,
            Quant::Q8_0 => shader::GEMV_Q8_0,
            Quant::Q5_1 => shader::GEMV_Q5_1,
            Quant::Q5_0 => shader::GEMV_Q5_0,
            Quant::Q4_1 => shader::GEMV_Q4_1,
            Quant::Q4_0 => shader::GEMV_Q4_0,
            Quant::Q4K => shader::GEMV_Q4_K,
            Quant::Q5K => shader::GEMV_Q5_K,
            Quant::Q6K => shader::GEMV_Q6_K,
        }
    }

    /// Binding layout: params, the weight arrays, x (one f32 array, or int8 and
    /// scales), y.
    fn bindings(&self, x: XPath) -> Vec<Binding> {
        let weights = if !self.k_arrays().is_empty() {
            1 + self.k_arrays().len()
        } else {
            match self.dtype {
                Quant::F32 | Quant::F16 | Quant::Bf16 => 1,
                // Quant bytes, 5th bits, scales (d, or d and m).
                Quant::Q5_1 | Quant::Q5_0 => 3,
                _ => 2,
            }
        };
        let xs = match x {
            XPath::F32 => 1,
            XPath::Q8 => 2,
        };
        let mut b = vec![Binding::Uniform];
        b.extend(std::iter::repeat_n(Binding::Read, weights + xs));
        b.push(Binding::ReadWrite);
        b
    }

    /// Rows per binding: as many whole rows as one binding holds (an even number, so
    /// the f16 scales of a chunk start on a 32-bit word).
    pub fn rows_per_binding(&self, max_binding: u64) -> Result<u32> {
        let row = self.main_row_bytes();
        if row > max_binding {
            return Err(HarnessError::BindingTooLarge {
                kernel: self.id(),
                bytes: row,
                limit: max_binding,
            });
        }
        let mut n = (max_binding / row).min(u64::from(self.rows)) as u32;
        if n < self.rows && n > 1 {
            n -= n % 2;
        }
        Ok(n.max(1))
    }
}

/// The compiled GEMV kernel for a spec, in the variant the run chose.
#[derive(Debug, Clone)]
pub struct GemvKernel {
    /// The pipeline.
    pub kernel: Arc<Kernel>,
    /// The reduction path it was compiled for.
    pub reduction: Reduction,
    /// How it reads f16 weights (`None`: no f16 weights).
    pub f16: Option<F16Path>,
    /// Rows per workgroup.
    pub rows_per_wg: u32,
    /// The variant and why it was chosen.
    pub choice: Choice<GemvVariant>,
    /// Threads that stride one row (for the rounding bound).
    pub lanes_per_row: u32,
}

impl GemvKernel {
    /// Compiles `spec` in the variant the run's tuning chooses (the tuning file, else
    /// the default for this adapter).
    pub async fn new(ctx: &GpuContext, spec: &GemvSpec) -> Result<Self> {
        spec.validate()?;
        let choice = GemvVariant::choose(
            ctx.tuning(),
            spec,
            &VariantCaps::of(ctx),
            &ctx.adapter_report(),
        );
        Self::with_variant(ctx, spec, choice).await
    }

    /// Compiles `spec` in a given variant (an error names why it cannot run here).
    pub async fn with_variant(
        ctx: &GpuContext,
        spec: &GemvSpec,
        choice: Choice<GemvVariant>,
    ) -> Result<Self> {
        spec.validate()?;
        let caps = VariantCaps::of(ctx);
        let v = choice.variant;
        if let Some(reason) = v.check(spec, &caps) {
            return Err(HarnessError::InvalidShape {
                kernel: spec.id(),
                reason: format!("variant {v}: {reason}"),
            });
        }
        let reduction = Reduction::of(ctx);
        let acc = v.accumulators();
        let pass = acc.min(if reduction == Reduction::Subgroup {
            16
        } else {
            v.threads / 16
        });
        let defines = Defines::new()
            .flag("SUBGROUPS", reduction == Reduction::Subgroup)
            .flag("TEAM_SG", v.team == Team::Subgroup)
            .flag("XQ8", v.x == XPath::Q8)
            .flag("DEQ_ROWS", v.order(spec) == Order::DeqRows)
            .flag("ROW_BY_ROW", v.order(spec) == Order::RowByRow)
            .value("WG_SIZE", v.threads)
            .value("ROWS", v.rows)
            .value("BATCH", spec.batch)
            .value("BT", v.batch_tile)
            .value("ACC", acc)
            .value("UNROLL", v.unroll)
            .value("TEAMS", v.teams(&caps))
            .value("PASS", pass);
        let kernel = ctx
            .kernel(&spec.id(), spec.shader(), &defines, &spec.bindings(v.x))
            .await?;
        Ok(Self {
            kernel,
            reduction,
            f16: (spec.dtype == Quant::F16).then_some(F16Path::Unpack),
            rows_per_wg: v.rows_per_workgroup(&caps),
            lanes_per_row: v.lanes_per_row(&caps),
            choice,
        })
    }

    /// Whether x must be quantized before it.
    pub fn q8(&self) -> bool {
        self.choice.variant.x == XPath::Q8
    }
}

/// Records the dispatches of one GEMV (all chunks) into a pass.
pub fn encode_gemv(
    pass: &mut wgpu::ComputePass<'_>,
    k: &GemvKernel,
    groups: &[(wgpu::BindGroup, (u32, u32))],
) {
    pass.set_pipeline(&k.kernel.pipeline);
    for (bg, (x, y)) in groups {
        pass.set_bind_group(0, bg, &[]);
        pass.dispatch_workgroups(*x, *y, 1);
    }
}

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
    /// Input, `[batch, cols]` (and its int8 form for XQ8 kernels).
    pub input: GemvInput,
    /// Output, `[batch, rows]`.
    pub y: wgpu::Buffer,
    x_key: u32,
    groups: Vec<Vec<(wgpu::BindGroup, (u32, u32))>>,
}

impl Workload for GemvBench {
    fn rotation(&self) -> usize {
        self.matrices.len()
    }
    fn encode(&self, pass: &mut wgpu::ComputePass<'_>, iter: usize) {
        self.input.encode(pass);
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
        let y = ctx.storage(
            &format!("{id} y"),
            4 * u64::from(spec.batch) * u64::from(spec.rows),
        );
        let input = GemvInput::new(ctx, &id, x, spec.batch, spec.cols, kernel.q8()).await?;
        let groups = matrices
            .iter()
            .map(|m| m.bind(ctx, &kernel, input.arg(), &y))
            .collect();
        ctx.check_errors(&id)?;
        Ok(Self {
            spec,
            kernel,
            matrices,
            input,
            y,
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
        }
        self.groups = self
            .matrices
            .iter()
            .map(|m| m.bind(ctx, &kernel, self.input.arg(), &self.y))
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
    /// integer sums are exact, each unit adds at most 3 roundings.)
    pub async fn verify(
        &self,
        ctx: &GpuContext,
        slot: usize,
        full_macs: u64,
    ) -> Result<(
        tokenscope_core::report::kernels::VerificationReport,
        Option<HarnessError>,
    )> {
        let id = self.spec.id();
        crate::timing::run_calls(ctx, &id, self, slot, 1).await?;
        let b = u64::from(self.spec.batch);
        let n = u64::from(self.spec.rows);
        let cols = self.spec.cols as usize;
        let y = ctx.read_f32(&self.y, 0, b * n).await?;
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
        let mut w = vec![0f32; cols];
        for &r in &rows {
            m.row(r, &mut w);
            for bi in 0..b as usize {
                let xs = &x[bi * cols..(bi + 1) * cols];
                let (dot, abs) = w.iter().zip(xs).fold((0f64, 0f64), |(d, a), (&wk, &xk)| {
                    let t = f64::from(wk) * f64::from(xk);
                    (d + t, a + t.abs())
                });
                let gpu = f64::from(y[bi * n as usize + r as usize]);
                check.compare(
                    || format!("y[batch {bi}, row {r}]"),
                    gpu,
                    dot,
                    rel * abs + 1e-30,
                );
            }
        }
        Ok(check.finish())
    }
}
