//! How the harness fits a device and a page: samples batched to a minimum duration
//! (browsers quantize timestamps), kernels beyond a device limit or a memory budget
//! skipped with a reason, cancellation between items. Runs on any adapter; CI uses
//! Mesa lavapipe, whose limits are lowered here to play a smaller device.

use kernel_harness::clock::MonotonicClock;
use kernel_harness::kernels::gemv::{GemvBench, GemvSpec};
use kernel_harness::suite::{self, Progress, SuiteConfig};
use kernel_harness::timing::{self, TimingOptions};
use kernel_harness::{AdapterOptions, GpuContext, HarnessError};
use tokenscope_hw::floor::Quant;
use tokenscope_kernel_report::{KernelReport, TimingMethod};

fn gpu(opts: AdapterOptions) -> GpuContext {
    match pollster::block_on(GpuContext::new(&opts)) {
        Ok(ctx) => ctx,
        Err(e) => panic!("these tests need a GPU adapter: {e}"),
    }
}

fn spec(dtype: Quant, n: u32) -> GemvSpec {
    GemvSpec {
        dtype,
        rows: n,
        cols: n,
        batch: 1,
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn samples_are_batched_to_the_minimum_duration() {
    const MIN_MS: f64 = 10.0;
    for timestamps in [true, false] {
        let ctx = gpu(AdapterOptions {
            disable_timestamps: !timestamps,
            ..Default::default()
        });
        if timestamps && !ctx.caps.timestamp_query {
            eprintln!("no timestamp queries on this adapter: batching by timestamps not tested");
            continue;
        }
        let s = spec(Quant::F32, 256);
        let bench = pollster::block_on(GemvBench::new(&ctx, s, 3, 2, None)).unwrap();
        let clock = MonotonicClock::new();
        let plain = TimingOptions {
            warmup: 2,
            samples: 5,
            budget_ms: 2_000.0,
            min_sample_ms: 0.0,
            min_timestamp_sample_ms: 0.0,
            detect_timestamp_step: false,
        };
        let batched = plain.for_browser();
        assert_eq!(batched.min_timestamp_sample_ms, MIN_MS);
        assert_eq!(batched.min_sample_ms, MIN_MS);

        let one =
            pollster::block_on(timing::measure(&ctx, &clock, &s.id(), &bench, &plain)).unwrap();
        let many =
            pollster::block_on(timing::measure(&ctx, &clock, &s.id(), &bench, &batched)).unwrap();
        let method = if timestamps {
            TimingMethod::TimestampQuery
        } else {
            TimingMethod::WallClock
        };
        assert_eq!((one.method, many.method), (method, method));
        assert_eq!(one.calls_per_sample, 1, "{method:?}");
        // A 256x256 GEMV takes well under 10 ms anywhere: several calls per sample,
        // and a sample (calls x per-call time) lasting about the minimum. Calibration
        // aims at the minimum; the samples themselves may run a bit faster.
        assert!(many.calls_per_sample > 1, "{method:?}: {many:?}");
        let t = many.summary(&s.id()).unwrap();
        assert_eq!(t.calls_per_sample, many.calls_per_sample);
        let sample_ms = t.median_us * f64::from(many.calls_per_sample) / 1e3;
        assert!(
            sample_ms >= 0.4 * MIN_MS,
            "{method:?}: a sample lasted {sample_ms:.2} ms ({} calls of {:.1} us)",
            many.calls_per_sample,
            t.median_us
        );
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn calls_per_sample_arithmetic() {
    assert_eq!(timing::calls_for(0.0, 0.01), 1);
    assert_eq!(timing::calls_for(10.0, 20.0), 1);
    assert_eq!(timing::calls_for(10.0, 3.0), 4);
    assert_eq!(timing::calls_for(10.0, 0.0), 1000);
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn kernels_beyond_a_device_limit_are_refused_by_name() {
    let ctx = gpu(AdapterOptions::default());
    // Play a device with 128 invocations per workgroup: a 256-invocation kernel
    // is refused with a typed error (the suite lists it as skipped) before wgpu
    // would fail the pipeline.
    let bench = pollster::block_on(GemvBench::new(&ctx, spec(Quant::F32, 64), 1, 1, None));
    assert!(bench.is_ok(), "at the device's own limits it runs");
    let mut ctx = gpu(AdapterOptions::default());
    ctx.limits.max_compute_invocations_per_workgroup = 128;
    let Err(e) = pollster::block_on(GemvBench::new(&ctx, spec(Quant::F32, 64), 1, 1, None)) else {
        panic!("a 256-invocation kernel ran on a 128-invocation device");
    };
    match &e {
        HarnessError::DeviceLimit {
            limit,
            needed,
            allowed,
            ..
        } => assert_eq!(
            (*limit, *needed, *allowed),
            ("invocations per workgroup", 256, 128)
        ),
        other => panic!("expected DeviceLimit, got {other}"),
    }
    assert!(
        e.to_string()
            .contains("needs 256 invocations per workgroup"),
        "{e}"
    );
    // Storage buffers per stage too (the GEMV binds its weights, x and y).
    let mut ctx = gpu(AdapterOptions::default());
    ctx.limits.max_storage_buffers_per_shader_stage = 1;
    let Err(e) = pollster::block_on(GemvBench::new(&ctx, spec(Quant::F32, 64), 1, 1, None)) else {
        panic!("a kernel ran with more storage bindings than the device allows");
    };
    assert!(
        matches!(
            e,
            HarnessError::DeviceLimit {
                limit: "storage buffers per shader stage",
                ..
            }
        ),
        "{e}"
    );
}

/// A run of two GEMVs (and the bandwidth ceiling), nothing else.
fn small_config() -> SuiteConfig {
    let mut cfg = SuiteConfig::quick(1 << 20, "test");
    cfg.gemv_dtypes = vec![Quant::F32];
    cfg.gemv_shapes = vec![(64, 64), (512, 512)];
    cfg.skinny_dtypes.clear();
    cfg.attention_layouts.clear();
    cfg.step_models.clear();
    cfg.timing.samples = 3;
    cfg
}

#[derive(Default)]
struct Recorder {
    done: Vec<String>,
    reports: usize,
    cancel_after: Option<usize>,
}

impl Progress for Recorder {
    fn done(&mut self, label: &str, _line: &str) {
        self.done.push(label.to_owned());
    }
    fn report(&mut self, _report: &KernelReport) {
        self.reports += 1;
    }
    fn cancelled(&self) -> bool {
        self.cancel_after.is_some_and(|n| self.done.len() >= n)
    }
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn a_memory_budget_skips_large_operands_and_the_page_settings_are_recorded() {
    let ctx = gpu(AdapterOptions::default());
    let mut cfg = small_config().for_browser(Some("test-agent/1.0".into()));
    // 64x64 f32 = 16 KiB fits; 512x512 f32 = 1 MiB does not.
    cfg.memory_budget_bytes = Some(100_000);
    let mut progress = Recorder::default();
    let report = pollster::block_on(suite::run_suite(
        &ctx,
        &MonotonicClock::new(),
        &cfg,
        &mut progress,
    ))
    .unwrap();
    assert_eq!(report.kernels.len(), 1, "{:?}", report.kernels);
    assert_eq!(report.kernels[0].shape, vec![64, 64]);
    assert!(report.kernels[0].verified);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].shape, vec![512, 512]);
    assert!(
        report.skipped[0].reason.contains("memory budget"),
        "{}",
        report.skipped[0].reason
    );
    // Skipping is not a failure.
    assert!(report.verified, "{:?}", report.errors);
    let env = report.environment.as_ref().unwrap();
    assert_eq!(env.runtime, "browser");
    assert_eq!(env.user_agent.as_deref(), Some("test-agent/1.0"));
    assert_eq!(report.config.timestamp_batch_ms, 10.0);
    assert_eq!(report.config.wall_batch_ms, 10.0);
    // The page's 10 ms batches: a 64x64 GEMV (microseconds) takes many calls per sample.
    assert!(
        report.kernels[0].timing.calls_per_sample > 1,
        "{:?}",
        report.kernels[0].timing
    );
}

#[test]
#[ignore = "opt-in: needs a GPU adapter (Vulkan, or Mesa lavapipe without a GPU); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn cancelling_stops_between_items_after_reporting_what_finished() {
    let ctx = gpu(AdapterOptions::default());
    let cfg = small_config();
    let mut progress = Recorder {
        cancel_after: Some(2),
        ..Default::default()
    };
    let r = pollster::block_on(suite::run_suite(
        &ctx,
        &MonotonicClock::new(),
        &cfg,
        &mut progress,
    ));
    assert!(matches!(r, Err(HarnessError::Cancelled)), "{r:?}");
    // Bandwidth and the first GEMV finished (and were reported); the second never started.
    assert_eq!(progress.done.len(), 2, "{:?}", progress.done);
    assert_eq!(progress.reports, 2);

    // A native run records itself as such, with unbatched timestamps.
    let mut progress = Recorder::default();
    let report = pollster::block_on(suite::run_suite(
        &ctx,
        &MonotonicClock::new(),
        &cfg,
        &mut progress,
    ))
    .unwrap();
    assert_eq!(report.kernels.len(), 2);
    assert_eq!(report.environment.unwrap().runtime, "native");
    assert_eq!(report.config.timestamp_batch_ms, 0.0);
}
