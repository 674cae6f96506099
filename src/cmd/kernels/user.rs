//! `kernels --shader`: a developer's own kernel from its WGSL file, its spec
//! (TOML or JSON beside it, or --spec) and the command line, with every file it
//! names read here (the harness reads none). Paths in a spec are relative to the
//! spec; paths on the command line to the working directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use tokenscope_kernel_spec::{BindingSpec, CheckSpec, Expr, Init, Source, UserKernel, UserSpec};

use super::KernelsArgs;

/// The kernel `--shader` names, or `None` without it.
pub fn load(args: &KernelsArgs) -> anyhow::Result<Option<UserKernel>> {
    let Some(shader_path) = &args.shader else {
        return Ok(None);
    };
    let shader = read_source(shader_path, "--shader")?;
    let (mut spec, spec_dir) = match spec_path(args, shader_path)? {
        Some(p) => (read_spec(&p)?, p.parent().map(Path::to_path_buf)),
        None => (UserSpec::default(), None),
    };
    let in_spec = |p: &str| match &spec_dir {
        Some(dir) if Path::new(p).is_relative() => dir.join(p),
        _ => PathBuf::from(p),
    };
    // Spec paths, relative to the spec; then the command line over the spec.
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut bindings = Vec::new();
    let from_cli = !args.bindings.is_empty();
    for line in if from_cli {
        &args.bindings
    } else {
        &spec.bindings
    } {
        let b = BindingSpec::parse(line).map_err(|e| anyhow::anyhow!("{e}"))?;
        if let Init::File(path, _) = &b.init {
            let full = if from_cli {
                PathBuf::from(path)
            } else {
                in_spec(path)
            };
            let bytes = std::fs::read(&full)
                .with_context(|| format!("binding `{line}`: cannot read {}", full.display()))?;
            files.insert(path.clone(), bytes);
        }
        bindings.push(line.clone());
    }
    spec.bindings = bindings;
    if !args.dispatch.is_empty() {
        spec.dispatch = args
            .dispatch
            .iter()
            .map(|d| Expr::from(d.as_str()))
            .collect();
    }
    for p in &args.params {
        let (name, values) = p
            .split_once('=')
            .with_context(|| format!("--param {p}: expected NAME=V or NAME=V,V,.."))?;
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            bail!("--param {p}: `{name}` is not a name (letters, digits, _)");
        }
        let values: Vec<u64> = values
            .split(',')
            .map(|v| {
                v.trim()
                    .parse::<u64>()
                    .with_context(|| format!("--param {p}: `{}` is not a whole number", v.trim()))
            })
            .collect::<anyhow::Result<_>>()?;
        spec.values.remove(name);
        spec.params.remove(name);
        match values[..] {
            [one] => {
                spec.values.insert(name.into(), one);
            }
            _ => {
                spec.params.insert(name.into(), values);
            }
        }
    }
    if let Some(e) = &args.entry {
        spec.entry = Some(e.clone());
    }
    if let Some(b) = &args.bytes {
        spec.bytes = Some(Expr::from(b.as_str()));
    }
    if let Some(f) = &args.flops {
        spec.flops = Some(Expr::from(f.as_str()));
    }
    // The check: its files, from the command line or the spec.
    let mut reference_path = None;
    let mut expect_path = None;
    if let Some(c) = &spec.check {
        reference_path = c.reference.as_deref().map(&in_spec);
        expect_path = c.expect.as_deref().map(&in_spec);
    }
    if let Some(binding) = args.check_binding {
        spec.check = Some(CheckSpec {
            binding,
            ..spec.check.take().unwrap_or_default()
        });
    }
    if args.reference.is_some() || args.expect.is_some() {
        reference_path = args.reference.clone();
        expect_path = args.expect.clone();
    }
    match &mut spec.check {
        Some(c) => {
            if let Some(t) = args.tolerance {
                c.tolerance = Some(t);
            }
        }
        None if args.reference.is_some() || args.expect.is_some() || args.tolerance.is_some() => {
            bail!(
                "--reference, --expect and --tolerance need --check-binding (or a check in the spec)"
            )
        }
        None => {}
    }
    let reference = match &reference_path {
        Some(p) => Some(read_source(p, "the check's reference")?),
        None => None,
    };
    let expect = match &expect_path {
        Some(p) => Some(std::fs::read(p).with_context(|| {
            format!("the check's expected output: cannot read {}", p.display())
        })?),
        None => None,
    };
    if spec.dispatch.is_empty() {
        bail!(
            "--shader {}: no dispatch; give --dispatch X[,Y,Z] or `dispatch` in its spec ({})",
            shader_path.display(),
            spec_hint(shader_path)
        );
    }
    let kernel = UserKernel::new(shader, spec, reference, expect, &files)
        .map_err(|e| anyhow::anyhow!("--shader {}: {e}", shader_path.display()))?;
    Ok(Some(kernel))
}

/// The spec: --spec, else FILE.toml or FILE.json beside the shader, else none.
fn spec_path(args: &KernelsArgs, shader: &Path) -> anyhow::Result<Option<PathBuf>> {
    if let Some(p) = &args.spec {
        if !p.is_file() {
            bail!("--spec {}: no such file", p.display());
        }
        return Ok(Some(p.clone()));
    }
    Ok(["toml", "json"]
        .iter()
        .map(|ext| shader.with_extension(ext))
        .find(|p| p.is_file()))
}

fn spec_hint(shader: &Path) -> String {
    format!("{} or --spec", shader.with_extension("toml").display())
}

fn read_spec(path: &Path) -> anyhow::Result<UserSpec> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("spec {}: cannot read", path.display()))?;
    UserSpec::parse(&path.display().to_string(), &text).map_err(|e| anyhow::anyhow!("{e}"))
}

fn read_source(path: &Path, what: &str) -> anyhow::Result<Source> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{what} {}: cannot read", path.display()))?;
    Ok(Source {
        name: path.file_name().map_or_else(
            || "kernel.wgsl".into(),
            |n| n.to_string_lossy().into_owned(),
        ),
        text,
    })
}
