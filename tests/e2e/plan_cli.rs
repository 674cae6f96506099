//! `tokenscope plan` as a user meets it: the plan of a preset and of a config.json
//! (text and JSON, figures computed by hand), and bad input as one clear line.

use crate::common;

use common::{run, text};
use serde_json::Value;

#[test]
fn the_plan_of_a_preset_and_of_a_config() {
    let o = run(&[
        "plan",
        "--model",
        "llama-3.1-8b",
        "--gpu-memory",
        "80GiB",
        "--context",
        "8192",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("128.0 KiB"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("sequences that fit") && l.contains("57")),
        "{out}"
    );

    // A config.json: the Gemma 3 270M shape, q8_0 weights, f16 KV, 2 slots' worth.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    std::fs::write(
        &cfg,
        r#"{"model_type": "gemma3_text", "hidden_size": 640, "intermediate_size": 2048,
            "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
            "num_hidden_layers": 18, "vocab_size": 262144, "sliding_window": 512,
            "layer_types": ["sliding_attention","sliding_attention","sliding_attention",
              "sliding_attention","sliding_attention","full_attention",
              "sliding_attention","sliding_attention","sliding_attention",
              "sliding_attention","sliding_attention","full_attention",
              "sliding_attention","sliding_attention","sliding_attention",
              "sliding_attention","sliding_attention","full_attention"]}"#,
    )
    .unwrap();
    let o = run(&[
        "plan",
        "--model-config",
        cfg.to_str().unwrap(),
        "--kv-dtype",
        "f16",
        "--gpu-memory",
        "1GiB",
        "--context",
        "4096",
        "--utilization",
        "0.5",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    // 18 layers x 1 KV head x 256 x 2 x 2 B; 3 full layers hold 4096 tokens, 15 hold 512.
    assert_eq!(plan["kv_bytes_per_token"], 18 * 256 * 2 * 2);
    assert_eq!(
        plan["kv_bytes_per_sequence"],
        (3 * 4096 + 15 * 512) * 256 * 2 * 2
    );
    assert_eq!(plan["budget_bytes"], 1u64 << 29);
    let left = plan["kv_budget_bytes"].as_u64().unwrap();
    assert_eq!(
        plan["sequences"],
        left / plan["kv_bytes_per_sequence"].as_u64().unwrap()
    );
}

#[test]
fn bad_input_is_one_clear_line() {
    for (args, says) in [
        (
            vec!["plan", "--model", "nope", "--gpu-memory", "8GiB"],
            "unknown model `nope`",
        ),
        (
            vec!["plan", "--model", "mistral-7b", "--gpu-memory", "8 parsecs"],
            "unknown unit `parsecs`",
        ),
        (
            vec![
                "plan",
                "--model",
                "mistral-7b",
                "--gpu-memory",
                "8GiB",
                "--context",
                "0",
            ],
            "context",
        ),
        (
            vec![
                "plan",
                "--model",
                "mistral-7b",
                "--gpu-memory",
                "8GiB",
                "--utilization",
                "2",
            ],
            "utilization",
        ),
        (
            vec![
                "plan",
                "--model",
                "mistral-7b",
                "--gpu-memory",
                "8GiB",
                "--kv-dtype",
                "q9",
            ],
            "q9",
        ),
        (
            vec![
                "plan",
                "--model-config",
                "/nonexistent/config.json",
                "--gpu-memory",
                "8GiB",
            ],
            "cannot read",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
