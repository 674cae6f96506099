//! What the page's first module reads of a client report: the model, the SLOs,
//! the levels' table and chart figures, the knee and the warnings. A report it
//! opens, and the levels and reports its run module sends it, are read through
//! these types and not through [`ClientReport`]'s own `Deserialize`, so that the
//! code reading the rest (the server view, rounds, stalls, snapshots, the
//! workload's records, ...) stays off the page's first load: every other field
//! is left at its default. The page keeps such a report's text as it was for the
//! Analysis, the comparison and the export (its report module reads it whole).
//!
//! Each type here names fields of the report's own types, as they are written;
//! a test reads every fixture report both ways and compares what is shown.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use tokenscope_measure::record::{Outcome, RequestRecord};
use tokenscope_stats::stats::Summary;

use super::client::{ClientReport, Knee, ReportError, SweepReport, check_client_schema};
use super::level::{LevelMetrics, LevelReport};
use super::run::{Environment, RunConfig};
use super::warning::ReportWarning;
use crate::analyze::slo::Slo;

/// A report as the page's first module reads it (see the module's text).
pub fn client_report(text: &str) -> Result<ClientReport, ReportError> {
    check_client_schema(text)?;
    Ok(serde_json::from_str::<ShownReport>(text)?.into())
}

/// Levels as the page's first module reads them: for `#[serde(deserialize_with)]`
/// on a field of levels in a message from the run module.
pub fn levels<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<LevelReport>, D::Error> {
    let shown = Vec::<ShownLevel>::deserialize(d)?;
    Ok(shown.into_iter().map(LevelReport::from).collect())
}

/// A request as the page's first module reads it (what its per-request
/// timeline draws: the send, the response head, the content events, the end,
/// the paint and the outcome): for `#[serde(deserialize_with)]` on a record in
/// a message from the run module. Every other field is left empty, so that the
/// record's other fields (the usage, the answer's check, the workload's labels,
/// ...) stay off the page's first load.
pub fn record<'de, D: Deserializer<'de>>(d: D) -> Result<RequestRecord, D::Error> {
    let s = ShownRecord::deserialize(d)?;
    Ok(RequestRecord {
        t_headers_ms: s.t_headers_ms,
        token_events_ms: s.token_events_ms,
        t_done_ms: s.t_done_ms,
        t_first_paint_ms: s.t_first_paint_ms,
        outcome: s.outcome,
        ..RequestRecord::sent_at(s.t_send_ms, s.t_scheduled_ms)
    })
}

#[derive(Deserialize)]
struct ShownRecord {
    #[serde(default)]
    t_scheduled_ms: Option<f64>,
    t_send_ms: f64,
    #[serde(default)]
    t_headers_ms: Option<f64>,
    #[serde(default)]
    token_events_ms: Vec<f64>,
    #[serde(default)]
    t_done_ms: Option<f64>,
    #[serde(default)]
    t_first_paint_ms: Option<f64>,
    outcome: Outcome,
}

#[derive(Deserialize)]
struct ShownReport {
    config: ShownConfig,
    environment: ShownEnvironment,
    levels: Vec<ShownLevel>,
    sweep: ShownSweep,
    #[serde(default)]
    warnings: Vec<ReportWarning>,
}

#[derive(Deserialize)]
struct ShownConfig {
    model: String,
    #[serde(default)]
    slos: Vec<Slo>,
}

#[derive(Deserialize)]
struct ShownEnvironment {
    #[serde(default)]
    protocol: Option<String>,
    #[serde(default)]
    started_at: Option<String>,
    #[serde(default)]
    simulated: bool,
}

#[derive(Deserialize)]
struct ShownSweep {
    knee: Option<ShownKnee>,
}

#[derive(Deserialize)]
struct ShownKnee {
    level_index: usize,
}

#[derive(Deserialize)]
struct ShownLevel {
    #[serde(default)]
    concurrency: Option<u32>,
    #[serde(default)]
    rate_per_s: Option<f64>,
    sent: u64,
    ok: u64,
    errors: u64,
    timeouts: u64,
    output_tokens_per_s: f64,
    requests_per_s: f64,
    #[serde(default)]
    goodput_per_s: Option<f64>,
    metrics: ShownMetrics,
    #[serde(default)]
    paint_methods: BTreeMap<String, u64>,
    #[serde(default)]
    quantiles: BTreeMap<String, Vec<f64>>,
    #[serde(default)]
    group: Option<String>,
}

#[derive(Deserialize)]
struct ShownMetrics {
    ttft_ms: Summary,
    tpot_ms: Summary,
    itl_ms: Summary,
    e2e_ms: Summary,
    time_to_headers_ms: Summary,
    time_to_first_byte_ms: Summary,
    #[serde(default)]
    rendered_ttft_ms: Option<Summary>,
    #[serde(default)]
    render_delay_ms: Option<Summary>,
    #[serde(default)]
    connection_setup_ms: Option<Summary>,
}

impl From<ShownReport> for ClientReport {
    fn from(s: ShownReport) -> Self {
        ClientReport {
            config: RunConfig {
                model: s.config.model,
                slos: s.config.slos,
                ..RunConfig::default()
            },
            environment: Environment {
                protocol: s.environment.protocol,
                started_at: s.environment.started_at,
                simulated: s.environment.simulated,
                ..Environment::default()
            },
            levels: s.levels.into_iter().map(LevelReport::from).collect(),
            sweep: SweepReport {
                knee: s.sweep.knee.map(|k| Knee {
                    level_index: k.level_index,
                    ..Knee::default()
                }),
                ..SweepReport::default()
            },
            warnings: s.warnings,
            ..ClientReport::default()
        }
    }
}

impl From<ShownLevel> for LevelReport {
    fn from(s: ShownLevel) -> Self {
        let m = s.metrics;
        LevelReport {
            concurrency: s.concurrency,
            rate_per_s: s.rate_per_s,
            sent: s.sent,
            ok: s.ok,
            errors: s.errors,
            timeouts: s.timeouts,
            output_tokens_per_s: s.output_tokens_per_s,
            requests_per_s: s.requests_per_s,
            goodput_per_s: s.goodput_per_s,
            metrics: LevelMetrics {
                ttft_ms: m.ttft_ms,
                tpot_ms: m.tpot_ms,
                itl_ms: m.itl_ms,
                e2e_ms: m.e2e_ms,
                time_to_headers_ms: m.time_to_headers_ms,
                time_to_first_byte_ms: m.time_to_first_byte_ms,
                rendered_ttft_ms: m.rendered_ttft_ms,
                render_delay_ms: m.render_delay_ms,
                connection_setup_ms: m.connection_setup_ms,
                ..LevelMetrics::default()
            },
            paint_methods: s.paint_methods,
            quantiles: s.quantiles,
            group: s.group,
            ..LevelReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Load, Source, WarningKind};

    /// What the page shows of a level.
    fn shown(l: &LevelReport) -> impl PartialEq + std::fmt::Debug {
        let m = &l.metrics;
        (
            (
                l.load(),
                l.sent,
                l.ok,
                l.errors,
                l.timeouts,
                l.goodput_per_s,
            ),
            (l.output_tokens_per_s, l.requests_per_s, l.group.clone()),
            (l.paint_methods.clone(), l.quantiles.clone()),
            (m.ttft_ms, m.tpot_ms, m.itl_ms, m.e2e_ms),
            (m.time_to_headers_ms, m.time_to_first_byte_ms),
            (m.rendered_ttft_ms, m.render_delay_ms, m.connection_setup_ms),
        )
    }

    /// Read the shown way, `report` keeps what the page shows and leaves the
    /// rest at its defaults.
    fn check(report: &ClientReport) {
        let back = client_report(&report.to_json()).unwrap();
        assert_eq!(back.config.model, report.config.model);
        assert_eq!(back.config.slos, report.config.slos);
        let env = |r: &ClientReport| {
            let e = &r.environment;
            (e.simulated, e.protocol.clone(), e.started_at.clone())
        };
        assert_eq!(env(&back), env(report));
        assert_eq!(back.warnings, report.warnings);
        assert_eq!(
            back.sweep.knee.as_ref().map(|k| k.level_index),
            report.sweep.knee.as_ref().map(|k| k.level_index)
        );
        assert_eq!(back.levels.len(), report.levels.len());
        for (b, r) in back.levels.iter().zip(&report.levels) {
            assert_eq!(shown(b), shown(r));
            assert!(b.rounds.is_empty() && b.server.is_none() && b.error_kinds.is_empty());
        }
        assert!(back.server.is_none() && back.config.url.is_empty());
        // The levels a run module's message carries read the same way.
        let json = serde_json::to_string(&report.levels).unwrap();
        let levels = levels(&mut serde_json::Deserializer::from_str(&json)).unwrap();
        assert_eq!(levels, back.levels);
    }

    #[test]
    fn a_report_keeps_what_the_page_shows() {
        use crate::testing::{client_report, level, record};
        let records: Vec<_> = (0..8)
            .map(|i| record(f64::from(i) * 10.0, 40.0, 5.0, 12))
            .collect();
        let mut report = client_report(
            Source::Browser,
            vec![
                level(Load::Concurrency(1), &records),
                level(Load::Concurrency(4), &records),
            ],
        );
        report.config.model = "the-model".into();
        report.config.slos = Slo::parse_list("ttft_ms:p95<=500").unwrap();
        report.environment.simulated = true;
        report.environment.protocol = Some("h2".into());
        report.environment.started_at = Some("2026-01-02T03:04:05Z".into());
        report.levels[1].goodput_per_s = Some(3.5);
        report.levels[1].paint_methods.insert("raf".into(), 8);
        report.levels[1].metrics.rendered_ttft_ms = Some(report.levels[1].metrics.ttft_ms);
        report.levels[1].metrics.connection_setup_ms = Some(report.levels[1].metrics.e2e_ms);
        report.sweep.knee = Some(Knee {
            concurrency: Some(4),
            level_index: 1,
            metric: "e2e_ms.p95".into(),
            method: "test".into(),
            ..Knee::default()
        });
        report
            .warnings
            .push(ReportWarning::new(WarningKind::ServerMetrics, "shown"));
        check(&report);
    }

    /// The committed native report (a real run's, with rounds, a sweep and
    /// warnings).
    #[test]
    fn the_committed_report_keeps_what_the_page_shows() {
        let text = include_str!("../../../tests/fixtures/reports/native.json");
        check(&ClientReport::from_json(text).unwrap());
    }

    #[test]
    fn the_shown_reading_refuses_what_the_whole_one_refuses() {
        assert!(client_report("{\"schema\": \"x/1\"}").is_err());
        assert!(client_report("not json").is_err());
        let e = client_report(r#"{"schema": "tokenscope.client/2"}"#).unwrap_err();
        assert!(e.to_string().contains("unsupported schema"), "{e}");
    }
}
