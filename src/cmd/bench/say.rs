//! What `bench` says around its run: before sending, the plan and an estimate
//! of its time (stderr); after each tier, the verdict and the files written
//! (stdout), or that nothing was saved.

use std::path::{Path, PathBuf};

use tokenscope_core::analyze::verdict;
use tokenscope_core::report::ClientReport;
use tokenscope_core::report::combined::ReportInput;

use super::plan::{Plan, Save};
use tokenscope_loadgen::estimate::{LevelWork, RequestTime, fmt_duration, plan_work};
use tokenscope_loadgen::{LoadPlan, PerLevel, Prompts};

/// `a` or `a to b` of the values (none: empty).
fn span(values: impl Iterator<Item = u64>) -> Option<String> {
    let v: Vec<u64> = values.collect();
    let (lo, hi) = (*v.iter().min()?, *v.iter().max()?);
    Some(if lo == hi {
        lo.to_string()
    } else {
        format!("{lo} to {hi}")
    })
}

/// The plan in two lines and the estimate in one (stderr, before sending).
/// `timing` is the pre-flight request's; `why_none` says why there is none.
pub fn plan_lines(plan: &Plan, timing: Option<RequestTime>, why_none: &str) -> String {
    let cfg = &plan.cfg;
    let tiers: Vec<(u32, Vec<LevelWork>)> = (0..plan.tiers.len())
        .map(|i| (plan.tiers[i].max_tokens, plan_work(&plan.tier_config(i))))
        .collect();
    let work = &tiers[0].1;
    let loads: Vec<String> = work.iter().map(|w| w.load.label()).collect();
    let levels = match &cfg.load {
        LoadPlan::Trace { info, .. } => format!(
            "a trace of {} requests replayed over {} (one level, one round)",
            info.requests,
            fmt_duration(info.span_s * 1000.0)
        ),
        _ => format!(
            "{} level{} ({}), {} round{} each",
            loads.len(),
            if loads.len() == 1 { "" } else { "s" },
            loads.join(", "),
            cfg.rounds,
            if cfg.rounds == 1 { "" } else { "s" }
        ),
    };
    let measured = match cfg.per_level {
        PerLevel::Duration(d) => format!(
            "{} measured per level",
            fmt_duration(d.as_secs_f64() * 1000.0)
        ),
        _ => format!(
            "{} measured requests per level",
            span(work.iter().map(|w| w.requests)).unwrap_or_default()
        ),
    };
    let warm = match cfg.ramp {
        Some(r) => format!("a {} ramp first", fmt_duration(r.as_secs_f64() * 1000.0)),
        None => match span(work.iter().map(|w| w.warmup)) {
            Some(s) if s != "0" => format!("{s} warm-up requests first"),
            _ => "no warm-up".to_owned(),
        },
    };
    let input = match &cfg.prompts {
        Prompts::Synthetic { .. } if !matches!(cfg.load, LoadPlan::Trace { .. }) => {
            let inputs: Vec<String> = dedup(plan.tiers.iter().map(|t| t.input.label()));
            format!("prompts of {} tokens", inputs.join(", "))
        }
        Prompts::File { path, prompts } => {
            format!("{} prompts from {}", prompts.len(), path.display())
        }
        Prompts::Synthetic { .. } => "the trace's lengths".to_owned(),
    };
    let max_tokens = dedup(plan.tiers.iter().map(|t| t.max_tokens.to_string())).join(", ");
    let tiered = if plan.tiers.len() > 1 {
        format!("; the sweep at each of {} tiers", plan.tiers.len())
    } else {
        String::new()
    };
    let mut out = format!(
        "plan: {levels}; {measured}, {warm}\n      max_tokens {max_tokens}, {input}{tiered}\n"
    );
    let requests: u64 = tiers
        .iter()
        .flat_map(|(_, w)| w.iter().map(|w| w.warmup + w.requests))
        .sum();
    let sent = if requests > 0 {
        format!(" for {requests} requests")
    } else {
        String::new()
    };
    match timing {
        Some(t) => {
            let total: f64 = tiers
                .iter()
                .flat_map(|(mt, w)| w.iter().map(|w| w.ms(t.e2e_ms(*mt))))
                .sum();
            out.push_str(&format!(
                "estimate: about {}{sent}, if every request takes as long as the pre-flight's short one ({} ms to the first token, then {} ms a token: {} ms at max_tokens {}); longer where prompts are long or the server slows under load\n",
                fmt_duration(total),
                round_ms(t.ttft_ms),
                round_ms(t.per_token_ms),
                round_ms(t.e2e_ms(tiers[0].0)),
                tiers[0].0
            ));
        }
        None => {
            let fixed: f64 = tiers
                .iter()
                .flat_map(|(_, w)| w.iter().map(|w| w.fixed_ms))
                .sum();
            let floor = if fixed >= 1000.0 {
                format!("at least {} (the timed parts); ", fmt_duration(fixed))
            } else {
                String::new()
            };
            out.push_str(&format!(
                "estimate: {floor}no request timed yet ({why_none}); the progress estimates the time left once requests finish\n"
            ));
        }
    }
    out
}

/// Milliseconds for reading: 3 significant digits (whole ones above 100).
fn round_ms(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 10.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.2}")
    }
}

fn dedup(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// The verdict's sentences on this run (core's, as `demo` and `report`
/// print them), a line each.
pub fn verdict(report: &ClientReport) -> String {
    let input = ReportInput {
        clients: vec![report.clone()],
        kernels: None,
        model: None,
    };
    let mut out = String::new();
    for v in verdict::analyze(&input).verdict {
        out.push_str(&v);
        out.push('\n');
    }
    out
}

/// The closing lines: each file written, or that nothing was.
pub fn written(paths: &[PathBuf], save: &Save, folder: Option<&Path>) -> String {
    if paths.is_empty() {
        return match save {
            Save::Nothing => {
                "nothing was saved (--no-save): this summary is all that is left of the run\n"
                    .to_owned()
            }
            _ => "nothing was saved\n".to_owned(),
        };
    }
    let mut out = String::new();
    for p in paths {
        out.push_str(&format!("wrote {}\n", p.display()));
    }
    if let Some(dir) = folder {
        let report = dir.join("report.json");
        out.push_str(&format!(
            "the HTML report: tokenscope report --client {} --html report.html\nagainst another run: tokenscope compare OTHER/report.json {}\n",
            report.display(),
            report.display()
        ));
    }
    out
}
