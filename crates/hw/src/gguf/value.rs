//! Metadata values: the thirteen GGUF value types, and arrays kept short.

use serde::{Deserialize, Serialize};

/// Arrays of numbers or bools up to this length keep their values (per-layer
/// arrays such as `{arch}.feed_forward_length`); longer ones (a vocabulary's
/// scores) keep only their type and length.
pub const MAX_KEPT_NUMBER_ARRAY_LEN: u64 = 1024;

/// Arrays of strings or arrays up to this length keep their values; longer ones
/// (`tokenizer.ggml.tokens`, `tokenizer.ggml.merges`) keep only their type and length.
pub const MAX_KEPT_STRING_ARRAY_LEN: u64 = 64;

/// A GGUF metadata value type (`enum gguf_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueType {
    /// 0: u8.
    U8,
    /// 1: i8.
    I8,
    /// 2: u16.
    U16,
    /// 3: i16.
    I16,
    /// 4: u32.
    U32,
    /// 5: i32.
    I32,
    /// 6: f32.
    F32,
    /// 7: bool (one byte).
    Bool,
    /// 8: string (u64 length + UTF-8 bytes).
    String,
    /// 9: array (u32 element type + u64 length + elements).
    Array,
    /// 10: u64.
    U64,
    /// 11: i64.
    I64,
    /// 12: f64.
    F64,
}

impl ValueType {
    /// The type with this id.
    pub fn from_id(id: u32) -> Option<ValueType> {
        Some(match id {
            0 => ValueType::U8,
            1 => ValueType::I8,
            2 => ValueType::U16,
            3 => ValueType::I16,
            4 => ValueType::U32,
            5 => ValueType::I32,
            6 => ValueType::F32,
            7 => ValueType::Bool,
            8 => ValueType::String,
            9 => ValueType::Array,
            10 => ValueType::U64,
            11 => ValueType::I64,
            12 => ValueType::F64,
            _ => return None,
        })
    }

    /// The id stored in the file.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// Bytes of one value of a fixed-size type; `None` for strings and arrays.
    pub fn fixed_size_bytes(self) -> Option<u64> {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => Some(1),
            ValueType::U16 | ValueType::I16 => Some(2),
            ValueType::U32 | ValueType::I32 | ValueType::F32 => Some(4),
            ValueType::U64 | ValueType::I64 | ValueType::F64 => Some(8),
            ValueType::String | ValueType::Array => None,
        }
    }

    /// The fewest bytes one value of this type takes (a string's or an array's
    /// length prefix), used to reject corrupt element counts before reading.
    pub fn min_size_bytes(self) -> u64 {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            t => t.fixed_size_bytes().unwrap_or(1),
        }
    }
}

/// An array value: its element type, its length and, for short arrays, its values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrayValue {
    /// Element type.
    pub elem_type: ValueType,
    /// Number of elements.
    pub len: u64,
    /// The elements, kept when the array is short (see [`MAX_KEPT_NUMBER_ARRAY_LEN`]
    /// and [`MAX_KEPT_STRING_ARRAY_LEN`]); `None` when skipped.
    pub values: Option<Vec<Value>>,
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "value")]
pub enum Value {
    /// u8.
    U8(u8),
    /// i8.
    I8(i8),
    /// u16.
    U16(u16),
    /// i16.
    I16(i16),
    /// u32.
    U32(u32),
    /// i32.
    I32(i32),
    /// f32.
    F32(f32),
    /// bool (any non-zero byte reads as true).
    Bool(bool),
    /// A string (invalid UTF-8 is replaced with U+FFFD).
    String(String),
    /// An array.
    Array(ArrayValue),
    /// u64.
    U64(u64),
    /// i64.
    I64(i64),
    /// f64.
    F64(f64),
}

impl Value {
    /// This value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// The value as an unsigned integer, when it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a string slice, when it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a bool, when it is one.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The value as an array, when it is one.
    pub fn as_array(&self) -> Option<&ArrayValue> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}
