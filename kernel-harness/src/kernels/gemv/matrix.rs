//! A GEMV's weights: on the host (f32, f16, or GGUF blocks), and on the GPU split
//! into chunks that each fit one binding, repacked for aligned loads, bound per
//! chunk.

use std::sync::Arc;

use half::f16;
use tokenscope_hw::floor::Quant;

use super::input::XArg;
use super::kernel::GemvKernel;
use super::spec::{GemvSpec, KArray, KArrayKind};
use crate::arena::{Res, Slice};
use crate::context::GpuContext;
use crate::data::{self, FillMode};
use crate::error::Result;
use crate::kernels::fill::{FillJob, Filler};
use crate::quant::{BlockQ4_0, BlockQ8_0, Repacked, RepackedK, RepackedLegacy, bf16_to_f32};

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
    pub main: Slice,
    /// Block scales (q8_0/q5_0/q4_0: f16 d, two per word; q5_1/q4_1: d and m, one
    /// word per block).
    pub scales: Option<Slice>,
    /// The K-quants' further arrays (high bits, packed scales, f16 scales), in
    /// binding order; empty for other formats.
    pub k_arrays: Vec<Slice>,
    /// 5th bits of the q5 formats, one word per block.
    pub qh: Option<Slice>,
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
    /// Host data (f32, f16 or bf16 values, or repacked GGUF blocks).
    Host(Arc<HostMatrix>),
}

/// Weights supplied by the host.
#[derive(Debug, Clone, PartialEq)]
pub enum HostMatrix {
    /// Row-major f32.
    F32(Vec<f32>),
    /// Row-major f16.
    F16(Vec<f16>),
    /// Row-major bf16 (bits, as GGUF stores them).
    Bf16(Vec<u16>),
    /// q8_0 blocks, repacked.
    Q8_0(Repacked),
    /// q4_0 blocks, repacked.
    Q4_0(Repacked),
    /// q4_K super-blocks, repacked.
    Q4K(RepackedK),
    /// q5_K super-blocks, repacked.
    Q5K(RepackedK),
    /// q6_K super-blocks, repacked.
    Q6K(RepackedK),
    /// q5_1 blocks, repacked.
    Q5_1(RepackedLegacy),
    /// q5_0 blocks, repacked.
    Q5_0(RepackedLegacy),
    /// q4_1 blocks, repacked.
    Q4_1(RepackedLegacy),
}

/// The stream key and fill mode of a generated K-quant array: the f16 scales use the
/// scales key itself (valid, finite `d`/`dmin` in [2^-7, 2^-6)); high bits and packed
/// scales are raw hash bits (every bit pattern is a valid K-quant block) from keys
/// derived from it.
fn k_stream(scales: u32, a: KArray) -> (u32, FillMode) {
    match a.kind {
        KArrayKind::Qh => (data::key(u64::from(scales), 1), FillMode::Bits),
        KArrayKind::Scales => (data::key(u64::from(scales), 2), FillMode::Bits),
        KArrayKind::D => (scales, FillMode::ScalePair),
    }
}

/// Super-block `blk` of a generated K-quant matrix, in the repacked layout (what the
/// GPU fill writes, regenerated on the CPU).
fn generated_k_block(spec: &GemvSpec, weights: u32, scales: u32, blk: u64) -> RepackedK {
    let mut out = RepackedK {
        qs: (0..128)
            .map(|j| data::byte_at(weights, blk * 128 + j))
            .collect(),
        ..Default::default()
    };
    for a in spec.k_arrays() {
        let (key, _) = k_stream(scales, *a);
        let n = a.bytes_per_block;
        match a.kind {
            KArrayKind::Qh => out.qh = (0..n).map(|j| data::byte_at(key, blk * n + j)).collect(),
            KArrayKind::Scales => {
                out.scales = (0..n).map(|j| data::byte_at(key, blk * n + j)).collect()
            }
            KArrayKind::D => {
                let halves = n / 2;
                out.d = (0..halves)
                    .map(|j| data::scale_at(key, blk * halves + j))
                    .collect()
            }
        }
    }
    out
}

/// Super-block `b` of a repacked K-quant matrix, dequantized.
fn dequantize_k(dtype: Quant, rp: &RepackedK, b: usize, centred: bool) -> [f32; 256] {
    match (dtype, centred) {
        (Quant::Q4K, false) => rp.q4_k(b).dequantize(),
        (Quant::Q4K, true) => rp.q4_k(b).centred(),
        (Quant::Q5K, false) => rp.q5_k(b).dequantize(),
        (Quant::Q5K, true) => rp.q5_k(b).centred(),
        _ => rp.q6_k(b).dequantize(),
    }
}

impl GemvSpec {
    /// Whether the format has a scale array (one f16 per block, two per word).
    fn scale_pairs(&self) -> bool {
        matches!(self.dtype, Quant::Q8_0 | Quant::Q5_0 | Quant::Q4_0)
    }

    /// Whether the format has a `d | m << 16` word per block.
    fn scale_min_words(&self) -> bool {
        matches!(self.dtype, Quant::Q5_1 | Quant::Q4_1)
    }

    /// Whether the format has a 5th-bit word per block.
    fn has_qh(&self) -> bool {
        matches!(self.dtype, Quant::Q5_1 | Quant::Q5_0)
    }

    /// 32-bit words of the scale array for `rows` rows (0: none).
    fn scale_words(&self, rows: u64) -> u64 {
        let blocks = rows * self.blocks_per_row();
        if self.scale_pairs() {
            blocks.div_ceil(2)
        } else if self.scale_min_words() {
            blocks
        } else {
            0
        }
    }
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
        let chunks = ctx
            .scoped(&id, spec.weight_bytes(), || {
                let mut chunks = Vec::new();
                let mut row0 = 0u32;
                while row0 < spec.rows {
                    let rows = per.min(spec.rows - row0);
                    let main = ctx.operand(
                        &format!("{id} weights rows {row0}..{}", row0 + rows),
                        u64::from(rows) * spec.main_row_bytes(),
                    );
                    let scale_words = spec.scale_words(u64::from(rows));
                    let scales = (scale_words > 0).then(|| {
                        ctx.operand(
                            &format!("{id} scales rows {row0}..{}", row0 + rows),
                            scale_words * 4,
                        )
                    });
                    let qh = spec.has_qh().then(|| {
                        ctx.operand(
                            &format!("{id} qh rows {row0}..{}", row0 + rows),
                            u64::from(rows) * nb * 4,
                        )
                    });
                    let k_arrays = spec
                        .k_arrays()
                        .iter()
                        .map(|a| {
                            ctx.operand(
                                &format!("{id} {:?} rows {row0}..{}", a.kind, row0 + rows),
                                u64::from(rows) * nb * a.bytes_per_block,
                            )
                        })
                        .collect();
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
                        k_arrays,
                        qh,
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
                        Quant::Bf16 => FillMode::Bf16Pair,
                        Quant::Q8_0 | Quant::Q5_1 | Quant::Q5_0 | Quant::Q4_1 | Quant::Q4_0 => {
                            FillMode::Bits
                        }
                        _ => FillMode::Bits,
                    };
                    jobs.push(FillJob {
                        target: (&c.main).into(),
                        words: u64::from(c.rows) * row_words,
                        key: *weights,
                        mode,
                        offset: u64::from(c.row0) * row_words,
                    });
                    for (a, buf) in spec.k_arrays().iter().zip(&c.k_arrays) {
                        let (key, mode) = k_stream(*scales, *a);
                        let bytes = |rows: u64| rows * nb * a.bytes_per_block;
                        jobs.push(FillJob {
                            target: buf.into(),
                            words: bytes(u64::from(c.rows)).div_ceil(4),
                            key,
                            mode,
                            offset: bytes(u64::from(c.row0)) / 4,
                        });
                    }
                    if let Some(s) = &c.scales {
                        // Pairs of scales (d, d) or (d, m): the same generated words.
                        jobs.push(FillJob {
                            target: s.into(),
                            words: spec.scale_words(u64::from(c.rows)),
                            key: *scales,
                            mode: FillMode::ScalePair,
                            // Chunks hold an even number of rows (or are the whole
                            // matrix), so a chunk's pairs start on a word.
                            offset: if spec.scale_pairs() {
                                u64::from(c.row0) * nb / 2
                            } else {
                                u64::from(c.row0) * nb
                            },
                        });
                    }
                    if let Some(q) = &c.qh {
                        jobs.push(FillJob {
                            target: q.into(),
                            words: u64::from(c.rows) * nb,
                            key: data::qh_key(*weights),
                            mode: FillMode::Bits,
                            offset: u64::from(c.row0) * nb,
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
                        HostMatrix::Bf16(v) => {
                            bytemuck::cast_slice(&v[(r0 * cols) as usize..(r1 * cols) as usize])
                                .to_vec()
                        }
                        HostMatrix::Q8_0(r) | HostMatrix::Q4_0(r) => {
                            let rb = spec.main_row_bytes();
                            r.qs[(r0 * rb) as usize..(r1 * rb) as usize].to_vec()
                        }
                        HostMatrix::Q4K(r) | HostMatrix::Q5K(r) | HostMatrix::Q6K(r) => {
                            let rb = spec.main_row_bytes();
                            r.qs[(r0 * rb) as usize..(r1 * rb) as usize].to_vec()
                        }
                        HostMatrix::Q5_1(r) | HostMatrix::Q5_0(r) | HostMatrix::Q4_1(r) => {
                            let rb = spec.main_row_bytes();
                            r.qs[(r0 * rb) as usize..(r1 * rb) as usize].to_vec()
                        }
                    };
                    ctx.write_slice(&c.main, 0, &main);
                    if let HostMatrix::Q4K(r) | HostMatrix::Q5K(r) | HostMatrix::Q6K(r) =
                        host.as_ref()
                    {
                        for (a, buf) in spec.k_arrays().iter().zip(&c.k_arrays) {
                            let n = nb * a.bytes_per_block;
                            let (b0, b1) = ((r0 * n) as usize, (r1 * n) as usize);
                            let bytes = match a.kind {
                                KArrayKind::Qh => r.qh[b0..b1].to_vec(),
                                KArrayKind::Scales => r.scales[b0..b1].to_vec(),
                                KArrayKind::D => {
                                    let part = RepackedK {
                                        d: r.d[b0 / 2..b1 / 2].to_vec(),
                                        ..Default::default()
                                    };
                                    bytemuck::cast_slice(&part.d_words()).to_vec()
                                }
                            };
                            ctx.write_slice(buf, 0, &bytes);
                        }
                    }
                    if let (Some(s), HostMatrix::Q8_0(r) | HostMatrix::Q4_0(r)) =
                        (&c.scales, host.as_ref())
                    {
                        let part = Repacked {
                            qs: Vec::new(),
                            d: r.d[(r0 * nb) as usize..(r1 * nb) as usize].to_vec(),
                        };
                        ctx.write_slice(s, 0, bytemuck::cast_slice(&part.d_words()));
                    }
                    if let HostMatrix::Q5_1(r) | HostMatrix::Q5_0(r) | HostMatrix::Q4_1(r) =
                        host.as_ref()
                    {
                        let part = r.slice((r0 * nb) as usize, (r1 * nb) as usize);
                        if let Some(s) = &c.scales {
                            ctx.write_slice(s, 0, bytemuck::cast_slice(&part.scale_words()));
                        }
                        if let Some(q) = &c.qh {
                            ctx.write_slice(q, 0, bytemuck::cast_slice(&part.qh));
                        }
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
        self.values(r, false, out);
    }

    /// Row `r` as the f16 dequantization multiplies it by x: each weight less its
    /// (sub-)block's centre (`d (q - 8)`, `d (q - 16)`, added by the kernel through
    /// x's sum in f32) for the formats with a minimum (q4_1, q5_1, q4_K, q5_K); the
    /// weights themselves for the others (q4_0 and q5_0 come centred).
    pub fn centred_row(&self, r: u64, out: &mut [f32]) {
        self.values(r, true, out);
    }

    fn values(&self, r: u64, centred: bool, out: &mut [f32]) {
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
            (WeightSource::Generated { weights, scales }, Quant::Q4K | Quant::Q5K | Quant::Q6K) => {
                for b in 0..nb {
                    let rp = generated_k_block(&self.spec, *weights, *scales, r * nb + b);
                    out[(b * 256) as usize..(b * 256 + 256) as usize]
                        .copy_from_slice(&dequantize_k(self.spec.dtype, &rp, 0, centred));
                }
            }
            (WeightSource::Generated { weights, .. }, Quant::Bf16) => {
                for (k, o) in out.iter_mut().enumerate() {
                    *o = data::bf16_at(*weights, r * cols + k as u64);
                }
            }
            (
                WeightSource::Generated { weights, scales },
                dtype @ (Quant::Q5_1 | Quant::Q5_0 | Quant::Q4_1),
            ) => {
                // The mirror of the fill: the generated words, read as the repacked
                // layout (`scale_words`: d, or d | m << 16, per block).
                let qh_key = data::qh_key(*weights);
                let mut rp = RepackedLegacy::default();
                for b in 0..nb {
                    let blk = r * nb + b;
                    rp.qs
                        .extend((0..16).map(|j| data::byte_at(*weights, blk * 16 + j)));
                    if dtype == Quant::Q5_0 {
                        rp.d.push(data::scale_at(*scales, blk));
                    } else {
                        rp.d.push(data::scale_at(*scales, 2 * blk));
                        rp.m.push(data::scale_at(*scales, 2 * blk + 1));
                    }
                    rp.qh.push(data::hash_word(qh_key, blk as u32));
                }
                legacy_row(dtype, &rp, 0, nb, centred, out);
            }
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
                HostMatrix::Bf16(v) => {
                    for (o, h) in out
                        .iter_mut()
                        .zip(&v[(r * cols) as usize..((r + 1) * cols) as usize])
                    {
                        *o = bf16_to_f32(*h);
                    }
                }
                HostMatrix::Q5_1(rp) => legacy_row(Quant::Q5_1, rp, r * nb, nb, centred, out),
                HostMatrix::Q5_0(rp) => legacy_row(Quant::Q5_0, rp, r * nb, nb, centred, out),
                HostMatrix::Q4_1(rp) => legacy_row(Quant::Q4_1, rp, r * nb, nb, centred, out),
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
                HostMatrix::Q4K(rp) | HostMatrix::Q5K(rp) | HostMatrix::Q6K(rp) => {
                    for b in 0..nb {
                        let blk = (r * nb + b) as usize;
                        out[(b * 256) as usize..(b * 256 + 256) as usize]
                            .copy_from_slice(&dequantize_k(self.spec.dtype, rp, blk, centred));
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

    /// Bind groups of every chunk for input `x` (as the kernel reads it) and output `y`.
    pub fn bind(
        &self,
        ctx: &GpuContext,
        k: &GemvKernel,
        x: XArg<'_>,
        y: &wgpu::Buffer,
    ) -> Vec<(wgpu::BindGroup, (u32, u32))> {
        let label = format!("{} bind", self.spec.id());
        self.chunks
            .iter()
            .map(|c| {
                // Binding order: params, quants, [qh], [scales], [K-quant arrays], x, y.
                let mut buffers: Vec<Res> = vec![(&c.params).into(), (&c.main).into()];
                buffers.extend(c.qh.iter().map(Res::from));
                buffers.extend(c.scales.iter().map(Res::from));
                buffers.extend(c.k_arrays.iter().map(Res::from));
                match x {
                    XArg::F32(x) => buffers.push(x.into()),
                    XArg::Q8 { xq, xm } => buffers.extend([Res::from(xq), Res::from(xm)]),
                }
                buffers.push(y.into());
                let bg = ctx.bind(&k.kernel, &label, &buffers);
                (bg, ctx.grid(c.rows.div_ceil(k.rows_per_wg)))
            })
            .collect()
    }

    /// Row indices where chunks begin (for verification sampling).
    pub fn boundaries(&self) -> Vec<u64> {
        self.chunks.iter().map(|c| u64::from(c.row0)).collect()
    }
}

/// Dequantizes blocks `[b0, b0 + nb)` of a q5_1 / q5_0 / q4_1 matrix into `out`.
fn legacy_row(dtype: Quant, rp: &RepackedLegacy, b0: u64, nb: u64, centred: bool, out: &mut [f32]) {
    for b in 0..nb {
        let i = (b0 + b) as usize;
        let w = match (dtype, centred) {
            (Quant::Q5_1, false) => rp.q5_1(i).dequantize(),
            (Quant::Q5_1, true) => rp.q5_1(i).centred(),
            (Quant::Q5_0, _) => rp.q5_0(i).dequantize(),
            (_, false) => rp.q4_1(i).dequantize(),
            (_, true) => rp.q4_1(i).centred(),
        };
        out[(b * 32) as usize..(b * 32 + 32) as usize].copy_from_slice(&w);
    }
}
