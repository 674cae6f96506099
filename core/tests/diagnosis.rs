//! Every diagnosis rule fires on data built to trigger it, quotes its evidence,
//! and stays silent on data that does not show the symptom.

use tokenscope_core::analyze::diagnosis::diagnose;
use tokenscope_core::analyze::level::{LevelAccumulator, LevelOptions};
use tokenscope_core::analyze::sweep::{analyze_sweep, find_knee};
use tokenscope_core::report::combined::{Finding, ReportInput};
use tokenscope_core::report::{
    ClientReport, LevelReport, Load, ReportWarning, Source, WarningKind,
};
use tokenscope_core::testing;
use tokenscope_measure::openai::ServerTimings;
use tokenscope_measure::record::{ErrorKind, Outcome, RequestRecord};

/// A request sent at `t0` whose first token comes after `ttft` and then one token
/// every `itl(i)` ms.
fn record(t0: f64, ttft: f64, tokens: u64, itl: impl Fn(u64) -> f64) -> RequestRecord {
    let mut events = vec![t0 + ttft];
    for i in 1..tokens {
        let last = *events.last().unwrap();
        events.push(last + itl(i));
    }
    RequestRecord {
        t_first_byte_ms: Some(t0 + 1.0),
        output_chars: tokens,
        ..testing::record_with_events(t0, events)
    }
}

struct Spec {
    load: Load,
    ttft: Vec<f64>,
    itl: f64,
    tokens: u64,
    errors: usize,
}

fn level(spec: &Spec) -> LevelReport {
    let mut acc = LevelAccumulator::new(spec.load, LevelOptions::default());
    for (i, ttft) in spec.ttft.iter().enumerate() {
        acc.push(
            0,
            &record(i as f64 * 10_000.0, *ttft, spec.tokens, |_| spec.itl),
        );
    }
    for i in 0..spec.errors {
        let mut r = record(1e7 + i as f64, 5.0, 1, |_| 1.0);
        r.outcome = Outcome::Error {
            kind: ErrorKind::Http(503),
            message: "overloaded".into(),
        };
        acc.push(0, &r);
    }
    let mut l = acc.finish();
    // The records lie end to end (no closed loop's timing): loaded as claimed,
    // unless a test says otherwise.
    l.reached = None;
    l
}

fn client(source: Source, levels: Vec<LevelReport>) -> ClientReport {
    let mut c = testing::client_report(source, levels);
    c.config.url = "http://127.0.0.1:8000/v1".into();
    c.config.input_tokens = Some(256);
    c.config.ignore_eos = true;
    c.environment.tool_version = "test".into();
    c.sweep = analyze_sweep(&c.levels, &[]);
    c
}

fn spec(c: u32, ttft: f64) -> Spec {
    Spec {
        load: Load::Concurrency(c),
        ttft: vec![ttft; 12],
        itl: 10.0,
        tokens: 16,
        errors: 0,
    }
}

fn rules(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.rule.as_str()).collect()
}

fn run(clients: Vec<ClientReport>) -> Vec<Finding> {
    diagnose(&ReportInput {
        clients,
        kernels: None,
        model: None,
    })
}

fn fires(findings: &[Finding], rule: &str) -> Finding {
    let f = findings
        .iter()
        .find(|f| f.rule.as_str() == rule)
        .unwrap_or_else(|| panic!("{rule} did not fire: {:?}", rules(findings)))
        .clone();
    assert!(!f.evidence.is_empty(), "{rule} quotes its evidence");
    assert!(!f.advice.is_empty());
    f
}

fn silent(findings: &[Finding], rule: &str) {
    assert!(
        !rules(findings).contains(&rule),
        "{rule} fired without cause: {findings:#?}"
    );
}

/// A healthy sweep: nothing should fire on it.
fn healthy() -> ClientReport {
    client(
        Source::Native,
        vec![
            level(&spec(1, 50.0)),
            level(&spec(4, 55.0)),
            level(&spec(8, 60.0)),
        ],
    )
}

#[test]
fn a_healthy_run_triggers_nothing() {
    let f = run(vec![healthy()]);
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn an_under_loaded_level_is_no_evidence() {
    // TTFT 8x at "c=16", but the client never had 16 in flight: that level
    // measured a lower load, and the rules comparing loads leave it out.
    let mut c16 = level(&spec(16, 400.0));
    c16.reached = Some(tokenscope_core::model::ReachedLoad {
        client_in_flight_max: 8,
        client_in_flight_mean: 7.5,
        under_loaded: true,
    });
    let f = run(vec![client(
        Source::Native,
        vec![level(&spec(1, 50.0)), c16],
    )]);
    silent(&f, "ttft_prefill_queueing");
}

#[test]
fn ttft_rising_with_load_means_prefill_or_queueing() {
    let f = run(vec![client(
        Source::Native,
        vec![level(&spec(1, 50.0)), level(&spec(16, 400.0))],
    )]);
    let finding = fires(&f, "ttft_prefill_queueing");
    assert!(
        finding.evidence[0].contains("8.0x"),
        "{:?}",
        finding.evidence
    );
    // Near misses: TTFT 1.9x (under 2x); TTFT 8x while decode slowed 6x as well.
    silent(
        &run(vec![client(
            Source::Native,
            vec![level(&spec(1, 50.0)), level(&spec(16, 95.0))],
        )]),
        "ttft_prefill_queueing",
    );
    let mut slow_decode = spec(16, 400.0);
    slow_decode.itl = 60.0;
    silent(
        &run(vec![client(
            Source::Native,
            vec![level(&spec(1, 50.0)), level(&slow_decode)],
        )]),
        "ttft_prefill_queueing",
    );
}

#[test]
fn decode_slowing_along_the_output() {
    let grow = |i: u64| if i < 64 { 10.0 } else { 16.0 };
    let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
    for k in 0..3 {
        acc.push(0, &record(f64::from(k) * 1e5, 50.0, 300, grow));
    }
    let f = run(vec![client(Source::Native, vec![acc.finish()])]);
    let finding = fires(&f, "tpot_grows_with_length");
    assert!(
        finding.evidence[0].contains("tokens 257+"),
        "{:?}",
        finding.evidence
    );
    let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
    for k in 0..3 {
        acc.push(0, &record(f64::from(k) * 1e5, 50.0, 300, |_| 10.0));
    }
    silent(
        &run(vec![client(Source::Native, vec![acc.finish()])]),
        "tpot_grows_with_length",
    );
}

#[test]
fn p99_far_above_p50_means_queueing() {
    let mut s = spec(4, 50.0);
    s.ttft = vec![50.0; 40];
    s.ttft.push(900.0);
    s.ttft.push(950.0);
    let f = run(vec![client(Source::Native, vec![level(&s)])]);
    let finding = fires(&f, "tail_queueing");
    assert!(
        finding.evidence[0].contains("TTFT p99"),
        "{:?}",
        finding.evidence
    );
    // Near miss: the same tail at 2.9x p50.
    let mut s = spec(4, 50.0);
    s.ttft = vec![50.0; 40];
    s.ttft.extend([145.0, 145.0]);
    silent(
        &run(vec![client(Source::Native, vec![level(&s)])]),
        "tail_queueing",
    );
}

#[test]
fn throughput_flat_while_latency_climbs() {
    let mut levels = vec![
        level(&spec(1, 50.0)),
        level(&spec(8, 55.0)),
        level(&spec(16, 60.0)),
        level(&spec(32, 60.0)),
    ];
    for (l, (thr, e2e)) in levels.iter_mut().zip([
        (60.0, 200.0),
        (450.0, 230.0),
        (800.0, 260.0),
        (820.0, 540.0),
    ]) {
        l.output_tokens_per_s = thr;
        l.metrics.e2e_ms.p95 = Some(e2e);
    }
    let mut c = client(Source::Native, levels);
    c.sweep.knee = find_knee(&c.levels);
    assert_eq!(c.sweep.knee.as_ref().unwrap().concurrency, Some(16));
    let f = run(vec![c]);
    let finding = fires(&f, "past_the_knee");
    assert!(
        finding.evidence[0].contains("c=16 -> c=32"),
        "{:?}",
        finding.evidence
    );
    // Near miss: the same knee, latency past it up 20% (under 25%).
    let mut near = c_near_knee();
    near.sweep.knee = find_knee(&near.levels);
    assert_eq!(near.sweep.knee.as_ref().unwrap().concurrency, Some(16));
    silent(&run(vec![near]), "past_the_knee");
}

/// The sweep of `throughput_flat_while_latency_climbs`, with p95 E2E past the knee
/// up only 20%.
fn c_near_knee() -> ClientReport {
    let mut levels = vec![
        level(&spec(1, 50.0)),
        level(&spec(8, 55.0)),
        level(&spec(16, 60.0)),
        level(&spec(32, 60.0)),
    ];
    for (l, (thr, e2e)) in levels.iter_mut().zip([
        (60.0, 200.0),
        (450.0, 230.0),
        (800.0, 260.0),
        (820.0, 312.0),
    ]) {
        l.output_tokens_per_s = thr;
        l.metrics.e2e_ms.p95 = Some(e2e);
    }
    client(Source::Native, levels)
}

#[test]
fn failures_growing_with_load() {
    let mut s = spec(32, 60.0);
    s.errors = 4;
    let f = run(vec![client(
        Source::Native,
        vec![level(&spec(1, 50.0)), level(&s)],
    )]);
    let finding = fires(&f, "failures_grow_with_load");
    assert!(
        finding.evidence.iter().any(|e| e.contains("http_503: 4")),
        "{:?}",
        finding.evidence
    );
    // The same error rate at every level is not "growing with load".
    let mut a = spec(1, 50.0);
    a.errors = 4;
    let mut b = spec(8, 50.0);
    b.errors = 4;
    silent(
        &run(vec![client(Source::Native, vec![level(&a), level(&b)])]),
        "failures_grow_with_load",
    );
}

#[test]
fn rounds_that_disagree() {
    let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
    for (round, ttft) in [(0usize, 100.0), (1, 104.0), (2, 420.0)] {
        for k in 0..4 {
            acc.push(
                round,
                &record(round as f64 * 1e6 + f64::from(k) * 1e4, ttft, 16, |_| 10.0),
            );
        }
    }
    let f = run(vec![client(Source::Native, vec![acc.finish()])]);
    let finding = fires(&f, "rounds_disagree");
    assert!(
        finding.evidence[0].contains("round 3"),
        "{:?}",
        finding.evidence
    );
    // Near miss: the third round 1.8x the median (under 2x).
    let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
    for (round, ttft) in [(0usize, 100.0), (1, 104.0), (2, 190.0)] {
        for k in 0..4 {
            acc.push(
                round,
                &record(round as f64 * 1e6 + f64::from(k) * 1e4, ttft, 16, |_| 10.0),
            );
        }
    }
    silent(
        &run(vec![client(Source::Native, vec![acc.finish()])]),
        "rounds_disagree",
    );
}

#[test]
fn browser_stuck_at_six_connections() {
    let mut b = client(
        Source::Browser,
        vec![level(&spec(1, 50.0)), level(&spec(8, 55.0))],
    );
    b.environment.protocol = Some("http/1.1".into());
    let finding = fires(&run(vec![b.clone()]), "http1_connection_limit");
    assert!(finding.evidence[0].contains("c=8"));
    b.environment.protocol = Some("h2".into());
    silent(&run(vec![b.clone()]), "http1_connection_limit");
    // Native clients have no such limit.
    let mut n = b;
    n.source = Source::Native;
    n.environment.protocol = Some("http/1.1".into());
    silent(&run(vec![n]), "http1_connection_limit");
}

#[test]
fn client_lag_in_rate_mode() {
    let mut acc = LevelAccumulator::new(Load::Rate(20.0), LevelOptions::default());
    for k in 0..20 {
        let mut r = record(f64::from(k) * 50.0, 40.0, 8, |_| 10.0);
        r.t_scheduled_ms = Some(r.t_send_ms - 30.0 - f64::from(k)); // sends ran 30-50 ms late
        acc.push(0, &r);
    }
    let f = run(vec![client(Source::Native, vec![acc.finish()])]);
    fires(&f, "client_bound");
    let mut c = healthy();
    c.warnings.push(ReportWarning::new(
        WarningKind::ClientBound,
        "the client's event loop ran late (p99 40 ms)",
    ));
    fires(&run(vec![c]), "client_bound");
    // Near miss: sends 5-8 ms late at 20/s (the bound is 10 ms).
    let mut acc = LevelAccumulator::new(Load::Rate(20.0), LevelOptions::default());
    for k in 0..20 {
        let mut r = record(f64::from(k) * 50.0, 40.0, 8, |_| 10.0);
        r.t_scheduled_ms = Some(r.t_send_ms - 5.0 - f64::from(k % 4));
        acc.push(0, &r);
    }
    silent(
        &run(vec![client(Source::Native, vec![acc.finish()])]),
        "client_bound",
    );
}

#[test]
fn drift_over_a_soak() {
    let run_soak = |grow: f64| {
        client(
            Source::Native,
            vec![testing::soak_level(15.0, grow, 0.5, 32)],
        )
    };
    fires(&run(vec![run_soak(2.0)]), "drift");
    silent(&run(vec![run_soak(0.0)]), "drift");
}

#[test]
fn client_and_server_timing_disagree() {
    let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
    for k in 0..5 {
        let mut r = record(f64::from(k) * 1e4, 40.0, 16, |_| 30.0);
        r.server_timings = Some(ServerTimings {
            predicted_per_token_ms: Some(15.0),
            ..ServerTimings::default()
        });
        acc.push(0, &r);
    }
    let f = run(vec![client(Source::Native, vec![acc.finish()])]);
    let finding = fires(&f, "server_timing_gap");
    assert!(
        finding.evidence[0].contains("2.00x"),
        "{:?}",
        finding.evidence
    );
    let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
    for k in 0..5 {
        let mut r = record(f64::from(k) * 1e4, 40.0, 16, |_| 15.5);
        r.server_timings = Some(ServerTimings {
            predicted_per_token_ms: Some(15.0),
            ..ServerTimings::default()
        });
        acc.push(0, &r);
    }
    silent(
        &run(vec![client(Source::Native, vec![acc.finish()])]),
        "server_timing_gap",
    );
}

#[test]
fn ttft_growing_with_the_prompt() {
    let tier = |tokens: u32, ttft: f64| {
        let mut c = client(Source::Native, vec![level(&spec(1, ttft))]);
        c.config.input_tokens = Some(tokens);
        c
    };
    let f = run(vec![tier(64, 40.0), tier(256, 90.0), tier(512, 170.0)]);
    let finding = fires(&f, "ttft_grows_with_input");
    assert_eq!(finding.evidence.len(), 3);
    silent(
        &run(vec![tier(64, 40.0), tier(512, 44.0)]),
        "ttft_grows_with_input",
    );
}
