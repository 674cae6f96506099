//! A user's kernel checked whole, and each of its parameter sets made concrete.

use std::collections::BTreeMap;

use crate::{Access, BindingSpec, Expr, Init, MAX_PARAM_SETS, UserSpec, Vars};

/// WGSL text and the name it goes by.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// The file's name (`matmul_tiled.wgsl`).
    pub name: String,
    /// Its text.
    pub text: String,
}

/// A user's kernel, checked: its shader, spec and parsed bindings, and the
/// check's reference shader or expected bytes.
#[derive(Debug, Clone)]
pub struct UserKernel {
    /// Its name in the report (the shader's file name without `.wgsl`).
    pub name: String,
    /// The shader.
    pub shader: Source,
    /// The spec.
    pub spec: UserSpec,
    /// Its bindings, parsed.
    pub bindings: Vec<BindingSpec>,
    /// The check's reference shader.
    pub reference: Option<Source>,
    /// The check's expected output.
    pub expect: Option<Vec<u8>>,
}

/// One parameter set made concrete: every expression evaluated.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Values and this set's parameters.
    pub vars: Vars,
    /// `WG=64 TILE=8` (empty without parameters).
    pub label: String,
    /// Elements of each binding.
    pub elements: Vec<u64>,
    /// Workgroups dispatched.
    pub dispatch: [u32; 3],
    /// The reference's.
    pub reference_dispatch: [u32; 3],
    /// Bytes one dispatch moves.
    pub bytes: u64,
    /// FLOPs of one dispatch.
    pub flops: u64,
}

impl UserKernel {
    /// Checks a kernel: its bindings parse, its dispatch has 1 to 3 sizes, its
    /// values and parameters do not share a name, its parameter sets number at
    /// most [`MAX_PARAM_SETS`], its check names a `read_write` binding and one
    /// reference (shader or file). `files` gives the bytes of each `file:PATH` a
    /// binding names.
    pub fn new(
        shader: Source,
        spec: UserSpec,
        reference: Option<Source>,
        expect: Option<Vec<u8>>,
        files: &BTreeMap<String, Vec<u8>>,
    ) -> Result<UserKernel, String> {
        let name = shader
            .name
            .strip_suffix(".wgsl")
            .unwrap_or(&shader.name)
            .to_string();
        if spec.bindings.is_empty() {
            return Err("no bindings: declare them in the spec or with --binding".into());
        }
        let mut bindings = Vec::new();
        for line in &spec.bindings {
            let mut b = BindingSpec::parse(line)?;
            if let Init::File(path, bytes) = &mut b.init {
                *bytes = Some(std::sync::Arc::new(
                    files
                        .get(path)
                        .cloned()
                        .ok_or_else(|| format!("file:{path} was not read"))?,
                ));
            }
            bindings.push(b);
        }
        if !(1..=3).contains(&spec.dispatch.len()) {
            return Err(format!(
                "the dispatch needs 1 to 3 workgroup counts (x, y, z), not {}",
                spec.dispatch.len()
            ));
        }
        if let Some(n) = spec.params.keys().find(|n| spec.values.contains_key(*n)) {
            return Err(format!("`{n}` is both a value and a parameter"));
        }
        if let Some((n, _)) = spec.params.iter().find(|(_, v)| v.is_empty()) {
            return Err(format!("parameter `{n}` has no values"));
        }
        let sets: usize = spec.params.values().map(Vec::len).product();
        if sets > MAX_PARAM_SETS {
            return Err(format!(
                "{sets} parameter sets; at most {MAX_PARAM_SETS} (fewer values per parameter)"
            ));
        }
        if let Some(c) = &spec.check {
            let b = bindings.get(c.binding).ok_or_else(|| {
                format!(
                    "the check's binding {} does not exist ({} bindings)",
                    c.binding,
                    bindings.len()
                )
            })?;
            if b.access != Access::ReadWrite {
                return Err(format!(
                    "the check's binding {} is not read_write: the kernel cannot write it",
                    c.binding
                ));
            }
            match (reference.is_some(), expect.is_some()) {
                (true, true) => {
                    return Err("the check has both a reference shader and a file".into());
                }
                (false, false) => {
                    return Err("the check needs a reference shader or a file".into());
                }
                _ => {}
            }
            if c.tolerance.is_some_and(|t| t.is_nan() || t < 0.0) {
                return Err("the check's tolerance must be 0 or more".into());
            }
        }
        let kernel = UserKernel {
            name,
            shader,
            spec,
            bindings,
            reference,
            expect,
        };
        // Every expression of every set evaluates (before any GPU work).
        for set in 0..sets {
            kernel
                .instance(set)
                .map_err(|e| match kernel.param_sets()[set].len() {
                    0 => e,
                    _ => format!(
                        "parameter set {}: {e}",
                        kernel.param_sets()[set]
                            .iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    ),
                })?;
        }
        Ok(kernel)
    }

    /// Every parameter set: each combination of the parameters' values (the first
    /// parameter by name varying slowest), one empty set without parameters.
    pub fn param_sets(&self) -> Vec<BTreeMap<String, u64>> {
        let mut sets = vec![BTreeMap::new()];
        for (name, values) in &self.spec.params {
            sets = sets
                .into_iter()
                .flat_map(|set| {
                    values.iter().map(move |v| {
                        let mut s = set.clone();
                        s.insert(name.clone(), *v);
                        s
                    })
                })
                .collect();
        }
        sets
    }

    /// Parameter set `set` made concrete.
    pub fn instance(&self, set: usize) -> Result<Instance, String> {
        let params = self
            .param_sets()
            .into_iter()
            .nth(set)
            .ok_or_else(|| format!("no parameter set {set}"))?;
        let label = params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        let mut vars = self.spec.values.clone();
        vars.extend(params);
        let dims = |exprs: &[Expr], what: &str| -> Result<[u32; 3], String> {
            let mut d = [1u32; 3];
            for (i, e) in exprs.iter().enumerate() {
                let v = e.eval(&vars).map_err(|m| format!("{what}: {m}"))?;
                d[i] = u32::try_from(v)
                    .ok()
                    .filter(|&v| v > 0)
                    .ok_or_else(|| format!("{what} `{e}` is {v}: must be 1 to 2^32 - 1"))?;
            }
            Ok(d)
        };
        let dispatch = dims(&self.spec.dispatch, "dispatch")?;
        let reference_dispatch = match &self.spec.check {
            Some(c) if !c.reference_dispatch.is_empty() => {
                dims(&c.reference_dispatch, "reference dispatch")?
            }
            _ => dispatch,
        };
        let mut elements = Vec::new();
        for (i, b) in self.bindings.iter().enumerate() {
            let n = b
                .count
                .eval(&vars)
                .map_err(|m| format!("binding {i}'s length: {m}"))?;
            if n == 0 {
                return Err(format!("binding {i} has no elements (`{}`)", b.count));
            }
            elements.push(n);
        }
        let read_once: u64 = self
            .bindings
            .iter()
            .zip(&elements)
            .filter(|(b, _)| b.access != Access::Uniform)
            .map(|(b, n)| n * b.elem.size())
            .sum();
        let bytes = match &self.spec.bytes {
            Some(e) => e.eval(&vars).map_err(|m| format!("bytes: {m}"))?,
            None => read_once,
        };
        let flops = match &self.spec.flops {
            Some(e) => e.eval(&vars).map_err(|m| format!("flops: {m}"))?,
            None => 0,
        };
        Ok(Instance {
            vars,
            label,
            elements,
            dispatch,
            reference_dispatch,
            bytes,
            flops,
        })
    }
}
