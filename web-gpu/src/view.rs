//! The GPU view, rendered by this module (the page's main module only hosts it,
//! so none of it weighs on the first load): the adapter, a preset run with
//! progress and Cancel, the bandwidth ceiling, the kernels against it (core's
//! chart) and the decode floor of the model presets, from the
//! `tokenscope.kernels/1` report the run makes ([`KernelsView`]); exports that
//! report. Automation: `#kernels-json` holds the report, `#gpu-error` the failure,
//! and `data-run-state` follows the run while the view is shown (`#gpu-view`'s
//! `data-gpu-run-state` holds it for the page when the view is shown again).

use std::cell::RefCell;
use std::rc::Rc;

use tokenscope_kernel_report::GgufReport;
use tokenscope_render::kernels::{gguf_file_text, gguf_floor_text, mib_label};
use tokenscope_render::page::gpu::{
    AdapterProbe, GpuEvent, GpuFailure, GpuFailureKind, GpuPreset, GpuRunRequest, GpuViewSettings,
    KernelsRead, KernelsView,
};
use tokenscope_render::page::view::{RunState, Shared};
use web_sys::{HtmlInputElement, HtmlSelectElement};
use yew::prelude::*;

use crate::dom;
use crate::file::PickedFile;

/// Lines of the progress log kept on screen.
const LOG_LINES: usize = 8;

/// The adapter probe.
#[derive(Debug, Clone, PartialEq)]
enum Probe {
    NotAsked,
    Loading,
    Ready(Box<AdapterProbe>),
    Unavailable(GpuFailure),
}

#[derive(Debug, Clone, PartialEq)]
struct GpuState {
    probe: Probe,
    run: RunState,
    preset: GpuPreset,
    timestamps: bool,
    /// Search the variants on this GPU before the run.
    tune: bool,
    /// Its budget from the URL (the page's default otherwise).
    tune_budget_s: Option<f64>,
    autorun_pending: bool,
    current: Option<(usize, usize, String)>,
    log: Vec<String>,
    /// The report shown (the run's so far, or its final one) and its JSON text.
    report: Option<(Shared<KernelsView>, Shared<String>)>,
    /// The run finished: `report` is final (`#kernels-json`).
    finished: bool,
    failure: Option<GpuFailure>,
    /// The picked model file: the run measures its GEMVs and head layout.
    file: Option<Shared<PickedFile>>,
    /// Its section before the run (types, kernels).
    file_section: Option<Shared<GgufReport>>,
    /// Its section measured by the finished run.
    file_measured: Option<Shared<GgufReport>>,
    /// Reading a picked file's header.
    file_reading: bool,
    /// A developer's own kernel, picked: the run measures it instead.
    kernel: Option<Shared<tokenscope_kernel_spec::UserKernel>>,
}

enum GpuAction {
    KernelPicked(Result<Box<tokenscope_kernel_spec::UserKernel>, String>),
    FileReading,
    FilePicked(Result<Box<PickedFile>, String>),
    Probing,
    Probed(Result<AdapterProbe, GpuFailure>),
    Preset(GpuPreset),
    Tune(bool),
    Start,
    Event(GpuEvent),
    Finished(Box<KernelsRead>, Option<Box<GgufReport>>),
    Failed(GpuFailure),
}

impl Reducible for GpuState {
    type Action = GpuAction;

    fn reduce(self: Rc<Self>, action: GpuAction) -> Rc<Self> {
        let mut s = (*self).clone();
        match action {
            GpuAction::KernelPicked(Ok(k)) => {
                s.kernel = Some(Shared::new(*k));
                s.failure = None;
            }
            GpuAction::KernelPicked(Err(message)) => {
                s.kernel = None;
                s.failure = Some(GpuFailure {
                    kind: GpuFailureKind::Failed,
                    message,
                });
            }
            GpuAction::FileReading => {
                s.file_reading = true;
                s.failure = None;
            }
            GpuAction::FilePicked(Ok(f)) => {
                let cfg = kernel_harness::suite::SuiteConfig::quick(0, "");
                s.file_section = Some(Shared::new(f.section(&cfg)));
                s.file = Some(Shared::new(*f));
                s.file_measured = None;
                s.file_reading = false;
            }
            GpuAction::FilePicked(Err(message)) => {
                s.file = None;
                s.file_section = None;
                s.file_measured = None;
                s.file_reading = false;
                s.failure = Some(GpuFailure {
                    kind: GpuFailureKind::Failed,
                    message,
                });
            }
            GpuAction::Probing => s.probe = Probe::Loading,
            GpuAction::Probed(Ok(p)) => s.probe = Probe::Ready(Box::new(p)),
            GpuAction::Probed(Err(f)) => {
                // Autorun cannot run: say so through the contract.
                if s.autorun_pending {
                    s.autorun_pending = false;
                    s.run = RunState::Failed;
                    s.failure = Some(f.clone());
                }
                s.probe = Probe::Unavailable(f);
            }
            GpuAction::Preset(p) => s.preset = p,
            GpuAction::Tune(t) => s.tune = t,
            GpuAction::Start => {
                s.autorun_pending = false;
                s.run = RunState::Running;
                s.current = None;
                s.log.clear();
                s.report = None;
                s.finished = false;
                s.failure = None;
                s.file_measured = None;
            }
            GpuAction::Event(GpuEvent::Start {
                label,
                index,
                total,
            }) => s.current = Some((index, total, label)),
            GpuAction::Event(GpuEvent::Done { label, line, .. }) => {
                s.log.push(format!("{label}: {line}"));
                if s.log.len() > LOG_LINES {
                    s.log.remove(0);
                }
            }
            GpuAction::Event(GpuEvent::Report(read)) => {
                let KernelsRead { json, view } = *read;
                s.report = Some((Shared::new(view), Shared::new(json)));
            }
            GpuAction::Finished(done, gguf) => {
                let KernelsRead { json, view } = *done;
                s.file_measured = gguf.map(|g| Shared::new(*g));
                s.run = RunState::Done;
                s.current = None;
                s.report = Some((Shared::new(view), Shared::new(json)));
                s.finished = true;
            }
            GpuAction::Failed(f) => {
                s.run = RunState::Failed;
                s.current = None;
                s.failure = Some(f);
            }
        }
        Rc::new(s)
    }
}

/// GPU view props.
#[derive(Properties, PartialEq)]
pub struct GpuViewProps {
    /// From the URL: preset, timestamps, autorun, and notes about them.
    pub settings: GpuViewSettings,
    /// The finished run's report JSON (for the page's Analysis).
    pub onreport: Callback<String>,
}

fn start_run(
    state: &UseReducerHandle<GpuState>,
    abort: &Rc<RefCell<Option<web_sys::AbortController>>>,
) {
    if state.run == RunState::Running {
        return;
    }
    let Ok(controller) = web_sys::AbortController::new() else {
        state.dispatch(GpuAction::Failed(GpuFailure {
            kind: GpuFailureKind::Failed,
            message: "this browser has no AbortController".into(),
        }));
        return;
    };
    let signal = controller.signal();
    *abort.borrow_mut() = Some(controller);
    state.dispatch(GpuAction::Start);
    let request = GpuRunRequest {
        preset: state.preset,
        timestamps: state.timestamps,
        tune: state.tune,
        tune_budget_s: state.tune_budget_s,
        ..GpuRunRequest::default()
    };
    let file = state.file.clone();
    let kernel = state.kernel.clone();
    let d = state.dispatcher();
    wasm_bindgen_futures::spawn_local(async move {
        let events = d.clone();
        let r = crate::run::run_view(
            &request,
            crate::run::Picked {
                file: file.as_ref().map(|f| &*f.0),
                kernel: kernel.as_ref().map(|k| &*k.0),
            },
            move |e| events.dispatch(GpuAction::Event(e)),
            signal,
        )
        .await;
        match r {
            Ok((done, gguf)) => {
                d.dispatch(GpuAction::Finished(Box::new(done), gguf.map(Box::new)));
            }
            Err(f) => d.dispatch(GpuAction::Failed(f)),
        }
    });
}

/// The GPU view.
#[function_component]
pub fn GpuView(props: &GpuViewProps) -> Html {
    let state = {
        let s = props.settings.clone();
        use_reducer(move || GpuState {
            probe: Probe::NotAsked,
            run: RunState::Idle,
            preset: s.preset,
            timestamps: s.timestamps,
            tune: s.tune,
            tune_budget_s: s.tune_budget_s,
            autorun_pending: s.autorun,
            current: None,
            log: Vec::new(),
            report: None,
            finished: false,
            failure: None,
            file: None,
            file_section: None,
            file_measured: None,
            file_reading: false,
            kernel: None,
        })
    };
    let abort: Rc<RefCell<Option<web_sys::AbortController>>> = use_mut_ref(|| None);

    use_gpu_effects(state.clone(), abort.clone(), props.onreport.clone());

    let onrun = {
        let (state, abort) = (state.clone(), abort.clone());
        Callback::from(move |_: MouseEvent| start_run(&state, &abort))
    };
    let oncancel = {
        let abort = abort.clone();
        Callback::from(move |_: MouseEvent| {
            if let Some(c) = abort.borrow().as_ref() {
                c.abort();
            }
        })
    };
    let onpreset = {
        let state = state.clone();
        Callback::from(move |e: Event| {
            let s: HtmlSelectElement = e.target_unchecked_into();
            if let Ok(p) = s.value().parse() {
                state.dispatch(GpuAction::Preset(p));
            }
        })
    };
    let ontune = {
        let state = state.clone();
        Callback::from(move |e: Event| {
            let input: HtmlInputElement = e.target_unchecked_into();
            state.dispatch(GpuAction::Tune(input.checked()));
        })
    };
    let onfile = {
        let state = state.clone();
        Callback::from(move |e: Event| {
            let input: HtmlInputElement = e.target_unchecked_into();
            let Some(file) = input.files().and_then(|l| l.get(0)) else {
                return;
            };
            state.dispatch(GpuAction::FileReading);
            let d = state.dispatcher();
            wasm_bindgen_futures::spawn_local(async move {
                let r = crate::file::read_header(&file).await.map(Box::new);
                d.dispatch(GpuAction::FilePicked(r));
            });
        })
    };
    let onkernel = {
        let state = state.clone();
        Callback::from(move |e: Event| {
            let input: HtmlInputElement = e.target_unchecked_into();
            let Some(files) = input.files().filter(|l| l.length() > 0) else {
                return;
            };
            let d = state.dispatcher();
            wasm_bindgen_futures::spawn_local(async move {
                let r = crate::file::read_kernel(&files).await.map(Box::new);
                d.dispatch(GpuAction::KernelPicked(r));
            });
        })
    };
    let running = state.run == RunState::Running;
    let unavailable = matches!(state.probe, Probe::Unavailable(_));
    let can_run = matches!(state.probe, Probe::Ready(_)) && !running;
    let status = status_label(&state.probe, state.run);
    let progress = state.current.as_ref().map(|(i, n, label)| {
        html! {
            <div class="progress" id="gpu-progress">
                <span>{ format!("{}/{} · {label}", i + 1, n) }</span>
                <progress max={n.to_string()} value={i.to_string()}></progress>
            </div>
        }
    });
    let partial = state.report.is_some() && !state.finished;
    let final_json = state
        .report
        .as_ref()
        .filter(|_| state.finished)
        .map(|(_, j)| j.0.as_str().to_owned())
        .unwrap_or_default();
    html! {
        <section class="gpu" id="gpu-view" data-gpu-run-state={state.run.as_str()}>
            <section class="panel">
                <h2>{ "GPU kernels " }<span class="hint">{ "this GPU's memory bandwidth, the decode kernels against it and the floor under a model's TPOT — the same kernels and harness as tokenscope kernels, through WebGPU" }</span></h2>
                for n in props.settings.notes.iter() {
                    <p class="hint">{ n.clone() }</p>
                }
                <Adapter probe={state.probe.clone()} />
                if !unavailable {
                    <div class="gpu-controls">
                        <label>{ "Preset " }
                            <select id="gpu-preset" onchange={onpreset} disabled={running}>
                                <option value="quick" selected={state.preset == GpuPreset::Quick}>{ "quick (small shapes, seconds on a GPU)" }</option>
                                <option value="full" selected={state.preset == GpuPreset::Full}>{ "full (real decode shapes, minutes)" }</option>
                            </select>
                        </label>
                        <label title="as tokenscope kernels --tune: each kernel's variants (threads, rows, loads in flight, int8 x) timed on this GPU, the fastest then run; without it, the per-vendor defaults">
                            <input type="checkbox" id="gpu-tune" checked={state.tune} disabled={running} onchange={ontune} />
                            { format!(" search variants on this GPU first (at most {:.0} s)", tokenscope_render::page::gpu::PAGE_TUNE_BUDGET_S) }
                        </label>
                        if running {
                            <button id="gpu-cancel" class="stop" onclick={oncancel}>{ "Cancel" }</button>
                        } else {
                            <button id="gpu-run" class="run" disabled={!can_run} onclick={onrun}>{ "Measure this GPU" }</button>
                        }
                        { export_buttons(state.report.as_ref().map(|(_, j)| j)) }
                    </div>
                }
                <div class="gpu-file">
                    <label>{ "Measure a GGUF file " }
                        <input type="file" id="gguf-file" accept=".gguf" disabled={running} onchange={onfile} />
                    </label>
                    <span class="hint">{ if state.file_reading {
                        "reading its header…"
                    } else {
                        " its header only is read (never the whole file); the run then measures its GEMVs on generated data of its types and shapes, and attention at its head layout"
                    } }</span>
                    if let Some(section) = &state.file_section {
                        <pre class="gpu-file-section" id="gguf-section" data-file={section.file.clone()}>{ gguf_file_text(section) }</pre>
                    }
                </div>
                <div class="gpu-file">
                    <label>{ "Profile your own kernel " }
                        <input type="file" id="user-kernel" accept=".wgsl,.toml,.json,.bin" multiple=true disabled={running} onchange={onkernel} />
                    </label>
                    <span class="hint">{ " its .wgsl with its spec (NAME.toml or .json: bindings, dispatch, parameters, check) and the files the spec names, picked together; the run then checks it, times each parameter set and places it on this GPU's measured roofline instead of tokenscope's kernels (as tokenscope kernels --shader)" }</span>
                    if let Some(k) = &state.kernel {
                        <pre class="gpu-file-section" id="user-kernel-spec" data-kernel={k.name.clone()}>{ kernel_summary(&k.0) }</pre>
                    }
                </div>
                <div class="status-line"><span class="state" id="gpu-state-label">{ status }</span></div>
                { progress.unwrap_or_default() }
                if !state.log.is_empty() {
                    <pre class="gpu-log" id="gpu-log">{ state.log.join("\n") }</pre>
                }
                <div id="gpu-error" role="alert" class="run-error">
                    { state.failure.as_ref().map(failure_text).unwrap_or_default() }
                </div>
            </section>
            if let Some((r, _)) = &state.report {
                <crate::results::Results view={r.clone()} {partial} />
            }
            if let Some(g) = &state.file_measured {
                <section class="panel" id="gguf-floor">
                    <h2>{ "This file on this GPU" }</h2>
                    <pre>{ gguf_floor_text(g) }</pre>
                </section>
            }
            <section class="panel outputs">
                <details>
                    <summary>{ "Kernels JSON (tokenscope.kernels/1)" }</summary>
                    <pre id="kernels-json">{ final_json }</pre>
                </details>
            </section>
        </section>
    }
}

/// The view's effects: probe the adapter when the view is first shown (this
/// module is mounted then), autorun once the adapter is known, publish the run
/// state for automation while the view is shown, and hand the finished report to
/// the page.
#[hook]
fn use_gpu_effects(
    state: UseReducerHandle<GpuState>,
    abort: Rc<RefCell<Option<web_sys::AbortController>>>,
    onreport: Callback<String>,
) {
    {
        let state = state.clone();
        use_effect_with((), move |()| {
            state.dispatch(GpuAction::Probing);
            let d = state.dispatcher();
            wasm_bindgen_futures::spawn_local(async move {
                d.dispatch(GpuAction::Probed(
                    crate::run::probe().await.map_err(|e| e.failure()),
                ));
            });
        });
    }
    // autorun: start once the adapter is known.
    {
        let (state, abort) = (state.clone(), abort.clone());
        let ready = matches!(state.probe, Probe::Ready(_));
        use_effect_with((ready, state.autorun_pending), move |(ready, pending)| {
            if *ready && *pending {
                start_run(&state, &abort);
            }
        });
    }
    // The automation contract, while this view is shown.
    use_effect_with(state.run, |run| {
        if dom::view_shown() {
            dom::set_run_state(run.as_str());
        }
    });
    // The finished report goes to the page.
    {
        let report = state
            .report
            .as_ref()
            .filter(|_| state.finished)
            .map(|(_, json)| json.clone());
        use_effect_with(report, move |r| {
            if let Some(json) = r {
                onreport.emit((*json.0).clone());
            }
        });
    }
}

/// The status line's word.
fn status_label(probe: &Probe, run: RunState) -> &'static str {
    match (probe, run) {
        (Probe::NotAsked | Probe::Loading, _) => "loading the GPU module…",
        (_, RunState::Running) => "running",
        (_, RunState::Done) => "done",
        (_, RunState::Failed) => "failed",
        (Probe::Unavailable(_), _) => "unavailable",
        _ => "ready",
    }
}

/// Export and copy the kernels JSON (`json`: once there is a report, partial or final).
fn export_buttons(json: Option<&Shared<String>>) -> Html {
    let onexport = {
        let json = json.cloned();
        Callback::from(move |_: MouseEvent| {
            if let Some(json) = &json {
                let name = format!(
                    "tokenscope-kernels-browser-{}.json",
                    dom::now_rfc3339().replace([':', '.'], "-")
                );
                let _ = dom::download(&name, json, "application/json");
            }
        })
    };
    let oncopy = {
        let json = json.cloned();
        Callback::from(move |_: MouseEvent| {
            if let Some(json) = &json {
                dom::copy_text(json);
            }
        })
    };

    html! {
        <>
            <button id="gpu-export" disabled={json.is_none()} onclick={onexport}
                title="tokenscope.kernels/1, as tokenscope kernels --out writes (tokenscope report and the Analysis take it)">{ "Export kernels JSON" }</button>
            <button id="gpu-copy" disabled={json.is_none()} onclick={oncopy}>{ "Copy JSON" }</button>
        </>
    }
}

fn failure_text(f: &GpuFailure) -> String {
    match f.kind {
        GpuFailureKind::Cancelled => "Cancelled: the results so far are shown below.".into(),
        _ => f.message.clone(),
    }
}

#[derive(Properties, PartialEq)]
struct AdapterProps {
    probe: Probe,
}

#[function_component]
fn Adapter(props: &AdapterProps) -> Html {
    match &props.probe {
        Probe::NotAsked | Probe::Loading => {
            html! { <p class="hint" id="gpu-adapter">{ "Loading the GPU module and asking the browser for an adapter…" }</p> }
        }
        Probe::Unavailable(f) => {
            let title = match f.kind {
                GpuFailureKind::NoWebgpu => "WebGPU is not available in this browser",
                GpuFailureKind::NoAdapter => "No GPU adapter",
                GpuFailureKind::NotLoaded => "The GPU module could not be loaded",
                _ => "The GPU cannot be measured here",
            };
            html! {
                <div class="gpu-unavailable" id="gpu-message" data-kind={kind_name(f.kind)}>
                    <strong>{ title }</strong>
                    <p>{ f.message.clone() }</p>
                    <p class="hint">{ "The benchmark view works without it. To measure a GPU natively: tokenscope kernels --out kernels.json, then load that file in the Analysis." }</p>
                </div>
            }
        }
        Probe::Ready(p) => {
            let a = &p.adapter;
            let f = &p.features;
            let l = &p.limits;
            let avail = f.available.as_ref();
            let feat = |name: &str, on: bool| {
                html! { <span class={classes!("feat", on.then_some("on"))}>{ format!("{name} {}", if on { "yes" } else { "no" }) }</span> }
            };
            let has_subgroups = avail.is_some_and(|x| x.subgroups);
            let subgroups = match (has_subgroups, a.subgroup_max_size) {
                (true, n) if n > 0 => format!("subgroups (size {}..{n})", a.subgroup_min_size),
                (false, n) if n > 0 => format!(
                    "subgroups (the adapter reports size {}..{n}; wgpu's WebGPU backend does not expose the feature: shared-memory reductions)",
                    a.subgroup_min_size
                ),
                _ => "subgroups".to_owned(),
            };
            html! {
                <div class="gpu-adapter" id="gpu-adapter">
                    <p><strong id="gpu-adapter-name">{ if a.name.is_empty() { "(the browser does not name it)".to_owned() } else { a.name.clone() } }</strong>
                        { format!(" · {} · {}", a.backend, a.device_type) }
                        if let Some(note) = a.fallback_note() {
                            <span class="hint">{ format!(" ({note})") }</span>
                        }
                    </p>
                    <p>
                        { feat("timestamp-query", avail.is_some_and(|x| x.timestamp_query)) }
                        { feat("shader-f16", avail.is_some_and(|x| x.shader_f16)) }
                        { feat(&subgroups, has_subgroups) }
                    </p>
                    <p class="hint">{ format!(
                        "limits: storage binding {}, buffer {}, {} invocations per workgroup, {} KiB workgroup memory, {} storage buffers per stage",
                        mib_label(l.max_storage_buffer_binding_size),
                        mib_label(l.max_buffer_size),
                        l.max_compute_invocations_per_workgroup,
                        l.max_compute_workgroup_storage_size / 1024,
                        l.max_storage_buffers_per_shader_stage,
                    ) }</p>
                </div>
            }
        }
    }
}

fn kind_name(k: GpuFailureKind) -> &'static str {
    match k {
        GpuFailureKind::NoWebgpu => "no_webgpu",
        GpuFailureKind::NoAdapter => "no_adapter",
        GpuFailureKind::NotLoaded => "not_loaded",
        GpuFailureKind::Cancelled => "cancelled",
        GpuFailureKind::Failed => "failed",
    }
}

/// A picked kernel before its run: its parameter sets and its check.
fn kernel_summary(k: &tokenscope_kernel_spec::UserKernel) -> String {
    let sets: Vec<String> = (0..k.param_sets().len())
        .filter_map(|i| k.instance(i).ok())
        .map(|i| {
            if i.label.is_empty() {
                "as written".to_string()
            } else {
                i.label
            }
        })
        .collect();
    let check = match (&k.spec.check, &k.reference) {
        (Some(c), Some(r)) => format!("binding {} checked against {}", c.binding, r.name),
        (Some(c), None) => format!("binding {} checked against a file", c.binding),
        _ => "output not checked (no check in its spec)".into(),
    };
    format!(
        "{}: {} parameter set{} ({}); {check}",
        k.shader.name,
        sets.len(),
        if sets.len() == 1 { "" } else { "s" },
        sets.join(", ")
    )
}
