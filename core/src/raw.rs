//! The raw per-request file (`--raw`, schema `tokenscope.raw/1`): a header line
//! with the run's configuration, then one line per finished request. Written as
//! requests finish, so a crash loses nothing that finished; and enough on its own
//! to rebuild the whole client report ([`rebuild_report`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::analysis::{LevelAccumulator, LevelOptions, analyze_sweep};
use crate::metrics::MetricOptions;
use crate::report::{
    CLIENT_SCHEMA, ClientReport, Environment, LevelReport, Load, ReportWarning, RunConfig, Source,
    check_schema,
};
use crate::timeline::RequestRecord;

/// The raw file's schema.
pub const RAW_SCHEMA: &str = "tokenscope.raw/1";

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
    /// The level's load.
    pub fn load(&self) -> Load {
        match (self.concurrency, self.rate_per_s) {
            (Some(c), _) => Load::Concurrency(c),
            (None, Some(r)) => Load::Rate(r),
            (None, None) => Load::Concurrency(1),
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
    /// The request lines.
    pub lines: Vec<RawLine>,
    /// The last line was cut off (the writer was killed mid-line) and was skipped.
    pub truncated_tail: bool,
}

/// Parse a raw file's text. A last line without its newline (a write cut short by
/// a kill) is skipped and reported; any other bad line is an error naming it.
pub fn parse(text: &str) -> Result<RawFile, RawError> {
    let mut lines = text.split_inclusive('\n').enumerate();
    let (_, first) = lines.next().ok_or(RawError::Empty)?;
    let header: RawHeader =
        serde_json::from_str(first.trim()).map_err(|e| RawError::Header(e.to_string()))?;
    check_schema(&header.schema, RAW_SCHEMA)?;
    let mut out = Vec::new();
    let mut truncated_tail = false;
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<RawLine>(line.trim()) {
            Ok(l) => out.push(l),
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
        lines: out,
        truncated_tail,
    })
}

/// Rebuild the client report from the raw file alone: the same analysis the run
/// did, over the measured (non-warm-up) requests, level by level.
pub fn rebuild_report(raw: &RawFile) -> ClientReport {
    let cfg = &raw.header.config;
    let mut levels: BTreeMap<usize, (Load, Vec<&RawLine>)> = BTreeMap::new();
    for l in raw.lines.iter().filter(|l| !l.warmup) {
        levels
            .entry(l.level)
            .or_insert_with(|| (l.load(), Vec::new()))
            .1
            .push(l);
    }
    let reports: Vec<LevelReport> = levels
        .into_values()
        .map(|(load, lines)| {
            let mut acc = LevelAccumulator::new(
                load,
                LevelOptions {
                    slos: cfg.slos.clone(),
                    metric: MetricOptions {
                        stall_threshold_ms: cfg.stall_threshold_ms,
                    },
                    ..LevelOptions::default()
                },
            );
            for l in lines {
                let round = l.round.unwrap_or(1).saturating_sub(1) as usize;
                acc.push(round, &l.record);
            }
            acc.finish()
        })
        .collect();
    let mut warnings = vec![ReportWarning {
        kind: "rebuilt_from_raw".into(),
        message: format!(
            "rebuilt from the raw file alone ({} requests); environment details were not recorded there",
            raw.lines.len()
        ),
    }];
    if raw.truncated_tail {
        warnings.push(ReportWarning {
            kind: "raw_truncated".into(),
            message: "the raw file's last line was cut off (the run was killed); it was skipped"
                .into(),
        });
    }
    let expected = cfg.levels.len();
    let interrupted = reports.len() < expected || raw.truncated_tail;
    ClientReport {
        schema: CLIENT_SCHEMA.into(),
        source: raw.header.source,
        sweep: analyze_sweep(&reports, &cfg.slos),
        config: cfg.clone(),
        environment: Environment {
            tool_version: raw.header.tool_version.clone(),
            ..Environment::default()
        },
        levels: reports,
        warnings,
        interrupted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::Api;
    use crate::timeline::Outcome;

    fn config() -> RunConfig {
        RunConfig {
            url: "http://x/v1".into(),
            api: Api::Chat,
            model: "m".into(),
            mode: "concurrency".into(),
            levels: vec![1.0, 2.0],
            arrival: None,
            requests_per_level: Some(2),
            duration_per_level_s: None,
            rounds: 1,
            warmup_requests: 1,
            input_tokens: Some(8),
            prompts_file: None,
            max_tokens: 4,
            ignore_eos: false,
            min_tokens: None,
            timeout_s: 10.0,
            slos: vec![],
            stall_threshold_ms: 250.0,
            seed: 1,
        }
    }

    fn line(level: usize, c: u32, warmup: bool, t0: f64) -> String {
        let l = RawLine {
            request_id: format!("r{t0}"),
            level,
            concurrency: Some(c),
            rate_per_s: None,
            round: (!warmup).then_some(1),
            warmup,
            record: RequestRecord {
                t_scheduled_ms: None,
                t_send_ms: t0,
                t_headers_ms: Some(t0 + 1.0),
                status: Some(200),
                t_first_byte_ms: Some(t0 + 2.0),
                token_events_ms: vec![t0 + 10.0, t0 + 20.0],
                t_done_ms: Some(t0 + 21.0),
                t_first_paint_ms: None,
                paint_method: None,
                shared_read_events: 0,
                usage: None,
                server_timings: None,
                output_chars: 2,
                body_bytes: 10,
                done_received: true,
                finish_reason: None,
                outcome: Outcome::Ok,
            },
        };
        serde_json::to_string(&l).unwrap()
    }

    fn file(lines: &[String]) -> String {
        let header = RawHeader {
            schema: RAW_SCHEMA.into(),
            tool_version: "0.1.0".into(),
            source: Source::Native,
            config: config(),
        };
        let mut s = serde_json::to_string(&header).unwrap() + "\n";
        for l in lines {
            s.push_str(l);
            s.push('\n');
        }
        s
    }

    #[test]
    fn rebuilds_levels_without_warmup() {
        let text = file(&[
            line(0, 1, true, 0.0),
            line(0, 1, false, 100.0),
            line(0, 1, false, 200.0),
            line(1, 2, false, 300.0),
        ]);
        let raw = parse(&text).unwrap();
        let r = rebuild_report(&raw);
        assert_eq!(r.levels.len(), 2);
        assert_eq!(r.levels[0].sent, 2, "warm-up excluded");
        assert_eq!(r.levels[0].metrics.ttft_ms.p50, Some(10.0));
        assert_eq!(r.levels[1].concurrency, Some(2));
        assert!(!r.interrupted);
    }

    #[test]
    fn a_cut_off_last_line_is_skipped_and_reported() {
        let mut text = file(&[line(0, 1, false, 0.0)]);
        text.push_str(&line(0, 1, false, 100.0)[..40]);
        let raw = parse(&text).unwrap();
        assert!(raw.truncated_tail);
        assert_eq!(raw.lines.len(), 1);
        let r = rebuild_report(&raw);
        assert!(r.interrupted);
        assert!(r.warnings.iter().any(|w| w.kind == "raw_truncated"));
    }

    #[test]
    fn a_broken_middle_line_is_an_error_naming_it() {
        let mut text = file(&[line(0, 1, false, 0.0)]);
        text.push_str("{broken\n");
        text.push_str(&line(0, 1, false, 100.0));
        text.push('\n');
        let err = parse(&text).unwrap_err();
        assert!(err.to_string().starts_with("line 3:"), "{err}");
        assert!(parse("").is_err());
        assert!(parse("{\"schema\":\"tokenscope.raw/9\"}\n").is_err());
    }
}
