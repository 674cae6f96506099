//! `quality`'s command line: every flag, its help and its default.

use std::path::PathBuf;

use clap::Args;

/// Compare a candidate server with a reference, token by token, over the chat
/// API: greedy exact match and where answers diverge (any server), and where
/// both give top-k log-probabilities, llama.cpp's distribution figures (KLD,
/// same top p, Δp, perplexity ratio; exact or a lower bound). docs/quality.md.
#[derive(Clone, Args)]
#[command(after_help = "EXAMPLES:
  tokenscope quality --ref http://old:8000/v1 --cand http://new:8000/v1
  tokenscope quality --ref http://old:8000/v1 --save-golden golden.json
  tokenscope quality --ref golden.json --cand http://new:8000/v1 --concurrency 1,16 \\
      --fail-on 'kld_mean:>0.01,exact_match:<90%'

Connection options (as bench's): --ca-cert, --client-cert/--client-key,
--insecure and the proxy (--proxy, else HTTPS_PROXY/HTTP_PROXY/ALL_PROXY minus
NO_PROXY, chosen for each server's host) apply to both servers. --header,
--public-header, --api-key-header, --http1 and --http2 are the candidate's,
and the reference's only on the candidate's origin (the same server or
gateway); elsewhere the reference gets its key as 'Authorization: Bearer'.

Exit status: 0; 1 when --fail-on is crossed or a --batch-invariant claim is
broken; 2 on an error, or when the two servers do not share tokens or their
tokenizers differ (another tokenizer or model: nothing to compare); 3 when a
--fail-on term's figure was not measured at a level (each said with why;
--allow-unevaluated passes them). 2 outranks 1, 1 outranks 3. The report is
written before any.")]
pub struct QualityArgs {
    /// The reference: a base URL (`http://host:port/v1`) or a golden file.
    #[arg(long = "ref", value_name = "URL|FILE")]
    pub reference: String,

    /// The candidate's base URL (none: only --save-golden the reference).
    #[arg(long = "cand", value_name = "URL")]
    pub candidate: Option<String>,

    /// Model (default: the first each server's /models lists).
    #[arg(long)]
    pub model: Option<String>,

    /// The candidate's model, when its name differs.
    #[arg(long)]
    pub cand_model: Option<String>,

    /// Prompts (seeded, built in).
    #[arg(long, default_value_t = 32)]
    pub prompts: usize,

    /// Tokens per answer.
    #[arg(long, default_value_t = 64)]
    pub max_tokens: u32,

    /// Alternatives asked per token (OpenAI allows up to 20).
    #[arg(long, default_value_t = 20)]
    pub top_logprobs: u32,

    /// The candidate's concurrency levels: the same prompts at each (1 is
    /// the unloaded answer; higher levels show batching's effect).
    #[arg(long, default_value = "1", allow_hyphen_values = true)]
    pub concurrency: String,

    /// Built-in tasks with one right answer each (arithmetic, counting,
    /// sorting, reversal, dates, JSON), graded exactly: accuracy, flips, McNemar.
    /// 0: none.
    #[arg(long, default_value_t = 24)]
    pub tasks: usize,

    /// Tasks from a GSM8K- or MMLU-style JSONL file instead of the built-in ones.
    #[arg(long, value_name = "FILE")]
    pub tasks_file: Option<PathBuf>,

    /// Tokens per task answer (room to work it out).
    #[arg(long, default_value_t = 256)]
    pub task_max_tokens: u32,

    /// Chunks of the fixed text scored teacher-forced, where both servers
    /// score a prompt's own tokens (`echo` with `logprobs` on completions):
    /// every position of each chunk's second half, as llama.cpp scores a text.
    /// 0: none.
    #[arg(long, default_value_t = 7)]
    pub chunks: usize,

    /// The fixed text to teacher-force (plain text, cut into chunks of 60
    /// words) instead of the built-in one.
    #[arg(long, value_name = "FILE")]
    pub text: Option<PathBuf>,

    /// The candidate claims batch-invariant decoding (vLLM's
    /// VLLM_BATCH_INVARIANT=1, SGLang's --enable-deterministic-inference): an
    /// answer at a higher concurrency that differs from its own at the first
    /// level is a defect, said and exit 1.
    #[arg(long)]
    pub batch_invariant: bool,

    /// Seed of the prompts and the bootstrap.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Per-request timeout, seconds.
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,

    /// Keep the reference's answers (its top-k per token) in this file, for
    /// later runs with --ref FILE.
    #[arg(long, value_name = "FILE")]
    pub save_golden: Option<PathBuf>,

    /// Write the report (`tokenscope.quality/1` JSON) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Exit 1 when a level crosses one of these: `METRIC:>N` or `METRIC:<N[%]`,
    /// METRIC one of kld_mean, kld_p99, same_top_p, exact_match, delta_p_rms,
    /// ppl_ratio, accuracy, accuracy_drop, flips (a share: `flips:>2%`); exit 3
    /// when a term's figure was not measured at a level (`--allow-unevaluated`).
    #[arg(long, value_name = "THRESHOLDS")]
    pub fail_on: Option<String>,

    /// A --fail-on term whose figure a level did not measure does not fail
    /// the run (without it: exit 3, each such term said with why).
    #[arg(long)]
    pub allow_unevaluated: bool,

    /// API key for both servers (never printed); the reference's is
    /// --ref-api-key when given.
    #[arg(long, env = "TOKENSCOPE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// The reference's API key, when it differs from the candidate's (never
    /// printed).
    #[arg(long, env = "TOKENSCOPE_REF_API_KEY", hide_env_values = true)]
    pub ref_api_key: Option<String>,

    /// How to reach the servers: TLS, HTTP version, proxy, headers (see
    /// above for which apply to the reference).
    #[command(flatten)]
    pub http: crate::cmd::http_args::HttpArgs,

    /// `--api-key` is the candidate's alone (`bench --quality`: the bench's
    /// key never goes to the reference).
    #[arg(skip)]
    pub key_is_candidates: bool,
}

impl QualityArgs {
    /// The key sent to the reference.
    pub fn reference_key(&self) -> Option<&str> {
        let shared = (!self.key_is_candidates)
            .then_some(self.api_key.as_deref())
            .flatten();
        self.ref_api_key
            .as_deref()
            .or(shared)
            .filter(|k| !k.is_empty())
    }

    /// The key sent to the candidate.
    pub fn candidate_key(&self) -> Option<&str> {
        self.api_key.as_deref().filter(|k| !k.is_empty())
    }
}

impl std::fmt::Debug for QualityArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the keys.
        let shown = |u: &str| tokenscope_measure::parse::redact_url(u);
        f.debug_struct("QualityArgs")
            .field("reference", &shown(&self.reference))
            .field("candidate", &self.candidate.as_deref().map(shown))
            .finish_non_exhaustive()
    }
}
