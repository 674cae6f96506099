//! Every repository path a document names exists: a path in backticks
//! (`core/src/analyze/slo.rs`, `scripts/test.sh`, `tests/common/`) counted from
//! the repository's root, and a Markdown link's target counted from the
//! document's folder. Moving or renaming a file then fails here until the docs
//! that name it follow.
//!
//! A word counts as a path when it starts with one of the repository's
//! top-level folders (as git tracks them) or is a top-level file, and holds no
//! placeholder (`<UTC>`), no URL scheme and no Rust path (`::`). A trailing
//! `:LINE`, `#anchor` or punctuation is not part of it; a `*` is a glob whose
//! folder must exist.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The documents: the README, CONTRIBUTING and everything under docs/.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The repository's top-level names (folders and files), as git tracks them.
fn top_level(root: &Path) -> Vec<String> {
    let out = std::process::Command::new("git")
        .args(["ls-files"])
        .current_dir(root)
        .output()
        .expect("git ls-files");
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('/').next().unwrap().to_owned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The backticked words and the Markdown link targets of one document, with
/// whether each is a link (counted from the document's folder).
fn candidates(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            out.extend(part.split_whitespace().map(|w| (w.to_owned(), false)));
        }
    }
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            out.push((rest[..end].to_owned(), true));
        }
    }
    out
}

/// The path part of a word: without a `#anchor`, a `:LINE` and trailing
/// punctuation; `None` when the word is not a path at all.
fn path_part(word: &str) -> Option<&str> {
    if word.contains("://") || word.contains("::") || word.contains('<') || word.contains('$') {
        return None;
    }
    let w = word.split('#').next()?;
    let w = match w.split_once(':') {
        Some((p, line)) if line.chars().all(|c| c.is_ascii_digit() || c == '-') => p,
        Some(_) => return None,
        None => w,
    };
    let w = w.trim_end_matches([',', '.', ';', ')', '"', '\'']);
    let ok = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./*".contains(c));
    ok.then_some(w)
}

/// Whether `rel` (a path from `base`) exists; a glob's folder must.
fn exists(base: &Path, rel: &str) -> bool {
    match rel.find('*') {
        Some(star) => base
            .join(&rel[..rel[..star].rfind('/').map_or(0, |s| s + 1)])
            .is_dir(),
        None => base.join(rel).exists(),
    }
}

#[test]
fn every_path_a_document_names_exists() {
    let root = repo();
    let top = top_level(&root);
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in documents(&root) {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (word, link) in candidates(&text) {
            let Some(p) = path_part(&word) else { continue };
            let (base, rel) = if link {
                (doc.parent().unwrap().to_path_buf(), p)
            } else {
                let first = p.split('/').next().unwrap();
                let named =
                    top.iter().any(|t| t == first) && (p.contains('/') || first.contains('.'));
                if !named {
                    continue;
                }
                (root.clone(), p)
            };
            if rel.is_empty() {
                continue;
            }
            checked += 1;
            if !exists(&base, rel) {
                missing.push(format!(
                    "{}: {word}",
                    doc.strip_prefix(&root).unwrap().display()
                ));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} paths found: the scan is broken"
    );
    assert!(
        missing.is_empty(),
        "paths named in the docs that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_path_is_told_from_other_words() {
    assert_eq!(path_part("core/src/slo.rs:42"), Some("core/src/slo.rs"));
    assert_eq!(path_part("docs/cli.md#exit-codes"), Some("docs/cli.md"));
    assert_eq!(path_part("tests/*.rs,"), Some("tests/*.rs"));
    assert_eq!(path_part("core::report::assemble"), None);
    assert_eq!(path_part("https://example.com/a"), None);
    assert_eq!(path_part("tokenscope-results/<UTC>/report.json"), None);
    assert_eq!(path_part("--slo=ttft_ms:p95"), None);
    let c = candidates("see `scripts/test.sh` and [the CLI](cli.md#x) or `a b`");
    assert!(c.contains(&("scripts/test.sh".to_owned(), false)));
    assert!(c.contains(&("cli.md#x".to_owned(), true)));
    assert!(c.contains(&("b".to_owned(), false)));
}
