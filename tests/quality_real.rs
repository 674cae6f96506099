//! `tokenscope quality` on a real engine: llama.cpp's `llama-server` serving Gemma
//! 3 270M Q4_K_M (`scripts/real-engine.sh`), against itself (no change may be
//! called; the reference's own repeat is the noise floor) and against the same
//! file requantised to Q3_K_M by llama.cpp's own `llama-quantize` in the test's
//! setup (a change must be called: KLD far above the self-check, answers that
//! diverge). llama-server gives top-k log-probabilities of generated tokens in
//! its chat API, so the distribution figures run (a lower bound: top 20 of a
//! 262k vocabulary).

mod common;
#[path = "common/llama.rs"]
mod llama;

use std::process::Command;

use common::{bin, f, text};
use llama::{Engine, llama_dir, require_installed};
use serde_json::Value;

fn quality(reference: &str, candidate: &str, json: &std::path::Path) -> Value {
    let out = Command::new(bin())
        .args([
            "quality",
            "--ref",
            reference,
            "--cand",
            candidate,
            "--prompts",
            "12",
            "--max-tokens",
            "24",
            "--tasks",
            "8",
            "--task-max-tokens",
            "64",
            "--json",
        ])
        .arg(json)
        .output()
        .unwrap();
    eprintln!("{}", text(&out));
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

#[test]
#[ignore = "opt-in: needs llama-server, llama-quantize and Gemma (scripts/real-engine.sh); scripts/test.sh runs it (cargo test -- --include-ignored)"]
fn a_requantised_gemma_is_called_a_change_and_gemma_itself_is_not() {
    require_installed("gemma");
    let dir = tempfile::tempdir().unwrap();
    let q3 = dir.path().join("gemma3-270m-q3_k_m.gguf");
    let quantize = llama_dir().join("bin/llama-quantize");
    let out = Command::new(&quantize)
        .arg("--allow-requantize")
        .arg(llama::model_file("gemma"))
        .arg(&q3)
        .args(["Q3_K_M", "2"])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (scripts/real-engine.sh --install-only builds it)",
                quantize.display()
            )
        });
    assert!(out.status.success(), "llama-quantize: {}", text(&out));

    let reference = Engine::start("gemma", 1, 2048, 1);
    let json = dir.path().join("self.json");
    let same = quality(&reference.url, &reference.url, &json);
    // llama-server is not bit-exact from one request to the next: its prompt
    // cache re-evaluates a prompt's tail in a batch whose size depends on the
    // request before, and a near-tie can flip a greedy token (seen: 1 of 12
    // answers, at token 21). The reference's own repeat measures that floor;
    // the same server as the candidate stays within a prompt of it.
    let level = &same["levels"][0]["figures"];
    let floor = f(&same["self_check"]["exact_match"]);
    assert!(
        floor >= 10.0 / 12.0,
        "the engine's own repeat: {}",
        same["self_check"]
    );
    assert!(
        f(&level["exact_match"]) >= floor - 1.0 / 12.0,
        "{level} vs {floor}"
    );
    let own = f(&same["self_check"]["distribution"]["kld"]["mean"]);
    assert!(
        same["verdict"]
            .to_string()
            .contains("no change from the reference seen"),
        "{}",
        same["verdict"]
    );

    let q3 = q3.to_str().unwrap();
    let candidate = Engine::start_with(
        "gemma",
        1,
        2048,
        1,
        &["-m", q3, "--alias", "gemma3-270m-q3_k_m"],
    );
    let changed = quality(&reference.url, &candidate.url, &dir.path().join("q3.json"));
    assert_eq!(
        changed["candidate"]["capabilities"]["model"],
        "gemma3-270m-q3_k_m"
    );
    let level = &changed["levels"][0]["figures"];
    let d = &level["distribution"];
    let kld = f(&d["kld"]["mean"]);
    eprintln!(
        "Gemma 3 270M Q4_K_M vs itself: KLD {own:.6}; vs Q3_K_M: KLD {kld:.4} [{:.4}, {:.4}] (lower bound), same top p {:.3}, exact match {}, first divergence median {}",
        f(&d["kld"]["ci95"][0]),
        f(&d["kld"]["ci95"][1]),
        f(&d["same_top_p"]),
        f(&level["exact_match"]),
        level["divergence"]["median"]
    );
    let tasks = &changed["levels"][0]["tasks"];
    eprintln!(
        "tasks (flexible): Q4_K_M {} right of {} [{:.2}, {:.2}], Q3_K_M {} right [{:.2}, {:.2}]; flips {} lost / {} gained, McNemar p {:.3}",
        tasks["reference_flexible"]["right"],
        tasks["tasks"],
        f(&tasks["reference_flexible"]["ci95"][0]),
        f(&tasks["reference_flexible"]["ci95"][1]),
        tasks["candidate_flexible"]["right"],
        f(&tasks["candidate_flexible"]["ci95"][0]),
        f(&tasks["candidate_flexible"]["ci95"][1]),
        tasks["flips_lost"],
        tasks["flips_gained"],
        f(&tasks["mcnemar_p"])
    );
    assert_eq!(tasks["tasks"], 8, "every task graded on both sides");
    // Requantised, the same tokenizer: llama-server's /tokenize gives the
    // same ids on both; it scores no prompt (no echo), so the distribution is
    // on the generated tokens, and the report says why.
    for r in [&same, &changed] {
        let t = &r["tokenizer"];
        assert!(t["reference_tokens"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(t["first_difference"], Value::Null, "{t}");
        assert_eq!(r["reference"]["capabilities"]["prompt_logprobs"], false);
        assert!(r["levels"][0]["teacher_forced"].is_null());
        assert!(
            r["not_run"].to_string().contains("teacher-forced"),
            "{}",
            r["not_run"]
        );
    }
    // Itself: the same answers, so the same grades.
    let own_tasks = &same["levels"][0]["tasks"];
    assert_eq!(own_tasks["flips_lost"], 0);
    assert_eq!(own_tasks["flips_gained"], 0);
    assert_eq!(
        d["kld"]["exact"], false,
        "top 20 of Gemma's vocabulary: a lower bound"
    );
    assert!(kld > 0.01 && kld > 100.0 * own.max(1e-5), "{kld} vs {own}");
    assert!(f(&level["exact_match"]) < 0.5, "{level}");
    assert!(
        changed["verdict"]
            .to_string()
            .contains("answers differently"),
        "{}",
        changed["verdict"]
    );
}
