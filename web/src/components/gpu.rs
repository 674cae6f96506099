//! The GPU view's host. The view itself (the adapter, a preset run with progress
//! and Cancel, the bandwidth ceiling, the kernels against it and the decode floor,
//! the kernels JSON) is rendered by the GPU module (`web-gpu/src/view.rs`), which
//! loads the first time the view is shown: this keeps its element, says so when
//! the module cannot load, restores the view's `data-run-state` when it is shown
//! again, and hands each finished run's report to the Analysis.

use tokenscope_render::page::gpu::GpuViewSettings;
use yew::prelude::*;

use crate::services::{browser, gpu};
use crate::settings::GpuSettings;

/// GPU view props.
#[derive(Properties, PartialEq)]
pub struct GpuViewProps {
    /// The view is shown (the module loads the first time it is).
    pub active: bool,
    /// From the URL: preset, timestamps, autorun.
    pub settings: GpuSettings,
    /// Notes about the URL's GPU parameters.
    #[prop_or_default]
    pub notes: Vec<String>,
    /// Each finished run's report JSON (for the Analysis view).
    pub onreport: Callback<String>,
}

/// The GPU view's host.
#[function_component]
pub fn GpuView(props: &GpuViewProps) -> Html {
    let root = use_node_ref();
    let mounted = use_mut_ref(|| false);
    let failure = use_state(|| None::<String>);
    {
        let (root, failure) = (root.clone(), failure.clone());
        let settings = GpuViewSettings {
            preset: props.settings.preset,
            timestamps: props.settings.timestamps,
            autorun: props.settings.autorun,
            tune: props.settings.tune,
            tune_budget_s: props.settings.tune_budget_s,
            notes: props.notes.clone(),
        };
        let onreport = props.onreport.clone();
        use_effect_with(props.active, move |active| {
            let Some(el) = root.cast::<web_sys::Element>().filter(|_| *active) else {
                return;
            };
            if !*mounted.borrow() {
                *mounted.borrow_mut() = true;
                browser::set_run_state("idle");
                wasm_bindgen_futures::spawn_local(async move {
                    let r = gpu::mount(el, &settings, move |json| onreport.emit(json)).await;
                    if let Err(e) = r {
                        browser::set_run_state("failed");
                        failure.set(Some(e));
                    }
                });
            } else if let Some(state) = el
                .query_selector("#gpu-view")
                .ok()
                .flatten()
                .and_then(|v| v.get_attribute("data-gpu-run-state"))
            {
                browser::set_run_state(&state);
            }
        });
    }
    html! {
        <div class="gpu-host" hidden={!props.active}>
            <div ref={root}></div>
            if let Some(e) = &*failure {
                <section class="gpu panel">
                    <div class="gpu-unavailable" id="gpu-message" data-kind="not_loaded">
                        <strong>{ "The GPU module could not be loaded" }</strong>
                        <p>{ e.clone() }</p>
                    </div>
                    <div id="gpu-error" role="alert" class="run-error">{ e.clone() }</div>
                </section>
            }
        </div>
    }
}
