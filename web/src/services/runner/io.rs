//! What a run takes and what it gives back: the run to make ([`RunInput`]), what
//! the page is told as it goes ([`RunEvent`], [`Progress`]) and what it produces
//! ([`RunOutput`]).

use std::cell::RefCell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use tokenscope_core::report::{ClientReport, LevelReport, ReportWarning};

use crate::services::clock::CancelToken;
use crate::services::fetch::Auth;
use crate::services::paint::Painter;
use crate::services::records::{PageRaw, PageRecord};
use crate::services::sim::SimLog;
use crate::services::tokens::PageTokens;
use crate::settings::RunPlan;

/// Where the run is.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Progress {
    /// 0-based level index.
    pub level: usize,
    /// Levels in the run.
    pub levels: usize,
    /// `c=4 warm-up`, `c=4 round 2/3`.
    pub phase: String,
    /// Requests finished in this phase.
    pub finished: u64,
    /// Requests planned in this phase.
    pub planned: u64,
    /// Requests finished in the whole run (warm-up included).
    pub total_finished: u64,
}

/// What the runner tells the page as it goes (from the run module as JSON:
/// `services::lazy_run`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RunEvent {
    /// The run began.
    Started {
        /// Against the built-in simulator.
        simulated: bool,
        /// The model used.
        model: String,
        /// The run's id (prefix of every request id).
        run_tag: String,
    },
    /// Progress.
    Progress(Progress),
    /// The protocol seen (`http/1.1`, `h2`).
    Protocol(String),
    /// A warning, as soon as it is known.
    Warning(ReportWarning),
    /// The levels so far: finished ones and a live snapshot of the current one.
    Levels {
        /// The levels (the page reads what it shows of them: `shown`).
        #[serde(deserialize_with = "tokenscope_core::model::shown::levels")]
        levels: Vec<LevelReport>,
        /// Every level in it is finished (charts are redrawn only then: drawing
        /// during a level would load the page it measures).
        settled: bool,
    },
}

/// What a run produces.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// The report.
    pub report: ClientReport,
    /// Every request, warm-up included.
    pub records: Vec<PageRecord>,
    /// The raw file (for a `tokenscope.raw/1.2` export).
    pub raw: PageRaw,
    /// The simulator's own log (simulated runs).
    pub sim_log: Option<Vec<SimLog>>,
    /// The report's JSON when it carries what this module does not read (the
    /// server view of a run that scraped `/metrics`, joined by the report module);
    /// `None`: `report.to_json()` is the whole report.
    pub report_json: Option<String>,
}

/// A run to make.
#[derive(Clone)]
pub struct RunInput {
    /// The validated plan: the only configuration the run reads.
    pub plan: RunPlan,
    /// The API key and extra headers (memory only).
    pub auth: Auth,
    /// The stream view and paint probe.
    pub painter: Painter,
    /// The stop signal.
    pub cancel: CancelToken,
    /// The network worker's script (`net-worker.js`), when the page has it: real
    /// endpoints are then streamed off the main thread.
    pub worker_url: Option<String>,
    /// How the prompts are sized, once found: the tiers of one run share it
    /// (the server's tokenizer is probed once).
    pub tokens: Rc<RefCell<Option<PageTokens>>>,
}
