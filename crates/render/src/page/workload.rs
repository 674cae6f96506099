//! A prompts file or a trace in the page. The page fetches the file's text; the
//! report module reads it with the CLI's parsers ([`tokenscope_workload::dataset`],
//! [`tokenscope_workload::trace`]: the same formats, the same errors naming the line
//! and field) and builds every request body as `bench` would, so the page's main
//! module keeps only what it sends: bodies, their lengths and, for a trace, their
//! times.

use serde::{Deserialize, Serialize};

use tokenscope_core::report::TraceInfo;
use tokenscope_measure::openai::{Api, RequestSpec, request_body};
use tokenscope_workload::dataset::Dataset;
use tokenscope_workload::prompts::{approx_spec_tokens, approx_tokens, block_prompt, vocabulary};
use tokenscope_workload::tokens::pick_tier;
use tokenscope_workload::trace::Trace;

/// Which file, and how to use it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadFile {
    /// Prompts sent in turn (`prompts`), `sample` of them (seeded shuffle).
    Prompts {
        /// Use this many.
        sample: Option<u64>,
    },
    /// A trace replayed (`trace`).
    Trace {
        /// Time compressed by this (`trace_speed`).
        speed: f64,
        /// Every length multiplied by this (`trace_token_scale`).
        token_scale: f64,
        /// Only the first this many requests.
        limit: Option<u64>,
    },
}

/// What the page asks the report module to prepare.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadRequest {
    /// The file's name or URL, as the report records it.
    pub name: String,
    /// Its text.
    pub text: String,
    /// Which file it is.
    pub file: WorkloadFile,
    /// The run's seed.
    pub seed: u64,
    /// The endpoint kind.
    pub api: Api,
    /// The model named in every body.
    pub model: String,
    /// `max_tokens` where the file gives none.
    pub max_tokens: u32,
    /// Send `ignore_eos` (a trace always does: its output lengths are the answers').
    pub ignore_eos: bool,
    /// The words that are one token each by the server's tokenizer (a trace's
    /// prompts are then exactly its lengths); empty: about one token a word.
    #[serde(default)]
    pub words: Vec<String>,
    /// The system prompt every request begins with (`shared_prefix`) and its tokens.
    #[serde(default)]
    pub system: Option<(String, u64)>,
    /// An input tier: only a prompts file's prompts within 25% of this many
    /// tokens ([`tokenscope_workload::tokens::pick_tier`], as `bench` picks them).
    #[serde(default)]
    pub tier: Option<u32>,
}

/// One request the page will send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageRequest {
    /// A trace's: when it is due, ms after the round's start.
    pub t_ms: Option<f64>,
    /// The JSON body.
    pub body: String,
    /// Its prompt's tokens (estimated: the simulator's count).
    pub prompt_tokens: u64,
    /// Its `max_tokens`.
    pub max_tokens: u32,
    /// A plain prompt's text (a conversation's turns send it as the user's
    /// message); `None` for a conversation of the file.
    #[serde(default)]
    pub prompt: Option<String>,
    /// Its prompt's tokens by the server's tokenizer, when they were counted.
    #[serde(default)]
    pub counted: Option<u64>,
}

/// The requests to send, in order (a prompts file's are used in turn).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreparedWorkload {
    /// The requests.
    pub requests: Vec<PageRequest>,
    /// A trace's record for the report, and its mean rate (the level's load).
    pub trace: Option<(TraceInfo, f64)>,
    /// A prompts file's prompt set ([`tokenscope_workload::dataset::prompts_hash`]).
    #[serde(default)]
    pub prompts_hash: Option<String>,
}

impl WorkloadRequest {
    /// The requests, or why the text is not such a file.
    pub fn prepare(&self) -> Result<PreparedWorkload, String> {
        match &self.file {
            WorkloadFile::Prompts { sample } => self.prompts(*sample),
            WorkloadFile::Trace {
                speed,
                token_scale,
                limit,
            } => self.trace(*speed, *token_scale, *limit),
        }
    }

    /// One request's body and its prompt's estimated tokens (and counted ones:
    /// `counted`, the prompt's own, plus the system prompt's).
    fn body(
        &self,
        prompt: String,
        messages: Option<Vec<tokenscope_measure::openai::ChatMessage>>,
        max_tokens: u32,
        ignore_eos: bool,
        counted: Option<u64>,
    ) -> PageRequest {
        let system = self.system.as_ref();
        let s = RequestSpec {
            api: self.api,
            model: self.model.clone(),
            system: system.map(|p| p.0.clone()),
            prompt,
            messages,
            max_tokens,
            ignore_eos,
            min_tokens: None,
            temperature: None,
            continuous_usage: false,
            tools: Vec::new(),
            tool_choice: None,
            output_schema: None,
            images: Vec::new(),
        };
        PageRequest {
            t_ms: None,
            body: request_body(&s).to_string(),
            prompt_tokens: approx_spec_tokens(&s),
            max_tokens,
            prompt: s.messages.is_none().then_some(s.prompt),
            counted: counted.map(|c| c + system.map_or(0, |p| p.1)),
        }
    }

    fn prompts(&self, sample: Option<u64>) -> Result<PreparedWorkload, String> {
        let mut d = Dataset::parse(&self.text).map_err(|e| e.to_string())?;
        if let Some(n) = sample {
            d.prompts = d.sample(n as usize, self.seed);
        }
        if d.prompts.is_empty() {
            return Err("holds no prompt".into());
        }
        if let Some(tier) = self.tier {
            let lengths: Vec<u64> = d.prompts.iter().map(|p| approx_tokens(&p.prompt)).collect();
            let keep = pick_tier(&lengths, tier).map_err(|(lo, hi)| {
                format!("no prompt is within 25% of the input tier's {tier} tokens (its prompts are {lo} to {hi} tokens)")
            })?;
            d.prompts = keep.into_iter().map(|i| d.prompts[i].clone()).collect();
        }
        let prompts_hash = Some(tokenscope_workload::dataset::prompts_hash(&d.prompts));
        let requests = d
            .prompts
            .into_iter()
            .map(|p| {
                let max_tokens = p.max_tokens.unwrap_or(self.max_tokens);
                self.body(p.prompt, p.messages, max_tokens, self.ignore_eos, None)
            })
            .collect();
        Ok(PreparedWorkload {
            requests,
            trace: None,
            prompts_hash,
        })
    }

    fn trace(
        &self,
        speed: f64,
        token_scale: f64,
        limit: Option<u64>,
    ) -> Result<PreparedWorkload, String> {
        for (name, v) in [("trace_speed", speed), ("trace_token_scale", token_scale)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{name}: {v} must be more than 0"));
            }
        }
        let t = Trace::parse(&self.text).map_err(|e| e.to_string())?.replay(
            speed,
            token_scale,
            limit.map(|n| n as usize),
        );
        if t.requests.is_empty() {
            return Err("holds no request".into());
        }
        let words: Vec<&str> = self.words.iter().map(String::as_str).collect();
        let exact = !words.is_empty();
        let requests = t
            .requests
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let prompt = block_prompt(
                    if exact { &words } else { vocabulary() },
                    &r.hash_ids,
                    t.block_tokens,
                    r.input_tokens,
                    self.seed,
                    i as u64,
                );
                let max_tokens = u32::try_from(r.output_tokens).unwrap_or(u32::MAX);
                PageRequest {
                    t_ms: Some(r.t_ms),
                    ..self.body(
                        prompt,
                        None,
                        max_tokens,
                        true,
                        exact.then_some(r.input_tokens),
                    )
                }
            })
            .collect();
        let info = TraceInfo {
            file: self.name.clone(),
            format: t.format,
            requests: t.requests.len() as u64,
            speed,
            token_scale,
            block_tokens: t.block_tokens,
            span_s: t.span_ms() / 1000.0,
            skipped: t.skipped.len() as u64,
        };
        Ok(PreparedWorkload {
            requests,
            trace: Some((info, t.mean_rate_per_s())),
            prompts_hash: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str, file: WorkloadFile) -> WorkloadRequest {
        WorkloadRequest {
            name: "f".into(),
            text: text.into(),
            file,
            seed: 1,
            api: Api::Chat,
            model: "m".into(),
            max_tokens: 9,
            ignore_eos: false,
            words: Vec::new(),
            system: None,
            tier: None,
        }
    }

    #[test]
    fn a_prompts_file_becomes_bodies_with_their_own_max_tokens() {
        let text = "{\"prompt\": \"a b c\", \"max_tokens\": 3}\n{\"messages\": [{\"role\": \"user\", \"content\": \"hi there\"}]}\n{\"prompt\": \"d\"}\n";
        let all = WorkloadFile::Prompts { sample: None };
        let w = request(text, all.clone()).prepare().unwrap();
        assert_eq!(w.requests.len(), 3);
        assert!(w.trace.is_none());
        let (a, b) = (&w.requests[0], &w.requests[1]);
        assert_eq!((a.prompt_tokens, a.max_tokens), (3, 3));
        assert_eq!(b.max_tokens, 9, "the run's where the line gives none");
        let body: serde_json::Value = serde_json::from_str(&b.body).unwrap();
        assert_eq!(body["messages"][0]["content"], "hi there");
        assert_eq!(body["model"], "m");
        // A plain prompt's text is kept (a conversation's turn sends it); a
        // conversation of the file has none.
        assert_eq!(
            (a.prompt.as_deref(), b.prompt.as_deref()),
            (Some("a b c"), None)
        );
        let two = request(text, WorkloadFile::Prompts { sample: Some(2) })
            .prepare()
            .unwrap();
        assert_eq!(two.requests.len(), 2);
        let e = request("{\"prompt\": \"ok\"}\n{\"nothing\": 1}\n", all.clone())
            .prepare()
            .unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        let e = request("\n", all.clone()).prepare().unwrap_err();
        assert!(e.contains("no prompt"), "{e}");
        // An input tier keeps the prompts within 25% of it.
        let tiered = WorkloadRequest {
            tier: Some(10),
            ..request(text, all.clone())
        };
        let e = tiered.prepare().unwrap_err();
        assert!(e.contains("1 to 3 tokens"), "{e}");
        let long = "{\"prompt\": \"a b c d e f g h i j\"}\n{\"prompt\": \"a\"}\n";
        let tiered = WorkloadRequest {
            tier: Some(10),
            ..request(long, all)
        };
        assert_eq!(tiered.prepare().unwrap().requests.len(), 1);
    }

    #[test]
    fn a_trace_becomes_bodies_on_its_schedule() {
        let text = "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 10, \"hash_ids\": [1]}\n{\"timestamp\": 500, \"input_length\": 200, \"output_length\": 20, \"hash_ids\": [1, 2]}\n{\"timestamp\": 900, \"input_length\": 50, \"output_length\": 5, \"hash_ids\": [3]}\n";
        let file = WorkloadFile::Trace {
            speed: 2.0,
            token_scale: 0.1,
            limit: Some(2),
        };
        let w = request(text, file.clone()).prepare().unwrap();
        assert_eq!(w.requests.len(), 2);
        let r = &w.requests[1];
        assert_eq!(
            (r.t_ms, r.prompt_tokens, r.max_tokens),
            (Some(250.0), 20, 2)
        );
        let body: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(body["ignore_eos"], true);
        let (info, rate) = w.trace.unwrap();
        assert_eq!((info.requests, info.block_tokens), (2, 51));
        assert_eq!(rate, 4.0, "one gap of 250 ms");
        let e = request(
            "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n{\"timestamp\": 5, \"output_length\": 1}\n",
            file,
        )
        .prepare()
        .unwrap_err();
        assert!(e.contains("line 2") && e.contains("input_length"), "{e}");
        let e = request(
            text,
            WorkloadFile::Trace {
                speed: 0.0,
                token_scale: 1.0,
                limit: None,
            },
        )
        .prepare()
        .unwrap_err();
        assert!(e.contains("trace_speed"), "{e}");
    }

    /// With the server's single-token words, a trace's prompts are its lengths
    /// exactly (counted), and a shared system prompt leads every body.
    #[test]
    fn exact_words_and_a_shared_prefix() {
        let text = "{\"timestamp\": 0, \"input_length\": 30, \"output_length\": 4}\n";
        let file = WorkloadFile::Trace {
            speed: 1.0,
            token_scale: 1.0,
            limit: None,
        };
        let req = WorkloadRequest {
            words: vec!["alpha".into(), "beta".into()],
            system: Some(("the shared words".into(), 3)),
            ..request(text, file)
        };
        let w = req.prepare().unwrap();
        let r = &w.requests[0];
        assert_eq!(r.counted, Some(33), "30 of the trace's and the prefix's 3");
        assert_eq!(r.prompt_tokens, 33);
        let body: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][0]["content"], "the shared words");
        let user = body["messages"][1]["content"].as_str().unwrap();
        assert_eq!(user.split(' ').count(), 30);
        assert!(
            user.split(' ').all(|w| w == "alpha" || w == "beta"),
            "{user}"
        );
    }
}
