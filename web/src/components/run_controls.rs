//! Run and stop; export the report (JSON) and the raw records (JSONL); load a
//! saved report; copy a link that reruns these settings.

use web_sys::HtmlInputElement;
use yew::prelude::*;

/// Control props.
#[derive(Properties, PartialEq)]
pub struct RunControlsProps {
    /// A run is going.
    pub running: bool,
    /// A report can be exported.
    pub can_export: bool,
    /// Raw records can be exported.
    pub can_export_raw: bool,
    /// Start.
    pub onrun: Callback<()>,
    /// Stop.
    pub onstop: Callback<()>,
    /// Export the report.
    pub onexport: Callback<()>,
    /// Export the raw records.
    pub onexportraw: Callback<()>,
    /// A file was picked.
    pub onload: Callback<web_sys::File>,
    /// Copy a link to these settings.
    pub onlink: Callback<()>,
}

/// The buttons.
#[function_component]
pub fn RunControls(props: &RunControlsProps) -> Html {
    let on_file = {
        let cb = props.onload.clone();
        Callback::from(move |e: Event| {
            let input: HtmlInputElement = e.target_unchecked_into();
            if let Some(file) = input.files().and_then(|f| f.get(0)) {
                cb.emit(file);
            }
            input.set_value("");
        })
    };
    let click = |cb: &Callback<()>| {
        let cb = cb.clone();
        Callback::from(move |_: MouseEvent| cb.emit(()))
    };
    html! {
        <div class="controls">
            if props.running {
                <button id="stop" class="stop" onclick={click(&props.onstop)}>{ "Stop" }</button>
            } else {
                <button id="run" class="run" onclick={click(&props.onrun)}>{ "Run benchmark" }</button>
            }
            <div class="row">
                <button id="export-json" disabled={!props.can_export} onclick={click(&props.onexport)}
                    title="The client report, tokenscope.client/1 (no API key in it)">{ "Export report" }</button>
                <button id="export-raw" disabled={!props.can_export_raw} onclick={click(&props.onexportraw)}
                    title="Every request, tokenscope.raw/1 JSONL">{ "Export raw" }</button>
                <button id="copy-link" onclick={click(&props.onlink)}
                    title="A link that reruns these settings (never the key)">{ "Copy link" }</button>
            </div>
            <label class="file">
                { "Open a saved report… " }
                <input id="load-report" type="file" accept=".json,application/json" onchange={on_file} disabled={props.running} />
            </label>
        </div>
    }
}
