//! The report's conclusions once every kernel ran: the decode floors, the decode
//! steps against them, and the goals.

use tokenscope_hw::floor::{FLOOR_AT_READ, ms_at};
use tokenscope_kernel_report::{
    DecodeStepResult, FloorRow, GoalResult, KernelReport, KernelResult,
};
use tokenscope_stats::fmt::fmt_sig3;

use super::SuiteConfig;
use crate::decode::{self, DecodeStepSpec};

fn floors(report: &KernelReport, cfg: &SuiteConfig) -> Vec<FloorRow> {
    let mut rows = Vec::new();
    for model in &cfg.models {
        for &quant in &cfg.quants {
            for &context in &cfg.contexts {
                rows.extend(report.floor_row(model, quant, u64::from(context), cfg.kv_dtype));
            }
        }
    }
    rows
}

pub(super) fn step_results(
    report: &KernelReport,
    steps: &[(DecodeStepSpec, decode::DecodeStepTiming)],
) -> Vec<DecodeStepResult> {
    steps
        .iter()
        .filter_map(|(spec, t)| {
            let row = report.floor_row(
                &spec.model,
                spec.quant,
                u64::from(spec.context),
                spec.kv_dtype,
            )?;
            let f = &row.estimate;
            let mut step = decode::result(spec, t, f.bytes_per_token, f.tpot_floor_ms);
            step.read_floor_ms = row.read_floor_ms;
            Some(step)
        })
        .collect()
}

/// GEMV targets by format, fractions of the read bandwidth at every decode shape.
fn gemv_target(dtype: &str) -> f64 {
    match dtype {
        "f32" | "f16" | "bf16" | "q8_0" => 0.90,
        _ => 0.85,
    }
}

/// The worst of `ks` by `frac`, with a source naming it and how many there were.
fn worst<'a>(
    ks: &[&'a KernelResult],
    frac: impl Fn(&KernelResult) -> Option<f64>,
) -> Option<(&'a KernelResult, f64)> {
    ks.iter()
        .filter_map(|k| frac(k).map(|f| (*k, f)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// The formats of the kernels named `name`, in order of first appearance (GEMVs run
/// beside a developer's kernel left out).
fn formats_of<'a>(report: &'a KernelReport, name: &str) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for k in report
        .kernels
        .iter()
        .filter(|k| k.name == name && !k.is_user() && k.beside.is_none())
    {
        if !out.contains(&k.dtype.as_str()) {
            out.push(&k.dtype);
        }
    }
    out
}

fn shape_label(k: &KernelResult) -> String {
    let dims: Vec<String> = k.shape.iter().map(u64::to_string).collect();
    dims.join("x")
}

/// The goals of the harness (on a real GPU) and where this run stands: GEMV at every
/// decode shape, the skinny matmul against its roof, split-KV attention at 8k and 32k,
/// and each synthetic decode step against the floor at the read bandwidth. Measured
/// with whichever variants ran (the tuned ones when a tuning file applied).
pub fn goals(report: &KernelReport) -> Vec<GoalResult> {
    // A run of a developer's own kernels alone (with the GEMVs run beside them) has
    // no goals of tokenscope's.
    if !report.kernels.is_empty()
        && report
            .kernels
            .iter()
            .all(|k| k.is_user() || k.beside.is_some())
    {
        return Vec::new();
    }
    let read = report.bandwidth.as_ref().map_or(0.0, |b| b.read_gbps);
    let usable = |k: &&KernelResult| k.verified && !k.cache_resident;
    let mut out = Vec::new();
    for dtype in formats_of(report, "gemv") {
        let ks: Vec<&KernelResult> = report
            .kernels
            .iter()
            .filter(|k| k.name == "gemv" && k.dtype == dtype && k.tensors.is_empty())
            .filter(|k| k.beside.is_none())
            .filter(usable)
            .collect();
        let w = worst(&ks, |k| Some(k.fraction_of_read));
        let target = gemv_target(dtype);
        out.push(GoalResult {
            goal: format!("gemv {dtype}, every shape"),
            target_fraction: target,
            measured_fraction: w.map(|(_, f)| f),
            met: w.map(|(_, f)| f >= target),
            source: w.map_or_else(
                || format!("not measured (no verified gemv {dtype} off the cache)"),
                |(k, _)| format!("worst of {} shapes: {}", ks.len(), shape_label(k)),
            ),
        });
    }
    for dtype in formats_of(report, "matmul_skinny") {
        for (label, lo, hi, target) in [("batch 2-8", 2, 8, 0.80), ("batch 16-64", 16, 64, 0.50)] {
            let ks: Vec<&KernelResult> = report
                .kernels
                .iter()
                .filter(|k| k.name == "matmul_skinny" && k.dtype == dtype)
                .filter(|k| (lo..=hi).contains(&k.batch))
                .filter(|k| k.verified)
                .collect();
            if ks.is_empty() {
                continue;
            }
            let w = worst(&ks, |k| k.fraction_of_roof);
            out.push(GoalResult {
                goal: format!("matmul_skinny {dtype} {label}, of its roof"),
                target_fraction: target,
                measured_fraction: w.map(|(_, f)| f),
                met: w.map(|(_, f)| f >= target),
                source: w.map_or_else(
                    || "not measured (no compute roof)".to_string(),
                    |(k, _)| {
                        format!(
                            "worst: {} batch {} ({}-bound)",
                            shape_label(k),
                            k.batch,
                            k.roof.as_deref().unwrap_or("?")
                        )
                    },
                ),
            });
        }
    }
    for (context, target) in [(8192, 0.60), (32768, 0.75)] {
        let k = report
            .kernels
            .iter()
            .filter(|k| k.name == "attention_decode_split" && k.dtype == "f16")
            .filter(|k| k.verified && k.context == Some(context))
            .max_by(|a, b| a.fraction_of_read.total_cmp(&b.fraction_of_read));
        let measured = k.map(|k| k.fraction_of_read);
        out.push(GoalResult {
            goal: format!("attention f16 split-KV at {}k context", context / 1024),
            target_fraction: target,
            measured_fraction: measured,
            met: measured.map(|m| m >= target),
            source: k.map_or_else(
                || format!("not measured (no f16 split-KV attention at context {context})"),
                |k| format!("{} splits", k.splits.unwrap_or(1)),
            ),
        });
    }
    for s in &report.decode_steps {
        // The floor at the read bandwidth, as the floor table shows it.
        let read_floor = s.read_floor_ms.or_else(|| ms_at(s.bytes_per_token, read));
        let Some(read_floor_ms) = read_floor.filter(|_| s.step_ms > 0.0) else {
            continue;
        };
        let measured = read_floor_ms / s.step_ms;
        out.push(GoalResult {
            goal: format!(
                "decode step {} {} at {} tokens, within 1.25x of the {FLOOR_AT_READ}",
                s.model, s.quant, s.context
            ),
            target_fraction: 0.80,
            measured_fraction: Some(measured),
            met: Some(measured >= 0.80),
            source: format!(
                "step {} ms; {FLOOR_AT_READ} {} ms",
                fmt_sig3(s.step_ms),
                fmt_sig3(read_floor_ms)
            ),
        });
    }
    out
}

pub(super) fn finish(report: &mut KernelReport, cfg: &SuiteConfig) {
    let read = report.bandwidth.as_ref().map_or(0.0, |b| b.read_gbps);
    let fma = report.compute.as_ref().map_or(0.0, |c| c.f32_gflops);
    for k in &mut report.kernels {
        k.place_on_roofline(read, fma);
    }
    report.decode_floor = floors(report, cfg);
    report.roofline = report.roofline_rows();
    report.dispatch_cost = report.dispatch_costs();
    report.goals = goals(report);
    report.verified = report.all_verified()
        && report.errors.is_empty()
        && report.compute.as_ref().is_none_or(|c| c.verified);
}
