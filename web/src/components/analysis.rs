//! The combined view: this page's report (run here or opened) analysed by core
//! (`analyze::verdict`) into the verdict, the diagnosis with its evidence, and,
//! with a kernels report loaded beside it (`tokenscope kernels --out`, native or
//! from a browser), the server's TPOT against the GPU's bandwidth floor for the
//! model being served. The same code renders `tokenscope report`'s HTML: the
//! fragment here is `render::combined::html_body` (without the run's own charts,
//! which the page shows above it), and "Export combined report" saves
//! `render::combined::html`.

use tokenscope_hw::floor::{Quant, preset_names};
use tokenscope_render::page::report::{ModelPick, Rendered, ReportRequest};
use web_sys::{HtmlInputElement, HtmlSelectElement};
use yew::prelude::*;

use crate::services::{browser, report};
use crate::state::{KernelsFile, Shared};

/// Analysis props.
#[derive(Properties, PartialEq)]
pub struct AnalysisProps {
    /// The page's report as JSON (a finished run, or one opened).
    pub report_json: Option<Shared<String>>,
    /// A kernels report measured in this page's GPU view, used when none is loaded.
    #[prop_or_default]
    pub measured: Option<KernelsFile>,
}

/// The model being served, as picked in the form.
#[derive(Clone, PartialEq)]
struct ModelForm {
    preset: String,
    quant: Quant,
    context: u64,
    /// The GPU's memory as typed, and its bytes when it parses.
    gpu_memory: (String, Option<u64>),
}

impl Default for ModelForm {
    fn default() -> Self {
        ModelForm {
            preset: String::new(),
            quant: Quant::Q4_0,
            context: 4096,
            gpu_memory: (String::new(), None),
        }
    }
}

impl ModelForm {
    fn pick(&self) -> Option<ModelPick> {
        (!self.preset.is_empty()).then(|| ModelPick {
            preset: self.preset.clone(),
            quant: self.quant,
            context: self.context.max(1),
            gpu_memory_bytes: self.gpu_memory.1,
        })
    }
}

/// Where the rendering is.
#[derive(Clone, PartialEq)]
enum View {
    /// Nothing to analyse.
    Empty,
    /// The report module is loading or working.
    Working,
    /// The analysis.
    Done(Shared<Rendered>),
    /// Why there is none.
    Failed(String),
}

/// The combined view.
#[function_component]
pub fn Analysis(props: &AnalysisProps) -> Html {
    let kernels = use_state(|| None::<KernelsFile>);
    let kernels_error = use_state(|| None::<String>);
    let model = use_state(ModelForm::default);

    let on_kernels = {
        let (kernels, kernels_error) = (kernels.clone(), kernels_error.clone());
        Callback::from(move |e: Event| {
            let input: HtmlInputElement = e.target_unchecked_into();
            let Some(file) = input.files().and_then(|f| f.get(0)) else {
                return;
            };
            input.set_value("");
            let (kernels, kernels_error) = (kernels.clone(), kernels_error.clone());
            wasm_bindgen_futures::spawn_local(async move {
                // The report module reads it (the page never reads a kernels
                // report itself: see `KernelsView`).
                let r = match browser::read_file(file).await {
                    Ok(json) => report::read_kernels(&json).await.map(|read| KernelsFile {
                        view: Shared::new(read.view),
                        json: Shared::new(read.json),
                    }),
                    Err(e) => Err(e),
                };
                match r {
                    Ok(k) => {
                        kernels.set(Some(k));
                        kernels_error.set(None);
                    }
                    Err(e) => kernels_error.set(Some(e)),
                }
            });
        })
    };
    // A loaded file wins over the GPU view's measurement.
    let from_gpu_view = kernels.is_none() && props.measured.is_some();
    let effective = (*kernels).clone().or_else(|| props.measured.clone());
    let view = use_analysis(
        props.report_json.clone(),
        effective.clone(),
        (*model).clone(),
    );
    let rendered = match &*view {
        View::Done(r) => Some(r.clone()),
        _ => None,
    };
    let on_export = {
        let rendered = rendered.clone();
        Callback::from(move |_: MouseEvent| {
            if let Some(r) = &rendered {
                let _ = browser::download("tokenscope-report.html", &r.html, "text/html");
            }
        })
    };

    let kernels_line = kernels_line(effective.as_ref(), from_gpu_view);
    let floor_hint = floor_hint(effective.is_some(), model.preset.is_empty());
    html! {
        <section class="panel analysis" id="analysis">
            <h2>{ "Analysis " }<span class="hint">{ "verdict, diagnosis and the GPU floor (the same analysis as tokenscope report)" }</span></h2>
            <div class="analysis-form">
                <label class="file">
                    { "Kernels report (tokenscope kernels --out)… " }
                    <input id="load-kernels" type="file" accept=".json,application/json" onchange={on_kernels} />
                </label>
                <span id="kernels-loaded" class="hint">{ kernels_line }</span>
                { model_fields(&model) }
                <button id="export-html" disabled={rendered.is_none()} onclick={on_export}
                    title="One self-contained HTML file, as tokenscope report writes">{ "Export combined report" }</button>
            </div>
            if let Some(e) = &*kernels_error {
                <p class="error" role="alert">{ e.clone() }</p>
            }
            if let Some(h) = floor_hint {
                <p class="hint">{ h }</p>
            }
            { match &*view {
                // core's fragment: every text escaped, no script, no style attribute.
                View::Done(r) => html! {
                    <div id="combined-report" class="combined">{ Html::from_html_unchecked(AttrValue::from(r.body.clone())) }</div>
                },
                View::Working => html! { <p class="hint" id="analysis-working">{ "Analysing…" }</p> },
                View::Failed(e) => html! { <p class="error" role="alert" id="analysis-error">{ e.clone() }</p> },
                View::Empty => html! { <p class="hint">{ "Run a benchmark or open a saved report to see the analysis." }</p> },
            } }
        </section>
    }
}

/// The model being served: preset, weight format and context (the floor's inputs).
fn model_fields(model: &UseStateHandle<ModelForm>) -> Html {
    let on_preset = {
        let model = model.clone();
        Callback::from(move |e: Event| {
            let s: HtmlSelectElement = e.target_unchecked_into();
            model.set(ModelForm {
                preset: s.value(),
                ..(*model).clone()
            });
        })
    };
    let on_quant = {
        let model = model.clone();
        Callback::from(move |e: Event| {
            let s: HtmlSelectElement = e.target_unchecked_into();
            if let Ok(quant) = s.value().parse() {
                model.set(ModelForm {
                    quant,
                    ..(*model).clone()
                });
            }
        })
    };
    let on_context = {
        let model = model.clone();
        Callback::from(move |e: Event| {
            let i: HtmlInputElement = e.target_unchecked_into();
            if let Ok(context) = i.value().trim().parse::<u64>()
                && context > 0
            {
                model.set(ModelForm {
                    context,
                    ..(*model).clone()
                });
            }
        })
    };

    let on_gpu_memory = {
        let model = model.clone();
        Callback::from(move |e: Event| {
            let i: HtmlInputElement = e.target_unchecked_into();
            let text = i.value().trim().to_owned();
            let bytes = tokenscope_measure::parse::parse_bytes(&text).ok();
            model.set(ModelForm {
                gpu_memory: (text, bytes),
                ..(*model).clone()
            });
        })
    };
    let (typed, bytes) = &model.gpu_memory;
    let bad_memory = !typed.is_empty() && bytes.is_none();
    html! {
        <>
            <label>{ "Model served " }
                <select id="floor-model" onchange={on_preset}>
                    <option value="" selected={model.preset.is_empty()}>{ "(pick)" }</option>
                    { for preset_names().into_iter().map(|p| html! {
                        <option value={p} selected={model.preset == p}>{ p }</option>
                    }) }
                </select>
            </label>
            <label>{ "Weights " }
                <select id="floor-quant" onchange={on_quant}>
                    { for Quant::ALL.into_iter().map(|q| html! {
                        <option value={q.as_str()} selected={model.quant == q}>{ q.as_str() }</option>
                    }) }
                </select>
            </label>
            <label>{ "Context " }
                <input id="floor-context" type="number" min="1" value={model.context.to_string()} onchange={on_context} />
            </label>
            <label title="adds the KV-cache plan: sequences of this context that fit">{ "GPU memory " }
                <input id="floor-gpu-memory" value={typed.clone()} onchange={on_gpu_memory} placeholder="e.g. 80GiB"
                    class={classes!(bad_memory.then_some("invalid"))} spellcheck="false" size="8" />
            </label>
            if bad_memory {
                <small class="error" id="floor-gpu-memory-error">{ format!("GPU memory {typed:?}: expected e.g. 80GiB, 24GB or a number of bytes") }</small>
            }
        </>
    }
}

/// The analysis, rendered by the report module whenever the report, the kernels
/// or the model change (the module loads on the first report). Only the latest
/// request's answer is shown (an earlier one may come later).
#[hook]
fn use_analysis(
    report_json: Option<Shared<String>>,
    kernels: Option<KernelsFile>,
    model: ModelForm,
) -> UseStateHandle<View> {
    let view = use_state(|| View::Empty);
    let generation = use_mut_ref(|| 0u64);
    {
        let view = view.clone();
        use_effect_with((report_json, kernels, model), move |(r, k, m)| {
            *generation.borrow_mut() += 1;
            let mine = *generation.borrow();
            match r {
                None => view.set(View::Empty),
                Some(r) => {
                    view.set(View::Working);
                    let request = ReportRequest {
                        client_json: r.0.as_ref().clone(),
                        kernels_json: k.as_ref().map(|k| k.json.0.as_ref().clone()),
                        model: m.pick(),
                    };
                    wasm_bindgen_futures::spawn_local(async move {
                        let out = report::render(&request).await;
                        if *generation.borrow() == mine {
                            view.set(match out {
                                Ok(out) => View::Done(Shared::new(out)),
                                Err(e) => View::Failed(e),
                            });
                        }
                    });
                }
            }
        });
    }
    view
}

/// What kernels report the floor uses, in one line.
fn kernels_line(kernels: Option<&KernelsFile>, from_gpu_view: bool) -> String {
    match kernels.map(|k| &*k.view) {
        Some(k) => format!(
            "{} ({}, {} kernels{}){}",
            k.adapter,
            k.backend,
            k.kernels,
            if k.verified {
                ", all verified"
            } else {
                ", NOT all verified"
            },
            if from_gpu_view {
                " — measured in this page's GPU view"
            } else {
                ""
            }
        ),
        None => "none loaded".to_owned(),
    }
}

/// What is missing for the GPU floor, if anything.
fn floor_hint(have_kernels: bool, no_model: bool) -> Option<&'static str> {
    match (have_kernels, no_model) {
        (false, _) => Some(
            "Load a kernels report and pick the model being served to compare TPOT with the GPU's bandwidth floor.",
        ),
        (true, true) => Some("Pick the model being served to compare TPOT with the GPU's floor."),
        _ => None,
    }
}
