//! `tokenscope serve` without the built page: one clear error that says how to
//! build it. (The page itself, served and driven in headless Chromium, is
//! `tests/browser_e2e.rs`.)

use std::process::Command;

use crate::common::bin;

#[test]
fn serve_without_a_built_page_says_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(bin())
        .args(["serve", "--port", "0", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("scripts/build-web.sh"), "{err}");
}
