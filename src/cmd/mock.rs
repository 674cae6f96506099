//! `tokenscope mock`: the simulated inference server.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use tokenscope_quality::toy_lm::ToyLm;
use tokenscope_sim::{SimConfig, faults_label, parse_faults};

use crate::mock::tls::{TlsFiles, self_signed, server_config};
use crate::mock::{LmServe, MockState, ServeOptions, router, serve};
use tokenscope_loadgen::util::parse_duration;

/// Run a simulated OpenAI-compatible inference server: continuous batching, a queue,
/// prefill that grows with the prompt, jitter and injected faults, all seeded.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
  tokenscope mock --port 8000
  tokenscope mock --port 0 --max-batch 8 --itl-ms 20 --log server.jsonl
  tokenscope mock --error-rate 0.1 --faults http_503,reset,error_event
  tokenscope mock --port 8443 --tls-self-signed ./mock-tls
  tokenscope mock --tls-cert server.pem --tls-key server-key.pem --tls-client-ca ca.pem
  tokenscope mock --http1-only --connect-delay-ms 50

Plaintext serves HTTP/1.1 and h2c (HTTP/2 by prior knowledge); TLS offers h2 and
http/1.1 by ALPN (only http/1.1 with --http1-only).

Faults: http_429, http_503, error_event, reset, malformed, stall, html, no_done, no_headers.")]
pub struct MockArgs {
    /// Address to bind. Anything but loopback exposes the server to the network.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,

    /// Port (0 picks a free one; the URL is printed on the first line).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,

    #[command(flatten)]
    pub sim: SimArgs,

    /// Log, per request, when each chunk was handed to HTTP (JSONL, server truth).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,

    /// Serve no /metrics (404), like a server started without metrics.
    #[arg(long)]
    pub no_metrics: bool,

    /// Simulate a GPU drawing this many watts, exported at /gpu/metrics in
    /// dcgm-exporter's names (power, an energy counter exact to the millijoule,
    /// utilisation), for `bench --gpu-metrics`.
    #[arg(long, value_name = "W")]
    pub gpu_watts: Option<f64>,

    /// Hold each stream's response head until its first token and send them
    /// together (as servers that write nothing before the first body bytes do).
    #[arg(long)]
    pub head_with_first_token: bool,

    /// End each complete stream with llama.cpp's `timings` object (`prompt_ms`:
    /// the request's arrival to the first token's chunk, by the mock's clock), as
    /// llama-server does: what a client or the browser probe can split TTFT by.
    #[arg(long)]
    pub timings: bool,

    #[command(flatten)]
    pub tls: TlsArgs,

    /// Speak only HTTP/1.1: no h2 by ALPN over TLS, no h2c in plaintext (to test
    /// a client's fallback).
    #[arg(long)]
    pub http1_only: bool,

    /// Hold each new connection this long after accepting it, before its TLS
    /// handshake (or its first request, in plaintext): a known connection-setup
    /// cost (the log's t_conn_accepted_ms and t_conn_ready_ms).
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub connect_delay_ms: u64,

    /// Answer requests for log-probabilities (`logprobs: true`, `stream: false`,
    /// chat) with a seeded toy language model over this many words (2-36): its
    /// greedy answer and each token's top-k, stated exactly (`tokenscope
    /// quality`'s ground truth).
    #[arg(
        long,
        default_value_t = 36,
        value_name = "N",
        help_heading = "Log-probabilities (tokenscope quality)"
    )]
    pub lm_vocab: usize,

    /// Move each of the toy model's logits by seeded Gaussian noise of this
    /// standard deviation: a known change (a quantised build) to find.
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "SIGMA",
        help_heading = "Log-probabilities (tokenscope quality)"
    )]
    pub lm_perturb: f64,

    /// Seed of --lm-perturb's noise.
    #[arg(
        long,
        default_value_t = 1,
        value_name = "N",
        help_heading = "Log-probabilities (tokenscope quality)"
    )]
    pub lm_perturb_seed: u64,

    /// Answer this share of `tokenscope quality`'s built-in tasks right (the
    /// rest wrong), on a set --seed fixes: two mocks of one seed flip exactly
    /// where their shares differ.
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "SHARE",
        help_heading = "Log-probabilities (tokenscope quality)"
    )]
    pub lm_tasks_right: f64,

    /// Give no log-probabilities (the toy model's text only), as a server
    /// without them.
    #[arg(long, help_heading = "Log-probabilities (tokenscope quality)")]
    pub no_logprobs: bool,

    /// Never name tokens by id (vLLM's `return_tokens_as_token_ids`, which the
    /// mock honours by default), as a server without it.
    #[arg(long, help_heading = "Log-probabilities (tokenscope quality)")]
    pub no_token_ids: bool,

    /// Score no `echo`ed prompt on the completions API (as SGLang's OpenAI
    /// server in some versions): a prompt's own tokens are scored only by
    /// SGLang's native `POST /generate` (`return_logprob`,
    /// `logprob_start_len: 0`).
    #[arg(long, help_heading = "Log-probabilities (tokenscope quality)")]
    pub no_echo_logprobs: bool,

    /// Serve no `POST /generate` (SGLang's native API, which the mock serves
    /// by default): a server such as vLLM or llama-server.
    #[arg(long, help_heading = "Log-probabilities (tokenscope quality)")]
    pub no_generate: bool,

    /// Move the toy model's logits by seeded noise of this standard deviation
    /// whenever a request shares the engine with others (a batch-variant
    /// kernel): greedy answers then change with load, as on engines without
    /// batch-invariant decoding.
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "SIGMA",
        help_heading = "Log-probabilities (tokenscope quality)"
    )]
    pub lm_batch_noise: f64,

    /// Salt of `/tokenize`'s token ids (one id per word and punctuation mark,
    /// by a hash): two mocks of different salts are servers of different
    /// tokenizers that count alike.
    #[arg(
        long,
        default_value_t = 0,
        value_name = "N",
        help_heading = "Log-probabilities (tokenscope quality)"
    )]
    pub tokenizer_seed: u64,

    /// Allow only these request headers in a CORS preflight
    /// (`authorization,content-type`), to see a page's extra headers refused;
    /// by default a preflight allows whatever it asks for.
    #[arg(long, value_name = "LIST")]
    pub cors_allow_headers: Option<String>,
}

/// TLS: certificate files, or a throwaway CA; optionally mutual TLS.
#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// Serve HTTPS with this PEM certificate (a chain: the server's first).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Serve HTTPS with a CA, a server and a client certificate generated in DIR
    /// (ca.pem, server.pem, client.pem and their -key.pem), or reused if all are
    /// there. Clients trust it with `--ca-cert DIR/ca.pem`.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["tls_cert", "tls_key"])]
    pub tls_self_signed: Option<PathBuf>,

    /// Require a client certificate signed by a CA in this PEM file (mutual TLS);
    /// a client without one fails the handshake.
    #[arg(long, value_name = "FILE")]
    pub tls_client_ca: Option<PathBuf>,
}

impl TlsArgs {
    /// The server's TLS configuration (`None`: plaintext). `--tls-self-signed`
    /// writes its files first and says on stderr which CA file clients need.
    pub fn server_config(&self, http1_only: bool) -> anyhow::Result<Option<rustls::ServerConfig>> {
        let files = match (&self.tls_cert, &self.tls_key, &self.tls_self_signed) {
            (Some(cert), Some(key), _) => TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: None,
            },
            (_, _, Some(dir)) => {
                let made = self_signed(dir)?;
                eprintln!(
                    "TLS with {} certificates in {}: clients trust it with --ca-cert {}",
                    if made.reused { "the" } else { "new" },
                    dir.display(),
                    made.ca.display()
                );
                made.files
            }
            _ => {
                if self.tls_client_ca.is_some() {
                    anyhow::bail!(
                        "--tls-client-ca needs TLS: add --tls-cert and --tls-key, or --tls-self-signed"
                    );
                }
                return Ok(None);
            }
        };
        let files = TlsFiles {
            client_ca: self.tls_client_ca.clone(),
            ..files
        };
        Ok(Some(server_config(&files, http1_only)?))
    }
}

/// The simulator's model parameters (shared by `mock`, `serve --mock` and `demo`).
/// Every default is `SimConfig::default()`'s: the one definition the page's
/// simulator uses too.
#[derive(Debug, Clone, Args)]
pub struct SimArgs {
    /// Model name served.
    #[arg(long, default_value_t = SimConfig::default().model)]
    pub model_name: String,

    /// Fixed prefill overhead of a step that admits requests (TTFT at concurrency 1
    /// for an empty prompt), ms.
    #[arg(long, default_value_t = SimConfig::default().ttft_ms)]
    pub ttft_ms: f64,

    /// Decode step time at batch 1 (ITL at concurrency 1), ms.
    #[arg(long, default_value_t = SimConfig::default().itl_ms)]
    pub itl_ms: f64,

    /// Prefill speed, prompt tokens per second.
    #[arg(long, default_value_t = SimConfig::default().prefill_tok_per_s)]
    pub prefill_tok_per_s: f64,

    /// Most requests decoding at once (continuous batching); more wait in a queue.
    #[arg(long, default_value_t = SimConfig::default().max_batch)]
    pub max_batch: u32,

    /// Decode step time growth per extra sequence in the batch (0.03 = +3% each).
    #[arg(long, default_value_t = SimConfig::default().step_growth)]
    pub step_growth: f64,

    /// Uniform step-time jitter, +/- ms.
    #[arg(long, default_value_t = SimConfig::default().jitter_ms)]
    pub jitter_ms: f64,

    /// Tokens per streamed chunk.
    #[arg(long, default_value_t = SimConfig::default().tokens_per_chunk)]
    pub tokens_per_chunk: u32,

    /// Probability that a request gets a fault.
    #[arg(long, default_value_t = SimConfig::default().error_rate)]
    pub error_rate: f64,

    /// Faults drawn from (uniformly) for the requests that get one.
    #[arg(long, default_value_t = faults_label(&SimConfig::default().faults), value_name = "KIND,..")]
    pub faults: String,

    /// How long a `stall` fault holds the stream.
    #[arg(long, default_value_t = format!("{}s", SimConfig::default().stall_ms / 1000.0), value_name = "DURATION")]
    pub stall: String,

    /// Step-time drift, ms per minute of uptime (to test soak drift checks).
    #[arg(long, default_value_t = SimConfig::default().itl_growth_ms_per_min)]
    pub itl_growth_ms_per_min: f64,

    /// The first N tokens of each chat answer are reasoning (delta.reasoning_content,
    /// counted in usage.completion_tokens_details.reasoning_tokens), as a reasoning
    /// model's are.
    #[arg(long, default_value_t = SimConfig::default().reasoning_tokens, value_name = "N")]
    pub reasoning_tokens: u32,

    /// Keep a prefix cache: the leading words of a prompt that an earlier prompt
    /// began with are not prefilled again, and usage.prompt_tokens_details.
    /// cached_tokens says how many (its log's cached_tokens too).
    #[arg(long)]
    pub prefix_cache: bool,

    /// Where a request offers tools and tool_choice is auto (or absent), the
    /// share of answers that call one (required or a named tool: every
    /// answer; none: no answer). The call's arguments follow the tool's
    /// schema and come one piece per token; the log says what was called.
    #[arg(long, default_value_t = SimConfig::default().tool_call_share, value_name = "SHARE")]
    pub tool_call_share: f64,

    /// The share of tool calls and JSON answers (response_format, text.format,
    /// output_format) sent without their schema's first required property
    /// (or cut short where there is none); the log says which.
    #[arg(long, default_value_t = SimConfig::default().invalid_answer_share, value_name = "SHARE")]
    pub invalid_answer_share: f64,

    /// An image in a prompt (PNG or JPEG, as a data URL or base64 block)
    /// counts one prompt token per square of this many pixels a side, part
    /// squares whole (28: Qwen2-VL's 14-pixel patches merged 2x2), prefilled
    /// like the text; the log gives each image's size and tokens.
    #[arg(long, default_value_t = SimConfig::default().image_patch_px, value_name = "PX")]
    pub image_patch_px: u32,

    /// Longest prompt + max_tokens accepted (HTTP 400 beyond).
    #[arg(long, default_value_t = SimConfig::default().max_context_tokens)]
    pub max_context: u64,

    /// Seed of everything random.
    #[arg(long, default_value_t = SimConfig::default().seed)]
    pub seed: u64,
}

impl SimArgs {
    /// Validate into the model's configuration.
    pub fn into_config(self) -> anyhow::Result<SimConfig> {
        let faults = parse_faults(&self.faults).map_err(|e| anyhow::anyhow!("--faults: {e}"))?;
        let stall = parse_duration(&self.stall).map_err(|e| anyhow::anyhow!("--stall: {e}"))?;
        if self.image_patch_px == 0 {
            anyhow::bail!("--image-patch-px: 0 must be at least 1");
        }
        let cfg = SimConfig {
            model: self.model_name,
            ttft_ms: self.ttft_ms,
            itl_ms: self.itl_ms,
            prefill_tok_per_s: self.prefill_tok_per_s,
            max_batch: self.max_batch,
            step_growth: self.step_growth,
            jitter_ms: self.jitter_ms,
            tokens_per_chunk: self.tokens_per_chunk,
            reasoning_tokens: self.reasoning_tokens,
            prefix_cache: self.prefix_cache,
            tool_call_share: self.tool_call_share,
            invalid_answer_share: self.invalid_answer_share,
            image_patch_px: self.image_patch_px,
            error_rate: self.error_rate,
            faults,
            stall_ms: stall.as_secs_f64() * 1000.0,
            itl_growth_ms_per_min: self.itl_growth_ms_per_min,
            max_context_tokens: self.max_context,
            seed: self.seed,
            ..SimConfig::default()
        };
        cfg.validate().map_err(|e| anyhow::anyhow!("--{e}"))?;
        Ok(cfg)
    }
}

/// Run the subcommand (until Ctrl-C).
pub fn run(args: MockArgs) -> anyhow::Result<ExitCode> {
    let cfg = args.sim.into_config()?;
    let tls = args.tls.server_config(args.http1_only)?;
    let rt = super::runtime()?;
    rt.block_on(async move {
        let (listener, origin) = super::listen(args.host, args.port).await?;
        let mut state = MockState::start(cfg, args.log.as_deref())?;
        if args.no_metrics {
            state = state.without_metrics();
        }
        if let Some(w) = args.gpu_watts
            && !(w.is_finite() && w >= 0.0)
        {
            anyhow::bail!("--gpu-watts {w}: must be 0 or more");
        }
        state = state.with_gpu_watts(args.gpu_watts);
        state = state.head_with_first_token(args.head_with_first_token);
        state = state.with_timings(args.timings);
        state = state.cors_allow_headers(args.cors_allow_headers.as_deref());
        for (flag, v) in [
            ("--lm-perturb", args.lm_perturb),
            ("--lm-batch-noise", args.lm_batch_noise),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                anyhow::bail!("{flag} {v}: must be 0 or more");
            }
        }
        if !(0.0..=1.0).contains(&args.lm_tasks_right) {
            anyhow::bail!(
                "--lm-tasks-right {}: a share from 0 to 1",
                args.lm_tasks_right
            );
        }
        let seed = state.config().seed;
        state = state.with_lm(LmServe {
            lm: ToyLm::new(seed, args.lm_vocab).perturbed(args.lm_perturb, args.lm_perturb_seed),
            logprobs: !args.no_logprobs,
            token_ids: !args.no_token_ids,
            echo_logprobs: !args.no_echo_logprobs,
            native_generate: !args.no_generate,
            tasks_right: args.lm_tasks_right,
            seed,
            tokenizer_seed: args.tokenizer_seed,
            batch_noise: args.lm_batch_noise,
        });
        let opts = ServeOptions {
            tls: tls.map(Arc::new),
            http1_only: args.http1_only,
            connect_delay: Duration::from_millis(args.connect_delay_ms),
            ..ServeOptions::plain(state.clock())
        };
        let origin = match origin.strip_prefix("http://") {
            Some(rest) => format!("{}://{rest}", opts.scheme()),
            None => origin,
        };
        println!("tokenscope mock listening on {origin}/v1");
        tokio::select! {
            r = serve(listener, router(state), opts) => r.context("the server failed")?,
            _ = tokio::signal::ctrl_c() => {}
        }
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
