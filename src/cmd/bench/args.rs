//! `bench`'s command line: every flag, its help and its default.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// A count that must be at least 1 (`--requests 40`): `-1` is refused as a
/// value with what was expected, not taken for another flag. Zero passes here
/// and is refused by the flag's own check, which names it.
fn positive<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.trim()
        .parse()
        .map_err(|_| "expected a positive whole number".to_owned())
}

/// A whole number, 0 or more (`--warmup 0`), refused as [`positive`] is.
fn zero_or_more<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.trim()
        .parse()
        .map_err(|_| "expected a whole number, 0 or more".to_owned())
}

/// Endpoint kind on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ApiArg {
    /// POST /chat/completions
    Chat,
    /// POST /completions
    Completions,
    /// POST /responses (OpenAI's Responses API)
    Responses,
    /// POST /messages (Anthropic's Messages API: the key in x-api-key, and
    /// anthropic-version: 2023-06-01 unless --header gives one)
    Messages,
}

impl From<ApiArg> for tokenscope_measure::openai::Api {
    fn from(a: ApiArg) -> Self {
        use tokenscope_measure::openai::Api;
        match a {
            ApiArg::Chat => Api::Chat,
            ApiArg::Completions => Api::Completions,
            ApiArg::Responses => Api::Responses,
            ApiArg::Messages => Api::Messages,
        }
    }
}

/// Benchmark an OpenAI-compatible streaming endpoint: TTFT, TPOT, ITL, E2E,
/// throughput, errors and goodput across load levels.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
  tokenscope bench --url http://127.0.0.1:8000/v1
  tokenscope bench --url http://127.0.0.1:8080/v1 --api completions \\
      --concurrency 1,4 --input-tokens 512 --max-tokens 128 --ignore-eos \\
      --slo 'ttft_ms:p95<=500,tpot_ms:p95<=50' --json report.json
  tokenscope bench --url https://api.example.com/v1 --model m \\
      --rate 1,2,4 --duration 60s
  tokenscope bench --url http://new:8000/v1 --concurrency 1,16 \\
      --quality http://old:8000/v1 --fail-on 'kld_mean:>0.01,flips:>2%'

Before sending, bench prints its plan and an estimate of the time it takes; at
the end, the verdict and the files it wrote. Without --json, --raw, --csv or
--markdown the results go to a new folder tokenscope-results/<UTC time>/
(report.json, report.raw.jsonl written as the run goes, report.md):
--results-dir DIR chooses the parent folder, --no-save keeps nothing.

The API key comes from --api-key, TOKENSCOPE_API_KEY or OPENAI_API_KEY (with
--api messages ANTHROPIC_API_KEY instead of OPENAI_API_KEY), and is never
printed.")]
pub struct BenchArgs {
    /// Base URL of the API, e.g. http://127.0.0.1:8000/v1 (a URL without a path gets /v1).
    #[arg(long, value_name = "URL")]
    pub url: String,

    /// Which endpoint to call.
    #[arg(long, value_enum, default_value = "chat")]
    pub api: ApiArg,

    /// Model name (default: the first model listed by GET /models).
    #[arg(long)]
    pub model: Option<String>,

    /// API key (prefer the environment variables: a flag shows in `ps`).
    #[arg(long, env = "TOKENSCOPE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    #[command(flatten)]
    pub http: crate::cmd::http_args::HttpArgs,

    /// Closed-loop concurrency levels: requests kept in flight.
    #[arg(
        long,
        value_name = "N,N,..",
        conflicts_with = "rate",
        allow_hyphen_values = true
    )]
    pub concurrency: Option<String>,

    /// Open-loop request rates (req/s): sends on schedule whatever the responses.
    #[arg(long, value_name = "R,R,..", allow_hyphen_values = true)]
    pub rate: Option<String>,

    /// Inter-arrival distribution in rate mode: poisson (exponential gaps),
    /// constant, or gamma:CV (gamma gaps with that coefficient of variation:
    /// gamma:1 is Poisson, gamma:2 bursty, gamma:0.5 regular).
    #[arg(
        long,
        default_value = "poisson",
        value_name = "poisson|constant|gamma:CV",
        requires = "rate"
    )]
    pub arrival: String,

    /// Measured requests per level, split over the rounds
    /// (default: per round max(10, 2 x concurrency); rate: 10 s worth).
    #[arg(long, value_name = "N", conflicts_with = "duration", allow_negative_numbers = true, value_parser = positive::<u64>)]
    pub requests: Option<u64>,

    /// Measured time per level, split over the rounds (e.g. 60s, 30m): soak mode.
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,

    /// Rounds per level (their spread is reported; a round 2x off is flagged)
    /// [default: 3].
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = positive::<u32>)]
    pub rounds: Option<u32>,

    /// Warm-up requests before each level, not measured (default: one per
    /// concurrency slot; rate mode: about one second's worth).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = zero_or_more::<u32>)]
    pub warmup: Option<u32>,

    /// Instead of the warm-up, raise the load linearly for this long before each
    /// level's measured part (rate from 0, concurrency from 1), not measured.
    #[arg(long, value_name = "DURATION", conflicts_with_all = ["warmup", "trace"])]
    pub ramp: Option<String>,

    /// Length of the synthetic prompts, tokens (exact with a tokenizer, see
    /// --tokenizer), or a fraction of the server's context window: `0.75max`
    /// (long context; the window from vLLM's /v1/models max_model_len,
    /// llama.cpp's /props n_ctx per slot, or --context-window). Several
    /// (64,256,512) are input tiers: the whole sweep runs at each, one report
    /// per tier (see --max-tokens). With --prompts: each tier sends the file's
    /// prompts within 25% of its length (by --tokenizer's count) [default: 256].
    #[arg(long, value_name = "N|Fmax,..", allow_hyphen_values = true)]
    pub input_tokens: Option<String>,

    /// Begin every request with the same system prompt of this many tokens (a
    /// system message for chat, the prompt's first words for completions): what a
    /// server's prefix cache can reuse.
    #[arg(long, value_name = "TOKENS", allow_negative_numbers = true, value_parser = positive::<u32>)]
    pub shared_prefix: Option<u32>,

    /// Run conversations: sessions of N turns, each turn sending the history so
    /// far (the user's messages and the server's own answers) after the user's
    /// think time. Sessions are the concurrency unit (closed loop, chat API);
    /// each turn's user message is a prompt as --input-tokens or --prompts
    /// makes it. The report gives TTFT and TPOT per turn and the prompt tokens
    /// the server served from its cache.
    #[arg(
        long,
        value_name = "turns=N,think=DURATION",
        conflicts_with_all = ["rate", "trace"]
    )]
    pub conversation: Option<String>,

    /// The server's context window, tokens, when it does not say (for
    /// --input-tokens 0.75max).
    #[arg(long, value_name = "TOKENS", allow_negative_numbers = true, value_parser = positive::<u64>)]
    pub context_window: Option<u64>,

    /// Your own prompts: JSON Lines ({"prompt": "..."} or {"messages": [{"role",
    /// "content"}, ...]}, each with an optional "max_tokens"), or ShareGPT JSON
    /// (each record's first human turn). Used in turn, request after request.
    #[arg(long, value_name = "FILE")]
    pub prompts: Option<PathBuf>,

    /// Use N prompts of the file, picked with a seeded shuffle (--seed).
    #[arg(long, value_name = "N", requires = "prompts", allow_negative_numbers = true, value_parser = positive::<usize>)]
    pub sample: Option<usize>,

    /// Replay a request trace as it was recorded: Mooncake JSONL (timestamp ms,
    /// input_length, output_length, hash_ids: prompts sharing leading ids share
    /// those 512-token prefix blocks), Azure LLM trace CSV or BurstGPT CSV. Each
    /// request is sent at its time (open loop; latencies from the scheduled time),
    /// with a prompt of its input length and max_tokens = its output length
    /// (ignore_eos). One level, one round; --requests N replays the first N.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["concurrency", "rate", "prompts", "duration", "warmup", "rounds"]
    )]
    pub trace: Option<PathBuf>,

    /// Replay the trace this many times faster (2: half the gaps).
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "F",
        requires = "trace",
        allow_negative_numbers = true
    )]
    pub trace_speed: f64,

    /// Multiply every length in the trace (and its prefix block) by this, for a
    /// small server or a test (0.05: a 6758-token prompt becomes 338).
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "F",
        requires = "trace",
        allow_negative_numbers = true
    )]
    pub trace_token_scale: f64,

    /// How prompt tokens are counted, so prompts are exactly --input-tokens long:
    /// `server` (the endpoint's /tokenize: llama.cpp, vLLM), a Hugging Face
    /// tokenizer.json, or `approx` (one token per word) [default: server when
    /// the endpoint has /tokenize, else approx]. A tokenizer.json also counts
    /// each answer, and each chunk's tokens where chunks carry several and the
    /// server sends no running usage (ITL per token).
    #[arg(long, value_name = "server|FILE|approx")]
    pub tokenizer: Option<String>,

    /// max_tokens of each request. Several (128,256,512) are output tiers: the
    /// whole sweep runs at each (and at each input tier), one report per tier,
    /// its files named with the tier (report.in256-out128.json).
    #[arg(
        long,
        default_value = "128",
        value_name = "N,..",
        allow_hyphen_values = true
    )]
    pub max_tokens: String,

    /// Send ignore_eos: true (llama.cpp, vLLM) so every answer is max_tokens long.
    #[arg(long)]
    pub ignore_eos: bool,

    /// Send min_tokens (vLLM).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = zero_or_more::<u32>)]
    pub min_tokens: Option<u32>,

    /// Sampling temperature to send.
    #[arg(long, allow_negative_numbers = true)]
    pub temperature: Option<f64>,

    /// Per-request timeout (e.g. 60s, 500ms).
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,

    /// SLOs for goodput and capacity, e.g. 'ttft_ms:p95<=500,tpot_ms:p95<=50'
    /// (quoted: `<` is the shell's).
    #[arg(long, value_name = "SLOS")]
    pub slo: Option<String>,

    /// SLOs of one class of a mixed workload, for goodput per class:
    /// 'summarize=ttft_ms:p95<=3000,e2e_ms:p95<=20000'. The --prompts file's
    /// lines name their class ("class": "summarize"); its requests are held to
    /// these, other requests to --slo. Repeat it for each class; each level
    /// then gives every class's share that met its own.
    #[arg(long, value_name = "CLASS=SLOS")]
    pub slo_class: Vec<String>,

    /// An ITL gap longer than this counts as a stall (stream smoothness: each
    /// request's longest gap is reported, and max_gap_ms is an SLO key).
    #[arg(
        long,
        alias = "stall-gap",
        default_value = "250ms",
        value_name = "DURATION"
    )]
    pub stall_threshold: String,

    /// Seed of the synthetic prompts and the arrival schedule.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = zero_or_more::<u64>)]
    pub seed: u64,

    /// What this run is (a version, a config), stored in the report:
    /// `tokenscope history` orders and names runs by it.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,

    /// Snapshot interval for long runs (per-interval figures and a drift check).
    #[arg(long, value_name = "DURATION")]
    pub snapshot_interval: Option<String>,

    /// Skip the pre-flight request (e.g. against a server injecting faults).
    #[arg(long)]
    pub no_preflight: bool,

    /// After Ctrl-C, how long to wait for requests in flight.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub grace: String,

    /// Write the report JSON (tokenscope.client/1) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// The old spelling of --json (kept for one release).
    #[arg(long, value_name = "FILE", hide = true, conflicts_with = "json")]
    pub out: Option<PathBuf>,

    /// Append one JSON line per finished request here, as each finishes.
    #[arg(long, value_name = "FILE")]
    pub raw: Option<PathBuf>,

    /// Write a CSV summary (one row per level) here.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,

    /// Write a Markdown summary here.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// Where the results go when none of --json, --raw, --csv and --markdown
    /// is given: a new folder DIR/<UTC time>/ holding report.json,
    /// report.raw.jsonl (written as the run goes) and report.md [default:
    /// $TOKENSCOPE_RESULTS_DIR, else tokenscope-results].
    #[arg(long, value_name = "DIR", conflicts_with_all = ["json", "out", "raw", "csv", "markdown", "no_save"])]
    pub results_dir: Option<PathBuf>,

    /// Keep nothing: no results folder (the summary is printed, and the end
    /// says that nothing was saved).
    #[arg(long, conflicts_with_all = ["json", "out", "raw", "csv", "markdown"])]
    pub no_save: bool,

    /// The server's Prometheus metrics, scraped during the run for the server view
    /// (queue, batch, KV cache, server-side TTFT and stages): `auto` (the
    /// endpoint's origin + /metrics, dropped quietly when not there), a URL, or `none`.
    #[arg(long, default_value = "auto", value_name = "auto|URL|none")]
    pub server_metrics: String,

    /// A GPU exporter's metrics URL (NVIDIA dcgm-exporter), scraped the same way;
    /// with it, each level's energy per output token (its energy counter's
    /// increase, else the mean power over the level).
    #[arg(long, value_name = "URL")]
    pub gpu_metrics: Option<String>,

    /// Ask the server for a running usage in every chunk
    /// (stream_options.continuous_usage_stats, chat and completions; vLLM takes
    /// it, some hosted APIs refuse unknown options): each chunk's own token
    /// count, so ITL per token divides each gap by the tokens that chunk
    /// carried instead of spreading them evenly.
    #[arg(long)]
    pub continuous_usage: bool,

    /// Offer tools with every request: 'builtin' (get_weather and
    /// search_flights) or a JSON file holding an array of tools (chat's,
    /// the Responses API's or the Messages API's shape). Each level then says
    /// the share of answers that called one, the time to the first tool-call
    /// delta, and the calls whose arguments were valid against their tool's
    /// schema.
    #[arg(long, value_name = "builtin|FILE")]
    pub tools: Option<String>,

    /// Whether the model may call a tool ('auto', the servers' default), must
    /// ('required') or must not ('none'), or must call the one named.
    #[arg(long, value_name = "auto|required|none|NAME", requires = "tools")]
    pub tool_choice: Option<String>,

    /// Send images with every request's prompt: a list of WIDTHxHEIGHT or
    /// COUNTxWIDTHxHEIGHT ('512x512,1024x1024', '2x768x768'), each request
    /// taking the next in turn. Every image in a run is its own (a server
    /// caching images never sees one twice in it). Each level then gives, per
    /// size, the server's prompt tokens, the images' tokens among them (where
    /// the text's tokens are counted) and TTFT: the time to the first token
    /// against image size. Chat, responses and messages APIs; not with
    /// --conversation or --trace.
    #[arg(long, value_name = "SIZES", value_delimiter = ',')]
    pub images: Vec<tokenscope_workload::images::ImageSpec>,

    /// How --images are encoded: jpeg (quality 85) or png.
    #[arg(long, default_value = "jpeg", value_name = "jpeg|png", requires = "images", value_parser = image_format)]
    pub image_format: tokenscope_workload::images::ImageFormat,

    /// Ask every answer to follow this JSON schema (structured output:
    /// response_format in chat, text.format in the Responses API,
    /// output_format in the Messages API). Each level says the share of
    /// answers valid against it; compare a run without it (the same --seed
    /// sends the same prompts) for what the constraint costs.
    #[arg(long, value_name = "FILE")]
    pub json_schema: Option<PathBuf>,

    /// What the compute costs, for dollars per million output tokens and per
    /// request at each level: 'gpu_hour=2.49[,gpus=8]' (GPUs by the hour, idle
    /// time included) or a hosted API's prices per million tokens
    /// 'input_per_mtok=3,output_per_mtok=15[,cached_input_per_mtok=0.3]'.
    #[arg(long, value_name = "PRICE")]
    pub price: Option<String>,

    /// Time between scrapes within a level (each level is also scraped at its
    /// start and end).
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub scrape_interval: String,

    /// Send the API key to metrics URLs on another host too (by default it goes
    /// only to the endpoint's own origin).
    #[arg(long)]
    pub metrics_send_key: bool,

    /// Leave the verdict to the caller (`demo`'s report prints it, with the
    /// GPU's floor): not a flag.
    #[arg(skip)]
    pub verdict_elsewhere: bool,

    /// No plan, estimate or progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,

    /// Check the answers too: after the sweep, the checks of `tokenscope
    /// quality` against this reference (a base URL, or a golden file from
    /// `tokenscope quality --save-golden`) at each of the sweep's concurrency
    /// levels, shown beside TTFT and ITL; with --json, written as
    /// `X.quality.json` beside `X.json` (docs/quality.md).
    #[arg(long, value_name = "URL|FILE")]
    pub quality: Option<String>,

    /// The quality checks' own settings, as `tokenscope quality` takes them
    /// (e.g. `--prompts 16 --tasks 0 --model ref-model`). The connection
    /// options (--ca-cert, --proxy, --header, ...) are the bench's own, passed
    /// to the checks as `quality` passes its own.
    #[arg(
        long,
        value_name = "FLAGS",
        requires = "quality",
        allow_hyphen_values = true
    )]
    pub quality_args: Option<String>,

    /// Exit 1 when a level's quality crosses one of these: `METRIC:>N` or
    /// `METRIC:<N[%]` over kld_mean, kld_p99, same_top_p, exact_match,
    /// delta_p_rms, ppl_ratio, accuracy, accuracy_drop, flips (e.g.
    /// `kld_mean:>0.01,flips:>2%`). Speed thresholds need a base run:
    /// `tokenscope compare --fail-on`.
    #[arg(long, value_name = "THRESHOLDS", requires = "quality")]
    pub fail_on: Option<String>,

    /// Exit 4 when any level's errors and timeouts exceed this share of its
    /// requests: a fraction (0.05) or a percentage (5%). A run in which no
    /// measured request succeeded exits 4 without it.
    #[arg(long, value_name = "RATE")]
    pub max_error_rate: Option<String>,

    /// Exit 0 rather than 3 when an --slo check could not be evaluated at some
    /// level (too few requests for its percentile, the metric absent); the
    /// report and the summary still say which and why.
    #[arg(long)]
    pub allow_unevaluated: bool,

    /// Run the K-th (0-based) of N equal parts of this plan, for N load
    /// generators together: each level's concurrency or rate, the request
    /// counts and the prompts split between the shards (docs/scale.md). Each
    /// shard writes its own report; `tokenscope merge` makes them one.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,

    /// Start the first level at this wall-clock time (RFC 3339, e.g.
    /// 2026-12-03T14:05:00Z), after the setup, so shards on several machines
    /// line up.
    #[arg(
        long,
        value_name = "TIME",
        requires = "shard",
        conflicts_with = "start_after"
    )]
    pub start_at: Option<String>,

    /// Start the first level this long after now (e.g. 30s), for shards
    /// started together (a Kubernetes Job's pods).
    #[arg(long, value_name = "DURATION", requires = "shard")]
    pub start_after: Option<String>,

    /// Serve live Prometheus metrics at http://ADDR/metrics while the run goes on
    /// (TTFT, TPOT, ITL, E2E histograms; requests by outcome, tokens, in-flight,
    /// the level; labelled by level and shard: docs/scale.md lists them).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,

    /// After the run, keep /metrics up until it is scraped once more (so the
    /// scraper sees the final counts), at most this long (0: stop at once).
    #[arg(
        long,
        default_value = "15s",
        value_name = "DURATION",
        requires = "metrics_listen"
    )]
    pub metrics_linger: String,

    /// Push the same series to this Prometheus remote-write endpoint (e.g.
    /// http://prometheus:9090/api/v1/write) every --remote-write-interval and
    /// once at the end: for runs shorter than a scrape interval. A refused push
    /// is counted and said in the report; the run goes on.
    #[arg(long, value_name = "URL")]
    pub prometheus_remote_write: Option<String>,

    /// Time between remote-write pushes.
    #[arg(
        long,
        default_value = "5s",
        value_name = "DURATION",
        requires = "prometheus_remote_write"
    )]
    pub remote_write_interval: String,

    /// Exact samples kept per metric and level; past it, percentiles come from an
    /// HdrHistogram (3 significant digits) so memory stays flat on long runs.
    #[arg(long, default_value_t = tokenscope_stats::stats::DEFAULT_SAMPLE_CAP, hide = true)]
    pub sample_cap: usize,
}

/// `--image-format`.
fn image_format(s: &str) -> Result<tokenscope_workload::images::ImageFormat, String> {
    use tokenscope_workload::images::ImageFormat;
    match s {
        "jpeg" | "jpg" => Ok(ImageFormat::Jpeg),
        "png" => Ok(ImageFormat::Png),
        _ => Err(format!("'{s}' is not jpeg or png")),
    }
}
