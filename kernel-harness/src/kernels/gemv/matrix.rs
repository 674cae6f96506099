//! A GEMV's weights: on the host (f32, f16, or GGUF blocks), and on the GPU split
//! into chunks that each fit one binding, repacked for aligned loads, bound per
//! chunk.

use std::sync::Arc;

use half::f16;
use tokenscope_core::analyze::floor::Quant;

use super::{GemvKernel, GemvSpec};
use crate::context::GpuContext;
use crate::data::{self, FillMode};
use crate::error::Result;
use crate::kernels::fill::{FillJob, Filler};
use crate::quant::{BlockQ4_0, BlockQ8_0, Repacked};

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rows: u32,
    cols: u32,
    row_offset: u32,
    y_stride: u32,
}

/// One binding-sized piece of a matrix: rows `[row0, row0 + rows)`.
#[derive(Debug)]
pub struct Chunk {
    /// First row.
    pub row0: u32,
    /// Rows.
    pub rows: u32,
    /// Weights (f32/f16) or quant bytes.
    pub main: wgpu::Buffer,
    /// Block scales (q8_0/q4_0).
    pub scales: Option<wgpu::Buffer>,
    params: wgpu::Buffer,
}

/// Where a matrix's values come from.
#[derive(Debug, Clone)]
pub enum WeightSource {
    /// Seeded words generated on the GPU (`data`): weights key, scales key.
    Generated {
        /// Key of the weights / quant bytes stream.
        weights: u32,
        /// Key of the scales stream.
        scales: u32,
    },
    /// Host data (f32 or f16 values, or repacked GGUF blocks).
    Host(Arc<HostMatrix>),
}

/// Weights supplied by the host.
#[derive(Debug, Clone, PartialEq)]
pub enum HostMatrix {
    /// Row-major f32.
    F32(Vec<f32>),
    /// Row-major f16.
    F16(Vec<f16>),
    /// q8_0 blocks, repacked.
    Q8_0(Repacked),
    /// q4_0 blocks, repacked.
    Q4_0(Repacked),
}

/// A weight matrix on the GPU, split into chunks of rows.
#[derive(Debug)]
pub struct GpuMatrix {
    /// The problem (batch ignored).
    pub spec: GemvSpec,
    /// Chunks, in row order.
    pub chunks: Vec<Chunk>,
    /// Where the values came from.
    pub source: WeightSource,
}

impl GpuMatrix {
    /// Allocates and fills a matrix.
    pub async fn new(
        ctx: &GpuContext,
        spec: GemvSpec,
        source: WeightSource,
        filler: &Filler,
    ) -> Result<GpuMatrix> {
        spec.validate()?;
        let id = spec.id();
        let per = spec.rows_per_binding(ctx.max_binding())?;
        let nb = spec.blocks_per_row();
        let quantized = matches!(spec.dtype, Quant::Q8_0 | Quant::Q4_0);
        let chunks = ctx
            .scoped(&id, spec.weight_bytes(), || {
                let mut chunks = Vec::new();
                let mut row0 = 0u32;
                while row0 < spec.rows {
                    let rows = per.min(spec.rows - row0);
                    let main = ctx.storage(
                        &format!("{id} weights rows {row0}..{}", row0 + rows),
                        u64::from(rows) * spec.main_row_bytes(),
                    );
                    let scales = quantized.then(|| {
                        ctx.storage(
                            &format!("{id} scales rows {row0}..{}", row0 + rows),
                            (u64::from(rows) * nb).div_ceil(2) * 4,
                        )
                    });
                    let params = ctx.uniform(
                        &format!("{id} params rows {row0}.."),
                        &Params {
                            rows,
                            cols: spec.cols,
                            row_offset: row0,
                            y_stride: spec.rows,
                        },
                    );
                    chunks.push(Chunk {
                        row0,
                        rows,
                        main,
                        scales,
                        params,
                    });
                    row0 += rows;
                }
                chunks
            })
            .await?;
        match &source {
            WeightSource::Generated { weights, scales } => {
                let row_words = spec.main_row_bytes() / 4;
                let mut jobs = Vec::new();
                for c in &chunks {
                    let mode = match spec.dtype {
                        Quant::F32 => FillMode::F32,
                        Quant::F16 => FillMode::F16Pair,
                        _ => FillMode::Bits,
                    };
                    jobs.push(FillJob {
                        buffer: &c.main,
                        words: u64::from(c.rows) * row_words,
                        key: *weights,
                        mode,
                        offset: u64::from(c.row0) * row_words,
                    });
                    if let Some(s) = &c.scales {
                        jobs.push(FillJob {
                            buffer: s,
                            words: (u64::from(c.rows) * nb).div_ceil(2),
                            key: *scales,
                            mode: FillMode::ScalePair,
                            offset: u64::from(c.row0) * nb / 2,
                        });
                    }
                }
                filler.run(ctx, &id, &jobs).await?;
            }
            WeightSource::Host(host) => {
                for c in &chunks {
                    let (r0, r1) = (u64::from(c.row0), u64::from(c.row0 + c.rows));
                    let cols = u64::from(spec.cols);
                    let main: Vec<u8> = match host.as_ref() {
                        HostMatrix::F32(v) => {
                            bytemuck::cast_slice(&v[(r0 * cols) as usize..(r1 * cols) as usize])
                                .to_vec()
                        }
                        HostMatrix::F16(v) => {
                            bytemuck::cast_slice(&v[(r0 * cols) as usize..(r1 * cols) as usize])
                                .to_vec()
                        }
                        HostMatrix::Q8_0(r) | HostMatrix::Q4_0(r) => {
                            let rb = spec.main_row_bytes();
                            r.qs[(r0 * rb) as usize..(r1 * rb) as usize].to_vec()
                        }
                    };
                    ctx.queue.write_buffer(&c.main, 0, &main);
                    if let (Some(s), HostMatrix::Q8_0(r) | HostMatrix::Q4_0(r)) =
                        (&c.scales, host.as_ref())
                    {
                        let part = Repacked {
                            qs: Vec::new(),
                            d: r.d[(r0 * nb) as usize..(r1 * nb) as usize].to_vec(),
                        };
                        ctx.queue
                            .write_buffer(s, 0, bytemuck::cast_slice(&part.d_words()));
                    }
                }
                ctx.wait_idle().await;
            }
        }
        Ok(GpuMatrix {
            spec,
            chunks,
            source,
        })
    }

    /// Row `r` of the matrix, dequantized (the CPU reference's view of the data).
    pub fn row(&self, r: u64, out: &mut [f32]) {
        let cols = u64::from(self.spec.cols);
        let nb = self.spec.blocks_per_row();
        match (&self.source, self.spec.dtype) {
            (WeightSource::Generated { weights, .. }, Quant::F32) => {
                for (k, o) in out.iter_mut().enumerate() {
                    *o = data::f32_at(*weights, r * cols + k as u64);
                }
            }
            (WeightSource::Generated { weights, .. }, Quant::F16) => {
                for (k, o) in out.iter_mut().enumerate() {
                    *o = data::f16_at(*weights, r * cols + k as u64).to_f32();
                }
            }
            (WeightSource::Generated { weights, scales }, Quant::Q8_0) => {
                for b in 0..nb {
                    let blk = r * nb + b;
                    let block = BlockQ8_0 {
                        d: data::scale_at(*scales, blk),
                        qs: std::array::from_fn(|j| {
                            data::byte_at(*weights, blk * 32 + j as u64) as i8
                        }),
                    };
                    out[(b * 32) as usize..(b * 32 + 32) as usize]
                        .copy_from_slice(&block.dequantize());
                }
            }
            (WeightSource::Generated { weights, scales }, Quant::Q4_0) => {
                for b in 0..nb {
                    let blk = r * nb + b;
                    let block = BlockQ4_0 {
                        d: data::scale_at(*scales, blk),
                        qs: std::array::from_fn(|j| data::byte_at(*weights, blk * 16 + j as u64)),
                    };
                    out[(b * 32) as usize..(b * 32 + 32) as usize]
                        .copy_from_slice(&block.dequantize());
                }
            }
            // GemvSpec::validate refuses the other formats.
            (WeightSource::Generated { .. }, _) => out.fill(0.0),
            (WeightSource::Host(host), _) => match host.as_ref() {
                HostMatrix::F32(v) => {
                    out.copy_from_slice(&v[(r * cols) as usize..((r + 1) * cols) as usize])
                }
                HostMatrix::F16(v) => {
                    for (o, h) in out
                        .iter_mut()
                        .zip(&v[(r * cols) as usize..((r + 1) * cols) as usize])
                    {
                        *o = h.to_f32();
                    }
                }
                HostMatrix::Q8_0(rp) => {
                    for b in 0..nb {
                        let blk = (r * nb + b) as usize;
                        let block = BlockQ8_0 {
                            d: rp.d[blk],
                            qs: std::array::from_fn(|j| rp.qs[blk * 32 + j] as i8),
                        };
                        out[(b * 32) as usize..(b * 32 + 32) as usize]
                            .copy_from_slice(&block.dequantize());
                    }
                }
                HostMatrix::Q4_0(rp) => {
                    for b in 0..nb {
                        let blk = (r * nb + b) as usize;
                        let block = BlockQ4_0 {
                            d: rp.d[blk],
                            qs: std::array::from_fn(|j| rp.qs[blk * 16 + j]),
                        };
                        out[(b * 32) as usize..(b * 32 + 32) as usize]
                            .copy_from_slice(&block.dequantize());
                    }
                }
            },
        }
    }

    /// Bind groups of every chunk for input `x` and output `y`.
    pub fn bind(
        &self,
        ctx: &GpuContext,
        k: &GemvKernel,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
    ) -> Vec<(wgpu::BindGroup, (u32, u32))> {
        let label = format!("{} bind", self.spec.id());
        self.chunks
            .iter()
            .map(|c| {
                let bg = match &c.scales {
                    None => ctx.bind(&k.kernel, &label, &[&c.params, &c.main, x, y]),
                    Some(s) => ctx.bind(&k.kernel, &label, &[&c.params, &c.main, s, x, y]),
                };
                (bg, ctx.grid(c.rows.div_ceil(k.rows_per_wg)))
            })
            .collect()
    }

    /// Row indices where chunks begin (for verification sampling).
    pub fn boundaries(&self) -> Vec<u64> {
        self.chunks.iter().map(|c| u64::from(c.row0)).collect()
    }
}
