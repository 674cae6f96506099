//! `tokenscope kernels` end to end (on lavapipe in CI): the quick run exits 0 with
//! every kernel verified, its JSON validates against `schemas/kernels.schema.json` and
//! reads back; a verification failure exits 1 and still writes `--out`; no adapter
//! exits non-zero with a hint.

use crate::common;

use std::process::{Command, Output};

use common::text;

use serde_json::Value;
use tokenscope_kernel_report::KernelReport;

fn tokenscope(args: &[&str], envs: &[(&str, &str)]) -> Output {
    // Lavapipe takes every core: no timing check beside a kernel run.
    let _busy = crate::busy();
    let runtime = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tokenscope"));
    // A tuning file of the developer's own (~/.cache/tokenscope/tuning) must not
    // change what a test runs: the cache directory is the test's, unless it sets one.
    cmd.args(args)
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env("XDG_CACHE_HOME", runtime.path());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn validator() -> jsonschema::Validator {
    common::schema_validator("kernels.schema.json")
}

fn assert_valid(doc: &Value) {
    common::assert_schema("kernels.schema.json", doc, "kernels.json");
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn quick_run_verifies_every_kernel_and_validates() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kernels.json");
    let o = tokenscope(
        &["kernels", "--quick", "--json", out.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));

    let stdout = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "adapter",
        "Bandwidth ceiling",
        "gemv",
        "Decode floor",
        "Goals",
        "verified: every kernel",
    ] {
        assert!(
            stdout.contains(needle),
            "stdout lacks {needle:?}:\n{stdout}"
        );
    }

    let raw = std::fs::read_to_string(&out).unwrap();
    let doc: Value = serde_json::from_str(&raw).unwrap();
    assert_valid(&doc);
    assert_eq!(doc["schema"], "tokenscope.kernels/1");
    assert_eq!(doc["verified"], true);

    let report = KernelReport::from_json(&raw).unwrap();
    assert!(report.config.quick);
    let bw = report.bandwidth.as_ref().unwrap();
    assert!(bw.read_verified && bw.copy_verified && bw.read_gbps > 0.0);
    assert!(
        bw.working_set_bytes >= 2 * report.config.cache_bytes,
        "working set must exceed the cache"
    );
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    for k in &report.kernels {
        assert!(
            k.verified,
            "{} {} {:?}: {:?}",
            k.name, k.dtype, k.shape, k.verification.failure
        );
        assert!(k.median_us > 0.0 && k.bytes_moved > 0);
    }
    let has = |name: &str, dtype: &str| {
        report
            .kernels
            .iter()
            .any(|k| k.name == name && k.dtype == dtype)
    };
    for dtype in ["f32", "f16", "q8_0", "q4_0"] {
        assert!(has("gemv", dtype), "no gemv {dtype}");
    }
    for (name, dtype) in [
        ("matmul_skinny", "f16"),
        ("matmul_skinny", "q4_0"),
        ("attention_decode", "f16"),
        ("attention_decode_split", "f16"),
        ("attention_decode", "f32"),
        ("attention_decode_split", "f32"),
    ] {
        assert!(has(name, dtype), "no {name} {dtype}");
    }
    // Every preset at every quant of the run has a floor; the quick step ran.
    assert_eq!(report.decode_floor.len(), 5 * 3);
    assert!(
        report
            .decode_floor
            .iter()
            .all(|f| f.estimate.tpot_floor_ms > 0.0)
    );
    assert_eq!(report.decode_steps.len(), 1);
    assert_eq!(report.decode_steps[0].model, "gemma-3-270m");
    assert!(report.decode_steps[0].gap > 0.0);
    // Goals: GEMV per format, the skinny matmul per format and batch range, split-KV
    // attention at 8k and 32k (not measured in the quick run), the decode step.
    let goal_names: Vec<&str> = report.goals.iter().map(|g| g.goal.as_str()).collect();
    assert_eq!(report.goals.len(), 4 + 2 * 2 + 2 + 1, "{goal_names:?}");
    for dtype in ["f32", "f16", "q8_0", "q4_0"] {
        assert!(goal_names.contains(&format!("gemv {dtype}, every shape").as_str()));
    }
    // The compute roof, and every kernel placed against the roof that bounds it.
    let compute = report.compute.as_ref().expect("a compute roof");
    assert!(compute.verified && compute.f32_gflops > 0.0);
    for k in &report.kernels {
        assert!(
            k.roof.is_some() && k.fraction_of_roof.unwrap_or(0.0) > 0.0,
            "{k:?}"
        );
        let v = k.variant.as_ref().expect("every kernel says its variant");
        assert_eq!(v.source, "default", "{} {}: {v:?}", k.name, k.dtype);
    }
    // Without a tuning file the report says so, and where it looked.
    let tuning = report.tuning.as_ref().unwrap();
    assert!(
        !tuning.used && tuning.note.contains("kernels --tune"),
        "{tuning:?}"
    );
    // The drift check: the read kernel and the first kernel of each group, again.
    let drifted: Vec<&str> = report.drift.iter().map(|d| d.kernel.as_str()).collect();
    assert_eq!(drifted.len(), 1 + 3, "{drifted:?}");
    assert_eq!(drifted[0], "bandwidth_read");
    assert!(
        report
            .drift
            .iter()
            .all(|d| d.first_us > 0.0 && d.again_us > 0.0)
    );
    // The batch sweeps against their GEMVs: batch 1 and every skinny batch.
    assert_eq!(report.roofline.len(), 2, "{:?}", report.roofline);
    for row in &report.roofline {
        let batches: Vec<u32> = row.points.iter().map(|p| p.batch).collect();
        assert_eq!(batches, [1, 3, 8, 64]);
        assert!((row.points[0].time_vs_batch1 - 1.0).abs() < 1e-12);
    }
    // The fixed cost per dispatch: each format's 3 GEMVs fitted as a + bytes / B
    // (those off the cache: lavapipe beside other tests can put one above the
    // ceiling), recomputed here from the report's own rows (least squares by hand).
    let usable = |dtype: &str| -> Vec<(f64, f64)> {
        report
            .kernels
            .iter()
            .filter(|k| k.name == "gemv" && k.dtype == dtype && !k.cache_resident)
            .map(|k| (k.bytes_moved as f64, k.median_us))
            .collect()
    };
    let fitted: Vec<&str> = ["f32", "f16", "q8_0", "q4_0"]
        .into_iter()
        .filter(|d| usable(d).len() == 3)
        .collect();
    let got: Vec<&str> = report
        .dispatch_cost
        .iter()
        .map(|c| c.dtype.as_str())
        .collect();
    assert_eq!(got, fitted, "{:?}", report.dispatch_cost);
    for c in &report.dispatch_cost {
        let pts = usable(&c.dtype);
        assert_eq!((c.shapes, pts.len()), (3, 3), "{c:?}");
        let n = pts.len() as f64;
        let (mx, my) = (
            pts.iter().map(|p| p.0).sum::<f64>() / n,
            pts.iter().map(|p| p.1).sum::<f64>() / n,
        );
        let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let slope = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx;
        let a = my - slope * mx;
        assert!(
            (c.fixed_us - a).abs() <= 1e-6 * a.abs().max(1.0),
            "{c:?} vs {a}"
        );
        if slope > 0.0 {
            let b = c.stream_gbps.expect("a positive slope is a rate");
            assert!((b * slope / 1e-3 - 1.0).abs() < 1e-9, "{c:?}");
        }
        assert!(c.fixed_ci95_us > 0.0 && c.resolved == (c.fixed_us > c.fixed_ci95_us));
    }
    assert!(stdout.contains("Fixed cost per dispatch"), "{stdout}");
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn a_verification_failure_exits_1_and_still_writes_out() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kernels.json");
    let o = tokenscope(
        &[
            "kernels",
            "--quick",
            "--only",
            "gemv",
            "--models",
            "gemma-3-270m",
            "--inject-fault",
            "--json",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("failed verification") && stderr.contains("output"),
        "{stderr}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_valid(&doc);
    assert_eq!(doc["verified"], false);
    let failed: Vec<&Value> = doc["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["verified"] == false)
        .collect();
    assert!(!failed.is_empty());
    let msg = failed[0]["verification"]["failure"].as_str().unwrap();
    assert!(msg.contains("row") && msg.contains("gemv"), "{msg}");
}

#[test]
fn no_adapter_exits_nonzero_with_a_hint() {
    let o = tokenscope(
        &["kernels", "--quick", "--adapter", "no-such-gpu-anywhere"],
        &[],
    );
    assert!(!o.status.success(), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    // Adapters exist but none matches: which were found, no install hint (the
    // issue's `--adapter nvidia` advised installing an installed lavapipe); none
    // at all: how to get one on the CPU.
    let listed = kernel_harness::block_on(kernel_harness::list_adapters(None));
    if listed.is_empty() {
        assert!(
            stderr.contains("no GPU adapter") && stderr.contains("mesa-vulkan-drivers"),
            "{stderr}"
        );
    } else {
        assert!(
            stderr.contains("none matched") && !stderr.contains("mesa-vulkan-drivers"),
            "{stderr}"
        );
        assert!(listed.iter().all(|a| stderr.contains(&a.name)), "{stderr}");
    }
    assert_eq!(stderr.trim().lines().count(), 1, "one clear line: {stderr}");

    // No Vulkan driver at all.
    let o = tokenscope(
        &["kernels", "--quick", "--backend", "vulkan"],
        &[
            ("VK_ICD_FILENAMES", "/nonexistent.json"),
            ("VK_DRIVER_FILES", "/nonexistent.json"),
        ],
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("mesa-vulkan-drivers"),
        "{}",
        text(&o)
    );
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn list_adapters_and_bad_options() {
    let o = tokenscope(&["kernels", "--list-adapters"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("subgroups"));

    let o = tokenscope(&["kernels", "--quick", "--models", "gpt-17"], &[]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("gpt-17"),
        "{}",
        text(&o)
    );

    let o = tokenscope(&["kernels", "--quick", "--quant", "iq2_xs"], &[]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("iq2_xs"),
        "{}",
        text(&o)
    );
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn custom_model_from_config_json() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("tiny-llama");
    std::fs::create_dir(&model_dir).unwrap();
    let config = model_dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
            "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
            "vocab_size": 1000}"#,
    )
    .unwrap();
    let out = dir.path().join("k.json");
    let o = tokenscope(
        &[
            "kernels",
            "--quick",
            "--only",
            "gemv,step",
            "--models",
            "llama-3.1-8b",
            "--model-config",
            config.to_str().unwrap(),
            "--decode-step",
            "tiny-llama",
            "--quant",
            "q8_0",
            "--context",
            "64",
            "--json",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_valid(&doc);
    let floors = doc["decode_floor"].as_array().unwrap();
    assert!(
        floors
            .iter()
            .any(|f| f["model"] == "tiny-llama" && f["quant"] == "q8_0" && f["context"] == 64)
    );
    assert_eq!(doc["decode_steps"][0]["model"], "tiny-llama");
    assert!(
        floors
            .iter()
            .any(|f| f["model"] == "tiny-llama" && f["decode_step_ms"].is_number())
    );
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn schema_rejects_what_the_contract_forbids() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k.json");
    let o = tokenscope(
        &[
            "kernels",
            "--quick",
            "--only",
            "gemv",
            "--models",
            "mistral-7b",
            "--decode-step",
            "none",
            "--json",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let good: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_valid(&good);
    let v = validator();

    let mut bad = good.clone();
    bad["schema"] = "tokenscope.kernels/2".into();
    assert!(!v.is_valid(&bad), "another major version");
    let mut bad = good.clone();
    bad["kernels"][0]["cache_resident"] = true.into();
    bad["kernels"][0]["gbps"] = 1.5.into();
    assert!(
        !v.is_valid(&bad),
        "a cache-resident kernel must not report gbps"
    );
    let mut bad = good.clone();
    bad["kernels"][0]
        .as_object_mut()
        .unwrap()
        .remove("verified");
    assert!(!v.is_valid(&bad), "verified is required");
    let mut bad = good.clone();
    bad["timing"] = "stopwatch".into();
    assert!(!v.is_valid(&bad), "timing method");

    let mut newer = good.clone();
    newer["schema"] = "tokenscope.kernels/2".into();
    let e = KernelReport::from_json(&newer.to_string())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tokenscope.kernels/2") && e.contains("major version 1"),
        "{e}"
    );
}

fn gguf_fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("crates/hw/tests/fixtures/gguf/{name}"))
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn a_gguf_files_gemvs_run_on_its_own_weights() {
    use sha2::Digest as _;
    let file = gguf_fixture("tiny.gguf");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kernels.json");
    let o = tokenscope(
        &[
            "kernels",
            "--quick",
            "--gguf",
            file.to_str().unwrap(),
            "--real-weights",
            "--json",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "File      tiny.gguf",
        "no iq4_nl kernel: blk.1.ffn_gate.weight",
        "This file on this GPU: tiny.gguf",
        "measured on the file's own weights",
    ] {
        assert!(
            stdout.contains(needle),
            "stdout lacks {needle:?}:\n{stdout}"
        );
    }
    let raw = std::fs::read_to_string(&out).unwrap();
    let doc: Value = serde_json::from_str(&raw).unwrap();
    assert_valid(&doc);
    let report = KernelReport::from_json(&raw).unwrap();
    assert!(report.verified, "{:?}", report.errors);
    let g = report.gguf.as_ref().expect("the file's section");
    // What gguf-py read of the same file (crates/hw/tests/fixtures/gguf/tiny.json).
    let truth: Value =
        serde_json::from_str(&std::fs::read_to_string(gguf_fixture("tiny.json")).unwrap()).unwrap();
    let bytes = std::fs::read(&file).unwrap();
    let data_offset = truth["data_offset"].as_u64().unwrap();
    assert_eq!(g.header_bytes, data_offset);
    assert_eq!(g.size_bytes, bytes.len() as u64);
    let sha: String = sha2::Sha256::digest(&bytes[..data_offset as usize])
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(g.header_sha256, sha);
    assert!(g.real_weights);
    // Every 2-D tensor of a type with a kernel ran on its own bytes, verified
    // against the CPU's dequantization of them; the iq4_nl one is listed as not
    // measured.
    let tensors = truth["tensors"].as_array().unwrap();
    let names = truth["type_names"].as_object().unwrap();
    for t in tensors {
        let name = t["name"].as_str().unwrap();
        let ty = names[&t["type"].to_string()]
            .as_str()
            .unwrap()
            .to_ascii_lowercase();
        if t["dims"].as_array().unwrap().len() != 2 {
            continue;
        }
        let ran: Vec<_> = report
            .kernels
            .iter()
            .filter(|k| k.tensors.iter().any(|n| n == name))
            .collect();
        if ty == "iq4_nl" {
            assert!(ran.is_empty(), "{name}");
            assert!(
                g.unsupported
                    .iter()
                    .any(|u| u.tensors.iter().any(|n| n == name))
            );
            continue;
        }
        assert_eq!(ran.len(), 1, "{name} ({ty}) ran {} times", ran.len());
        let k = ran[0];
        assert!(k.verified, "{name}: {:?}", k.verification.failure);
        assert_eq!(k.dtype, ty, "{name}");
        let dims: Vec<u64> = t["dims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(k.shape, vec![dims[1], dims[0]], "{name}: rows x cols");
    }
    // The types table counts what gguf-py counted.
    for row in &g.types {
        let n = tensors
            .iter()
            .filter(|t| {
                names[&t["type"].to_string()]
                    .as_str()
                    .unwrap()
                    .eq_ignore_ascii_case(&row.ggml_type.to_string())
            })
            .count() as u64;
        assert_eq!(row.tensors, n, "{}", row.ggml_type);
        assert_eq!(row.kernel, row.ggml_type.to_string() != "iq4_nl");
    }
    let f = &g.floors[0];
    let (read, tpot) = (f.read_floor_ms.unwrap(), f.tpot_floor_ms.unwrap());
    assert!(
        read > 0.0 && tpot >= read,
        "floor {tpot} ms vs read {read} ms"
    );
    assert_eq!(
        f.bytes.bytes_per_token,
        f.bytes.weight_bytes_per_token + f.bytes.kv_bytes_per_token
    );
}

#[test]
fn bad_gguf_files_are_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = std::fs::read(gguf_fixture("tiny.gguf")).unwrap();
    let cut = dir.path().join("cut.gguf");
    std::fs::write(&cut, &tiny[..300]).unwrap();
    let json = dir.path().join("model.gguf");
    std::fs::write(&json, "{\"not\": \"gguf\"}").unwrap();
    let missing = dir.path().join("missing.gguf");
    for (path, want) in [
        (&cut, "offset"),
        (&json, "not a GGUF file"),
        (&missing, "cannot open"),
    ] {
        let o = tokenscope(&["kernels", "--gguf", path.to_str().unwrap()], &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(
            err.contains(path.to_str().unwrap()) && err.contains(want),
            "{path:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
    let o = tokenscope(&["kernels", "--real-weights"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--gguf"));
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn the_gemv_sweep_takes_any_format() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kernels.json");
    let o = tokenscope(
        &[
            "kernels",
            "--quick",
            "--only",
            "gemv",
            "--formats",
            "q4_k,q5_1",
            "--json",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let report = KernelReport::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let ran = |dtype: &str, shape: &[u64]| {
        report
            .kernels
            .iter()
            .any(|k| k.name == "gemv" && k.dtype == dtype && k.shape == shape && k.verified)
    };
    assert!(ran("q4_k", &[1024, 1024]) && ran("q5_1", &[1024, 1024]) && ran("q5_1", &[1003, 800]));
    // 800 weights are not whole 256-weight super-blocks: skipped, saying why.
    let skip = report
        .skipped
        .iter()
        .find(|s| s.dtype == "q4_k")
        .expect("q4_k at 800 columns is skipped");
    assert!(
        skip.reason.contains("not a multiple of 256"),
        "{}",
        skip.reason
    );
    assert!(
        report
            .kernels
            .iter()
            .all(|k| k.dtype == "q4_k" || k.dtype == "q5_1")
    );
}

/// The JSON of a file written by a run.
fn json_file(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn tune_writes_a_tuning_file_that_later_runs_use() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().to_str().unwrap();
    let small = [
        "kernels",
        "--quick",
        "--only",
        "gemv,attention",
        "--formats",
        "f16,q4_0",
        // The bandwidth buffers at 4 x 16 MiB rather than 4 x the host's L3 (480 MiB
        // on some CI hosts): this test is about the tuning file, and a 2 GB fill on a
        // loaded 2-core machine took the whole 10 s budget.
        "--cache-mib",
        "16",
    ];
    let run = |extra: &[&str], out: &str| {
        let out = dir.path().join(out);
        let mut args: Vec<&str> = small.to_vec();
        args.extend_from_slice(extra);
        args.extend(["--json", out.to_str().unwrap()]);
        let o = tokenscope(&args, &[("XDG_CACHE_HOME", cache)]);
        (o, out)
    };

    // 1. A small search, written where later runs on this adapter look for it.
    let (o, out) = run(&["--tune", "--tune-budget", "10s"], "tuned.json");
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("tuning file written: "), "{err}");
    let files: Vec<std::path::PathBuf> = std::fs::read_dir(dir.path().join("tokenscope/tuning"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let tuning = json_file(&files[0]);
    common::assert_schema("tuning.schema.json", &tuning, "tuning file");
    let file = tokenscope_kernel_report::TuningFile::from_json(&tuning.to_string()).unwrap();
    // Every problem of the run was searched or, once the budget was spent, listed as
    // unsearched: the bandwidth ceiling's read and copy, 2 formats x 3 shapes of GEMV,
    // and attention (2 layouts x 2 formats x 2 contexts, both kernels), in that order.
    let kernels: Vec<&str> = file.entries.iter().map(|e| e.kernel.as_str()).collect();
    assert_eq!(
        kernels[..2],
        ["bandwidth_read", "bandwidth_copy"],
        "{kernels:?}"
    );
    let gemvs = kernels.iter().filter(|k| **k == "gemv").count();
    assert_eq!(gemvs, 6, "{kernels:?}");
    assert_eq!(file.entries.len() + file.unsearched.len(), 2 + 6 + 16);
    assert!(
        file.spent_s < 10.0 * 3.0,
        "the budget bounds the search: {}",
        file.spent_s
    );
    assert_eq!(file.unsearched.len(), file.unsearched_problems.len());
    for e in &file.entries {
        assert!(e.failed.is_empty(), "a variant gave a wrong answer: {e:?}");
        assert!(e.tried.iter().any(|t| t.variant == e.best), "{e:?}");
        assert!(e.tried.iter().any(|t| t.variant == e.default), "{e:?}");
        assert!(e.best_us > 0.0 && e.worst_us > 0.0);
        let sorted = e.tried.windows(2).all(|w| w[0].median_us <= w[1].median_us);
        assert!(sorted, "{e:?}");
        // Best, default and worst from one interleaved pass: the best is its
        // fastest, never slower than the others (the issue's best 720.6 us beside
        // a worst of 704.0 us cannot happen).
        if e.tried.len() > 1 {
            assert_eq!(e.rounds, 3, "{e:?}");
            assert!(e.spread.is_some(), "{e:?}");
            assert!(e.best_us <= e.worst_us, "{e:?}");
            assert!(e.best_us <= e.default_us.unwrap(), "{e:?}");
        } else {
            assert_eq!((e.rounds, e.spread), (0, None), "{e:?}");
        }
    }
    // The run that tuned ran every kernel in its tuned variant, and said so.
    let report = KernelReport::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_valid(&json_file(&out));
    assert!(report.tuning.as_ref().unwrap().used);
    // The bandwidth ceiling ran its searched read and copy.
    let bw = report.bandwidth.as_ref().unwrap();
    for (v, e) in [
        (&bw.read_variant, &file.entries[0]),
        (&bw.copy_variant, &file.entries[1]),
    ] {
        let v = v.as_ref().unwrap();
        assert_eq!(
            (v.source.as_str(), v.name.as_str()),
            ("tuned", e.best.as_str())
        );
    }
    let searched = |k: &tokenscope_kernel_report::KernelResult| {
        file.lookup(&k.name, &k.dtype, &k.shape, k.batch, k.kv_heads)
            .is_some_and(|(_, exact)| exact)
    };
    for k in report.kernels.iter().filter(|k| searched(k)) {
        let v = k.variant.as_ref().unwrap();
        let entry = file
            .lookup(&k.name, &k.dtype, &k.shape, k.batch, k.kv_heads)
            .map(|(e, exact)| (e.best.clone(), exact));
        assert_eq!(v.source, "tuned", "{} {}: {v:?}", k.name, k.dtype);
        assert_eq!(Some((v.name.clone(), true)), entry, "{k:?}");
        let search = v.search.as_ref().unwrap();
        assert!(search.tried >= 1 && search.best == v.name);
        assert_eq!(search.shape, k.shape, "its own shape's figures: {k:?}");
    }
    // A problem the budget left unsearched ran its default and says so, with no
    // other problem's figures; the counts agree with the kernel table.
    let mut unsearched = 0;
    for k in &report.kernels {
        let v = k.variant.as_ref().unwrap();
        if file.is_unsearched((&k.name, &k.dtype, &k.shape, k.batch, k.kv_heads)) {
            unsearched += 1;
            assert_eq!(v.source, "unsearched", "{k:?}");
            assert!(v.search.is_none(), "{k:?}");
            assert!(v.note.contains("left unsearched"), "{v:?}");
        } else if v.source != "tuned" {
            assert!(v.search.is_none(), "no other problem's figures: {k:?}");
        }
    }
    let stdout = String::from_utf8_lossy(&o.stdout);
    let tuned = report
        .kernels
        .iter()
        .filter(|k| k.variant.as_ref().unwrap().source == "tuned")
        .count();
    assert!(
        stdout.contains(&format!(
            "Variants: {tuned} of {} kernels ran the variant searched for their shape",
            report.kernels.len()
        )),
        "{stdout}"
    );
    if unsearched > 0 {
        assert!(
            stdout.contains(&format!(
                "{unsearched} their default (left unsearched when the tuning budget ran out)"
            )),
            "{stdout}"
        );
    }
    assert!(
        stdout.contains("Variant search on this adapter"),
        "{stdout}"
    );

    // 2. A later run reads it by itself.
    let (o, out) = run(&[], "later.json");
    assert!(o.status.success(), "{}", text(&o));
    let later = KernelReport::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(later.tuning.as_ref().unwrap().used);
    let tuned = |r: &KernelReport| {
        r.kernels
            .iter()
            .filter(|k| k.variant.as_ref().unwrap().source == "tuned")
            .count()
    };
    assert_eq!(tuned(&later), tuned(&report));
    assert!(tuned(&later) >= 4, "at least the GEMVs");
    // --no-tuning: the defaults.
    let (o, out) = run(&["--no-tuning"], "defaults.json");
    assert!(o.status.success(), "{}", text(&o));
    let plain = KernelReport::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(
        plain
            .kernels
            .iter()
            .all(|k| k.variant.as_ref().unwrap().source == "default")
    );

    // 3. A file made on another adapter is not used, and the report says why.
    let mut other = tuning.clone();
    other["adapter"]["name"] = "Some Other GPU".into();
    let other_path = dir.path().join("other.json");
    std::fs::write(&other_path, other.to_string()).unwrap();
    let (o, out) = run(
        &["--tuning", other_path.to_str().unwrap()],
        "other-run.json",
    );
    assert!(o.status.success(), "{}", text(&o));
    let r = KernelReport::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let t = r.tuning.as_ref().unwrap();
    assert!(!t.used && t.note.contains("Some Other GPU"), "{t:?}");
    assert!(
        r.kernels
            .iter()
            .all(|k| k.variant.as_ref().unwrap().source == "default")
    );

    // 4. A --tuning file that is missing or not a tuning file: one clear error.
    for (path, content, says) in [
        ("missing.json", None, "cannot read"),
        (
            "garbage.json",
            Some("{\"schema\": \"tokenscope.kernels/1\"}"),
            "tokenscope.kernels/1",
        ),
    ] {
        let p = dir.path().join(path);
        if let Some(c) = content {
            std::fs::write(&p, c).unwrap();
        }
        let (o, _) = run(&["--tuning", p.to_str().unwrap()], "never.json");
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(path) && e.contains(says), "{e}");
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn no_wayland_noise_and_an_adapter_that_matches_nothing_lists_what_exists() {
    let _busy = crate::busy();
    // Without XDG_RUNTIME_DIR (a container, CI, ssh): no libwayland complaint.
    let o = Command::new(env!("CARGO_BIN_EXE_tokenscope"))
        .args(["kernels", "--list-adapters"])
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("XDG_RUNTIME_DIR"), "{err}");
    let listed = String::from_utf8_lossy(&o.stdout);
    let first = listed
        .lines()
        .nth(2)
        .unwrap_or("")
        .split("  ")
        .next()
        .unwrap_or("")
        .to_owned();
    assert!(!first.is_empty(), "{listed}");
    // An --adapter that matches none: the adapters found, not an install hint.
    let o = Command::new(env!("CARGO_BIN_EXE_tokenscope"))
        .args(["kernels", "--quick", "--adapter", "no-such-gpu-anywhere"])
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("XDG_RUNTIME_DIR"), "{err}");
    assert!(
        err.contains("no-such-gpu-anywhere") && err.contains("none matched"),
        "{err}"
    );
    assert!(err.contains(&first), "{first:?} not named: {err}");
    assert!(!err.contains("apt install"), "{err}");
}

/// The lavapipe fixture with 12 samples per kernel (and the read kernel) around
/// `scale` times its median, written to `path`.
fn kernels_with_samples(path: &std::path::Path, scale: f64, samples: bool) {
    let text = include_str!("../fixtures/reports/kernels-lavapipe.json");
    let mut doc: serde_json::Value = serde_json::from_str(text).unwrap();
    let spread = |m: f64| -> Vec<f64> {
        (0..12)
            .map(|i| m * scale * (1.0 + 0.004 * (f64::from(i) - 5.5)))
            .collect()
    };
    for k in doc["kernels"].as_array_mut().unwrap() {
        let m = k["median_us"].as_f64().unwrap();
        k["median_us"] = (m * scale).into();
        if samples {
            k["samples_us"] = spread(m).into();
        }
    }
    let read = doc["bandwidth"]["read"]["median_us"].as_f64().unwrap();
    doc["bandwidth"]["read"]["median_us"] = (read * scale).into();
    if samples {
        doc["bandwidth"]["read_samples_us"] = spread(read).into();
    }
    std::fs::write(path, doc.to_string()).unwrap();
}

#[test]
fn compare_takes_two_kernels_reports() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    kernels_with_samples(&p("a.kernels.json"), 1.0, true);
    kernels_with_samples(&p("b.kernels.json"), 1.2, true);
    kernels_with_samples(&p("old.kernels.json"), 1.2, false);
    let s = |n: &str| p(n).to_str().unwrap().to_owned();
    let compare = |args: &[&str]| {
        let mut all = vec!["compare".to_owned()];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        tokenscope(&refs, &[])
    };
    // 20% slower everywhere: worse, with its interval; the gate trips (exit 1).
    let (a, b, old) = (
        s("a.kernels.json"),
        s("b.kernels.json"),
        s("old.kernels.json"),
    );
    let o = compare(&[&a, &b, "--fail-on", "gbps:-5%"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("+20.0%") && out.contains("WORSE"), "{out}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("gbps:-5% crossed"),
        "{}",
        text(&o)
    );
    // The JSON: one row per kernel plus the read ceiling, each with its interval.
    let o = compare(&[&a, &b, "--json", "-"]);
    assert!(o.status.success(), "{}", text(&o));
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(c["schema"], "tokenscope.kernels-compare/1");
    let rows = c["rows"].as_array().unwrap();
    assert_eq!(rows[0]["kernel"], "bandwidth_read");
    for r in rows {
        let (lo, hi) = (
            r["interval"]["lo"].as_f64().unwrap(),
            r["interval"]["hi"].as_f64().unwrap(),
        );
        assert!(lo < 0.2 + 1e-9 && hi > 0.2 - 1e-9 && lo > 0.0, "{r}");
        assert_eq!(r["verdict"], "worse", "{r}");
    }
    // The same report twice: no change, the gate passes.
    let o = compare(&[&a, &a, "--fail-on", "gbps:-5%", "--markdown", "-"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("no change"),
        "{}",
        text(&o)
    );
    // A report without samples: no interval, the gate says it cannot judge (exit 3).
    let o = compare(&[&old, &b, "--fail-on", "gbps:-5%"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not evaluable"),
        "{}",
        text(&o)
    );
    // Another GPU is said first.
    let mut other: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
    other["adapter"]["name"] = "NVIDIA H100 80GB HBM3".into();
    std::fs::write(p("h100.kernels.json"), other.to_string()).unwrap();
    let o = compare(&[&a, &s("h100.kernels.json")]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("different GPU"),
        "{}",
        text(&o)
    );
    // A kernels report beside a client report: one clear error.
    let client = format!(
        "{}/tests/fixtures/reports/native.json",
        env!("CARGO_MANIFEST_DIR")
    );
    if std::path::Path::new(&client).is_file() {
        let o = compare(&[&a, &client]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("not both"),
            "{}",
            text(&o)
        );
    }
}
