//! The Quality view: a form (the reference, how many prompts, tasks and
//! levels), a status line, and the report (core's HTML, every text escaped),
//! with the report and the reference as files to download. Plain DOM: the
//! form is a fixed template; everything from a server is set as text or
//! escaped by core's renderer.
//!
//! The automation contract (`docs/url.md`): `data-run-state` on `<body>`
//! (`running`, `done`, `failed`), the report's JSON in `#q-json`.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::Reflect;
use tokenscope_measure::parse::{parse_base_url, parse_u32_list, redact_url};
use tokenscope_quality::golden::Golden;
use tokenscope_quality::report::QualityReport;
use tokenscope_quality::run::{self, Plan, Reference};
use tokenscope_quality::sample::probe_prompts;
use tokenscope_quality::session::{Server, Transport};
use tokenscope_quality::tasks::builtin;
use tokenscope_quality::teacher;
use tokenscope_quality::toy_lm::ToyLm;
use tokenscope_quality::toy_serve::LmServe;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::transport::{Fetch, Say, Sim};

/// The endpoint the Benchmark view is set to.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The base URL (`None`: the page's simulator).
    pub url: Option<String>,
    /// The model (`None`: the first `/models` lists).
    pub model: Option<String>,
    /// Every header to send (the key's first).
    pub headers: Vec<(String, String)>,
    /// The simulator's seed.
    pub sim_seed: u64,
}

impl Endpoint {
    /// Read the page's `{url, model, headers, sim_seed}`.
    pub fn from_js(v: &JsValue) -> Result<Endpoint, String> {
        let get = |k: &str| Reflect::get(v, &JsValue::from_str(k)).unwrap_or_default();
        let mut headers = Vec::new();
        let h = get("headers");
        if h.is_object() {
            for k in js_sys::Object::keys(h.unchecked_ref::<js_sys::Object>()).iter() {
                let name = k.as_string().unwrap_or_default();
                let value = Reflect::get(&h, &k)
                    .ok()
                    .and_then(|v| v.as_string())
                    .unwrap_or_default();
                headers.push((name, value));
            }
        }
        Ok(Endpoint {
            url: get("url").as_string(),
            model: get("model").as_string().filter(|m| !m.is_empty()),
            headers,
            sim_seed: get("sim_seed")
                .as_string()
                .and_then(|s| s.parse().ok())
                .unwrap_or(1),
        })
    }

    fn shown(&self) -> String {
        match &self.url {
            Some(u) => redact_url(u),
            None => "the built-in simulator".to_owned(),
        }
    }
}

const FORM: &str = r#"<section class="quality-view" id="quality-view">
<h2>Quality: is it still the same model?</h2>
<p>The same seeded prompts and tasks at temperature 0, token by token against a reference, at each concurrency: exact match, where answers part, KL divergence and same top token (teacher-forced where the server scores a prompt's own tokens), task accuracy and flips. The figures and their limits over an API: docs/quality.md.</p>
<p>Candidate: <strong id="q-endpoint"></strong> (the Benchmark view's endpoint).</p>
<form id="q-form" class="quality-form">
<label>Reference <select id="q-ref">
<option value="self">this endpoint, asked twice first (its own noise floor)</option>
<option value="url">another endpoint</option>
<option value="golden">a golden file (tokenscope quality --save-golden)</option>
</select></label>
<label id="q-ref-url-row" hidden>Reference base URL <input id="q-ref-url" type="url" placeholder="http://localhost:8001/v1"></label>
<label id="q-golden-row" hidden>Golden file <input id="q-golden" type="file" accept=".json,application/json"></label>
<label id="q-sigma-row" hidden>Simulated change: σ added to each logit <input id="q-sigma" type="number" value="0.3" min="0" max="5" step="0.1"></label>
<label>Prompts <input id="q-prompts" type="number" value="8" min="1" max="200"></label>
<label>Tokens per answer <input id="q-tokens" type="number" value="16" min="1" max="512"></label>
<label>Tasks <input id="q-tasks" type="number" value="12" min="0" max="500"></label>
<label>Top log-probabilities <input id="q-top" type="number" value="20" min="0" max="20"></label>
<label>Concurrency <input id="q-levels" type="text" value="1,4"></label>
<button id="q-run" type="submit">Check quality</button>
</form>
<p id="q-status" role="status"></p>
<p id="q-error" class="run-error" role="alert" hidden></p>
<div id="q-result"></div>
<pre id="q-json" hidden></pre>
<p><button id="q-download" type="button" hidden>Download the report (JSON)</button> <button id="q-download-golden" type="button" hidden>Download the reference as a golden file</button></p>
</section>"#;

/// What the last run left to download.
#[derive(Default)]
struct Kept {
    report: Option<String>,
    golden: Option<String>,
}

thread_local! {
    /// A check is running (the view is not rebuilt under it).
    static RUNNING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Render the view into `root` for `endpoint`, wiring the form; refused while
/// a check runs (its report would land in the new view).
pub fn mount(root: web_sys::Element, endpoint: Endpoint) -> Result<(), JsValue> {
    if RUNNING.with(std::cell::Cell::get) {
        return Err(JsValue::from_str(
            "a quality check is running: the view follows the new endpoint once it ends (open the tab again then)",
        ));
    }
    set_run_state("idle");
    root.set_inner_html(FORM);
    let find = |id: &str| -> Result<web_sys::Element, JsValue> {
        root.query_selector(&format!("#{id}"))?
            .ok_or_else(|| JsValue::from_str(&format!("#{id} missing")))
    };
    find("q-endpoint")?.set_text_content(Some(&endpoint.shown()));
    let simulated = endpoint.url.is_none();
    find("q-sigma-row")?.toggle_attribute_with_force("hidden", !simulated)?;
    let kept = Rc::new(RefCell::new(Kept::default()));
    // The reference's rows follow the choice.
    {
        let root = root.clone();
        let on_change = Closure::<dyn Fn()>::new(move || {
            let choice = input_value(&root, "q-ref");
            for (row, shown) in [("q-ref-url-row", "url"), ("q-golden-row", "golden")] {
                if let Ok(Some(el)) = root.query_selector(&format!("#{row}")) {
                    let _ = el.toggle_attribute_with_force("hidden", choice != shown);
                }
            }
        });
        find("q-ref")?
            .add_event_listener_with_callback("change", on_change.as_ref().unchecked_ref())?;
        on_change.forget();
    }
    {
        let (root2, kept2) = (root.clone(), kept.clone());
        let on_submit = Closure::<dyn Fn(web_sys::Event)>::new(move |e: web_sys::Event| {
            e.prevent_default();
            let (root, kept, endpoint) = (root2.clone(), kept2.clone(), endpoint.clone());
            wasm_bindgen_futures::spawn_local(async move {
                start(&root, &kept, &endpoint).await;
            });
        });
        find("q-form")?
            .add_event_listener_with_callback("submit", on_submit.as_ref().unchecked_ref())?;
        on_submit.forget();
    }
    for (id, pick, name) in [
        ("q-download", true, "quality.json"),
        ("q-download-golden", false, "golden.json"),
    ] {
        let kept = kept.clone();
        let on_click = Closure::<dyn Fn()>::new(move || {
            let k = kept.borrow();
            let text = if pick { &k.report } else { &k.golden };
            if let Some(t) = text {
                let _ = download(name, t);
            }
        });
        find(id)?.add_event_listener_with_callback("click", on_click.as_ref().unchecked_ref())?;
        on_click.forget();
    }
    Ok(())
}

fn input_value(root: &web_sys::Element, id: &str) -> String {
    root.query_selector(&format!("#{id}"))
        .ok()
        .flatten()
        .map(|el| {
            if let Some(i) = el.dyn_ref::<web_sys::HtmlInputElement>() {
                i.value()
            } else if let Some(s) = el.dyn_ref::<web_sys::HtmlSelectElement>() {
                s.value()
            } else {
                String::new()
            }
        })
        .unwrap_or_default()
}

fn set_text(root: &web_sys::Element, id: &str, text: &str) {
    if let Ok(Some(el)) = root.query_selector(&format!("#{id}")) {
        el.set_text_content(Some(text));
        let _ = el.toggle_attribute_with_force("hidden", text.is_empty());
    }
}

fn set_run_state(state: &str) {
    if let Some(body) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.body())
    {
        let _ = body.set_attribute("data-run-state", state);
    }
}

/// The form's settings, checked.
struct Form {
    reference: String,
    reference_url: String,
    sigma: f64,
    prompts: usize,
    max_tokens: u32,
    tasks: usize,
    top_k: u32,
    levels: Vec<u32>,
}

fn read_form(root: &web_sys::Element) -> Result<Form, String> {
    let number = |id: &str, what: &str, lo: f64, hi: f64| -> Result<f64, String> {
        let v = input_value(root, id);
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && (lo..=hi).contains(n))
            .ok_or_else(|| format!("{what} {v:?}: a number from {lo} to {hi}"))
    };
    let levels =
        parse_u32_list(&input_value(root, "q-levels")).map_err(|e| format!("Concurrency {e}"))?;
    if levels.is_empty() || levels.contains(&0) {
        return Err("Concurrency: one or more levels of at least 1 (e.g. 1,4)".to_owned());
    }
    Ok(Form {
        reference: input_value(root, "q-ref"),
        reference_url: input_value(root, "q-ref-url"),
        sigma: number("q-sigma", "Simulated change σ", 0.0, 5.0)?,
        prompts: number("q-prompts", "Prompts", 1.0, 200.0)? as usize,
        max_tokens: number("q-tokens", "Tokens per answer", 1.0, 512.0)? as u32,
        tasks: number("q-tasks", "Tasks", 0.0, 500.0)? as usize,
        top_k: number("q-top", "Top log-probabilities", 0.0, 20.0)? as u32,
        levels,
    })
}

/// Run the checks the form asks for, saying progress, showing the report.
async fn start(root: &web_sys::Element, kept: &Rc<RefCell<Kept>>, endpoint: &Endpoint) {
    set_text(root, "q-error", "");
    set_text(root, "q-json", "");
    if let Ok(Some(r)) = root.query_selector("#q-result") {
        r.set_inner_html("");
    }
    *kept.borrow_mut() = Kept::default();
    for id in ["q-download", "q-download-golden"] {
        if let Ok(Some(b)) = root.query_selector(&format!("#{id}")) {
            let _ = b.toggle_attribute_with_force("hidden", true);
        }
    }
    let button = root.query_selector("#q-run").ok().flatten();
    if let Some(b) = &button {
        let _ = b.toggle_attribute_with_force("disabled", true);
    }
    set_run_state("running");
    RUNNING.with(|r| r.set(true));
    let status = {
        let root = root.clone();
        Rc::new(move |line: &str| {
            set_text(&root, "q-status", line.trim_start_matches("quality: "));
        }) as Say
    };
    let outcome = measure(root, endpoint, status).await;
    RUNNING.with(|r| r.set(false));
    if let Some(b) = &button {
        let _ = b.toggle_attribute_with_force("disabled", false);
    }
    match outcome {
        Ok((report, golden)) => {
            let json = serde_json::to_string_pretty(&report).unwrap_or_default();
            if let Ok(Some(r)) = root.query_selector("#q-result") {
                r.set_inner_html(&tokenscope_render::quality::html(&report));
            }
            set_text(root, "q-status", "Done.");
            set_text(root, "q-json", &json);
            if let Ok(Some(el)) = root.query_selector("#q-json") {
                let _ = el.toggle_attribute_with_force("hidden", true);
            }
            let has_golden = golden.is_some();
            *kept.borrow_mut() = Kept {
                report: Some(json),
                golden,
            };
            for (id, shown) in [("q-download", true), ("q-download-golden", has_golden)] {
                if let Ok(Some(b)) = root.query_selector(&format!("#{id}")) {
                    let _ = b.toggle_attribute_with_force("hidden", !shown);
                }
            }
            set_run_state("done");
        }
        Err(e) => {
            set_text(root, "q-status", "");
            set_text(root, "q-error", &e);
            set_run_state("failed");
        }
    }
}

/// The plan the form asks for (`tokenscope quality`'s defaults for the
/// rest: seed 0, 256 tokens for a task, 7 chunks of the built-in text). The
/// Benchmark view's model is asked of the reference only when the reference
/// is the same endpoint; another endpoint is asked for the first it lists.
fn plan_of(form: &Form, endpoint: &Endpoint) -> Plan {
    let seed = 0;
    let same_endpoint = form.reference != "url";
    Plan {
        prompts: probe_prompts(seed, form.prompts),
        max_tokens: form.max_tokens,
        top_k: form.top_k,
        tasks: builtin(seed, form.tasks),
        task_max_tokens: 256,
        chunks: teacher::chunks(teacher::TEXT, teacher::CHUNK_WORDS, 7),
        seed,
        model: endpoint.model.clone().filter(|_| same_endpoint),
        cand_model: endpoint.model.clone(),
        batch_invariant: false,
        token_ids: false,
    }
}

/// The report, and the reference as a golden file's JSON where it was measured.
async fn measure(
    root: &web_sys::Element,
    endpoint: &Endpoint,
    say: Say,
) -> Result<(QualityReport, Option<String>), String> {
    let form = read_form(root)?;
    let mut plan = plan_of(&form, endpoint);
    let golden = match form.reference.as_str() {
        "golden" => Some(read_golden(root).await?),
        _ => None,
    };
    match &endpoint.url {
        None => {
            // The simulator: the toy model as the reference, the same model
            // moved by σ as the candidate (σ 0: the same model).
            let serve = LmServe {
                lm: ToyLm::new(endpoint.sim_seed, 36),
                logprobs: true,
                tasks_right: 1.0,
                seed: endpoint.sim_seed,
                tokenizer_seed: 0,
                batch_noise: 0.0,
                token_ids: true,
                echo_logprobs: true,
                native_generate: true,
            };
            let sim = |lm: ToyLm| Sim {
                serve: LmServe { lm, ..serve },
                model: endpoint
                    .model
                    .clone()
                    .unwrap_or_else(|| "simulated".to_owned()),
                say: say.clone(),
            };
            let candidate = Server::new(
                "http://simulator/v1",
                sim(serve.lm.perturbed(form.sigma, endpoint.sim_seed ^ 0x5157)),
            )?;
            match form.reference.as_str() {
                "url" => {
                    let reference = fetch_server(&form.reference_url, endpoint, &say)?;
                    both(&mut plan, golden, &reference, &candidate, &form.levels).await
                }
                _ => {
                    let reference = Server::new("http://simulator/v1", sim(serve.lm))?;
                    both(&mut plan, golden, &reference, &candidate, &form.levels).await
                }
            }
        }
        Some(url) => {
            let candidate = fetch_server(url, endpoint, &say)?;
            match form.reference.as_str() {
                "url" => {
                    let reference = fetch_server(&form.reference_url, endpoint, &say)?;
                    both(&mut plan, golden, &reference, &candidate, &form.levels).await
                }
                _ => both(&mut plan, golden, &candidate, &candidate, &form.levels).await,
            }
        }
    }
}

/// A server over `fetch`: the Benchmark view's headers go only to its own
/// origin (a key is never sent to another server).
fn fetch_server(url: &str, endpoint: &Endpoint, say: &Say) -> Result<Server<Fetch>, String> {
    let url = url.trim();
    if url.is_empty() {
        return Err("Reference base URL: give the reference's URL".to_owned());
    }
    let origin = |u: &str| parse_base_url(u).map(|b| b.origin());
    let same = match &endpoint.url {
        Some(own) => origin(own)? == origin(url)?,
        None => false,
    };
    Server::new(
        url,
        Fetch {
            headers: if same {
                endpoint.headers.clone()
            } else {
                Vec::new()
            },
            shown: redact_url(url),
            say: say.clone(),
        },
    )
}

/// The reference (a golden file, or `reference` measured), then the candidate.
async fn both<R: Transport, C: Transport>(
    plan: &mut Plan,
    golden: Option<(Golden, String)>,
    reference: &Server<R>,
    candidate: &Server<C>,
    levels: &[u32],
) -> Result<(QualityReport, Option<String>), String> {
    let (measured, golden_json) = match golden {
        Some((g, name)) => (Reference::from_golden(g, &name, plan, true), None),
        None => {
            // Tokens by id where both name them (the reference is then kept
            // as a golden file only when asked by text).
            plan.token_ids = run::token_ids_on_both(plan, reference, candidate).await;
            let r = run::reference(plan, reference)
                .await
                .map_err(|e| e.to_string())?;
            let g = r
                .golden(plan)
                .ok()
                .and_then(|g| serde_json::to_string(&g).ok());
            (r, g)
        }
    };
    let report = run::candidate(plan, measured, candidate, levels)
        .await
        .map_err(|e| e.to_string())?;
    Ok((report, golden_json))
}

/// The golden file chosen in the form, read and checked, with its name.
async fn read_golden(root: &web_sys::Element) -> Result<(Golden, String), String> {
    let input: web_sys::HtmlInputElement = root
        .query_selector("#q-golden")
        .ok()
        .flatten()
        .and_then(|e| e.dyn_into().ok())
        .ok_or("no golden file input")?;
    let file = input
        .files()
        .and_then(|f| f.get(0))
        .ok_or("Golden file: choose one (tokenscope quality --save-golden FILE makes it)")?;
    let name = file.name();
    let text = JsFuture::from(file.text())
        .await
        .map_err(|_| format!("Golden file {name}: cannot read it"))?
        .as_string()
        .unwrap_or_default();
    let g = Golden::parse(&text).map_err(|e| format!("Golden file {name}: {e}"))?;
    Ok((g, name))
}

/// Offer `text` as a file download (a `blob:` URL: nothing leaves the page).
fn download(filename: &str, text: &str) -> Result<(), JsValue> {
    let doc = web_sys::window()
        .and_then(|w| w.document())
        .ok_or("no document")?;
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type("application/json");
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)?;
    let a: web_sys::HtmlAnchorElement = doc.create_element("a")?.unchecked_into();
    a.set_href(&url);
    a.set_download(filename);
    a.click();
    web_sys::Url::revoke_object_url(&url)
}
