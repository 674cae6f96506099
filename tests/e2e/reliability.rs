//! Nothing lost: a SIGKILL leaves a raw file whose every complete line parses;
//! Ctrl-C writes the report of what ran; the API key never reaches any output;
//! a soak's drift check flags a server that slows down and not one that does not.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Mock, bin, raw_requests, run, text};

/// The steady soak must not see a trend that other tests' load makes (a machine
/// getting quieter looks like decode speeding up): it runs alone, the other tests
/// of this file run beside each other.
static QUIET: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    QUIET.read().unwrap_or_else(|e| e.into_inner())
}

fn wait_for_lines(path: &std::path::Path, n: usize, within: Duration) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if std::fs::read_to_string(path)
            .map(|t| t.lines().count())
            .unwrap_or(0)
            >= n
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{} never reached {n} lines", path.display());
}

fn long_bench(mock: &Mock, raw: &std::path::Path, out: &std::path::Path) -> std::process::Child {
    Command::new(bin())
        .args([
            "bench",
            "--url",
            &mock.url,
            "--concurrency",
            "4",
            "--requests",
            "400",
            "--rounds",
            "1",
            "--max-tokens",
            "16",
            "--input-tokens",
            "8",
            "--quiet",
            "--grace",
            "3s",
            "--raw",
        ])
        .arg(raw)
        .arg("--json")
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn sigkill_leaves_a_raw_file_whose_complete_lines_parse() {
    let _shared = shared();
    let mock = Mock::start(&["--itl-ms", "5", "--ttft-ms", "5"]);
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.jsonl");
    let out = dir.path().join("r.json");
    let mut child = long_bench(&mock, &raw, &out);
    wait_for_lines(&raw, 12, Duration::from_secs(30));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let text = std::fs::read_to_string(&raw).unwrap();
    let complete: Vec<&str> = text
        .split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .collect();
    assert!(complete.len() >= 12);
    for line in &complete {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("line {line:?}: {e}"));
        assert!(v.is_object());
    }
    assert!(
        !out.exists(),
        "a killed run writes no report: only the raw file survives"
    );
}

#[test]
fn sigint_stops_sending_and_writes_the_report_of_what_ran() {
    let _shared = shared();
    let mock = Mock::start(&["--itl-ms", "5", "--ttft-ms", "5"]);
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.jsonl");
    let out = dir.path().join("r.json");
    let child = long_bench(&mock, &raw, &out);
    wait_for_lines(&raw, 16, Duration::from_secs(30));
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let started = Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded wait after Ctrl-C"
    );
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("interrupted"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(report["interrupted"], true);
    let level = &report["levels"][0];
    let sent = level["sent"].as_u64().unwrap();
    assert!(sent > 0 && sent < 400, "stopped early: {sent}");
    assert_eq!(
        sent,
        level["ok"].as_u64().unwrap()
            + level["errors"].as_u64().unwrap()
            + level["timeouts"].as_u64().unwrap()
    );
    // The report and the raw file agree on what was measured.
    let measured = raw_requests(&raw)
        .iter()
        .filter(|r| r["warmup"] == false)
        .count() as u64;
    assert_eq!(measured, sent);
}

#[test]
fn the_api_key_never_reaches_any_output() {
    let _shared = shared();
    const KEY: &str = "sk-tokenscope-FAKE-4242-secret-key";
    let mock = Mock::start(&[
        "--error-rate",
        "0.4",
        "--faults",
        "http_503,reset,error_event,html",
        "--itl-ms",
        "2",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<_> = ["r.json", "raw.jsonl", "r.csv", "r.md"]
        .iter()
        .map(|f| dir.path().join(f))
        .collect();
    // The key in the environment, and also in the URL's query (some gateways do that).
    let url = format!("{}?api-key={KEY}", mock.url);
    let o = Command::new(bin())
        .args([
            "bench",
            "--url",
            &url,
            "--concurrency",
            "2",
            "--requests",
            "10",
            "--max-tokens",
            "6",
            "--no-preflight",
            "--model",
            "m",
        ])
        .args([
            "--json",
            paths[0].to_str().unwrap(),
            "--raw",
            paths[1].to_str().unwrap(),
        ])
        .args([
            "--csv",
            paths[2].to_str().unwrap(),
            "--markdown",
            paths[3].to_str().unwrap(),
        ])
        .env("TOKENSCOPE_API_KEY", KEY)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let mut everything = text(&o);
    for p in &paths {
        everything.push_str(&std::fs::read_to_string(p).unwrap());
    }
    // Error paths print too: an unreachable endpoint and a 404.
    for bad in [
        "http://127.0.0.1:1/v1",
        &format!("{}x/v1?key={KEY}", mock.url.trim_end_matches("/v1")),
    ] {
        let o = Command::new(bin())
            .args(["bench", "--url", bad, "--requests", "2"])
            .env("TOKENSCOPE_API_KEY", KEY)
            .output()
            .unwrap();
        assert!(!o.status.success());
        everything.push_str(&text(&o));
    }
    assert!(!everything.contains(KEY), "the key leaked:\n{everything}");
    assert!(
        !everything.contains("4242-secret"),
        "part of the key leaked"
    );
    // The key was really sent (so the test is not vacuous).
    let server = mock.log_records(10);
    assert!(
        server
            .iter()
            .filter(|s| s["request_id"].is_string())
            .all(|s| s["authorized"] == true)
    );
    assert!(
        std::fs::read_to_string(&mock.log)
            .unwrap()
            .find(KEY)
            .is_none()
    );
}

fn soak(mock_args: &[&str]) -> serde_json::Value {
    let mock = Mock::start(mock_args);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "2",
        "--duration",
        "14s",
        "--rounds",
        "1",
        "--snapshot-interval",
        "2s",
        "--max-tokens",
        "12",
        "--input-tokens",
        "8",
        "--quiet",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap()
}

fn tpot_drift(report: &serde_json::Value) -> serde_json::Value {
    let level = &report["levels"][0];
    assert!(level["snapshots"].as_array().unwrap().len() >= 6, "{level}");
    level["drift"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["metric"] == "tpot_ms")
        .cloned()
        .unwrap()
}

#[test]
fn soak_drift_is_flagged_when_decode_slows() {
    let _shared = shared();
    // +2 ms per second of uptime: 5 ms -> ~33 ms over the run.
    let r = soak(&[
        "--itl-ms",
        "5",
        "--ttft-ms",
        "5",
        "--jitter-ms",
        "0.5",
        "--itl-growth-ms-per-min",
        "120",
    ]);
    let d = tpot_drift(&r);
    assert_eq!(d["flagged"], true, "{d}");
    let slope = d["slope_ms_per_min"].as_f64().unwrap();
    assert!(
        slope > 60.0 && slope < 180.0,
        "slope {slope} ms/min vs 120 injected"
    );
}

#[test]
fn soak_drift_is_silent_when_decode_is_steady() {
    let _alone = QUIET.write().unwrap_or_else(|e| e.into_inner());
    // A 20 ms decode step: a host that warms up or slows down by a millisecond per
    // token over the run (seen on a shared 2-core machine: 6.6 -> 5.6 ms at a 5 ms
    // step, flagged as a 15% drift) stays well under the 10% the check flags.
    let r = soak(&["--itl-ms", "20", "--ttft-ms", "5", "--jitter-ms", "0.5"]);
    let d = tpot_drift(&r);
    assert_eq!(d["flagged"], false, "{d}");
}

#[test]
fn past_the_sample_cap_summaries_come_from_histograms_and_say_so() {
    let _shared = shared();
    let mock = Mock::start(&["--itl-ms", "2", "--ttft-ms", "5"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "4",
        "--requests",
        "12",
        "--rounds",
        "1",
        "--max-tokens",
        "20",
        "--sample-cap",
        "50",
        "--quiet",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let itl = &r["levels"][0]["metrics"]["itl_ms"];
    assert_eq!(itl["histogram"], true, "{itl}");
    assert_eq!(itl["count"], 12 * 19, "every gap still counted");
    assert!(itl["p50"].as_f64().unwrap() > 0.0);
    assert!(
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "histogram_summaries")
    );
    // Below the cap, exact.
    assert!(
        r["levels"][0]["metrics"]["ttft_ms"]
            .get("histogram")
            .is_none()
    );
}
