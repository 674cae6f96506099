//! # tokenscope-kernel-spec
//!
//! What a developer's own GPU kernel is (`tokenscope kernels --shader`, the page's
//! picked kernel): its spec ([`UserSpec`], TOML or JSON beside the shader, and the
//! command line), its bindings ([`BindingSpec`], one line each), the integer
//! expressions its sizes are written in ([`expr`]), and each of its parameter sets
//! made concrete ([`UserKernel::instance`]). No file is read and no GPU touched
//! here: the CLI reads the files, the page picks them, `kernel-harness` runs the
//! kernel.

mod binding;
pub mod expr;
mod kernel;
mod picked;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use binding::{Access, BindingSpec, Elem, Init};
pub use expr::Vars;
pub use kernel::{Instance, Source, UserKernel};

/// Most parameter sets one kernel may ask for (every combination of the
/// parameters' values).
pub const MAX_PARAM_SETS: usize = 64;

/// Default check tolerance: `|gpu - reference| <= tolerance * max(1, |reference|)`.
pub const DEFAULT_TOLERANCE: f64 = 1e-3;

/// A number, or an integer expression over the spec's values and parameters
/// ([`expr`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Expr {
    /// A literal.
    Int(u64),
    /// An expression (`cdiv(N, WG)`).
    Text(String),
}

impl Expr {
    /// Its value with `vars`.
    pub fn eval(&self, vars: &Vars) -> Result<u64, String> {
        match self {
            Expr::Int(v) => Ok(*v),
            Expr::Text(t) => expr::eval(t, vars),
        }
    }
}

impl std::fmt::Display for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expr::Int(v) => write!(f, "{v}"),
            Expr::Text(t) => f.write_str(t),
        }
    }
}

impl From<&str> for Expr {
    fn from(s: &str) -> Self {
        s.trim()
            .parse()
            .map_or_else(|_| Expr::Text(s.trim().into()), Expr::Int)
    }
}

/// What a user's kernel is, as its spec file says (every field optional there;
/// the command line fills or overrides them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserSpec {
    /// Entry point [default: `main`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// Workgroups to dispatch, x[, y[, z]].
    #[serde(default)]
    pub dispatch: Vec<Expr>,
    /// Named constants: in expressions, and in the shader as `{{NAME}}`.
    #[serde(default)]
    pub values: BTreeMap<String, u64>,
    /// Parameters searched: every combination runs, each in the shader as
    /// `{{NAME}}` (a parameter with one value is a constant).
    #[serde(default)]
    pub params: BTreeMap<String, Vec<u64>>,
    /// The bindings of `@group(0)`, in binding order, one line each
    /// ([`BindingSpec::parse`]): `read f32[M*K] random`.
    #[serde(default)]
    pub bindings: Vec<String>,
    /// Bytes one dispatch moves [default: every storage binding read once].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Expr>,
    /// FLOPs of one dispatch (a multiply-add counts 2) [default: 0].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<Expr>,
    /// The output's check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckSpec>,
}

impl UserSpec {
    /// Reads a spec: JSON when `file_name` ends in `.json`, else TOML. The error
    /// names the file and, from the parser, the line.
    pub fn parse(file_name: &str, text: &str) -> Result<UserSpec, String> {
        if file_name.ends_with(".json") {
            serde_json::from_str(text).map_err(|e| format!("spec {file_name}: {e}"))
        } else {
            toml::from_str(text).map_err(|e| format!("spec {file_name}: {e}"))
        }
    }
}

/// How the output is checked: one binding against a reference shader's (run on
/// the same inputs) or against a file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    /// The binding compared (a `read_write` one).
    pub binding: usize,
    /// A WGSL file computing the same output the plain way (same bindings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The reference's dispatch [default: the kernel's].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_dispatch: Vec<Expr>,
    /// A file of the expected output (little-endian, the binding's type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
    /// `|gpu - expected| <= tolerance * max(1, |expected|)` [default: 1e-3].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<f64>,
}

#[cfg(test)]
mod tests;
