//! `tokenscope quality` against ground truth: two `tokenscope mock`s serving the
//! seeded toy language model (`tokenscope_quality::toy_lm`), one perturbed by a known
//! amount. The test computes from the same model, exactly, what the figures must
//! be (greedy exact match, where the answers diverge, KLD over the scored
//! positions, same top p, Δp) and compares them with what the command measured
//! over HTTP: on the exact path (top-k covering the vocabulary) to rounding, on
//! the lower-bound path as a bound. And the failure paths: a server without
//! log-probabilities, a golden file, servers that do not share tokens, a gate.

use crate::common;
use crate::quality_truth;

use std::path::Path;

use common::{Mock, TestProxy, bin, f, text};
use quality_truth::forced_truth;
use serde_json::Value;
use tokenscope_quality::sample::probe_prompts;
use tokenscope_quality::toy_lm::{ToyLm, kld_exact};

const SEED: u64 = 11;

fn mock(vocab: usize, perturb: f64, extra: &[&str]) -> Mock {
    let (v, p) = (vocab.to_string(), perturb.to_string());
    let mut args = vec![
        "--seed",
        "11",
        "--ttft-ms",
        "2",
        "--itl-ms",
        "0.5",
        "--jitter-ms",
        "0",
        "--lm-vocab",
        &v,
        "--lm-perturb",
        &p,
    ];
    args.extend_from_slice(extra);
    Mock::start(&args)
}

/// `--ref R --cand C --prompts N --max-tokens M --seed 11` and `extra`.
fn pair<'a>(
    r: &'a Mock,
    c: &'a Mock,
    prompts: &'a str,
    tokens: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut v = vec![
        "--ref",
        &r.url,
        "--cand",
        &c.url,
        "--prompts",
        prompts,
        "--max-tokens",
        tokens,
        "--seed",
        "11",
    ];
    v.extend_from_slice(extra);
    v
}

fn quality(args: &[&str], json: &Path) -> (std::process::Output, Option<Value>) {
    let out = std::process::Command::new(bin())
        .arg("quality")
        .args(args)
        .env_remove("TOKENSCOPE_API_KEY")
        .env_remove("TOKENSCOPE_REF_API_KEY")
        // The mock's task answers are short whatever it is asked: no need to
        // wait for 256 tokens.
        .args(["--task-max-tokens", "8"])
        .arg("--json")
        .arg(json)
        .output()
        .unwrap();
    let report = std::fs::read_to_string(json)
        .ok()
        .map(|t| serde_json::from_str(&t).unwrap());
    (out, report)
}

/// What the figures must be for `prompts` answered `n` tokens each by the
/// reference model `r` and the candidate `c`.
struct Truth {
    exact_match: f64,
    kld_mean: f64,
    same_top: f64,
    positions: usize,
    delta_p_mean: f64,
    diverge_min: usize,
}

fn truth(r: ToyLm, c: ToyLm, prompts: &[String], n: usize) -> Truth {
    let (mut same_answers, mut klds, mut same_top, mut dps, mut firsts) =
        (0, Vec::new(), 0, Vec::new(), Vec::new());
    for p in prompts {
        let (a, b) = (r.greedy(p, n), c.greedy(p, n));
        let d = a.iter().zip(&b).position(|(x, y)| x != y);
        match d {
            None => same_answers += 1,
            Some(d) => firsts.push(d),
        }
        let scored = d.map_or(n, |d| d + 1);
        let mut state = r.start(p);
        for &t in a.iter().take(scored) {
            let (lp, lq) = (r.logprobs(state), c.logprobs(state));
            klds.push(kld_exact(&lp, &lq));
            same_top += usize::from(r.argmax(state) == c.argmax(state));
            // Δp of the reference's token at every scored position (the
            // candidate lists the whole vocabulary here).
            dps.push(lq[t].exp() - lp[t].exp());
            state = ToyLm::next(state, t);
        }
    }
    Truth {
        exact_match: same_answers as f64 / prompts.len() as f64,
        kld_mean: klds.iter().sum::<f64>() / klds.len() as f64,
        same_top: same_top as f64 / klds.len() as f64,
        positions: klds.len(),
        delta_p_mean: dps.iter().sum::<f64>() / dps.len() as f64,
        diverge_min: firsts.into_iter().min().unwrap_or(0),
    }
}

#[test]
fn measured_figures_are_the_exact_ones_of_a_known_perturbation() {
    let dir = tempfile::tempdir().unwrap();
    // Vocabulary 16, top 20: every list holds the whole distribution (exact).
    let (r, c) = (mock(16, 0.0, &[]), mock(16, 0.3, &[]));
    let json = dir.path().join("q.json");
    let (out, report) = quality(&pair(&r, &c, "24", "24", &["--concurrency", "1,6"]), &json);
    assert!(out.status.success(), "{}", text(&out));
    let report = report.unwrap();
    common::assert_schema("quality.schema.json", &report, "quality report");
    let prompts = probe_prompts(SEED, 24);
    let lm = ToyLm::new(SEED, 16);
    let t = truth(lm, lm.perturbed(0.3, 1), &prompts, 24);
    let forced = forced_truth(lm, lm.perturbed(0.3, 1), 7);
    eprintln!(
        "truth: exact match {:.3}, KLD mean {:.6}, same top {:.4} over {} positions",
        t.exact_match, t.kld_mean, t.same_top, t.positions
    );
    // The reference against itself: nothing changes.
    let own = &report["self_check"];
    assert_eq!(f(&own["exact_match"]), 1.0);
    assert_eq!(f(&own["distribution"]["kld"]["mean"]), 0.0);
    assert_eq!(report["levels"].as_array().unwrap().len(), 2);
    for level in report["levels"].as_array().unwrap() {
        let fig = &level["figures"];
        let d = &fig["distribution"];
        eprintln!(
            "measured c={}: exact match {}, KLD mean {} [{}, {}], same top {}, {} positions",
            level["concurrency"],
            fig["exact_match"],
            d["kld"]["mean"],
            d["kld"]["ci95"][0],
            d["kld"]["ci95"][1],
            d["same_top_p"],
            d["positions"]
        );
        assert_eq!(f(&fig["exact_match"]), t.exact_match);
        assert_eq!(d["positions"].as_u64().unwrap() as usize, t.positions);
        assert_eq!(d["kld"]["exact"], true);
        assert!((f(&d["kld"]["mean"]) - t.kld_mean).abs() < 1e-9, "{d}");
        assert!(f(&d["kld"]["ci95"][0]) <= t.kld_mean && t.kld_mean <= f(&d["kld"]["ci95"][1]));
        assert!((f(&d["same_top_p"]) - t.same_top).abs() < 1e-12);
        assert!((f(&d["delta_p"]["mean"]) - t.delta_p_mean).abs() < 1e-9);
        assert_eq!(
            fig["divergence"]["min"].as_u64().unwrap() as usize,
            t.diverge_min
        );
        // Teacher-forced on the fixed text: every position of each chunk's
        // second half, exactly.
        let tf = &level["teacher_forced"];
        eprintln!(
            "measured c={} teacher-forced: KLD mean {} over {} positions (truth {:.6} over {})",
            level["concurrency"], tf["kld"]["mean"], tf["positions"], forced.0, forced.1
        );
        assert_eq!(tf["positions"].as_u64().unwrap() as usize, forced.1);
        assert_eq!(tf["kld"]["exact"], true);
        assert!((f(&tf["kld"]["mean"]) - forced.0).abs() < 1e-9, "{tf}");
    }
    assert_eq!(report["teacher_forced_chunks"], 7);
    // The same tokenizer: the same ids, as many as the mock counts.
    let probe = tokenscope_quality::teacher::tokenizer_probe();
    let counted = tokenscope_workload::prompts::approx_tokens(&probe);
    assert_eq!(report["tokenizer"]["first_difference"], Value::Null);
    assert_eq!(report["tokenizer"]["reference_tokens"], counted);
    assert_eq!(report["candidate"]["capabilities"]["prompt_logprobs"], true);
    assert_eq!(f(&report["teacher_forced_self_check"]["kld"]["mean"]), 0.0);
    // Both name tokens by id (vLLM's `return_tokens_as_token_ids`, which the
    // mock honours): the figures above were matched by id.
    for side in ["reference", "candidate"] {
        assert_eq!(report[side]["capabilities"]["token_ids"], true, "{side}");
    }
    assert!(
        !report["not_run"].to_string().contains("token ids"),
        "{}",
        report["not_run"]
    );
    let verdict = report["verdict"].as_array().unwrap();
    assert!(
        verdict
            .iter()
            .any(|v| v.as_str().unwrap().contains("answers differently")),
        "{verdict:?}"
    );
    // The same server as its own candidate: no change called.
    let (out, report) = quality(&pair(&r, &r, "8", "16", &[]), &json);
    assert!(out.status.success(), "{}", text(&out));
    let v = report.unwrap()["verdict"].to_string();
    assert!(v.contains("no change from the reference seen"), "{v}");
}

#[test]
fn over_a_top_k_the_kld_is_a_lower_bound() {
    let dir = tempfile::tempdir().unwrap();
    // A candidate that names no token by id: tokens matched by their text.
    let (r, c) = (mock(36, 0.0, &[]), mock(36, 0.5, &["--no-token-ids"]));
    let (out, report) = quality(
        &pair(&r, &c, "16", "16", &["--top-logprobs", "4"]),
        &dir.path().join("q.json"),
    );
    assert!(out.status.success(), "{}", text(&out));
    let report = report.unwrap();
    assert_eq!(report["candidate"]["capabilities"]["token_ids"], false);
    assert!(
        report["not_run"]
            .to_string()
            .contains("token ids: the candidate names none"),
        "{}",
        report["not_run"]
    );
    let lm = ToyLm::new(SEED, 36);
    let t = truth(lm, lm.perturbed(0.5, 1), &probe_prompts(SEED, 16), 16);
    let d = &report["levels"][0]["figures"]["distribution"];
    let measured = f(&d["kld"]["mean"]);
    eprintln!("top 4 of 36: KLD {measured:.6} <= exact {:.6}", t.kld_mean);
    assert_eq!(d["kld"]["exact"], false);
    assert!(
        measured > 0.0 && measured <= t.kld_mean + 1e-12,
        "{measured} vs {}",
        t.kld_mean
    );
    // Same top p needs only the first of each list: exact on this path too.
    assert!((f(&d["same_top_p"]) - t.same_top).abs() < 1e-12);
    assert!(
        text(&out).contains("lower bound"),
        "the text says so: {}",
        text(&out)
    );
}

/// SGLang's OpenAI server computes no prompt log-probabilities: a candidate
/// like it is scored through its native `/generate` (`return_logprob` from
/// `logprob_start_len: 0`), and the teacher-forced figures are the same exact
/// ones as through `echo`.
#[test]
fn a_server_scoring_prompts_only_natively_is_teacher_forced_through_generate() {
    let dir = tempfile::tempdir().unwrap();
    // The reference like vLLM (echo, no /generate), the candidate like SGLang.
    let (r, c) = (
        mock(16, 0.0, &["--no-generate"]),
        mock(16, 0.3, &["--no-echo-logprobs"]),
    );
    let (out, report) = quality(&pair(&r, &c, "4", "8", &[]), &dir.path().join("q.json"));
    assert!(out.status.success(), "{}", text(&out));
    let report = report.unwrap();
    common::assert_schema("quality.schema.json", &report, "quality report");
    let caps = |side: &str| report[side]["capabilities"].clone();
    assert_eq!(caps("reference")["prompt_logprobs_via"], "echo");
    assert_eq!(caps("candidate")["prompt_logprobs_via"], "generate");
    assert!(
        report["not_run"]
            .to_string()
            .contains("one route of teacher forcing"),
        "{}",
        report["not_run"]
    );
    let lm = ToyLm::new(SEED, 16);
    let (kld, positions) = forced_truth(lm, lm.perturbed(0.3, 1), 7);
    let tf = &report["levels"][0]["teacher_forced"];
    eprintln!(
        "teacher-forced through /generate: KLD {} over {} positions (exact {kld:.7} over {positions})",
        tf["kld"]["mean"], tf["positions"]
    );
    assert_eq!(tf["positions"].as_u64().unwrap() as usize, positions);
    assert!((f(&tf["kld"]["mean"]) - kld).abs() < 1e-9, "{tf}");
}

/// Through `/generate` the candidate is asked for the reference's own top ids
/// (`token_ids_logprob`): over a top 4 of 36 words, every position is compared
/// on the reference's whole top 4 plus one rest bin, and the figure is exactly
/// that divergence of the two models, computed here; without the ids (`echo`)
/// only the tokens both top lists hold are compared, a looser bound.
#[test]
fn asked_for_the_references_ids_the_kld_covers_its_whole_top_k() {
    let dir = tempfile::tempdir().unwrap();
    let sglang = ["--no-echo-logprobs"];
    let (r, c) = (mock(36, 0.0, &sglang), mock(36, 0.5, &sglang));
    let args = ["--top-logprobs", "4"];
    let (out, report) = quality(&pair(&r, &c, "2", "4", &args), &dir.path().join("q.json"));
    assert!(out.status.success(), "{}", text(&out));
    let report = report.unwrap();
    let tf = &report["levels"][0]["teacher_forced"];
    assert_eq!(tf["kld"]["exact"], false);
    assert_eq!(tf["kld"]["reference_top_k"], true, "{tf}");
    // The truth: KL of the two models coarsened to the reference's top 4
    // (most likely first, the lower id on a tie) and the rest, on the scored
    // half of each chunk.
    let (lm, k) = (ToyLm::new(SEED, 36), 4);
    let cand = lm.perturbed(0.5, 1);
    use tokenscope_quality::teacher::{CHUNK_WORDS, TEXT, chunks as cut};
    let (mut klds, mut whole) = (Vec::new(), Vec::new());
    for chunk in cut(TEXT, CHUNK_WORDS, 7) {
        let tokens = lm.tokenize(&chunk);
        let mut state = lm.text_start();
        for (i, (_, id)) in tokens.iter().enumerate() {
            if i > tokens.len() / 2 {
                let (p, q) = (lm.logprobs(state), cand.logprobs(state));
                let mut order: Vec<usize> = (0..p.len()).collect();
                order.sort_by(|a, b| p[*b].total_cmp(&p[*a]).then(a.cmp(b)));
                let (mut kl, mut p_in, mut q_in) = (0.0, 0.0, 0.0);
                for &j in &order[..k] {
                    kl += p[j].exp() * (p[j] - q[j]);
                    p_in += p[j].exp();
                    q_in += q[j].exp();
                }
                let (pr, qr) = (1.0 - p_in, 1.0 - q_in);
                klds.push(kl + pr * (pr / qr).ln());
                whole.push(kld_exact(&p, &q));
            }
            state = ToyLm::next(state, *id);
        }
    }
    let truth = klds.iter().sum::<f64>() / klds.len() as f64;
    let exact = whole.iter().sum::<f64>() / whole.len() as f64;
    let measured = f(&tf["kld"]["mean"]);
    eprintln!(
        "teacher-forced, top 4 of 36, the reference's ids asked: KLD {measured:.7} = its top 4 + rest {truth:.7} (whole vocabulary {exact:.7}) over {} positions",
        klds.len()
    );
    assert_eq!(tf["positions"].as_u64().unwrap() as usize, klds.len());
    assert!((measured - truth).abs() < 1e-9, "{measured} vs {truth}");
    assert!(measured <= exact + 1e-12);
    assert!(text(&out).contains("top k + rest"), "{}", text(&out));
}

#[test]
fn without_logprobs_the_behaviour_checks_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let (r, c) = (mock(16, 0.0, &[]), mock(16, 0.3, &["--no-logprobs"]));
    let (out, report) = quality(&pair(&r, &c, "12", "12", &[]), &dir.path().join("q.json"));
    assert!(out.status.success(), "{}", text(&out));
    let report = report.unwrap();
    let lm = ToyLm::new(SEED, 16);
    let t = truth(lm, lm.perturbed(0.3, 1), &probe_prompts(SEED, 12), 12);
    let fig = &report["levels"][0]["figures"];
    assert!(fig["distribution"].is_null());
    assert_eq!(f(&fig["exact_match"]), t.exact_match);
    assert_eq!(report["candidate"]["capabilities"]["top_logprobs"], false);
    let not_run = report["not_run"].to_string();
    assert!(
        not_run.contains("the candidate gave no top-k log-probabilities"),
        "{not_run}"
    );
    assert!(
        not_run.contains("teacher-forced distribution: the candidate does not score"),
        "{not_run}"
    );
    assert!(report["levels"][0]["teacher_forced"].is_null());
}

#[test]
fn a_golden_file_stands_in_for_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let (r, c) = (mock(16, 0.0, &[]), mock(16, 0.3, &[]));
    let golden = dir.path().join("golden.json");
    let g = golden.to_str().unwrap();
    let out = std::process::Command::new(bin())
        .args([
            "quality",
            "--ref",
            &r.url,
            "--save-golden",
            g,
            "--prompts",
            "10",
            "--max-tokens",
            "12",
            "--seed",
            "11",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let size = std::fs::metadata(&golden).unwrap().len();
    eprintln!("golden file: {size} bytes for 10 prompts x 12 tokens x top 16");
    let live = dir.path().join("live.json");
    let (_, live) = quality(&pair(&r, &c, "10", "12", &[]), &live);
    let (out, from_golden) = quality(
        &["--ref", g, "--cand", &c.url, "--seed", "11"],
        &dir.path().join("g.json"),
    );
    assert!(out.status.success(), "{}", text(&out));
    let (live, from_golden) = (live.unwrap(), from_golden.unwrap());
    assert_eq!(
        live["levels"][0]["figures"], from_golden["levels"][0]["figures"],
        "the golden file gives the live reference's figures"
    );
    assert_eq!(
        from_golden["self_check"], live["self_check"],
        "the golden file keeps the noise floor measured when it was made"
    );
    assert!(live["levels"][0]["teacher_forced"].is_object());
    assert_eq!(
        live["levels"][0]["teacher_forced"], from_golden["levels"][0]["teacher_forced"],
        "the golden file keeps the teacher-forced scores"
    );
    assert_eq!(
        from_golden["teacher_forced_self_check"],
        live["teacher_forced_self_check"]
    );
    assert!(live["tokenizer"].is_object());
    assert_eq!(
        from_golden["tokenizer"], live["tokenizer"],
        "the golden file keeps the ids"
    );

    // A golden file of another tokenizer (every token renamed): exit 2, said,
    // and the report written first.
    let mut other: Value =
        serde_json::from_str(&std::fs::read_to_string(&golden).unwrap()).unwrap();
    for s in other["samples"].as_array_mut().unwrap() {
        for p in s["positions"].as_array_mut().unwrap() {
            for a in p["top"].as_array_mut().unwrap() {
                a["token"] = Value::from(format!("▁{}", a["token"].as_str().unwrap()));
            }
        }
    }
    for s in other["tf_samples"].as_array_mut().unwrap() {
        for p in s["positions"].as_array_mut().unwrap() {
            p["token"] = Value::from(format!("▁{}", p["token"].as_str().unwrap()));
        }
    }
    let other_path = dir.path().join("other.json");
    std::fs::write(&other_path, other.to_string()).unwrap();
    let kept = dir.path().join("kept.json");
    let (out, report) = quality(
        &["--ref", other_path.to_str().unwrap(), "--cand", &c.url],
        &kept,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("another tokenizer or another model"),
        "{}",
        text(&out)
    );
    let report = report.expect("the report is written before the exit");
    assert!(
        report["not_run"]
            .to_string()
            .contains("cut the fixed text into different tokens"),
        "{}",
        report["not_run"]
    );
    assert!(report["levels"][0]["teacher_forced"].is_null());

    // Not a golden file at all.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"schema\": \"tokenscope.client/1\"}").unwrap();
    let (out, _) = quality(
        &["--ref", bad.to_str().unwrap(), "--cand", &c.url],
        &dir.path().join("b.json"),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("not a golden file"), "{}", text(&out));
}

#[test]
fn the_gate_fails_a_changed_candidate_and_bad_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (r, c) = (mock(16, 0.0, &[]), mock(16, 0.3, &[]));
    let json = dir.path().join("q.json");
    let common = ["--prompts", "8", "--max-tokens", "12", "--seed", "11"];
    let run = |cand: &str, gate: &str| {
        let mut a = vec!["--ref", r.url.as_str(), "--cand", cand, "--fail-on", gate];
        a.extend_from_slice(&common);
        quality(&a, &json)
    };
    let (out, _) = run(&c.url, "kld_mean:>0.001,exact_match:<90%");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("fail-on: concurrency 1 kld_mean"),
        "{}",
        text(&out)
    );
    let (out, _) = run(&r.url, "kld_mean:>0.001,exact_match:<90%");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // A candidate without log-probabilities: the KLD gate cannot be checked
    // there: said with why and what would measure it, exit 3 (neither a pass nor
    // an error); --allow-unevaluated passes it.
    let bare = mock(16, 0.0, &["--no-logprobs"]);
    let (out, _) = run(&bare.url, "kld_mean:>0.001");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("kld_mean:>0.001: not evaluable")
            && text(&out).contains("it needs top-k log-probabilities"),
        "{}",
        text(&out)
    );
    let mut a = vec!["--ref", r.url.as_str(), "--cand", bare.url.as_str()];
    a.extend_from_slice(&["--fail-on", "kld_mean:>0.001", "--allow-unevaluated"]);
    a.extend_from_slice(&common);
    let (out, _) = quality(&a, &json);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (out, _) = run(&c.url, "speed:>1");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("not a quality metric"),
        "{}",
        text(&out)
    );
    // Nothing listening: a clear sentence naming the server, exit 2, and
    // never a key the URL carries (user:password or query).
    let port = common::free_port();
    let (out, _) = run(
        &format!("http://user:SECRET-PW@127.0.0.1:{port}/v1?api-key=SECRET-Q"),
        "kld_mean:>1",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains(&format!("127.0.0.1:{port}")),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("SECRET"), "{}", text(&out));
}

#[test]
fn task_flips_are_the_ones_the_servers_were_told_to_make() {
    let dir = tempfile::tempdir().unwrap();
    let (r, c) = (
        mock(16, 0.0, &["--lm-tasks-right", "0.9"]),
        mock(16, 0.0, &["--lm-tasks-right", "0.55"]),
    );
    let (out, report) = quality(
        &pair(
            &r,
            &c,
            "4",
            "8",
            &[
                "--tasks",
                "60",
                "--concurrency",
                "1,8",
                "--fail-on",
                "flips:>10%",
            ],
        ),
        &dir.path().join("q.json"),
    );
    let report = report.unwrap();
    // What the two mocks were told: nested sets of right answers.
    use tokenscope_quality::tasks::{mcnemar_p, simulated_right};
    let right = |rate| {
        (0..60)
            .filter(|&i| simulated_right(SEED, SEED, i, rate))
            .count()
    };
    let lost = (0..60)
        .filter(|&i| simulated_right(SEED, SEED, i, 0.9) && !simulated_right(SEED, SEED, i, 0.55))
        .count();
    eprintln!(
        "told: reference {} right, candidate {} right, {lost} flips lost; p = {:.2e}",
        right(0.9),
        right(0.55),
        mcnemar_p(lost, 0)
    );
    for level in report["levels"].as_array().unwrap() {
        let t = &level["tasks"];
        assert_eq!(t["tasks"], 60);
        assert_eq!(
            t["reference"]["right"].as_u64().unwrap() as usize,
            right(0.9)
        );
        assert_eq!(
            t["candidate"]["right"].as_u64().unwrap() as usize,
            right(0.55)
        );
        assert_eq!(t["candidate"]["invalid"], 0);
        assert_eq!(
            (
                t["flips_lost"].as_u64().unwrap() as usize,
                t["flips_gained"].as_u64().unwrap()
            ),
            (lost, 0)
        );
        assert!((f(&t["mcnemar_p"]) - mcnemar_p(lost, 0)).abs() < 1e-15);
        assert!(f(&t["mcnemar_p"]) < 0.01, "{t}");
    }
    // The greedy answers are the same model's: only the tasks changed, and
    // the gate on flips fails the run.
    assert_eq!(f(&report["levels"][0]["figures"]["exact_match"]), 1.0);
    assert!(report["verdict"].to_string().contains("flipped to wrong"));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("fail-on: concurrency 1 flips"),
        "{}",
        text(&out)
    );
}

/// `bench --quality`: the speed sweep, then the quality checks at its
/// concurrency levels against ground truth, shown beside TTFT and ITL, kept
/// beside the report, gated; `compare` and `report` pick the quality report up.
#[test]
fn bench_checks_the_answers_beside_its_speed_and_compare_gates_them() {
    let dir = tempfile::tempdir().unwrap();
    let (r, c) = (mock(16, 0.0, &[]), mock(16, 0.3, &[]));
    let (new, base) = (dir.path().join("new.json"), dir.path().join("base.json"));
    let md = dir.path().join("new.md");
    let bench = |url: &str, extra: &[&str]| {
        std::process::Command::new(bin())
            .env_remove("TOKENSCOPE_API_KEY")
            .env_remove("TOKENSCOPE_REF_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .env("TOKENSCOPE_RESULTS_DIR", common::results_dir())
            .args([
                "bench",
                "--url",
                url,
                "--concurrency",
                "1,3",
                "--requests",
                "6",
            ])
            .args(["--rounds", "1", "--max-tokens", "8", "--quiet"])
            .args(extra)
            .output()
            .unwrap()
    };
    let flags = "--prompts 12 --max-tokens 16 --seed 11 --tasks 6 --task-max-tokens 8";
    let out = bench(
        &c.url,
        &[
            "--quality",
            &r.url,
            "--quality-args",
            flags,
            "--fail-on",
            "kld_mean:>0.01",
            "--json",
            new.to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
            "--api-key",
            "sk-bench-SECRET",
        ],
    );
    // The gate is crossed: exit 1, every report written.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // The bench's key went to the candidate, never to the reference.
    assert!(!text(&out).contains("SECRET"));
    let authorized = |m: &Mock| -> Vec<bool> {
        m.log_records(1)
            .iter()
            .map(|r| r["authorized"].as_bool().unwrap())
            .collect()
    };
    let (to_ref, to_cand) = (authorized(&r), authorized(&c));
    assert!(
        !to_ref.is_empty() && to_ref.iter().all(|a| !a),
        "{to_ref:?}"
    );
    assert!(
        !to_cand.is_empty() && to_cand.iter().all(|a| *a),
        "{to_cand:?}"
    );
    let q: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("new.quality.json")).unwrap(),
    )
    .unwrap();
    common::assert_schema("quality.schema.json", &q, "quality report");
    let t = truth(
        ToyLm::new(SEED, 16),
        ToyLm::new(SEED, 16).perturbed(0.3, 1),
        &probe_prompts(SEED, 12),
        16,
    );
    let forced = forced_truth(
        ToyLm::new(SEED, 16),
        ToyLm::new(SEED, 16).perturbed(0.3, 1),
        7,
    );
    let levels: Vec<u64> = q["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(levels, [1, 3], "the sweep's levels");
    let speed: Value = serde_json::from_str(&std::fs::read_to_string(&new).unwrap()).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let table = stdout
        .split("speed and quality per level:")
        .nth(1)
        .unwrap_or_else(|| panic!("{stdout}"));
    for (level, l) in q["levels"].as_array().unwrap().iter().zip(["c=1", "c=3"]) {
        let kld = f(&level["figures"]["distribution"]["kld"]["mean"]);
        assert!((kld - t.kld_mean).abs() < 1e-9, "{kld} vs {}", t.kld_mean);
        assert_eq!(f(&level["figures"]["exact_match"]), t.exact_match);
        // The table shows the teacher-forced KLD, as the gates read it.
        let tf = f(&level["teacher_forced"]["kld"]["mean"]);
        assert!((tf - forced.0).abs() < 1e-9, "{tf} vs {}", forced.0);
        // The row: the level's own TTFT p50 beside its KLD.
        let row = table
            .lines()
            .find(|x| x.starts_with(l))
            .unwrap_or_else(|| panic!("{table}"));
        let s = speed["levels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| format!("c={}", s["concurrency"]) == l)
            .unwrap();
        let ttft = f(&s["metrics"]["ttft_ms"]["p50"]);
        assert!(
            row.contains(&format!("{tf:.5}"))
                && row.contains(&format!(
                    "{:.1}",
                    s["output_tokens_per_s"].as_f64().unwrap()
                )),
            "{row} (ttft {ttft})"
        );
    }
    assert!(std::fs::read_to_string(&md).unwrap().contains("## Quality"));
    // compare: the quality thresholds apply to the compared run.
    let out = bench(&r.url, &["--json", base.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let compare = |a: &Path, b: &Path, gate: &str| {
        std::process::Command::new(bin())
            .arg("compare")
            .args([a, b])
            .args(["--fail-on", gate])
            .output()
            .unwrap()
    };
    let out = compare(&base, &new, "kld_mean:>0.01");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("crossed a quality threshold"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("quality of"), "{}", text(&out));
    // A speed term these runs cannot judge (no raw files: summaries only) is
    // said, exit 3; --allow-unevaluated passes it.
    let out = compare(&base, &new, "kld_mean:>0.5,ttft_ms:p95:+1000%");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("ttft_ms:p95:+1000%: not evaluable: no raw file"),
        "{}",
        text(&out)
    );
    let out = std::process::Command::new(bin())
        .arg("compare")
        .args([&base, &new])
        .args(["--fail-on", "kld_mean:>0.5,ttft_ms:p95:+1000%"])
        .arg("--allow-unevaluated")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = compare(&new, &base, "kld_mean:>0.5");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("has no quality report"),
        "{}",
        text(&out)
    );
    // report: the section and its verdict beside the speed report's.
    let html = dir.path().join("r.html");
    let out = common::run(&[
        "report",
        "--client",
        new.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--markdown",
        "-",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("## Quality"), "{}", text(&out));
    let html = std::fs::read_to_string(html).unwrap();
    assert!(html.contains("<section id=\"quality\">") && html.ends_with("</body></html>\n"));
    // Bad input, named before the sweep: a flag the bench decides, a golden
    // file that is not there, settings the quality checks do not speak.
    let out = bench(
        &c.url,
        &["--quality", &r.url, "--quality-args", "--cand http://x/v1"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--quality-args: --cand"),
        "{}",
        text(&out)
    );
    // The reference's key never on a command line, and never echoed.
    let out = bench(
        &c.url,
        &[
            "--quality",
            &r.url,
            "--quality-args",
            "--ref-api-key sk-LEAK1",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("TOKENSCOPE_REF_API_KEY"),
        "{}",
        text(&out)
    );
    let out = bench(
        &c.url,
        &["--quality", &r.url, "--quality-args", "--bogus sk-LEAK2"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!text(&out).contains("LEAK"), "{}", text(&out));
    let early = dir.path().join("early.json");
    let e = early.to_str().unwrap();
    let out = bench(&c.url, &["--quality", "no-such-golden.json", "--json", e]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no-such-golden.json"), "{}", text(&out));
    // The connection options are the bench's own, given to bench once.
    let out = bench(
        &c.url,
        &[
            "--quality",
            &r.url,
            "--quality-args",
            "-HX-Team:sk-LEAK3",
            "--json",
            e,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("-H is a connection option: give it to bench")
            && !text(&out).contains("LEAK"),
        "{}",
        text(&out)
    );
    assert!(!early.exists(), "refused before the sweep");
    // A reference that fails after the sweep: the speed report is kept.
    let lost = dir.path().join("lost.json");
    let out = bench(
        &c.url,
        &[
            "--quality",
            "http://127.0.0.1:1/v1",
            "--json",
            lost.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("the speed reports are written"),
        "{}",
        text(&out)
    );
    assert!(lost.is_file());
}

/// Two servers of different tokenizers (the same count, other ids): exit 2,
/// the sentence says so, the report is written first.
#[test]
fn servers_of_different_tokenizers_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (r, c) = (
        mock(16, 0.0, &[]),
        mock(16, 0.0, &["--tokenizer-seed", "7"]),
    );
    let json = dir.path().join("q.json");
    let (out, report) = quality(&pair(&r, &c, "4", "8", &["--tasks", "0"]), &json);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("tokenizers differ"), "{}", text(&out));
    let report = report.expect("written before the exit");
    common::assert_schema("quality.schema.json", &report, "quality report");
    assert_eq!(report["tokenizer"]["first_difference"], 0);
    assert!(
        report["verdict"].to_string().contains("Tokenizers differ"),
        "{}",
        report["verdict"]
    );
    // Neither tokens by id nor the reference's ids asked of another
    // vocabulary (an id outside it can stop an engine).
    assert_eq!(
        report["levels"][0]["teacher_forced"]["kld"]["reference_top_k"],
        false
    );
    assert!(
        report["not_run"].to_string().contains("token ids"),
        "{}",
        report["not_run"]
    );
}

/// `--batch-invariant`: a candidate whose answers change when it batches
/// (`--lm-batch-noise`) is flagged and fails; one that does not passes.
#[test]
fn answers_that_change_with_load_break_a_batch_invariance_claim() {
    let dir = tempfile::tempdir().unwrap();
    let r = mock(16, 0.0, &[]);
    let variant = mock(16, 0.0, &["--lm-batch-noise", "1.5"]);
    let args = |c: &Mock| {
        let mut v = vec![
            "--ref".to_owned(),
            r.url.clone(),
            "--cand".to_owned(),
            c.url.clone(),
        ];
        v.extend(
            [
                "--prompts",
                "12",
                "--max-tokens",
                "12",
                "--tasks",
                "0",
                "--chunks",
                "0",
            ]
            .map(str::to_owned),
        );
        v.extend(["--concurrency", "1,4", "--batch-invariant"].map(str::to_owned));
        v
    };
    let a = args(&variant);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (out, report) = quality(&a, &dir.path().join("v.json"));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("batch invariance: at concurrency 4"),
        "{}",
        text(&out)
    );
    let report = report.unwrap();
    common::assert_schema("quality.schema.json", &report, "quality report");
    assert!(report["levels"][0]["against_first_level"].is_null());
    // Alone at concurrency 1 the model is the reference's.
    assert_eq!(f(&report["levels"][0]["figures"]["exact_match"]), 1.0);
    let changed = f(&report["levels"][1]["against_first_level"]["exact_match"]);
    assert!(changed < 1.0, "{changed}");
    assert!(
        report["verdict"]
            .to_string()
            .contains("claims batch-invariant decoding")
    );
    // Batch-invariant: the same answers at every level.
    let a = args(&r);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (out, report) = quality(&a, &dir.path().join("i.json"));
    assert!(out.status.success(), "{}", text(&out));
    let report = report.unwrap();
    assert_eq!(
        f(&report["levels"][1]["against_first_level"]["exact_match"]),
        1.0
    );
}

/// `quality` (and `bench --quality`) take bench's connection options: a
/// candidate behind a private CA is refused in one line naming the host, the
/// reason and `--ca-cert`, and reached with it; through a proxy with
/// credentials both servers' requests go through it, the candidate alone gets
/// its `--header` (the reference is another server), and neither the proxy's
/// password nor the header's value shows anywhere.
#[test]
fn private_ca_proxy_and_headers_reach_the_servers_as_bench_does() {
    let certs = tempfile::tempdir().unwrap();
    let r = mock(16, 0.0, &[]);
    let c = mock(
        16,
        0.0,
        &["--tls-self-signed", certs.path().to_str().unwrap()],
    );
    assert!(c.url.starts_with("https://127.0.0.1:"), "{}", c.url);
    let ca = certs.path().join("ca.pem");
    let ca = ca.to_str().unwrap();
    let port = |url: &str| {
        url.split(':')
            .nth(2)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_owned()
    };
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str], json: &str| {
        let path = dir.path().join(json);
        let mut cmd = std::process::Command::new(bin());
        cmd.arg("quality")
            .args(pair(&r, &c, "2", "4", &["--tasks", "0", "--chunks", "0"]))
            .args(extra)
            .arg("--json")
            .arg(&path);
        for v in common::NETWORK_ENV {
            cmd.env_remove(v);
        }
        let out = cmd.output().unwrap();
        let report = std::fs::read_to_string(&path).ok();
        (out, report)
    };

    // Not trusted: one clear line, nothing written.
    let (out, report) = run(&[], "untrusted.json");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = text(&out);
    assert!(
        err.contains("unknown issuer")
            && err.contains("--ca-cert")
            && err.contains(&format!("127.0.0.1:{}", port(&c.url))),
        "{err}"
    );
    assert!(report.is_none());

    // Trusted: the same model on both sides, every answer the same.
    let (out, report) = run(&["--ca-cert", ca], "trusted.json");
    assert!(out.status.success(), "{}", text(&out));
    let q: Value = serde_json::from_str(&report.unwrap()).unwrap();
    assert_eq!(f(&q["levels"][0]["figures"]["exact_match"]), 1.0);

    // Through a proxy that wants credentials, with a secret header.
    let proxy = TestProxy::start_with_auth("team", "pr0xy-pass");
    let with_creds = proxy.url().replace("http://", "http://team:pr0xy-pass@");
    let (out, report) = run(
        &[
            "--ca-cert",
            ca,
            "--proxy",
            &with_creds,
            "--header",
            "X-Team: t-s3cret",
        ],
        "proxied.json",
    );
    assert!(out.status.success(), "{}", text(&out));
    let targets = proxy.targets();
    for url in [&r.url, &c.url] {
        assert!(
            targets.contains(&format!("127.0.0.1:{}", port(url))),
            "{url} was not reached through the proxy: {targets:?}"
        );
    }
    assert_eq!(proxy.refused(), 0);
    assert!(
        text(&out).contains(&format!(
            "note: requests go through the proxy {} (from --proxy)",
            proxy.url()
        )),
        "{}",
        text(&out)
    );
    let report = report.unwrap();
    for (what, t) in [("output", text(&out)), ("report", report)] {
        assert!(
            !t.contains("pr0xy-pass") && !t.contains("t-s3cret"),
            "the {what} holds a secret"
        );
    }
    let has_header = |m: &Mock| -> Vec<bool> {
        m.log_records(1)
            .iter()
            .filter(|s| s.get("header_names").is_some())
            .map(|s| {
                s["header_names"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|n| n == "x-team")
            })
            .collect()
    };
    let (to_cand, to_ref) = (has_header(&c), has_header(&r));
    assert!(to_cand.iter().any(|h| *h), "{to_cand:?}");
    assert!(
        !to_ref.is_empty() && to_ref.iter().all(|h| !h),
        "{to_ref:?}"
    );

    // `bench --quality` passes its own --ca-cert to the checks.
    let out_json = dir.path().join("bench.json");
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["bench", "--url", &c.url, "--ca-cert", ca])
        .args(["--concurrency", "1", "--requests", "2", "--rounds", "1"])
        .args(["--max-tokens", "4", "--quiet", "--server-metrics", "none"])
        // `--quality-args` is one argument holding quality's own flags.
        .args([
            "--quality",
            &r.url,
            "--quality-args",
            "--prompts 2 --max-tokens 4 --tasks 0 --chunks 0 --seed 11",
        ])
        .arg("--json")
        .arg(&out_json);
    for v in common::NETWORK_ENV {
        cmd.env_remove(v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let q: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("bench.quality.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(f(&q["levels"][0]["figures"]["exact_match"]), 1.0);
}
