//! One request of a run: its body (prompt, counted tokens) built before its send,
//! sent over the run's shared state ([`Ctx`]), and its record ([`Finished`]).

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokenscope_core::report::Load;
use tokenscope_core::report::raw::{Phase, RawLine};
use tokenscope_measure::openai::{RequestSpec, request_body};
use tokenscope_measure::record::RequestRecord;
use tokenscope_workload::conversation::History;
use tokenscope_workload::images::{self, ImageSpec};
use tokenscope_workload::prompts::{block_prompt, exact_prompt, synthetic_prompt, vocabulary};
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
use super::config::{BenchConfig, LoadPlan, Prompts};
use super::transport::Target;
use super::{tokenize, transport};
use crate::live::Live;

/// A finished request with where it belongs.
#[derive(Debug)]
pub struct Finished {
    /// `x-request-id` sent.
    pub request_id: String,
    /// Phase.
    pub phase: Phase,
    /// The record.
    pub record: RequestRecord,
}

impl Finished {
    /// Its raw line, in level `level` at `load`.
    pub(super) fn into_line(self, level: usize, load: Load) -> RawLine {
        RawLine::new(self.request_id, level, load, self.phase, self.record)
    }
}

/// Shared state of a run.
pub(super) struct Ctx {
    pub(super) cfg: BenchConfig,
    pub(super) model: String,
    pub(super) client: reqwest::Client,
    pub(super) target: Target,
    pub(super) clock: Clock,
    /// Ctrl-C: send nothing new.
    pub(super) stop: CancellationToken,
    /// After the grace period: cancel what is in flight.
    pub(super) cancel: CancellationToken,
    pub(super) next_index: AtomicU64,
    /// The next conversation's number.
    pub(super) next_session: AtomicU64,
    pub(super) run_id: String,
    /// How prompts are sized: the tokenizer's single-token words (exact) and
    /// each prompts-file prompt's count.
    pub(super) tokens: tokenize::Prompting,
    /// Live metrics (`--metrics-listen`, `--prometheus-remote-write`), and the
    /// level under way (its in-flight requests are counted there).
    pub(super) live: Option<(Arc<Live>, Mutex<Load>)>,
}

/// A request's body, built before its send, with its prompt's counted tokens.
#[derive(Debug, Clone)]
pub(crate) struct Body {
    pub(super) bytes: Bytes,
    pub(super) prompt_tokens: Option<u64>,
    /// Its prompt's class (a prompts file line's `class`).
    pub(super) class: Option<String>,
    /// The images its prompt carries (`512x512`), when any.
    pub(super) images: Option<String>,
}

impl Ctx {
    pub(super) fn body(&self, index: u64) -> Body {
        let (spec, counted) = self.spec(index);
        Body {
            class: self.class(index),
            images: self.images_label(index),
            ..Body::of(&spec, counted)
        }
    }

    /// [`Ctx::body`] for a request built by the task that sends it: off the
    /// runtime's threads when it carries images (encoding them takes
    /// milliseconds to seconds, and those threads stamp other requests' reads).
    pub(super) async fn body_for_send(self: &Arc<Self>, index: u64) -> Body {
        if self.cfg.images.is_empty() {
            return self.body(index);
        }
        let ctx = Arc::clone(self);
        tokio::task::spawn_blocking(move || ctx.body(index))
            .await
            .expect("building a body does not panic")
    }

    /// Request `index`'s class: its prompt's, in a prompts file that gives one.
    fn class(&self, index: u64) -> Option<String> {
        match (&self.cfg.prompts, &self.cfg.load) {
            (Prompts::File { prompts, .. }, load) if !matches!(load, LoadPlan::Trace { .. }) => {
                let shard = self.cfg.shard_or_whole();
                let i = shard.prompt_index(index, prompts.len()).unwrap_or(0);
                prompts.get(i).and_then(|p| p.class.clone())
            }
            _ => None,
        }
    }

    /// The image spec request `index` carries, when the run sends images:
    /// each in turn by the shard's own numbering (so every shard sends every
    /// spec alike), moved on each time a prompts file's prompts start again
    /// (so every spec goes with every prompt); the pictures themselves are
    /// drawn from the plan-wide number, so no two shards send the same.
    fn image_spec(&self, index: u64) -> Option<ImageSpec> {
        let prompts = match &self.cfg.prompts {
            Prompts::File { prompts, .. } => {
                self.cfg.shard_or_whole().prompts_owned(prompts.len()) as u64
            }
            Prompts::Synthetic { .. } => 1,
        };
        images::spec_for(&self.cfg.images, index, prompts)
    }

    fn images_label(&self, index: u64) -> Option<String> {
        self.image_spec(index).map(|s| s.to_string())
    }

    /// The body of a conversation's next turn: the history so far and the user's
    /// new message (request `index`'s prompt), which the history keeps. Only the
    /// first turn's prompt is counted (later ones carry the server's answers).
    pub(super) fn turn_body(&self, index: u64, history: &mut History) -> Body {
        let (mut spec, counted) = self.spec(index);
        let first = history.next_turn() == 1;
        spec.messages = Some(history.ask(std::mem::take(&mut spec.prompt)));
        Body {
            class: self.class(index),
            images: self.images_label(index),
            ..Body::of(&spec, counted.filter(|_| first))
        }
    }

    /// Request `index`'s spec and its prompt's counted tokens.
    pub(super) fn spec(&self, index: u64) -> (RequestSpec, Option<u64>) {
        let words = self.tokens.words.as_deref();
        // A shard's requests are numbered plan-wide (no prompt twice across shards).
        let shard = self.cfg.shard_or_whole();
        let global = shard.global_index(index);
        let traced = match &self.cfg.load {
            LoadPlan::Trace { trace, .. } => trace
                .requests
                .get(index as usize)
                .map(|r| (r, trace.block_tokens)),
            _ => None,
        };
        let mut messages = None;
        let (prompt, max_tokens, counted) = match (&self.cfg.prompts, traced) {
            // A trace's request: its own lengths, its prefix blocks shared.
            (_, Some((r, block))) => (
                block_prompt(
                    words.unwrap_or(vocabulary()),
                    &r.hash_ids,
                    block,
                    r.input_tokens,
                    self.cfg.seed,
                    global,
                ),
                u32::try_from(r.output_tokens).unwrap_or(u32::MAX),
                words.map(|_| r.input_tokens),
            ),
            (Prompts::Synthetic { tokens }, None) => {
                // Resolved before the run (a fraction of the context: `prepare`).
                let tokens = tokens.tokens().unwrap_or(1);
                match words {
                    Some(w) => (
                        exact_prompt(w, u64::from(tokens), self.cfg.seed, global),
                        self.cfg.max_tokens,
                        Some(u64::from(tokens)),
                    ),
                    None => (
                        synthetic_prompt(tokens, self.cfg.seed, global),
                        self.cfg.max_tokens,
                        None,
                    ),
                }
            }
            (Prompts::File { prompts, .. }, None) => {
                // Checked before the run: every shard has a prompt of its own.
                let i = shard.prompt_index(index, prompts.len()).unwrap_or(0);
                let p = &prompts[i];
                messages.clone_from(&p.messages);
                (
                    p.prompt.clone(),
                    p.max_tokens.unwrap_or(self.cfg.max_tokens),
                    self.tokens.file_counts.get(i).copied().flatten(),
                )
            }
        };
        let prefix = self.tokens.prefix.as_ref();
        let counted = counted.map(|c| c + prefix.map_or(0, |p| p.1));
        let spec = RequestSpec {
            system: prefix.map(|p| p.0.clone()),
            messages,
            api: self.cfg.api,
            model: self.model.clone(),
            prompt,
            max_tokens,
            ignore_eos: self.cfg.ignore_eos,
            min_tokens: self.cfg.min_tokens,
            temperature: self.cfg.temperature,
            continuous_usage: self.cfg.continuous_usage,
            tools: Vec::new(),
            tool_choice: None,
            output_schema: None,
            images: self
                .image_spec(index)
                .map(|s| images::request_images(s, self.cfg.image_format, self.cfg.seed, global))
                .unwrap_or_default(),
        };
        let spec = crate::answer::AnswerContract::ask(self.cfg.answer.as_deref(), spec);
        (spec, counted)
    }

    pub(super) async fn one(
        &self,
        t_scheduled_ms: Option<f64>,
        phase: Phase,
        body: Body,
        index: u64,
    ) -> Finished {
        self.send(t_scheduled_ms, phase, body, index, None).await.0
    }

    /// Send one request; a conversation's turn (`turn`: session, turn) also
    /// gives back the answer's text.
    pub(super) async fn send(
        &self,
        t_scheduled_ms: Option<f64>,
        phase: Phase,
        body: Body,
        index: u64,
        turn: Option<(u64, u32)>,
    ) -> (Finished, Option<String>) {
        let request_id = format!("{}-{index}", self.run_id);
        if let Some((live, load)) = &self.live {
            live.request_started(
                *load
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
        }
        let counter = self.tokens.output_counter.as_ref();
        let contract = self.cfg.answer.as_deref();
        let send = transport::Send {
            request_id: &request_id,
            t_scheduled_ms,
            keep_answer: turn.is_some() || contract.is_some_and(|c| c.keeps_text()),
            keep_text: counter.is_some(),
            keep_calls: contract.is_some_and(|c| !c.tools.is_empty()),
        };
        let (mut record, texts) = transport::exchange(
            &self.client,
            &self.target,
            body.bytes,
            &self.clock,
            send,
            &self.cancel,
        )
        .await;
        record.prompt_tokens_sent = body.prompt_tokens;
        record.class = body.class;
        record.images = body.images;
        // The answer checked against its schemas, after its end (its times
        // are already taken).
        if let Some(c) = contract
            && record.outcome.is_ok()
        {
            let cut = matches!(
                record.finish_reason.as_deref(),
                Some("length" | "max_tokens" | "max_output_tokens")
            );
            record.set_answer(c.check(&texts.calls, texts.answer.as_deref(), cut));
        }
        record.session = turn.map(|t| t.0);
        record.turn = turn.map(|t| t.1);
        // The answer counted by the local tokenizer, after the request's end
        // (its times are already taken). Not an answer that called a tool: the
        // tokenizer sees its text, never the call's tokens in the model's own
        // format, and would count short (every event of arguments as none).
        if let (Some(c), Some(text)) = (counter, texts.generated)
            && record.outcome.is_ok()
            && texts.calls.is_empty()
        {
            // Events of several tokens the server did not count (and was not
            // asked to: --continuous-usage): the tokenizer's count of each,
            // for ITL per token.
            let events = record.token_events_ms.len();
            let more = record
                .usage
                .and_then(|u| u.completion_tokens)
                .is_some_and(|n| n > events as u64);
            let ends = (more
                && !self.cfg.continuous_usage
                && record.event_tokens.is_empty()
                && texts.event_ends.len() == events)
                .then_some(texts.event_ends);
            let counted = crate::tokenize::count_answer(c, text, ends).await;
            record.completion_tokens_counted = counted.tokens;
            if let Some(per_event) = counted.per_event {
                record.event_tokens = per_event;
            }
        }
        let f = Finished {
            request_id,
            phase,
            record,
        };
        (f, texts.answer)
    }
}

impl Body {
    pub(super) fn of(spec: &RequestSpec, prompt_tokens: Option<u64>) -> Self {
        Self {
            bytes: Bytes::from(
                serde_json::to_vec(&request_body(spec)).expect("a JSON value serializes"),
            ),
            prompt_tokens,
            class: None,
            images: None,
        }
    }
}
