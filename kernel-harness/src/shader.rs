//! The WGSL sources (`shaders/*.wgsl`, compiled in with `include_str!`) and a small
//! preprocessor for their variants: text in, text out, no GPU (the pipelines are
//! compiled and cached in [`crate::pipeline`]).
//!
//! Preprocessor, line based (like llama.cpp's and web-rwkv's shader templates):
//!
//! - `#ifdef NAME` / `#ifndef NAME` / `#else` / `#endif` keep or drop lines by flag
//!   (`SUBGROUPS`, `SHADER_F16`, `KV_F16`, `GELU`);
//! - `#include file.wgsl` inlines another file of the registry, once: a file already
//!   included in this shader is skipped (helpers shared by two includes);
//! - `{{NAME}}` is replaced by a host value (`ROWS`, `BATCH`, `HEAD_DIM`, ...);
//!   an unknown name, a stray directive or an unbalanced `#ifdef` is an error;
//! - `#unroll i COUNT` ... `#endunroll` repeats its lines COUNT times (a number or
//!   a host value, at most [`MAX_UNROLL`]), with `{{i}}` = `0u`, `1u`, ... in copy
//!   0, 1, ...; blocks nest. WGSL has no unroll hint and naga adds a counter to
//!   every loop, so a loop over a register array (`w[r]`, `acc[i]`) is unrolled
//!   here: its indices become constants, which keeps the array in registers;
//! - `enable f16;` is prepended with `SHADER_F16`, and `enable subgroups;` with
//!   `SUBGROUPS` on the browser's WebGPU (native wgpu enables them by device feature).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use crate::error::{HarnessError, Result};

/// One WGSL file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShaderFile {
    /// File name under `shaders/`.
    pub name: &'static str,
    /// Its text.
    pub source: &'static str,
}

macro_rules! shader {
    ($ident:ident, $file:literal) => {
        #[doc = concat!("`shaders/", $file, "`.")]
        pub const $ident: ShaderFile = ShaderFile {
            name: $file,
            source: include_str!(concat!("../../shaders/", $file)),
        };
    };
}

shader!(FILL, "fill.wgsl");
shader!(BANDWIDTH_READ, "bandwidth_read.wgsl");
shader!(BANDWIDTH_COPY, "bandwidth_copy.wgsl");
shader!(GEMV_DRIVER, "gemv_driver.wgsl");
shader!(GEMV_Q8X, "gemv_q8x.wgsl");
shader!(GEMV_NIBBLES, "gemv_nibbles.wgsl");
shader!(GEMV_LEGACY, "gemv_legacy.wgsl");
shader!(GEMV_KX, "gemv_kx.wgsl");
shader!(GEMV_KSCALES, "gemv_kscales.wgsl");
shader!(GEMV_W16, "gemv_w16.wgsl");
shader!(QUANTIZE_X, "quantize_x.wgsl");
shader!(FMA, "fma.wgsl");
shader!(GEMV_F32, "gemv_f32.wgsl");
shader!(GEMV_F16, "gemv_f16.wgsl");
shader!(GEMV_Q8_0, "gemv_q8_0.wgsl");
shader!(GEMV_Q4_0, "gemv_q4_0.wgsl");
shader!(GEMV_Q4_K, "gemv_q4_k.wgsl");
shader!(GEMV_Q5_K, "gemv_q5_k.wgsl");
shader!(GEMV_Q6_K, "gemv_q6_k.wgsl");
shader!(GEMV_BF16, "gemv_bf16.wgsl");
shader!(GEMV_Q4_1, "gemv_q4_1.wgsl");
shader!(GEMV_Q5_0, "gemv_q5_0.wgsl");
shader!(GEMV_Q5_1, "gemv_q5_1.wgsl");
shader!(ATTENTION_DECODE, "attention_decode.wgsl");
shader!(ATTENTION_COMBINE, "attention_combine.wgsl");
shader!(RMSNORM, "rmsnorm.wgsl");
shader!(SILU_MUL, "silu_mul.wgsl");
shader!(ADD, "add.wgsl");
shader!(ROPE_KV, "rope_kv.wgsl");

/// Every file, for lookups by `#include` and for tests.
pub const ALL: &[ShaderFile] = &[
    FILL,
    BANDWIDTH_READ,
    BANDWIDTH_COPY,
    GEMV_DRIVER,
    GEMV_Q8X,
    GEMV_NIBBLES,
    GEMV_LEGACY,
    GEMV_KX,
    GEMV_KSCALES,
    GEMV_W16,
    QUANTIZE_X,
    FMA,
    GEMV_F32,
    GEMV_F16,
    GEMV_Q8_0,
    GEMV_Q4_0,
    GEMV_Q4_K,
    GEMV_Q5_K,
    GEMV_Q6_K,
    GEMV_BF16,
    GEMV_Q4_1,
    GEMV_Q5_0,
    GEMV_Q5_1,
    ATTENTION_DECODE,
    ATTENTION_COMBINE,
    RMSNORM,
    SILU_MUL,
    ADD,
    ROPE_KV,
];

/// The `WG_SIZE` constant of a preprocessed shader (`const WG_SIZE: u32 = 256u;`).
pub fn workgroup_size(source: &str) -> Option<u32> {
    source.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("const WG_SIZE: u32 =")?;
        let digits: String = rest
            .trim()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

/// Flags and values selecting a shader variant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Defines {
    flags: BTreeSet<&'static str>,
    values: BTreeMap<Cow<'static, str>, String>,
}

impl Defines {
    /// No flags, no values.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name` when `on`.
    pub fn flag(mut self, name: &'static str, on: bool) -> Self {
        if on {
            self.flags.insert(name);
        }
        self
    }

    /// Sets the value substituted for `{{name}}`.
    pub fn value(mut self, name: impl Into<Cow<'static, str>>, value: impl ToString) -> Self {
        self.values.insert(name.into(), value.to_string());
        self
    }

    /// Whether `name` is set.
    pub fn has(&self, name: &str) -> bool {
        self.flags.contains(name)
    }

    pub(crate) fn key(&self) -> String {
        let flags: Vec<&str> = self.flags.iter().copied().collect();
        let values: Vec<String> = self
            .values
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{}|{}", flags.join(","), values.join(","))
    }
}

fn find(name: &str) -> Option<ShaderFile> {
    ALL.iter().copied().find(|f| f.name == name)
}

fn substitute(file: &str, line: &str, defines: &Defines, lineno: usize) -> Result<String> {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| HarnessError::Shader {
            shader: file.into(),
            message: format!("line {lineno}: unclosed `{{{{`"),
        })?;
        let name = after[..end].trim();
        let value = defines
            .values
            .get(name)
            .ok_or_else(|| HarnessError::Shader {
                shader: file.into(),
                message: format!("line {lineno}: no value for `{{{{{name}}}}}`"),
            })?;
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Most copies an `#unroll` makes.
pub const MAX_UNROLL: u32 = 64;

/// The directive word of a line (`unroll` for `#unroll i 4`), if it is one.
fn directive_word(line: &str) -> Option<&str> {
    line.trim_start()
        .strip_prefix('#')
        .map(|d| d.split_whitespace().next().unwrap_or(""))
}

/// The index of the `#endunroll` closing the `#unroll` at `start`.
fn unroll_end(lines: &[&str], start: usize) -> Option<usize> {
    let mut open = 0usize;
    for (i, line) in lines.iter().enumerate().skip(start + 1) {
        match directive_word(line) {
            Some("unroll") => open += 1,
            Some("endunroll") if open == 0 => return Some(i),
            Some("endunroll") => open -= 1,
            _ => {}
        }
    }
    None
}

/// One line of WGSL from an unrolled copy, for a caller keeping line numbers:
/// `//` comments dropped (WGSL has no string literals, so `//` always starts
/// one), the lines joined by spaces.
fn one_line(copy: &str) -> String {
    copy.lines()
        .map(|l| l.split("//").next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `#unroll var COUNT` with body `body` (its lines), expanded into `out`.
#[allow(clippy::too_many_arguments)]
fn unroll(
    name: &str,
    (var, count): (&str, &str),
    body: &str,
    defines: &Defines,
    depth: usize,
    seen: &mut BTreeSet<&'static str>,
    out: &mut String,
    keep_lines: bool,
) -> std::result::Result<(), String> {
    let n: u32 = count
        .parse()
        .ok()
        .or_else(|| defines.values.get(count).and_then(|v| v.parse().ok()))
        .ok_or_else(|| format!("#unroll count `{count}` is neither a number nor a value"))?;
    if n > MAX_UNROLL {
        return Err(format!(
            "#unroll {var} {count}: {n} copies, more than {MAX_UNROLL}"
        ));
    }
    for k in 0..n {
        let d = defines.clone().value(var.to_string(), format!("{k}u"));
        let mut copy = String::new();
        expand((name, body), &d, depth, seen, &mut copy, false).map_err(|e| match e {
            HarnessError::Shader { message, .. } => format!("in #unroll {var}: {message}"),
            other => other.to_string(),
        })?;
        if keep_lines {
            out.push_str(&one_line(&copy));
            out.push(' ');
        } else {
            out.push_str(&copy);
        }
    }
    Ok(())
}

fn expand(
    (name, source): (&str, &str),
    defines: &Defines,
    depth: usize,
    seen: &mut BTreeSet<&'static str>,
    out: &mut String,
    keep_lines: bool,
) -> Result<()> {
    if depth > 4 {
        return Err(HarnessError::Shader {
            shader: name.into(),
            message: "#include nested too deeply".into(),
        });
    }
    // Stack of (this branch active, any enclosing branch inactive, seen #else).
    let mut stack: Vec<(bool, bool, bool)> = Vec::new();
    let active = |stack: &Vec<(bool, bool, bool)>| stack.iter().all(|(on, _, _)| *on);
    let lines: Vec<&str> = source.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let lineno = i + 1;
        i += 1;
        let trimmed = line.trim_start();
        if let Some(directive) = trimmed.strip_prefix('#') {
            let mut parts = directive.split_whitespace();
            let word = parts.next().unwrap_or("");
            let arg = parts.next();
            let err = |message: String| HarnessError::Shader {
                shader: name.into(),
                message: format!("line {lineno}: {message}"),
            };
            match (word, arg) {
                ("ifdef", Some(name)) => {
                    let outer = !active(&stack);
                    stack.push((defines.has(name), outer, false));
                }
                ("ifndef", Some(name)) => {
                    let outer = !active(&stack);
                    stack.push((!defines.has(name), outer, false));
                }
                ("else", None) => {
                    let top = stack
                        .last_mut()
                        .ok_or_else(|| err("#else without #ifdef".into()))?;
                    if top.2 {
                        return Err(err("second #else".into()));
                    }
                    *top = (!top.0, top.1, true);
                }
                ("endif", None) => {
                    stack
                        .pop()
                        .ok_or_else(|| err("#endif without #ifdef".into()))?;
                }
                ("unroll", Some(var)) => {
                    let count = parts
                        .next()
                        .ok_or_else(|| err("#unroll needs a name and a count".into()))?;
                    let end = unroll_end(&lines, lineno - 1)
                        .ok_or_else(|| err("#unroll without #endunroll".into()))?;
                    if active(&stack) {
                        let body = lines[lineno..end].join("\n");
                        unroll(
                            name,
                            (var, count),
                            &body,
                            defines,
                            depth,
                            seen,
                            out,
                            keep_lines,
                        )
                        .map_err(err)?;
                    }
                    if keep_lines {
                        // The copies on the #unroll's line, the block's other lines empty.
                        out.push_str(&"\n".repeat(end - lineno + 1));
                    }
                    i = end + 1;
                }
                ("include", Some(name)) => {
                    if active(&stack) {
                        let inc = find(name)
                            .ok_or_else(|| err(format!("#include of unknown file `{name}`")))?;
                        if seen.insert(inc.name) {
                            expand((inc.name, inc.source), defines, depth + 1, seen, out, false)?;
                        }
                    }
                }
                _ => return Err(err(format!("unknown directive `#{}`", directive.trim()))),
            }
            if keep_lines {
                out.push('\n');
            }
            continue;
        }
        if active(&stack) {
            out.push_str(&substitute(name, line, defines, lineno)?);
            out.push('\n');
        } else if keep_lines {
            out.push('\n');
        }
    }
    if !stack.is_empty() {
        return Err(HarnessError::Shader {
            shader: name.into(),
            message: "#ifdef without #endif".into(),
        });
    }
    Ok(())
}

/// Expands a shader for `defines`. `web` adds `enable subgroups;` for the browser.
pub fn preprocess(file: ShaderFile, defines: &Defines, web: bool) -> Result<String> {
    let mut out = String::new();
    if defines.has("SHADER_F16") {
        out.push_str("enable f16;\n");
    }
    if web && defines.has("SUBGROUPS") {
        out.push_str("enable subgroups;\n");
    }
    expand(
        (file.name, file.source),
        defines,
        0,
        &mut BTreeSet::from([file.name]),
        &mut out,
        false,
    )?;
    Ok(out)
}

/// Expands WGSL text that is not one of tokenscope's files (a user's kernel,
/// `kernels --shader`): the same directives, `{{NAME}}` values and flags; `name`
/// names it in errors. Its lines keep their numbers (a dropped line stays,
/// empty; an `enable` is added at the start of line 1, and only where the text
/// has none), so that the compiler's errors point at the user's own lines.
pub fn preprocess_source(name: &str, source: &str, defines: &Defines, web: bool) -> Result<String> {
    let mut body = String::new();
    expand(
        (name, source),
        defines,
        0,
        &mut BTreeSet::new(),
        &mut body,
        true,
    )?;
    let enables = |ext: &str| {
        body.lines()
            .any(|l| l.trim_start().starts_with("enable") && l.contains(ext))
    };
    let mut out = String::new();
    if defines.has("SHADER_F16") && !enables("f16") {
        out.push_str("enable f16; ");
    }
    if web && defines.has("SUBGROUPS") && !enables("subgroups") {
        out.push_str("enable subgroups; ");
    }
    out.push_str(&body);
    Ok(out)
}

/// The bindings of a bind group, whole buffers and ranges alike:
/// `ctx.bind(&k, "label", &bufs![&params, &slice, out])`.
#[macro_export]
macro_rules! bufs {
    ($($b:expr),* $(,)?) => {
        [$($crate::arena::Res::from($b)),*]
    };
}

/// How a kernel uses one binding (binding index = position in the list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// `var<uniform>`.
    Uniform,
    /// `var<storage, read>`.
    Read,
    /// `var<storage, read_write>`.
    ReadWrite,
}

/// A compiled kernel: pipeline and its bind group layout.
#[derive(Debug)]
pub struct Kernel {
    /// The pipeline.
    pub pipeline: wgpu::ComputePipeline,
    /// Layout of bind group 0.
    pub layout: wgpu::BindGroupLayout,
    /// Label (file and variant).
    pub label: String,
}

/// Compiled kernels by file and variant.
#[derive(Debug, Default)]
pub struct PipelineCache {
    pub(crate) map: Mutex<HashMap<String, Arc<Kernel>>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: ShaderFile = ShaderFile {
        name: "test.wgsl",
        source: "a\n#ifdef X\nb {{N}}\n#ifndef Y\nc\n#else\nd\n#endif\n#else\ne\n#endif\nf\n",
    };

    #[test]
    fn branches_and_values() {
        let d = Defines::new().flag("X", true).value("N", 7);
        assert_eq!(preprocess(T, &d, false).unwrap(), "a\nb 7\nc\nf\n");
        let d = Defines::new().flag("X", true).flag("Y", true).value("N", 7);
        assert_eq!(preprocess(T, &d, false).unwrap(), "a\nb 7\nd\nf\n");
        assert_eq!(preprocess(T, &Defines::new(), false).unwrap(), "a\ne\nf\n");
        let f16 = Defines::new()
            .flag("SHADER_F16", true)
            .flag("SUBGROUPS", true);
        assert!(
            preprocess(T, &f16, true)
                .unwrap()
                .starts_with("enable f16;\nenable subgroups;\n")
        );
    }

    #[test]
    fn errors_name_the_problem() {
        let d = Defines::new().flag("X", true);
        let e = preprocess(T, &d, false).unwrap_err().to_string();
        assert!(e.contains("{{N}}") && e.contains("line 3"), "{e}");
        let bad = ShaderFile {
            name: "bad.wgsl",
            source: "#ifdef X\n",
        };
        assert!(
            preprocess(bad, &d, false)
                .unwrap_err()
                .to_string()
                .contains("without #endif")
        );
        let bad = ShaderFile {
            name: "bad.wgsl",
            source: "#define X\n",
        };
        assert!(
            preprocess(bad, &d, false)
                .unwrap_err()
                .to_string()
                .contains("#define")
        );
    }

    #[test]
    fn a_users_shader_keeps_its_line_numbers() {
        let d = Defines::new()
            .flag("X", true)
            .flag("SHADER_F16", true)
            .value("N", 7);
        let src = preprocess_source("mine.wgsl", T.source, &d, false).unwrap();
        assert_eq!(src, "enable f16; a\n\nb 7\n\nc\n\n\n\n\n\n\nf\n");
        assert_eq!(src.lines().count(), T.source.lines().count());
        let own = "enable f16;\nx\n";
        assert_eq!(preprocess_source("mine.wgsl", own, &d, false).unwrap(), own);
    }

    #[test]
    fn unroll_repeats_its_lines_with_constant_indices() {
        const U: ShaderFile = ShaderFile {
            name: "u.wgsl",
            source: "a\n#unroll r ROWS\nw[{{r}}] = 1;\n#unroll c 2 // inner\nacc[{{r}} * 2u + {{c}}] += w[{{r}}]; // fma\n#endunroll\n#endunroll\nz\n",
        };
        let d = Defines::new().value("ROWS", 2);
        assert_eq!(
            preprocess(U, &d, false).unwrap(),
            "a\nw[0u] = 1;\nacc[0u * 2u + 0u] += w[0u]; // fma\nacc[0u * 2u + 1u] += w[0u]; // fma\n\
             w[1u] = 1;\nacc[1u * 2u + 0u] += w[1u]; // fma\nacc[1u * 2u + 1u] += w[1u]; // fma\nz\n"
        );
        // Zero copies: nothing. A user's shader keeps its line numbers: the copies on
        // the #unroll's line, without comments, the block's other lines empty.
        let none = Defines::new().value("ROWS", 0);
        assert_eq!(preprocess(U, &none, false).unwrap(), "a\nz\n");
        let mine = preprocess_source("mine.wgsl", U.source, &d, false).unwrap();
        assert_eq!(mine.lines().count(), U.source.lines().count());
        assert_eq!(
            mine.lines().nth(1).unwrap().trim_end(),
            "w[0u] = 1; acc[0u * 2u + 0u] += w[0u]; acc[0u * 2u + 1u] += w[0u]; \
             w[1u] = 1; acc[1u * 2u + 0u] += w[1u]; acc[1u * 2u + 1u] += w[1u];"
        );
        assert_eq!(mine.lines().last(), Some("z"));
        // Errors: no #endunroll, a count that is no number, too many copies, a stray
        // #endunroll; an error inside a copy says so.
        for (source, says) in [
            ("#unroll r 2\nx\n", "without #endunroll"),
            ("#unroll r K\nx\n#endunroll\n", "`K` is neither"),
            ("#unroll r 65\nx\n#endunroll\n", "more than 64"),
            ("#endunroll\n", "unknown directive"),
            ("#unroll r\n#endunroll\n", "a name and a count"),
            ("#unroll r 2\n{{Q}}\n#endunroll\n", "in #unroll r"),
        ] {
            let e = preprocess_source("mine.wgsl", source, &d, false)
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{source:?}: {e}");
        }
    }

    #[test]
    fn reads_the_workgroup_size() {
        assert_eq!(
            workgroup_size("x\n  const WG_SIZE: u32 = 128u; // c\n"),
            Some(128)
        );
        assert_eq!(workgroup_size("const WG_SIZE: u32 = 64;"), Some(64));
        assert_eq!(workgroup_size("const N: u32 = 64u;"), None);
    }

    /// Files that are only included by kernels (never compiled alone).
    const INCLUDES: &[&str] = &[
        "gemv_driver.wgsl",
        "gemv_q8x.wgsl",
        "gemv_nibbles.wgsl",
        "gemv_legacy.wgsl",
        "gemv_kx.wgsl",
        "gemv_kscales.wgsl",
        "gemv_w16.wgsl",
    ];

    /// A value for every `{{NAME}}` any shader uses.
    fn any_variant(wg: u32) -> Defines {
        let mut d = Defines::new();
        for (name, value) in [
            ("WG_SIZE", wg),
            ("ROWS", 1),
            ("BATCH", 1),
            ("BT", 1),
            ("ACC", 1),
            ("UNROLL", 1),
            ("TEAMS", 1),
            ("PASS", 1),
            ("HEAD_DIM", 128),
            ("GROUP", 4),
            ("LANES", 4),
            ("VEC", 4),
            ("ITERS", 64),
        ] {
            d = d.value(name, value);
        }
        d
    }

    #[test]
    fn every_shader_documents_its_workgroup_size() {
        for f in ALL {
            // Every binding line carries a comment (its shape or meaning), except uniforms.
            for line in f.source.lines().filter(|l| l.contains("var<storage")) {
                assert!(
                    line.contains("//"),
                    "{}: binding without a shape comment: {line}",
                    f.name
                );
            }
            if INCLUDES.contains(&f.name) {
                // Not compiled alone (it uses its includer's definitions): some
                // kernel includes it.
                let line = format!("#include {}", f.name);
                assert!(
                    ALL.iter().any(|k| k.source.contains(&line)),
                    "{} is included by no shader",
                    f.name
                );
                continue;
            }
            // The limit check reads WG_SIZE from the expanded source: a literal, or a
            // variant's value, always a power of two within WebGPU's guaranteed 256.
            for wg in [64, 256] {
                let src = preprocess(*f, &any_variant(wg), false)
                    .unwrap_or_else(|e| panic!("{}: {e}", f.name));
                assert!(src.contains("@workgroup_size(WG_SIZE)"), "{}", f.name);
                let got = workgroup_size(&src)
                    .unwrap_or_else(|| panic!("{}: WG_SIZE is not a literal", f.name));
                assert!(
                    got.is_power_of_two() && (64..=256).contains(&got),
                    "{}: {got}",
                    f.name
                );
            }
        }
    }

    #[test]
    fn a_file_is_included_once() {
        // gemv_q4_k.wgsl reaches gemv_q8x.wgsl through two includes.
        let d = any_variant(128).flag("XQ8", true).flag("SUBGROUPS", true);
        let src = preprocess(GEMV_Q4_K, &d, false).unwrap();
        assert_eq!(src.matches("fn dot16(").count(), 1);
        assert_eq!(src.matches("fn main(").count(), 1);
    }
}
