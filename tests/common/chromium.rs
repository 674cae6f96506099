//! The built page served by `tokenscope serve`, and headless Chromium driven over
//! WebDriver (chromedriver + fantoccini), with extra Chromium flags per test (e.g.
//! `--enable-unsafe-webgpu`), for every browser test.
//! `tests/e2e/main.rs` declares it once; an opt-in binary includes it with
//! `#[path = "common/chromium.rs"] mod chromium;` (after `mod common;`).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::bin;

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The built page, or a clear failure saying how to build it.
pub fn dist() -> PathBuf {
    let d = repo().join("dist");
    assert!(
        d.join("index.html").is_file(),
        "{} is not built: run scripts/build-web.sh first (scripts/test.sh does)",
        d.display()
    );
    d
}

/// A copy of the built page in a temporary folder, to put a test's own files
/// beside it (served from the page's origin).
pub fn dist_copy() -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let target = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &target);
            } else {
                std::fs::copy(e.path(), target).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    copy(&dist(), dir.path());
    dir
}

/// `target/browser-e2e/` (screenshots).
pub fn out_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    let d = target.join("browser-e2e");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A child process killed on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `tokenscope serve --port 0 <args>`; `url` is the printed page URL.
pub struct Serve {
    _p: Proc,
    pub url: String,
    _stdout: BufReader<std::process::ChildStdout>,
}

impl Serve {
    pub fn start(args: &[&str]) -> Serve {
        Self::start_dir(&dist(), args)
    }

    /// `tokenscope serve` of `dir` (a copy of the page with files of a test's
    /// own beside it).
    pub fn start_dir(dir: &Path, args: &[&str]) -> Serve {
        let mut child = Command::new(bin())
            .args(["serve", "--port", "0", "--dir"])
            .arg(dir)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start tokenscope serve");
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("tokenscope serve listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_owned();
        Serve {
            _p: Proc(child),
            url,
            _stdout: stdout,
        }
    }

    /// `http://host:port` of the page.
    pub fn origin(&self) -> String {
        let rest = self.url.strip_prefix("http://").unwrap();
        format!("http://{}", rest.split('/').next().unwrap())
    }
}

/// A chromedriver on a free port, and a WebDriver session on headless Chromium.
pub struct Browser {
    pub client: fantoccini::Client,
    _driver: Proc,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Headless Chromium with the usual quiet flags plus `extra`.
    pub async fn start(extra: &[&str]) -> Browser {
        let port = crate::common::free_port();
        // Profile and TMPDIR in one temporary folder removed on drop: Chromium
        // leaves `org.chromium.Chromium.scoped_dir.*` folders in TMPDIR otherwise.
        let profile = tempfile::tempdir().unwrap();
        let tmp = profile.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let driver = Proc(
            Command::new(std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into()))
                .arg(format!("--port={port}"))
                .env("TMPDIR", &tmp)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start chromedriver (scripts/setup.sh installs it)"),
        );
        let mut args: Vec<String> = [
            "--headless",
            "--no-sandbox",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--hide-scrollbars",
            "--window-size=1400,2400",
        ]
        .iter()
        .chain(extra)
        .map(|s| (*s).to_owned())
        .collect();
        args.push(format!(
            "--user-data-dir={}",
            profile.path().join("profile").display()
        ));
        let mut chrome = json!({ "args": args });
        if let Ok(b) = std::env::var("CHROMIUM") {
            chrome["binary"] = json!(b);
        } else if Path::new("/usr/bin/chromium").exists() {
            chrome["binary"] = json!("/usr/bin/chromium");
        }
        let caps = json!({ "browserName": "chrome", "goog:chromeOptions": chrome });
        let deadline = Instant::now() + Duration::from_secs(20);
        let client = loop {
            let conn = hyper_util::client::legacy::connect::HttpConnector::new();
            match fantoccini::ClientBuilder::new(conn)
                .capabilities(caps.as_object().unwrap().clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await
            {
                Ok(c) => break c,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("no WebDriver session: {e}"),
            }
        };
        Browser {
            client,
            _driver: driver,
            _profile: profile,
        }
    }

    pub async fn js(&self, script: &str) -> Value {
        self.client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("script {script:?} failed: {e}"))
    }

    pub async fn text_of(&self, id: &str) -> String {
        self.js(&format!(
            "const e = document.getElementById({id:?}); return e ? e.textContent : null;"
        ))
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// Wait until `script` (an expression) is truthy, checking every 100 ms.
    pub async fn wait_for(&self, script: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            if self.js(&format!("return !!({script});")).await == json!(true) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "`{script}` did not become true within {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Wait for `data-run-state` to be `done` or `failed` (one script waiting on a
    /// MutationObserver: no polling load on the page while it measures).
    pub async fn wait_run(&self, limit: Duration) -> String {
        const WAIT: &str = r#"
            const done = arguments[arguments.length - 1];
            const state = () => document.body.getAttribute('data-run-state');
            const ended = () => state() === 'done' || state() === 'failed';
            if (ended()) { done(state()); return; }
            const o = new MutationObserver(() => { if (ended()) { o.disconnect(); done(state()); } });
            o.observe(document.body, { attributes: true, attributeFilter: ['data-run-state'] });
            setTimeout(() => { o.disconnect(); done(state()); }, 20000);
        "#;
        let deadline = Instant::now() + limit;
        loop {
            let state = self
                .client
                .execute_async(WAIT, vec![])
                .await
                .unwrap_or_else(|e| panic!("waiting for the run failed: {e}"));
            if let Some(s @ ("done" | "failed")) = state.as_str() {
                return s.to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "the run did not end within {limit:?} (state {state})"
            );
        }
    }

    /// Open `url` and wait for the run to end.
    pub async fn run(&self, url: &str, limit: Duration) -> String {
        self.client.goto(url).await.unwrap();
        self.wait_run(limit).await
    }

    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.unwrap();
        let path = out_dir().join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        eprintln!("screenshot: {}", path.display());
        path
    }

    /// Every resource the page fetched (Resource Timing).
    pub async fn resources(&self) -> Vec<String> {
        self.js("return performance.getEntriesByType('resource').map(e => e.name);")
            .await
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_owned())
            .collect()
    }

    /// The page's origin (`location.origin`).
    pub async fn origin(&self) -> String {
        self.js("return location.origin;")
            .await
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    /// A test that fails before `close` must not leave its Chromium running: an
    /// orphaned browser loads the CPU under every later timing test. Chromium's
    /// processes all carry this session's own profile folder on their command
    /// line, so they are found by it and killed (before the folder is removed).
    fn drop(&mut self) {
        let profile = self._profile.path().to_string_lossy().into_owned();
        let _ = Command::new("pkill")
            .args(["-KILL", "-f", &profile])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
