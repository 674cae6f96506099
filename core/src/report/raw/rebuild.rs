//! A client report rebuilt from its raw file alone (`tokenscope report --raw`,
//! the page's report module): the entries replayed through the run's own
//! recorder, the scrapes through its own scrape log.

use super::{RawEntry, RawEvent, RawFile, load_of};
use crate::report::assemble::RunRecorder;
use crate::report::server::ScrapeLog;
use crate::report::{ClientReport, Environment, ReportWarning, WarningKind};

/// Rebuild the client report from the raw file alone: its entries replayed, in
/// order, through the same [`RunRecorder`] the run used, so every level, the
/// sweep and the warnings come out as the run computed them. The environment
/// comes from the `end` line (a killed run has none: only the tool version is
/// known), marked `rebuilt_from_raw`.
pub fn rebuild_report(raw: &RawFile) -> ClientReport {
    let mut rec = RunRecorder::new(raw.header.source, raw.header.config.clone());
    let mut scrapes = ScrapeLog::default();
    let mut end = None;
    for entry in &raw.entries {
        match entry {
            RawEntry::Request(line) => rec.record(line),
            RawEntry::Event(RawEvent::LevelStart {
                level,
                concurrency,
                rate_per_s,
                t_ms,
            }) => {
                rec.start_level(*level, load_of(*concurrency, *rate_per_s), *t_ms);
                scrapes.level_started(*level, *t_ms);
            }
            RawEntry::Event(RawEvent::Warning(w)) => {
                rec.warn(w.clone());
            }
            RawEntry::Event(RawEvent::LevelEnd { .. }) => {
                rec.end_level();
                scrapes.level_ended();
            }
            RawEntry::Scrape(s) => {
                scrapes.scrape(s.as_ref().clone());
            }
            RawEntry::Event(RawEvent::End {
                interrupted,
                environment,
            }) => end = Some((*interrupted, environment.as_ref().clone())),
        }
    }
    if raw.truncated_tail {
        rec.warn(ReportWarning::new(
            WarningKind::RawTruncated,
            "the raw file's last line was cut off (the run was killed); it was skipped",
        ));
    }
    let legacy = raw.header.schema.split('/').nth(1) == Some("1");
    let (interrupted, mut environment) = match end {
        Some((interrupted, environment)) => (interrupted || raw.truncated_tail, environment),
        None => {
            // No end line: the run was killed (files before 1.1 never had one; for
            // them, a level missing is the sign).
            let interrupted = !legacy
                || raw.truncated_tail
                || rec.levels_started() < raw.header.config.levels.len();
            let environment = Environment {
                tool_version: raw.header.tool_version.clone(),
                ..Environment::default()
            };
            (interrupted, environment)
        }
    };
    environment.rebuilt_from_raw = true;
    let mut report = rec.finish(environment, interrupted);
    scrapes.attach(&mut report);
    report
}
