//! The diagnosis rules of the combined report. Each rule looks for one known
//! symptom (the troubleshooting table of `docs/methodology.md`) and returns a
//! finding only when its evidence is in the data, quoting that evidence.
//!
//! Adding a rule: a variant of [`RuleId`], a `rule_*` function here called from
//! [`diagnose`], and a firing and a near-miss test in `core/tests/diagnosis.rs`
//! (see CONTRIBUTING.md).

use crate::model::WarningKind;
use crate::model::{ClientReport, LevelReport, Source};
use crate::report::combined::{Finding, ReportInput, RuleId};
use tokenscope_stats::fmt::{fmt_ms, fmt_rate};

/// Every diagnosis rule, in the order shown. Each returns a finding only when its
/// evidence is in the data.
pub fn diagnose(input: &ReportInput) -> Vec<Finding> {
    let mut out = Vec::new();
    for c in &input.clients {
        let who = c.source.as_str();
        // Real users' levels are groups (all, routes, browsers), not loads: the
        // rules that compare levels as load grows do not apply.
        if c.source == Source::Rum {
            continue;
        }
        out.extend(rule_ttft_queueing(c, who));
        out.extend(rule_tpot_grows_with_length(c, who));
        out.extend(rule_tail_queueing(c, who));
        out.extend(rule_past_the_knee(c, who));
        out.extend(rule_failures_grow_with_load(c, who));
        out.extend(rule_rounds_disagree(c, who));
        out.extend(rule_http1_limit(c, who));
        out.extend(rule_client_bound(c, who));
        out.extend(rule_drift(c, who));
        out.extend(rule_server_timing_gap(c, who));
        out.extend(crate::analyze::server::diagnosis::diagnose(c, who));
    }
    // (Real users' reports have no input tier: this rule passes them by.)
    out.extend(rule_ttft_grows_with_input(&input.clients));
    out
}

/// The levels that were the load they claim (an under-loaded one measured a
/// lower load: the rules that compare levels as load grows leave it out).
fn loaded(c: &ClientReport) -> impl Iterator<Item = &LevelReport> {
    c.levels.iter().filter(|l| !l.under_loaded())
}

/// TTFT rising much faster than TPOT as load grows: prefill and queueing, not decode.
fn rule_ttft_queueing(c: &ClientReport, who: &str) -> Option<Finding> {
    let levels: Vec<&LevelReport> = loaded(c).filter(|l| l.ok > 0).collect();
    let (first, last) = (levels.first()?, levels.last()?);
    if levels.len() < 2 {
        return None;
    }
    let (t0, t1) = (first.metrics.ttft_ms.p50?, last.metrics.ttft_ms.p50?);
    let growth = t1 / t0.max(1e-9);
    let tpot_growth = match (first.metrics.tpot_ms.p50, last.metrics.tpot_ms.p50) {
        (Some(a), Some(b)) if a > 0.0 => b / a,
        _ => 1.0,
    };
    let unstable = last
        .metrics
        .ttft_ms
        .p99
        .zip(last.metrics.ttft_ms.p50)
        .map(|(p99, p50)| p99 / p50.max(1e-9))
        .unwrap_or(1.0);
    if growth >= 2.0 && growth >= 1.5 * tpot_growth {
        Some(Finding {
            rule: RuleId::TtftPrefillQueueing,
            title: format!("{who}: TTFT climbs with load far more than decode does: requests wait for prefill or in a queue"),
            evidence: vec![
                format!(
                    "TTFT p50 {} ms at {} -> {} ms at {} ({growth:.1}x), while TPOT p50 grew {tpot_growth:.1}x",
                    fmt_ms(Some(t0)),
                    first.label(),
                    fmt_ms(Some(t1)),
                    last.label()
                ),
                format!("TTFT p99/p50 at {}: {unstable:.1}", last.label()),
            ],
            advice: "Check TTFT across input tiers (long prompts make prefill the cost) and against concurrency (queueing); chunked prefill or a prefill/decode split helps the first, more replicas or a larger batch the second.".into(),
        })
    } else {
        None
    }
}

/// ITL growing along the output (positions 257+ vs 1-64).
fn rule_tpot_grows_with_length(c: &ClientReport, who: &str) -> Option<Finding> {
    let mut evidence = Vec::new();
    for l in &c.levels {
        let b = &l.itl_by_position;
        let (early, late) = (b.first()?, b.last()?);
        if early.itl_ms.count < 20 || late.itl_ms.count < 20 {
            continue;
        }
        let (e, t) = (early.itl_ms.p50?, late.itl_ms.p50?);
        if t >= 1.2 * e && t - e >= 1.0 {
            evidence.push(format!(
                "{}: ITL p50 {} ms for tokens 1-64 -> {} ms for tokens {}+ (+{:.0}%)",
                l.label(),
                fmt_ms(Some(e)),
                fmt_ms(Some(t)),
                late.from,
                100.0 * (t / e - 1.0)
            ));
        }
    }
    (!evidence.is_empty()).then(|| Finding {
        rule: RuleId::TpotGrowsWithLength,
        title: format!("{who}: decode slows down as the response grows"),
        evidence,
        advice: "Attention cost grows with the sequence (KV cache read per token), and batch composition changes; compare ITL by position at a fixed batch, and check the KV-cache bandwidth floor for long contexts.".into(),
    })
}

/// p99/p50 above 3: some requests wait in queues.
fn rule_tail_queueing(c: &ClientReport, who: &str) -> Option<Finding> {
    let mut evidence = Vec::new();
    for l in &c.levels {
        for (name, s) in [("TTFT", &l.metrics.ttft_ms), ("E2E", &l.metrics.e2e_ms)] {
            if s.count < 10 {
                continue;
            }
            if let (Some(p50), Some(p99)) = (s.p50, s.p99)
                && p50 > 0.0
                && p99 / p50 > 3.0
            {
                evidence.push(format!(
                    "{}: {name} p99 {} ms is {:.1}x p50 {} ms",
                    l.label(),
                    fmt_ms(Some(p99)),
                    p99 / p50,
                    fmt_ms(Some(p50))
                ));
            }
        }
    }
    (!evidence.is_empty()).then(|| Finding {
        rule: RuleId::TailQueueing,
        title: format!("{who}: p99 more than 3x p50: some requests wait in queues (users see \"some fast, some stuck\")"),
        evidence,
        advice: "Look at the slow requests in the raw file: one very long request stalling its batch, a queue in front of the server, or network jitter.".into(),
    })
}

/// Throughput flat while latency climbs: past the knee.
fn rule_past_the_knee(c: &ClientReport, who: &str) -> Option<Finding> {
    let knee = c.sweep.knee.as_ref()?;
    let k = c.levels.get(knee.level_index)?;
    let last = loaded(c).filter(|l| l.ok > 0).last()?;
    if std::ptr::eq(k, last) {
        return None;
    }
    let thr = last.output_tokens_per_s / k.output_tokens_per_s.max(1e-9);
    let lat = last.metrics.e2e_ms.p95? / k.metrics.e2e_ms.p95?.max(1e-9);
    (thr < 1.15 && lat > 1.25).then(|| Finding {
        rule: RuleId::PastTheKnee,
        title: format!("{who}: beyond {} throughput stays flat while latency climbs", k.label()),
        evidence: vec![format!(
            "{} -> {}: output throughput {} -> {} tok/s ({:+.0}%), p95 E2E {} -> {} ms ({:+.0}%)",
            k.label(),
            last.label(),
            fmt_rate(k.output_tokens_per_s),
            fmt_rate(last.output_tokens_per_s),
            100.0 * (thr - 1.0),
            fmt_ms(k.metrics.e2e_ms.p95),
            fmt_ms(last.metrics.e2e_ms.p95),
            100.0 * (lat - 1.0)
        )],
        advice: format!(
            "{} is the most load to promise; added users only queue. Scale out, or raise the server's batch size if memory allows.",
            k.label()
        ),
    })
}

/// Errors or timeouts growing with load.
fn rule_failures_grow_with_load(c: &ClientReport, who: &str) -> Option<Finding> {
    let levels: Vec<&LevelReport> = loaded(c).filter(|l| l.sent > 0).collect();
    if levels.len() < 2 {
        return None;
    }
    let rate = |l: &LevelReport| l.error_rate + l.timeout_rate;
    let (first, last) = (levels[0], levels[levels.len() - 1]);
    let (r0, r1) = (rate(first), rate(last));
    (r1 >= 0.01 && r1 >= r0 + 0.01 && r1 >= 2.0 * r0).then(|| Finding {
        rule: RuleId::FailuresGrowWithLoad,
        title: format!("{who}: errors and timeouts grow with load: the server cannot keep up"),
        evidence: levels
            .iter()
            .map(|l| {
                format!(
                    "{}: {:.1}% errors ({}), {:.1}% timeouts",
                    l.label(),
                    100.0 * l.error_rate,
                    if l.error_kinds.is_empty() {
                        "none".to_owned()
                    } else {
                        l.error_kinds.iter().map(|(k, n)| format!("{k}: {n}")).collect::<Vec<_>>().join(", ")
                    },
                    100.0 * l.timeout_rate
                )
            })
            .collect(),
        advice: "Low latency with many timeouts means the server sheds or stalls under load (or the client timeout is tight); read Retry-After, check server queue limits and memory.".into(),
    })
}

/// Rounds disagreeing by more than 2x.
fn rule_rounds_disagree(c: &ClientReport, who: &str) -> Option<Finding> {
    let mut evidence = Vec::new();
    for l in c.levels.iter().filter(|l| l.round_spread.rounds_disagree) {
        let rounds: Vec<String> = l
            .rounds
            .iter()
            .map(|r| {
                format!(
                    "round {}: TTFT p50 {} ms, E2E p50 {} ms{}",
                    r.round,
                    fmt_ms(r.ttft_ms_p50),
                    fmt_ms(r.e2e_ms_p50),
                    if r.outlier_metrics.is_empty() {
                        String::new()
                    } else {
                        format!(" (off on {})", r.outlier_metrics.join(", "))
                    }
                )
            })
            .collect();
        evidence.push(format!("{}: {}", l.label(), rounds.join("; ")));
    }
    (!evidence.is_empty()).then(|| Finding {
        rule: RuleId::RoundsDisagree,
        title: format!("{who}: rounds of the same level disagree by more than 2x: the environment was not stable"),
        evidence,
        advice: "Warm up longer (--warmup), check for other load on the server or the client, and look at the outlying round's requests in the raw file.".into(),
    })
}

/// The browser queued requests at 6 connections per host on HTTP/1.1.
fn rule_http1_limit(c: &ClientReport, who: &str) -> Option<Finding> {
    if c.source != Source::Browser {
        return None;
    }
    let proto = c.environment.protocol.as_deref()?;
    if !proto.eq_ignore_ascii_case("http/1.1") {
        return None;
    }
    let over: Vec<String> = c
        .levels
        .iter()
        .filter_map(|l| l.concurrency.filter(|&cc| cc > 6).map(|cc| (l, cc)))
        .map(|(l, cc)| {
            format!(
                "c={cc} over HTTP/1.1: at most 6 in flight per host; time to headers p50 {} ms",
                fmt_ms(l.metrics.time_to_headers_ms.p50)
            )
        })
        .collect();
    (!over.is_empty()).then(|| Finding {
        rule: RuleId::Http1ConnectionLimit,
        title: format!("{who}: the browser was stuck at 6 connections per host (HTTP/1.1): requests beyond 6 queued in the browser, not the server"),
        evidence: over,
        advice: "Serve the API over HTTP/2 (TLS) for browser clients, or read levels above 6 as browser-limited.".into(),
    })
}

/// The client was the bottleneck (rate-mode lag, event-loop lag).
fn rule_client_bound(c: &ClientReport, who: &str) -> Option<Finding> {
    let mut evidence: Vec<String> = c
        .warnings
        .iter()
        .filter(|w| w.kind == WarningKind::ClientBound)
        .map(|w| w.message.clone())
        .collect();
    // The levels' own check (a native report already carries it as a warning).
    for w in crate::report::warning::level_warnings(&c.levels) {
        if w.kind == WarningKind::ClientBound && !evidence.contains(&w.message) {
            evidence.push(w.message);
        }
    }
    (!evidence.is_empty()).then(|| Finding {
        rule: RuleId::ClientBound,
        title: format!("{who}: the client was the bottleneck: its own delays are in these numbers"),
        evidence,
        advice: "Run the client on a bigger or quieter machine, split the load over several clients, or lower the rate; `tokenscope calibrate` shows how much load one client measures faithfully.".into(),
    })
}

/// A soak's drift check fired.
fn rule_drift(c: &ClientReport, who: &str) -> Option<Finding> {
    let evidence: Vec<String> = c
        .levels
        .iter()
        .flat_map(|l| {
            l.drift.iter().filter(|d| d.flagged).map(move |d| {
                format!(
                    "{}: {} {:+.2} ms/min (95% CI +/- {:.2}), {:+.0}% over the run",
                    l.label(),
                    d.metric,
                    d.slope_ms_per_min,
                    d.slope_ci95_ms_per_min,
                    100.0 * d.change_over_run
                )
            })
        })
        .collect();
    (!evidence.is_empty()).then(|| Finding {
        rule: RuleId::Drift,
        title: format!("{who}: latency drifts over the run"),
        evidence,
        advice: "A steady load that gets slower points at the server: KV-cache fragmentation, memory pressure, thermal throttling or a leak; watch server memory over time.".into(),
    })
}

/// Client TPOT far from the server's own per-token time (llama.cpp timings).
fn rule_server_timing_gap(c: &ClientReport, who: &str) -> Option<Finding> {
    let mut evidence = Vec::new();
    for l in &c.levels {
        let (Some(client), Some(server)) = (
            l.metrics.tpot_ms.p50,
            l.metrics.server_tpot_ms.as_ref().and_then(|s| s.p50),
        ) else {
            continue;
        };
        if server > 0.0 && (client / server > 1.25 || server / client > 1.25) {
            evidence.push(format!(
                "{}: client TPOT p50 {} ms vs the server's own {} ms per token ({:.2}x)",
                l.label(),
                fmt_ms(Some(client)),
                fmt_ms(Some(server)),
                client / server
            ));
        }
    }
    (!evidence.is_empty()).then(|| Finding {
        rule: RuleId::ServerTimingGap,
        title: format!("{who}: the client's TPOT and the server's own timing disagree"),
        evidence,
        advice: "Before blaming the model, look at the network and the client (buffering proxies, parsing, rendering): the server generates faster than the client receives.".into(),
    })
}

/// TTFT rising with input length across reports of different input tiers.
fn rule_ttft_grows_with_input(clients: &[ClientReport]) -> Option<Finding> {
    let mut tiers: Vec<(u32, f64, String)> = clients
        .iter()
        .filter_map(|c| {
            let tokens = c.config.input_tokens?;
            let l = c.lowest_level()?;
            Some((tokens, l.metrics.ttft_ms.p50?, l.label()))
        })
        .collect();
    tiers.sort_by_key(|t| t.0);
    tiers.dedup_by_key(|t| t.0);
    if tiers.len() < 2 {
        return None;
    }
    let (first, last) = (&tiers[0], &tiers[tiers.len() - 1]);
    (last.1 >= 1.5 * first.1).then(|| Finding {
        rule: RuleId::TtftGrowsWithInput,
        title: "TTFT grows with the prompt: prefill is a large part of the wait".into(),
        evidence: tiers
            .iter()
            .map(|(t, v, l)| format!("~{t} input tokens: TTFT p50 {} ms ({l})", fmt_ms(Some(*v))))
            .collect(),
        advice: "Long prompts cost prefill time per token; cache shared prefixes, shorten system prompts, or use chunked prefill so long prompts do not stall others.".into(),
    })
}
