//! Helpers for end-to-end tests: run the real `tokenscope` binary, start a real
//! `tokenscope mock` on a free loopback port, read JSONL files.

#![allow(dead_code)]

mod proxy;
#[allow(unused_imports)]
pub use proxy::TestProxy;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The environment variables that would change how a run reaches its servers
/// or what it sends them (keys, proxies, the CA roots): removed by the tests
/// of connections, so that they reach the servers only as told.
pub const NETWORK_ENV: [&str; 12] = [
    "TOKENSCOPE_API_KEY",
    "TOKENSCOPE_REF_API_KEY",
    "OPENAI_API_KEY",
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "SSL_CERT_FILE",
];

/// A free loopback port (nothing listens on it once returned).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A JSON number as f64, or a panic naming the value.
pub fn f(v: &serde_json::Value) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("expected a number, got {v}"))
}

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tokenscope")
}

/// A `tokenscope mock` child process, killed on drop.
pub struct Mock {
    pub child: Child,
    pub url: String,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Mock {
    /// Start `tokenscope mock --port 0 --log <tmp> <args>` and wait for its URL.
    pub fn start(args: &[&str]) -> Mock {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.jsonl");
        let mut child = Command::new(bin())
            .args(["mock", "--port", "0", "--log"])
            .arg(&log)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start tokenscope mock");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("tokenscope mock listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_owned();
        Mock {
            child,
            url,
            log,
            _dir: dir,
        }
    }

    /// The server log's records, waiting until at least `n` are there.
    pub fn log_records(&self, n: usize) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let recs = read_jsonl(&self.log);
            if recs.len() >= n || Instant::now() > deadline {
                return recs;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The log's records once every one of `ids` is in it (or after 10 s): the
    /// log also holds other requests (the pre-flight's), so a count is not
    /// enough.
    pub fn log_records_for<S: AsRef<str>>(&self, ids: &[S]) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let recs = read_jsonl(&self.log);
            let all = ids
                .iter()
                .all(|id| recs.iter().any(|s| s["request_id"] == id.as_ref()));
            if all || Instant::now() > deadline {
                return recs;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a `bench` run without output flags keeps its results folder in the
/// tests (`TOKENSCOPE_RESULTS_DIR`): under the target folder, not the
/// repository.
pub fn results_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-results")
}

/// Run `tokenscope <args>` to completion (a bench without output flags keeps
/// its results in [`results_dir`]).
pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env_remove("TOKENSCOPE_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env("TOKENSCOPE_RESULTS_DIR", results_dir())
        .output()
        .expect("run tokenscope")
}

/// Every complete JSON line of a file.
pub fn read_jsonl(path: &Path) -> Vec<serde_json::Value> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

/// The request lines of a raw file (`tokenscope.raw/1.2`): every line after the
/// header that is a finished request, not an event (level start, warning, end).
pub fn raw_requests(path: &Path) -> Vec<serde_json::Value> {
    let lines = read_jsonl(path);
    assert!(
        lines
            .first()
            .is_some_and(|h| h["schema"] == "tokenscope.raw/1.2"),
        "{} has no raw header",
        path.display()
    );
    lines
        .into_iter()
        .skip(1)
        .filter(|l| l.get("request_id").is_some())
        .collect()
}

/// Median of values.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    assert!(!s.is_empty(), "median of nothing");
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// stdout + stderr as text, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The validator of `schemas/<file>` (e.g. `client.schema.json`).
pub fn schema_validator(file: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(file);
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).expect("the schema itself is valid draft 2020-12")
}

/// Fail, listing every error, unless `doc` validates against `schemas/<file>`.
pub fn assert_schema(file: &str, doc: &serde_json::Value, what: &str) {
    let errors: Vec<String> = schema_validator(file)
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not match schemas/{file}:\n{}",
        errors.join("\n")
    );
}

/// Join a client's raw records to `tokenscope mock`'s log by request id and check
/// each: a request the server did not fault is ok; a faulted one is classified as
/// [`expected_for_fault`] says, an error carries a message, and every token the
/// server sent before the fault is in the record (none when it sent none).
/// `label` prefixes the messages. Returns how many requests each fault hit.
pub fn check_faults_against_log(
    label: &str,
    records: &[serde_json::Value],
    server: &[serde_json::Value],
) -> std::collections::BTreeMap<String, u32> {
    let by_id: std::collections::HashMap<&str, &serde_json::Value> = server
        .iter()
        .filter_map(|s| Some((s["request_id"].as_str()?, s)))
        .collect();
    let mut seen = std::collections::BTreeMap::<String, u32>::new();
    for r in records {
        let id = r["request_id"].as_str().unwrap();
        let s = by_id
            .get(id)
            .unwrap_or_else(|| panic!("{label}: {id} is not in the server log"));
        let outcome = &r["outcome"];
        let Some(fault) = s["fault"].as_str() else {
            assert_eq!(outcome["status"], "ok", "{label}: {id} had no fault: {r}");
            continue;
        };
        *seen.entry(fault.to_owned()).or_default() += 1;
        let (status, kind, tokens_first) = expected_for_fault(fault);
        assert_eq!(outcome["status"], status, "{fault}: {id}: {outcome}");
        let got = if status == "timeout" {
            &outcome["phase"]
        } else {
            &outcome["kind"]
        };
        assert_eq!(got, kind, "{fault}: {id}: {outcome}");
        if status == "error" {
            let msg = outcome["message"].as_str().unwrap_or_default();
            assert!(
                !msg.is_empty(),
                "{fault}: {id}: an error says what: {outcome}"
            );
        }
        let client_tokens = r["token_events_ms"].as_array().unwrap().len();
        let server_chunks = s["chunk_times_ms"].as_array().unwrap().len();
        if tokens_first {
            assert!(server_chunks >= 1, "{fault}: the server sent tokens first");
            assert_eq!(
                client_tokens, server_chunks,
                "{fault}: {id}: tokens kept: {r}"
            );
        } else {
            assert_eq!(client_tokens, 0, "{fault}: {id}");
        }
    }
    seen
}

/// What a client must report for a request `tokenscope mock` gave `fault` (the
/// same for the native client and the page): (outcome status, error kind or
/// timeout phase, tokens arrive before the fault).
pub fn expected_for_fault(fault: &str) -> (&'static str, &'static str, bool) {
    match fault {
        "http_429" => ("error", "http_429", false),
        "http_503" => ("error", "http_503", false),
        "error_event" => ("error", "stream_error", true),
        "reset" => ("error", "reset", true),
        "malformed" => ("error", "malformed_chunk", true),
        "stall" => ("timeout", "stream", true),
        "html" => ("error", "non_sse", false),
        "no_done" => ("error", "truncated", true),
        "no_headers" => ("timeout", "headers", false),
        other => panic!("unknown fault {other}"),
    }
}
