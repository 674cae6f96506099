//! The page: state in a reducer, small components, services for the work.

use tokenscope_core::model::shown;
use yew::prelude::*;

use crate::actions::{FileActions, SettingsActions};
use crate::components::analysis::Analysis;
use crate::components::charts::Charts;
use crate::components::compare::Compare;
use crate::components::gpu::GpuView;
use crate::components::header::Header;
use crate::components::level_table::LevelTable;
use crate::components::outputs::Outputs;
use crate::components::run_controls::RunControls;
use crate::components::run_status::RunStatus;
use crate::components::settings_form::SettingsForm;
use crate::components::streams::Streams;
use crate::components::tiers::Tiers;
use crate::components::warnings::Warnings;
use crate::services::browser;
use crate::services::lazy_run::{self, RunMessage, RunRequest};
use crate::services::rum_demo::Lazy;
use crate::settings::{GpuSettings, Settings, View};
use crate::state::{Action, Finished, KernelsFile, RunState, Shared, State, TierResult};

/// App props: the URL query to read the settings from.
#[derive(Properties, PartialEq, Default)]
pub struct AppProps {
    /// The query (`?url=...&autorun=1`).
    #[prop_or_default]
    pub query: AttrValue,
    /// The network worker's script URL (real endpoints are streamed from it);
    /// without it the page streams on its main thread.
    #[prop_or_default]
    pub worker_url: Option<AttrValue>,
}

fn initial_state(query: &str) -> State {
    let (settings, notes) = Settings::from_query(query);
    let key = browser::stored_key();
    State {
        settings,
        notes,
        remember_key: key.is_some(),
        api_key: key.unwrap_or_default(),
        ..State::default()
    }
}

/// Start a run (unless one is going): in the run module (`services::lazy_run`,
/// loaded the first time), after the settings are checked here.
fn start_run(state: &UseReducerHandle<State>, lanes: &NodeRef, worker_url: Option<AttrValue>) {
    if state.run == RunState::Running {
        return;
    }
    state.dispatch(Action::Start);
    if let Err(e) = state.settings.validate().and_then(|_| state.auth()) {
        state.dispatch(Action::Failed(e));
        return;
    }
    let request = RunRequest {
        settings: state.settings.clone(),
        api_key: state.api_key.clone(),
        key_header: state.key_header.clone(),
        headers: state.headers.clone(),
        worker_url: worker_url.map(|u| u.to_string()),
    };
    let lanes = lanes.cast::<web_sys::Element>();
    let dispatcher = state.dispatcher();
    wasm_bindgen_futures::spawn_local(async move {
        let d = dispatcher.clone();
        if let Err(e) = lazy_run::start(&request, lanes, move |m| on_message(&d, m)).await {
            dispatcher.dispatch(Action::Failed(e));
        }
    });
}

/// A message from the run module, as the state's action.
fn on_message(d: &UseReducerDispatcher<State>, message: RunMessage) {
    // Read as the page shows it (`shown`): the rest stays in `report_json`.
    let report =
        |json: &str| shown::client_report(json).map_err(|e| format!("the run's report: {e}"));
    let action = match message {
        RunMessage::Event(e) => Action::Event(e),
        RunMessage::TierDone { label, report_json } => match report(&report_json) {
            Ok(r) => Action::TierDone(TierResult {
                label,
                report: Shared::new(r),
                report_json: Shared::new(report_json),
            }),
            Err(e) => Action::Failed(e),
        },
        RunMessage::Finished {
            report_json,
            records_json,
            records,
            raw_jsonl,
        } => match report(&report_json) {
            Ok(mut r) => Action::Finished(Box::new(Finished {
                levels: Shared::new(std::mem::take(&mut r.levels)),
                report: Shared::new(r),
                report_json: Shared::new(report_json),
                records: Shared::new(records),
                records_json: Shared::new(records_json),
                raw_jsonl: Some(Shared::new(raw_jsonl)),
                loaded: false,
            })),
            Err(e) => Action::Failed(e),
        },
        RunMessage::Failed(e) => Action::Failed(e),
    };
    d.dispatch(action);
}

/// The page.
#[function_component]
pub fn App(props: &AppProps) -> Html {
    let state = {
        let query = props.query.clone();
        use_reducer(move || initial_state(&query))
    };
    let lanes = use_node_ref();
    // `view=gpu` opens the GPU view (its module loads only then).
    let gpu_settings = {
        let query = props.query.clone();
        use_memo((), move |()| GpuSettings::from_query(&query))
    };
    let view = {
        let v = gpu_settings.0.view;
        use_state(move || v)
    };
    // The Real users view (the chat demo), shown with the endpoint the Benchmark
    // view is set to each time it opens.
    let rum_host = use_node_ref();
    {
        let (rum_host, state) = (rum_host.clone(), state.clone());
        use_effect_with(*view, move |v| {
            if let Some(el) = rum_host
                .cast::<web_sys::Element>()
                .filter(|_| *v == View::Rum)
            {
                browser::set_run_state("idle");
                crate::services::rum_demo::show(
                    Lazy::RumDemo,
                    el,
                    state.settings.validate(),
                    state.auth(),
                );
            }
        });
    }
    // The Quality view, likewise (its module loads the first time it opens).
    let quality_host = use_node_ref();
    {
        let (quality_host, state) = (quality_host.clone(), state.clone());
        use_effect_with(*view, move |v| {
            if let Some(el) = quality_host
                .cast::<web_sys::Element>()
                .filter(|_| *v == View::Quality)
            {
                // (The module sets `idle` when it shows a new view, never
                // under a check that runs.)
                crate::services::rum_demo::show(
                    Lazy::Quality,
                    el,
                    state.settings.validate(),
                    state.auth(),
                );
            }
        });
    }
    // The kernels report measured in the GPU view, for the Analysis.
    let measured = use_state(|| None::<KernelsFile>);

    let autorun = state.settings.autorun && gpu_settings.0.view == View::Bench;
    let (onrun, onstop) = use_run(
        state.clone(),
        lanes.clone(),
        props.worker_url.clone(),
        *view,
        autorun,
    );
    let SettingsActions {
        onsettings,
        onkey,
        onremember,
        onlistmodels,
        onauth,
    } = SettingsActions::new(&state);
    let FileActions {
        onexport,
        onexportraw,
        onload,
        onlink,
    } = FileActions::new(&state);
    let running = state.run == RunState::Running;
    let finished = state.finished.as_ref();
    let simulated = if running || finished.is_some() {
        state.simulated
    } else {
        state.settings.is_simulated()
    };
    // A run's report from the GPU module, read (as a loaded file is) by the
    // report module for the Analysis.
    let onkernels = {
        let measured = measured.clone();
        Callback::from(move |json: String| {
            let measured = measured.clone();
            wasm_bindgen_futures::spawn_local(async move {
                if let Ok(read) = crate::services::report::read_kernels(&json).await {
                    measured.set(Some(KernelsFile {
                        view: Shared::new(read.view),
                        json: Shared::new(read.json),
                    }));
                }
            });
        })
    };
    // The run's raw file for the Compare view.
    let raw_of_run = finished
        .and_then(|f| f.raw_jsonl.clone())
        .map(|raw| Callback::from(move |()| raw.to_string()));
    html! {
        <div class="page">
            <Header {simulated} />
            { tabs(&view, running) }
            <GpuView active={*view == View::Gpu} settings={gpu_settings.0.clone()}
                notes={gpu_settings.1.clone()} onreport={onkernels} />
            <div class="rum-host" hidden={*view != View::Rum} ref={rum_host}></div>
            <div class="quality-host" hidden={*view != View::Quality} ref={quality_host}></div>
            <div class="layout" hidden={*view != View::Bench}>
                <aside class="side">
                    <SettingsForm
                        settings={state.settings.clone()}
                        api_key={AttrValue::from(state.api_key.clone())}
                        remember_key={state.remember_key}
                        headers={AttrValue::from(state.headers.clone())}
                        key_header={AttrValue::from(state.key_header.clone())}
                        {onauth}
                        models={state.models.clone()}
                        models_error={state.models_error.clone().map(AttrValue::from)}
                        disabled={running}
                        onchange={onsettings}
                        {onkey}
                        {onremember}
                        {onlistmodels}
                    />
                    <RunControls
                        {running}
                        can_export={finished.is_some()}
                        can_export_raw={finished.is_some_and(|f| f.raw_jsonl.is_some())}
                        {onrun} {onstop} {onexport} {onexportraw} {onload} {onlink}
                    />
                </aside>
                <main class="main">
                    <RunStatus
                        run={state.run}
                        progress={state.progress.clone()}
                        model={state.model.clone().map(AttrValue::from)}
                        protocol={state.protocol.clone().map(AttrValue::from)}
                        {simulated}
                        loaded={finished.is_some_and(|f| f.loaded)}
                        error={state.error.clone().map(AttrValue::from)}
                    />
                    <Warnings warnings={state.warnings.clone()} notes={state.notes.clone()} />
                    <Streams lanes={lanes.clone()} {running} />
                    { results(&state) }
                    <Tiers tiers={state.tiers.clone()} />
                    <Analysis report_json={finished.map(|f| f.report_json.clone())} measured={(*measured).clone()} />
                    <Compare report_json={finished.map(|f| f.report_json.clone())} raw={raw_of_run} />
                    <Outputs
                        report_json={finished.map(|f| f.report_json.clone())}
                        records_json={finished.map(|f| f.records_json.clone())}
                    />
                </main>
            </div>
            <footer class="foot">
                { format!("tokenscope {} · metric definitions: docs/metrics.md · the API key stays in this page", tokenscope_core::VERSION) }
            </footer>
        </div>
    }
}

/// The run's start and stop. `data-run-state` (the automation contract) follows
/// the run, after the DOM holding #report-json is committed, while the benchmark
/// view is shown (the GPU view sets it for its own run); `autorun` starts a run
/// once, as soon as the page is mounted.
#[hook]
fn use_run(
    state: UseReducerHandle<State>,
    lanes: NodeRef,
    worker: Option<AttrValue>,
    view: View,
    autorun: bool,
) -> (Callback<()>, Callback<()>) {
    use_effect_with((state.run, view), |(run, view)| {
        if *view == View::Bench {
            browser::set_run_state(run.as_str());
        }
    });
    let onrun = {
        let state = state.clone();
        Callback::from(move |()| start_run(&state, &lanes, worker.clone()))
    };
    {
        let onrun = onrun.clone();
        use_effect_with((), move |()| {
            if autorun {
                onrun.emit(());
            }
        });
    }
    let onstop = Callback::from(move |()| wasm_bindgen_futures::spawn_local(lazy_run::stop()));
    (onrun, onstop)
}

/// The Benchmark, GPU kernels and Real users tabs (locked to the active one during a run).
fn tabs(view: &UseStateHandle<View>, running: bool) -> Html {
    let tab = |v: View, id: &'static str, label: &'static str| {
        let view = view.clone();
        let active = *view == v;
        html! {
            <button type="button" {id} role="tab" class={classes!("tab", active.then_some("active"))}
                aria-selected={active.to_string()} disabled={running && !active}
                onclick={Callback::from(move |_: MouseEvent| view.set(v))}>{ label }</button>
        }
    };
    html! {
        <nav class="tabs" role="tablist">
            { tab(View::Bench, "tab-bench", "Benchmark") }
            { tab(View::Gpu, "tab-gpu", "GPU kernels") }
            { tab(View::Rum, "tab-rum", "Real users") }
            { tab(View::Quality, "tab-quality", "Quality") }
        </nav>
    }
}

/// The levels table and the charts, live during a run and final after it.
fn results(state: &UseReducerHandle<State>) -> Html {
    let finished = state.finished.as_ref();
    let report = finished.map(|f| f.report.clone());
    let knee = report.as_ref().and_then(|r| r.sweep.knee.clone());
    // The SLOs drawn: the report's, or those the form would run.
    let slos = report.as_ref().map_or_else(
        || {
            state
                .settings
                .validate()
                .map(|p| p.slos)
                .unwrap_or_default()
        },
        |r| r.config.slos.clone(),
    );
    let records = finished.map_or_else(|| Shared::new(Vec::new()), |f| f.records.clone());
    let onlevel = {
        let state = state.clone();
        Callback::from(move |i: usize| state.dispatch(Action::ViewLevel(i)))
    };

    html! {
        <>
            <LevelTable levels={state.live_levels.clone()} knee={knee.as_ref().map(|k| k.level_index)} />
            <Charts
                levels={state.chart_levels.clone()}
                {knee}
                {slos}
                {records}
                view_level={state.view_level}
                {onlevel}
            />
        </>
    }
}
