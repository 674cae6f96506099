//! The report's conclusions once every kernel ran: the decode floors, the decode
//! steps against them, and the goals.

use tokenscope_core::analyze::floor::Quant;
use tokenscope_core::report::kernels::{DecodeStepResult, FloorRow, GoalResult, KernelReport};

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
            let f = report
                .floor_row(
                    &spec.model,
                    spec.quant,
                    u64::from(spec.context),
                    spec.kv_dtype,
                )?
                .estimate;
            Some(decode::result(spec, t, f.bytes_per_token, f.tpot_floor_ms))
        })
        .collect()
}

/// The goals of the harness (on a real GPU) and where this run stands.
pub fn goals(report: &KernelReport) -> Vec<GoalResult> {
    let read = report.bandwidth.as_ref().map_or(0.0, |b| b.read_gbps);
    let mut out = Vec::new();
    for (dtype, target) in [(Quant::F16, 0.90), (Quant::Q8_0, 0.90), (Quant::Q4_0, 0.80)] {
        let (gbps, source) = report.gemv_bandwidth(dtype);
        let measured = (read > 0.0 && source.starts_with("gemv")).then(|| gbps / read);
        out.push(GoalResult {
            goal: format!("gemv {dtype}"),
            target_fraction: target,
            measured_fraction: measured,
            met: measured.map(|m| m >= target),
            source,
        });
    }
    let attn = |context: u64, split_only: bool| {
        report
            .kernels
            .iter()
            .filter(|k| k.name.starts_with("attention") && k.verified && k.context == Some(context))
            .filter(|k| !split_only || k.name == "attention_decode_split")
            .filter(|k| k.dtype == "f16")
            .max_by(|a, b| a.fraction_of_read.total_cmp(&b.fraction_of_read))
    };
    for (label, context, split_only, target) in [
        ("attention f16 at 8k context", 8192, false, 0.60),
        ("attention f16 at 32k context, split-KV", 32768, true, 0.75),
    ] {
        let k = attn(context, split_only);
        let measured = k.map(|k| k.fraction_of_read);
        out.push(GoalResult {
            goal: label.into(),
            target_fraction: target,
            measured_fraction: measured,
            met: measured.map(|m| m >= target),
            source: k.map_or_else(
                || format!("not measured (no f16 attention at context {context})"),
                |k| format!("{} splits {}", k.name, k.splits.unwrap_or(1)),
            ),
        });
    }
    out
}

pub(super) fn finish(report: &mut KernelReport, cfg: &SuiteConfig) {
    report.decode_floor = floors(report, cfg);
    report.roofline = report.roofline_rows();
    report.goals = goals(report);
    report.verified = report.all_verified() && report.errors.is_empty();
}
