//! The measurement's files and servers: the settings read (a golden reference,
//! `--text`, `--tasks-file`) into `tokenscope_quality::run`'s plan, the servers over
//! HTTP, the reference kept as a golden file before the candidate runs.

use std::path::Path;

use anyhow::Context as _;
use tokenscope_measure::parse::parse_base_url;
use tokenscope_quality::golden::Golden;
use tokenscope_quality::report::QualityReport;
use tokenscope_quality::run::{self, Plan, Reference};
use tokenscope_quality::sample::probe_prompts;
use tokenscope_quality::tasks::{builtin, import_jsonl};
use tokenscope_quality::teacher;

use super::args::QualityArgs;
use super::server::{connections, server};

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
    // The connection flags (a bad header, a proxy that is not a URL).
    connections(args)?;
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
    let conn = connections(args)?;
    if golden.is_some() && args.save_golden.is_some() {
        anyhow::bail!(
            "--save-golden: the reference is already a golden file ({})",
            args.reference
        );
    }
    let mut plan = Plan {
        prompts: probe_prompts(args.seed, args.prompts),
        max_tokens: args.max_tokens,
        top_k: args.top_logprobs,
        tasks: Vec::new(),
        task_max_tokens: args.task_max_tokens,
        chunks: Vec::new(),
        seed: args.seed,
        model: args.model.clone(),
        cand_model: args.cand_model.clone(),
        batch_invariant: args.batch_invariant,
        token_ids: false,
    };
    // The reference: a golden file, or a server asked twice (the noise floor).
    let reference = match golden {
        Some(g) => Reference::from_golden(g, &args.reference, &mut plan, args.chunks > 0),
        None => {
            plan.tasks = match &args.tasks_file {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .with_context(|| format!("--tasks-file {}: cannot read", path.display()))?;
                    import_jsonl(&text)
                        .map_err(|e| anyhow::anyhow!("--tasks-file {}: {e}", path.display()))?
                }
                None => builtin(args.seed, args.tasks),
            };
            plan.chunks = fixed_chunks(args)?;
            let server = server(
                &args.reference,
                &conn.reference,
                args.reference_key(),
                args.timeout,
            )?;
            // Tokens by id where both servers name them, unless the
            // reference is kept as a golden file (tokens as text, for any
            // candidate).
            if let (Some(cand), None) = (&args.candidate, &args.save_golden) {
                let cand = self::server(cand, &conn.candidate, args.candidate_key(), args.timeout)?;
                plan.token_ids = run::token_ids_on_both(&plan, &server, &cand).await;
            }
            let reference = run::reference(&plan, &server).await?;
            if let Some(path) = &args.save_golden {
                let g = reference
                    .golden(&plan)
                    .map_err(|e| anyhow::anyhow!("--save-golden: {e}"))?;
                std::fs::write(path, serde_json::to_string(&g)?)
                    .with_context(|| format!("--save-golden {}: cannot write", path.display()))?;
                eprintln!(
                    "quality: the reference's answers kept in {}",
                    path.display()
                );
            }
            reference
        }
    };
    let Some(cand_url) = &args.candidate else {
        if args.save_golden.is_none() {
            anyhow::bail!("nothing to compare: give --cand URL (or --save-golden FILE)");
        }
        return Ok(None);
    };
    let server = server(
        cand_url,
        &conn.candidate,
        args.candidate_key(),
        args.timeout,
    )?;
    Ok(Some(
        run::candidate(&plan, reference, &server, levels).await?,
    ))
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
