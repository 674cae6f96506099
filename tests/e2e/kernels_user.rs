//! `tokenscope kernels --shader`: a developer's own WGSL on the roofline, end to
//! end on lavapipe. The shipped example matmuls are checked against each other and
//! placed on the compute roof; tokenscope's own read kernel, given as a user's
//! kernel, reads what the bandwidth ceiling of the same run read; a kernel shorter
//! than the timestamps' step is repeated until it can be timed, and says so; a
//! wrong output exits 1 with the report written; bad specs are one clear error.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::text;
use serde_json::Value;

fn tokenscope(args: &[&str]) -> Output {
    // Lavapipe takes every core: not beside a timing check.
    let _busy = crate::busy();
    tokenscope_as_is(args)
}

/// [`tokenscope`] for a caller that holds [`crate::alone`].
fn tokenscope_as_is(args: &[&str]) -> Output {
    let runtime = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_tokenscope"))
        .args(args)
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env("XDG_CACHE_HOME", runtime.path())
        .output()
        .unwrap()
}

/// A quick `kernels` run with `args`, its JSON report (validated) and stdout.
fn run(args: &[&str], dir: &Path) -> (Output, Value, String) {
    run_by(tokenscope, args, dir)
}

/// [`run`], the binary started by `exec`.
fn run_by(exec: fn(&[&str]) -> Output, args: &[&str], dir: &Path) -> (Output, Value, String) {
    let json = dir.join("kernels.json");
    let mut all = vec!["kernels", "--quick", "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = exec(&all);
    let doc: Value = std::fs::read_to_string(&json)
        .map(|s| serde_json::from_str(&s).unwrap())
        .unwrap_or_else(|_| panic!("no report written: {}", text(&o)));
    common::assert_schema("kernels.schema.json", &doc, "kernels.json");
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    (o, doc, stdout)
}

fn user_kernels(doc: &Value) -> Vec<&Value> {
    doc["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["dtype"] == "wgsl")
        .collect()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn the_example_matmuls_are_checked_searched_and_placed_on_the_roofline() {
    let dir = tempfile::tempdir().unwrap();
    let (o, doc, stdout) = run(
        &["--shader", "examples/kernels/matmul_tiled.wgsl"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let ks = user_kernels(&doc);
    assert_eq!(ks.len(), 2, "one result per tile size");
    let (m, n, k) = (129u64, 65u64, 263u64);
    for (kr, tile) in ks.iter().zip([8u64, 16]) {
        assert_eq!(kr["name"], "matmul_tiled");
        assert_eq!(kr["variant"]["name"], format!("TILE={tile}"));
        assert_eq!(kr["variant"]["source"], "searched");
        assert_eq!(
            kr["shape"],
            serde_json::json!([n.div_ceil(tile), m.div_ceil(tile), 1])
        );
        // Checked against the naive kernel, every output.
        assert_eq!(kr["verified"], true, "{kr}");
        assert_eq!(kr["verification"]["checked"], m * n, "{kr}");
        assert_eq!(kr["flops"], 2 * m * n * k);
        assert_eq!(kr["bytes_moved"], 4 * (m * k + k * n + m * n));
        // The roof that binds: the longer of its FLOPs at the measured FMA rate
        // and its bytes at the measured read bandwidth (2MNK / 4(MK + KN + MN)
        // = 18.6 FLOP/byte: near lavapipe's ridge, above an H100's).
        let gflops = f(&kr["flops"]) / f(&kr["median_us"]) / 1e3;
        assert!((gflops / f(&kr["gflops"]) - 1.0).abs() < 1e-9, "{kr}");
        let fma_us = f(&kr["flops"]) / f(&doc["compute"]["f32_gflops"]) / 1e3;
        let read_us = f(&kr["bytes_moved"]) / f(&doc["bandwidth"]["read_gbps"]) / 1e3;
        let (roof, roof_us) = if fma_us > read_us {
            ("compute", fma_us)
        } else {
            ("bandwidth", read_us)
        };
        assert_eq!(kr["roof"], roof, "{kr}");
        let fraction = roof_us / f(&kr["median_us"]);
        assert!(
            (f(&kr["fraction_of_roof"]) / fraction - 1.0).abs() < 1e-9,
            "{kr}"
        );
        assert!(stdout.contains(if roof == "compute" {
            "of the FMA roof (compute-bound"
        } else {
            "of the read bandwidth roof (bandwidth-bound"
        }));
    }
    for needle in [
        "Your kernel matmul_tiled: fastest of 2 parameter sets",
        "ranked: TILE=",
        "output checked against matmul_naive.wgsl (binding 3)",
        "verified: every kernel matched",
    ] {
        assert!(stdout.contains(needle), "no {needle:?}:\n{stdout}");
    }
    // tokenscope's own sweeps did not run, only its f16 GEMV beside the kernel at
    // the bytes of its largest parameter set; no goals of theirs.
    let all = doc["kernels"].as_array().unwrap();
    let beside: Vec<&Value> = all.iter().filter(|k| k["dtype"] != "wgsl").collect();
    assert_eq!(beside.len(), 1, "{all:?}");
    let g = beside[0];
    assert_eq!(
        (g["name"].as_str(), g["dtype"].as_str()),
        (Some("gemv"), Some("f16"))
    );
    assert_eq!(g["beside"], "matmul_tiled");
    assert_eq!(g["verified"], true, "{g}");
    // 4 (MK + KN + MN) = 267,020 bytes: 1024 columns, the rows that come nearest.
    let bytes = f(&ks[0]["bytes_moved"]);
    assert_eq!(g["shape"][1], 1024);
    assert!(
        (f(&g["bytes_moved"]) - bytes).abs() <= 2.0 * 1024.0 + 4.0,
        "{g}"
    );
    assert!(
        stdout.contains(&format!(
            "beside it, tokenscope's gemv f16 {}x1024 moving {} bytes",
            g["shape"][0], g["bytes_moved"]
        )),
        "{stdout}"
    );
    assert!(
        doc.get("dispatch_cost").is_none(),
        "one GEMV: nothing to fit"
    );
    assert!(
        doc["goals"].as_array().is_none_or(Vec::is_empty),
        "{}",
        doc["goals"]
    );
    // A drift check re-times the user's first kernel.
    assert!(
        doc["drift"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["kernel"].as_str().unwrap().starts_with("matmul_tiled")),
        "{}",
        doc["drift"]
    );

    // The naive one alone, with no check: said unchecked, not verified.
    let (o, doc, stdout) = run(
        &["--shader", "examples/kernels/matmul_naive.wgsl"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let naive = user_kernels(&doc)[0].clone();
    assert_eq!(naive["verification"]["checked"], 0);
    assert!(stdout.contains("unchecked"), "{stdout}");
    assert!(
        stdout.contains("verified: every checked kernel matched its reference; 1 not checked"),
        "{stdout}"
    );
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn the_read_kernel_given_as_a_users_reads_what_the_ceiling_reads() {
    // Two figures of one run compared: no other kernel run or browser beside it.
    let _alone = crate::alone();
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = String::from("33554432");
    let mut seen = Vec::new();
    // The ceiling's buffer size is the host's cache size: learnt from the first run.
    for _ in 0..4 {
        let (o, doc, _) = run_by(
            tokenscope_as_is,
            &[
                "--shader",
                "shaders/bandwidth_read.wgsl",
                "--spec",
                "examples/kernels/bandwidth_read.toml",
                "--param",
                &format!("BYTES={bytes}"),
            ],
            dir.path(),
        );
        assert!(o.status.success(), "{}", text(&o));
        let bw = &doc["bandwidth"];
        let buffer = bw["buffer_bytes"].as_u64().unwrap();
        if buffer.to_string() != bytes {
            bytes = buffer.to_string();
            continue;
        }
        let k = user_kernels(&doc)[0];
        assert_eq!(k["bytes_moved"].as_u64(), Some(buffer));
        // The ceiling was read before the user's kernel ran and again at the end
        // (the drift check): the user's figure within 5% of either, or between
        // them (lavapipe's figures move with the host's load between the two).
        let again_us = doc["drift"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["kernel"] == "bandwidth_read")
            .map(|d| f(&d["again_us"]))
            .unwrap();
        let first = f(&bw["read_gbps"]);
        let again = buffer as f64 / again_us / 1e3;
        let user = f(&k["effective_gbps"]);
        let (r1, r2) = (user / first, user / again);
        seen.push((r1, r2));
        let between = (user - first) * (user - again) <= 0.0;
        if between || (r1 - 1.0).abs() <= 0.05 || (r2 - 1.0).abs() <= 0.05 {
            eprintln!("user read / ceiling read (first, again): {seen:.3?}");
            return;
        }
    }
    panic!("the user's read kernel never within 5% of the ceiling's: {seen:.3?}");
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn a_kernel_shorter_than_the_timestamp_step_is_repeated_until_it_can_be_timed() {
    // The batch is sized on one timed pass: another kernel run beside it can slow
    // that pass and leave later samples short of 100 steps (302 x 19.9 us seen).
    let _alone = crate::alone();
    let dir = tempfile::tempdir().unwrap();
    let expect = dir.path().join("five.bin");
    std::fs::write(&expect, 5u32.to_le_bytes()).unwrap();
    let tiny = |extra: &[&str]| {
        let mut args = vec![
            "--shader",
            "tests/fixtures/kernels/tiny.wgsl",
            "--binding",
            "read u32 = 2, 3",
            "--binding",
            "read_write u32[1]",
            "--dispatch",
            "1",
            "--check-binding",
            "1",
            "--expect",
            expect.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let (o, doc, stdout) = run_by(tokenscope_as_is, &args, dir.path());
        assert!(o.status.success(), "{}", text(&o));
        let k = user_kernels(&doc)[0].clone();
        assert_eq!(k["verified"], true, "{k}");
        (k, stdout)
    };
    // Timestamps rounded to 100 us, as Chrome rounds them.
    let (coarse, stdout) = tiny(&["--timestamp-quantum-us", "100"]);
    let per_sample = coarse["timing"]["calls_per_sample"].as_u64().unwrap();
    let median = f(&coarse["median_us"]);
    // A sample lasts 100 steps (10 ms) at least: the rounding is under 1% of it.
    assert!(
        per_sample as f64 * median >= 0.9 * 10_000.0,
        "{per_sample} x {median} us"
    );
    assert!(median > 0.0 && median < 5_000.0, "{coarse}");
    let notes = coarse["notes"].to_string();
    assert!(
        notes.contains("timestamps step by 100 us here")
            || notes.contains("every timestamp read the same"),
        "{notes}"
    );
    assert!(stdout.contains("dispatches per sample"), "{stdout}");
    // Each sample came from the rounded clock: its whole batch lasted a whole
    // number of 100 us steps. The harness promises the median sample 90% of the
    // minimum (100 steps: samples are taken again when it falls short); a single
    // sample can run faster than the batch was sized for (a CI run saw one of
    // 54 steps beside a median of 119, lavapipe on a loaded CPU), its rounding
    // still under 5% at 20 steps.
    let mut steps_per_sample = Vec::new();
    for sample in coarse["samples_us"].as_array().unwrap() {
        let batch_us = f(sample) * per_sample as f64;
        let steps = batch_us / 100.0;
        assert!(
            (steps - steps.round()).abs() < 1e-6,
            "{batch_us} us: {coarse}"
        );
        assert!(steps >= 20.0, "{batch_us} us: {coarse}");
        steps_per_sample.push(steps);
    }
    assert!(
        common::median(&steps_per_sample) >= 90.0,
        "{steps_per_sample:?}: {coarse}"
    );
    // On the adapter's own timestamps there is no step to outlast. (Its per-dispatch
    // time is not compared: lavapipe's fixed cost per pass spreads over 37
    // dispatches there and 575 here, 106 against 17 us in a CI run.)
    let (fine, _) = tiny(&[]);
    assert!(
        !fine["notes"].to_string().contains("timestamps step"),
        "{fine}"
    );
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn a_wrong_output_exits_1_naming_the_first_difference_and_keeps_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let zeros = dir.path().join("zeros.bin");
    std::fs::write(&zeros, vec![0u8; 129 * 65 * 4]).unwrap();
    let (o, doc, stdout) = run(
        &[
            "--shader",
            "examples/kernels/matmul_naive.wgsl",
            "--check-binding",
            "3",
            "--expect",
            zeros.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let k = user_kernels(&doc)[0];
    assert_eq!(k["verified"], false);
    let failure = k["verification"]["failure"].as_str().unwrap();
    assert!(failure.contains("binding 3[0]"), "{failure}");
    assert!(f(&k["median_us"]) > 0.0, "timed all the same");
    assert!(stdout.contains("NO"), "{stdout}");
}

#[test]
fn bad_kernels_are_one_clear_error_before_any_gpu_work() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("typo.toml");
    std::fs::write(&spec, "dispach = [1]\n").unwrap();
    let spec = spec.to_str().unwrap();
    let shader = "examples/kernels/matmul_naive.wgsl";
    for (args, says) in [
        (
            vec!["--shader", "no/such.wgsl"],
            "--shader no/such.wgsl: cannot read",
        ),
        (
            vec!["--shader", shader, "--spec", spec],
            "unknown field `dispach`",
        ),
        (
            vec![
                "--shader",
                "tests/fixtures/kernels/tiny.wgsl",
                "--binding",
                "read u32[2]",
            ],
            "no dispatch; give --dispatch",
        ),
        (
            vec![
                "--shader",
                shader,
                "--binding",
                "read f64[4]",
                "--dispatch",
                "1",
            ],
            "`f64` is not f32, f16, u32 or i32",
        ),
        (
            vec!["--shader", shader, "--param", "TILE=8,x"],
            "--param TILE=8,x: `x` is not a whole number",
        ),
        (vec!["--shader", shader, "--param", "M"], "expected NAME=V"),
        (
            vec!["--shader", shader, "--reference", shader],
            "need --check-binding",
        ),
        (
            vec![
                "--shader",
                shader,
                "--check-binding",
                "1",
                "--expect",
                "/dev/null",
            ],
            "the check's binding 1 is not read_write",
        ),
        (
            vec!["--shader", shader, "--param", "M=0"],
            "dispatch `cdiv(M, 8)` is 0",
        ),
        (
            vec!["--shader", shader, "--param", "K=0"],
            "binding 1 has no elements",
        ),
        (vec!["--spec", spec], "--shader"),
    ] {
        let mut all = vec!["kernels", "--quick"];
        all.extend_from_slice(&args);
        let o = tokenscope(&all);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(stderr.contains(says), "{args:?}: no {says:?} in {stderr}");
        assert!(
            o.stdout.is_empty(),
            "{args:?}: nothing measured: {}",
            text(&o)
        );
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn a_shader_that_does_not_compile_says_where_before_the_roofs() {
    let o = tokenscope(&[
        "kernels",
        "--quick",
        "--shader",
        "tests/fixtures/kernels/broken.wgsl",
        "--binding",
        "read_write u32[1]",
        "--dispatch",
        "1",
    ]);
    let all = text(&o);
    assert_eq!(o.status.code(), Some(2), "{all}");
    // The user's own line number (6), not the preprocessed text's.
    assert!(
        all.contains("wgsl:6:20") && all.contains("undefined_name"),
        "{all}"
    );
    assert!(
        !all.contains("Bandwidth ceiling"),
        "no roofs measured first: {all}"
    );
}
