//! The combined report's conclusions: the verdict in sentences with numbers (what
//! users wait for the first token, TPOT against the GPU's floor, capacity at the
//! SLO, the knee, failures), the native vs browser comparison per stage, and the
//! notes carried from the runs. The diagnosis rules are [`super::diagnosis`].

use super::diagnosis::diagnose;
use crate::model::{CapacityBound, ClientReport, LevelReport, Load, Source};
use crate::report::combined::{Combined, Comparison, FloorComparison, ReportInput, StageDelta};
use tokenscope_hw::floor::{FLOOR_AT_READ, FLOOR_WITH_KERNELS};
use tokenscope_stats::fmt::{fmt_ms, fmt_rate, fmt_sig3};
use tokenscope_stats::stats::Summary;

/// The level the verdict speaks about: SLO capacity, else the knee, else the highest load.
fn headline_level(c: &ClientReport) -> Option<&LevelReport> {
    if let Some(cap) = &c.sweep.slo_capacity {
        return c.levels.get(cap.level_index);
    }
    if let Some(k) = &c.sweep.knee {
        return c.levels.get(k.level_index);
    }
    c.levels
        .iter()
        .rev()
        .find(|l| l.ok > 0 && !l.under_loaded())
}

/// Analyse the inputs.
pub fn analyze(input: &ReportInput) -> Combined {
    let mut verdict = Vec::new();
    let mut notes = Vec::new();
    let browser = input.clients.iter().find(|c| c.source == Source::Browser);
    let native = input.clients.iter().find(|c| c.source == Source::Native);
    ttft_sentence(browser, native, &mut verdict);
    for c in input.clients.iter().filter(|c| c.source == Source::Rum) {
        rum_sentence(c, &mut verdict);
    }
    let floor = floor_comparison(input, native.or(browser));
    floor_sentence(input, floor.as_ref(), &mut verdict, &mut notes);
    if let Some(c) = browser.or(native) {
        capacity_sentences(c, &mut verdict);
    }
    input_notes(input, &mut notes);
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
        kv_plan: kv_plan(input),
    }
}

/// The model's KV-cache plan on the GPU, when the GPU's memory was given: the
/// served weights' format, an f16 KV cache, vLLM's 0.9 of the memory.
fn kv_plan(input: &ReportInput) -> Option<tokenscope_hw::floor::KvPlan> {
    let m = input.model.as_ref()?;
    m.shape
        .plan_kv(tokenscope_hw::floor::KvPlanInput {
            weights: m.quant,
            kv_dtype: tokenscope_hw::floor::Quant::F16,
            context: m.context,
            gpu_memory_bytes: m.gpu_memory_bytes?,
            utilization: 0.9,
            llamacpp_slots: None,
        })
        .ok()
}

/// What users wait for the first token: the browser's painted TTFT where there is
/// a browser run, else the native one.
/// Real users' painted TTFT and where it went (the `all` level of a collector's
/// report).
fn rum_sentence(c: &ClientReport, verdict: &mut Vec<String>) {
    let Some(l) = c.levels.iter().find(|l| l.rum.is_some()) else {
        return;
    };
    let (Some(rum), Some(painted)) = (l.rum.as_ref(), l.metrics.rendered_ttft_ms.as_ref()) else {
        return;
    };
    let (Some(p50), Some(p95)) = (painted.get("p50"), painted.get("p95")) else {
        return;
    };
    let mut line = format!(
        "Real users ({:.0} turns, {}): the first text painted at p50 {} ms, p95 {} ms",
        rum.turns_weighted,
        l.label(),
        fmt_ms(Some(p50)),
        fmt_ms(Some(p95)),
    );
    if let Some(s) = rum.split {
        let server = match (s.server_ms, s.network_ms) {
            (Some(srv), Some(net)) => format!(
                "the server {} ms, network and proxies {} ms",
                fmt_ms(Some(srv)),
                fmt_ms(Some(net))
            ),
            _ => format!("server and network {} ms", fmt_ms(Some(s.received_ms))),
        };
        line.push_str(&format!(
            "; of the mean {} ms, {server}, the page's main thread {} ms, rendering {} ms",
            fmt_ms(Some(s.painted_ms)),
            fmt_ms(Some(s.main_thread_ms)),
            fmt_ms(Some(s.render_ms)),
        ));
    }
    line.push_str(&format!(
        "; {:.1}% stalled over 1 s, {:.1}% stopped by the user, {:.1}% failed.",
        100.0 * rum.stalled_1s_fraction,
        100.0 * rum.aborted_fraction,
        100.0 * rum.error_fraction
    ));
    verdict.push(line);
}

fn ttft_sentence(
    browser: Option<&ClientReport>,
    native: Option<&ClientReport>,
    verdict: &mut Vec<String>,
) {
    if let Some(b) = browser
        && let Some(l) = headline_level(b)
    {
        let m = &l.metrics;
        let rendered = m.rendered_ttft_ms.as_ref().and_then(|s| s.get("p95"));
        let ttft = m.ttft_ms.get("p95");
        match (rendered, ttft) {
            (Some(r), Some(t)) => verdict.push(format!(
                "At {}, users wait {} ms for the first token at p95 (user-perceived, painted), of which {} ms is browser rendering and {} ms waiting for the response headers{}.",
                l.label(),
                fmt_ms(Some(r)),
                fmt_ms(Some((r - t).max(0.0))),
                fmt_ms(m.time_to_headers_ms.get("p95")),
                if b.environment.simulated { " (against the page's simulated endpoint)" } else { "" }
            )),
            (None, Some(t)) => verdict.push(format!(
                "At {}, p95 TTFT in the browser is {} ms (no paint times were recorded).",
                l.label(),
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
            l.label(),
            fmt_ms(m.ttft_ms.get("p95")),
            fmt_ms(m.time_to_headers_ms.get("p95")),
            fmt_ms(m.tpot_ms.get("p50")),
        ));
    }
}

/// TPOT against the GPU's bandwidth floor (or why there is no comparison).
fn floor_sentence(
    input: &ReportInput,
    floor: Option<&FloorComparison>,
    verdict: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    // Impossible only below the floor at the read bandwidth (the hardware's): the
    // floor with these kernels is beaten by any server with faster kernels.
    let read_ms = |f: &FloorComparison| f.floor.read_floor_ms.filter(|ms| *ms > 0.0);
    if let Some((f, read)) = floor.and_then(|f| Some((f, read_ms(f)?)))
        && f.tpot_p50_ms / read < BELOW_FLOOR_RATIO
    {
        verdict.push(format!(
            "TPOT p50 {} ms at {} is below the {FLOOR_AT_READ} ({} ms) of {} for {} {} at {} context, which no server on that GPU can do: the model, quantization or GPU given does not match what served these requests.",
            fmt_ms(Some(f.tpot_p50_ms)),
            f.level,
            fmt_sig3(read),
            f.gpu,
            f.floor.estimate.model,
            f.floor.estimate.quant,
            context_label(f.floor.estimate.context)
        ));
    } else if let Some(f) = floor {
        let against_read = read_ms(f).map_or_else(String::new, |ms| {
            format!(
                ", {}x the {FLOOR_AT_READ} ({} ms)",
                fmt_sig3(f.tpot_p50_ms / ms),
                fmt_sig3(ms)
            )
        });
        verdict.push(format!(
            "TPOT p50 {} ms at {} is {}x the {FLOOR_WITH_KERNELS} ({} ms){against_read} of {} for {} {} at {} context.",
            fmt_ms(Some(f.tpot_p50_ms)),
            f.level,
            fmt_sig3(f.ratio),
            fmt_sig3(f.floor.estimate.tpot_floor_ms),
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
}

/// Capacity at the SLO, the knee, and the failures, of the primary run.
fn capacity_sentences(c: &ClientReport, verdict: &mut Vec<String>) {
    verdict.extend(sweep_sentences(c));
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

/// What the sweep concludes, bounded by the levels tested: the SLO capacity
/// (bracketed, a floor, a ceiling, or not evaluable), the knee (or how far it was
/// looked for), and the levels left out as under-loaded. The text summary and
/// the combined report say the same sentences.
pub fn sweep_sentences(c: &ClientReport) -> Vec<String> {
    let mut out = Vec::new();
    let label = |i: usize| c.levels.get(i).map(|l| l.label()).unwrap_or_default();
    let slos = || {
        c.config
            .slos
            .iter()
            .map(crate::analyze::slo::Slo::label)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(cap) = &c.sweep.slo_capacity {
        let level = &c.levels[cap.level_index];
        let (at_least, bound) = match (&cap.bound, &cap.failed_at) {
            (Some(CapacityBound::Bracketed), Some(f)) => {
                ("", format!(", bracketed: {} fails", label(f.level_index)))
            }
            (Some(_), _) => (
                "at least ",
                ", a floor: no level tested above it failed".to_owned(),
            ),
            // A report from before the bound was said.
            (None, _) => ("", String::new()),
        };
        out.push(format!(
            "Capacity at your SLO ({}): {at_least}{} ({} tok/s, {} req/s){bound}.",
            cap.slos.join(", "),
            capacity_label(level.load()),
            fmt_rate(cap.output_tokens_per_s),
            fmt_rate(cap.requests_per_s)
        ));
    } else if let Some(b) = &c.sweep.slo_below {
        out.push(format!(
            "Capacity at your SLO ({}): below {}: no level tested met it, the lowest failed.",
            slos(),
            label(b.level_index)
        ));
    } else if !c.config.slos.is_empty() {
        out.push(format!(
            "Capacity at your SLO ({}): not evaluable: no level's checks could be evaluated (see the SLO checks).",
            slos()
        ));
    }
    if let Some(k) = &c.sweep.knee {
        let level = &c.levels[k.level_index];
        out.push(format!(
            "Throughput stops scaling past {} (the knee): {} tok/s there; beyond it latency grows faster than throughput.",
            level.label(),
            fmt_rate(level.output_tokens_per_s)
        ));
    } else if let Some(p) = &c.sweep.knee_not_reached_up_to {
        out.push(format!(
            "No knee up to {}: latency never grew faster than throughput (the knee, if any, is higher).",
            label(p.level_index)
        ));
    } else if c.levels.len() > 1 && c.sweep.left_out.is_empty() {
        // A report from before the search's reach was said.
        out.push(format!(
            "No knee within the levels tried (up to {}): latency never grew faster than throughput.",
            c.levels.last().map(|l| l.label()).unwrap_or_default()
        ));
    }
    if !c.sweep.left_out.is_empty() {
        let names: Vec<String> = c.sweep.left_out.iter().map(|&i| label(i)).collect();
        out.push(format!(
            "Left out as under-loaded (the client never had that many requests in flight): {}.",
            names.join(", ")
        ));
    }
    out
}

/// Notes carried from the inputs: the kernels' adapter when it is a fallback,
/// every run's warnings, interrupted and rebuilt runs.
fn input_notes(input: &ReportInput, notes: &mut Vec<String>) {
    if let Some(note) = input
        .kernels
        .as_ref()
        .and_then(|k| k.adapter.fallback_note())
    {
        notes.push(format!("GPU kernels: {note}"));
    }
    for c in &input.clients {
        for w in &c.warnings {
            notes.push(format!("{} run: {}", c.source.as_str(), w.message));
        }
        if c.interrupted {
            notes.push(format!(
                "{} run was interrupted: partial results",
                c.source.as_str()
            ));
        }
        if c.environment.rebuilt_from_raw {
            notes.push(format!(
                "{} run was rebuilt from the raw file alone (tokenscope report --raw)",
                c.source.as_str()
            ));
        }
    }
}

/// A measured TPOT under this fraction of the bandwidth floor is impossible for the
/// model on that GPU (the floor or the model is wrong); a little under 1 is noise.
pub const BELOW_FLOOR_RATIO: f64 = 0.95;

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
    let level = client.lowest_level()?;
    let tpot = level.metrics.tpot_ms.get("p50")?;
    // The model file given (`report --gguf`): its own floor, type by type.
    let file_row = kernels.gguf.as_ref().and_then(|g| {
        Some((
            g.floor_row(model.context)?,
            format!("this file on this GPU: {}", g.file),
        ))
    });
    let (row, source) = match file_row {
        Some(found) => found,
        None => preset_floor(kernels, model)?,
    };
    let ratio = tpot / row.estimate.tpot_floor_ms;
    Some(FloorComparison {
        gpu: kernels.adapter.name.clone(),
        tpot_p50_ms: tpot,
        level: level.label(),
        ratio,
        floor: row,
        source,
    })
}

/// The floor of a model shape from the kernels report: its own row, else one
/// computed from its measured bandwidths.
fn preset_floor(
    kernels: &tokenscope_kernel_report::KernelReport,
    model: &crate::report::combined::ModelChoice,
) -> Option<(tokenscope_kernel_report::FloorRow, String)> {
    Some(
        match kernels.decode_floor.iter().find(|r| {
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
        },
    )
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
        level: n.label(),
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
