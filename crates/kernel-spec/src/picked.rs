//! A kernel from files picked together (the page's file input): found by name.

use std::collections::BTreeMap;

use crate::{BindingSpec, Init, Source, UserKernel, UserSpec};

/// The last part of a path (`data/x.bin` -> `x.bin`): how picked files are named.
fn base_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

impl UserKernel {
    /// A kernel from files picked together (the page's file input): one `.wgsl`
    /// kernel with its spec (`NAME.toml` or `NAME.json`), and every file the spec
    /// names, found by name. With several `.wgsl` files, the kernel is the one
    /// with a spec.
    pub fn from_picked(files: &BTreeMap<String, Vec<u8>>) -> Result<UserKernel, String> {
        let text = |name: &str| {
            String::from_utf8(files[name].clone()).map_err(|_| format!("{name} is not UTF-8 text"))
        };
        let stem = |n: &str| {
            n.rsplit_once('.')
                .map_or(n.to_string(), |(s, _)| s.to_string())
        };
        let specs: Vec<&String> = files
            .keys()
            .filter(|n| n.ends_with(".toml") || n.ends_with(".json"))
            .collect();
        let shaders: Vec<&String> = files.keys().filter(|n| n.ends_with(".wgsl")).collect();
        let with_spec: Vec<&String> = shaders
            .iter()
            .copied()
            .filter(|s| specs.iter().any(|p| stem(p) == stem(s)))
            .collect();
        let shader = match (&shaders[..], &with_spec[..]) {
            ([], _) => return Err("no .wgsl file among the files picked".into()),
            ([one], _) | (_, [one]) => *one,
            (_, []) => {
                return Err(
                    "several .wgsl files and no spec (NAME.toml or NAME.json) saying which is the kernel"
                        .into(),
                );
            }
            _ => return Err("several .wgsl files with a spec: pick one kernel at a time".into()),
        };
        let spec = match specs.iter().find(|p| stem(p) == stem(shader)) {
            Some(p) => UserSpec::parse(p, &text(p)?)?,
            None => UserSpec::default(),
        };
        let find = |path: &str| -> Result<Vec<u8>, String> {
            files
                .get(path)
                .or_else(|| files.get(base_name(path)))
                .cloned()
                .ok_or_else(|| format!("the spec names {path}: pick it too"))
        };
        let mut named = BTreeMap::new();
        for line in &spec.bindings {
            if let Ok(BindingSpec {
                init: Init::File(p, _),
                ..
            }) = BindingSpec::parse(line)
            {
                named.insert(p.clone(), find(&p)?);
            }
        }
        let check = spec.check.clone().unwrap_or_default();
        let reference = match &check.reference {
            Some(p) => Some(Source {
                name: base_name(p).to_string(),
                text: String::from_utf8(find(p)?).map_err(|_| format!("{p} is not UTF-8 text"))?,
            }),
            None => None,
        };
        let expect = check.expect.as_deref().map(find).transpose()?;
        UserKernel::new(
            Source {
                name: shader.clone(),
                text: text(shader)?,
            },
            spec,
            reference,
            expect,
            &named,
        )
        .map_err(|e| format!("{shader}: {e}"))
    }
}
