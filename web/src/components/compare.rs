//! The Compare panel: reports opened here (`.json`, with their raw `.jsonl` files)
//! and, if asked, this page's own run, compared by the report module with
//! `tokenscope compare`'s code (`core::page::compare`): the same cells,
//! intervals and verdicts, the same HTML, the same `tokenscope.compare/1`
//! (`#compare-json`). The module renders the result; this keeps the inputs.

use web_sys::HtmlInputElement;
use yew::prelude::*;

use crate::services::{browser, report};
use crate::state::Shared;

/// Compare props.
#[derive(Properties, PartialEq)]
pub struct CompareProps {
    /// This page's finished run (its report JSON), when there is one.
    pub report_json: Option<Shared<String>>,
    /// Its raw file, made on demand.
    pub raw: Option<Callback<(), String>>,
}

/// The Compare panel.
#[function_component]
pub fn Compare(props: &CompareProps) -> Html {
    let files = use_state(Vec::<(String, String)>::new);
    let with_run = use_state(|| false);
    let host = use_node_ref();

    let on_files = {
        let files = files.clone();
        Callback::from(move |e: Event| {
            let input: HtmlInputElement = e.target_unchecked_into();
            let Some(list) = input.files() else { return };
            let picked: Vec<web_sys::File> =
                (0..list.length()).filter_map(|i| list.get(i)).collect();
            let files = files.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let mut read = Vec::new();
                for f in picked {
                    if let Ok(text) = browser::read_file(f.clone()).await {
                        read.push((f.name(), text));
                    }
                }
                files.set(read);
            });
        })
    };
    let on_with_run = {
        let with_run = with_run.clone();
        Callback::from(move |e: Event| {
            with_run.set(e.target_unchecked_into::<HtmlInputElement>().checked())
        })
    };
    {
        let host = host.clone();
        let current = (*with_run)
            .then(|| props.report_json.clone())
            .flatten()
            .map(|r| (r, props.raw.as_ref().map(|f| f.emit(()))));
        use_effect_with(((*files).clone(), current), move |(files, current)| {
            let mut all = files.clone();
            let base = current.as_ref().map(|(report, raw)| {
                all.push(("this-run.json".into(), (**report).clone()));
                if let Some(raw) = raw {
                    all.push(("this-run.jsonl".into(), raw.clone()));
                }
                "this-run.json"
            });
            if !all.is_empty() {
                wasm_bindgen_futures::spawn_local(async move {
                    let shown = match report::compare(&all, base).await {
                        Ok(r) => r.get(1).cloned().unwrap_or_default(),
                        Err(e) => format!(
                            "<p id=\"compare-error\" class=\"error\">{}</p>",
                            tokenscope_core::render::fmt::escape_html(&e)
                        ),
                    };
                    if let Some(el) = host.cast::<web_sys::Element>() {
                        el.set_inner_html(&shown);
                    }
                });
            }
        });
    }
    html! {
        <section class="panel" id="compare">
            <h2>{ "Compare runs " }<span class="hint">{ "is the difference real? (as tokenscope compare)" }</span></h2>
            <label class="file">
                { "Reports and raw files (.json, .jsonl)… " }
                <input id="compare-files" type="file" multiple=true accept=".json,.jsonl" onchange={on_files} />
            </label>
            if props.report_json.is_some() {
                <label><input id="compare-this-run" type="checkbox" checked={*with_run} onchange={on_with_run} />{ " this run as the base" }</label>
            }
            <div id="compare-view" class="combined" ref={host}></div>
        </section>
    }
}
