//! `tokenscope bench --tokenizer tokenizer.json`: a Hugging Face tokenizer file
//! counts the prompts and the answers. The test trains a tiny BPE with the
//! `tokenizers` crate (so some of the prompt vocabulary's words are one token and
//! others are not, and the mock's answer words are one token each), saves it,
//! and benchmarks the mock with it: the prompts are exactly the requested length
//! by that tokenizer and each answer counts what the mock's `usage` says (the
//! mock counts the same words), and bad files are one clear line.

use crate::common;

use std::path::{Path, PathBuf};

use common::{Mock, raw_requests, run, text};
use serde_json::Value;
use tokenizers::Tokenizer;
use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::whitespace::Whitespace;
use tokenscope_sim::answer_words;
use tokenscope_workload::prompts::vocabulary;

/// Train a BPE on a corpus where the vocabulary's first 60 words and the mock's
/// answer words are frequent and the rest appear once: a small vocabulary keeps
/// the frequent ones whole and splits some of the rare ones.
fn train(dir: &Path) -> PathBuf {
    let words = vocabulary();
    let frequent: Vec<&str> = words[..60].iter().chain(answer_words()).copied().collect();
    let mut corpus = String::new();
    for round in 0..40 {
        for w in &frequent {
            corpus.push_str(w);
            corpus.push(if round % 7 == 0 { '\n' } else { ' ' });
        }
    }
    for w in &words[60..] {
        corpus.push_str(w);
        corpus.push(' ');
    }
    let corpus_path = dir.join("corpus.txt");
    std::fs::write(&corpus_path, corpus).unwrap();
    let mut tokenizer = Tokenizer::new(BPE::default());
    tokenizer.with_pre_tokenizer(Some(Whitespace {}));
    let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
        .vocab_size(400)
        .min_frequency(2)
        .show_progress(false)
        .build()
        .into();
    tokenizer
        .train_from_files(&mut trainer, vec![corpus_path.to_str().unwrap().to_owned()])
        .unwrap();
    let path = dir.join("tokenizer.json");
    tokenizer.save(&path, false).unwrap();
    path
}

#[test]
fn a_trained_tokenizer_file_sizes_the_prompts_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = train(dir.path());
    // Saved and reloaded: some words are one token, some are not.
    let reloaded = Tokenizer::from_file(&path).unwrap();
    let count = |w: &str| reloaded.encode(w, false).unwrap().len();
    let single = vocabulary().iter().filter(|w| count(w) == 1).count();
    let split = vocabulary().iter().filter(|w| count(w) > 1).count();
    assert!(single >= 16 && split > 0, "{single} single, {split} split");

    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "2"]);
    let (out, raw) = (dir.path().join("report.json"), dir.path().join("raw.jsonl"));
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--tokenizer",
        path.to_str().unwrap(),
        "--concurrency",
        "2",
        "--requests",
        "6",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--input-tokens",
        "77",
        "--max-tokens",
        "3",
        "--server-metrics",
        "none",
        "--json",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let tokens = &report["config"]["tokens"];
    assert_eq!(tokens["method"], "file", "{tokens}");
    assert_eq!(tokens["source"], path.to_str().unwrap());
    assert_eq!(tokens["exact"], true);
    assert_eq!(
        tokens["template_overhead"], 0,
        "the mock counts the prompt's words"
    );
    let level = &report["levels"][0];
    assert_eq!(level["prompt_tokens_checked"], 6);
    assert!(level["prompt_tokens_differ"].is_null(), "{level}");
    // Each answer counted by the file beside usage: the mock's words, a token each.
    assert_eq!(level["output_tokens_checked"], 6);
    assert!(level["output_tokens_differ"].is_null(), "{level}");
    for r in raw_requests(&raw) {
        assert_eq!(r["prompt_tokens_sent"], 77, "{r}");
        assert_eq!(r["usage"]["prompt_tokens"], 77, "{r}");
        assert_eq!(r["completion_tokens_counted"], 3, "{r}");
        assert_eq!(r["usage"]["completion_tokens"], 3, "{r}");
    }
}

#[test]
fn bad_tokenizer_files_are_one_line_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "{\"not\": \"a tokenizer\"}").unwrap();
    let missing = dir.path().join("missing.json");
    for (path, want) in [
        (&garbage, "not a Hugging Face tokenizer.json"),
        (&missing, "cannot read the file"),
    ] {
        let o = run(&[
            "bench",
            "--url",
            "http://127.0.0.1:1/v1",
            "--tokenizer",
            path.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("--tokenizer {}: {want}", path.display())),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

/// Chunks of several tokens and no running usage: the tokenizer file counts
/// each event's tokens (the text's tokens, by where each starts), which are
/// the mock's own chunk sizes, and the level says the tokenizer counted them.
#[test]
fn the_tokenizer_counts_each_chunks_tokens_where_the_server_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = train(dir.path());
    let mock = Mock::start(&[
        "--tokens-per-chunk",
        "4",
        "--itl-ms",
        "4",
        "--reasoning-tokens",
        "2",
    ]);
    let (out, raw) = (dir.path().join("report.json"), dir.path().join("raw.jsonl"));
    let o = run(&[
        "bench",
        "--url",
        &mock.url,
        "--tokenizer",
        path.to_str().unwrap(),
        "--concurrency",
        "2",
        "--requests",
        "6",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--max-tokens",
        "18",
        "--server-metrics",
        "none",
        "--json",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let raw = raw_requests(&raw);
    let ids: Vec<&str> = raw
        .iter()
        .map(|r| r["request_id"].as_str().unwrap())
        .collect();
    let log = mock.log_records_for(&ids);
    for r in &raw {
        let s = log
            .iter()
            .find(|s| s["request_id"] == r["request_id"])
            .unwrap_or_else(|| panic!("{} not in the log", r["request_id"]));
        // The first chunk holds the 2 reasoning tokens and 2 of the answer:
        // two events of 2; then 4, 4, 4, 2.
        assert_eq!(s["chunk_tokens"], serde_json::json!([4, 4, 4, 4, 2]), "{s}");
        assert_eq!(
            r["event_tokens"],
            serde_json::json!([2, 2, 4, 4, 4, 2]),
            "{r}"
        );
    }
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let e = &report["levels"][0]["event_tokens"];
    assert_eq!(
        (e["tokenized"].as_u64(), e["spread"].as_u64()),
        (Some(6), Some(0)),
        "{e}"
    );
}
