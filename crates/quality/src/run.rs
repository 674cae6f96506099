//! One quality measurement, whatever carries its requests (the CLI over HTTP,
//! the page over `fetch` or its simulator): the reference ([`reference`]: a
//! server asked twice, its noise floor; or [`Reference::from_golden`]), then
//! the candidate at each concurrency ([`candidate`]), into one
//! [`QualityReport`]. Between the two the reference can be kept as a golden
//! file ([`Reference::golden`]), so a failing candidate loses nothing measured.

use super::golden::{GOLDEN_SCHEMA, Golden};
use super::measure::{Distribution, PairFigures};
use super::report::{Capabilities, QualityLevel, QualityReport, SCHEMA, Side, TokenizerCheck};
use super::sample::Sample;
use super::session::{Ask, Scoring, Server, Transport, paired};
use super::tasks::{Task, compare_tasks};
use super::teacher;

/// What is asked, and of whom.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The prompts (`sample::probe_prompts`, or a golden file's).
    pub prompts: Vec<String>,
    /// Tokens per answer.
    pub max_tokens: u32,
    /// Top-k log-probabilities asked for.
    pub top_k: u32,
    /// The tasks (none: no task checks).
    pub tasks: Vec<Task>,
    /// Tokens per task answer.
    pub task_max_tokens: u32,
    /// The fixed text's chunks for teacher forcing (none: not asked).
    pub chunks: Vec<String>,
    /// The bootstrap's seed.
    pub seed: u64,
    /// The model asked of the reference (`None`: the first `/models` lists).
    pub model: Option<String>,
    /// The model asked of the candidate (`None`: [`Plan::model`], else the
    /// first it lists).
    pub cand_model: Option<String>,
    /// The candidate claims batch-invariant decoding.
    pub batch_invariant: bool,
    /// Ask both servers to name tokens by id ([`token_ids_on_both`]; never
    /// for a golden file, which keeps tokens as text for any candidate).
    pub token_ids: bool,
}

/// Why a measurement stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No model to ask for.
    #[error("{0}")]
    Model(String),
    /// The server gave no readable chat completion.
    #[error("{0}: no chat completion could be read from it")]
    NoChat(String),
    /// A golden file keeps tokens as text.
    #[error("the reference's tokens were asked by id; a golden file keeps them as text")]
    TokenIds,
    /// A golden file needs every answer.
    #[error("{missing} of the reference's {total} answers failed; a golden file needs them all")]
    Incomplete {
        /// Answers that failed.
        missing: usize,
        /// Answers asked.
        total: usize,
    },
}

/// The reference's teacher-forced scores: the chunks, each scored, and the
/// scores against a second reading.
#[derive(Debug, Clone)]
struct Forced {
    chunks: Vec<String>,
    samples: Vec<Sample>,
    self_check: Option<Distribution>,
}

/// The reference, measured or read from a golden file.
#[derive(Debug, Clone)]
pub struct Reference {
    side: Side,
    ask: Ask,
    samples: Vec<Option<Sample>>,
    self_check: Option<PairFigures>,
    task_outputs: Vec<Option<String>>,
    forced: Option<Forced>,
    tokenizer_ids: Option<Vec<u64>>,
    from_golden: bool,
    not_run: Vec<String>,
}

impl Reference {
    /// A golden file as the reference (`source`: its path as shown), and the
    /// plan it implies (its prompts, tasks, text and limits; `seed`,
    /// `teacher_forced` and the models from the caller).
    pub fn from_golden(
        g: Golden,
        source: &str,
        plan: &mut Plan,
        teacher_forced: bool,
    ) -> Reference {
        plan.prompts = g.prompts.clone();
        plan.max_tokens = g.max_tokens;
        plan.top_k = g.top_logprobs;
        plan.tasks = g.tasks.clone();
        plan.task_max_tokens = g.task_max_tokens;
        plan.token_ids = false;
        let forced = (!g.tf_samples.is_empty() && teacher_forced).then(|| Forced {
            chunks: g.tf_chunks.clone(),
            samples: g.tf_samples.clone(),
            self_check: g.tf_self_check.clone(),
        });
        plan.chunks = forced
            .as_ref()
            .map(|f| f.chunks.clone())
            .unwrap_or_default();
        let mut not_run = Vec::new();
        if teacher_forced && g.tf_samples.is_empty() {
            not_run.push(
                "teacher-forced distribution: the golden file kept no teacher-forced scores; the distribution is on the generated tokens"
                    .to_owned(),
            );
        }
        if g.self_check.is_none() {
            not_run.push(
                "self-consistency: the golden file kept no self-check (the candidate is judged against perfect agreement)"
                    .to_owned(),
            );
        }
        Reference {
            side: Side {
                source: source.to_owned(),
                capabilities: Capabilities {
                    chat: true,
                    top_logprobs: g.samples.iter().all(Sample::has_top_logprobs),
                    prompt_logprobs: !g.tf_samples.is_empty(),
                    prompt_logprobs_via: None,
                    token_ids: false,
                    model: g.model.clone(),
                },
            },
            ask: Ask {
                model: g.model,
                max_tokens: g.max_tokens,
                top: (g.top_logprobs > 0).then_some(g.top_logprobs),
                token_ids: false,
            },
            samples: g.samples.into_iter().map(Some).collect(),
            self_check: g.self_check,
            task_outputs: g.task_outputs.into_iter().map(Some).collect(),
            forced,
            tokenizer_ids: (!g.tokenizer_ids.is_empty()).then_some(g.tokenizer_ids),
            from_golden: true,
            not_run,
        }
    }

    /// The reference as a golden file (every answer needed, tokens as text).
    pub fn golden(&self, plan: &Plan) -> Result<Golden, RunError> {
        if self.ask.token_ids {
            return Err(RunError::TokenIds);
        }
        let missing = self.samples.iter().filter(|s| s.is_none()).count()
            + self.task_outputs.iter().filter(|s| s.is_none()).count();
        if missing > 0 {
            return Err(RunError::Incomplete {
                missing,
                total: self.samples.len() + self.task_outputs.len(),
            });
        }
        let caps = &self.side.capabilities;
        let forced = self.forced.as_ref();
        Ok(Golden {
            schema: GOLDEN_SCHEMA.to_owned(),
            model: caps.model.clone(),
            source: self.side.source.clone(),
            max_tokens: self.ask.max_tokens,
            top_logprobs: if caps.top_logprobs { plan.top_k } else { 0 },
            prompts: plan.prompts.clone(),
            samples: self.samples.iter().flatten().cloned().collect(),
            tasks: plan.tasks.clone(),
            task_outputs: self.task_outputs.iter().flatten().cloned().collect(),
            task_max_tokens: plan.task_max_tokens,
            self_check: self.self_check.clone(),
            tf_chunks: forced.map(|f| f.chunks.clone()).unwrap_or_default(),
            tf_samples: forced.map(|f| f.samples.clone()).unwrap_or_default(),
            tf_self_check: forced.and_then(|f| f.self_check.clone()),
            tokenizer_ids: self.tokenizer_ids.clone().unwrap_or_default(),
        })
    }
}

/// The model to ask of `server`: `given`, else the first it lists.
async fn model_of<T: Transport>(
    server: &Server<T>,
    given: Option<&String>,
) -> Result<String, RunError> {
    match given {
        Some(m) => Ok(m.clone()),
        None => server.first_model().await.map_err(RunError::Model),
    }
}

/// Whether both servers name tokens by id (asked with the plan's models;
/// `false` when either cannot be asked).
pub async fn token_ids_on_both<R: Transport, C: Transport>(
    plan: &Plan,
    reference: &Server<R>,
    candidate: &Server<C>,
) -> bool {
    let Ok(r) = model_of(reference, plan.model.as_ref()).await else {
        return false;
    };
    if !reference.probe(&r, plan.top_k.max(1)).await.token_ids {
        return false;
    }
    let Ok(c) = model_of(candidate, plan.cand_model.as_ref().or(plan.model.as_ref())).await else {
        return false;
    };
    if !candidate.probe(&c, plan.top_k.max(1)).await.token_ids {
        return false;
    }
    // An id names the same token only in the same vocabulary: where both
    // have `/tokenize`, their ids of the probe text must agree.
    let probe = teacher::tokenizer_probe();
    match (
        reference.token_ids(&r, &probe).await,
        candidate.token_ids(&c, &probe).await,
    ) {
        (Some(a), Some(b)) => TokenizerCheck::of(&a, &b).same(),
        _ => true,
    }
}

/// Measure the reference server: its capabilities, its `/tokenize` ids, the
/// fixed text teacher-forced twice (where it scores prompts), every prompt's
/// answer twice (the noise floor) and the tasks, one request at a time.
pub async fn reference<T: Transport>(
    plan: &Plan,
    server: &Server<T>,
) -> Result<Reference, RunError> {
    let say = |s: &str| server.transport.say(s);
    let model = model_of(server, plan.model.as_ref()).await?;
    let mut caps = server.probe(&model, plan.top_k).await;
    if !caps.chat {
        return Err(RunError::NoChat(server.shown.clone()));
    }
    let tokenizer_ids = server.token_ids(&model, &teacher::tokenizer_probe()).await;
    let mut not_run = Vec::new();
    let mut forced = None;
    let scoring = match plan.chunks.is_empty() {
        true => None,
        false => server.prompt_scoring(&model, plan.top_k, None).await,
    };
    caps.prompt_logprobs = scoring.is_some();
    caps.prompt_logprobs_via = scoring.map(|s| s.name().to_owned());
    if let Some(how) = scoring {
        say(&format!(
            "quality: the reference, {} chunks teacher-forced, twice",
            plan.chunks.len()
        ));
        let asked: Vec<(String, Vec<u64>)> = plan
            .chunks
            .iter()
            .map(|c| (c.clone(), Vec::new()))
            .collect();
        let first = server.score(how, &model, plan.top_k, &asked, 1).await;
        let second = server.score(how, &model, plan.top_k, &asked, 1).await;
        let missing = first.iter().chain(&second).filter(|s| s.is_none()).count();
        if missing == 0 {
            let first: Vec<Sample> = first.into_iter().flatten().collect();
            let second: Vec<Sample> = second.into_iter().flatten().collect();
            forced = Some(Forced {
                self_check: teacher::distribution(&first, &second, plan.seed).map(|mut d| {
                    d.kld.reference_top_k = false;
                    d
                }),
                chunks: plan.chunks.clone(),
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
        max_tokens: plan.max_tokens,
        top: caps.top_logprobs.then_some(plan.top_k),
        token_ids: plan.token_ids && caps.token_ids,
    };
    say(&format!(
        "quality: the reference, {} prompts, twice",
        plan.prompts.len()
    ));
    let first = server.answers(&ask, &plan.prompts, 1).await;
    let second = server.answers(&ask, &plan.prompts, 1).await;
    let self_check = paired(&first, &second, plan.seed);
    let task_ask = Ask {
        max_tokens: plan.task_max_tokens,
        top: None,
        token_ids: false,
        ..ask.clone()
    };
    let task_outputs = server.task_outputs(&task_ask, &plan.tasks, 1).await;
    Ok(Reference {
        side: Side {
            source: server.shown.clone(),
            capabilities: caps,
        },
        ask,
        samples: first,
        self_check: Some(self_check),
        task_outputs,
        forced,
        tokenizer_ids,
        from_golden: false,
        not_run,
    })
}

/// Measure the candidate against `reference` at each concurrency in `levels`:
/// the same prompts, tasks and fixed text; the report with its verdict.
pub async fn candidate<T: Transport>(
    plan: &Plan,
    reference: Reference,
    server: &Server<T>,
    levels: &[u32],
) -> Result<QualityReport, RunError> {
    let say = |s: &str| server.transport.say(s);
    let model = model_of(server, plan.cand_model.as_ref().or(plan.model.as_ref())).await?;
    let mut caps = server.probe(&model, plan.top_k).await;
    if !caps.chat {
        return Err(RunError::NoChat(server.shown.clone()));
    }
    let by_id = reference.ask.token_ids;
    let Reference {
        side: reference_side,
        samples: reference_samples,
        self_check,
        task_outputs: reference_tasks,
        forced,
        tokenizer_ids: reference_ids,
        from_golden,
        mut not_run,
        ..
    } = reference;
    if plan.tasks.is_empty() {
        not_run.insert(0, "tasks: none asked".to_owned());
    }
    // The reference's route first, so both read the text alike.
    let reference_route = reference_side
        .capabilities
        .prompt_logprobs_via
        .as_deref()
        .and_then(Scoring::of_name);
    let scoring = match forced {
        Some(_) => {
            server
                .prompt_scoring(&model, plan.top_k, reference_route)
                .await
        }
        None => None,
    };
    caps.prompt_logprobs = scoring.is_some();
    caps.prompt_logprobs_via = scoring.map(|s| s.name().to_owned());
    if let (Some(r), Some(c)) = (reference_route, scoring)
        && r != c
    {
        not_run.push(format!(
            "one route of teacher forcing: the reference scored the text by {}, the candidate by {} (tokens compared by their text as each route decodes it)",
            r.name(),
            c.name()
        ));
    }
    let candidate_ids = server.token_ids(&model, &teacher::tokenizer_probe()).await;
    let tokenizer = match (&reference_ids, &candidate_ids) {
        (Some(r), Some(c)) => Some(TokenizerCheck::of(r, c)),
        (r, _) => {
            let who = match (r, from_golden) {
                (Some(_), _) => "the candidate has no /tokenize (llama.cpp's or vLLM's contract)",
                (None, true) => "the golden file kept no /tokenize ids",
                (None, false) => "the reference has no /tokenize (llama.cpp's or vLLM's contract)",
            };
            not_run.push(format!("tokenizer identity: {who}"));
            None
        }
    };
    if !plan.chunks.is_empty() && !caps.prompt_logprobs {
        let who = match (&forced, reference_side.capabilities.prompt_logprobs) {
            (Some(_), _) => "the candidate does",
            (None, true) => "the reference's scoring failed; it does",
            (None, false) => "the reference does",
        };
        not_run.push(format!(
            "teacher-forced distribution: {who} not score a prompt's own tokens (completions with echo and logprobs, or SGLang's /generate); the distribution is on the generated tokens"
        ));
    }
    if !(caps.top_logprobs && reference_side.capabilities.top_logprobs) {
        let who = if caps.top_logprobs {
            "the reference"
        } else {
            "the candidate"
        };
        not_run.push(format!(
            "distribution (KLD, same top p, Δp, perplexity ratio): {who} gave no top-k log-probabilities"
        ));
    }
    if !by_id {
        let why = match (
            from_golden,
            reference_side.capabilities.token_ids,
            caps.token_ids,
        ) {
            (true, _, _) => "a golden file keeps tokens as text",
            (false, false, _) => "the reference names none (vLLM's return_tokens_as_token_ids)",
            (false, true, false) => "the candidate names none (vLLM's return_tokens_as_token_ids)",
            (false, true, true) => "not asked",
        };
        not_run.push(format!(
            "token ids: {why}; tokens are matched by their text"
        ));
    }
    let ask = Ask {
        model,
        max_tokens: plan.max_tokens,
        top: caps.top_logprobs.then_some(plan.top_k),
        token_ids: by_id,
    };
    let task_ask = Ask {
        max_tokens: plan.task_max_tokens,
        top: None,
        token_ids: false,
        ..ask.clone()
    };
    let mut out = Vec::new();
    let mut first_answers: Option<Vec<Option<Sample>>> = None;
    for &c in levels {
        say(&format!(
            "quality: the candidate, {} prompts, concurrency {c}",
            plan.prompts.len()
        ));
        let cand = server.answers(&ask, &plan.prompts, c).await;
        let cand_tasks = server.task_outputs(&task_ask, &plan.tasks, c).await;
        // The reference's ids are asked only of a candidate of the same
        // tokenizer (an id outside its vocabulary can stop an engine).
        let same_vocabulary = tokenizer.as_ref().is_some_and(TokenizerCheck::same);
        let teacher_forced = match (&forced, scoring) {
            (Some(f), Some(how)) => {
                let route = Route {
                    how,
                    ask_ids: same_vocabulary,
                };
                forced_level(f, server, route, &ask.model, plan, c, &mut not_run).await
            }
            _ => None,
        };
        let against_first_level = first_answers
            .as_ref()
            .map(|first| paired(first, &cand, plan.seed));
        let figures = paired(&reference_samples, &cand, plan.seed);
        first_answers.get_or_insert(cand);
        out.push(QualityLevel {
            concurrency: c,
            figures,
            against_first_level,
            tasks: (!plan.tasks.is_empty())
                .then(|| compare_tasks(&plan.tasks, &reference_tasks, &cand_tasks)),
            teacher_forced,
        });
    }
    let distinct: std::collections::BTreeSet<&u32> = levels.iter().collect();
    if plan.batch_invariant && distinct.len() < 2 {
        not_run.push(
            "batch invariance: one concurrency level, nothing to compare the answers with (give --concurrency 1,N)"
                .to_owned(),
        );
    }
    let mut report = QualityReport {
        schema: SCHEMA.to_owned(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        reference: reference_side,
        candidate: Side {
            source: server.shown.clone(),
            capabilities: caps,
        },
        prompts: plan.prompts.len(),
        max_tokens: plan.max_tokens,
        top_logprobs: plan.top_k,
        self_check,
        batch_invariant_claimed: plan.batch_invariant,
        tokenizer,
        teacher_forced_chunks: forced.as_ref().map_or(0, |f| f.chunks.len()),
        teacher_forced_self_check: forced.and_then(|f| f.self_check),
        levels: out,
        not_run,
        verdict: Vec::new(),
    };
    report.write_verdict();
    Ok(report)
}

/// How the candidate scores the text: the route, and whether the
/// reference's own ids may be asked (the same tokenizer).
#[derive(Debug, Clone, Copy)]
struct Route {
    how: Scoring,
    ask_ids: bool,
}

/// The candidate's teacher-forced distribution at concurrency `c` (`None`,
/// said in `not_run`, when a request failed or the tokens differ).
async fn forced_level<T: Transport>(
    f: &Forced,
    server: &Server<T>,
    route: Route,
    model: &str,
    plan: &Plan,
    c: u32,
    not_run: &mut Vec<String>,
) -> Option<Distribution> {
    let how = route.how;
    server.transport.say(&format!(
        "quality: the candidate, {} chunks teacher-forced, concurrency {c}",
        f.chunks.len()
    ));
    // Through `/generate` the candidate is asked for the reference's own top
    // ids too (where the reference's scores carry them): every position is
    // then compared on the reference's whole top k plus the rest.
    let asked: Vec<(String, Vec<u64>)> = f
        .chunks
        .iter()
        .zip(&f.samples)
        .map(|(text, s)| {
            let mut ids: Vec<u64> = match how {
                Scoring::Generate if route.ask_ids => s
                    .positions
                    .iter()
                    .flat_map(|p| p.top.iter().filter_map(|a| a.id))
                    .collect(),
                _ => Vec::new(),
            };
            ids.sort_unstable();
            ids.dedup();
            (text.clone(), ids)
        })
        .collect();
    let asked_ids = asked.iter().any(|(_, ids)| !ids.is_empty());
    let mut scores = server.score(how, model, plan.top_k, &asked, c).await;
    if asked_ids && scores.iter().any(Option::is_none) {
        // Refused with the ids: once more without them.
        let plain: Vec<(String, Vec<u64>)> =
            f.chunks.iter().map(|t| (t.clone(), Vec::new())).collect();
        scores = server.score(how, model, plan.top_k, &plain, c).await;
        not_run.push(format!(
            "the reference's ids at concurrency {c}: refused by the candidate; its own top k compared"
        ));
    }
    let missing = scores.iter().filter(|s| s.is_none()).count();
    if missing > 0 {
        not_run.push(format!(
            "teacher-forced at concurrency {c}: {missing} of {} scoring requests failed",
            scores.len()
        ));
        return None;
    }
    let mut scores: Vec<Sample> = scores.into_iter().flatten().collect();
    if !teacher::same_tokens(&f.samples, &scores) {
        not_run.push(format!(
            "teacher-forced at concurrency {c}: the two servers cut the fixed text into different tokens (another tokenizer): positions do not line up"
        ));
        return None;
    }
    // Each position keeps its own top k (the most likely first) and the
    // reference's ids at that position, not every id the chunk asked.
    for (r, s) in f.samples.iter().zip(&mut scores) {
        for (rp, sp) in r.positions.iter().zip(&mut s.positions) {
            let mut kept = 0usize;
            sp.top.retain(|a| {
                kept += 1;
                kept <= plan.top_k as usize
                    || a.id
                        .is_some_and(|id| rp.top.iter().any(|x| x.id == Some(id)))
            });
        }
    }
    let mut d = teacher::distribution(&f.samples, &scores, plan.seed)?;
    d.kld.reference_top_k &= asked_ids;
    Some(d)
}
