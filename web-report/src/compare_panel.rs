//! The page's Compare panel, rendered by this module (mounted into a host the
//! page keeps, as the GPU module mounts its view) so that none of it weighs on
//! the first load: a file input for reports and their raw files, "this run as
//! the base" when the page has a run, and the comparison
//! ([`tokenscope_render::page::compare`], `tokenscope compare`'s code) with its
//! `#compare-json` and export link, or `#compare-error` naming the file.

use std::cell::RefCell;
use std::rc::Rc;

use tokenscope_render::page::compare::{CompareRequest, NamedText};
use tokenscope_stats::fmt::escape_html;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Element, Event, HtmlInputElement};

/// What the panel compares.
#[derive(Default)]
struct Panel {
    /// The files opened, by name.
    files: Vec<NamedText>,
    /// The page's run: its report and raw file.
    this_run: Option<(String, Option<String>)>,
    /// The page's run is the base.
    with_run: bool,
}

impl Panel {
    /// The comparison as the view shows it (the fragment, or the error).
    fn shown(&self) -> Option<String> {
        let mut files = self.files.clone();
        let mut base = None;
        if let (true, Some((report, raw))) = (self.with_run, &self.this_run) {
            files.push(NamedText {
                name: "this-run.json".into(),
                text: report.clone(),
            });
            if let Some(raw) = raw {
                files.push(NamedText {
                    name: "this-run.jsonl".into(),
                    text: raw.clone(),
                });
            }
            base = Some("this-run.json".to_owned());
        }
        if files.is_empty() {
            return None;
        }
        let req = CompareRequest {
            files,
            base,
            min_change: None,
        };
        Some(match req.render() {
            Ok(r) => r.body,
            Err(e) => format!(
                "<p id=\"compare-error\" class=\"error\">{}</p>",
                escape_html(&e)
            ),
        })
    }
}

fn by_id<T: JsCast>(host: &Element, id: &str) -> Option<T> {
    host.query_selector(&format!("#{id}"))
        .ok()
        .flatten()
        .and_then(|e| e.dyn_into::<T>().ok())
}

fn render(host: &Element, panel: &Panel) {
    if let Some(view) = by_id::<Element>(host, "compare-view") {
        view.set_inner_html(&panel.shown().unwrap_or_default());
    }
}

/// Mount the panel into `host` (replacing what it held): `this_run` is the
/// page's finished run's report JSON and `this_raw` its raw file, when there is
/// a run.
pub fn mount(
    host: Element,
    this_run: Option<String>,
    this_raw: Option<String>,
) -> Result<(), JsValue> {
    let with_run = if this_run.is_some() {
        "<label><input id=\"compare-this-run\" type=\"checkbox\"> this run as the base</label>"
    } else {
        ""
    };
    host.set_inner_html(&format!(
        "<p class=\"hint\">Open two reports or more (the first by name is the base), each with its raw file for intervals, or one beside this run.</p><label class=\"file\">Reports and raw files (.json, .jsonl)… <input id=\"compare-files\" type=\"file\" multiple accept=\".json,.jsonl\"></label> {with_run}<div id=\"compare-view\" class=\"combined\"></div>"
    ));
    let panel = Rc::new(RefCell::new(Panel {
        this_run: this_run.map(|r| (r, this_raw)),
        ..Panel::default()
    }));
    if let Some(input) = by_id::<HtmlInputElement>(&host, "compare-files") {
        let (panel, host2, input2) = (panel.clone(), host.clone(), input.clone());
        let on_files = Closure::<dyn FnMut(Event)>::new(move |_: Event| {
            let Some(list) = input2.files() else { return };
            let picked: Vec<web_sys::File> =
                (0..list.length()).filter_map(|i| list.get(i)).collect();
            let (panel, host) = (panel.clone(), host2.clone());
            wasm_bindgen_futures::spawn_local(async move {
                let mut files = Vec::new();
                for f in picked {
                    let text = JsFuture::from(f.text())
                        .await
                        .ok()
                        .and_then(|t| t.as_string());
                    if let Some(text) = text {
                        files.push(NamedText {
                            name: f.name(),
                            text,
                        });
                    }
                }
                panel.borrow_mut().files = files;
                render(&host, &panel.borrow());
            });
        });
        input.add_event_listener_with_callback("change", on_files.as_ref().unchecked_ref())?;
        on_files.forget();
    }
    if let Some(check) = by_id::<HtmlInputElement>(&host, "compare-this-run") {
        let (panel, host2, check2) = (panel.clone(), host.clone(), check.clone());
        let on_check = Closure::<dyn FnMut(Event)>::new(move |_: Event| {
            panel.borrow_mut().with_run = check2.checked();
            render(&host2, &panel.borrow());
        });
        check.add_event_listener_with_callback("change", on_check.as_ref().unchecked_ref())?;
        on_check.forget();
    }
    Ok(())
}
