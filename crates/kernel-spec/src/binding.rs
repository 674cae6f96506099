//! A binding of a user's kernel: how the kernel uses it, its element type and
//! length, and its first contents, from one line (`read f32[M*K] random`).

use crate::Expr;

/// How the kernel uses a binding (`@group(0) @binding(i)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// `var<uniform>`.
    Uniform,
    /// `var<storage, read>`.
    Read,
    /// `var<storage, read_write>`.
    ReadWrite,
}

/// A binding's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    /// `f32`.
    F32,
    /// `f16` (two to a word).
    F16,
    /// `u32`.
    U32,
    /// `i32`.
    I32,
}

impl Elem {
    /// Bytes of one element.
    pub fn size(self) -> u64 {
        match self {
            Elem::F16 => 2,
            _ => 4,
        }
    }

    fn parse(s: &str) -> Option<Elem> {
        Some(match s {
            "f32" => Elem::F32,
            "f16" => Elem::F16,
            "u32" => Elem::U32,
            "i32" => Elem::I32,
            _ => return None,
        })
    }

    /// Element `i` of little-endian `bytes`, as a number.
    pub fn read(self, bytes: &[u8], i: usize) -> f64 {
        let n = self.size() as usize;
        let b = &bytes[i * n..(i + 1) * n];
        match self {
            Elem::F32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Elem::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
            Elem::U32 => f64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Elem::I32 => f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        }
    }

    /// Appends `v` as one little-endian element (floats rounded, integers cut).
    pub fn write(self, v: f64, out: &mut Vec<u8>) {
        match self {
            Elem::F32 => out.extend((v as f32).to_le_bytes()),
            Elem::F16 => out.extend(half::f16::from_f64(v).to_le_bytes()),
            Elem::U32 => out.extend((v as u32).to_le_bytes()),
            Elem::I32 => out.extend((v as i32).to_le_bytes()),
        }
    }
}

/// A binding's first contents.
#[derive(Debug, Clone, PartialEq)]
pub enum Init {
    /// Random: floats in [-1, 1), integers of any bits (the run's seed).
    Random,
    /// Zeros.
    Zeros,
    /// Ones.
    Ones,
    /// These values, in order (integer expressions, or decimals for floats).
    Values(Vec<String>),
    /// A file's bytes: its path until the caller reads it, then its contents.
    File(String, Option<std::sync::Arc<Vec<u8>>>),
}

/// One binding: how the kernel uses it, its element type and length, and its
/// first contents.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingSpec {
    /// `uniform`, `read` or `read_write`.
    pub access: Access,
    /// Element type.
    pub elem: Elem,
    /// Elements (an expression).
    pub count: Expr,
    /// First contents.
    pub init: Init,
}

impl BindingSpec {
    /// Parses `ACCESS TYPE[COUNT] [INIT]`: ACCESS `uniform`, `read` or
    /// `read_write`; TYPE `f32`, `f16`, `u32` or `i32`; COUNT an expression; INIT
    /// `random` (a `read` binding's default), `zeros` (a `read_write` one's),
    /// `ones`, `file:PATH`, or `= V, V, ...` (then `[COUNT]` may be left out).
    pub fn parse(line: &str) -> Result<BindingSpec, String> {
        let line = line.trim();
        let bad = |why: &str| format!("binding `{line}`: {why}");
        let (access_word, rest) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| bad("expected `ACCESS TYPE[COUNT] [INIT]`"))?;
        let access = match access_word {
            "uniform" => Access::Uniform,
            "read" => Access::Read,
            "read_write" => Access::ReadWrite,
            other => {
                return Err(bad(&format!(
                    "`{other}` is not uniform, read or read_write"
                )));
            }
        };
        let rest = rest.trim_start();
        let (ty, count, init_text) = match rest.find(['[', ' ', '=']) {
            Some(i) if rest[i..].starts_with('[') => {
                let close = rest.find(']').ok_or_else(|| bad("`[` without `]`"))?;
                (
                    &rest[..i],
                    Some(&rest[i + 1..close]),
                    rest[close + 1..].trim(),
                )
            }
            Some(i) => (&rest[..i], None, rest[i..].trim()),
            None => (rest, None, ""),
        };
        let elem = Elem::parse(ty.trim())
            .ok_or_else(|| bad(&format!("`{}` is not f32, f16, u32 or i32", ty.trim())))?;
        let init = if let Some(values) = init_text.strip_prefix('=') {
            let v: Vec<String> = values
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            if v.is_empty() {
                return Err(bad("no values after `=`"));
            }
            Init::Values(v)
        } else if let Some(path) = init_text.strip_prefix("file:") {
            Init::File(path.trim().into(), None)
        } else {
            match init_text {
                "" if access == Access::Read => Init::Random,
                "" if access == Access::ReadWrite => Init::Zeros,
                "" => return Err(bad("a uniform needs its values (`= V, V, ...`)")),
                "random" => Init::Random,
                "zeros" => Init::Zeros,
                "ones" => Init::Ones,
                other => {
                    return Err(bad(&format!(
                        "`{other}` is not random, zeros, ones, file:PATH or = V, ..."
                    )));
                }
            }
        };
        let count = match (count, &init) {
            (Some(c), _) => Expr::from(c),
            (None, Init::Values(v)) => Expr::Int(v.len() as u64),
            (None, _) => return Err(bad("no length: write TYPE[COUNT]")),
        };
        Ok(BindingSpec {
            access,
            elem,
            count,
            init,
        })
    }

    /// Its bytes for `elements` elements: whole words (a uniform: whole 16 bytes).
    pub fn bytes(&self, elements: u64) -> u64 {
        let b = (elements * self.elem.size()).next_multiple_of(4);
        if self.access == Access::Uniform {
            b.next_multiple_of(16)
        } else {
            b
        }
    }
}
