//! A report rebuilt from its raw file is the report the run wrote: every level,
//! the sweep, the warnings and the interrupted flag, everything but the
//! environment. Proved on the runs where the two paths used to drift apart: a
//! soak with snapshots and a drift flag, a run past the sample cap, a run with
//! faults, and a rate-mode run (the page's run is `web/tests/browser.rs`).
//!
//! Each run goes through the real CLI: `bench --out --raw` against `tokenscope
//! mock`, then `report --raw --client-out` rebuilds the client report.

use crate::common;

use std::path::Path;

use common::{Mock, run, text};
use tokenscope_core::report::{ClientReport, WarningKind};
use tokenscope_core::testing::assert_same_but_environment;

/// Run `bench` with `args` against `mock`, rebuild from its raw file, compare;
/// returns the measured report.
fn measured_and_rebuilt(mock: &Mock, args: &[&str]) -> ClientReport {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("client.json");
    let raw = dir.path().join("raw.jsonl");
    let rebuilt = dir.path().join("rebuilt.json");
    let mut bench = vec!["bench", "--url", &mock.url, "--quiet"];
    bench.extend_from_slice(args);
    bench.extend_from_slice(&[
        "--json",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
    ]);
    let o = run(&bench);
    assert!(o.status.success(), "bench: {}", text(&o));
    let o = run(&[
        "report",
        "--raw",
        raw.to_str().unwrap(),
        "--client-out",
        rebuilt.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "report --raw: {}", text(&o));
    let measured = read(&out);
    let from_raw = read(&rebuilt);
    assert_same_but_environment(&from_raw, &measured);
    assert!(from_raw.environment.rebuilt_from_raw);
    assert!(!measured.environment.rebuilt_from_raw);
    // The run's end line carries its environment back too.
    assert_eq!(
        from_raw.environment.started_at,
        measured.environment.started_at
    );
    measured
}

fn read(path: &Path) -> ClientReport {
    ClientReport::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_soak_with_snapshots_and_a_drift_flag() {
    // +4 ms per second of uptime: decode slows from 4 ms to ~40 ms over the run.
    let mock = Mock::start(&[
        "--itl-ms",
        "4",
        "--ttft-ms",
        "5",
        "--jitter-ms",
        "0.5",
        "--itl-growth-ms-per-min",
        "240",
    ]);
    let r = measured_and_rebuilt(
        &mock,
        &[
            "--concurrency",
            "2",
            "--duration",
            "9s",
            "--rounds",
            "1",
            "--snapshot-interval",
            "1s",
            "--max-tokens",
            "12",
            "--input-tokens",
            "8",
        ],
    );
    let level = &r.levels[0];
    assert!(level.snapshots.len() >= 6, "{:?}", level.snapshots);
    assert_eq!(r.config.snapshot_interval_s, Some(1.0));
    let tpot = level.drift.iter().find(|d| d.metric == "tpot_ms").unwrap();
    assert!(tpot.flagged, "{tpot:?}");
}

#[test]
fn a_run_past_the_sample_cap() {
    let mock = Mock::start(&["--itl-ms", "2", "--ttft-ms", "5"]);
    let r = measured_and_rebuilt(
        &mock,
        &[
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
        ],
    );
    assert!(r.levels[0].metrics.itl_ms.histogram);
    assert_eq!(r.config.sample_cap, Some(50));
    assert!(
        r.warnings
            .iter()
            .any(|w| w.kind == WarningKind::HistogramSummaries)
    );
}

#[test]
fn a_run_with_faults() {
    let mock = Mock::start(&[
        "--itl-ms",
        "2",
        "--ttft-ms",
        "5",
        "--error-rate",
        "0.4",
        "--faults",
        "http_503,error_event,reset,malformed,no_done",
        "--seed",
        "7",
    ]);
    let r = measured_and_rebuilt(
        &mock,
        &[
            "--concurrency",
            "1,4",
            "--requests",
            "16",
            "--rounds",
            "2",
            "--max-tokens",
            "8",
            "--no-preflight",
        ],
    );
    let kinds: usize = r.levels.iter().map(|l| l.error_kinds.len()).sum();
    assert!(
        kinds >= 2,
        "several fault kinds: {:?}",
        r.levels[0].error_kinds
    );
    for l in &r.levels {
        assert_eq!(l.sent, l.ok + l.errors + l.timeouts);
    }
}

#[test]
fn a_rate_mode_run() {
    let mock = Mock::start(&["--itl-ms", "2", "--ttft-ms", "5"]);
    let r = measured_and_rebuilt(
        &mock,
        &[
            "--rate",
            "20,40",
            "--requests",
            "20",
            "--rounds",
            "2",
            "--max-tokens",
            "6",
            "--slo",
            // A median: 20 requests a level carry it (a p95 needs 100).
            "ttft_ms:p50<=500",
        ],
    );
    assert_eq!(r.levels.len(), 2);
    assert!(r.levels.iter().all(|l| l.metrics.client_lag_ms.is_some()));
    assert!(r.sweep.slo_capacity.is_some());
}
