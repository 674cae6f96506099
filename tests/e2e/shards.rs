//! Sharded load and its merge, end to end over loopback: four `bench --shard
//! K/4` processes against one `tokenscope mock`, merged by `tokenscope merge`
//! and checked against what the mock's log says it did; a single-process run
//! of the same load beside it, as the yardstick. And the live metrics in a real
//! Prometheus (opt-in: needs the `prometheus` Debian package).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{Mock, bin, f, raw_requests, run, text};
use serde_json::Value;
use tokenscope_stats::stats::{HISTOGRAM_PRECISION, HISTOGRAM_PRECISION_ABS, percentile_sorted};

/// What the mock's log says of some requests: outcomes, TTFT and ITL samples.
struct Truth {
    logged: usize,
    completed: usize,
    ttft: Vec<f64>,
    itl: Vec<f64>,
}

/// The measured requests of `raws` as the mock logged them.
fn truth(mock: &Mock, raws: &[PathBuf]) -> Truth {
    let wanted: std::collections::BTreeSet<String> = raws
        .iter()
        .flat_map(|r| raw_requests(r))
        .filter(|r| r["warmup"] == false)
        .map(|r| r["request_id"].as_str().unwrap().to_owned())
        .collect();
    let log = mock.log_records(wanted.len());
    let mut t = Truth {
        logged: 0,
        completed: 0,
        ttft: Vec::new(),
        itl: Vec::new(),
    };
    for s in log.iter().filter(|s| {
        s["request_id"]
            .as_str()
            .is_some_and(|id| wanted.contains(id))
    }) {
        t.logged += 1;
        if s["outcome"] != "completed" {
            continue;
        }
        t.completed += 1;
        let c: Vec<f64> = s["chunk_times_ms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        t.ttft.push(c[0] - s["t_received_ms"].as_f64().unwrap());
        t.itl.extend(c.windows(2).map(|w| w[1] - w[0]));
    }
    t.ttft.sort_by(f64::total_cmp);
    t.itl.sort_by(f64::total_cmp);
    t
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

const LOAD: [&str; 10] = [
    "--requests",
    "240",
    "--rounds",
    "2",
    "--max-tokens",
    "12",
    "--server-metrics",
    "none",
    "--quiet",
    "--no-preflight",
];

/// A bench process, not waited for.
fn spawn_bench(url: &str, dir: &Path, name: &str, extra: &[&str]) -> std::process::Child {
    Command::new(bin())
        .args(["bench", "--url", url, "--concurrency", "8"])
        .args(LOAD)
        .arg("--json")
        .arg(dir.join(format!("{name}.json")))
        .arg("--raw")
        .arg(dir.join(format!("{name}.raw.jsonl")))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_ok(child: std::process::Child, what: &str) {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn four_shards_merge_to_what_the_server_did() {
    let mock = Mock::start(&[
        "--ttft-ms",
        "20",
        "--itl-ms",
        "4",
        "--jitter-ms",
        "2",
        "--error-rate",
        "0.05",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let shards: Vec<_> = (0..4)
        .map(|k| {
            let shard = format!("{k}/4");
            spawn_bench(
                &mock.url,
                d,
                &format!("shard-{k}"),
                &["--shard", &shard, "--start-after", "3s"],
            )
        })
        .collect();
    for (k, c) in shards.into_iter().enumerate() {
        wait_ok(c, &format!("shard {k}"));
    }
    let reports: Vec<PathBuf> = (0..4).map(|k| d.join(format!("shard-{k}.json"))).collect();
    let raws: Vec<PathBuf> = (0..4)
        .map(|k| d.join(format!("shard-{k}.raw.jsonl")))
        .collect();
    for (k, r) in reports.iter().enumerate() {
        let r = read(r);
        common::assert_schema("client.schema.json", &r, "a shard's report");
        assert_eq!(r["config"]["shard"]["index"], k);
        assert_eq!(r["config"]["levels"][0], 2.0, "8 workers over 4 shards");
        assert_eq!(r["config"]["requests_per_level"], 60);
        assert!(r["levels"][0]["histograms"]["ttft_ms"]["us"].is_array());
    }
    // No request twice.
    let ids: Vec<String> = raws
        .iter()
        .flat_map(|r| raw_requests(r))
        .map(|r| r["request_id"].as_str().unwrap().to_owned())
        .collect();
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "a request id twice");

    let merged_path = d.join("merged.json");
    let mut args = vec!["merge".to_owned()];
    args.extend(reports.iter().map(|p| p.display().to_string()));
    let with = |extra: &[&str]| {
        let mut a = args.clone();
        a.extend(extra.iter().map(|s| (*s).to_owned()));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run(&a)
    };
    let o = with(&["--json", merged_path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let hist_path = d.join("merged-h.json");
    let o = with(&["--no-raw", "--json", hist_path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let merged = read(&merged_path);
    let hist = read(&hist_path);
    for (m, what) in [(&merged, "raw"), (&hist, "histograms")] {
        common::assert_schema("client.schema.json", m, "a merged report");
        assert_eq!(m["config"]["levels"][0], 8.0, "{what}");
        assert_eq!(m["config"]["requests_per_level"], 240);
        assert!(m["config"]["shard"].is_null());
        assert_eq!(m["environment"]["merged"]["shards"], 4);
        assert_eq!(m["environment"]["merged"]["method"], what);
        assert_eq!(m["warnings"][0]["kind"], "merged");
    }

    // Counts: what the server logged.
    let t = truth(&mock, &raws);
    let l = &merged["levels"][0];
    assert_eq!(l["concurrency"], 8);
    assert_eq!(l["sent"], 240);
    assert_eq!(t.logged, 240, "every measured request in the mock's log");
    assert_eq!(l["ok"].as_u64().unwrap() as usize, t.completed);
    assert_eq!(
        (l["errors"].as_u64().unwrap() + l["timeouts"].as_u64().unwrap()) as usize,
        t.logged - t.completed
    );
    for key in ["sent", "ok", "errors", "timeouts", "output_tokens_total"] {
        assert_eq!(hist["levels"][0][key], l[key], "{key}");
    }

    // The single-process run of the same load, as the yardstick.
    wait_ok(spawn_bench(&mock.url, d, "single", &[]), "single run");
    let single = read(&d.join("single.json"));
    let ts = truth(&mock, &[d.join("single.raw.jsonl")]);
    let mut figures = Vec::new();
    for (metric, tm, tsm) in [("ttft_ms", &t.ttft, &ts.ttft), ("itl_ms", &t.itl, &ts.itl)] {
        for (q, name, slack_ms) in [(0.5, "p50", 2.0), (0.99, "p99", 10.0)] {
            let got = f(&l["metrics"][metric][name]);
            let err = (got - percentile_sorted(tm, q)).abs();
            let s_got = f(&single["levels"][0]["metrics"][metric][name]);
            let s_err = (s_got - percentile_sorted(tsm, q)).abs();
            figures.push(format!(
                "{metric} {name}: merged {got:.3} (server {:.3}, off {err:.3}); single {s_got:.3} (server {:.3}, off {s_err:.3})",
                percentile_sorted(tm, q),
                percentile_sorted(tsm, q)
            ));
            assert!(
                err <= s_err + slack_ms,
                "{metric} {name}: the merged run is {err:.3} ms off the server, a single run {s_err:.3}\n{}",
                figures.join("\n")
            );
        }
    }
    println!("{}", figures.join("\n"));

    // From histograms: within the stated precision of the union's figures.
    let mut worst = 0f64;
    for metric in ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "output_tokens"] {
        for stat in ["p50", "p90", "p95", "p99", "p999", "min", "max"] {
            let (exact, h) = (
                f(&l["metrics"][metric][stat]),
                f(&hist["levels"][0]["metrics"][metric][stat]),
            );
            let tol = (exact.abs() * HISTOGRAM_PRECISION).max(HISTOGRAM_PRECISION_ABS);
            if exact.abs() > 1.0 {
                worst = worst.max((h - exact).abs() / exact.abs());
            }
            assert!(
                (h - exact).abs() <= tol,
                "{metric} {stat}: {h} from histograms, {exact} from raw files"
            );
        }
        assert_eq!(
            hist["levels"][0]["metrics"][metric]["count"],
            l["metrics"][metric]["count"]
        );
    }
    println!(
        "from histograms: percentiles at most {:.4}% off the raw merge's (stated: {}%)",
        worst * 100.0,
        HISTOGRAM_PRECISION * 100.0
    );

    // Bad merges: one line naming the file, exit 2, nothing written.
    let name = |k: usize| reports[k].display().to_string();
    let bad = |files: &[String], wanted: &str| {
        let mut a = vec!["merge".to_owned()];
        a.extend(files.iter().cloned());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(wanted), "{wanted:?} not in {}", text(&o));
    };
    bad(&[name(0), name(1), name(2)], "shards missing: 3/4");
    bad(
        &[name(0), name(1), name(2), name(3), name(1)],
        "shard 1/4 given twice",
    );
    let mut other = read(&reports[3]);
    other["config"]["max_tokens"] = 13.into();
    let other_path = d.join("other.json");
    std::fs::write(&other_path, other.to_string()).unwrap();
    let other_name = other_path.display().to_string();
    bad(
        &[name(0), name(1), name(2), other_name.clone()],
        &format!(
            "{other_name} is from another plan than {}: config.max_tokens differs",
            name(0)
        ),
    );
    bad(
        &[
            name(0),
            name(1),
            name(2),
            d.join("single.json").display().to_string(),
        ],
        "single.json: not a shard's report",
    );
    bad(&[d.join("nope.json").display().to_string()], "nope.json");
}

#[test]
fn shard_flags_are_checked_before_anything_is_sent() {
    for (args, wanted) in [
        (
            vec!["--shard", "4/4"],
            "--shard: shard 4/4: K must be below N",
        ),
        (vec!["--shard", "x"], "--shard: \"x\" is not K/N"),
        (
            vec!["--shard", "0/4", "--concurrency", "2,8"],
            "--shard 0/4: concurrency 2 cannot be split over 4 shards",
        ),
        (
            vec!["--shard", "0/2", "--start-at", "noon"],
            "--start-at: \"noon\" is not an RFC 3339 time",
        ),
        (vec!["--start-after", "3s"], "--shard"),
    ] {
        let mut a = vec!["bench", "--url", "http://127.0.0.1:9/v1"];
        a.extend(args);
        let o = run(&a);
        assert!(!o.status.success());
        assert!(text(&o).contains(wanted), "{wanted:?} not in {}", text(&o));
    }
}
