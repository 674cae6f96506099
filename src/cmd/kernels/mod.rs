//! `tokenscope kernels`: the GPU kernel harness. Options -> suite config -> run (progress
//! on stderr, `--json` rewritten after every kernel) -> tables on stdout. Exit 0 when
//! every kernel matched its CPU reference, 1 when one did not, 2 (via `main`) when no
//! adapter exists or the options are wrong.

mod args;
pub mod compare;
mod runtime_dir;
mod tuning;
mod user;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kernel_harness::clock::MonotonicClock;
use kernel_harness::suite::{self, Progress, SuiteConfig};
use kernel_harness::{AdapterOptions, GpuContext, HarnessError};
use tokenscope_hw::floor::{ModelShape, Quant, preset_names};
use tokenscope_hw::gguf::GgufModel;
use tokenscope_kernel_report::{GgufReport, KernelReport};
use tokenscope_render::kernels::mib_label;
use tokenscope_render::table::{Align, text_table_with};

pub use args::KernelsArgs;
use tuning::tuning;

/// Runs `tokenscope kernels`.
pub fn run(mut args: KernelsArgs) -> anyhow::Result<ExitCode> {
    args.json = super::output::renamed(args.json.take(), args.out.take(), "--out", "--json");
    // Before any GPU probe (and any thread): no Wayland noise without a session.
    let _runtime_dir = runtime_dir::ensure();
    if args.list_adapters {
        return list(&args);
    }
    let gguf = match &args.gguf {
        Some(p) => Some(crate::gguf_file::GgufFile::open(p)?),
        None => None,
    };
    let gguf_model = match &gguf {
        Some(f) => Some(
            f.header
                .model()
                .map_err(|e| anyhow::anyhow!("--gguf {}: {e}", f.path.display()))?,
        ),
        None => None,
    };
    let user_kernel = user::load(&args)?;
    let own_models_only_if_named = gguf.is_some() || user_kernel.is_some();
    let models =
        if own_models_only_if_named && args.models.is_empty() && args.model_config.is_empty() {
            Vec::new()
        } else {
            models(&args)?
        };
    let gpu_memory_bytes = match &args.gpu_memory {
        Some(m) => Some(
            tokenscope_measure::parse::parse_bytes(m)
                .map_err(|e| anyhow::anyhow!("--gpu-memory {e}"))?,
        ),
        None => None,
    };
    let plan_models = models.clone();
    let mut ctx = kernel_harness::block_on(GpuContext::new(&AdapterOptions {
        name: args.adapter.clone(),
        backend: args.backend,
        disable_subgroups: args.no_subgroups,
        disable_f16: args.no_f16,
        disable_timestamps: args.no_timestamps,
        no_arena: args.no_arena,
    }))
    .map_err(no_adapter)?;
    ctx.set_binding_limit(args.max_binding_mib.map(|m| m << 20));
    ctx.set_timestamp_quantum(args.timestamp_quantum_us.map(|us| us * 1000));
    let (cache_bytes, cache_source) = match args.cache_mib {
        Some(m) => (m << 20, "--cache-mib".to_string()),
        None => kernel_harness::cache_info(&ctx),
    };
    let mut cfg = config(&args, models, cache_bytes, &cache_source)?;
    if let (Some(file), Some(model)) = (&gguf, &gguf_model) {
        for_file(&mut cfg, &args, file, model);
        print!(
            "{}",
            tokenscope_render::kernels::gguf_file_text(&file_section(file, model, &cfg))
        );
    }
    if let Some(k) = user_kernel {
        // A shader that does not compile says so before the roofs are measured.
        kernel_harness::block_on(kernel_harness::user::compile_all(&ctx, &k))
            .map_err(|e| anyhow::anyhow!("--shader {}: {e}", k.shader.name))?;
        cfg.for_user_kernels(vec![k], &args.only);
    }
    cfg.fit_to(&ctx);
    let clock = MonotonicClock::new();
    let tuning = tuning(&args, &ctx, &cfg, &clock)?;
    ctx.set_tuning(tuning);

    print!("{}", header(&ctx, &cfg));
    let mut progress = CliProgress::new(cfg.items(), args.json.clone());
    let mut report = kernel_harness::block_on(suite::run_suite(&ctx, &clock, &cfg, &mut progress))
        .context("the kernel harness stopped")?;
    progress.finish();
    if let (Some(file), Some(model)) = (&gguf, &gguf_model) {
        let mut section = file_section(file, model, &cfg);
        section.real_weights = args.real_weights;
        section.measure(&report);
        report.gguf = Some(section);
    }
    if let Some(path) = &args.json {
        write_report(path, &report)?;
    }
    print!("{}", tokenscope_render::kernels::text(&report));
    if let Some(bytes) = gpu_memory_bytes {
        print!("\n{}", kv_plans(&plan_models, &report, bytes));
    }
    if report.verified {
        Ok(ExitCode::SUCCESS)
    } else {
        let failed: Vec<String> = report
            .kernels
            .iter()
            .filter_map(|k| k.verification.failure.clone())
            .chain(report.errors.iter().cloned())
            .collect();
        eprintln!(
            "error: {} kernel(s) failed verification or stopped; first: {}",
            failed.len().max(1),
            failed
                .first()
                .map_or("bandwidth checksum mismatch", String::as_str)
        );
        Ok(ExitCode::from(1))
    }
}

/// The suite for a model file: its GEMVs and its head layout; the generic sweeps
/// only when named in --only.
fn for_file(
    cfg: &mut SuiteConfig,
    args: &KernelsArgs,
    file: &crate::gguf_file::GgufFile,
    model: &GgufModel,
) {
    let per = args.tensors_per_shape.unwrap_or(usize::MAX);
    let gemvs = file.gemvs(model.tied_embeddings, args.real_weights, per);
    cfg.for_file(gemvs, model, &args.only);
}

/// The file's section of the report, before the run's figures.
fn file_section(
    file: &crate::gguf_file::GgufFile,
    model: &GgufModel,
    cfg: &SuiteConfig,
) -> GgufReport {
    let contexts: Vec<u64> = cfg.contexts.iter().map(|&c| u64::from(c)).collect();
    GgufReport::new(
        &file.name(),
        &file.header,
        model.clone(),
        file.header_sha256.clone(),
        &contexts,
        cfg.kv_dtype,
    )
}

/// Each floor model's KV-cache plan at each of the report's contexts and weight
/// formats, on a GPU of `gpu_memory_bytes`.
fn kv_plans(models: &[ModelShape], report: &KernelReport, gpu_memory_bytes: u64) -> String {
    let mut plans = Vec::new();
    for m in models {
        for quant in &report.config.quants {
            for context in &report.config.contexts {
                if let Ok(p) = m.plan_kv(tokenscope_hw::floor::KvPlanInput {
                    weights: *quant,
                    kv_dtype: Quant::F16,
                    context: *context,
                    gpu_memory_bytes,
                    utilization: 0.9,
                    llamacpp_slots: None,
                }) {
                    plans.push(p);
                }
            }
        }
    }
    tokenscope_render::kv_plan::summary_text(&plans)
}

fn no_adapter(e: HarnessError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

fn list(args: &KernelsArgs) -> anyhow::Result<ExitCode> {
    let adapters = kernel_harness::block_on(kernel_harness::list_adapters(args.backend));
    if adapters.is_empty() {
        return Err(no_adapter(HarnessError::NoAdapter {
            wanted: String::new(),
            found: Vec::new(),
        }));
    }
    let headers = [
        "name",
        "backend",
        "type",
        "driver",
        "timestamps",
        "shader-f16",
        "subgroups",
    ]
    .map(String::from);
    let mut rows = Vec::new();
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    for a in adapters {
        rows.push(vec![
            a.name,
            a.backend,
            a.device_type,
            a.driver,
            yes(a.features.timestamp_query),
            yes(a.features.shader_f16),
            yes(a.features.subgroups),
        ]);
    }
    print!("{}", text_table_with(&headers, &rows, |_| Align::Left));
    Ok(ExitCode::SUCCESS)
}

fn models(args: &KernelsArgs) -> anyhow::Result<Vec<ModelShape>> {
    let names: Vec<String> = if args.models.is_empty() {
        preset_names().iter().map(|s| s.to_string()).collect()
    } else {
        args.models.clone()
    };
    let mut out = Vec::new();
    for n in names.iter().filter(|n| !n.trim().is_empty()) {
        out.push(ModelShape::preset(n).with_context(|| format!("--models {n}"))?);
    }
    for path in &args.model_config {
        out.push(tokenscope_loadgen::util::model_from_config(
            path,
            "--model-config",
        )?);
    }
    Ok(out)
}

fn config(
    args: &KernelsArgs,
    models: Vec<ModelShape>,
    cache_bytes: u64,
    cache_source: &str,
) -> anyhow::Result<SuiteConfig> {
    let mut cfg = if args.quick {
        SuiteConfig::quick(cache_bytes, cache_source)
    } else {
        SuiteConfig::full(cache_bytes, cache_source)
    };
    cfg.tool_version = env!("CARGO_PKG_VERSION").into();
    if !args.quant.is_empty() {
        cfg.quants = args.quant.clone();
        cfg.step_quants = args.quant.clone();
    }
    if !args.formats.is_empty() {
        cfg.gemv_dtypes = args.formats.clone();
    }
    if !args.context.is_empty() {
        if args.context.contains(&0) {
            bail!("--context: context lengths must be positive");
        }
        cfg.contexts = args.context.clone();
    }
    if !args.batches.is_empty() {
        if let Some(b) = args.batches.iter().find(|b| !(2..=64).contains(*b)) {
            bail!("--batches: {b} is outside 2..=64 (batch 1 is the GEMV)");
        }
        cfg.skinny_batches = args.batches.clone();
    }
    if let Some(s) = args.samples {
        if s == 0 {
            bail!("--samples must be at least 1");
        }
        cfg.timing.samples = s;
    }
    if let Some(w) = args.warmup {
        cfg.timing.warmup = w;
    }
    if let Some(seed) = args.seed {
        cfg.seed = seed;
    }
    if !args.decode_step.is_empty() {
        cfg.step_models = Vec::new();
        for name in &args.decode_step {
            if name.eq_ignore_ascii_case("none") {
                continue;
            }
            let m = models
                .iter()
                .find(|m| m.name.eq_ignore_ascii_case(name))
                .cloned()
                .map_or_else(|| ModelShape::preset(name), Ok)
                .with_context(|| format!("--decode-step {name}"))?;
            cfg.step_models.push(m);
        }
    }
    cfg.models = models;
    cfg.inject_fault = args.inject_fault;
    cfg.keep_only(&args.only);
    Ok(cfg)
}

fn header(ctx: &GpuContext, cfg: &SuiteConfig) -> String {
    let a = ctx.adapter_report();
    let f = ctx.features_report();
    let l = ctx.limits_report();
    let avail = f.available.clone();
    let feat = |used: bool, has: bool| match (used, has) {
        (true, _) => "used",
        (false, true) => "off",
        (false, false) => "absent",
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "adapter   {} | {} | {} | {} {}",
        a.name, a.backend, a.device_type, a.driver, a.driver_info
    );
    let _ = writeln!(
        s,
        "features  timestamp-query {} | shader-f16 {} | subgroups {} (size {}..{})",
        feat(
            f.timestamp_query,
            avail.as_ref().is_some_and(|x| x.timestamp_query)
        ),
        feat(f.shader_f16, avail.as_ref().is_some_and(|x| x.shader_f16)),
        feat(f.subgroups, avail.as_ref().is_some_and(|x| x.subgroups)),
        a.subgroup_min_size,
        a.subgroup_max_size
    );
    let _ = writeln!(
        s,
        "limits    (the adapter's, requested) storage binding {}, buffer {}, workgroup storage {} KiB, invocations {}, workgroups/dim {}",
        mib_label(l.max_storage_buffer_binding_size),
        mib_label(l.max_buffer_size),
        l.max_compute_workgroup_storage_size / 1024,
        l.max_compute_invocations_per_workgroup,
        l.max_compute_workgroups_per_dimension
    );
    if ctx.max_binding() < l.max_storage_buffer_binding_size.min(l.max_buffer_size) & !255 {
        let _ = writeln!(
            s,
            "          bindings capped at {} by --max-binding-mib",
            mib_label(ctx.max_binding())
        );
    }
    if let Some(t) = ctx.tuning().usage.as_ref() {
        let _ = writeln!(s, "tuning    {}: {}", t.file, t.note);
    }
    if let Some(note) = a.fallback_note() {
        let _ = writeln!(s, "note      {note}");
    }
    let _ = writeln!(
        s,
        "cache     {} ({}); working sets and rotations exceed it\n",
        mib_label(cfg.cache_bytes),
        cfg.cache_source
    );
    s
}

struct CliProgress {
    bar: ProgressBar,
    out: Option<PathBuf>,
    write_error: Option<String>,
}

impl CliProgress {
    fn new(items: usize, out: Option<PathBuf>) -> Self {
        let bar = ProgressBar::with_draw_target(Some(items as u64), ProgressDrawTarget::stderr());
        if let Ok(style) =
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
        {
            bar.set_style(style);
        }
        Self {
            bar,
            out,
            write_error: None,
        }
    }

    fn line(&self, text: &str) {
        if self.bar.is_hidden() {
            eprintln!("{text}");
        } else {
            self.bar.println(text);
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
        if let Some(e) = &self.write_error {
            eprintln!("warning: {e}");
        }
    }
}

impl Progress for CliProgress {
    fn start(&mut self, label: &str) {
        self.bar.set_message(label.to_string());
        if self.bar.is_hidden() {
            eprintln!("running {label}");
        }
    }

    fn done(&mut self, label: &str, line: &str) {
        self.bar.inc(1);
        self.line(&format!("  {label}: {line}"));
    }

    fn report(&mut self, report: &KernelReport) {
        if let Some(path) = &self.out
            && let Err(e) = write_report(path, report)
        {
            self.write_error = Some(format!("{e:#}"));
        }
    }
}

fn write_report(path: &Path, report: &KernelReport) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.partial");
    std::fs::write(&tmp, report.to_json_pretty() + "\n")
        .with_context(|| format!("--json {}: cannot write", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("--json {}: cannot write", path.display()))?;
    Ok(())
}
