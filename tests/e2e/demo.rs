//! `tokenscope demo`, the README's first command, as a newcomer runs it: the
//! simulated server and the client over real HTTP, a sweep, the summary and
//! one report, with every file it says it wrote.

use crate::common;

use common::{f, read_jsonl, run, text};

#[test]
fn demo_runs_the_sweep_and_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    // The kernels have their own suites (kernels_cli, report_cli's chain).
    let o = run(&[
        "demo",
        "--quick",
        "--no-kernels",
        "--quiet",
        "--dir",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let said = text(&o);
    assert!(said.contains("report.html"), "{said}");

    let client: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("client.json")).unwrap()).unwrap();
    common::assert_schema("client.schema.json", &client, "demo client report");
    // What the demo asks of bench, and bench's own defaults for the rest.
    let config = &client["config"];
    assert_eq!(config["max_tokens"], 24, "{config}");
    assert_eq!(config["ignore_eos"], true, "{config}");
    assert_eq!(config["seed"], 1, "{config}");
    let levels = client["levels"].as_array().unwrap();
    let concurrency: Vec<u64> = levels
        .iter()
        .map(|l| l["concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(concurrency, [1, 8, 32], "the quick sweep");
    for l in levels {
        assert_eq!(l["ok"], l["sent"], "every request answered: {l}");
        assert!(
            l["slo_checks"].as_array().is_some_and(|c| c.len() == 2),
            "the demo's two SLOs checked: {}",
            l["slo_checks"]
        );
        assert!(f(&l["metrics"]["ttft_ms"]["p50"]) > 0.0, "{l}");
    }
    // Batching makes time per token grow with concurrency (the simulator's
    // step growth): the sweep shows it.
    let tpot = |i: usize| f(&levels[i]["metrics"]["tpot_ms"]["p50"]);
    assert!(
        tpot(2) > tpot(0),
        "TPOT p50 at c=32 {} vs c=1 {}",
        tpot(2),
        tpot(0)
    );

    let raw = read_jsonl(&out.join("requests.jsonl"));
    let measured = raw
        .iter()
        .filter(|r| r.get("request_id").is_some() && r["warmup"] == false)
        .count() as u64;
    let sent: u64 = levels.iter().map(|l| l["sent"].as_u64().unwrap()).sum();
    assert_eq!(measured, sent, "a raw line per measured request");
    for file in ["client.csv", "client.md", "report.md"] {
        let len = std::fs::metadata(out.join(file)).unwrap().len();
        assert!(len > 0, "{file} is empty");
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<html") && html.len() > 10_000, "report.html");
}
