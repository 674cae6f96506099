//! The Compare panel's host. The panel (a file input for reports and their raw
//! files, "this run as the base", the comparison with `#compare-json`) is
//! rendered by the report module (`web-report/src/compare_panel.rs`, the CLI's
//! `tokenscope compare` code), loaded when the user opens it: the first load
//! carries only this button.

use yew::prelude::*;

use crate::services::report;
use crate::state::Shared;

/// Compare props.
#[derive(Properties, PartialEq)]
pub struct CompareProps {
    /// This page's finished run (its report JSON), when there is one.
    pub report_json: Option<Shared<String>>,
    /// Its raw file, made on demand.
    pub raw: Option<Callback<(), String>>,
}

/// The Compare panel's host.
#[function_component]
pub fn Compare(props: &CompareProps) -> Html {
    let host = use_node_ref();
    let onclick = {
        let (host, run, raw) = (host.clone(), props.report_json.clone(), props.raw.clone());
        Callback::from(move |_: MouseEvent| {
            let Some(el) = host.cast::<web_sys::Element>() else {
                return;
            };
            let run = run.as_ref().map(|r| (**r).clone());
            let raw = raw.as_ref().map(|f| f.emit(()));
            wasm_bindgen_futures::spawn_local(async move {
                if let Err(e) = report::mount_compare(&el, run, raw).await {
                    el.set_text_content(Some(&e));
                }
            });
        })
    };
    html! {
        <section class="panel" id="compare">
            <h2>{ "Compare runs " }<span class="hint">{ "is the difference real? (as tokenscope compare)" }</span></h2>
            <button id="compare-open" {onclick}>{ "Compare runs…" }</button>
            <div id="compare-host" ref={host}></div>
        </section>
    }
}
