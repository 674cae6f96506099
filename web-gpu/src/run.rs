//! One run of the harness in a browser: the adapter (WebGPU), the suite fitted to
//! a page, its progress and cancellation, the bounded variant search, and why a
//! run gave no result ([`GpuPageError`]).

use crate::file;
use kernel_harness::clock::Clock;
use kernel_harness::suite::{self, KernelGroup, Progress, SuiteConfig};
use kernel_harness::tune::Tuning;
use kernel_harness::tune::search::{self, Problem, SearchOptions, TuneProgress};
use kernel_harness::{AdapterOptions, BackendChoice, GpuContext, HarnessError};
use tokenscope_kernel_report::{GgufReport, KernelReport};
use tokenscope_render::page::gpu::{
    AdapterProbe, GpuEvent, GpuFailure, GpuFailureKind, GpuPreset, GpuRunRequest, KernelsRead,
    KernelsView, PAGE_TUNE_BUDGET_S,
};
use wasm_bindgen::prelude::*;

/// Why the GPU module gave no result.
#[derive(Debug, thiserror::Error)]
pub enum GpuPageError {
    /// `navigator.gpu` is missing.
    #[error(
        "this browser has no WebGPU (navigator.gpu is missing): the GPU view needs a browser with WebGPU (Chrome or Edge 113+, Safari 26+, Firefox 141+ on Windows), in a secure context (https or localhost)"
    )]
    NoWebGpu,
    /// `requestAdapter()` gave nothing.
    #[error(
        "WebGPU is present but gave no GPU adapter ({0}): the GPU may be blocklisted or WebGPU disabled in this browser's settings"
    )]
    NoAdapter(String),
    /// The request was not valid JSON of the expected shape.
    #[error("invalid request to the GPU module: {0}")]
    BadRequest(String),
    /// The user cancelled.
    #[error("cancelled: the run stopped between two kernels")]
    Cancelled,
    /// The harness stopped.
    #[error("the kernel harness stopped: {0}")]
    Harness(HarnessError),
}

impl From<HarnessError> for GpuPageError {
    fn from(e: HarnessError) -> Self {
        match e {
            HarnessError::NoAdapter { .. } => {
                GpuPageError::NoAdapter("requestAdapter() gave null".into())
            }
            HarnessError::RequestDevice { adapter, message } => {
                GpuPageError::NoAdapter(format!("adapter `{adapter}` refused a device: {message}"))
            }
            HarnessError::Cancelled => GpuPageError::Cancelled,
            other => GpuPageError::Harness(other),
        }
    }
}

impl GpuPageError {
    /// The failure as the page reads it.
    pub fn failure(&self) -> GpuFailure {
        GpuFailure {
            kind: match self {
                GpuPageError::NoWebGpu => GpuFailureKind::NoWebgpu,
                GpuPageError::NoAdapter(_) => GpuFailureKind::NoAdapter,
                GpuPageError::Cancelled => GpuFailureKind::Cancelled,
                GpuPageError::BadRequest(_) | GpuPageError::Harness(_) => GpuFailureKind::Failed,
            },
            message: self.to_string(),
        }
    }

    pub(crate) fn into_js(self) -> JsValue {
        JsValue::from_str(&serde_json::to_string(&self.failure()).unwrap_or_default())
    }
}

/// `performance.now()`: the harness's wall clock in a browser.
struct PerformanceClock(Option<web_sys::Performance>);

impl PerformanceClock {
    fn new() -> Self {
        PerformanceClock(web_sys::window().and_then(|w| w.performance()))
    }
}

impl Clock for PerformanceClock {
    fn now_ms(&self) -> f64 {
        self.0.as_ref().map_or(0.0, web_sys::Performance::now)
    }
}

/// Whether `navigator.gpu` exists (before wgpu, which would only say "no adapter").
fn has_navigator_gpu() -> bool {
    web_sys::window()
        .and_then(|w| js_sys::Reflect::get(&w.navigator(), &JsValue::from_str("gpu")).ok())
        .is_some_and(|gpu| !gpu.is_undefined() && !gpu.is_null())
}

fn user_agent() -> Option<String> {
    web_sys::window().and_then(|w| w.navigator().user_agent().ok())
}

async fn context(request: &GpuRunRequest) -> Result<GpuContext, GpuPageError> {
    if !has_navigator_gpu() {
        return Err(GpuPageError::NoWebGpu);
    }
    let mut ctx = GpuContext::new(&AdapterOptions {
        backend: Some(BackendChoice::WebGpu),
        disable_timestamps: !request.timestamps,
        disable_subgroups: !request.subgroups,
        // A tab's GPU memory is lent by the browser: each operand is allocated on its
        // own and freed after its kernel, rather than held in the arena's gigabyte
        // blocks until the run ends (Chromium refused those on a 2-core CI machine).
        no_arena: true,
        ..Default::default()
    })
    .await?;
    if ctx.info.name.is_empty()
        && let Some((name, driver)) = adapter_identity().await
    {
        ctx.info.name = name;
        ctx.info.driver = driver;
    }
    Ok(ctx)
}

/// A name for the adapter when the browser gives no `description` (Chrome does
/// not): `GPUAdapterInfo`'s vendor, architecture and device, which wgpu does not
/// map. Returns (name, driver note).
async fn adapter_identity() -> Option<(String, String)> {
    use js_sys::{Function, Promise, Reflect};
    use wasm_bindgen::JsCast;
    let navigator = web_sys::window()?.navigator();
    let gpu = Reflect::get(&navigator, &"gpu".into()).ok()?;
    let request: Function = Reflect::get(&gpu, &"requestAdapter".into())
        .ok()?
        .dyn_into()
        .ok()?;
    let promise: Promise = request.call0(&gpu).ok()?.dyn_into().ok()?;
    let adapter = wasm_bindgen_futures::JsFuture::from(promise).await.ok()?;
    if adapter.is_null() || adapter.is_undefined() {
        return None;
    }
    let info = Reflect::get(&adapter, &"info".into()).ok()?;
    let field = |k: &str| {
        Reflect::get(&info, &k.into())
            .ok()
            .and_then(|v| v.as_string())
            .filter(|s| !s.trim().is_empty())
    };
    let parts: Vec<String> = ["vendor", "architecture", "device"]
        .into_iter()
        .filter_map(field)
        .collect();
    (!parts.is_empty()).then(|| {
        (
            parts.join(" "),
            "WebGPU (GPUAdapterInfo vendor, architecture, device)".to_owned(),
        )
    })
}

/// The suite a request runs on `ctx`, fitted to it and to a page.
pub fn page_config(
    ctx: &GpuContext,
    request: &GpuRunRequest,
    user_agent: Option<String>,
) -> Result<SuiteConfig, GpuPageError> {
    let (cache_bytes, cache_source) = kernel_harness::cache_info(ctx);
    let mut cfg = match request.preset {
        GpuPreset::Quick => SuiteConfig::quick(cache_bytes, &cache_source),
        GpuPreset::Full => SuiteConfig::full(cache_bytes, &cache_source),
    };
    cfg.fit_to(ctx);
    cfg.fit_to_page(ctx);
    let only = request
        .only
        .iter()
        .map(|g| g.parse::<KernelGroup>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| GpuPageError::BadRequest(format!("`only`: {e}")))?;
    cfg.keep_only(&only);
    Ok(cfg.for_browser(user_agent))
}

/// Progress to a callback (the view's, or a JS function's); cancellation from
/// an `AbortSignal`.
struct EventProgress {
    emit: Box<dyn Fn(GpuEvent)>,
    signal: Option<web_sys::AbortSignal>,
    index: usize,
    total: usize,
}

impl EventProgress {
    fn emit(&self, event: &GpuEvent) {
        (self.emit)(event.clone());
    }
}

impl Progress for EventProgress {
    fn start(&mut self, label: &str) {
        self.emit(&GpuEvent::Start {
            label: label.to_owned(),
            index: self.index,
            total: self.total,
        });
    }

    fn done(&mut self, label: &str, line: &str) {
        self.emit(&GpuEvent::Done {
            label: label.to_owned(),
            line: line.to_owned(),
            index: self.index,
            total: self.total,
        });
        self.index += 1;
    }

    fn report(&mut self, report: &KernelReport) {
        if let Ok(json) = serde_json::to_string(report) {
            self.emit(&GpuEvent::Report(Box::new(KernelsRead {
                view: KernelsView::of(report),
                json,
            })));
        }
    }

    fn cancelled(&self) -> bool {
        self.signal
            .as_ref()
            .is_some_and(web_sys::AbortSignal::aborted)
    }
}

/// The bounded variant search in the browser ([`kernel_harness::tune::search`], the
/// same as `tokenscope kernels --tune`, with the page's timings): its problems are
/// items of the run's progress. The result is used for this run only.
async fn search_here(
    ctx: &GpuContext,
    clock: &PerformanceClock,
    cfg: &SuiteConfig,
    problems: &[Problem],
    request: &GpuRunRequest,
    progress: &mut EventProgress,
) -> Result<Tuning, GpuPageError> {
    let budget_s = request
        .tune_budget_s
        .filter(|b| b.is_finite() && *b > 0.0)
        .unwrap_or(PAGE_TUNE_BUDGET_S)
        .min(PAGE_TUNE_BUDGET_S);
    let mut opts = SearchOptions::new(budget_s * 1e3, cfg.cache_bytes);
    opts.seed = cfg.seed;
    opts.max_rotation = cfg.max_rotation;
    opts.rotation_budget_bytes = cfg.rotation_budget_bytes;
    opts.quick = opts.quick.for_browser();
    opts.full = cfg.timing;
    opts.created_unix_s = (js_sys::Date::now() / 1e3) as u64;
    let file = search::tune(ctx, clock, problems, &opts, &mut SearchEvents(progress)).await?;
    if progress.cancelled() {
        return Err(GpuPageError::Cancelled);
    }
    Ok(Tuning::from_file(
        file,
        "searched in this browser",
        &ctx.adapter_report(),
        env!("CARGO_PKG_VERSION"),
    ))
}

/// The search's problems as items of the run's progress.
struct SearchEvents<'a>(&'a mut EventProgress);

impl TuneProgress for SearchEvents<'_> {
    fn start(&mut self, _index: usize, _count: usize, label: &str) {
        self.0.start(&format!("search {label}"));
    }
    fn done(&mut self, label: &str, line: &str) {
        self.0.done(&format!("search {label}"), line);
    }
    fn cancelled(&self) -> bool {
        self.0.cancelled()
    }
}

/// The adapter the GPU view would use, its features and limits.
pub(crate) async fn probe() -> Result<AdapterProbe, GpuPageError> {
    let ctx = context(&GpuRunRequest::default()).await?;
    Ok(AdapterProbe {
        adapter: ctx.adapter_report(),
        features: ctx.features_report(),
        limits: ctx.limits_report(),
    })
}

/// What the view's user picked: a model file, a kernel of their own.
#[derive(Clone, Copy, Default)]
pub(crate) struct Picked<'a> {
    /// A model file: its GEMVs and head layout are measured.
    pub file: Option<&'a file::PickedFile>,
    /// A developer's own kernel: measured instead of tokenscope's.
    pub kernel: Option<&'a tokenscope_kernel_spec::UserKernel>,
}

/// Run the kernel harness for `request` (on a picked model file's GEMVs and head
/// layout, or a picked kernel), `emit` getting every event; the report's `gguf`
/// section is returned too.
pub(crate) async fn run(
    request: &GpuRunRequest,
    picked: Picked<'_>,
    emit: Box<dyn Fn(GpuEvent)>,
    signal: Option<web_sys::AbortSignal>,
) -> Result<(KernelsRead, Option<GgufReport>), GpuPageError> {
    let mut ctx = context(request).await?;
    let mut cfg = page_config(&ctx, request, user_agent())?;
    let only = request
        .only
        .iter()
        .filter_map(|g| g.parse::<KernelGroup>().ok())
        .collect::<Vec<_>>();
    let file = picked.file;
    if let Some(f) = file {
        f.configure(&mut cfg, &only);
    }
    if let Some(k) = picked.kernel {
        // A kernel that does not compile says so before the roofs are measured.
        kernel_harness::user::compile_all(&ctx, k).await?;
        cfg.for_user_kernels(vec![k.clone()], &only);
        // As `kernels --shader`: the model presets' floors only when asked for.
        cfg.models.clear();
    }
    let clock = PerformanceClock::new();
    let problems = if request.tune {
        cfg.tune_problems(&ctx)
    } else {
        Vec::new()
    };
    let mut progress = EventProgress {
        emit,
        signal,
        index: 0,
        total: problems.len() + cfg.items(),
    };
    let tuning = if request.tune {
        search_here(&ctx, &clock, &cfg, &problems, request, &mut progress).await?
    } else {
        Tuning::unused(
            "no search",
            "per-vendor defaults (tick \"search variants\" to search this GPU first)".into(),
        )
    };
    ctx.set_tuning(tuning);
    let mut report = suite::run_suite(&ctx, &clock, &cfg, &mut progress).await?;
    let gguf = file.map(|f| f.measured(&cfg, &report));
    report.gguf.clone_from(&gguf);
    Ok((
        KernelsRead {
            json: serde_json::to_string_pretty(&report)
                .map_err(|e| GpuPageError::BadRequest(e.to_string()))?,
            view: KernelsView::of(&report),
        },
        gguf,
    ))
}

/// The GPU view's run ([`view`]): the report read, or the failure.
pub(crate) async fn run_view(
    request: &GpuRunRequest,
    picked: Picked<'_>,
    on_event: impl Fn(GpuEvent) + 'static,
    signal: web_sys::AbortSignal,
) -> Result<(KernelsRead, Option<GgufReport>), GpuFailure> {
    install_panic_hook();
    run(request, picked, Box::new(on_event), Some(signal))
        .await
        .map_err(|e| e.failure())
}

/// Panics (harness bugs) go to the console with their message before the trap.
pub(crate) fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            web_sys::console::error_1(&format!("tokenscope GPU module panicked: {info}").into());
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_carry_their_kind_and_a_sentence() {
        let f = GpuPageError::NoWebGpu.failure();
        assert_eq!(f.kind, GpuFailureKind::NoWebgpu);
        assert!(
            f.message.contains("navigator.gpu is missing"),
            "{}",
            f.message
        );
        let f = GpuPageError::from(HarnessError::NoAdapter {
            wanted: String::new(),
            found: Vec::new(),
        })
        .failure();
        assert_eq!(f.kind, GpuFailureKind::NoAdapter);
        assert!(f.message.contains("no GPU adapter"), "{}", f.message);
        // The CLI's hint (lavapipe, --adapter) does not belong on a page.
        assert!(!f.message.contains("--adapter"), "{}", f.message);
        let f = GpuPageError::from(HarnessError::Cancelled).failure();
        assert_eq!(f.kind, GpuFailureKind::Cancelled);
    }
}
