//! The server view joined to a client report. A run's scrapes are kept apart
//! from its requests ([`ScrapeLog`]: fed the same level starts and ends as the
//! [`RunRecorder`](super::assemble::RunRecorder)), and once the report is
//! assembled each level gets the view of the scrapes taken within it, the report
//! the run's timeline, and the warnings they call for (failed scrapes, token
//! counts that disagree). The native engine and the raw rebuild both go through
//! here; the page, which does not scrape, does not carry this code.

use super::raw::RawEntry;
use crate::analyze::server::reading::Value;
use crate::analyze::server::scrape::{ScrapeRecord, ScrapeTarget};
use crate::analyze::server::view::{ServerLevel, ServerRun, TokenCheck};
use crate::report::{ClientReport, ReportWarning, WarningKind};

/// A run's scrapes, each attributed to the level open when it was recorded.
#[derive(Debug, Clone, Default)]
pub struct ScrapeLog {
    /// The open level: its index, start, and the scrapes read since it started.
    open: Option<(usize, f64, Vec<ScrapeRecord>)>,
    /// Closed levels' scrapes, by level index, in order.
    levels: Vec<(usize, Vec<ScrapeRecord>)>,
    /// Every scrape of the run, histograms dropped (the timeline needs the rest).
    run: Vec<ScrapeRecord>,
}

impl ScrapeLog {
    /// Level `level`'s measured rounds began at `t_ms`.
    pub fn level_started(&mut self, level: usize, t_ms: f64) {
        self.level_ended();
        self.open = Some((level, t_ms, Vec::new()));
    }

    /// The open level ended.
    pub fn level_ended(&mut self) {
        if let Some((level, _, scrapes)) = self.open.take() {
            self.levels.push((level, scrapes));
        }
    }

    /// A scrape: it belongs to the open level if it was read after that level
    /// started (the engine scrapes right after a level starts and right before
    /// it ends). Returns the raw line to write.
    pub fn scrape(&mut self, s: ScrapeRecord) -> RawEntry {
        if let Some((_, t0, scrapes)) = self.open.as_mut()
            && s.t_ms >= *t0
        {
            scrapes.push(s.clone());
        }
        let mut kept = s.clone();
        kept.values.retain(|_, v| matches!(v, Value::Scalar(_)));
        self.run.push(kept);
        RawEntry::Scrape(Box::new(s))
    }

    /// Nothing was scraped.
    pub fn is_empty(&self) -> bool {
        self.run.is_empty()
    }

    /// Join the scrapes to `report` (levels matched by load, in order): each
    /// level's server view, the run's, and their warnings.
    pub fn attach(mut self, report: &mut ClientReport) {
        self.level_ended();
        if self.run.is_empty() {
            return;
        }
        let mut next = 0;
        for (index, scrapes) in self.levels {
            if scrapes.is_empty() {
                continue;
            }
            let load = report.config.level_load(index);
            let Some(pos) = report.levels[next..]
                .iter()
                .position(|l| Some(l.load()) == load)
            else {
                continue;
            };
            let level = &mut report.levels[next + pos];
            level.server = Some(ServerLevel::of(&scrapes, level));
            next += pos + 1;
        }
        // Energy per token needs the GPU's series.
        crate::analyze::cost::cost_levels(&mut report.levels, report.config.price.as_ref());
        let run = ServerRun::of(&self.run);
        let urls = [
            report.config.server_metrics_url.clone(),
            report.config.gpu_metrics_url.clone(),
        ];
        report.warnings.extend(scrape_warnings(&run, &urls));
        // A shard shares the server with the other shards by design: only the
        // merged report's counts can agree with the server's.
        let shard = report.config.shard.is_some();
        for l in &report.levels {
            if let Some(t) = l.server_view().and_then(|s| s.tokens.as_ref())
                && !t.agrees
                && !shard
            {
                report.warnings.push(ReportWarning::new(
                    WarningKind::TokenMismatch,
                    token_mismatch(&l.label(), t),
                ));
            }
        }
        report.server = Some(run);
    }
}

fn token_mismatch(level: &str, t: &TokenCheck) -> String {
    let mut parts = vec![format!(
        "generated {} by the engine's counter, {} in the usage received",
        t.server_generated, t.client_completion
    )];
    if let Some(p) = t.server_prompt {
        parts.push(format!("prompt {p} vs {}", t.client_prompt));
    }
    if t.requests_without_usage > 0 {
        parts.push(format!(
            "{} requests without usage",
            t.requests_without_usage
        ));
    }
    format!(
        "{level}: the server's token counts disagree with the client's ({}): another client used the server during the level, or the two count differently",
        parts.join("; ")
    )
}

/// The `server_metrics` warnings: a target whose scrapes failed, with how many and
/// the first reason.
fn scrape_warnings(run: &ServerRun, urls: &[Option<String>; 2]) -> Vec<ReportWarning> {
    run.targets
        .iter()
        .filter(|t| t.failed > 0)
        .map(|t| {
            let url = match t.target {
                ScrapeTarget::Server => urls[0].as_deref(),
                ScrapeTarget::Gpu => urls[1].as_deref(),
            };
            ReportWarning::new(
                WarningKind::ServerMetrics,
                format!(
                    "the {}'s metrics{}: {} of {} scrapes read nothing (first: {}); the run went on, and the levels' server view holds the scrapes that worked",
                    t.target.label(),
                    url.map(|u| format!(" at {u}")).unwrap_or_default(),
                    t.failed,
                    t.scrapes,
                    t.first_error.as_deref().unwrap_or("unknown")
                ),
            )
        })
        .collect()
}
