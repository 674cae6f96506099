//! A sans-IO reader of GGUF headers, the model a GGUF file describes, and the
//! decode floor of the file's own tensors.
//!
//! A GGUF file is a header (magic, version, metadata key/values, tensor infos)
//! followed by the tensor data, aligned to `general.alignment` (default 32). The
//! header is small next to the data (a few MB, mostly the vocabulary), so
//! [`parse_header`] reads a *prefix* of the file: given too few bytes it returns
//! [`GgufError::NeedMore`] with the prefix length it needs next, and the caller
//! (the CLI with a file, the web page with `Blob.slice`) reads more and retries.
//! The file's total length is passed along so that a corrupt length is caught as
//! "exceeds the file" instead of asking for more bytes forever.
//!
//! ```
//! use tokenscope_hw::gguf::{parse_header, GgufError, GgufHeader};
//!
//! /// Reads `len` bytes from the start of the file (a `File`, a `Blob.slice`, ...).
//! fn read_prefix(file: &[u8], len: u64) -> Vec<u8> {
//!     file[..(len as usize).min(file.len())].to_vec()
//! }
//!
//! fn read_header(file: &[u8]) -> Result<GgufHeader, GgufError> {
//!     let file_len = file.len() as u64;
//!     let mut want = 1 << 20; // 1 MiB: most headers fit in a few
//!     loop {
//!         let prefix = read_prefix(file, want);
//!         match parse_header(&prefix, file_len) {
//!             Err(GgufError::NeedMore { needed_bytes, .. }) => {
//!                 // Grow geometrically so a big vocabulary takes few rounds.
//!                 want = needed_bytes.max(want.saturating_mul(2)).min(file_len);
//!             }
//!             done => return done,
//!         }
//!     }
//! }
//! # let mut f = b"GGUF".to_vec();
//! # f.extend(3u32.to_le_bytes());
//! # f.extend(0u64.to_le_bytes());
//! # f.extend(0u64.to_le_bytes());
//! # let h = read_header(&f).unwrap();
//! # assert_eq!((h.version, h.data_offset), (3, 32));
//! ```
//!
//! Layout read (all little-endian; v2 and v3 share it, v1's 32-bit counts are refused):
//!
//! ```text
//! "GGUF" u32 version  u64 tensor_count  u64 kv_count
//! kv_count x   { string key, u32 value_type, value }
//! tensor_count x { string name, u32 n_dims, n_dims x u64 dim, u32 ggml_type, u64 offset }
//! padding to general.alignment, then the data section (tensor offsets count from here)
//! string = u64 len + bytes; array = u32 elem_type + u64 len + elements
//! ```

mod cursor;
mod error;
mod floor;
mod ggml_type;
mod model;
mod value;

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use cursor::Cursor;
pub use error::GgufError;
pub use floor::{
    FileFloor, TOKEN_EMBD, TypeBytes, UnsupportedType, file_floor, kv_bytes_per_token,
};
pub use ggml_type::GgmlType;
pub use model::{GgufModel, MAX_LAYERS, SlidingSource};
pub use value::{
    ArrayValue, MAX_KEPT_NUMBER_ARRAY_LEN, MAX_KEPT_STRING_ARRAY_LEN, Value, ValueType,
};

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";

/// `general.alignment` when the file does not set it.
pub const DEFAULT_ALIGNMENT_BYTES: u64 = 32;

/// The most dimensions a ggml tensor has (`GGML_MAX_DIMS`).
pub const MAX_DIMS: u32 = 4;

/// How deep arrays of arrays may nest before the file is taken as corrupt.
pub const MAX_ARRAY_NESTING: u32 = 8;

/// One metadata key/value pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetadataEntry {
    /// The key (`general.architecture`).
    pub key: String,
    /// The value.
    pub value: Value,
    /// Where the entry (its key's length) starts in the file.
    pub offset_bytes: u64,
}

/// One tensor info.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorInfo {
    /// Tensor name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Dimensions, innermost first as ggml stores them (`ne[0]` is the row length).
    pub dims: Vec<u64>,
    /// Element type.
    pub ggml_type: GgmlType,
    /// Offset of the tensor's data from the start of the data section.
    pub offset_bytes: u64,
    /// Bytes of the tensor's data: `elements / block_elems · block_bytes`.
    pub size_bytes: u64,
}

impl TensorInfo {
    /// Number of elements (the product of the dimensions).
    pub fn elements(&self) -> u64 {
        // Checked not to overflow when the header was read.
        self.dims.iter().fold(1, |n, &d| n.saturating_mul(d))
    }

    /// Bytes of one row (`ne[0]` elements).
    pub fn row_bytes(&self) -> u64 {
        let cols = self.dims.first().copied().unwrap_or(1);
        cols / self.ggml_type.block_elems() * self.ggml_type.block_bytes()
    }
}

/// A GGUF file's header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GgufHeader {
    /// GGUF version (2 or 3).
    pub version: u32,
    /// The metadata, in file order.
    pub metadata: Vec<MetadataEntry>,
    /// The tensor infos, in file order.
    pub tensors: Vec<TensorInfo>,
    /// `general.alignment`, or 32.
    pub alignment_bytes: u64,
    /// Where the data section starts: the header's length, padding included. The
    /// header's bytes are the file's first `data_offset` bytes (what the CLI hashes).
    pub data_offset: u64,
    /// The file's length, as given to [`parse_header`].
    pub file_len_bytes: u64,
}

impl GgufHeader {
    /// The value of a metadata key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entry(key).map(|e| &e.value)
    }

    /// The metadata entry of a key.
    pub fn entry(&self, key: &str) -> Option<&MetadataEntry> {
        self.metadata.iter().find(|e| e.key == key)
    }

    /// The tensor info of a name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Bytes of all tensors' data.
    pub fn tensor_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.size_bytes).sum()
    }

    /// The GEMVs a decode step runs on this file's matrices: every 2-D weight of
    /// a type with a kernel, grouped by type and shape in file order
    /// (`token_embd` only when the output projection reuses it, `tied`; else only
    /// one row of it is read). The CLI's `kernels --gguf` and the page's picked
    /// file both run these.
    pub fn gemv_groups(&self, tied: bool) -> Vec<GemvGroup> {
        let mut groups: Vec<GemvGroup> = Vec::new();
        for t in &self.tensors {
            let (Some(dtype), [cols, rows]) = (t.ggml_type.to_quant(), t.dims.as_slice()) else {
                continue;
            };
            if t.name == TOKEN_EMBD && !tied {
                continue;
            }
            let (rows, cols) = (*rows, *cols);
            match groups
                .iter_mut()
                .find(|g| g.dtype == dtype && g.rows == rows && g.cols == cols)
            {
                Some(g) => g.tensors.push(t.name.clone()),
                None => groups.push(GemvGroup {
                    dtype,
                    rows,
                    cols,
                    tensors: vec![t.name.clone()],
                }),
            }
        }
        groups
    }
}

/// One (type, shape) group of a file's 2-D weights with a kernel
/// ([`GgufHeader::gemv_groups`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GemvGroup {
    /// The weights' format.
    pub dtype: crate::floor::Quant,
    /// Output rows (the tensor's second dimension).
    pub rows: u64,
    /// Input columns (the tensor's first dimension, contiguous).
    pub cols: u64,
    /// The tensors of this type and shape, in file order.
    pub tensors: Vec<String>,
}

/// Reads a GGUF header from `prefix`, the first bytes of a file of `file_len_bytes`.
///
/// Returns [`GgufError::NeedMore`] when the header continues past the prefix (read
/// more and call again; see the module's example). Never panics, and allocates
/// nothing from a length before checking it against the file: a length or count
/// that cannot fit in the file is [`GgufError::PastEnd`].
pub fn parse_header(prefix: &[u8], file_len_bytes: u64) -> Result<GgufHeader, GgufError> {
    let mut c = Cursor::new(prefix, file_len_bytes);
    read_magic(&mut c)?;
    let version = read_version(&mut c)?;
    let tensor_count = c.u64(|| "the tensor count".into())?;
    let kv_count = c.u64(|| "the metadata count".into())?;

    // Each entry takes at least a key length, a type and a one-byte value.
    c.ensure_fits(kv_count.saturating_mul(8 + 4 + 1), || {
        format!("{kv_count} metadata entries (13 bytes or more each)")
    })?;
    let mut metadata = Vec::with_capacity(kv_count.min(1024) as usize);
    let mut keys = HashSet::new();
    for i in 0..kv_count {
        let offset_bytes = c.pos();
        let key = c.string(|| format!("metadata key {i}"))?;
        let type_offset = c.pos();
        let type_id = c.u32(|| format!("the value type of `{key}`"))?;
        let vt = value_type(type_id, type_offset, || format!("metadata `{key}`"))?;
        let value = read_value(&mut c, vt, &key, 0)?;
        if !keys.insert(key.clone()) {
            return Err(GgufError::Invalid {
                offset: offset_bytes,
                reason: format!("metadata key `{key}` appears twice"),
            });
        }
        metadata.push(MetadataEntry {
            key,
            value,
            offset_bytes,
        });
    }
    let alignment_bytes = alignment(&metadata)?;

    // Each tensor info takes at least a name length, n_dims, a type and an offset.
    c.ensure_fits(tensor_count.saturating_mul(8 + 4 + 4 + 8), || {
        format!("{tensor_count} tensor infos (24 bytes or more each)")
    })?;
    let mut tensors = Vec::with_capacity(tensor_count.min(4096) as usize);
    let mut names = HashSet::new();
    for i in 0..tensor_count {
        let info_offset = c.pos();
        let t = read_tensor_info(&mut c, i)?;
        if !names.insert(t.name.clone()) {
            return Err(GgufError::Invalid {
                offset: info_offset,
                reason: format!("tensor name `{}` appears twice", t.name),
            });
        }
        tensors.push(t);
    }
    let data_offset = c
        .pos()
        .checked_next_multiple_of(alignment_bytes)
        .unwrap_or(u64::MAX);
    check_layout(&tensors, alignment_bytes, data_offset, c.file_len())?;
    Ok(GgufHeader {
        version,
        metadata,
        tensors,
        alignment_bytes,
        data_offset,
        file_len_bytes: c.file_len(),
    })
}

fn read_magic(c: &mut Cursor<'_>) -> Result<(), GgufError> {
    let magic: [u8; 4] = c.array(|| "the magic 'GGUF'".into())?;
    if magic != MAGIC {
        let found = magic
            .iter()
            .map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        return Err(GgufError::NotGguf { found });
    }
    Ok(())
}

fn read_version(c: &mut Cursor<'_>) -> Result<u32, GgufError> {
    let version = c.u32(|| "the version".into())?;
    match version {
        2 | 3 => Ok(version),
        1 => Err(GgufError::VersionOne),
        v if (1..=3).contains(&v.swap_bytes()) => Err(GgufError::BigEndian {
            little_endian: v,
            version: v.swap_bytes(),
        }),
        v => Err(GgufError::UnsupportedVersion { version: v }),
    }
}

fn value_type(
    type_id: u32,
    offset: u64,
    what: impl FnOnce() -> String,
) -> Result<ValueType, GgufError> {
    ValueType::from_id(type_id).ok_or_else(|| GgufError::Invalid {
        offset,
        reason: format!(
            "{} has value type {type_id}, expected a GGUF value type (0-12)",
            what()
        ),
    })
}

fn read_value(
    c: &mut Cursor<'_>,
    vt: ValueType,
    key: &str,
    depth: u32,
) -> Result<Value, GgufError> {
    let what = || format!("the value of `{key}`");
    Ok(match vt {
        ValueType::U8 => Value::U8(u8::from_le_bytes(c.array(what)?)),
        ValueType::I8 => Value::I8(i8::from_le_bytes(c.array(what)?)),
        ValueType::U16 => Value::U16(u16::from_le_bytes(c.array(what)?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(c.array(what)?)),
        ValueType::U32 => Value::U32(u32::from_le_bytes(c.array(what)?)),
        ValueType::I32 => Value::I32(i32::from_le_bytes(c.array(what)?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(c.array(what)?)),
        ValueType::Bool => Value::Bool(c.array::<1>(what)?[0] != 0),
        ValueType::String => Value::String(c.string(what)?),
        ValueType::U64 => Value::U64(u64::from_le_bytes(c.array(what)?)),
        ValueType::I64 => Value::I64(i64::from_le_bytes(c.array(what)?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(c.array(what)?)),
        ValueType::Array => Value::Array(read_array(c, key, depth)?),
    })
}

fn read_array(c: &mut Cursor<'_>, key: &str, depth: u32) -> Result<ArrayValue, GgufError> {
    let start = c.pos();
    if depth >= MAX_ARRAY_NESTING {
        return Err(GgufError::Invalid {
            offset: start,
            reason: format!(
                "metadata `{key}` nests arrays more than {MAX_ARRAY_NESTING} deep, expected at most {MAX_ARRAY_NESTING}"
            ),
        });
    }
    let elem_id = c.u32(|| format!("the element type of array `{key}`"))?;
    let elem_type = value_type(elem_id, start, || format!("an element of array `{key}`"))?;
    let len = c.u64(|| format!("the length of array `{key}`"))?;
    c.ensure_fits(len.saturating_mul(elem_type.min_size_bytes()), || {
        format!("array `{key}` of {len} elements")
    })?;
    let keep_limit = match elem_type {
        ValueType::String | ValueType::Array => MAX_KEPT_STRING_ARRAY_LEN,
        _ => MAX_KEPT_NUMBER_ARRAY_LEN,
    };
    let keep = len <= keep_limit;
    let values = match (keep, elem_type.fixed_size_bytes()) {
        (true, _) => {
            // `len` is at most the keep limit, so this allocation is small.
            let mut values = Vec::with_capacity(len as usize);
            for _ in 0..len {
                values.push(read_value(c, elem_type, key, depth + 1)?);
            }
            Some(values)
        }
        (false, Some(size)) => {
            c.take(len.saturating_mul(size), || {
                format!("array `{key}` of {len} elements")
            })?;
            None
        }
        (false, None) => {
            for i in 0..len {
                match elem_type {
                    ValueType::String => {
                        c.skip_string(|| format!("element {i} of array `{key}`"))?;
                    }
                    _ => {
                        read_array(c, key, depth + 1)?;
                    }
                }
            }
            None
        }
    };
    Ok(ArrayValue {
        elem_type,
        len,
        values,
    })
}

fn alignment(metadata: &[MetadataEntry]) -> Result<u64, GgufError> {
    let Some(e) = metadata.iter().find(|e| e.key == "general.alignment") else {
        return Ok(DEFAULT_ALIGNMENT_BYTES);
    };
    match e.value {
        Value::U32(a) if a.is_power_of_two() => Ok(u64::from(a)),
        ref v => Err(GgufError::Invalid {
            offset: e.offset_bytes,
            reason: format!(
                "`general.alignment` is {v:?}, expected a u32 power of two (default {DEFAULT_ALIGNMENT_BYTES})"
            ),
        }),
    }
}

fn read_tensor_info(c: &mut Cursor<'_>, i: u64) -> Result<TensorInfo, GgufError> {
    let name = c.string(|| format!("the name of tensor {i}"))?;
    let dims_offset = c.pos();
    let n_dims = c.u32(|| format!("the dimension count of tensor `{name}`"))?;
    if n_dims > MAX_DIMS {
        return Err(GgufError::Invalid {
            offset: dims_offset,
            reason: format!("tensor `{name}` has {n_dims} dimensions, expected at most {MAX_DIMS}"),
        });
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for d in 0..n_dims {
        dims.push(c.u64(|| format!("dimension {d} of tensor `{name}`"))?);
    }
    let type_offset = c.pos();
    let type_id = c.u32(|| format!("the type of tensor `{name}`"))?;
    let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
        offset: type_offset,
        tensor: name.clone(),
        type_id,
    })?;
    let offset_bytes = c.u64(|| format!("the data offset of tensor `{name}`"))?;
    let layout = |reason: String| GgufError::TensorLayout {
        tensor: name.clone(),
        reason,
    };
    let elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| {
            acc.checked_mul(d).filter(|&n| n <= i64::MAX as u64)
        })
        .ok_or_else(|| {
            layout(format!(
                "dimensions {dims:?} overflow a 63-bit element count"
            ))
        })?;
    let cols = dims.first().copied().unwrap_or(1);
    if !cols.is_multiple_of(ggml_type.block_elems()) {
        return Err(layout(format!(
            "rows of {cols} elements are not a whole number of {ggml_type} blocks of {}",
            ggml_type.block_elems()
        )));
    }
    let size_bytes = ggml_type.bytes_for(elements).ok_or_else(|| {
        layout(format!(
            "{elements} elements of {ggml_type} overflow a byte count"
        ))
    })?;
    Ok(TensorInfo {
        name,
        dims,
        ggml_type,
        offset_bytes,
        size_bytes,
    })
}

/// Checks that the tensors are aligned, do not overlap (in file order) and end
/// within the file.
fn check_layout(
    tensors: &[TensorInfo],
    alignment_bytes: u64,
    data_offset: u64,
    file_len_bytes: u64,
) -> Result<(), GgufError> {
    let mut prev: Option<&TensorInfo> = None;
    for t in tensors {
        let err = |reason: String| GgufError::TensorLayout {
            tensor: t.name.clone(),
            reason,
        };
        if !t.offset_bytes.is_multiple_of(alignment_bytes) {
            return Err(err(format!(
                "data offset {} is not a multiple of the alignment {alignment_bytes}",
                t.offset_bytes
            )));
        }
        if let Some(p) = prev {
            let p_end = p.offset_bytes.saturating_add(p.size_bytes);
            if p_end > t.offset_bytes {
                return Err(err(format!(
                    "data offset {} is inside the previous tensor `{}` (offset {}, {} bytes, ends at {p_end})",
                    t.offset_bytes, p.name, p.offset_bytes, p.size_bytes
                )));
            }
        }
        let end = data_offset
            .saturating_add(t.offset_bytes)
            .saturating_add(t.size_bytes);
        if end > file_len_bytes {
            return Err(err(format!(
                "its {} bytes at data offset {} end at byte {end}, past the end of the file ({file_len_bytes} bytes)",
                t.size_bytes, t.offset_bytes
            )));
        }
        prev = Some(t);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
