//! The compiled GEMV kernel for a spec, in the variant the run chose, and the
//! dispatches of one GEMV.

use std::sync::Arc;

use tokenscope_hw::floor::Quant;

use super::spec::GemvSpec;
use super::variant::{GemvVariant, Order, Team, XPath};
use crate::context::GpuContext;
use crate::error::{HarnessError, Result};
use crate::kernels::{F16Path, Reduction, VariantCaps};
use crate::shader::{self, Binding, Defines, Kernel, ShaderFile};
use crate::tune::Choice;

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
            .flag("DEQ16", v.x == XPath::F16)
            .flag("SHADER_F16", v.x == XPath::F16)
            .flag("DEQ_ROWS", v.order(spec) == Order::DeqRows)
            .flag("ROW_BY_ROW", v.order(spec) == Order::RowByRow)
            .flag("UNROLLED", v.unrolled)
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

impl GemvSpec {
    /// The format's WGSL file.
    pub(super) fn shader(&self) -> ShaderFile {
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
    pub(super) fn bindings(&self, x: XPath) -> Vec<Binding> {
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
            XPath::F32 | XPath::F16 => 1,
            XPath::Q8 => 2,
        };
        let mut b = vec![Binding::Uniform];
        b.extend(std::iter::repeat_n(Binding::Read, weights + xs));
        b.push(Binding::ReadWrite);
        b
    }
}
