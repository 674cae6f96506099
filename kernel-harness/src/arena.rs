//! Device memory for the kernels' large operands (weights, KV caches, bandwidth
//! buffers): a few large buffers allocated as the run first needs them and then reused,
//! item after item, never freed until the run ends.
//!
//! Why: on an NVIDIA H200 the same kernel at the same shape took 341 us or 1,726 us
//! depending on which kernels had allocated and freed their operands before it in the
//! process, and some shapes ran 5x faster with fewer rotated copies
//! (`../shared/gpu/h200-2026-12-04`). Allocating per kernel left where an operand lands
//! (block, page size, placement) to the history of the process; here every operand is a
//! range of the same few buffers whatever ran before, and `kernels` checks that its
//! figures no longer depend on the order (the report's `drift`).
//!
//! A range is handed out by bumping an offset in the first block with room; a block
//! whose ranges have all been dropped starts again from zero. Ranges are aligned to the
//! device's storage offset alignment (at least 256 bytes).

use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};

/// Bytes of a block unless one operand needs more (then the block is its size).
pub const BLOCK_BYTES: u64 = 1 << 30;
/// Blocks are sized in whole 2 MiB pages.
const PAGE: u64 = 2 << 20;

/// A range of device memory: a whole buffer, or a range of an arena block.
#[derive(Debug, Clone)]
pub struct Slice {
    /// The buffer.
    pub buffer: wgpu::Buffer,
    /// Offset of the range, bytes.
    pub offset: u64,
    /// Size of the range, bytes (a multiple of 4).
    pub size: u64,
    _live: Option<Arc<()>>,
}

impl Slice {
    /// A whole buffer as a range.
    pub fn whole(buffer: wgpu::Buffer) -> Slice {
        let size = buffer.size();
        Slice {
            buffer,
            offset: 0,
            size,
            _live: None,
        }
    }

    /// How a bind group entry refers to it.
    pub fn binding(&self) -> wgpu::BindingResource<'_> {
        wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: &self.buffer,
            offset: self.offset,
            size: NonZeroU64::new(self.size),
        })
    }
}

/// One binding of a bind group: a whole buffer or a range.
#[derive(Debug, Clone, Copy)]
pub enum Res<'a> {
    /// The whole buffer.
    Whole(&'a wgpu::Buffer),
    /// A range.
    Range(&'a Slice),
}

impl<'a> From<&'a wgpu::Buffer> for Res<'a> {
    fn from(b: &'a wgpu::Buffer) -> Self {
        Res::Whole(b)
    }
}

impl<'a> From<&'a Slice> for Res<'a> {
    fn from(s: &'a Slice) -> Self {
        Res::Range(s)
    }
}

impl Res<'_> {
    /// How a bind group entry refers to it.
    pub fn binding(&self) -> wgpu::BindingResource<'_> {
        match self {
            Res::Whole(b) => b.as_entire_binding(),
            Res::Range(s) => s.binding(),
        }
    }
}

struct Block {
    buffer: wgpu::Buffer,
    size: u64,
    used: u64,
    /// Cloned into every range handed out: one count means none is alive.
    live: Arc<()>,
}

/// The blocks of one device.
pub struct Arena {
    blocks: Mutex<Vec<Block>>,
    align: u64,
    max_buffer: u64,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (n, bytes) = self.footprint();
        f.debug_struct("Arena")
            .field("blocks", &n)
            .field("bytes", &bytes)
            .finish()
    }
}

impl Arena {
    /// An empty arena for a device with this offset alignment and largest buffer.
    pub fn new(align: u64, max_buffer: u64) -> Arena {
        Arena {
            blocks: Mutex::new(Vec::new()),
            align: align.max(256),
            max_buffer,
        }
    }

    /// Blocks and bytes held.
    pub fn footprint(&self) -> (usize, u64) {
        self.blocks
            .lock()
            .map(|b| (b.len(), b.iter().map(|b| b.size).sum()))
            .unwrap_or((0, 0))
    }

    /// A range of `size` bytes (rounded up to 4), outside the buffer of `apart` when
    /// given (wgpu tracks usage per buffer: a kernel that writes one range and reads
    /// another needs them in different buffers). `make(bytes)` creates a new block's
    /// buffer when no block has room.
    pub fn alloc(
        &self,
        size: u64,
        apart: Option<&Slice>,
        make: impl FnOnce(u64) -> wgpu::Buffer,
    ) -> Slice {
        let size = size.max(4).next_multiple_of(4);
        let Ok(mut blocks) = self.blocks.lock() else {
            return Slice::whole(make(size));
        };
        for b in blocks.iter_mut() {
            if Arc::strong_count(&b.live) == 1 {
                b.used = 0;
            }
        }
        let fits = |b: &Block| {
            b.used.next_multiple_of(self.align) + size <= b.size
                && apart.is_none_or(|a| a.buffer != b.buffer)
        };
        let index = match blocks.iter().position(fits) {
            Some(i) => i,
            None => {
                let bytes = size
                    .max(BLOCK_BYTES)
                    .next_multiple_of(PAGE)
                    .min(self.max_buffer.max(size));
                blocks.push(Block {
                    buffer: make(bytes),
                    size: bytes,
                    used: 0,
                    live: Arc::new(()),
                });
                blocks.len() - 1
            }
        };
        let b = &mut blocks[index];
        let offset = b.used.next_multiple_of(self.align);
        b.used = offset + size;
        Slice {
            buffer: b.buffer.clone(),
            offset,
            size,
            _live: Some(b.live.clone()),
        }
    }
}
