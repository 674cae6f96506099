//! The page's GPU view end to end: the kernel harness (the same Rust and WGSL as
//! `tokenscope kernels`) compiled to the page's second wasm module and run through
//! WebGPU in headless Chromium (`--enable-unsafe-webgpu` gives Chromium's SwiftShader
//! adapter on a machine without a GPU), through the URL automation contract
//! (`?view=gpu&autorun=1&preset=quick`, `data-run-state`, `#kernels-json`).
//!
//! Needs the built page (`scripts/build-web.sh`; `scripts/test.sh` builds it
//! first) and `chromium` + `chromedriver`. Screenshots under `target/browser-e2e/`.
//! `cargo test --test browser_gpu -- --nocapture` prints the browser's figures.

#[path = "common/chromium.rs"]
mod chromium;
mod common;

use std::time::Duration;

use chromium::{Browser, Serve};
use serde_json::Value;
use tokenscope_kernel_report::{KernelReport, TimingMethod};

/// One browser at a time: SwiftShader runs the kernels on the same two cores.
static BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn validate_schema(report: &Value) {
    common::assert_schema("kernels.schema.json", report, "the page's kernels report");
}

/// The figures, as `tokenscope kernels` prints them (for docs/kernels.md).
fn print_figures(r: &KernelReport) {
    let b = r.bandwidth.as_ref().unwrap();
    eprintln!(
        "adapter {:?} ({}, {}), timing {:?}, timestamp batches >= {} ms",
        r.adapter.name,
        r.adapter.backend,
        r.adapter.device_type,
        r.timing,
        r.config.timestamp_batch_ms
    );
    eprintln!(
        "bandwidth: read {:.2} GB/s, copy {:.2} GB/s ({} MiB working set; {} calls/sample)",
        b.read_gbps,
        b.copy_gbps,
        b.working_set_bytes >> 20,
        b.read.calls_per_sample
    );
    for k in &r.kernels {
        eprintln!(
            "{:24} {:5} {:>16} b{:<2} median {:>10.1} us  {:>6.3} GB/s  {:>4.0}% of read  {:>4} calls/sample  verified {}",
            k.name,
            k.dtype,
            format!("{:?}", k.shape),
            k.batch,
            k.median_us,
            k.effective_gbps,
            100.0 * k.fraction_of_read,
            k.timing.calls_per_sample,
            k.verified
        );
    }
    for s in &r.decode_steps {
        eprintln!("decode step {s:?}");
    }
    for f in &r.decode_floor {
        eprintln!(
            "floor {} {} ctx {}: {:.1} ms",
            f.estimate.model, f.estimate.quant, f.estimate.context, f.estimate.tpot_floor_ms
        );
    }
}

async fn click(browser: &Browser, id: &str) {
    browser
        .client
        .find(fantoccini::Locator::Id(id))
        .await
        .unwrap_or_else(|e| panic!("no #{id}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("could not click #{id}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn gpu_view_searches_the_variants_then_runs_the_quick_preset_through_webgpu() {
    // `tune=6`: the page searches the variants within 6 s (as `kernels --tune`), then
    // runs the quick preset with what it found and says so. (One run for both: on
    // SwiftShader each takes a minute. The untuned variants run in
    // gpu_view_measures_a_picked_gguf_file.)
    let _one = BROWSER.lock().await;
    let serve = Serve::start(&[]);
    let browser = Browser::start(&["--enable-unsafe-webgpu"]).await;
    let url = format!("{}?view=gpu&autorun=1&preset=quick&tune=6", serve.url);
    let started = std::time::Instant::now();
    let state = browser.run(&url, Duration::from_secs(300)).await;
    let took = started.elapsed();
    let shot = browser.screenshot("gpu-view").await;
    assert!(shot.is_file());
    assert_eq!(
        state,
        "done",
        "the GPU run failed: {}",
        browser.text_of("gpu-error").await
    );
    eprintln!("the quick preset took {took:.1?} in the page (module load + adapter + run)");

    let text = browser.text_of("kernels-json").await;
    let saved = chromium::out_dir().join("kernels-browser.json");
    std::fs::write(&saved, &text).unwrap();
    eprintln!("the page's kernels report: {}", saved.display());
    let value: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("#kernels-json is not JSON ({e}): {text:.300}"));
    validate_schema(&value);
    let r = KernelReport::from_json(&text).expect("core reads the page's kernels report");
    print_figures(&r);

    // Where it ran, and how it was timed.
    assert_eq!(r.adapter.backend, "webgpu");
    assert!(!r.adapter.name.is_empty(), "the adapter is named");
    let env = r.environment.as_ref().expect("the environment is recorded");
    assert_eq!(env.runtime, "browser");
    assert_eq!(env.clock, "performance.now()");
    let ua = env.user_agent.as_deref().unwrap_or_default();
    assert!(ua.contains("Chrome"), "user agent {ua:?}");
    assert_eq!(r.config.wall_batch_ms, 10.0);
    if r.timing == TimingMethod::TimestampQuery {
        assert!(r.features.timestamp_query);
        assert_eq!(r.config.timestamp_batch_ms, 10.0);
    }
    // Each sample is a batch lasting about 10 ms or more (Chrome quantizes
    // timestamps to 100 us): calls x per-call time. The batch is calibrated on the
    // first timed pass; later ones may run somewhat faster.
    for k in &r.kernels {
        let sample_ms = k.median_us * f64::from(k.timing.calls_per_sample) / 1e3;
        assert!(
            sample_ms >= 4.0,
            "{} {} {:?}: samples of {} calls lasted {sample_ms:.2} ms",
            k.name,
            k.dtype,
            k.shape,
            k.timing.calls_per_sample
        );
    }

    // Every kernel verified against its CPU reference; nothing stopped.
    assert!(r.errors.is_empty(), "{:#?}", r.errors);

    // The search: the first problem (the read kernel of the bandwidth ceiling) is
    // always searched; every kernel says where its variant came from, and a
    // searched one ran the search's fastest.
    let t = r
        .tuning
        .as_ref()
        .expect("the report says which variants ran");
    assert!(t.used, "{t:?}");
    assert!(t.note.contains("tuned problems"), "{t:?}");
    let read = r.bandwidth.as_ref().unwrap().read_variant.as_ref().unwrap();
    assert_eq!(read.source, "tuned", "{read:?}");
    assert_eq!(read.search.as_ref().unwrap().best, read.name);
    for k in &r.kernels {
        let v = k.variant.as_ref().expect("every kernel names its variant");
        if let Some(s) = v.search.as_ref().filter(|_| v.source == "tuned") {
            assert!(s.tried >= 1, "{v:?}");
        }
    }
    // The CLI's own sentence (its parts add up to the kernels), and where the
    // search ran.
    let said = browser.text_of("gpu-variants").await;
    assert!(
        said.contains("kernels ran the variant searched for their shape")
            && said.contains("searched in this browser"),
        "{said}"
    );
    assert!(r.all_verified() && r.verified);
    let b = r.bandwidth.as_ref().unwrap();
    assert!(b.read_verified && b.copy_verified && b.read_gbps > 0.0);
    for k in &r.kernels {
        assert!(
            k.verified,
            "{} {} {:?} not verified",
            k.name, k.dtype, k.shape
        );
        assert!(k.verification.checked > 0);
    }
    // What the quick preset covers: GEMV in every format the adapter can run
    // (f16 through unpack2x16float without shader-f16), decode attention single
    // pass and split-KV, and the floor for every model preset.
    for dtype in ["f32", "f16", "q8_0", "q4_0"] {
        assert!(
            r.kernels
                .iter()
                .any(|k| k.name == "gemv" && k.dtype == dtype && k.batch == 1),
            "no gemv {dtype}"
        );
    }
    for name in ["attention_decode", "attention_decode_split"] {
        assert!(r.kernels.iter().any(|k| k.name == name), "no {name}");
    }
    assert!(r.skipped.is_empty(), "{:#?}", r.skipped);
    // On a CPU fallback adapter the page's quick run leaves out the decode step and
    // batch 64 of the skinny sweep (SuiteConfig::fit_to_page); on a GPU it has them.
    let cpu = r.adapter.device_type == "Cpu";
    assert_eq!(
        r.decode_steps.len(),
        usize::from(!cpu),
        "the quick decode step"
    );
    assert_eq!(
        r.kernels.iter().any(|k| k.batch == 64),
        !cpu,
        "batch 64 of the skinny sweep"
    );
    assert!(
        r.kernels
            .iter()
            .any(|k| k.name == "matmul_skinny" && k.batch == 8),
        "the skinny sweep"
    );
    assert!(!r.roofline.is_empty());
    for model in &r.config.models {
        assert!(
            r.decode_floor.iter().any(|f| &f.estimate.model == model),
            "no floor for {model}"
        );
    }

    // The view shows it: the adapter, the verdict, the tables and the chart.
    assert!(!browser.text_of("gpu-adapter").await.is_empty());
    let verdict = browser.text_of("gpu-verdict").await;
    assert!(verdict.contains("every kernel matched"), "{verdict}");
    let rows = browser
        .js("return document.querySelectorAll('#gpu-kernels tbody tr').length;")
        .await;
    assert_eq!(rows.as_u64(), Some(r.kernels.len() as u64));
    assert!(browser.text_of("gpu-floor").await.contains("llama-3.1-8b"));
    assert!(
        browser
            .js("return !!document.querySelector('#chart-gpu-kernels svg');")
            .await
            .as_bool()
            .unwrap()
    );
    // The Analysis takes the measured report (benchmark view).
    click(&browser, "tab-bench").await;
    let loaded = browser.text_of("kernels-loaded").await;
    assert!(
        loaded.contains("measured in this page's GPU view"),
        "{loaded}"
    );

    // Run again, without the search (its checkbox cleared), and cancel: the run
    // stops between kernels, says so, and shows what finished (the bandwidth
    // ceiling at least).
    click(&browser, "tab-gpu").await;
    click(&browser, "gpu-tune").await;
    assert_eq!(
        browser
            .js("return document.getElementById('gpu-tune').checked;")
            .await
            .as_bool(),
        Some(false)
    );
    click(&browser, "gpu-run").await;
    browser
        .wait_for(
            "document.body.getAttribute('data-run-state') === 'running'",
            Duration::from_secs(10),
        )
        .await;
    click(&browser, "gpu-cancel").await;
    assert_eq!(browser.wait_run(Duration::from_secs(120)).await, "failed");
    let error = browser.text_of("gpu-error").await;
    assert!(error.starts_with("Cancelled"), "{error}");
    assert!(browser.text_of("kernels-json").await.is_empty());
    assert!(browser.text_of("gpu-verdict").await.contains("partial"));
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn without_webgpu_the_gpu_view_says_so_and_the_module_loads_only_when_opened() {
    let _one = BROWSER.lock().await;
    let serve = Serve::start(&[]);
    // Chromium with WebGPU switched off.
    let browser = Browser::start(&["--disable-gpu", "--disable-features=WebGPU"]).await;
    // The benchmark view: the GPU module is not fetched.
    browser.client.goto(&serve.url).await.unwrap();
    browser
        .wait_for(
            "document.body.getAttribute('data-run-state') === 'idle'",
            Duration::from_secs(30),
        )
        .await;
    let gpu_files = |names: &[String]| {
        names
            .iter()
            .filter(|n| n.contains("tokenscope_web_gpu"))
            .count()
    };
    let first = browser.resources().await;
    assert!(
        first.iter().any(|n| n.contains("tokenscope_web_bg")),
        "{first:#?}"
    );
    assert_eq!(
        gpu_files(&first),
        0,
        "the first load fetched the GPU module: {first:#?}"
    );

    // Open the GPU view: the module loads, and says clearly why nothing can run.
    click(&browser, "tab-gpu").await;
    browser
        .wait_for(
            "document.getElementById('gpu-message')",
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(
        gpu_files(&browser.resources().await),
        2,
        "GPU module js + wasm"
    );
    let kind = browser
        .js("return document.getElementById('gpu-message').dataset.kind;")
        .await;
    assert!(
        kind == "no_webgpu" || kind == "no_adapter",
        "unexpected kind {kind}"
    );
    let message = browser.text_of("gpu-message").await;
    eprintln!("the page says: {message}");
    assert!(
        message.contains("WebGPU is not available in this browser")
            || message.contains("No GPU adapter"),
        "{message}"
    );
    for dump in [
        "panicked",
        "RuntimeError",
        "unreachable",
        "JsValue",
        "at src/",
    ] {
        assert!(
            !message.contains(dump),
            "an error dump, not a message: {message}"
        );
    }
    // No run button to press, and the state is not a failure (nothing was asked).
    assert!(
        browser
            .js("return document.getElementById('gpu-run') === null;")
            .await
            .as_bool()
            .unwrap()
    );
    assert_eq!(
        browser
            .js("return document.body.getAttribute('data-run-state');")
            .await,
        "idle"
    );
    browser.screenshot("gpu-view-no-webgpu").await;

    // Through the contract, autorun without WebGPU ends as `failed`, with the
    // message in #gpu-error.
    let url = format!("{}?view=gpu&autorun=1", serve.url);
    assert_eq!(browser.run(&url, Duration::from_secs(60)).await, "failed");
    let error = browser.text_of("gpu-error").await;
    assert!(error.contains("WebGPU"), "{error}");
    browser.close().await;
}

/// The fixture `crates/hw/tests/fixtures/gguf/NAME`.
fn gguf_fixture(name: &str) -> std::path::PathBuf {
    chromium::repo()
        .join("crates/hw/tests/fixtures/gguf")
        .join(name)
}

/// The GPU view with the quick preset, once its module loaded and the adapter is
/// known (the run button is enabled).
async fn open_gpu_view(browser: &Browser, url: &str) {
    browser
        .client
        .goto(&format!("{url}?view=gpu&preset=quick"))
        .await
        .unwrap();
    browser
        .wait_for(
            "document.getElementById('gpu-run') && !document.getElementById('gpu-run').disabled",
            Duration::from_secs(60),
        )
        .await;
}

async fn pick_file(browser: &Browser, path: &std::path::Path) {
    browser
        .client
        .find(fantoccini::Locator::Css("#gguf-file"))
        .await
        .expect("the GPU view has the file input #gguf-file")
        .send_keys(path.to_str().unwrap())
        .await
        .unwrap_or_else(|e| panic!("could not pick {}: {e}", path.display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn gpu_view_measures_a_picked_gguf_file() {
    use sha2::{Digest, Sha256};
    let _one = BROWSER.lock().await;
    let serve = Serve::start(&[]);
    let browser = Browser::start(&["--enable-unsafe-webgpu"]).await;
    open_gpu_view(&browser, &serve.url).await;

    // A truncated copy: one clear error naming the file and the offset.
    let dir = tempfile::tempdir().unwrap();
    let tiny_path = gguf_fixture("tiny.gguf");
    let tiny = std::fs::read(&tiny_path).unwrap();
    let cut = dir.path().join("cut.gguf");
    std::fs::write(&cut, &tiny[..300]).unwrap();
    pick_file(&browser, &cut).await;
    browser
        .wait_for(
            "document.getElementById('gpu-error').textContent.length > 0",
            Duration::from_secs(30),
        )
        .await;
    let error = browser.text_of("gpu-error").await;
    eprintln!("a truncated file: {error}");
    assert!(
        error.contains("cut.gguf") && error.contains("offset"),
        "{error}"
    );
    assert!(
        !error.contains("panicked") && !error.contains("JsValue"),
        "{error}"
    );
    assert!(browser.text_of("gguf-section").await.is_empty());

    // The fixture: its section shows before the run.
    pick_file(&browser, &tiny_path).await;
    browser
        .wait_for(
            "document.getElementById('gguf-section')",
            Duration::from_secs(30),
        )
        .await;
    assert!(browser.text_of("gpu-error").await.is_empty());
    let section = browser.text_of("gguf-section").await;
    eprintln!("{section}");
    assert!(
        section.contains("tiny.gguf") && section.contains("llama"),
        "{section}"
    );
    assert!(
        section.contains("iq4_nl") && section.contains("no iq4_nl kernel"),
        "{section}"
    );

    click(&browser, "gpu-run").await;
    let state = browser.wait_run(Duration::from_secs(300)).await;
    browser.screenshot("gpu-view-gguf").await;
    assert_eq!(
        state,
        "done",
        "the GPU run failed: {}",
        browser.text_of("gpu-error").await
    );
    let text = browser.text_of("kernels-json").await;
    std::fs::write(chromium::out_dir().join("kernels-browser-gguf.json"), &text).unwrap();
    let value: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("#kernels-json is not JSON ({e}): {text:.300}"));
    validate_schema(&value);
    let r = KernelReport::from_json(&text).expect("core reads the page's kernels report");
    let g = r.gguf.as_ref().expect("the report has its gguf section");
    assert_eq!(g.file, "tiny.gguf");
    assert!(!g.real_weights);
    // The header's hash: the fixture's first data_offset bytes.
    let py: Value =
        serde_json::from_str(&std::fs::read_to_string(gguf_fixture("tiny.json")).unwrap()).unwrap();
    let data_offset = py["data_offset"].as_u64().unwrap();
    assert_eq!(g.header_bytes, data_offset);
    assert_eq!(g.size_bytes, tiny.len() as u64);
    let want: String = Sha256::digest(&tiny[..data_offset as usize])
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(g.header_sha256, want);
    // Its types: gguf-py's, each with a kernel or not.
    let names = py["type_names"].as_object().unwrap();
    let mut want_types: Vec<String> = py["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let id = t["type"].as_u64().unwrap().to_string();
            names[&id].as_str().unwrap().to_lowercase()
        })
        .collect();
    want_types.sort();
    want_types.dedup();
    let mut got_types: Vec<String> = g
        .types
        .iter()
        .map(|t| t.ggml_type.to_string().to_lowercase())
        .collect();
    got_types.sort();
    assert_eq!(got_types, want_types);
    for t in &g.types {
        assert_eq!(
            t.kernel,
            t.ggml_type.to_quant().is_some(),
            "{}",
            t.ggml_type
        );
    }
    assert!(
        g.unsupported
            .iter()
            .any(|u| u.ggml_type.to_string() == "iq4_nl")
    );
    // A GEMV, with the file's tensors, for each type with a kernel (the 2-D
    // weights; token_embd is the tied output), all verified.
    assert!(r.errors.is_empty(), "{:#?}", r.errors);
    assert!(r.verified, "every kernel verified");
    for t in g.types.iter().filter(|t| t.kernel) {
        let q = t.ggml_type.to_quant().unwrap().to_string();
        if t.ggml_type.to_string() == "f32" {
            continue; // the 1-D norms: no GEMV
        }
        let k = r
            .kernels
            .iter()
            .find(|k| k.name == "gemv" && k.dtype == q)
            .unwrap_or_else(|| panic!("no file GEMV for {q}"));
        assert!(!k.tensors.is_empty(), "gemv {q} names its tensors");
        assert!(k.verified, "gemv {q} not verified");
    }
    // The floor at each context, this GPU's.
    assert!(!g.floors.is_empty());
    for f in &g.floors {
        assert!(f.tpot_floor_ms.is_some_and(|ms| ms > 0.0), "{f:?}");
    }
    let floor = browser.text_of("gguf-floor").await;
    assert!(floor.contains("This file on this GPU"), "{floor}");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in: needs Chromium and the built page; scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn gpu_view_profiles_a_kernel_of_your_own_picked_with_its_spec() {
    let _one = BROWSER.lock().await;
    let serve = Serve::start(&[]);
    let browser = Browser::start(&["--enable-unsafe-webgpu"]).await;
    open_gpu_view(&browser, &serve.url).await;
    // The shipped example: the tiled matmul, its spec and the naive matmul its
    // check runs, picked together (as `kernels --shader`).
    let examples = chromium::repo().join("examples/kernels");
    let paths: Vec<String> = [
        "matmul_tiled.wgsl",
        "matmul_tiled.toml",
        "matmul_naive.wgsl",
    ]
    .iter()
    .map(|n| examples.join(n).to_str().unwrap().to_owned())
    .collect();
    browser
        .client
        .find(fantoccini::Locator::Css("#user-kernel"))
        .await
        .expect("the GPU view has the file input #user-kernel")
        .send_keys(&paths.join("\n"))
        .await
        .unwrap();
    browser
        .wait_for(
            "document.getElementById('user-kernel-spec')",
            Duration::from_secs(30),
        )
        .await;
    let spec = browser.text_of("user-kernel-spec").await;
    assert_eq!(
        spec,
        "matmul_tiled.wgsl: 2 parameter sets (TILE=8, TILE=16); binding 3 checked against matmul_naive.wgsl",
        "{}",
        browser.text_of("gpu-error").await
    );

    click(&browser, "gpu-run").await;
    let state = browser.wait_run(Duration::from_secs(300)).await;
    browser.screenshot("gpu-view-user-kernel").await;
    assert_eq!(
        state,
        "done",
        "the GPU run failed: {}",
        browser.text_of("gpu-error").await
    );
    let text = browser.text_of("kernels-json").await;
    let value: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("#kernels-json is not JSON ({e}): {text:.300}"));
    validate_schema(&value);
    let r = KernelReport::from_json(&text).unwrap();
    print_figures(&r);
    assert_eq!(r.adapter.backend, "webgpu");
    // Only the picked kernel ran, each tile size checked against the naive one
    // on every output, on the roofs this browser measured, and tokenscope's f16
    // GEMV beside it at its bytes.
    assert_eq!(r.kernels.len(), 3, "{:?}", r.errors);
    let g = &r.kernels[2];
    assert_eq!((g.name.as_str(), g.dtype.as_str()), ("gemv", "f16"));
    assert_eq!(g.beside.as_deref(), Some("matmul_tiled"));
    assert!(g.verified, "{:?}", g.verification);
    for (k, tile) in r.kernels.iter().zip([8, 16]) {
        assert!(k.is_user());
        assert_eq!(k.name, "matmul_tiled");
        assert_eq!(k.variant.as_ref().unwrap().name, format!("TILE={tile}"));
        assert!(k.verified, "{:?}", k.verification);
        assert_eq!(k.verification.checked, 129 * 65);
        assert_eq!(k.flops, 2 * 129 * 65 * 263);
        assert!(k.roof.is_some() && k.fraction_of_roof.is_some_and(|f| f > 0.0));
        // Samples outlast the browser's 100 us timestamp step 100 times.
        let sample_ms = k.median_us * f64::from(k.timing.calls_per_sample) / 1e3;
        assert!(sample_ms >= 4.0, "{sample_ms} ms");
    }
    let yours = browser.text_of("user-kernel-result").await;
    eprintln!("{yours}");
    assert!(
        yours.contains("Your kernel matmul_tiled: fastest of 2 parameter sets"),
        "{yours}"
    );
    assert!(
        yours.contains("output checked against matmul_naive.wgsl"),
        "{yours}"
    );
    assert!(
        yours.contains("beside it, tokenscope's gemv f16"),
        "{yours}"
    );
    // The roofline names the kernel under both roofs.
    let chart = browser.text_of("chart-gpu-roofline").await;
    assert!(
        chart.contains("matmul_tiled") && chart.contains("roofs: read"),
        "{chart:.400}"
    );
}
