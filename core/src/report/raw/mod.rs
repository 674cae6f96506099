//! The raw file (`--raw`, schema `tokenscope.raw/1.2`): everything a run saw, one
//! JSON line at a time, written as it happens, so a crash loses nothing that
//! finished, and enough on its own to rebuild the client report exactly
//! ([`rebuild_report`]).
//!
//! Line 1 is the header ([`RawHeader`]: the tool, who measured, the run's
//! configuration). Then, in the order they happened:
//!
//! - one line per finished request ([`RawLine`], warm-up ones flagged);
//! - `{"event": "level_start", ...}` when a level's measured rounds begin (after its
//!   warm-up): the origin of its long-run snapshot intervals;
//! - `{"event": "level_end", "level": ...}` when they are over;
//! - `{"event": "warning", "kind": ..., "message": ...}` for each warning the run
//!   raised that is not drawn from the levels (pre-flight, event-loop lag, the
//!   page's own checks);
//! - `{"event": "scrape", "target": ..., "t_ms": ..., ...}` for each scrape of
//!   the server's or the GPU exporter's `/metrics`: the series read
//!   ([`ScrapeRecord`]), or why none were;
//! - `{"event": "end", "interrupted": ..., "environment": {...}}` as the last line of
//!   a run that ended (a file without it was cut short by a kill).
//!
//! Files written before 1.1 hold only the header and request lines; they are read
//! as before.

mod rebuild;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::analyze::server::scrape::ScrapeRecord;
use crate::report::{Environment, Load, ReportWarning, RunConfig, Source, check_schema};
use tokenscope_measure::record::RequestRecord;

pub use rebuild::rebuild_report;

/// The raw file's schema, as written.
pub const RAW_SCHEMA: &str = "tokenscope.raw/1.2";

/// The first line of a raw file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawHeader {
    /// [`RAW_SCHEMA`].
    pub schema: String,
    /// Version of the tool that wrote it.
    pub tool_version: String,
    /// Who measured (absent in files from before the field existed: native).
    #[serde(default = "native")]
    pub source: Source,
    /// The run's configuration.
    pub config: RunConfig,
}

fn native() -> Source {
    Source::Native
}

impl RawHeader {
    /// The header this build writes for a run by `source` with `config`.
    pub fn new(source: Source, config: RunConfig) -> Self {
        Self {
            schema: RAW_SCHEMA.into(),
            tool_version: crate::VERSION.into(),
            source,
            config,
        }
    }
}

/// Which part of a level a request belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Warm-up (recorded, never measured).
    Warmup,
    /// A measured round (0-based).
    Round(u32),
}

/// One finished request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawLine {
    /// The `x-request-id` sent.
    pub request_id: String,
    /// Index of the level in the run.
    pub level: usize,
    /// The level's concurrency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// The level's rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// 1-based round; absent for warm-up requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// A warm-up request (not measured).
    pub warmup: bool,
    /// Everything measured.
    #[serde(flatten)]
    pub record: RequestRecord,
}

impl RawLine {
    /// The line of a request finished in `phase` of level `level` at `load`.
    pub fn new(
        request_id: String,
        level: usize,
        load: Load,
        phase: Phase,
        record: RequestRecord,
    ) -> Self {
        let (concurrency, rate_per_s) = load_fields(load);
        Self {
            request_id,
            level,
            concurrency,
            rate_per_s,
            round: match phase {
                Phase::Round(r) => Some(r + 1),
                Phase::Warmup => None,
            },
            warmup: phase == Phase::Warmup,
            record,
        }
    }

    /// The level's load.
    pub fn load(&self) -> Load {
        load_of(self.concurrency, self.rate_per_s)
    }

    /// The phase the request belonged to.
    pub fn phase(&self) -> Phase {
        if self.warmup {
            Phase::Warmup
        } else {
            Phase::Round(self.round.unwrap_or(1).saturating_sub(1))
        }
    }
}

fn load_fields(load: Load) -> (Option<u32>, Option<f64>) {
    match load {
        Load::Concurrency(c) => (Some(c), None),
        Load::Rate(r) => (None, Some(r)),
    }
}

fn load_of(concurrency: Option<u32>, rate_per_s: Option<f64>) -> Load {
    match (concurrency, rate_per_s) {
        (Some(c), _) => Load::Concurrency(c),
        (None, Some(r)) => Load::Rate(r),
        (None, None) => Load::Concurrency(1),
    }
}

/// A line that is not a request: what happened to the run around its requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RawEvent {
    /// A level's measured rounds begin (its warm-up is over).
    LevelStart {
        /// Index of the level in the run.
        level: usize,
        /// The level's concurrency.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        concurrency: Option<u32>,
        /// The level's rate.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rate_per_s: Option<f64>,
        /// When, ms on the run's clock.
        t_ms: f64,
    },
    /// A level's measured rounds are over (scrapes after this belong to no level).
    LevelEnd {
        /// Index of the level in the run.
        level: usize,
    },
    /// A warning the run raised (not one drawn from the levels).
    Warning(ReportWarning),
    /// The run ended: the last line.
    End {
        /// It was stopped early (Ctrl-C, Stop).
        interrupted: bool,
        /// Where and with what it ran.
        environment: Box<Environment>,
    },
}

impl RawEvent {
    /// The `end` event of a run that ended with `environment`.
    pub fn end(environment: &Environment, interrupted: bool) -> Self {
        RawEvent::End {
            interrupted,
            environment: Box::new(environment.clone()),
        }
    }

    /// The `level_start` event of level `level` at `load`, at `t_ms`.
    pub fn level_start(level: usize, load: Load, t_ms: f64) -> Self {
        let (concurrency, rate_per_s) = load_fields(load);
        RawEvent::LevelStart {
            level,
            concurrency,
            rate_per_s,
            t_ms,
        }
    }
}

/// One line after the header.
#[derive(Debug, Clone, PartialEq)]
pub enum RawEntry {
    /// A finished request.
    Request(Box<RawLine>),
    /// Something that happened to the run.
    Event(RawEvent),
    /// A scrape of the server's or the GPU exporter's `/metrics` (an `event` line,
    /// `"event": "scrape"`; apart from [`RawEvent`] so that writers that never
    /// scrape, the page, do not carry its code).
    Scrape(Box<ScrapeRecord>),
}

/// A scrape line: the record with its `event` tag.
#[derive(Serialize)]
struct ScrapeLine<'a> {
    event: &'static str,
    #[serde(flatten)]
    scrape: &'a ScrapeRecord,
}

impl Serialize for RawEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RawEntry::Request(l) => l.serialize(s),
            RawEntry::Event(e) => e.serialize(s),
            RawEntry::Scrape(r) => ScrapeLine {
                event: "scrape",
                scrape: r,
            }
            .serialize(s),
        }
    }
}

/// A raw file that cannot be read.
#[derive(Debug, Error)]
pub enum RawError {
    /// No header line.
    #[error("the raw file is empty")]
    Empty,
    /// The header is not a raw header.
    #[error("line 1 is not a tokenscope raw header: {0}")]
    Header(String),
    /// A wrong schema.
    #[error(transparent)]
    Schema(#[from] crate::report::ReportError),
    /// A complete line that does not parse.
    #[error("line {line}: {reason}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        reason: String,
    },
}

/// What was read from a raw file.
#[derive(Debug, Clone)]
pub struct RawFile {
    /// The header.
    pub header: RawHeader,
    /// The lines after it, in order.
    pub entries: Vec<RawEntry>,
    /// The last line was cut off (the writer was killed mid-line) and was skipped.
    pub truncated_tail: bool,
}

impl RawFile {
    /// The request lines.
    pub fn requests(&self) -> impl Iterator<Item = &RawLine> {
        self.entries.iter().filter_map(|e| match e {
            RawEntry::Request(l) => Some(l.as_ref()),
            RawEntry::Event(_) | RawEntry::Scrape(_) => None,
        })
    }
}

fn parse_entry(line: &str) -> Result<RawEntry, serde_json::Error> {
    let mut value: serde_json::Value = serde_json::from_str(line)?;
    if value.get("event").and_then(|e| e.as_str()) == Some("scrape") {
        if let Some(o) = value.as_object_mut() {
            o.remove("event");
        }
        Ok(RawEntry::Scrape(Box::new(serde_json::from_value(value)?)))
    } else if value.get("event").is_some() {
        Ok(RawEntry::Event(serde_json::from_value(value)?))
    } else {
        Ok(RawEntry::Request(Box::new(serde_json::from_value(value)?)))
    }
}

/// Parse a raw file's text. A last line without its newline (a write cut short by
/// a kill) is skipped and reported; any other bad line is an error naming it.
pub fn parse(text: &str) -> Result<RawFile, RawError> {
    let mut lines = text.split_inclusive('\n').enumerate();
    let (_, first) = lines.next().ok_or(RawError::Empty)?;
    let header: RawHeader =
        serde_json::from_str(first.trim()).map_err(|e| RawError::Header(e.to_string()))?;
    check_schema(&header.schema, RAW_SCHEMA)?;
    let mut entries = Vec::new();
    let mut truncated_tail = false;
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        match parse_entry(line.trim()) {
            Ok(e) => entries.push(e),
            Err(_) if !line.ends_with('\n') => truncated_tail = true,
            Err(e) => {
                return Err(RawError::Line {
                    line: i + 1,
                    reason: e.to_string(),
                });
            }
        }
    }
    Ok(RawFile {
        header,
        entries,
        truncated_tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::WarningKind;
    use crate::testing;

    fn line(level: usize, c: u32, warmup: bool, t0: f64) -> String {
        let phase = if warmup {
            Phase::Warmup
        } else {
            Phase::Round(0)
        };
        let l = RawLine::new(
            format!("r{t0}"),
            level,
            Load::Concurrency(c),
            phase,
            testing::record(t0, 10.0, 10.0, 2),
        );
        serde_json::to_string(&l).unwrap()
    }

    fn file(schema: &str, lines: &[String]) -> String {
        let mut header = RawHeader::new(Source::Native, testing::run_config(&[1, 2]));
        header.schema = schema.into();
        let mut s = serde_json::to_string(&header).unwrap() + "\n";
        for l in lines {
            s.push_str(l);
            s.push('\n');
        }
        s
    }

    fn event(e: RawEvent) -> String {
        serde_json::to_string(&e).unwrap()
    }

    #[test]
    fn rebuilds_levels_without_warmup() {
        let text = file(
            RAW_SCHEMA,
            &[
                line(0, 1, true, 0.0),
                event(RawEvent::level_start(0, Load::Concurrency(1), 90.0)),
                line(0, 1, false, 100.0),
                line(0, 1, false, 200.0),
                event(RawEvent::level_start(1, Load::Concurrency(2), 290.0)),
                line(1, 2, false, 300.0),
                event(RawEvent::end(&Environment::default(), false)),
            ],
        );
        let raw = parse(&text).unwrap();
        let r = rebuild_report(&raw);
        assert_eq!(r.levels.len(), 2);
        assert_eq!(r.levels[0].sent, 2, "warm-up excluded");
        assert_eq!(r.levels[0].metrics.ttft_ms.p50, Some(10.0));
        assert_eq!(r.levels[1].concurrency, Some(2));
        assert!(!r.interrupted);
        assert!(r.environment.rebuilt_from_raw);
    }

    // The plan's levels come from the header's config.
    #[test]
    fn a_file_without_an_end_line_was_interrupted_unless_it_is_from_before_1_1() {
        let lines = [line(0, 1, false, 0.0), line(1, 2, false, 100.0)];
        let r = rebuild_report(&parse(&file(RAW_SCHEMA, &lines)).unwrap());
        assert!(r.interrupted, "a 1.1 file ends with an end line");
        let r = rebuild_report(&parse(&file("tokenscope.raw/1", &lines)).unwrap());
        assert!(!r.interrupted, "both levels are there");
        let r = rebuild_report(&parse(&file("tokenscope.raw/1", &lines[..1])).unwrap());
        assert!(r.interrupted, "a level is missing");
    }

    #[test]
    fn a_cut_off_last_line_is_skipped_and_reported() {
        let mut text = file(RAW_SCHEMA, &[line(0, 1, false, 0.0)]);
        text.push_str(&line(0, 1, false, 100.0)[..40]);
        let raw = parse(&text).unwrap();
        assert!(raw.truncated_tail);
        assert_eq!(raw.requests().count(), 1);
        let r = rebuild_report(&raw);
        assert!(r.interrupted);
        assert!(
            r.warnings
                .iter()
                .any(|w| w.kind == WarningKind::RawTruncated)
        );
    }

    #[test]
    fn a_broken_middle_line_is_an_error_naming_it() {
        let mut text = file(RAW_SCHEMA, &[line(0, 1, false, 0.0)]);
        text.push_str("{broken\n");
        text.push_str(&line(0, 1, false, 100.0));
        text.push('\n');
        let err = parse(&text).unwrap_err();
        assert!(err.to_string().starts_with("line 3:"), "{err}");
        let mut text = file(RAW_SCHEMA, &[]);
        text.push_str("{\"event\": \"level_start\"}\n");
        let err = parse(&text).unwrap_err();
        assert!(err.to_string().starts_with("line 2:"), "{err}");
        assert!(parse("").is_err());
        assert!(parse("{\"schema\":\"tokenscope.raw/9\"}\n").is_err());
    }
}
