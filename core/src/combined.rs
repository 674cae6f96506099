//! One report from everything measured: client reports (native and/or browser),
//! a GPU kernels report and the model being served, analysed into a verdict in
//! sentences, a diagnosis whose every finding quotes its evidence, the native vs
//! browser difference per stage, and the server's TPOT against the GPU's
//! bandwidth floor. Rendered as Markdown ([`markdown`]) or one self-contained HTML
//! file ([`html`]); the web page shows the same analysis.

use serde::{Deserialize, Serialize};

use crate::export::{escape_html, fmt_ms, fmt_rate};
use crate::floor::{ModelShape, Quant};
use crate::kernels::{FloorRow, KernelReport};
use crate::report::{ClientReport, LevelReport, Load, Source};
use crate::stats::Summary;

/// The model being served, for the floor comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelChoice {
    /// Its shape (a preset or a custom config).
    pub shape: ModelShape,
    /// Weight format served.
    pub quant: Quant,
    /// Context length to evaluate the floor at (KV cache read per token).
    pub context: u64,
}

/// Everything a report is made from.
#[derive(Debug, Clone, Default)]
pub struct ReportInput {
    /// Client reports, in the order given.
    pub clients: Vec<ClientReport>,
    /// The GPU kernel harness's report.
    pub kernels: Option<KernelReport>,
    /// The model being served.
    pub model: Option<ModelChoice>,
}

/// A diagnosis finding: shown only when its evidence is in the data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable rule id (`tail_queueing`, ...).
    pub rule: String,
    /// What it means, in one line.
    pub title: String,
    /// The numbers that triggered it.
    pub evidence: Vec<String>,
    /// What to check or do.
    pub advice: String,
}

/// TPOT against the GPU floor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloorComparison {
    /// The floor row used.
    pub floor: FloorRow,
    /// GPU (adapter) name.
    pub gpu: String,
    /// Measured TPOT p50 at the lowest load, ms.
    pub tpot_p50_ms: f64,
    /// Which level it came from.
    pub level: String,
    /// `tpot_p50_ms / tpot_floor_ms`.
    pub ratio: f64,
    /// Where the floor came from (`kernels report`, `computed from measured bandwidth`).
    pub source: String,
}

/// One stage of the native vs browser comparison (p50s at one load level).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageDelta {
    /// Stage name.
    pub stage: String,
    /// Native p50, ms.
    pub native_ms: Option<f64>,
    /// Browser p50, ms.
    pub browser_ms: Option<f64>,
    /// Browser minus native, ms: the browser's own cost at this stage.
    pub delta_ms: Option<f64>,
}

/// The native vs browser comparison at one load level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The level compared (`c=1`).
    pub level: String,
    /// Stages.
    pub stages: Vec<StageDelta>,
    /// Browser protocol, when known.
    pub browser_protocol: Option<String>,
}

/// The analysed report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Combined {
    /// The verdict: sentences with numbers, most important first.
    pub verdict: Vec<String>,
    /// The diagnosis.
    pub findings: Vec<Finding>,
    /// Native vs browser, when both are given.
    pub comparison: Option<Comparison>,
    /// TPOT vs the floor, when a kernels report and a model are given.
    pub floor: Option<FloorComparison>,
    /// Notes on the inputs (missing pieces, warnings carried from the runs).
    pub notes: Vec<String>,
}

fn label(c: &ClientReport) -> &'static str {
    match c.source {
        Source::Native => "native",
        Source::Browser => "browser",
    }
}

fn p(s: &Summary, key: &str) -> Option<f64> {
    s.get(key)
}

/// The level the verdict speaks about: SLO capacity, else the knee, else the highest load.
fn headline_level(c: &ClientReport) -> Option<&LevelReport> {
    if let Some(cap) = &c.sweep.slo_capacity {
        return c.levels.get(cap.level_index);
    }
    if let Some(k) = &c.sweep.knee {
        return c.levels.get(k.level_index);
    }
    c.levels.iter().rev().find(|l| l.ok > 0)
}

/// The lowest-load level with successes (where batch-1 decode is measured).
fn lowest_level(c: &ClientReport) -> Option<&LevelReport> {
    c.levels
        .iter()
        .filter(|l| l.ok > 0)
        .min_by(|a, b| a.load().value().total_cmp(&b.load().value()))
}

/// Analyse the inputs.
pub fn analyze(input: &ReportInput) -> Combined {
    let mut verdict = Vec::new();
    let mut notes = Vec::new();
    let browser = input.clients.iter().find(|c| c.source == Source::Browser);
    let native = input.clients.iter().find(|c| c.source == Source::Native);
    let primary = browser.or(native);

    // 1. What users wait for the first token.
    if let Some(b) = browser
        && let Some(l) = headline_level(b)
    {
        let m = &l.metrics;
        let rendered = m.rendered_ttft_ms.as_ref().and_then(|s| p(s, "p95"));
        let ttft = p(&m.ttft_ms, "p95");
        match (rendered, ttft) {
            (Some(r), Some(t)) => verdict.push(format!(
                "At {}, users wait {} ms for the first token at p95 (user-perceived, painted), of which {} ms is browser rendering and {} ms waiting for the response headers{}.",
                l.load().label(),
                fmt_ms(Some(r)),
                fmt_ms(Some((r - t).max(0.0))),
                fmt_ms(p(&m.time_to_headers_ms, "p95")),
                if b.environment.simulated { " (against the page's simulated endpoint)" } else { "" }
            )),
            (None, Some(t)) => verdict.push(format!(
                "At {}, p95 TTFT in the browser is {} ms (no paint times were recorded).",
                l.load().label(),
                fmt_ms(Some(t))
            )),
            _ => {}
        }
    } else if let Some(n) = native
        && let Some(l) = headline_level(n)
    {
        let m = &l.metrics;
        verdict.push(format!(
            "At {}, p95 TTFT is {} ms ({} ms waiting for the response headers) and TPOT p50 is {} ms; rendering is not included (native client: add a browser run for user-perceived TTFT).",
            l.load().label(),
            fmt_ms(p(&m.ttft_ms, "p95")),
            fmt_ms(p(&m.time_to_headers_ms, "p95")),
            fmt_ms(p(&m.tpot_ms, "p50")),
        ));
    }

    // 2. TPOT against the GPU floor.
    let floor = floor_comparison(input, native.or(browser));
    if let Some(f) = floor.as_ref().filter(|f| f.ratio < BELOW_FLOOR_RATIO) {
        verdict.push(format!(
            "TPOT p50 {} ms at {} is below the bandwidth floor ({} ms) of {} for {} {} at {} context, which no server on that GPU can do: the model, quantization or GPU given does not match what served these requests.",
            fmt_ms(Some(f.tpot_p50_ms)),
            f.level,
            fmt_ms(Some(f.floor.estimate.tpot_floor_ms)),
            f.gpu,
            f.floor.estimate.model,
            f.floor.estimate.quant,
            context_label(f.floor.estimate.context)
        ));
    } else if let Some(f) = &floor {
        verdict.push(format!(
            "TPOT p50 {} ms at {} is {:.1}x the bandwidth floor ({} ms) of {} for {} {} at {} context.",
            fmt_ms(Some(f.tpot_p50_ms)),
            f.level,
            f.ratio,
            fmt_ms(Some(f.floor.estimate.tpot_floor_ms)),
            f.gpu,
            f.floor.estimate.model,
            f.floor.estimate.quant,
            context_label(f.floor.estimate.context)
        ));
    } else if input.kernels.is_some() && input.model.is_none() {
        notes
            .push("a kernels report was given without --model/--quant: no floor comparison".into());
    } else if input.model.is_some() && input.kernels.is_none() {
        notes.push("--model was given without a kernels report: no floor comparison (run tokenscope kernels --out kernels.json)".into());
    }

    // 3. Capacity.
    if let Some(c) = primary {
        if let Some(cap) = &c.sweep.slo_capacity {
            let level = &c.levels[cap.level_index];
            verdict.push(format!(
                "Capacity at your SLO ({}): {} ({} tok/s, {} req/s).",
                cap.slos.join(", "),
                capacity_label(level.load()),
                fmt_rate(cap.output_tokens_per_s),
                fmt_rate(cap.requests_per_s)
            ));
        } else if !c.config.slos.is_empty() {
            verdict.push(format!(
                "No load level met your SLO ({}).",
                c.config
                    .slos
                    .iter()
                    .map(crate::slo::Slo::label)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(k) = &c.sweep.knee {
            let level = &c.levels[k.level_index];
            verdict.push(format!(
                "Throughput stops scaling past {} (the knee): {} tok/s there; beyond it latency grows faster than throughput.",
                level.load().label(),
                fmt_rate(level.output_tokens_per_s)
            ));
        } else if c.levels.len() > 1 {
            verdict.push(format!(
                "No knee within the levels tried (up to {}): latency never grew faster than throughput.",
                c.levels.last().map(|l| l.load().label()).unwrap_or_default()
            ));
        }
        let sent: u64 = c.levels.iter().map(|l| l.sent).sum();
        let errors: u64 = c.levels.iter().map(|l| l.errors).sum();
        let timeouts: u64 = c.levels.iter().map(|l| l.timeouts).sum();
        if errors + timeouts > 0 && sent > 0 {
            let mut kinds: std::collections::BTreeMap<&str, u64> = Default::default();
            for l in &c.levels {
                for (k, n) in &l.error_kinds {
                    *kinds.entry(k.as_str()).or_default() += n;
                }
            }
            verdict.push(format!(
                "{:.1}% of {} requests failed ({}) and {:.1}% timed out.",
                100.0 * errors as f64 / sent as f64,
                sent,
                kinds
                    .iter()
                    .map(|(k, n)| format!("{k}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                100.0 * timeouts as f64 / sent as f64
            ));
        }
    }
    for c in &input.clients {
        for w in &c.warnings {
            notes.push(format!("{} run: {}", label(c), w.message));
        }
        if c.interrupted {
            notes.push(format!("{} run was interrupted: partial results", label(c)));
        }
    }
    let comparison = match (native, browser) {
        (Some(n), Some(b)) => compare(n, b),
        _ => None,
    };
    Combined {
        verdict,
        findings: diagnose(input),
        comparison,
        floor,
        notes,
    }
}

/// A measured TPOT under this fraction of the bandwidth floor is impossible for the
/// model on that GPU (the floor or the model is wrong); a little under 1 is noise.
const BELOW_FLOOR_RATIO: f64 = 0.95;

fn ratio_label(r: f64) -> String {
    if r >= BELOW_FLOOR_RATIO {
        format!("{r:.1}x")
    } else {
        format!("{r:.3}x (below: impossible for this model on this GPU)")
    }
}

fn capacity_label(load: Load) -> String {
    match load {
        Load::Concurrency(c) => format!("{c} concurrent users"),
        Load::Rate(r) => format!("{r} requests/s"),
    }
}

fn context_label(c: u64) -> String {
    if c >= 1024 && c.is_multiple_of(1024) {
        format!("{}k", c / 1024)
    } else {
        c.to_string()
    }
}

fn floor_comparison(input: &ReportInput, client: Option<&ClientReport>) -> Option<FloorComparison> {
    let kernels = input.kernels.as_ref()?;
    let model = input.model.as_ref()?;
    let client = client?;
    let level = lowest_level(client)?;
    let tpot = p(&level.metrics.tpot_ms, "p50")?;
    let (row, source) = match kernels.decode_floor.iter().find(|r| {
        r.estimate.model == model.shape.name
            && r.estimate.quant == model.quant
            && r.estimate.context == model.context
    }) {
        Some(r) => (r.clone(), "from the kernels report".to_owned()),
        None => {
            let row = kernels.floor_for(&model.shape, model.quant, model.context)?;
            (
                row,
                "computed from the kernels report's measured bandwidths".to_owned(),
            )
        }
    };
    let ratio = tpot / row.estimate.tpot_floor_ms;
    Some(FloorComparison {
        gpu: kernels.adapter.name.clone(),
        tpot_p50_ms: tpot,
        level: level.load().label(),
        ratio,
        floor: row,
        source,
    })
}

fn compare(native: &ClientReport, browser: &ClientReport) -> Option<Comparison> {
    // The lowest load both ran.
    let (n, b) = browser
        .levels
        .iter()
        .filter(|b| b.ok > 0)
        .filter_map(|b| {
            native
                .levels
                .iter()
                .find(|n| n.ok > 0 && n.load() == b.load())
                .map(|n| (n, b))
        })
        .min_by(|x, y| x.0.load().value().total_cmp(&y.0.load().value()))?;
    let stage = |name: &str, ns: Option<&Summary>, bs: Option<&Summary>| {
        let nv = ns.and_then(|s| s.p50);
        let bv = bs.and_then(|s| s.p50);
        StageDelta {
            stage: name.to_owned(),
            native_ms: nv,
            browser_ms: bv,
            delta_ms: match (nv, bv) {
                (Some(a), Some(b)) => Some(b - a),
                _ => None,
            },
        }
    };
    let (nm, bm) = (&n.metrics, &b.metrics);
    Some(Comparison {
        level: n.load().label(),
        stages: vec![
            stage(
                "time to headers",
                Some(&nm.time_to_headers_ms),
                Some(&bm.time_to_headers_ms),
            ),
            stage(
                "time to first byte",
                Some(&nm.time_to_first_byte_ms),
                Some(&bm.time_to_first_byte_ms),
            ),
            stage(
                "TTFT (first token parsed)",
                Some(&nm.ttft_ms),
                Some(&bm.ttft_ms),
            ),
            stage(
                "rendered TTFT (first token painted)",
                Some(&nm.ttft_ms),
                bm.rendered_ttft_ms.as_ref(),
            ),
            stage("ITL", Some(&nm.itl_ms), Some(&bm.itl_ms)),
            stage("TPOT", Some(&nm.tpot_ms), Some(&bm.tpot_ms)),
            stage("E2E", Some(&nm.e2e_ms), Some(&bm.e2e_ms)),
        ],
        browser_protocol: browser.environment.protocol.clone(),
    })
}

/// Every diagnosis rule, in the order shown. Each returns a finding only when its
/// evidence is in the data.
pub fn diagnose(input: &ReportInput) -> Vec<Finding> {
    let mut out = Vec::new();
    for c in &input.clients {
        let who = label(c);
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
    }
    out.extend(rule_ttft_grows_with_input(&input.clients));
    out
}

/// TTFT rising much faster than TPOT as load grows: prefill and queueing, not decode.
fn rule_ttft_queueing(c: &ClientReport, who: &str) -> Option<Finding> {
    let levels: Vec<&LevelReport> = c.levels.iter().filter(|l| l.ok > 0).collect();
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
            rule: "ttft_prefill_queueing".into(),
            title: format!("{who}: TTFT climbs with load far more than decode does: requests wait for prefill or in a queue"),
            evidence: vec![
                format!(
                    "TTFT p50 {} ms at {} -> {} ms at {} ({growth:.1}x), while TPOT p50 grew {tpot_growth:.1}x",
                    fmt_ms(Some(t0)),
                    first.load().label(),
                    fmt_ms(Some(t1)),
                    last.load().label()
                ),
                format!("TTFT p99/p50 at {}: {unstable:.1}", last.load().label()),
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
                l.load().label(),
                fmt_ms(Some(e)),
                fmt_ms(Some(t)),
                late.from,
                100.0 * (t / e - 1.0)
            ));
        }
    }
    (!evidence.is_empty()).then(|| Finding {
        rule: "tpot_grows_with_length".into(),
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
                    l.load().label(),
                    fmt_ms(Some(p99)),
                    p99 / p50,
                    fmt_ms(Some(p50))
                ));
            }
        }
    }
    (!evidence.is_empty()).then(|| Finding {
        rule: "tail_queueing".into(),
        title: format!("{who}: p99 more than 3x p50: some requests wait in queues (users see \"some fast, some stuck\")"),
        evidence,
        advice: "Look at the slow requests in the raw file: one very long request stalling its batch, a queue in front of the server, or network jitter.".into(),
    })
}

/// Throughput flat while latency climbs: past the knee.
fn rule_past_the_knee(c: &ClientReport, who: &str) -> Option<Finding> {
    let knee = c.sweep.knee.as_ref()?;
    let k = c.levels.get(knee.level_index)?;
    let last = c.levels.iter().rev().find(|l| l.ok > 0)?;
    if std::ptr::eq(k, last) {
        return None;
    }
    let thr = last.output_tokens_per_s / k.output_tokens_per_s.max(1e-9);
    let lat = last.metrics.e2e_ms.p95? / k.metrics.e2e_ms.p95?.max(1e-9);
    (thr < 1.15 && lat > 1.25).then(|| Finding {
        rule: "past_the_knee".into(),
        title: format!("{who}: beyond {} throughput stays flat while latency climbs", k.load().label()),
        evidence: vec![format!(
            "{} -> {}: output throughput {} -> {} tok/s ({:+.0}%), p95 E2E {} -> {} ms ({:+.0}%)",
            k.load().label(),
            last.load().label(),
            fmt_rate(k.output_tokens_per_s),
            fmt_rate(last.output_tokens_per_s),
            100.0 * (thr - 1.0),
            fmt_ms(k.metrics.e2e_ms.p95),
            fmt_ms(last.metrics.e2e_ms.p95),
            100.0 * (lat - 1.0)
        )],
        advice: format!(
            "{} is the most load to promise; added users only queue. Scale out, or raise the server's batch size if memory allows.",
            k.load().label()
        ),
    })
}

/// Errors or timeouts growing with load.
fn rule_failures_grow_with_load(c: &ClientReport, who: &str) -> Option<Finding> {
    let levels: Vec<&LevelReport> = c.levels.iter().filter(|l| l.sent > 0).collect();
    if levels.len() < 2 {
        return None;
    }
    let rate = |l: &LevelReport| l.error_rate + l.timeout_rate;
    let (first, last) = (levels[0], levels[levels.len() - 1]);
    let (r0, r1) = (rate(first), rate(last));
    (r1 >= 0.01 && r1 >= r0 + 0.01 && r1 >= 2.0 * r0).then(|| Finding {
        rule: "failures_grow_with_load".into(),
        title: format!("{who}: errors and timeouts grow with load: the server cannot keep up"),
        evidence: levels
            .iter()
            .map(|l| {
                format!(
                    "{}: {:.1}% errors ({}), {:.1}% timeouts",
                    l.load().label(),
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
        evidence.push(format!("{}: {}", l.load().label(), rounds.join("; ")));
    }
    (!evidence.is_empty()).then(|| Finding {
        rule: "rounds_disagree".into(),
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
        rule: "http1_connection_limit".into(),
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
        .filter(|w| w.kind == "client_bound")
        .map(|w| w.message.clone())
        .collect();
    // The levels' own check (a native report already carries it as a warning).
    for w in crate::report::level_warnings(&c.levels) {
        if w.kind == "client_bound" && !evidence.contains(&w.message) {
            evidence.push(w.message);
        }
    }
    (!evidence.is_empty()).then(|| Finding {
        rule: "client_bound".into(),
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
                    l.load().label(),
                    d.metric,
                    d.slope_ms_per_min,
                    d.slope_ci95_ms_per_min,
                    100.0 * d.change_over_run
                )
            })
        })
        .collect();
    (!evidence.is_empty()).then(|| Finding {
        rule: "drift".into(),
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
                l.load().label(),
                fmt_ms(Some(client)),
                fmt_ms(Some(server)),
                client / server
            ));
        }
    }
    (!evidence.is_empty()).then(|| Finding {
        rule: "server_timing_gap".into(),
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
            let l = lowest_level(c)?;
            Some((tokens, l.metrics.ttft_ms.p50?, l.load().label()))
        })
        .collect();
    tiers.sort_by_key(|t| t.0);
    tiers.dedup_by_key(|t| t.0);
    if tiers.len() < 2 {
        return None;
    }
    let (first, last) = (&tiers[0], &tiers[tiers.len() - 1]);
    (last.1 >= 1.5 * first.1).then(|| Finding {
        rule: "ttft_grows_with_input".into(),
        title: "TTFT grows with the prompt: prefill is a large part of the wait".into(),
        evidence: tiers
            .iter()
            .map(|(t, v, l)| format!("~{t} input tokens: TTFT p50 {} ms ({l})", fmt_ms(Some(*v))))
            .collect(),
        advice: "Long prompts cost prefill time per token; cache shared prefixes, shorten system prompts, or use chunked prefill so long prompts do not stall others.".into(),
    })
}

/// One glossary entry.
#[derive(Debug, Clone, Copy)]
pub struct GlossaryEntry {
    /// Metric name as reported.
    pub name: &'static str,
    /// Its definition.
    pub definition: &'static str,
    /// What other tools call it.
    pub peers: &'static str,
}

/// The metric definitions (the same as docs/metrics.md).
pub const GLOSSARY: &[GlossaryEntry] = &[
    GlossaryEntry {
        name: "TTFT",
        definition: "t_first_token - t_send: until the first event carrying generated text, reasoning or a tool-call delta arrives (a role-only or empty delta is not a token)",
        peers: "TTFT everywhere; vLLM's benchmark counts the role-only chunk",
    },
    GlossaryEntry {
        name: "Rendered TTFT",
        definition: "t_first_paint - t_send: until the first token is painted on screen (Element Timing renderTime, or the animation frame after the DOM update)",
        peers: "no peer measures it",
    },
    GlossaryEntry {
        name: "Render delay",
        definition: "t_first_paint - t_first_token",
        peers: "-",
    },
    GlossaryEntry {
        name: "Time to headers",
        definition: "t_headers - t_send",
        peers: "llm-load-test tt_ack",
    },
    GlossaryEntry {
        name: "TPOT",
        definition: "(t_last_token - t_first_token) / (output_tokens - 1), output tokens from the server's usage",
        peers: "vLLM/SGLang TPOT; GenAI-Perf, AIPerf, inference-benchmarker, GuideLLM call it ITL; GuideLLM's TPOT includes TTFT",
    },
    GlossaryEntry {
        name: "ITL",
        definition: "each gap between consecutive content events, over all requests (per token: the gap divided by the tokens in the later event)",
        peers: "vLLM ITL, AIPerf ICL",
    },
    GlossaryEntry {
        name: "E2E",
        definition: "t_done - t_send",
        peers: "E2EL, request latency",
    },
    GlossaryEntry {
        name: "Output throughput",
        definition: "output tokens of successful requests / measured window",
        peers: "output tok/s",
    },
    GlossaryEntry {
        name: "Goodput",
        definition: "requests per second that met every SLO",
        peers: "DistServe goodput",
    },
    GlossaryEntry {
        name: "Knee",
        definition: "the first level after which p95 E2E grows faster than output throughput (elasticity > 1, latency +10% or more)",
        peers: "-",
    },
    GlossaryEntry {
        name: "TPOT floor",
        definition: "weight bytes / GEMV bandwidth + KV bytes / attention bandwidth, both measured on the GPU",
        peers: "memory-bandwidth roofline",
    },
];

// ---------------------------------------------------------------------------
// Rendering

fn level_rows(c: &ClientReport) -> (Vec<String>, Vec<Vec<String>>) {
    let browser = c.source == Source::Browser;
    crate::export::level_table(
        c,
        crate::export::LevelColumns {
            painted: browser,
            render_delay: browser,
            goodput: true,
            health: true,
            knee_marker: true,
        },
    )
}

/// The native-vs-browser table's rows (Markdown and HTML).
fn comparison_rows(cmp: &Comparison) -> Vec<Vec<String>> {
    cmp.stages
        .iter()
        .map(|s| {
            vec![
                s.stage.clone(),
                fmt_ms(s.native_ms),
                fmt_ms(s.browser_ms),
                s.delta_ms
                    .map(|d| format!("{d:+.1}"))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect()
}

/// The TPOT-vs-floor paragraph (Markdown and HTML).
fn floor_sentence(f: &FloorComparison) -> String {
    let e = &f.floor.estimate;
    format!(
        "{} on {}: {} bytes per token ({} weights + {} KV at {} context), GEMV {} GB/s ({}), attention {} GB/s ({}): floor {} ms/token, ceiling {} tok/s. Measured TPOT p50 {} ms at {}: {} the floor. Floor: {}.",
        e.model,
        f.gpu,
        e.bytes_per_token,
        e.weight_bytes,
        e.kv_bytes,
        e.context,
        fmt_rate(e.gemv_gbps),
        f.floor.gemv_source,
        fmt_rate(e.attention_gbps),
        f.floor.attention_source,
        fmt_ms(Some(e.tpot_floor_ms)),
        fmt_rate(e.tokens_per_s_ceiling),
        fmt_ms(Some(f.tpot_p50_ms)),
        f.level,
        ratio_label(f.ratio),
        f.source
    )
}

/// The report as Markdown.
// Sentences and headers the Markdown and the HTML renderings share.
const NOTHING_TO_CONCLUDE: &str = "Nothing to conclude: no level had a successful request.";
const NO_RULE_FIRED: &str = "No rule fired: none of the known symptoms is in the data.";
const ROUND_SPREAD_NOTE: &str = "Times in ms. Round spread: (max - min) / median of the rounds' E2E medians; ! = a round more than 2x off.";
const COMPARISON_HEADERS: [&str; 4] = ["stage", "native ms", "browser ms", "browser's own cost ms"];
const GLOSSARY_HEADERS: [&str; 3] = ["metric", "definition", "other tools"];

pub fn markdown(input: &ReportInput, c: &Combined) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("# tokenscope report\n\n");
    let _ = writeln!(out, "{}\n", inputs_line(input));
    out.push_str("## Verdict\n\n");
    if c.verdict.is_empty() {
        let _ = writeln!(out, "{NOTHING_TO_CONCLUDE}");
    }
    for v in &c.verdict {
        let _ = writeln!(out, "- {v}");
    }
    out.push_str("\n## Diagnosis\n\n");
    if c.findings.is_empty() {
        let _ = writeln!(out, "{NO_RULE_FIRED}");
    }
    for f in &c.findings {
        let _ = writeln!(out, "### {}\n", f.title);
        for e in &f.evidence {
            let _ = writeln!(out, "- {e}");
        }
        let _ = writeln!(out, "\n{}\n", f.advice);
    }
    for client in &input.clients {
        let _ = writeln!(
            out,
            "\n## Levels ({} client: {} at {})\n",
            label(client),
            client.config.model,
            client.config.url
        );
        let (h, rows) = level_rows(client);
        out.push_str(&crate::export::markdown_table(&h, &rows));
        let _ = writeln!(out, "\n{ROUND_SPREAD_NOTE}");
    }
    if let Some(cmp) = &c.comparison {
        let _ = writeln!(out, "\n## Native vs browser ({}, p50)\n", cmp.level);
        let h = COMPARISON_HEADERS.map(str::to_owned);
        let rows = comparison_rows(cmp);
        out.push_str(&crate::export::markdown_table(&h, &rows));
    }
    if let Some(f) = &c.floor {
        let _ = writeln!(out, "\n## TPOT vs the GPU floor\n\n{}", floor_sentence(f));
    }
    if let Some(k) = &input.kernels {
        let _ = writeln!(
            out,
            "\n## GPU kernels ({}, timing: {})\n",
            k.adapter.name,
            k.timing.label()
        );
        let (h, rows) = kernel_table(k);
        out.push_str(&crate::export::markdown_table(&h, &rows));
    }
    if !c.notes.is_empty() {
        out.push_str("\n## Notes\n\n");
        for n in &c.notes {
            let _ = writeln!(out, "- {n}");
        }
    }
    let _ = writeln!(
        out,
        "\n## Glossary\n\n| {} |\n|---|---|---|",
        GLOSSARY_HEADERS.join(" | ")
    );
    for g in GLOSSARY {
        let _ = writeln!(out, "| {} | {} | {} |", g.name, g.definition, g.peers);
    }
    out
}

fn inputs_line(input: &ReportInput) -> String {
    let mut parts: Vec<String> = input
        .clients
        .iter()
        .map(|c| {
            format!(
                "{} client, {} at {}, {}{}",
                label(c),
                c.config.model,
                c.config.url,
                c.environment
                    .started_at
                    .as_deref()
                    .unwrap_or("time not recorded"),
                if c.environment.simulated {
                    " (simulated endpoint)"
                } else {
                    ""
                }
            )
        })
        .collect();
    if let Some(k) = &input.kernels {
        parts.push(format!(
            "GPU kernels on {} ({}, {})",
            k.adapter.name, k.adapter.device_type, k.adapter.backend
        ));
    }
    if let Some(m) = &input.model {
        parts.push(format!(
            "model {} {} at {} context",
            m.shape.name, m.quant, m.context
        ));
    }
    format!("From: {}.", parts.join("; "))
}

/// The kernel table ([`crate::kernels::kernel_table`]) with the bandwidth ceiling's
/// read and copy rows on top.
fn kernel_table(k: &KernelReport) -> (Vec<String>, Vec<Vec<String>>) {
    let (headers, kernel_rows) = crate::kernels::kernel_table(k);
    let mut rows = Vec::new();
    if let Some(b) = &k.bandwidth {
        let row = |name: &str, shape: String, gbps: f64, fraction: &str, verified: bool| {
            let cells = [
                ("kernel", name.to_owned()),
                ("shape", shape),
                ("GB/s", fmt_rate(gbps)),
                ("of read bw", fraction.to_owned()),
                (
                    "verified",
                    crate::kernels::verified_label(verified).to_owned(),
                ),
            ];
            headers
                .iter()
                .map(|h| {
                    cells
                        .iter()
                        .find(|(name, _)| name == h)
                        .map_or_else(|| "-".to_owned(), |(_, v)| v.clone())
                })
                .collect::<Vec<_>>()
        };
        rows.push(row(
            "read (ceiling)",
            format!("{} MB", b.working_set_bytes / 1_000_000),
            b.read_gbps,
            "100%",
            b.read_verified,
        ));
        rows.push(row("copy", "-".into(), b.copy_gbps, "-", b.copy_verified));
    }
    rows.extend(kernel_rows);
    (headers, rows)
}

fn html_table(h: &[String], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table><thead><tr>");
    for x in h {
        out.push_str(&format!("<th>{}</th>", escape_html(x)));
    }
    out.push_str("</tr></thead><tbody>");
    for r in rows {
        out.push_str("<tr>");
        for x in r {
            out.push_str(&format!("<td>{}</td>", escape_html(x)));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

const CSS: &str = "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1180px;padding:24px;color:#1d2330;background:#fff}h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid #d8dde6;padding-bottom:4px}h3{font-size:15px;margin:16px 0 4px}.from{color:#5a6478}.verdict li{font-size:15px;margin:6px 0}.finding{border-left:4px solid #d9822b;background:#fdf6ee;padding:8px 12px;margin:10px 0}.finding ul{margin:4px 0}.advice{color:#3c4658}table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums}th,td{border:1px solid #d8dde6;padding:3px 7px;text-align:right}th{background:#f3f5f9}td:first-child,th:first-child{text-align:left}.charts{display:flex;flex-wrap:wrap;gap:16px}.chart{flex:1 1 520px}.chart svg{max-width:100%;height:auto}.notes li{color:#5a6478}code{background:#f3f5f9;padding:0 3px}td.text{text-align:left}";

/// The report as one self-contained HTML document: inline CSS and SVG, no
/// scripts, fonts, styles or images from anywhere else.
pub fn html(input: &ReportInput, c: &Combined) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>tokenscope report</title><style>{CSS}</style></head><body><h1>tokenscope report</h1>{}</body></html>\n",
        html_body(input, c)
    )
}

/// The report's content as an HTML fragment (no document, no style): what
/// [`html`] wraps, and what the web page inlines in its own layout. Every text in
/// it is escaped; it holds no script and no style attribute (the page's
/// Content-Security-Policy allows neither).
pub fn html_body(input: &ReportInput, c: &Combined) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = write!(
        o,
        "<p class=\"from\">{}</p>",
        escape_html(&inputs_line(input))
    );
    o.push_str("<h2 id=\"verdict\">Verdict</h2><ul class=\"verdict\">");
    if c.verdict.is_empty() {
        let _ = write!(o, "<li>{NOTHING_TO_CONCLUDE}</li>");
    }
    for v in &c.verdict {
        let _ = write!(o, "<li>{}</li>", escape_html(v));
    }
    o.push_str("</ul><h2 id=\"diagnosis\">Diagnosis</h2>");
    if c.findings.is_empty() {
        let _ = write!(o, "<p>{NO_RULE_FIRED}</p>");
    }
    for f in &c.findings {
        let _ = write!(
            o,
            "<div class=\"finding\" data-rule=\"{}\"><h3>{}</h3><ul>",
            escape_html(&f.rule),
            escape_html(&f.title)
        );
        for e in &f.evidence {
            let _ = write!(o, "<li>{}</li>", escape_html(e));
        }
        let _ = write!(
            o,
            "</ul><p class=\"advice\">{}</p></div>",
            escape_html(&f.advice)
        );
    }
    o.push_str("<h2 id=\"charts\">Charts</h2><div class=\"charts\">");
    for chart in charts(input, c) {
        let _ = write!(o, "<figure class=\"chart\">{}</figure>", chart);
    }
    o.push_str("</div>");
    for client in &input.clients {
        let _ = write!(
            o,
            "<h2>Levels: {} client ({} at {})</h2>",
            label(client),
            escape_html(&client.config.model),
            escape_html(&client.config.url)
        );
        let (h, rows) = level_rows(client);
        o.push_str(&html_table(&h, &rows));
        let _ = write!(
            o,
            "<p class=\"from\">{}</p>",
            escape_html(ROUND_SPREAD_NOTE)
        );
    }
    if let Some(cmp) = &c.comparison {
        let _ = write!(
            o,
            "<h2 id=\"comparison\">Native vs browser ({}, p50)</h2>",
            escape_html(&cmp.level)
        );
        let h = COMPARISON_HEADERS.map(str::to_owned);
        let rows = comparison_rows(cmp);
        o.push_str(&html_table(&h, &rows));
        if let Some(p) = &cmp.browser_protocol {
            let _ = write!(
                o,
                "<p class=\"from\">Browser protocol: {}.</p>",
                escape_html(p)
            );
        }
    }
    if let Some(f) = &c.floor {
        let _ = write!(
            o,
            "<h2 id=\"floor\">TPOT vs the GPU floor</h2><p>{}</p>",
            escape_html(&floor_sentence(f))
        );
    }
    if let Some(k) = &input.kernels {
        let _ = write!(
            o,
            "<h2 id=\"kernels\">GPU kernels: {} ({}, timing: {})</h2>",
            escape_html(&k.adapter.name),
            escape_html(&k.adapter.device_type),
            k.timing.label()
        );
        let (h, rows) = kernel_table(k);
        o.push_str(&html_table(&h, &rows));
    }
    if !c.notes.is_empty() {
        o.push_str("<h2>Notes</h2><ul class=\"notes\">");
        for n in &c.notes {
            let _ = write!(o, "<li>{}</li>", escape_html(n));
        }
        o.push_str("</ul>");
    }
    let _ = write!(
        o,
        "<h2 id=\"glossary\">Glossary</h2><table><thead><tr>{}</tr></thead><tbody>",
        GLOSSARY_HEADERS.map(|h| format!("<th>{h}</th>")).concat()
    );
    for g in GLOSSARY {
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
            escape_html(g.name),
            escape_html(g.definition),
            escape_html(g.peers)
        );
    }
    o.push_str("</tbody></table>");
    o
}

/// The charts of the HTML report, as inline SVG.
fn charts(input: &ReportInput, c: &Combined) -> Vec<String> {
    let mut out = Vec::new();
    for client in &input.clients {
        if client.levels.len() > 1 {
            out.push(crate::charts::throughput_latency(
                &client.levels,
                client.sweep.knee.as_ref(),
                &client.config.slos,
            ));
        }
    }
    // TTFT CDF at the lowest common load: native vs browser, network vs painted.
    let mut series: Vec<(String, Vec<f64>)> = Vec::new();
    for client in &input.clients {
        if let Some(l) = lowest_level(client) {
            if let Some(q) = l.quantiles.get("ttft_ms") {
                series.push((
                    format!("{} TTFT ({})", label(client), l.load().label()),
                    q.clone(),
                ));
            }
            if let Some(q) = l.quantiles.get("rendered_ttft_ms") {
                series.push((
                    format!("{} painted TTFT ({})", label(client), l.load().label()),
                    q.clone(),
                ));
            }
        }
    }
    if !series.is_empty() {
        let refs: Vec<(&str, &[f64])> = series
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        out.push(crate::charts::cdf(&refs, "TTFT (ms)"));
    }
    if let Some(client) = input.clients.first()
        && let Some(l) = lowest_level(client)
        && let Some(q) = l.quantiles.get("itl_ms")
    {
        out.push(crate::charts::histogram_from_quantiles(
            q,
            30,
            &format!("ITL (ms), {} client at {}", label(client), l.load().label()),
        ));
    }
    if let Some(f) = &c.floor
        && let Some(client) = input
            .clients
            .iter()
            .find(|cl| cl.source == Source::Native)
            .or(input.clients.first())
    {
        out.push(crate::charts::tpot_vs_floor(
            &client.levels,
            f.floor.estimate.tpot_floor_ms,
            &f.gpu,
        ));
    }
    if let Some(k) = &input.kernels {
        out.push(crate::charts::kernel_roofline(k));
    }
    out
}
