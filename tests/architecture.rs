//! The layers stay layers: no module of any crate imports, directly or through
//! others, a module that imports it back (docs/architecture.md), and no module's
//! code (before its tests) outgrows one reading.
//!
//! The import graph is read from the code with `syn`: a module is a file; it depends
//! on the file that defines each item it names through `crate::`, `super::` or
//! `self::` (a `use`, or a path in its code), following `pub use` re-exports to the
//! defining file. A module's own `mod` declarations and its `pub use` re-exports of
//! its submodules' items are containment, not dependencies (a facade `mod.rs`
//! re-exports what its children define); any other use of a child's item is a
//! dependency, so a `mod.rs` that defines what its children use and also calls them
//! is a loop. Tests (`#[cfg(test)]` modules) are left out. A loop is
//! a strongly connected component of more than one file; the test names its files and
//! one cycle through them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The crates and their root files.
const CRATES: &[(&str, &str)] = &[
    ("tokenscope-stats", "crates/stats/src/lib.rs"),
    ("tokenscope-hw", "crates/hw/src/lib.rs"),
    ("tokenscope-measure", "crates/measure/src/lib.rs"),
    ("tokenscope-sim", "crates/sim/src/lib.rs"),
    ("tokenscope-workload", "crates/workload/src/lib.rs"),
    (
        "tokenscope-kernel-report",
        "crates/kernel-report/src/lib.rs",
    ),
    ("tokenscope-kernel-spec", "crates/kernel-spec/src/lib.rs"),
    ("tokenscope-quality", "crates/quality/src/lib.rs"),
    ("tokenscope-core", "core/src/lib.rs"),
    ("tokenscope-render", "crates/render/src/lib.rs"),
    ("kernel-harness", "kernel-harness/src/lib.rs"),
    ("tokenscope-loadgen", "crates/loadgen/src/lib.rs"),
    ("tokenscope", "src/main.rs"),
    ("tokenscope-web", "web/src/lib.rs"),
    ("tokenscope-web-gpu", "web-gpu/src/lib.rs"),
    ("tokenscope-web-report", "web-report/src/lib.rs"),
    ("tokenscope-web-quality", "web-quality/src/lib.rs"),
];

/// Most lines of a module's code before its `#[cfg(test)]` part.
const MAX_LINES: usize = 650;

/// The workspace's crates in layers, bottom first (docs/architecture.md): a crate
/// depends only on crates of the layers below its own, so the compiler holds the
/// layers that folder names once only promised.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "numbers and hardware arithmetic",
        &["tokenscope-stats", "tokenscope-hw"],
    ),
    ("one request measured", &["tokenscope-measure"]),
    (
        "what is sent, the simulated server, the kernels' documents and specs",
        &[
            "tokenscope-workload",
            "tokenscope-sim",
            "tokenscope-kernel-report",
            "tokenscope-kernel-spec",
        ],
    ),
    (
        "the report model and its analysis; the quality guard; the GPU kernel harness",
        &["tokenscope-core", "tokenscope-quality", "kernel-harness"],
    ),
    (
        "rendering; native load generation",
        &["tokenscope-render", "tokenscope-loadgen"],
    ),
    (
        "the programs: the CLI and the page's modules",
        &[
            "tokenscope",
            "tokenscope-web",
            "tokenscope-web-gpu",
            "tokenscope-web-report",
            "tokenscope-web-quality",
        ],
    ),
    (
        "the page's run module (the page's crate without its view)",
        &["tokenscope-web-run"],
    ),
];

/// Most lines of code (before each module's tests) in one crate: a crate a
/// newcomer can hold in mind.
const MAX_CRATE_LINES: usize = 12_000;

/// One module: its file, its path in the crate, its children, the items it defines
/// and the names it re-exports.
#[derive(Debug, Default)]
struct Module {
    file: PathBuf,
    children: BTreeMap<String, usize>,
    parent: Option<usize>,
    defines: BTreeSet<String>,
    /// `pub use` (any visibility) name -> the path it stands for, relative to this module.
    reexports: BTreeMap<String, Vec<String>>,
    /// Paths named (uses and paths in code), relative to this module, each with
    /// whether it came from a re-export of this module's own.
    refs: Vec<(Vec<String>, bool)>,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().contains("test"))
    })
}

/// A `#[path = "..."]` attribute's value.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Every path of a use tree, with the name it binds (`None` for a glob).
fn use_paths(
    tree: &syn::UseTree,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            use_paths(&p.tree, next, out);
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix;
            if name == "self" {
                let bound = path.last().cloned();
                out.push((path, bound));
            } else {
                path.push(name.clone());
                out.push((path, Some(name)));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix;
            path.push(r.ident.to_string());
            out.push((path, Some(r.rename.to_string())));
        }
        syn::UseTree::Glob(_) => out.push((prefix, None)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_paths(t, prefix.clone(), out);
            }
        }
    }
}

/// Collects the paths of more than one segment in a module's code (`crate::`,
/// `super::`, `self::`, or starting at a name the module binds, such as a child
/// module; not its use items, which are read separately, nor its nested test
/// modules). Paths into other crates resolve to nothing and are dropped later.
struct PathRefs(Vec<Vec<String>>);

impl<'ast> Visit<'ast> for PathRefs {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segs.len() > 1 && p.leading_colon.is_none() {
            self.0.push(segs);
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_cfg_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_use(&mut self, _: &'ast syn::ItemUse) {}
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // A macro's tokens are not parsed: pick the paths out of them.
        let text = mac.tokens.to_string().replace(' ', "");
        for start in ["crate::", "super::"] {
            let mut rest = text.as_str();
            while let Some(i) = rest.find(start) {
                let tail = &rest[i..];
                let end = tail
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(tail.len());
                let segs: Vec<String> = tail[..end]
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
                if segs.len() > 1 {
                    self.0.push(segs);
                }
                rest = &tail[end..];
            }
        }
    }
}

struct Crate {
    modules: Vec<Module>,
}

impl Crate {
    fn load(root: &Path) -> Crate {
        let mut c = Crate {
            modules: Vec::new(),
        };
        c.add(root.to_path_buf(), None, true);
        c
    }

    /// Reads `file` as a module, and its file submodules; returns its index.
    fn add(&mut self, file: PathBuf, parent: Option<usize>, dir_owner: bool) -> usize {
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let index = self.modules.len();
        self.modules.push(Module {
            file: file.clone(),
            parent,
            ..Module::default()
        });
        // Where this module's submodule files live.
        let dir = if dir_owner {
            file.parent().unwrap().to_path_buf()
        } else {
            file.with_extension("")
        };
        self.read_items(index, &ast.items, &dir);
        let mut refs = PathRefs(Vec::new());
        for item in &ast.items {
            if let syn::Item::Mod(m) = item
                && (is_cfg_test(&m.attrs) || m.content.is_none())
            {
                continue;
            }
            refs.visit_item(item);
        }
        for p in refs.0 {
            self.modules[index].refs.push((p, false));
        }
        index
    }

    fn read_items(&mut self, index: usize, items: &[syn::Item], dir: &Path) {
        for item in items {
            let name = match item {
                syn::Item::Const(i) => Some(i.ident.to_string()),
                syn::Item::Enum(i) => Some(i.ident.to_string()),
                syn::Item::Fn(i) => Some(i.sig.ident.to_string()),
                syn::Item::Static(i) => Some(i.ident.to_string()),
                syn::Item::Struct(i) => Some(i.ident.to_string()),
                syn::Item::Trait(i) => Some(i.ident.to_string()),
                syn::Item::Type(i) => Some(i.ident.to_string()),
                syn::Item::Union(i) => Some(i.ident.to_string()),
                syn::Item::Macro(i) => i.ident.as_ref().map(ToString::to_string),
                _ => None,
            };
            if let Some(n) = name {
                self.modules[index].defines.insert(n);
            }
            match item {
                syn::Item::Mod(m) if is_cfg_test(&m.attrs) => {}
                syn::Item::Mod(m) if m.content.is_none() => {
                    let name = m.ident.to_string();
                    let file = match path_attr(&m.attrs) {
                        Some(p) => dir.join(p),
                        None if dir.join(format!("{name}.rs")).exists() => {
                            dir.join(format!("{name}.rs"))
                        }
                        None => dir.join(&name).join("mod.rs"),
                    };
                    let owner = file.file_name().is_some_and(|f| f == "mod.rs");
                    let child = self.add(file, Some(index), owner);
                    self.modules[index].children.insert(name, child);
                }
                syn::Item::Mod(m) => {
                    // An inline module: its items count as this file's.
                    if let Some((_, items)) = &m.content {
                        self.modules[index].defines.insert(m.ident.to_string());
                        self.read_items(index, items, &dir.join(m.ident.to_string()));
                    }
                }
                syn::Item::Use(u) => {
                    let mut paths = Vec::new();
                    use_paths(&u.tree, Vec::new(), &mut paths);
                    let public = !matches!(u.vis, syn::Visibility::Inherited);
                    for (path, bound) in paths {
                        if public && let Some(b) = &bound {
                            self.modules[index]
                                .reexports
                                .insert(b.clone(), path.clone());
                        }
                        self.modules[index].refs.push((path, public));
                    }
                }
                _ => {}
            }
        }
    }

    /// The file index a path names from module `from`, following re-exports
    /// (`None`: outside the crate, or not found).
    fn resolve(&self, from: usize, path: &[String], depth: usize) -> Option<usize> {
        if depth > 16 || path.is_empty() {
            return None;
        }
        let mut at = from;
        let mut i = 0;
        match path[0].as_str() {
            "crate" => {
                at = 0;
                i = 1;
            }
            "self" => i = 1,
            "super" => {
                while i < path.len() && path[i] == "super" {
                    at = self.modules[at].parent?;
                    i += 1;
                }
            }
            first => {
                // A name this module binds itself (its own item, child, or import).
                if !self.modules[at].children.contains_key(first)
                    && !self.modules[at].defines.contains(first)
                    && !self.modules[at].reexports.contains_key(first)
                {
                    return None;
                }
            }
        }
        while i < path.len() {
            let seg = &path[i];
            if let Some(&child) = self.modules[at].children.get(seg) {
                at = child;
                i += 1;
                continue;
            }
            if self.modules[at].defines.contains(seg) {
                return Some(at);
            }
            if let Some(target) = self.modules[at].reexports.get(seg)
                && target.as_slice() != &path[i..=i]
            {
                let mut full = target.clone();
                full.extend_from_slice(&path[i + 1..]);
                return self.resolve(at, &full, depth + 1).or(Some(at));
            }
            return Some(at);
        }
        Some(at)
    }

    fn is_descendant(&self, m: usize, of: usize) -> bool {
        let mut at = self.modules[m].parent;
        while let Some(p) = at {
            if p == of {
                return true;
            }
            at = self.modules[p].parent;
        }
        false
    }

    /// The dependency edges between files.
    fn edges(&self) -> BTreeMap<usize, BTreeSet<usize>> {
        let mut edges: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        for (m, module) in self.modules.iter().enumerate() {
            for (path, reexport) in &module.refs {
                let Some(t) = self.resolve(m, path, 0) else {
                    continue;
                };
                // Containment: a module and its own submodules' items it re-exports
                // or names through them.
                if t == m || (self.is_descendant(t, m) && *reexport) {
                    continue;
                }
                edges.entry(m).or_default().insert(t);
            }
        }
        edges
    }
}

/// Strongly connected components (Tarjan) with more than one member.
fn loops(n: usize, edges: &BTreeMap<usize, BTreeSet<usize>>) -> Vec<Vec<usize>> {
    struct T<'a> {
        edges: &'a BTreeMap<usize, BTreeSet<usize>>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        let succ: Vec<usize> = t.edges.get(&v).into_iter().flatten().copied().collect();
        for w in succ {
            match t.index[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(i) if t.on[w] => t.low[v] = t.low[v].min(i),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(&mut t, v);
        }
    }
    t.out
}

/// One cycle through a component, for the message.
fn a_cycle(comp: &[usize], edges: &BTreeMap<usize, BTreeSet<usize>>) -> Vec<usize> {
    let inside: BTreeSet<usize> = comp.iter().copied().collect();
    let start = comp[0];
    // Breadth-first back to the start.
    let mut prev: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in edges.get(&v).into_iter().flatten() {
            if !inside.contains(&w) {
                continue;
            }
            if w == start {
                let mut path = vec![v];
                let mut at = v;
                while at != start {
                    at = prev[&at];
                    path.push(at);
                }
                path.reverse();
                return path;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = prev.entry(w) {
                e.insert(v);
                queue.push_back(w);
            }
        }
    }
    comp.to_vec()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rel(p: &Path) -> String {
    p.strip_prefix(repo()).unwrap_or(p).display().to_string()
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let mut problems = Vec::new();
    for (name, root) in CRATES {
        let c = Crate::load(&repo().join(root));
        assert!(
            c.modules.len() > 1,
            "{name}: only {} modules read",
            c.modules.len()
        );
        let edges = c.edges();
        for comp in loops(c.modules.len(), &edges) {
            let cycle = a_cycle(&comp, &edges);
            let names: Vec<String> = cycle
                .iter()
                .chain(cycle.first())
                .map(|&i| rel(&c.modules[i].file))
                .collect();
            if std::env::var("ARCH_EDGES").is_ok_and(|v| v == *name) {
                for &v in &comp {
                    for &w in edges.get(&v).into_iter().flatten() {
                        if comp.contains(&w) {
                            eprintln!("{} -> {}", rel(&c.modules[v].file), rel(&c.modules[w].file));
                        }
                    }
                }
            }
            let mut members: Vec<String> = comp.iter().map(|&i| rel(&c.modules[i].file)).collect();
            members.sort();
            problems.push(format!(
                "{name}: {} files in a loop ({}), e.g. {}",
                comp.len(),
                members.join(", "),
                names.join(" -> ")
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "import loops:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_finds_a_loop_and_follows_reexports() {
    // A crate written for the test: a facade re-exporting its child's item
    // (containment, not a loop), two siblings that name each other (a loop), and a
    // parent whose child uses the parent's type while the parent calls the child
    // (a loop).
    let dir = tempfile::tempdir().unwrap();
    let w = |p: &str, s: &str| {
        let f = dir.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, s).unwrap();
    };
    w(
        "lib.rs",
        "pub mod model;\npub mod a;\npub mod b;\npub mod p;\n",
    );
    w(
        "p/mod.rs",
        "mod c;\npub struct Ctx;\npub fn run() { c::go(&Ctx); }\n",
    );
    w("p/c.rs", "use super::Ctx;\npub fn go(_: &Ctx) {}\n");
    w("model/mod.rs", "mod types;\npub use types::Thing;\n");
    w("model/types.rs", "pub struct Thing;\n");
    w(
        "a.rs",
        "use crate::model::Thing;\npub fn fa(_: Thing) { crate::b::fb(); }\n",
    );
    w("b.rs", "pub fn fb() { let _ = super::a::fa; }\n");
    let c = Crate::load(&dir.path().join("lib.rs"));
    let edges = c.edges();
    let found = loops(c.modules.len(), &edges);
    let files = |comp: &[usize]| -> BTreeSet<String> {
        comp.iter()
            .map(|&i| {
                c.modules[i]
                    .file
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    };
    let mut found: Vec<BTreeSet<String>> = found.iter().map(|c| files(c)).collect();
    found.sort();
    assert_eq!(
        found,
        [
            BTreeSet::from(["a.rs".into(), "b.rs".into()]),
            BTreeSet::from(["c.rs".into(), "mod.rs".into()]),
        ],
    );
    // a.rs depends on the file that defines Thing, through the facade.
    let a = c
        .modules
        .iter()
        .position(|m| m.file.ends_with("a.rs"))
        .unwrap();
    let types = c
        .modules
        .iter()
        .position(|m| m.file.ends_with("types.rs"))
        .unwrap();
    assert!(edges[&a].contains(&types), "{edges:?}");
}

/// Lines of a file before its first `#[cfg(test)]` line.
fn code_lines(text: &str) -> usize {
    text.lines()
        .take_while(|l| !l.trim_start().starts_with("#[cfg(test)]"))
        .count()
}

#[test]
fn every_module_reads_in_one_sitting() {
    let mut long = Vec::new();
    for (_, root) in CRATES {
        let c = Crate::load(&repo().join(root));
        for m in &c.modules {
            let text = std::fs::read_to_string(&m.file).unwrap();
            let n = code_lines(&text);
            if n > MAX_LINES {
                long.push(format!("{} ({n} lines)", rel(&m.file)));
            }
        }
    }
    assert!(
        long.is_empty(),
        "modules past {MAX_LINES} lines of code before their tests:\n{}",
        long.join("\n")
    );
}

/// The workspace's packages and, for each, the workspace packages it depends on
/// (normal and build dependencies; dev-dependencies are the tests').
fn workspace_graph() -> BTreeMap<String, BTreeSet<String>> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .filter(|d| names.contains(d))
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

/// Each crate's layer, or the crates the table misses.
fn layer_of(
    graph: &BTreeMap<String, BTreeSet<String>>,
) -> Result<BTreeMap<&'static str, usize>, String> {
    let mut layer = BTreeMap::new();
    for (i, (_, crates)) in LAYERS.iter().enumerate() {
        for c in *crates {
            layer.insert(*c, i);
        }
    }
    let missing: Vec<&String> = graph
        .keys()
        .filter(|c| !layer.contains_key(c.as_str()))
        .collect();
    if missing.is_empty() {
        Ok(layer)
    } else {
        Err(format!(
            "crates in no layer (add them to LAYERS): {missing:?}"
        ))
    }
}

/// Every dependency of a crate on one not below it, as `from -> to`.
fn upward_deps(
    graph: &BTreeMap<String, BTreeSet<String>>,
    layer: &BTreeMap<&'static str, usize>,
) -> Vec<String> {
    let mut bad = Vec::new();
    for (from, deps) in graph {
        for to in deps {
            if layer[to.as_str()] >= layer[from.as_str()] {
                bad.push(format!(
                    "{from} ({}) -> {to} ({})",
                    LAYERS[layer[from.as_str()]].0,
                    LAYERS[layer[to.as_str()]].0
                ));
            }
        }
    }
    bad
}

#[test]
fn each_crate_depends_only_on_layers_below_it() {
    let graph = workspace_graph();
    let layer = layer_of(&graph).unwrap();
    let bad = upward_deps(&graph, &layer);
    assert!(
        bad.is_empty(),
        "dependencies on a crate of the same layer or above:\n{}",
        bad.join("\n")
    );
    // Every crate of the table exists (a renamed crate is renamed here too).
    for (_, crates) in LAYERS {
        for c in *crates {
            assert!(
                graph.contains_key(*c),
                "{c} is in LAYERS but not in the workspace"
            );
        }
    }
}

#[test]
fn the_layer_check_finds_a_dependency_that_points_up() {
    let mut graph = workspace_graph();
    let layer = layer_of(&graph).unwrap();
    assert!(upward_deps(&graph, &layer).is_empty());
    graph
        .get_mut("tokenscope-measure")
        .unwrap()
        .insert("tokenscope-core".into());
    let bad = upward_deps(&graph, &layer);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].starts_with("tokenscope-measure (one request measured) -> tokenscope-core"));
    graph.insert("tokenscope-new".into(), BTreeSet::new());
    assert!(layer_of(&graph).unwrap_err().contains("tokenscope-new"));
}

#[test]
fn no_crate_outgrows_one_mind() {
    let mut sizes = Vec::new();
    let mut over = Vec::new();
    for (name, root) in CRATES {
        let c = Crate::load(&repo().join(root));
        let lines: usize = c
            .modules
            .iter()
            .map(|m| code_lines(&std::fs::read_to_string(&m.file).unwrap()))
            .sum();
        sizes.push(format!("{name}: {lines}"));
        if lines > MAX_CRATE_LINES {
            over.push(format!(
                "{name}: {lines} lines of code (limit {MAX_CRATE_LINES})"
            ));
        }
    }
    eprintln!("{}", sizes.join("\n"));
    assert!(
        over.is_empty(),
        "crates too large to hold in mind:\n{}",
        over.join("\n")
    );
}
