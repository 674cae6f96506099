//! The page's state and the actions that change it (a yew `Reducible`, as in yew's
//! todomvc). Components render it; services dispatch actions.

use std::rc::Rc;

use tokenscope_core::report::{ClientReport, LevelReport, ReportWarning};
use tokenscope_render::page::gpu::KernelsView;
pub use tokenscope_render::page::view::{RunState, Shared};
use yew::Reducible;

use crate::services::fetch::{Auth, auth_of};
use crate::services::lazy_run::LevelRecord;
use crate::services::runner::{Progress, RunEvent};
use crate::settings::Settings;

/// A kernels report: what the page shows of it (read by the GPU or the report
/// module) and its JSON (the report module and the exports take the text as it
/// is).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelsFile {
    /// What the page shows of it.
    pub view: Shared<KernelsView>,
    /// Its JSON.
    pub json: Shared<String>,
}

/// A finished run (or a loaded report) and what the views need of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The report, without its levels (they are in `levels`).
    pub report: Shared<ClientReport>,
    /// The report's levels, taken out of it: the table and the charts share them,
    /// and the page never copies a level.
    pub levels: Shared<Vec<LevelReport>>,
    /// Its JSON (`#report-json`).
    pub report_json: Shared<String>,
    /// The measured requests (empty for a loaded report).
    pub records: Shared<Vec<LevelRecord>>,
    /// Their JSON (`#records-json`).
    pub records_json: Shared<String>,
    /// The raw file, `tokenscope.raw/1.2` JSONL (runs only).
    pub raw_jsonl: Option<Shared<String>>,
    /// Loaded from a file rather than run here.
    pub loaded: bool,
}

/// One finished tier of a run with input or output tiers: its report.
#[derive(Debug, Clone, PartialEq)]
pub struct TierResult {
    /// `in256-out128`.
    pub label: String,
    /// The tier's report.
    pub report: Shared<ClientReport>,
    /// Its JSON (an export each).
    pub report_json: Shared<String>,
}

/// Everything the page shows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct State {
    /// The settings in the form.
    pub settings: Settings,
    /// The API key (memory only; in `sessionStorage` only if `remember_key`).
    pub api_key: String,
    /// "Remember in this tab".
    pub remember_key: bool,
    /// Extra headers, one `Name: value` per line (memory only, like the key).
    pub headers: String,
    /// The header that carries the key (empty: `Authorization: Bearer`).
    pub key_header: String,
    /// Models listed by the endpoint.
    pub models: Vec<String>,
    /// Why listing the models failed.
    pub models_error: Option<String>,
    /// Notes about the URL's settings (ignored parameters).
    pub notes: Vec<String>,
    /// Run state.
    pub run: RunState,
    /// Whether the current (or last) run is against the built-in simulator.
    pub simulated: bool,
    /// The model of the current run.
    pub model: Option<String>,
    /// Progress of the current run.
    pub progress: Option<Progress>,
    /// Protocol seen.
    pub protocol: Option<String>,
    /// Warnings of the current run, as they come.
    pub warnings: Vec<ReportWarning>,
    /// Levels so far (live, for the table).
    pub live_levels: Shared<Vec<LevelReport>>,
    /// Finished levels (for the charts: redrawn only when a level ends).
    pub chart_levels: Shared<Vec<LevelReport>>,
    /// The finished run or loaded report.
    pub finished: Option<Finished>,
    /// Why the run failed (`#run-error`).
    pub error: Option<String>,
    /// Which level the distribution views show.
    pub view_level: usize,
    /// The run's finished tiers, when it has several (the last one is also
    /// `finished`).
    pub tiers: Vec<TierResult>,
}

/// What changes the state.
#[derive(Debug, Clone)]
pub enum Action {
    /// The form changed.
    Settings(Box<Settings>),
    /// The key field changed.
    ApiKey(String),
    /// "Remember in this tab" changed.
    RememberKey(bool),
    /// The extra headers' field changed.
    Headers(String),
    /// The key's header field changed.
    KeyHeader(String),
    /// The endpoint's model list (or why it could not be read).
    Models(Result<Vec<String>, String>),
    /// A run was asked for.
    Start,
    /// The runner reported.
    Event(RunEvent),
    /// A tier of a run with several ended: the next one starts afresh. The last
    /// one's output comes as `Finished` too.
    TierDone(TierResult),
    /// The run ended.
    Finished(Box<Finished>),
    /// The run could not be made.
    Failed(String),
    /// A saved report was opened (or could not be read).
    /// A report file opened: the report and the file's text (kept as it was, so
    /// the analysis and "Export JSON" have every section, the server view
    /// included, which this module does not read).
    Loaded(Result<(Box<ClientReport>, Shared<String>), String>),
    /// Show another level in the distribution views.
    ViewLevel(usize),
}

impl State {
    /// The key and extra headers every request carries, or why the fields are
    /// wrong (naming the line).
    pub fn auth(&self) -> Result<Auth, String> {
        auth_of(&self.api_key, &self.key_header, &self.headers)
    }
}

impl Reducible for State {
    type Action = Action;

    fn reduce(self: Rc<Self>, action: Action) -> Rc<Self> {
        let mut s = (*self).clone();
        match action {
            Action::Settings(settings) => s.settings = *settings,
            Action::ApiKey(key) => s.api_key = key,
            Action::RememberKey(r) => s.remember_key = r,
            Action::Headers(h) => s.headers = h,
            Action::KeyHeader(h) => s.key_header = h,
            Action::Models(Ok(models)) => {
                if s.settings.model.is_empty()
                    && let Some(first) = models.first()
                {
                    s.settings.model = first.clone();
                }
                s.models = models;
                s.models_error = None;
            }
            Action::Models(Err(e)) => {
                s.models.clear();
                s.models_error = Some(e);
            }
            Action::Start => {
                s.run = RunState::Running;
                s.simulated = s.settings.is_simulated();
                s.model = None;
                s.progress = None;
                s.protocol = None;
                s.warnings.clear();
                s.live_levels = Shared::new(Vec::new());
                s.chart_levels = Shared::new(Vec::new());
                s.finished = None;
                s.error = None;
                s.view_level = 0;
                s.tiers.clear();
            }
            Action::Event(e) => match e {
                RunEvent::Started {
                    simulated, model, ..
                } => {
                    s.simulated = simulated;
                    s.model = Some(model);
                }
                RunEvent::Progress(p) => s.progress = Some(p),
                RunEvent::Protocol(p) => s.protocol = Some(p),
                RunEvent::Warning(w) => {
                    if !s.warnings.contains(&w) {
                        s.warnings.push(w);
                    }
                }
                RunEvent::Levels { levels, settled } => {
                    let levels = Shared::new(levels);
                    if settled {
                        s.view_level = levels.len().saturating_sub(1);
                        s.chart_levels = levels.clone();
                    }
                    s.live_levels = levels;
                }
            },
            Action::TierDone(tier) => {
                s.live_levels = Shared::new(Vec::new());
                s.chart_levels = Shared::new(Vec::new());
                s.tiers.push(tier);
            }
            Action::Finished(finished) => {
                s.run = RunState::Done;
                s.warnings = finished.report.warnings.clone();
                s.view_level = finished.levels.len().saturating_sub(1);
                s.live_levels = finished.levels.clone();
                s.chart_levels = finished.levels.clone();
                s.finished = Some(*finished);
            }
            Action::Failed(e) => {
                s.run = RunState::Failed;
                s.error = Some(e);
            }
            Action::Loaded(Ok((report, text))) => {
                let mut report = *report;
                let levels = Shared::new(std::mem::take(&mut report.levels));
                s.run = RunState::Idle;
                s.error = None;
                s.simulated = report.environment.simulated;
                s.model = Some(report.config.model.clone());
                s.protocol = report.environment.protocol.clone();
                s.progress = None;
                s.warnings = report.warnings.clone();
                s.view_level = levels.len().saturating_sub(1);
                s.live_levels = levels.clone();
                s.chart_levels = levels.clone();
                s.finished = Some(Finished {
                    report_json: text,
                    report: Shared::new(report),
                    levels,
                    records: Shared::new(Vec::new()),
                    records_json: Shared::new("[]".into()),
                    raw_jsonl: None,
                    loaded: true,
                });
            }
            Action::Loaded(Err(e)) => s.error = Some(e),
            Action::ViewLevel(i) => s.view_level = i,
        }
        Rc::new(s)
    }
}
