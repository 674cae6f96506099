//! `tokenscope report` as a user meets it: a report from a bench run (and from its
//! raw file alone), the HTML is self-contained, bad inputs are one clear line, and
//! the whole chain (mock + bench + kernels on Vulkan/lavapipe + report) renders in
//! headless Chromium.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{Mock, run, text};

fn bench(mock: &Mock, dir: &Path, levels: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let out = dir.join("client.json");
    let raw = dir.join("raw.jsonl");
    let args = vec![
        "bench",
        "--url",
        &mock.url,
        "--concurrency",
        levels,
        "--requests",
        "24",
        "--max-tokens",
        "12",
        "--input-tokens",
        "32",
        "--slo",
        // Medians: 24 requests a level carry them (a p95 needs 100).
        "ttft_ms:p50<=400,tpot_ms:p50<=40",
        "--quiet",
        "--json",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
    ];
    let o = run(&args);
    assert!(o.status.success(), "{}", text(&o));
    (out, raw)
}

/// No resource is fetched from anywhere: no http(s) URL in src, href or url().
pub fn assert_self_contained(html: &str) {
    let lower = html.to_ascii_lowercase();
    for attr in ["src=", "href=", "url("] {
        let mut rest = lower.as_str();
        while let Some(i) = rest.find(attr) {
            let after = rest[i + attr.len()..].trim_start_matches(['"', '\'', ' ']);
            assert!(
                !after.starts_with("http:")
                    && !after.starts_with("https:")
                    && !after.starts_with("//"),
                "external reference: {}",
                &rest[i..(i + 80).min(rest.len())]
            );
            rest = &rest[i + attr.len()..];
        }
    }
    assert!(!lower.contains("<script"), "no scripts in the report");
    assert!(!lower.contains("<link"), "no linked stylesheets or fonts");
    assert!(!lower.contains("@import"), "no imported styles");
}

#[test]
fn report_from_a_run_and_from_its_raw_file_agree() {
    let mock = Mock::start(&["--itl-ms", "3", "--ttft-ms", "10"]);
    let dir = tempfile::tempdir().unwrap();
    let (client, raw) = bench(&mock, dir.path(), "1,4");
    let html = dir.path().join("r.html");
    let md = dir.path().join("r.md");
    let o = run(&[
        "report",
        "--client",
        client.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let h = std::fs::read_to_string(&html).unwrap();
    assert_self_contained(&h);
    for section in [
        "id=\"verdict\"",
        "id=\"diagnosis\"",
        "id=\"charts\"",
        "id=\"glossary\"",
        "<svg",
    ] {
        assert!(h.contains(section), "the HTML has {section}");
    }
    let m = std::fs::read_to_string(&md).unwrap();
    assert!(
        m.contains("## Verdict") && m.contains("Capacity at your SLO"),
        "{m}"
    );
    // The verdict is also printed.
    assert!(String::from_utf8_lossy(&o.stdout).contains("TTFT"));

    // From the raw file alone: the same levels and counts.
    let o = run(&["report", "--raw", raw.to_str().unwrap(), "--markdown", "-"]);
    assert!(o.status.success(), "{}", text(&o));
    let from_raw = String::from_utf8_lossy(&o.stdout);
    let c: serde_json::Value = serde_json::from_slice(&std::fs::read(&client).unwrap()).unwrap();
    let knee = c["sweep"]["knee"]["level_index"].as_u64();
    for (i, level) in c["levels"].as_array().unwrap().iter().enumerate() {
        // The knee's level is marked in the table, wherever the run put it.
        let marker = if knee == Some(i as u64) {
            " (knee)"
        } else {
            ""
        };
        let row = format!(
            "| c={}{marker} | {} | {} |",
            level["concurrency"], level["sent"], level["ok"]
        );
        assert!(
            from_raw.contains(&row),
            "raw-built report has {row}:\n{from_raw}"
        );
    }
    assert!(from_raw.contains("rebuilt from the raw file"));
}

#[test]
fn bad_inputs_are_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("wrong.json");
    std::fs::write(&wrong, r#"{"schema": "tokenscope.client/7", "levels": []}"#).unwrap();
    let o = run(&["report", "--client", wrong.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unsupported schema \"tokenscope.client/7\""),
        "{err}"
    );
    let o = run(&["report", "--client", "/nonexistent.json"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--client /nonexistent.json: cannot read"));
    let o = run(&["report"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing to report"));
    // A good kernels report with an unknown model: the error names the flag, the
    // value and the presets there are.
    let o = run(&[
        "report",
        "--kernels",
        "tests/fixtures/reports/kernels-lavapipe.json",
        "--model",
        "gpt-9",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--model \"gpt-9\": unknown model") && err.contains("llama-3.1-8b"),
        "{err}"
    );
}

#[test]
fn the_kv_cache_plan_joins_the_report_with_the_gpus_memory() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let o = run(&[
        "report",
        "--client",
        "tests/fixtures/reports/native.json",
        "--model",
        "llama-3.1-8b",
        "--context",
        "8192",
        "--gpu-memory",
        "80GiB",
        "--markdown",
        "-",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    // The hand figures: 128 KiB per token, 1 GiB per 8192-token sequence, 57 fit.
    assert!(md.contains("## KV-cache plan (llama-3.1-8b, weights f16, KV cache f16, 8192 tokens per sequence, on 80.00 GiB)"), "{md}");
    assert!(md.contains("| KV per token | 128.0 KiB |"), "{md}");
    assert!(md.contains("| sequences that fit | 57 |"), "{md}");
    assert!(
        std::fs::read_to_string(&html)
            .unwrap()
            .contains("<h2 id=\"kv-plan\">")
    );
    // Without a model there is nothing to plan: one line naming the flags.
    let o = run(&[
        "report",
        "--client",
        "tests/fixtures/reports/native.json",
        "--gpu-memory",
        "80GiB",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--gpu-memory: the KV-cache plan needs --model"),
        "{}",
        text(&o)
    );
}

/// The whole chain on this machine: simulated server, native bench, kernels on
/// Vulkan (Mesa lavapipe without a GPU), one HTML report, rendered in headless
/// Chromium to a screenshot.
#[test]
#[ignore = "opt-in: needs a GPU adapter and Chromium; scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn end_to_end_report_renders_in_chromium() {
    // Lavapipe and Chromium take every core: no timing check beside them.
    let _busy = crate::busy();
    let mock = Mock::start(&["--itl-ms", "4", "--ttft-ms", "10", "--max-batch", "4"]);
    let dir = tempfile::tempdir().unwrap();
    let (client, _) = bench(&mock, dir.path(), "1,4,8");
    let kernels = dir.path().join("kernels.json");
    let o = run(&[
        "kernels",
        "--quick",
        "--models",
        "gemma-3-270m",
        "--json",
        kernels.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "kernels: {}", text(&o));
    let html = dir.path().join("report.html");
    let o = run(&[
        "report",
        "--client",
        client.to_str().unwrap(),
        "--kernels",
        kernels.to_str().unwrap(),
        "--model",
        "gemma-3-270m",
        "--quant",
        "q4_0",
        "--context",
        "4096",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let h = std::fs::read_to_string(&html).unwrap();
    assert_self_contained(&h);
    assert!(
        h.contains("the floor with these kernels") || h.contains("the floor at read bw"),
        "the verdict compares TPOT with the floor"
    );
    assert!(h.contains("id=\"floor\"") && h.contains("id=\"kernels\""));

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-e2e.png");
    let profile = tempfile::tempdir().unwrap();
    let st = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1280,4000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("chromium (install it with scripts/setup.sh)");
    assert!(st.status.success(), "{}", text(&st));
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "a real screenshot"
    );
    eprintln!("report screenshot: {}", shot.display());
    // Keep the rendered report beside it for a look.
    std::fs::copy(&html, shot.with_extension("html")).unwrap();
}

/// `report --gguf FILE`: the served file's own floor on the kernels report's GPU,
/// its weights counted as gguf-py counts the file's tensors.
#[test]
fn the_floor_of_the_gguf_file_served() {
    let o = run(&[
        "report",
        "--client",
        "tests/fixtures/reports/native.json",
        "--kernels",
        "tests/fixtures/reports/kernels-lavapipe.json",
        "--gguf",
        "crates/hw/tests/fixtures/gguf/tiny.gguf",
        "--context",
        "1024",
        "--markdown",
        "-",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    // gguf-py's reading of the file: every tensor's bytes (tied embeddings: the
    // output projection reads token_embd whole, so every tensor is read once).
    let truth: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("crates/hw/tests/fixtures/gguf/tiny.json").unwrap(),
    )
    .unwrap();
    let weights: u64 = truth["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["n_bytes"].as_u64().unwrap())
        .sum();
    let floor = md
        .lines()
        .find(|l| l.starts_with("tiny.gguf (tiny) on "))
        .unwrap_or_else(|| panic!("no floor paragraph:\n{md}"));
    assert!(floor.contains(&format!("({weights} weights + ")), "{floor}");
    assert!(
        floor.contains("Floor: this file on this GPU: tiny.gguf."),
        "{floor}"
    );
    // The ratio is TPOT p50 over the floor the paragraph gives.
    let num = |after: &str, before: &str| -> f64 {
        let s = &floor[floor.find(after).unwrap() + after.len()..];
        s[..s.find(before).unwrap()].trim().parse().unwrap()
    };
    let before_x = &floor[..floor.find("x the floor").unwrap()];
    let ratio: f64 = before_x[before_x.rfind(' ').unwrap() + 1..]
        .parse()
        .unwrap();
    let (floor_ms, tpot) = (
        num("floor with these kernels ", " ms ("),
        num("Measured TPOT p50 ", " ms"),
    );
    // Both floors, named as every table names them, the hardware's first.
    let read_ms = num("floor at read bw ", " ms (");
    assert!(read_ms > 0.0 && read_ms <= floor_ms, "{floor}");
    assert!(
        (tpot / floor_ms - ratio).abs() < 0.05 * ratio,
        "{tpot} / {floor_ms} vs {ratio}"
    );
    // A model preset and the file at once: one line naming both flags.
    let o = run(&[
        "report",
        "--client",
        "tests/fixtures/reports/native.json",
        "--gguf",
        "crates/hw/tests/fixtures/gguf/tiny.gguf",
        "--model",
        "llama-3.1-8b",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--gguf") && text(&o).contains("--model"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_kernels_report_alone_renders_the_kernels() {
    let kernels =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports/kernels-lavapipe.json");
    let k = kernels.to_str().unwrap();
    // To the terminal: the kernels' own tables, never a serving verdict.
    let o = run(&["report", "--kernels", k]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("no level had a successful request"), "{out}");
    for part in [
        "Bandwidth ceiling: read ",
        "Decode floor (batch 1",
        "a kernels report alone",
    ] {
        assert!(out.contains(part), "{part:?} missing:\n{out}");
    }
    // As Markdown: the kernels section, and a verdict that says what is missing.
    let o = run(&["report", "--kernels", k, "--markdown", "-"]);
    assert!(o.status.success(), "{}", text(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(!md.contains("no level had a successful request"), "{md}");
    assert!(
        md.contains("No client run given (--client or --raw)"),
        "{md}"
    );
    assert!(
        md.contains("## GPU kernels") && md.contains("### Decode floor"),
        "{md}"
    );
}
