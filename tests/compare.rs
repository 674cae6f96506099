//! `tokenscope compare` against runs whose difference is known: two mocks that
//! differ by 1 ms of inter-token latency and 5 ms of time to first token (the
//! change found, in its direction, its interval holding the true shift), the same
//! mock twice (no change, the false positive rate measured over seeds), a CI gate
//! both ways, incompatible runs, reports without raw files, and bad files.
//!
//! A binary of its own, not a module of `tests/e2e/`: its runs time the simulated
//! server and the comparison judges the difference, so they need the machine to
//! themselves. Beside the end-to-end binary's other tests, two runs of one server
//! were rightly called different (2 of 20 seeds, where at most 1 is allowed).

mod common;

use std::path::{Path, PathBuf};

use common::{Mock, assert_schema, run, schema_validator, text};
use serde_json::Value;

/// `bench` against `mock` at c=1 and c=2 (`requests` a level, 3 rounds, answers
/// of `max_tokens`) into `dir/name.json` and `.jsonl`.
fn bench(
    mock: &Mock,
    dir: &Path,
    name: &str,
    seed: u64,
    requests: u32,
    max_tokens: u32,
) -> PathBuf {
    bench_with(mock, dir, name, seed, requests, max_tokens, &[])
}

/// What a mock really did for a run's measured requests at c=1 (level 0),
/// from its log: the medians of server TTFT (arrival to first token out), ITL
/// (between tokens out) and TPOT (per request).
struct Truth {
    ttft: f64,
    itl: f64,
    tpot: f64,
}

fn server_truth(mock: &Mock, report: &Path) -> Truth {
    use tokenscope_stats::stats::percentile_sorted;
    let raw = report.with_extension("jsonl");
    let wanted: Vec<String> = common::raw_requests(&raw)
        .iter()
        .filter(|r| r["level"] == 0 && r["warmup"] == false)
        .map(|r| r["request_id"].as_str().unwrap().to_owned())
        .collect();
    let log = mock.log_records(wanted.len());
    let (mut ttft, mut itl, mut tpot) = (Vec::new(), Vec::new(), Vec::new());
    for s in log
        .iter()
        .filter(|s| wanted.iter().any(|w| s["request_id"] == w.as_str()))
    {
        let t: Vec<f64> = s["chunk_times_ms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        ttft.push(t[0] - s["t_received_ms"].as_f64().unwrap());
        itl.extend(t.windows(2).map(|w| w[1] - w[0]));
        tpot.push((t[t.len() - 1] - t[0]) / (t.len() - 1) as f64);
    }
    assert_eq!(ttft.len(), wanted.len(), "every request in the mock's log");
    let p50 = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        percentile_sorted(&v, 0.5)
    };
    Truth {
        ttft: p50(ttft),
        itl: p50(itl),
        tpot: p50(tpot),
    }
}

/// [`bench`] with `extra` arguments.
fn bench_with(
    mock: &Mock,
    dir: &Path,
    name: &str,
    seed: u64,
    requests: u32,
    max_tokens: u32,
    extra: &[&str],
) -> PathBuf {
    let out = dir.join(format!("{name}.json"));
    let raw = dir.join(format!("{name}.jsonl"));
    let (seed, requests, max_tokens) = (
        seed.to_string(),
        requests.to_string(),
        max_tokens.to_string(),
    );
    let mut args = vec![
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "1,2",
        "--requests",
        &requests,
        "--rounds",
        "3",
        "--max-tokens",
        &max_tokens,
        "--ignore-eos",
        "--seed",
        &seed,
        "--json",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
        "-q",
    ];
    if !extra.contains(&"--server-metrics") {
        args.extend_from_slice(&["--server-metrics", "none"]);
    }
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(o.status.success(), "{}", text(&o));
    out
}

/// One test's runs at a time: runs sharing the machine with another test's see
/// another load, which a comparison rightly calls a change.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn compare(args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["compare", "--json", "-"];
    all.extend_from_slice(args);
    let o = run(&all);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (o.status.code().unwrap_or(-1), json, text(&o))
}

fn cell<'a>(c: &'a Value, level: &str, metric: &str) -> &'a Value {
    c["runs"][0]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["load"] == level)
        .and_then(|l| {
            l["cells"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["metric"] == metric)
        })
        .unwrap_or_else(|| panic!("no {level} {metric} in {c}"))
}

#[test]
fn a_known_change_is_found_with_an_interval_holding_it() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let base_mock = Mock::start(&["--ttft-ms", "20", "--itl-ms", "10", "--jitter-ms", "0.5"]);
    let new_mock = Mock::start(&["--ttft-ms", "30", "--itl-ms", "11", "--jitter-ms", "0.5"]);
    // TTFT 10 ms apart: its p50's floor is 2% of ~54 ms, and a loaded CI
    // machine's rounds can differ by enough that an interval around a 5 ms
    // shift reaches below it (seen once: "no change", rightly for its data).
    // With an SLO between the two TTFTs (goodput falls) and the mocks'
    // /metrics scraped (the server's own TTFT, 10 ms apart).
    // (30 requests cannot carry the SLO's p95 at a level: allowed, goodput is
    // per request.)
    let extra = [
        "--slo",
        "ttft_ms:p95<=59",
        "--allow-unevaluated",
        "--server-metrics",
        "auto",
    ];
    let base = bench_with(&base_mock, dir.path(), "base", 1, 30, 12, &extra);
    let new = bench_with(&new_mock, dir.path(), "new", 1, 30, 12, &extra);
    let (b, n) = (base.to_str().unwrap(), new.to_str().unwrap());
    let (code, c, out) = compare(&[b, n]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(c["schema"], "tokenscope.compare/1");
    assert_schema("compare.schema.json", &c, "the comparison");
    let mut bad = c.clone();
    bad["runs"][0]["levels"][0]["cells"][0]["verdict"] = "maybe".into();
    assert!(
        schema_validator("compare.schema.json")
            .validate(&bad)
            .is_err()
    );
    assert_eq!(
        c["runs"][0]["intervals"], true,
        "the raw files beside the reports"
    );
    // The endpoint differs (another mock): said, not refused.
    let mismatches = c["runs"][0]["mismatches"].as_array().unwrap();
    assert!(
        mismatches.iter().any(|m| m["field"] == "config.url"),
        "{mismatches:?}"
    );
    // The true shift is what the mocks really did (their logs: when each
    // request arrived and each token left), not what they were asked: a sleep of
    // 11 ms overshoots differently from one of 10.
    let (tb, tn) = (
        server_truth(&base_mock, &base),
        server_truth(&new_mock, &new),
    );
    let mut figures = Vec::new();
    for (metric, truth) in [
        ("tpot_ms:p50", tn.tpot - tb.tpot),
        ("itl_ms:p50", tn.itl - tb.itl),
        ("ttft_ms:p50", tn.ttft - tb.ttft),
    ] {
        let x = cell(&c, "c=1", metric);
        let (lo, hi) = (
            x["interval"]["lo"].as_f64().unwrap(),
            x["interval"]["hi"].as_f64().unwrap(),
        );
        figures.push(format!(
            "{metric} {:+.2} ms [{lo:+.2}, {hi:+.2}] (server: {truth:+.2})",
            x["diff"].as_f64().unwrap()
        ));
        // The client's own timing differs from the server's log by under 0.1
        // ms at c=1 (tests/e2e/fidelity.rs): that much slack around the interval.
        assert!(
            lo - 0.1 <= truth && truth <= hi + 0.1,
            "{metric}: the server's shift {truth:.3} not in [{lo:.3}, {hi:.3}] (+-0.1)"
        );
        assert!(lo > 0.0, "{metric}: significant: {x}");
        assert_eq!(
            x["verdict"], "worse",
            "{metric}: higher latency is worse: {x}"
        );
    }
    let tput = cell(&c, "c=1", "output_tokens_per_s");
    assert_eq!(tput["verdict"], "worse", "{tput}");
    let goodput = cell(&c, "c=1", "goodput_fraction");
    assert_eq!(goodput["verdict"], "worse", "{goodput}");
    assert!(goodput["base"].as_f64().unwrap() > 0.8, "{goodput}");
    assert!(goodput["new"].as_f64().unwrap() < 0.2, "{goodput}");
    // The server's own TTFT (its /metrics): 10 ms apart, shown without a verdict.
    let server = cell(&c, "c=1", "server_ttft_ms:mean");
    let diff = server["diff"].as_f64().unwrap();
    assert!((9.0..11.0).contains(&diff), "{server}");
    assert_eq!(server["verdict"], "unknown", "{server}");
    eprintln!(
        "known shift (+10 ms TTFT, +1 ms ITL) at c=1: {}",
        figures.join("; ")
    );

    // The gate: a 5% rise of TPOT fails (exit 1), a 50% one does not.
    let (code, _, out) = compare(&[b, n, "--fail-on", "tpot_ms:p50:+5%"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("fail-on:") && out.contains("tpot_ms:p50"),
        "{out}"
    );
    let (code, _, out) = compare(&[b, n, "--fail-on", "tpot_ms:p50:+50%,error_rate:+1pp"]);
    assert_eq!(code, 0, "{out}");
    // HTML: the tables and the runs overlaid.
    let html = dir.path().join("compare.html");
    let o = run(&["compare", b, n, "--html", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    for part in [
        "<h1>tokenscope comparison</h1>",
        "Throughput vs latency, runs overlaid",
        "CDF of TTFT (ms) at c=1",
        "CDF of ITL (ms) at c=2",
        "<td>WORSE</td>",
    ] {
        assert!(page.contains(part), "{part} not in {html:?}");
    }
    // The other way round it is better.
    let (_, c, _) = compare(&[n, b]);
    assert_eq!(cell(&c, "c=1", "tpot_ms:p50")["verdict"], "better");
}

/// `bench` against `mock` as issue 35 ran it: c=4, 20 requests a round (3
/// rounds there), 4 warm-up requests, 32 tokens of 64-token prompts.
fn bench_c4(mock: &Mock, dir: &Path, name: &str, seed: u64, rounds: u32) -> PathBuf {
    let out = dir.join(format!("{name}.json"));
    let seed = seed.to_string();
    let (requests, rounds) = ((20 * rounds).to_string(), rounds.to_string());
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        "4",
        "--requests",
        &requests,
        "--rounds",
        &rounds,
        "--warmup",
        "4",
        "--max-tokens",
        "32",
        "--input-tokens",
        "64",
        "--ignore-eos",
        "--seed",
        &seed,
        "--server-metrics",
        "none",
        "--json",
        out.to_str().unwrap(),
        "--raw",
        dir.join(format!("{name}.jsonl")).to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    out
}

/// Issue 35's pair: mocks 10 and 11 ms apart in inter-token latency (TPOT about
/// +10%), 3 rounds of 20 requests each. Rounds as a random effect catch it
/// (exit 1 under a +5% gate; the interval of the rounds' spread alone, Welch's
/// over 3 rounds a side, held zero). The same runs show the gate saying what it
/// cannot judge: a p99 of 60 requests is not evaluable (exit 3, the reason and
/// the fix), allowed with --allow-unevaluated, and a crossing outranks it.
///
/// A machine whose load shifts whole rounds widens the interval past the +5%
/// asked: then the gate must say so ("unresolved", with how many more rounds
/// or requests would resolve it) rather than pass, and a run with the rounds it
/// asks for must catch the change.
#[test]
fn a_ten_percent_tpot_slowdown_is_caught_and_the_gate_says_what_it_cannot_judge() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--ttft-ms", "30", "--jitter-ms", "1", "--itl-ms"];
    let base_mock = Mock::start(&[&flags[..], &["10"]].concat());
    let new_mock = Mock::start(&[&flags[..], &["11"]].concat());
    // The mocks' sleeps overshoot with the machine's load, so what they really
    // did (their logs) is the truth the interval must hold; a loaded machine can
    // also shift a whole round, which the interval rightly pays for: up to three
    // tries for the catch.
    let mut tries = Vec::new();
    let (mut b, mut n) = (String::new(), String::new());
    let mut advised = 1.0_f64;
    for attempt in 0..3u64 {
        let base = bench_c4(
            &base_mock,
            dir.path(),
            &format!("b1-{attempt}"),
            1 + attempt,
            3,
        );
        let new = bench_c4(
            &new_mock,
            dir.path(),
            &format!("b2-{attempt}"),
            101 + attempt,
            3,
        );
        (b, n) = (
            base.to_str().unwrap().to_owned(),
            new.to_str().unwrap().to_owned(),
        );
        let (code, c, out) = compare(&[&b, &n, "--fail-on", "tpot_ms:p50:+5%"]);
        assert_schema("compare.schema.json", &c, "the comparison with a gate");
        let tpot = cell(&c, "c=4", "tpot_ms:p50");
        let truth = server_truth(&new_mock, &new).tpot - server_truth(&base_mock, &base).tpot;
        let (lo, hi) = (
            tpot["interval"]["lo"].as_f64().unwrap(),
            tpot["interval"]["hi"].as_f64().unwrap(),
        );
        tries.push(format!(
            "TPOT p50 {:+.2} ms ({:+.1}%) [{lo:+.2}, {hi:+.2}] df {} between rounds {:.2} (servers: {truth:+.2}), exit {code}",
            tpot["diff"].as_f64().unwrap(),
            tpot["relative"].as_f64().unwrap() * 100.0,
            tpot["df"],
            tpot["between_rounds"].as_f64().unwrap_or(0.0)
        ));
        // The client's TPOT at c=4 differs from the server's log by a little
        // more than at c=1: 0.25 ms of slack.
        assert!(
            lo - 0.25 <= truth && truth <= hi + 0.25,
            "the servers' shift {truth:.3} not in [{lo:.3}, {hi:.3}]: {tries:?}"
        );
        assert!(code == 0 || code == 1, "{out}");
        if code == 0 {
            // Not caught: the gate must have said it could not tell, and how
            // much more data would.
            let term = &c["gate"]["terms"][0];
            assert_eq!(term["status"], "unresolved", "{term}: {tries:?}");
            let reason = term["reason"].as_str().unwrap_or_default();
            let factor: f64 = reason
                .split("needs about ")
                .nth(1)
                .and_then(|r| r.split('x').next())
                .and_then(|f| f.parse().ok())
                .unwrap_or_else(|| panic!("no advice in {reason:?}"));
            advised = advised.max(factor);
            assert!(out.contains("not resolved"), "{out}");
        }
        if code == 1 {
            assert_eq!(tpot["verdict"], "worse", "{tpot}");
            assert_eq!(c["gate"]["terms"][0]["status"], "crossed", "{}", c["gate"]);
            assert!(
                out.contains("fail-on:") && out.contains("tpot_ms:p50"),
                "{out}"
            );
            break;
        }
    }
    eprintln!("the 10% TPOT pair at c=4: {tries:?}");
    let mut requests = 60;
    if !tries.last().unwrap().ends_with("exit 1") {
        // Unresolved three times: rerun with the rounds the gate asked for (at
        // least 6, at most 10), which must catch it.
        let rounds = ((3.0 * advised).ceil() as u32).clamp(6, 10);
        requests = 20 * rounds;
        let base = bench_c4(&base_mock, dir.path(), "b1-more", 11, rounds);
        let new = bench_c4(&new_mock, dir.path(), "b2-more", 111, rounds);
        (b, n) = (
            base.to_str().unwrap().to_owned(),
            new.to_str().unwrap().to_owned(),
        );
        let (code, c, out) = compare(&[&b, &n, "--fail-on", "tpot_ms:p50:+5%"]);
        assert_eq!(
            code,
            1,
            "{rounds} rounds (advised {advised:.1}x) did not catch it: {}; {tries:?}; {out}",
            cell(&c, "c=4", "tpot_ms:p50")
        );
        assert_eq!(c["gate"]["terms"][0]["status"], "crossed", "{}", c["gate"]);
    }
    let (b, n) = (b.as_str(), n.as_str());

    // 60 (or up to 200) requests cannot give a p99 an interval: not evaluable,
    // said, exit 3.
    let (code, c, out) = compare(&[b, n, "--fail-on", "tpot_ms:p99:+5%,e2e_ms:p99:+5%"]);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("not evaluable")
            && out.contains(&format!(
                "{requests} requests (base) and {requests} (new): a p99 needs 500 in each"
            ))
            && out.contains("--allow-unevaluated"),
        "{out}"
    );
    let terms = c["gate"]["terms"].as_array().unwrap();
    assert!(
        terms.len() == 2 && terms.iter().all(|t| t["status"] == "not_evaluable"),
        "{terms:?}"
    );
    assert_schema("compare.schema.json", &c, "a gate not evaluable");
    let (code, _, out) = compare(&[b, n, "--fail-on", "tpot_ms:p99:+5%", "--allow-unevaluated"]);
    assert_eq!(code, 0, "{out}");
    // A crossing outranks a term not evaluable; a metric no run measured is
    // said (rendered TTFT: browser runs only).
    let (code, _, out) = compare(&[b, n, "--fail-on", "tpot_ms:p50:+5%,tpot_ms:p99:+5%"]);
    assert_eq!(code, 1, "{out}");
    let (code, _, out) = compare(&[b, n, "--fail-on", "rendered_ttft_ms:p50:+5%"]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("browser runs only"), "{out}");
}

/// Two runs of `mock` (seeds `seed` and `seed + 100`) compared: the cells that
/// call a change.
fn changes_between_two_runs(mock: &Mock, dir: &Path, seed: u64) -> Vec<String> {
    // Short prompts (32 tokens): the prefill is not what this test is about,
    // and forty runs of the default prompt took 2.4 minutes.
    let short = ["--input-tokens", "32"];
    let a = bench_with(mock, dir, &format!("a{seed}"), seed, 21, 12, &short);
    let b = bench_with(mock, dir, &format!("b{seed}"), seed + 100, 21, 12, &short);
    let (code, c, out) = compare(&[a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    c["runs"][0]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| {
            l["cells"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|x| x["verdict"] == "better" || x["verdict"] == "worse")
                .map(move |x| format!("{} {}", l["load"], x["metric"]))
        })
        .collect()
}

/// The same mock twice, over 20 seeds: how often does any cell call a change?
/// The 2% noise floor, the minimum samples per percentile and Holm's control
/// over the comparison's cells keep it at or under one in 20.
#[test]
fn the_same_server_twice_is_no_change() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mock = Mock::start(&["--ttft-ms", "10", "--itl-ms", "3", "--jitter-ms", "0.5"]);
    // One run at a time: runs sharing the machine with others see another load,
    // which the comparison rightly calls a change.
    let flagged: Vec<(u64, Vec<String>)> = (0..20u64)
        .filter_map(|seed| {
            let changed = changes_between_two_runs(&mock, dir.path(), seed);
            (!changed.is_empty()).then_some((seed, changed))
        })
        .collect();
    eprintln!(
        "the same server twice: {} of 20 comparisons called a change: {flagged:?}",
        flagged.len()
    );
    assert!(flagged.len() <= 1, "{flagged:?}");
}

/// Three releases given out of order: `history` orders them by label (v1.2,
/// v1.9, v1.10), gives each value its interval and flags the release whose
/// inter-token latency rose by 1 ms against the one before, and only that one.
#[test]
fn history_orders_by_label_and_flags_the_change() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let same = Mock::start(&["--ttft-ms", "20", "--itl-ms", "10", "--jitter-ms", "0.5"]);
    let slower = Mock::start(&["--ttft-ms", "20", "--itl-ms", "11", "--jitter-ms", "0.5"]);
    let mut files = Vec::new();
    for (label, mock, seed) in [
        ("v1.10", &slower, 3),
        ("v1.2", &same, 1),
        ("v1.9", &same, 2),
    ] {
        let out = bench_with(mock, dir.path(), label, seed, 21, 12, &["--label", label]);
        files.push(out.to_str().unwrap().to_owned());
    }
    let html = dir.path().join("history.html");
    let mut args = vec!["history", "--json", "-", "--html", html.to_str().unwrap()];
    args.extend(files.iter().map(String::as_str));
    let o = run(&args);
    assert!(o.status.success(), "{}", text(&o));
    let h: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(h["schema"], "tokenscope.history/1");
    assert_schema("history.schema.json", &h, "the history");
    assert_eq!(h["order"], "label");
    let labels: Vec<&str> = h["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["v1.2", "v1.9", "v1.10"]);
    let series = |load: &str, metric: &str| -> Vec<Value> {
        h["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["load"] == load && s["metric"] == metric)
            .unwrap_or_else(|| panic!("no {load} {metric}"))["points"]
            .as_array()
            .unwrap()
            .clone()
    };
    let tpot = series("c=1", "tpot_ms:p50");
    let verdicts: Vec<&Value> = tpot.iter().map(|p| &p["vs_previous"]).collect();
    assert_eq!(
        verdicts,
        [
            &Value::Null,
            &Value::from("no_change"),
            &Value::from("worse")
        ],
        "{tpot:?}"
    );
    for p in &tpot {
        let (lo, hi, v) = (
            p["interval"]["lo"].as_f64().unwrap(),
            p["interval"]["hi"].as_f64().unwrap(),
            p["value"].as_f64().unwrap(),
        );
        assert!(lo <= v && v <= hi, "{p}");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("tpot_ms:p50 at c=1") && page.contains("v1.10"),
        "{html:?}"
    );
    // A folder of runs: the same history; another JSON in it is skipped, named.
    std::fs::write(dir.path().join("notes.json"), "{}").unwrap();
    let o = run(&[
        "history",
        dir.path().to_str().unwrap(),
        "--metrics",
        "itl_ms:p50",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("skipping") && text(&o).contains("notes.json"),
        "{}",
        text(&o)
    );
    let o = run(&["history", &files[0], &files[1], "--metrics", "ttft:p95"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("unknown metric \"ttft:p95\""),
        "{}",
        text(&o)
    );
}

#[test]
fn incompatible_runs_summaries_only_and_bad_files() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "2"]);
    let a = bench(&mock, dir.path(), "a", 1, 12, 12);
    let b = bench(&mock, dir.path(), "b", 1, 12, 8);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    // Another output tier: the warning names the field; --strict refuses.
    let o = run(&["compare", a, b]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("warning: config.max_tokens differs: 12 (base) vs 8"),
        "{out}"
    );
    // The kernels measured beside each run (X.kernels.json): another adapter is
    // named too.
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports/kernels-lavapipe.json"),
    )
    .unwrap();
    let mut h200: Value = serde_json::from_str(&fixture).unwrap();
    h200["adapter"]["name"] = "NVIDIA H200".into();
    std::fs::write(dir.path().join("a.kernels.json"), &fixture).unwrap();
    std::fs::write(dir.path().join("b.kernels.json"), h200.to_string()).unwrap();
    let o = run(&["compare", a, b]);
    let out = text(&o);
    assert!(
        out.contains("warning: kernels.adapter differs: llvmpipe")
            && out.contains("vs NVIDIA H200"),
        "{out}"
    );
    let o = run(&["compare", a, b, "--strict"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("config.max_tokens (12 vs 8)"),
        "{}",
        text(&o)
    );

    // Without raw files: the stored summaries, no intervals, said so.
    let only = dir.path().join("only");
    std::fs::create_dir(&only).unwrap();
    for f in ["a.json", "b.json"] {
        std::fs::copy(dir.path().join(f), only.join(f)).unwrap();
    }
    let (x, y) = (only.join("a.json"), only.join("b.json"));
    let o = run(&["compare", x.to_str().unwrap(), y.to_str().unwrap()]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("without intervals"), "{out}");
    assert!(out.contains("(no interval)"), "{out}");

    // Bad files: one line naming the file.
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "{ not json").unwrap();
    let future = dir.path().join("future.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(a).unwrap()).unwrap();
    v["schema"] = "tokenscope.client/9".into();
    std::fs::write(&future, v.to_string()).unwrap();
    for (bad, says) in [
        (&garbage, "not a tokenscope report"),
        (&future, "unsupported schema"),
    ] {
        let o = run(&["compare", a, bad.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2));
        let out = text(&o);
        assert!(
            out.contains(bad.to_str().unwrap()) && out.contains(says),
            "{out}"
        );
    }
    let o = run(&["compare", a, b, "--fail-on", "ttft_ms:p95:5%"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("needs its sign"), "{}", text(&o));
}
