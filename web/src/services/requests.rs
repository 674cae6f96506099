//! What the page's run sends, request by request, as `bench` builds it: a
//! prompts file's or a trace's next request (bodies built by the report module),
//! or a synthetic prompt (exact with the server's tokenizer: [`super::tokens`]),
//! after the run's shared system prompt; a conversation's turn sends the
//! session's history and a new user message. Bodies are built before they are
//! due (a round's before it starts; a turn's before its send is stamped).

use std::cell::Cell;

use tokenscope_measure::openai::{RequestSpec, request_body};
use tokenscope_render::page::workload::PreparedWorkload;
use tokenscope_workload::conversation::History;
use tokenscope_workload::prompts::{approx_spec_tokens, exact_prompt, synthetic_prompt};

use super::exchange::Prepared;
use super::tokens::PageTokens;
use crate::settings::{ReasoningDisplay, RunPlan};

/// A conversation's next turn: its session's history, the session, the turn.
pub type Turn<'a> = (&'a mut History, u64, u32);

/// The run's requests, numbered in the order they are built.
pub struct Requests {
    plan: RunPlan,
    model: String,
    run_tag: String,
    next_index: Cell<u64>,
    next_session: Cell<u64>,
    /// A prompts file's requests (used in turn) or a trace's (each at its time);
    /// `None`: synthetic prompts.
    pub workload: Option<PreparedWorkload>,
    tokens: PageTokens,
}

impl Requests {
    /// Requests for `plan` (as resolved before the run) to `model`.
    pub fn new(
        plan: &RunPlan,
        model: &str,
        run_tag: &str,
        workload: Option<PreparedWorkload>,
        tokens: PageTokens,
    ) -> Self {
        Self {
            plan: plan.clone(),
            model: model.to_owned(),
            run_tag: run_tag.to_owned(),
            next_index: Cell::new(0),
            next_session: Cell::new(0),
            workload,
            tokens,
        }
    }

    /// The next `n` single requests.
    pub fn prepare(&self, n: u64) -> Vec<Prepared> {
        (0..n).map(|_| self.next(None)).collect()
    }

    /// A new conversation's number.
    pub fn new_session(&self) -> u64 {
        let s = self.next_session.get();
        self.next_session.set(s + 1);
        s
    }

    /// Whether prompts are counted by the server's tokenizer (the report checks
    /// them against `usage`).
    pub fn counts_prompts(&self) -> bool {
        self.tokens.words.is_some()
    }

    /// When a trace's `k`-th request is due, ms after the round's start.
    pub fn due_ms(&self, k: usize) -> Option<f64> {
        self.workload.as_ref()?.requests.get(k)?.t_ms
    }

    /// The next request: a single one, or a conversation's `turn`.
    pub fn next(&self, turn: Option<Turn<'_>>) -> Prepared {
        let p = &self.plan;
        let index = self.next_index.get();
        self.next_index.set(index + 1);
        let file = self
            .workload
            .as_ref()
            .map(|w| &w.requests[(index % w.requests.len() as u64) as usize]);
        let base = Prepared {
            request_id: format!("web-{}-{index}", self.run_tag),
            body: String::new(),
            api: p.api,
            prompt_tokens: 0,
            max_tokens: p.max_tokens,
            hide_reasoning: p.reasoning == ReasoningDisplay::Hidden,
            t_scheduled_ms: None,
            keep_answer: turn.is_some(),
            prompt_tokens_sent: None,
            turn: None,
        };
        // A file's or a trace's request, as the report module built it.
        if let (Some(r), None) = (file, &turn) {
            return Prepared {
                body: r.body.clone(),
                prompt_tokens: r.prompt_tokens,
                max_tokens: r.max_tokens,
                prompt_tokens_sent: r.counted,
                ..base
            };
        }
        let words = self.tokens.words.as_deref();
        let (prompt, max_tokens, counted) = match file {
            // A conversation's user message from the file (plain prompts only:
            // checked when the file was read).
            Some(r) => (r.prompt.clone().unwrap_or_default(), r.max_tokens, None),
            None => {
                let n = u64::from(p.input_tokens);
                match words {
                    Some(w) => (exact_prompt(w, n, p.seed, index), p.max_tokens, Some(n)),
                    None => (
                        synthetic_prompt(p.input_tokens, p.seed, index),
                        p.max_tokens,
                        None,
                    ),
                }
            }
        };
        let prefix = self.tokens.prefix.as_ref();
        let mut spec = RequestSpec {
            system: prefix.map(|p| p.0.clone()),
            messages: None,
            api: p.api,
            model: self.model.clone(),
            prompt,
            max_tokens,
            ignore_eos: p.ignore_eos,
            min_tokens: None,
            temperature: None,
            continuous_usage: p.continuous_usage,
            tools: Vec::new(),
            tool_choice: None,
            output_schema: None,
            images: Vec::new(),
        };
        let mut counted = counted.map(|c| c + prefix.map_or(0, |p| p.1));
        let mut turn_of = None;
        if let Some((history, session, t)) = turn {
            // Only a first turn's prompt is what was counted: later ones carry
            // the history the template wraps.
            if t > 1 {
                counted = None;
            }
            spec.messages = Some(history.ask(std::mem::take(&mut spec.prompt)));
            turn_of = Some((session, t));
        }
        Prepared {
            prompt_tokens: approx_spec_tokens(&spec),
            body: request_body(&spec).to_string(),
            max_tokens,
            prompt_tokens_sent: counted,
            turn: turn_of,
            ..base
        }
    }
}
