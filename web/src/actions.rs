//! The page's actions outside a run: editing the settings and the key, listing
//! the endpoint's models, saving and opening reports, copying a link. Each is a
//! callback that dispatches to the state (`App` wires them to the components).

use tokenscope_core::model::shown;
use tokenscope_measure::openai::model_ids;
use tokenscope_measure::parse::parse_base_url;
use yew::prelude::*;

use crate::services::browser;
use crate::services::fetch::FetchTarget;
use crate::settings::Settings;
use crate::state::{Action, Shared, State};

/// The settings form's callbacks.
pub struct SettingsActions {
    /// The form changed.
    pub onsettings: Callback<Settings>,
    /// The key field changed.
    pub onkey: Callback<String>,
    /// "Remember in this tab" changed.
    pub onremember: Callback<bool>,
    /// "List models".
    pub onlistmodels: Callback<()>,
    /// The extra headers or the key's header changed.
    pub onauth: Callback<Action>,
}

impl SettingsActions {
    /// The callbacks for `state`.
    pub fn new(state: &UseReducerHandle<State>) -> Self {
        let onsettings = {
            let state = state.clone();
            Callback::from(move |s: Settings| state.dispatch(Action::Settings(Box::new(s))))
        };
        let onkey = {
            let state = state.clone();
            Callback::from(move |k: String| {
                if state.remember_key {
                    browser::store_key(Some(&k));
                }
                state.dispatch(Action::ApiKey(k));
            })
        };
        let onremember = {
            let state = state.clone();
            Callback::from(move |r: bool| {
                browser::store_key(if r {
                    Some(state.api_key.as_str())
                } else {
                    None
                });
                state.dispatch(Action::RememberKey(r));
            })
        };
        let onlistmodels = {
            let state = state.clone();
            Callback::from(move |()| {
                let d = state.dispatcher();
                let url = match parse_base_url(&state.settings.url) {
                    Ok(base) => base.endpoint("models"),
                    Err(e) => {
                        d.dispatch(Action::Models(Err(format!("endpoint URL {e}"))));
                        return;
                    }
                };
                let auth = match state.auth() {
                    Ok(a) => a,
                    Err(e) => {
                        d.dispatch(Action::Models(Err(e)));
                        return;
                    }
                };
                wasm_bindgen_futures::spawn_local(async move {
                    let r = FetchTarget::get_text(&url, &auth)
                        .await
                        .and_then(|text| model_ids(&text).ok_or_else(|| "no model listed".into()));
                    d.dispatch(Action::Models(r));
                });
            })
        };
        let onauth = {
            let state = state.clone();
            Callback::from(move |a: Action| state.dispatch(a))
        };
        Self {
            onsettings,
            onkey,
            onremember,
            onlistmodels,
            onauth,
        }
    }
}

/// Saving and opening reports, and copying a link to the settings.
pub struct FileActions {
    /// "Export report": the client report JSON.
    pub onexport: Callback<()>,
    /// "Export raw": the raw file.
    pub onexportraw: Callback<()>,
    /// "Open a saved report".
    pub onload: Callback<web_sys::File>,
    /// "Copy link".
    pub onlink: Callback<()>,
}

impl FileActions {
    /// The callbacks for `state`.
    pub fn new(state: &UseReducerHandle<State>) -> Self {
        let onexport = {
            let state = state.clone();
            Callback::from(move |()| {
                if let Some(f) = &state.finished {
                    let name = format!(
                        "tokenscope-browser-{}.json",
                        f.report
                            .environment
                            .started_at
                            .as_deref()
                            .unwrap_or("report")
                            .replace([':', '.'], "-")
                    );
                    let _ = browser::download(&name, &f.report_json, "application/json");
                }
            })
        };
        let onexportraw = {
            let state = state.clone();
            Callback::from(move |()| {
                if let Some(f) = &state.finished
                    && let Some(raw) = &f.raw_jsonl
                {
                    let _ = browser::download(
                        "tokenscope-browser-raw.jsonl",
                        raw,
                        "application/x-ndjson",
                    );
                }
            })
        };
        let onload = {
            let state = state.clone();
            Callback::from(move |file: web_sys::File| {
                let d = state.dispatcher();
                wasm_bindgen_futures::spawn_local(async move {
                    let r = browser::read_file(file).await.and_then(|text| {
                        shown::client_report(&text)
                            .map(|r| (Box::new(r), Shared::new(text)))
                            .map_err(|e| format!("could not open the report: {e}"))
                    });
                    d.dispatch(Action::Loaded(r));
                });
            })
        };
        let onlink = {
            let state = state.clone();
            Callback::from(move |()| {
                browser::copy_text(&format!(
                    "{}?{}",
                    browser::location_base(),
                    state.settings.to_query()
                ));
            })
        };
        Self {
            onexport,
            onexportraw,
            onload,
            onlink,
        }
    }
}
