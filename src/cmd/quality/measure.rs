//! The measurement: the reference (a server asked twice, or a golden file),
//! then the candidate at each concurrency, into one [`QualityReport`].

use std::path::Path;

use anyhow::Context as _;
use tokenscope_core::parse::parse_base_url;
use tokenscope_core::quality::golden::{GOLDEN_SCHEMA, Golden};
use tokenscope_core::quality::measure::{Distribution, PairFigures};
use tokenscope_core::quality::report::{
    Capabilities, QualityLevel, QualityReport, SCHEMA, Side, TokenizerCheck,
};
use tokenscope_core::quality::sample::{Sample, probe_prompts};
use tokenscope_core::quality::tasks::{Task, builtin, compare_tasks, import_jsonl};
use tokenscope_core::quality::teacher;

use super::args::QualityArgs;
use super::server::{
    Ask, Server, answers, paired, probe, probe_echo, score, task_outputs, token_ids,
};

/// The reference's teacher-forced scores: the chunks, each scored, and the
/// scores against a second reading.
struct Forced {
    chunks: Vec<String>,
    samples: Vec<Sample>,
    self_check: Option<Distribution>,
}

/// The fixed text's chunks: `--text FILE` or the built-in text.
fn fixed_chunks(args: &QualityArgs) -> anyhow::Result<Vec<String>> {
    let text = match &args.text {
        Some(p) => std::fs::read_to_string(p)
            .with_context(|| format!("--text {}: cannot read", p.display()))?,
        None => teacher::TEXT.to_owned(),
    };
    let chunks = teacher::chunks(&text, teacher::CHUNK_WORDS, args.chunks);
    if chunks.is_empty() && args.chunks > 0 {
        let shown = args
            .text
            .as_ref()
            .map_or("the built-in text".to_owned(), |p| p.display().to_string());
        anyhow::bail!(
            "--text {shown}: under {} words, not one chunk to score",
            teacher::CHUNK_WORDS / 2
        );
    }
    Ok(chunks)
}

/// The files a run needs, read once to name a bad one before anything runs.
pub(super) fn check_files(args: &QualityArgs) -> anyhow::Result<()> {
    for url in [Some(&args.reference), args.candidate.as_ref()]
        .into_iter()
        .flatten()
        .filter(|u| u.contains("://"))
    {
        parse_base_url(url).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    if golden_at(&args.reference)?.is_some() {
        // A golden reference brings its own text and tasks.
        return Ok(());
    }
    fixed_chunks(args)?;
    if let Some(path) = &args.tasks_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--tasks-file {}: cannot read", path.display()))?;
        import_jsonl(&text).map_err(|e| anyhow::anyhow!("--tasks-file {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Measure; `None` when there was only a golden file to save.
pub(super) async fn measure(
    args: &QualityArgs,
    levels: &[u32],
) -> anyhow::Result<Option<QualityReport>> {
    let golden = golden_at(&args.reference)?;
    let golden_reference = golden.is_some();
    if golden.is_some() && args.save_golden.is_some() {
        anyhow::bail!(
            "--save-golden: the reference is already a golden file ({})",
            args.reference
        );
    }
    let prompts = match &golden {
        Some(g) => g.prompts.clone(),
        None => probe_prompts(args.seed, args.prompts),
    };
    let (max_tokens, top_k) = match &golden {
        Some(g) => (g.max_tokens, g.top_logprobs),
        None => (args.max_tokens, args.top_logprobs),
    };
    let mut not_run = Vec::new();
    let tasks: Vec<Task> = match (&golden, &args.tasks_file) {
        (Some(g), _) => g.tasks.clone(),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--tasks-file {}: cannot read", path.display()))?;
            import_jsonl(&text)
                .map_err(|e| anyhow::anyhow!("--tasks-file {}: {e}", path.display()))?
        }
        (None, None) => builtin(args.seed, args.tasks),
    };
    let task_max_tokens = golden
        .as_ref()
        .map_or(args.task_max_tokens, |g| g.task_max_tokens);
    if tasks.is_empty() {
        not_run.push("tasks: none asked".to_owned());
    }
    // The reference: a golden file, or a server asked twice (the noise floor).
    let mut forced: Option<Forced> = None;
    let reference_ids: Option<Vec<u64>>;
    let probe_text = teacher::tokenizer_probe();
    let (reference_side, reference, self_check, reference_tasks) = match golden {
        Some(g) => {
            let caps = Capabilities {
                chat: true,
                top_logprobs: g.samples.iter().all(Sample::has_top_logprobs),
                prompt_logprobs: !g.tf_samples.is_empty(),
                model: g.model.clone(),
            };
            reference_ids = (!g.tokenizer_ids.is_empty()).then(|| g.tokenizer_ids.clone());
            forced = (!g.tf_samples.is_empty() && args.chunks > 0).then(|| Forced {
                chunks: g.tf_chunks.clone(),
                samples: g.tf_samples.clone(),
                self_check: g.tf_self_check.clone(),
            });
            if g.self_check.is_none() {
                not_run.push(
                    "self-consistency: the golden file kept no self-check (the candidate is judged against perfect agreement)"
                        .to_owned(),
                );
            }
            let side = Side {
                source: args.reference.clone(),
                capabilities: caps,
            };
            let outputs: Vec<Option<String>> = g.task_outputs.into_iter().map(Some).collect();
            (
                side,
                g.samples.into_iter().map(Some).collect::<Vec<_>>(),
                g.self_check,
                outputs,
            )
        }
        None => {
            let server = Server::new(&args.reference, args.reference_key(), args.timeout)?;
            let model = match &args.model {
                Some(m) => m.clone(),
                None => server.first_model().await?,
            };
            let mut caps = probe(&server, &model, top_k).await;
            if !caps.chat {
                anyhow::bail!("{}: no chat completion could be read from it", server.shown);
            }
            reference_ids = token_ids(&server, &model, &probe_text).await;
            let chunks = fixed_chunks(args)?;
            caps.prompt_logprobs = !chunks.is_empty() && probe_echo(&server, &model, top_k).await;
            if caps.prompt_logprobs {
                eprintln!(
                    "quality: the reference, {} chunks teacher-forced, twice",
                    chunks.len()
                );
                let first = score(&server, &model, top_k, &chunks, 1).await;
                let second = score(&server, &model, top_k, &chunks, 1).await;
                let missing = first.iter().chain(&second).filter(|s| s.is_none()).count();
                if missing == 0 {
                    let first: Vec<Sample> = first.into_iter().flatten().collect();
                    let second: Vec<Sample> = second.into_iter().flatten().collect();
                    forced = Some(Forced {
                        self_check: teacher::distribution(&first, &second, args.seed),
                        chunks,
                        samples: first,
                    });
                } else {
                    not_run.push(format!(
                        "teacher-forced: {missing} of the reference's scoring requests failed"
                    ));
                }
            }
            let ask = Ask {
                model,
                max_tokens,
                top: caps.top_logprobs.then_some(top_k),
            };
            eprintln!("quality: the reference, {} prompts, twice", prompts.len());
            let first = answers(&server, &ask, &prompts, 1).await;
            let second = answers(&server, &ask, &prompts, 1).await;
            let self_check = paired(&first, &second, args.seed);
            let task_ask = Ask {
                model: ask.model.clone(),
                max_tokens: task_max_tokens,
                top: None,
            };
            let outputs = task_outputs(&server, &task_ask, &tasks, 1).await;
            if let Some(path) = &args.save_golden {
                let kept = Kept {
                    self_check: &self_check,
                    samples: &first,
                    tasks: &tasks,
                    task_outputs: &outputs,
                    task_max_tokens,
                    forced: forced.as_ref(),
                    tokenizer_ids: reference_ids.as_deref().unwrap_or_default(),
                };
                save_golden(path, &server, &ask, top_k, &caps, &prompts, &kept)?;
            }
            let side = Side {
                source: server.shown.clone(),
                capabilities: caps,
            };
            (side, first, Some(self_check), outputs)
        }
    };
    let Some(cand_url) = &args.candidate else {
        if args.save_golden.is_none() {
            anyhow::bail!("nothing to compare: give --cand URL (or --save-golden FILE)");
        }
        return Ok(None);
    };
    let server = Server::new(cand_url, args.candidate_key(), args.timeout)?;
    let model = match args.cand_model.as_ref().or(args.model.as_ref()) {
        Some(m) => m.clone(),
        None => server.first_model().await?,
    };
    let mut caps = probe(&server, &model, top_k).await;
    if !caps.chat {
        anyhow::bail!("{}: no chat completion could be read from it", server.shown);
    }
    caps.prompt_logprobs = forced.is_some() && probe_echo(&server, &model, top_k).await;
    let candidate_ids = token_ids(&server, &model, &probe_text).await;
    let tokenizer = match (&reference_ids, &candidate_ids) {
        (Some(r), Some(c)) => Some(TokenizerCheck::of(r, c)),
        (r, _) => {
            let who = match (r, golden_reference) {
                (Some(_), _) => "the candidate has no /tokenize (llama.cpp's or vLLM's contract)",
                (None, true) => "the golden file kept no /tokenize ids",
                (None, false) => "the reference has no /tokenize (llama.cpp's or vLLM's contract)",
            };
            not_run.push(format!("tokenizer identity: {who}"));
            None
        }
    };
    if args.chunks > 0 && !caps.prompt_logprobs {
        let who = match (&forced, reference_side.capabilities.prompt_logprobs) {
            (Some(_), _) => "the candidate does",
            (None, true) => "the reference's scoring failed; it does",
            (None, false) => "the reference does",
        };
        not_run.push(format!(
            "teacher-forced distribution: {who} not score a prompt's own tokens (completions with echo and logprobs); the distribution is on the generated tokens"
        ));
    }
    let both_top = caps.top_logprobs && reference_side.capabilities.top_logprobs;
    if !both_top {
        let who = if caps.top_logprobs {
            "the reference"
        } else {
            "the candidate"
        };
        not_run.push(format!(
            "distribution (KLD, same top p, Δp, perplexity ratio): {who} gave no top-k log-probabilities"
        ));
    }
    let ask = Ask {
        model,
        max_tokens,
        top: caps.top_logprobs.then_some(top_k),
    };
    let mut out = Vec::new();
    let mut first_answers: Option<Vec<Option<Sample>>> = None;
    for &c in levels {
        eprintln!(
            "quality: the candidate, {} prompts, concurrency {c}",
            prompts.len()
        );
        let cand = answers(&server, &ask, &prompts, c).await;
        let task_ask = Ask {
            model: ask.model.clone(),
            max_tokens: task_max_tokens,
            top: None,
        };
        let cand_tasks = task_outputs(&server, &task_ask, &tasks, c).await;
        let teacher_forced = match &forced {
            Some(f) if caps.prompt_logprobs => {
                forced_level(f, &server, &ask.model, top_k, c, args.seed, &mut not_run).await
            }
            _ => None,
        };
        let against_first_level = first_answers
            .as_ref()
            .map(|first| paired(first, &cand, args.seed));
        let figures = paired(&reference, &cand, args.seed);
        first_answers.get_or_insert(cand);
        out.push(QualityLevel {
            concurrency: c,
            figures,
            against_first_level,
            tasks: (!tasks.is_empty())
                .then(|| compare_tasks(&tasks, &reference_tasks, &cand_tasks)),
            teacher_forced,
        });
    }
    let distinct: std::collections::BTreeSet<&u32> = levels.iter().collect();
    if args.batch_invariant && distinct.len() < 2 {
        not_run.push(
            "batch invariance: one concurrency level, nothing to compare the answers with (give --concurrency 1,N)"
                .to_owned(),
        );
    }
    let mut report = QualityReport {
        schema: SCHEMA.to_owned(),
        tool_version: tokenscope_core::VERSION.to_owned(),
        reference: reference_side,
        candidate: Side {
            source: server.shown.clone(),
            capabilities: caps,
        },
        prompts: prompts.len(),
        max_tokens,
        top_logprobs: top_k,
        self_check,
        batch_invariant_claimed: args.batch_invariant,
        tokenizer,
        teacher_forced_chunks: forced.as_ref().map_or(0, |f| f.chunks.len()),
        teacher_forced_self_check: forced.and_then(|f| f.self_check),
        levels: out,
        not_run,
        verdict: Vec::new(),
    };
    report.write_verdict();
    Ok(Some(report))
}

/// The candidate's teacher-forced distribution at concurrency `c` (`None`,
/// said in `not_run`, when a request failed or the tokens differ).
async fn forced_level(
    f: &Forced,
    server: &Server,
    model: &str,
    top_k: u32,
    c: u32,
    seed: u64,
    not_run: &mut Vec<String>,
) -> Option<Distribution> {
    eprintln!(
        "quality: the candidate, {} chunks teacher-forced, concurrency {c}",
        f.chunks.len()
    );
    let scores = score(server, model, top_k, &f.chunks, c).await;
    let missing = scores.iter().filter(|s| s.is_none()).count();
    if missing > 0 {
        not_run.push(format!(
            "teacher-forced at concurrency {c}: {missing} of {} scoring requests failed",
            scores.len()
        ));
        return None;
    }
    let scores: Vec<Sample> = scores.into_iter().flatten().collect();
    if !teacher::same_tokens(&f.samples, &scores) {
        not_run.push(format!(
            "teacher-forced at concurrency {c}: the two servers cut the fixed text into different tokens (another tokenizer): positions do not line up"
        ));
        return None;
    }
    teacher::distribution(&f.samples, &scores, seed)
}

/// The reference as a golden file, when `s` names one.
fn golden_at(s: &str) -> anyhow::Result<Option<Golden>> {
    if s.contains("://") {
        return Ok(None);
    }
    if !Path::new(s).is_file() {
        anyhow::bail!("--ref {s}: neither an http(s) URL nor a golden file");
    }
    let text = std::fs::read_to_string(s).with_context(|| format!("--ref {s}: cannot read"))?;
    Golden::parse(&text)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("--ref {s}: {e}"))
}

/// What a golden file keeps of the reference's answers.
struct Kept<'a> {
    self_check: &'a PairFigures,
    samples: &'a [Option<Sample>],
    tasks: &'a [Task],
    task_outputs: &'a [Option<String>],
    task_max_tokens: u32,
    forced: Option<&'a Forced>,
    tokenizer_ids: &'a [u64],
}

fn save_golden(
    path: &Path,
    server: &Server,
    ask: &Ask,
    top_k: u32,
    caps: &Capabilities,
    prompts: &[String],
    kept: &Kept<'_>,
) -> anyhow::Result<()> {
    let missing = kept.samples.iter().filter(|s| s.is_none()).count()
        + kept.task_outputs.iter().filter(|s| s.is_none()).count();
    if missing > 0 {
        anyhow::bail!(
            "--save-golden: {missing} of the reference's {} answers failed; a golden file needs them all",
            kept.samples.len() + kept.task_outputs.len()
        );
    }
    let g = Golden {
        schema: GOLDEN_SCHEMA.to_owned(),
        model: caps.model.clone(),
        source: server.shown.clone(),
        max_tokens: ask.max_tokens,
        top_logprobs: if caps.top_logprobs { top_k } else { 0 },
        prompts: prompts.to_vec(),
        samples: kept.samples.iter().flatten().cloned().collect(),
        tasks: kept.tasks.to_vec(),
        task_outputs: kept.task_outputs.iter().flatten().cloned().collect(),
        task_max_tokens: kept.task_max_tokens,
        self_check: Some(kept.self_check.clone()),
        tf_chunks: kept.forced.map(|f| f.chunks.clone()).unwrap_or_default(),
        tf_samples: kept.forced.map(|f| f.samples.clone()).unwrap_or_default(),
        tf_self_check: kept.forced.and_then(|f| f.self_check.clone()),
        tokenizer_ids: kept.tokenizer_ids.to_vec(),
    };
    std::fs::write(path, serde_json::to_string(&g)?)
        .with_context(|| format!("--save-golden {}: cannot write", path.display()))?;
    eprintln!(
        "quality: the reference's answers kept in {}",
        path.display()
    );
    Ok(())
}
