//! Real users' turns as a client report (`tokenscope collect --report`): the same
//! `tokenscope.client/1` the lab bench writes, a level per group of turns (all,
//! each route, each browser family), so `report`, `compare` and the HTML report
//! read real-user data unchanged; each level adds where the painted TTFT went
//! ([`RumLevel`]).
//!
//! Each turn becomes the [`RequestRecord`] the bench would have recorded for it
//! (times from the app's `fetch`; a text chunk a token event) and goes through
//! the bench's own [`LevelAccumulator`]. A sampled turn stands for `weight`
//! turns: it is pushed that many times (a fractional weight rounded up or down
//! by a hash of the turn, so the expected count is the weight), which keeps the
//! level's distributions unbiased. Sampled levels get no raw file: `compare`'s
//! bootstrap would take the copies for independent requests and its intervals
//! would be too narrow, so it compares their summaries without intervals.

use crate::analyze::level::{LevelAccumulator, LevelOptions};
use crate::model::{
    CLIENT_SCHEMA, ClientReport, Environment, Load, LoadMode, ReportWarning, RumLevel, RunConfig,
    Source, SweepReport, TtftSplit, WarningKind,
};
use crate::report::raw::{Phase, RawLine};
use tokenscope_measure::openai::{ServerTimings, Usage};
use tokenscope_measure::record::{ErrorKind, Outcome as RecordOutcome, PaintMethod, RequestRecord};

use super::summary::{StoredTurn, groups};
use super::{Outcome, Turn};

/// What the report says of where its turns came from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportOptions {
    /// Where the turns were read (`rum.sqlite`): the report's `config.url`.
    pub source_name: String,
    /// The period covered, in words (`2026-12-01T00:00:00Z..2026-12-08T00:00:00Z`):
    /// the report's `config.label`.
    pub period: Option<String>,
    /// When the period began (RFC 3339): `environment.started_at`.
    pub started_at: Option<String>,
    /// This tool's version.
    pub tool_version: String,
}

/// The report and, when no turn was sampled, its raw file's lines.
#[derive(Debug, Clone, PartialEq)]
pub struct RumReport {
    /// The client report.
    pub client: ClientReport,
    /// One line per turn and level it is in; `None` when some turn stood for
    /// more than one.
    pub raw: Option<Vec<RawLine>>,
}

/// The model name real users' reports carry.
pub const MODEL: &str = "real users";

/// The report of `turns` (oldest first).
pub fn build(turns: &[StoredTurn], opts: &ReportOptions) -> RumReport {
    let t0 = turns
        .iter()
        .map(|t| t.turn.started_unix_ms)
        .fold(f64::INFINITY, f64::min);
    let sampled = turns.iter().any(|t| t.turn.weight != 1.0);
    let mut levels = Vec::new();
    let mut raw = (!sampled).then(Vec::new);
    for (index, (name, group)) in groups(turns).into_iter().enumerate() {
        let records: Vec<RequestRecord> = group.iter().map(|t| record(&t.turn, t0)).collect();
        let span_s = span_ms(&records) / 1000.0;
        let weighted: f64 = group.iter().map(|t| t.turn.weight).sum();
        let load = Load::Rate(if span_s > 0.0 { weighted / span_s } else { 0.0 });
        let mut acc = LevelAccumulator::new(load, LevelOptions::default());
        for (t, r) in group.iter().zip(&records) {
            for _ in 0..copies(&t.turn) {
                acc.push(0, r);
            }
        }
        let mut level = acc.finish();
        level.group = Some(name);
        level.rum = Some(rum_level(&group));
        levels.push(level);
        if let Some(raw) = raw.as_mut() {
            raw.extend(records.into_iter().enumerate().map(|(i, r)| {
                RawLine::new(format!("rum-{index}-{i}"), index, load, Phase::Round(0), r)
            }));
        }
    }
    let mut warnings = Vec::new();
    if sampled {
        let stored = turns.len();
        let stand_for: f64 = turns.iter().map(|t| t.turn.weight).sum();
        warnings.push(ReportWarning::new(
            WarningKind::RumSampled,
            format!(
                "{stored} turns stored stand for {stand_for:.0} (the probe's sampleRate): the figures \
                 are weighted estimates; compare gives them without intervals"
            ),
        ));
    }
    let config = RunConfig {
        levels: levels.iter().map(|l| l.load().value()).collect(),
        label: opts.period.clone(),
        // The probe gives up on a turn after 10 minutes.
        timeout_s: 600.0,
        ..RunConfig::unset(opts.source_name.clone(), MODEL.into(), LoadMode::Rate)
    };
    let client = ClientReport {
        schema: CLIENT_SCHEMA.into(),
        source: Source::Rum,
        config,
        environment: Environment {
            tool_version: opts.tool_version.clone(),
            started_at: opts.started_at.clone(),
            ..Environment::default()
        },
        levels,
        sweep: SweepReport::default(),
        warnings,
        interrupted: false,
        server: None,
    };
    RumReport { client, raw }
}

/// The first send to the last end of `records`, ms.
fn span_ms(records: &[RequestRecord]) -> f64 {
    let first = records
        .iter()
        .map(|r| r.t_send_ms)
        .fold(f64::INFINITY, f64::min);
    let last = records
        .iter()
        .map(|r| r.t_done_ms.unwrap_or(r.t_send_ms))
        .fold(f64::NEG_INFINITY, f64::max);
    (last - first).max(0.0)
}

/// How many times a turn is pushed: its weight, a fractional part rounded up
/// with that probability, by a hash of the turn (the same turn always gives the
/// same count, so a report is reproducible).
pub fn copies(t: &Turn) -> u32 {
    let w = t.weight.clamp(1.0, 10_000.0);
    let whole = w.floor();
    let mut h = t.started_unix_ms.to_bits() ^ t.chars.rotate_left(32) ^ t.chunks;
    // splitmix64's finaliser: every input bit moves every output bit.
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    let u = (h >> 11) as f64 / (1u64 << 53) as f64;
    whole as u32 + u32::from(u < w - whole)
}

/// The request the bench would have recorded for `t`, on a clock that starts at
/// `t0_unix_ms`. Its token events are its chunks' times; a turn without them
/// (a probe that did not send them) has a TTFT and no ITL or TPOT, and one with
/// the first [`super::MAX_CHUNK_TIMES`] only has them for those. An aborted turn that had shown text is a success as far as its
/// latencies go (the user saw them; users stop slow answers, so leaving them out
/// would flatter); one stopped before any text is a `cancelled` failure.
pub fn record(t: &Turn, t0_unix_ms: f64) -> RequestRecord {
    let send = t.started_unix_ms - t0_unix_ms;
    let at = |v: Option<f64>| v.map(|v| send + v);
    let m = &t.ms;
    let whole = t.chunk_ms.len() as u64 == t.chunks;
    let events: Vec<f64> = if t.chunk_ms.is_empty() {
        m.first_chunk.into_iter().map(|v| send + v).collect()
    } else {
        t.chunk_ms.iter().map(|v| send + v).collect()
    };
    let outcome = match (t.outcome, m.first_chunk) {
        (Outcome::Complete, _) | (Outcome::Aborted, Some(_)) => RecordOutcome::Ok,
        (Outcome::Aborted, None) => RecordOutcome::Error {
            kind: ErrorKind::Cancelled,
            message: "stopped by the user before any text".into(),
        },
        (Outcome::Error, _) => {
            let kind = match t.error_kind.as_deref() {
                Some("network") if m.first_byte.is_some() => ErrorKind::Reset,
                Some("network") => ErrorKind::Connect,
                Some("stream") => ErrorKind::StreamError,
                Some(k) => ErrorKind::from_key(k).unwrap_or(ErrorKind::Other),
                None => ErrorKind::Other,
            };
            RecordOutcome::Error {
                message: format!("{kind} in a real user's page"),
                kind,
            }
        }
    };
    let status = match (t.outcome, t.error_kind.as_deref()) {
        (Outcome::Error, Some(k)) => k.strip_prefix("http_").and_then(|s| s.parse().ok()),
        _ => m.headers.map(|_| 200),
    };
    RequestRecord {
        t_headers_ms: at(m.headers),
        status,
        t_first_byte_ms: at(m.first_byte),
        token_events_ms: events,
        t_done_ms: at(m.last_byte.or(m.last_chunk).or(m.headers)),
        t_first_paint_ms: at(m.first_paint),
        paint_method: m.first_paint.map(|_| match t.paint_method.as_str() {
            "element" | "element_timing" => PaintMethod::ElementTiming,
            _ => PaintMethod::RequestAnimationFrame,
        }),
        // `usage` counts the whole stream's tokens: only beside every chunk's time
        // (else TPOT would spread them over the chunks recorded).
        usage: (whole && (t.output_tokens.is_some() || t.input_tokens.is_some())).then_some(
            Usage {
                prompt_tokens: t.input_tokens,
                completion_tokens: t.output_tokens,
                completion_tokens_details: None,
                prompt_tokens_details: None,
            },
        ),
        server_timings: t.server_prefill_ms.map(|ms| ServerTimings {
            prompt_ms: Some(ms),
            ..ServerTimings::default()
        }),
        output_chars: t.chars,
        done_received: t.outcome == Outcome::Complete,
        outcome,
        ..RequestRecord::sent_at(send, None)
    }
}

/// What a group of turns adds to its level: the painted TTFT's split and how the
/// turns ended, weighted.
pub fn rum_level(turns: &[&StoredTurn]) -> RumLevel {
    let total: f64 = turns.iter().map(|t| t.turn.weight).sum();
    let share = |pred: &dyn Fn(&Turn) -> bool| {
        let w: f64 = turns
            .iter()
            .filter(|t| pred(&t.turn))
            .map(|t| t.turn.weight)
            .sum();
        // `+ 0.0`: an empty sum is -0.0.
        if total > 0.0 { w / total + 0.0 } else { 0.0 }
    };
    let chunks: u64 = turns.iter().map(|t| t.turn.chunks).sum();
    let merged: u64 = turns.iter().map(|t| t.turn.chunks_merged).sum();
    let mut paint_methods = std::collections::BTreeMap::new();
    for t in turns.iter().filter(|t| t.turn.ms.first_paint.is_some()) {
        *paint_methods
            .entry(t.turn.paint_method.clone())
            .or_insert(0) += 1;
    }
    RumLevel {
        turns_stored: turns.len() as u64,
        turns_weighted: total,
        sampled: turns.iter().any(|t| t.turn.weight != 1.0),
        split: split(turns),
        complete_fraction: share(&|t| t.outcome == Outcome::Complete),
        aborted_fraction: share(&|t| t.outcome == Outcome::Aborted),
        error_fraction: share(&|t| t.outcome == Outcome::Error),
        stalled_1s_fraction: share(&|t| t.stalls_1000 > 0),
        stalled_250ms_fraction: share(&|t| t.stalls_250 > 0),
        merged_chunk_fraction: if chunks > 0 {
            merged as f64 / chunks as f64
        } else {
            0.0
        },
        hidden_turns: turns.iter().filter(|t| t.turn.hidden).count() as u64,
        restored_turns: turns.iter().filter(|t| t.turn.restored).count() as u64,
        clamped_times: turns.iter().map(|t| t.turn.clamped).sum(),
        paint_methods,
        input_to_fetch_ms: weighted_mean(turns, |t| t.input_to_fetch_ms),
        long_frame_fraction: share(&|t| t.long_frames > 0),
        blocking_ms: weighted_mean(turns, |t| Some(t.blocking_ms)).unwrap_or(0.0),
    }
}

/// The weighted mean of `f` over the turns that have it.
fn weighted_mean(turns: &[&StoredTurn], f: impl Fn(&Turn) -> Option<f64>) -> Option<f64> {
    let (mut sum, mut w) = (0.0, 0.0);
    for t in turns {
        if let Some(v) = f(&t.turn) {
            sum += t.turn.weight * v;
            w += t.turn.weight;
        }
    }
    (w > 0.0).then(|| sum / w)
}

/// A turn with its first chunk, first DOM change and first paint, ms.
type Marked<'a> = (&'a Turn, f64, f64, f64);

/// Weighted means of the painted TTFT's parts over the turns that have every
/// mark; the server's part and the network's over those of them that carried
/// the server's timing.
fn split(turns: &[&StoredTurn]) -> Option<TtftSplit> {
    let marked: Vec<Marked<'_>> = turns
        .iter()
        .filter_map(|t| {
            let m = &t.turn.ms;
            Some((&t.turn, m.first_chunk?, m.first_dom?, m.first_paint?))
        })
        .collect();
    let w: f64 = marked.iter().map(|m| m.0.weight).sum();
    if marked.is_empty() || w <= 0.0 {
        return None;
    }
    let mean =
        |f: &dyn Fn(&Marked<'_>) -> f64| marked.iter().map(|m| m.0.weight * f(m)).sum::<f64>() / w;
    // The server's part, and the network's, over the turns whose stream said
    // the server's time (an aborted answer or another backend may not).
    let (mut server, mut network, mut server_turns) = (0.0, 0.0, 0.0);
    for m in &marked {
        if let Some(s) = m.0.server_prefill_ms {
            server += m.0.weight * s;
            network += m.0.weight * (m.1 - s);
            server_turns += m.0.weight;
        }
    }
    let known = server_turns > 0.0;
    Some(TtftSplit {
        turns: w,
        painted_ms: mean(&|m| m.3),
        received_ms: mean(&|m| m.1),
        server_ms: known.then(|| server / server_turns),
        network_ms: known.then(|| network / server_turns),
        server_turns,
        // The first DOM change may come before the first chunk is counted (the
        // app rendered a placeholder): then the main thread's part is 0 and the
        // render's starts at the chunk.
        main_thread_ms: mean(&|m| (m.2 - m.1).max(0.0)),
        render_ms: mean(&|m| m.3 - m.2.max(m.1)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(route: &str, browser: &str, first_chunk: f64, weight: f64) -> StoredTurn {
        let mut turn = crate::testing::rum_turn();
        turn.route = route.into();
        turn.started_unix_ms = 1.7e12 + first_chunk * 1000.0;
        turn.ms.headers = Some(first_chunk - 1.0);
        turn.ms.first_byte = Some(first_chunk);
        turn.ms.first_chunk = Some(first_chunk);
        turn.ms.first_dom = Some(first_chunk + 2.0);
        turn.ms.first_paint = Some(first_chunk + 10.0);
        turn.ms.last_chunk = Some(first_chunk + 19.0 * 20.0);
        turn.ms.last_byte = Some(first_chunk + 19.0 * 20.0 + 1.0);
        turn.ms.last_paint = Some(first_chunk + 19.0 * 20.0 + 12.0);
        turn.chunk_ms = (0..20).map(|i| first_chunk + f64::from(i) * 20.0).collect();
        turn.server_prefill_ms = Some(first_chunk - 30.0);
        turn.weight = weight;
        StoredTurn {
            turn,
            browser: browser.into(),
        }
    }

    #[test]
    fn a_level_per_group_with_the_benchs_figures_and_the_split() {
        let turns = vec![
            stored("/a", "Chrome 131", 100.0, 1.0),
            stored("/a", "Chrome 131", 200.0, 1.0),
            stored("/b", "Firefox 133", 300.0, 1.0),
        ];
        let r = build(&turns, &ReportOptions::default());
        let names: Vec<String> = r.client.levels.iter().map(|l| l.label()).collect();
        assert_eq!(
            names,
            [
                "all",
                "route /a",
                "route /b",
                "browser Chrome 131",
                "browser Firefox 133"
            ]
        );
        let all = &r.client.levels[0];
        assert_eq!((all.sent, all.ok), (3, 3));
        assert_eq!(all.metrics.ttft_ms.p50, Some(200.0));
        assert_eq!(all.metrics.itl_ms.p50, Some(20.0));
        assert_eq!(all.metrics.rendered_ttft_ms.unwrap().p50, Some(210.0));
        let s = all.rum.as_ref().unwrap().split.unwrap();
        assert_eq!(s.turns, 3.0);
        assert_eq!((s.received_ms, s.painted_ms), (200.0, 210.0));
        assert_eq!((s.server_ms, s.network_ms), (Some(170.0), Some(30.0)));
        assert_eq!((s.main_thread_ms, s.render_ms), (2.0, 8.0));
        assert!(
            (s.network_ms.unwrap() + s.server_ms.unwrap() + s.main_thread_ms + s.render_ms
                - s.painted_ms)
                .abs()
                < 1e-9
        );
        // Unsampled: a raw line per turn and level it is in.
        assert_eq!(r.raw.as_ref().unwrap().len(), 3 + 3 + 3);
        assert_eq!(r.client.source, Source::Rum);
        assert!(r.client.warnings.is_empty());
        let back = ClientReport::from_json(&r.client.to_json()).unwrap();
        assert_eq!(back, r.client);
    }

    #[test]
    fn outcomes_map_to_the_benchs_and_aborts_with_text_keep_their_latencies() {
        let mut aborted = stored("/a", "Chrome 131", 100.0, 1.0);
        aborted.turn.outcome = Outcome::Aborted;
        let mut gave_up = stored("/a", "Chrome 131", 100.0, 1.0);
        gave_up.turn.outcome = Outcome::Aborted;
        gave_up.turn.ms = crate::rum::TurnTimes {
            headers: Some(50.0),
            ..Default::default()
        };
        gave_up.turn.chunk_ms.clear();
        let mut failed = stored("/a", "Chrome 131", 100.0, 1.0);
        failed.turn.outcome = Outcome::Error;
        failed.turn.error_kind = Some("http_503".into());
        let r = build(&[aborted, gave_up, failed], &ReportOptions::default());
        let all = &r.client.levels[0];
        assert_eq!((all.sent, all.ok, all.errors), (3, 1, 2));
        assert_eq!(all.error_kinds.get("http_503"), Some(&1));
        assert_eq!(all.error_kinds.get("cancelled"), Some(&1));
        let rum = all.rum.as_ref().unwrap();
        assert!((rum.aborted_fraction - 2.0 / 3.0).abs() < 1e-12);
        assert!((rum.error_fraction - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn weights_are_kept_in_expectation_and_a_sampled_report_has_no_raw() {
        let mut n = 0u64;
        let turns: Vec<StoredTurn> = (0..2000)
            .map(|i| stored("/a", "Chrome 131", 100.0 + f64::from(i) * 0.37, 3.3))
            .collect();
        for t in &turns {
            n += u64::from(copies(&t.turn));
        }
        // 2000 x 3.3 = 6600; the rounding adds a binomial(2000, 0.3): sd ~ 20.
        assert!((n as f64 - 6600.0).abs() < 100.0, "{n}");
        let r = build(&turns, &ReportOptions::default());
        assert_eq!(r.client.levels[0].sent, n);
        assert!(r.raw.is_none());
        assert_eq!(r.client.warnings[0].kind, WarningKind::RumSampled);
        assert!(r.client.levels[0].rum.as_ref().unwrap().sampled);
    }

    #[test]
    fn the_server_part_is_over_the_turns_that_had_it() {
        let a = stored("/a", "Chrome 131", 100.0, 1.0);
        let mut b = stored("/a", "Chrome 131", 300.0, 1.0);
        b.turn.server_prefill_ms = None;
        let s = rum_level(&[&a, &b]).split.unwrap();
        // a: 100 received, 70 server; b has no server timing.
        assert_eq!(
            (s.server_ms, s.network_ms, s.server_turns),
            (Some(70.0), Some(30.0), 1.0)
        );
        assert_eq!((s.received_ms, s.turns), (200.0, 2.0));
        b.turn.server_prefill_ms = None;
        let mut c = a.clone();
        c.turn.server_prefill_ms = None;
        let s = rum_level(&[&c]).split.unwrap();
        assert_eq!(
            (s.server_ms, s.network_ms, s.server_turns),
            (None, None, 0.0)
        );
    }
}
