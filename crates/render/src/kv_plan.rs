//! The KV-cache plan as people read it (`tokenscope plan`, the floor views).

use super::fmt::fmt_bytes;
use super::table::{Align, text_table_with};
use tokenscope_hw::floor::KvPlan;

/// The plan's rows: what, how much, and how it was computed.
pub fn rows(p: &KvPlan) -> Vec<Vec<String>> {
    let i = &p.input;
    let mut rows = vec![
        vec![
            "KV per token".into(),
            fmt_bytes(p.kv_bytes_per_token),
            "2 (K, V) x layers x KV heads x head size x bytes".into(),
        ],
        vec![
            "KV per sequence".into(),
            fmt_bytes(p.kv_bytes_per_sequence),
            format!(
                "{} tokens; sliding-window layers hold their window",
                i.context
            ),
        ],
        vec![
            "weights".into(),
            fmt_bytes(p.weight_bytes),
            format!("every tensor once, {}", i.weights),
        ],
        vec![
            "budget".into(),
            fmt_bytes(p.budget_bytes),
            format!("{} of {}", i.utilization, fmt_bytes(i.gpu_memory_bytes)),
        ],
        vec![
            "left for the KV cache".into(),
            fmt_bytes(p.kv_budget_bytes),
            "budget - weights".into(),
        ],
        vec![
            "sequences that fit".into(),
            p.sequences.to_string(),
            format!("of {} tokens each", i.context),
        ],
    ];
    if let Some(l) = &p.llamacpp {
        rows.push(vec![
            format!("llama.cpp KV buffers ({} slots)", l.slots),
            fmt_bytes(l.full_attention_bytes + l.sliding_window_bytes),
            format!(
                "--ctx-size {} -np {}: full-attention layers {}, sliding-window layers {} (window + ubatch {} per slot)",
                l.ctx_size,
                l.slots,
                fmt_bytes(l.full_attention_bytes),
                fmt_bytes(l.sliding_window_bytes),
                l.ubatch
            ),
        ]);
    }
    rows
}

/// The plan for a terminal: a heading and an aligned table.
pub fn text(p: &KvPlan) -> String {
    let i = &p.input;
    let mut out = format!(
        "KV-cache plan: {}, weights {}, KV cache {}, {} tokens per sequence\n\n",
        p.model, i.weights, i.kv_dtype, i.context
    );
    out.push_str(&text_table_with(
        &["".into(), "size".into(), "how".into()],
        &rows(p),
        |c| if c == 1 { Align::Right } else { Align::Left },
    ));
    if p.sequences == 0 {
        out.push_str(&format!(
            "\nNo sequence of {} tokens fits: the weights leave {} of the budget.\n",
            i.context,
            fmt_bytes(p.kv_budget_bytes)
        ));
    }
    out
}

/// Several plans on one GPU (`tokenscope kernels --gpu-memory`): a heading and
/// one row per model, weight format and context.
pub fn summary_text(plans: &[KvPlan]) -> String {
    let Some(first) = plans.first() else {
        return String::new();
    };
    let i = &first.input;
    let mut out = format!(
        "KV-cache plans on {} (KV cache {}, {} of the memory; tokenscope plan for the details)\n\n",
        fmt_bytes(i.gpu_memory_bytes),
        i.kv_dtype,
        i.utilization
    );
    let headers = [
        "model",
        "weights",
        "context",
        "KV/token",
        "KV/sequence",
        "weights size",
        "sequences that fit",
    ]
    .map(String::from);
    let rows: Vec<Vec<String>> = plans
        .iter()
        .map(|p| {
            vec![
                p.model.clone(),
                p.input.weights.to_string(),
                p.input.context.to_string(),
                fmt_bytes(p.kv_bytes_per_token),
                fmt_bytes(p.kv_bytes_per_sequence),
                fmt_bytes(p.weight_bytes),
                p.sequences.to_string(),
            ]
        })
        .collect();
    out.push_str(&text_table_with(&headers, &rows, |c| {
        if c >= 2 { Align::Right } else { Align::Left }
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_hw::floor::ModelShape;
    use tokenscope_hw::floor::{KvPlanInput, Quant};

    #[test]
    fn the_plan_reads_as_computed() {
        let m = ModelShape::preset("llama-3.1-8b").unwrap();
        let input = KvPlanInput {
            weights: Quant::F16,
            kv_dtype: Quant::F16,
            context: 8192,
            gpu_memory_bytes: 80 << 30,
            utilization: 0.9,
            llamacpp_slots: None,
        };
        let t = text(&m.plan_kv(input).unwrap());
        assert!(
            t.starts_with("KV-cache plan: llama-3.1-8b, weights f16, KV cache f16, 8192 tokens")
        );
        assert!(t.contains("128.0 KiB"), "{t}");
        assert!(t.contains("1.00 GiB"), "{t}");
        assert!(t.contains("72.00 GiB"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.starts_with("sequences that fit") && l.contains(" 57 ")),
            "{t}"
        );
        let big = ModelShape::preset("llama-3.1-70b").unwrap();
        assert!(text(&big.plan_kv(input).unwrap()).contains("No sequence of 8192 tokens fits"));
        let s = summary_text(&[m.plan_kv(input).unwrap(), big.plan_kv(input).unwrap()]);
        assert!(s.starts_with("KV-cache plans on 80.00 GiB"), "{s}");
        let row = s.lines().find(|l| l.starts_with("llama-3.1-8b")).unwrap();
        assert!(
            row.contains("128.0 KiB") && row.trim_end().ends_with(" 57"),
            "{s}"
        );
        let row = s.lines().find(|l| l.starts_with("llama-3.1-70b")).unwrap();
        assert!(row.trim_end().ends_with(" 0"), "{s}");
    }
}
