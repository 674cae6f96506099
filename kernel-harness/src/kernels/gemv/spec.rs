//! A GEMV or skinny-matmul problem ([`GemvSpec`]): its shape, format and batch,
//! the bytes it reads, and the arrays a K-quant matrix adds.

use tokenscope_hw::floor::Quant;

use crate::error::{HarnessError, KernelId, Result};
use crate::quant::{QK, QK_K};

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

    pub(super) fn main_row_bytes(&self) -> u64 {
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
    pub(super) fn blocks_per_row(&self) -> u64 {
        match self.dtype {
            Quant::Q4K | Quant::Q5K | Quant::Q6K => u64::from(self.cols) / QK_K as u64,
            _ => u64::from(self.cols) / QK as u64,
        }
    }

    /// The K-quant arrays after the quant bytes, in binding order (empty for other
    /// formats): bytes per super-block and how generated data fills them.
    pub(super) fn k_arrays(&self) -> &'static [KArray] {
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
