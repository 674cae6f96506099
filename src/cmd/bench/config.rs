//! `bench`'s flags checked and turned into the run's configuration: every bad
//! value is refused here, naming its flag, before anything is sent.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use tokenscope_core::analyze::slo::Slo;
use tokenscope_core::report::TraceInfo;
use tokenscope_measure::openai::Api;
use tokenscope_workload::conversation::Conversation;
use tokenscope_workload::load::parse_arrival;
use tokenscope_workload::shard::Shard;
use tokenscope_workload::tokens::Tier;
use tokenscope_workload::trace::Trace;

use tokenscope_loadgen::util::{
    Secret, parse_base_url, parse_duration, parse_duration_or_zero, parse_f64_list, parse_u32_list,
};
use tokenscope_loadgen::{
    self as loadgen, BenchConfig, InputLength, LoadPlan, PerLevel, Prompts, TokenizerChoice,
};
use tokenscope_workload::dataset::{Dataset, DatasetPrompt};

use super::args::BenchArgs;
use super::plan::{Outputs, Plan};

fn flag<T>(name: &str, r: Result<T, String>) -> anyhow::Result<T> {
    r.map_err(|e| anyhow::anyhow!("--{name}: {e}"))
}

/// Read `--prompts`: JSON Lines of prompts or conversations, or ShareGPT
/// (`tokenscope_workload::dataset`), `--sample N` of them picked with `--seed`.
pub fn read_prompts(
    path: &Path,
    sample: Option<usize>,
    seed: u64,
) -> anyhow::Result<Vec<DatasetPrompt>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--prompts {}: cannot read the file", path.display()))?;
    let dataset =
        Dataset::parse(&text).map_err(|e| anyhow::anyhow!("--prompts {}: {e}", path.display()))?;
    if dataset.skipped > 0 {
        eprintln!(
            "note: --prompts {}: {} records without a human turn left out",
            path.display(),
            dataset.skipped
        );
    }
    Ok(match sample {
        Some(n) => dataset.sample(n, seed),
        None => dataset.prompts,
    })
}

impl BenchArgs {
    /// The load levels: `--rate` (open loop) or `--concurrency` (closed loop,
    /// default 1,4,8,16,32).
    fn load_plan(&self) -> anyhow::Result<LoadPlan> {
        if let Some(path) = &self.trace {
            return self.trace_plan(path);
        }
        Ok(match (&self.concurrency, &self.rate) {
            (_, Some(r)) => {
                let (arrival, cv) = flag("arrival", parse_arrival(&self.arrival))?;
                LoadPlan::Rate {
                    rates: flag("rate", parse_f64_list(r))?,
                    arrival,
                    cv,
                }
            }
            (Some(c), None) => LoadPlan::Concurrency(flag("concurrency", parse_u32_list(c))?),
            (None, None) => LoadPlan::Concurrency(vec![1, 4, 8, 16, 32]),
        })
    }

    /// `--trace`: the file read and checked, scaled and sped up as asked.
    fn trace_plan(&self, path: &Path) -> anyhow::Result<LoadPlan> {
        for (name, v) in [
            ("trace-speed", self.trace_speed),
            ("trace-token-scale", self.trace_token_scale),
        ] {
            if !(v.is_finite() && v > 0.0) {
                anyhow::bail!("--{name}: {v} must be more than 0");
            }
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--trace {}: cannot read the file", path.display()))?;
        let trace =
            Trace::parse(&text).map_err(|e| anyhow::anyhow!("--trace {}: {e}", path.display()))?;
        let limit = self.requests.map(|n| n as usize);
        if limit == Some(0) {
            anyhow::bail!("--requests: 0 must be at least 1");
        }
        let replay = trace.replay(self.trace_speed, self.trace_token_scale, limit);
        for s in &replay.skipped {
            eprintln!("note: --trace {}: left out {s}", path.display());
        }
        let info = TraceInfo {
            file: path.display().to_string(),
            format: replay.format,
            requests: replay.requests.len() as u64,
            speed: self.trace_speed,
            token_scale: self.trace_token_scale,
            block_tokens: replay.block_tokens,
            span_s: replay.span_ms() / 1000.0,
            skipped: replay.skipped.len() as u64,
        };
        Ok(LoadPlan::Trace {
            trace: std::sync::Arc::new(replay),
            info,
        })
    }

    /// Rounds per level (a trace is replayed once).
    fn rounds(&self) -> u32 {
        if self.trace.is_some() {
            1
        } else {
            self.rounds.unwrap_or(3)
        }
    }

    /// How much each level measures: `--requests` (at least one per round),
    /// `--duration`, or the default.
    fn per_level(&self, load: &LoadPlan) -> anyhow::Result<PerLevel> {
        if let LoadPlan::Trace { trace, .. } = load {
            return Ok(PerLevel::Requests(trace.requests.len() as u64));
        }
        let rounds = self.rounds();
        if rounds == 0 {
            anyhow::bail!("--rounds: 0 must be at least 1");
        }
        Ok(match (self.requests, &self.duration) {
            (Some(0), _) => anyhow::bail!("--requests: 0 must be at least 1"),
            (Some(n), _) if n < u64::from(rounds) => anyhow::bail!(
                "--requests: {n} is fewer than --rounds {rounds}: each round needs at least one request"
            ),
            (Some(n), _) => PerLevel::Requests(n),
            (None, Some(d)) => PerLevel::Duration(flag("duration", parse_duration(d))?),
            (None, None) => PerLevel::Auto,
        })
    }

    /// Validate everything before anything is sent.
    pub fn into_config(mut self) -> anyhow::Result<(Plan, Outputs)> {
        self.json =
            super::super::output::renamed(self.json.take(), self.out.take(), "--out", "--json");
        let (base_url, url_note) = flag("url", parse_base_url(&self.url))?;
        if let Some(note) = url_note {
            eprintln!("note: --url: {note}");
        }
        let api = Api::from(self.api);
        // An OpenAI key never goes to a Messages API endpoint by default.
        let key_vars: &[&str] = match api {
            Api::Messages => &["ANTHROPIC_API_KEY"],
            _ => &["OPENAI_API_KEY"],
        };
        let api_key = self
            .api_key
            .clone()
            .filter(|k| !k.is_empty())
            .or_else(|| {
                key_vars
                    .iter()
                    .find_map(|v| std::env::var(v).ok().filter(|k| !k.is_empty()))
            })
            .map(Secret::new);
        let mut http = self
            .http
            .clone()
            .into_options(&base_url, &|name| std::env::var(name).ok())?;
        if api == Api::Messages {
            http.use_messages_api_headers(api_key.is_some());
        }
        for line in http.notices(true) {
            eprintln!("{line}");
        }
        let load = self.load_plan()?;
        let per_level = self.per_level(&load)?;
        let outputs_tiers = flag("max-tokens", parse_u32_list(&self.max_tokens))?;
        let inputs = flag(
            "input-tokens",
            InputLength::parse_list(self.input_tokens.as_deref().unwrap_or("256")),
        )?;
        // A prompts file's prompts are picked into the tiers asked (by length).
        let pick_by_length = self.prompts.is_some() && self.input_tokens.is_some();
        if pick_by_length && let Some(f) = inputs.iter().find(|i| i.tokens().is_none()) {
            anyhow::bail!(
                "--input-tokens: {:?} with --prompts: the tiers that pick the file's prompts are numbers of tokens",
                f.label()
            );
        }
        let tiers = Tier::grid(&inputs, &outputs_tiers);
        if tiers.len() > 1 && self.trace.is_some() {
            anyhow::bail!(
                "--trace: a trace gives every request its own lengths; one --input-tokens and one --max-tokens at most"
            );
        }
        if outputs_tiers.len() > 1 && self.prompts.is_some() {
            eprintln!(
                "note: --max-tokens: a prompt's own max_tokens in --prompts wins over the tier's"
            );
        }
        let (input, max_tokens) = (tiers[0].input, tiers[0].max_tokens);
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            anyhow::bail!("--temperature: {t} must be between 0 and 2");
        }
        let prompts = match &self.prompts {
            Some(path) => Prompts::File {
                path: path.clone(),
                prompts: read_prompts(path, self.sample, self.seed)?,
            },
            None => Prompts::Synthetic { tokens: input },
        };
        let slos = match &self.slo {
            Some(s) => Slo::parse_list(s).map_err(|e| anyhow::anyhow!("--slo: {e}"))?,
            None => Vec::new(),
        };
        let slo_classes = slo_classes(&self.slo_class, &prompts)?;
        let timeout = flag("timeout", parse_duration(&self.timeout))?;
        let stall = flag("stall-threshold", parse_duration(&self.stall_threshold))?;
        let snapshot_interval = match (&self.snapshot_interval, &per_level) {
            (Some(s), _) => Some(flag("snapshot-interval", parse_duration(s))?),
            (None, PerLevel::Duration(d)) if *d >= Duration::from_secs(180) => {
                Some(Duration::from_secs(60))
            }
            (None, _) => None,
        };
        let grace = flag("grace", parse_duration(&self.grace))?;
        let server_metrics = flag(
            "server-metrics",
            server_metrics(&self.server_metrics, &base_url),
        )?;
        let gpu_metrics = match &self.gpu_metrics {
            Some(u) => Some(flag("gpu-metrics", metrics_url(u))?),
            None => None,
        };
        let scrape_interval = flag("scrape-interval", parse_duration(&self.scrape_interval))?;
        if scrape_interval < Duration::from_millis(100) {
            anyhow::bail!(
                "--scrape-interval: {} is under 100ms: scraping that often would load the server it measures",
                self.scrape_interval
            );
        }
        for (name, path) in [
            ("json", &self.json),
            ("csv", &self.csv),
            ("markdown", &self.markdown),
            ("raw", &self.raw),
        ] {
            if let Some(p) = path {
                check_writable(name, p)?;
            }
        }
        let (rounds, tracing) = (self.rounds(), self.trace.is_some());
        let tokenizer = TokenizerChoice::parse(self.tokenizer.as_deref().unwrap_or("auto"));
        if let TokenizerChoice::File(path) = &tokenizer {
            loadgen::tokenize::check_file(path)?;
        }
        let conversation = match &self.conversation {
            Some(c) => Some(flag("conversation", Conversation::parse(c))?),
            None => None,
        };
        if conversation.is_some() {
            if !api.takes_messages() {
                anyhow::bail!(
                    "--conversation: a conversation's history is a list of messages: use --api chat, responses or messages"
                );
            }
            if let Prompts::File { path, prompts } = &prompts
                && prompts.iter().any(|p| p.messages.is_some())
            {
                anyhow::bail!(
                    "--conversation: {} holds whole conversations ({{\"messages\": ...}}); --conversation takes prompts ({{\"prompt\": ...}}), one per turn",
                    path.display()
                );
            }
        }
        if !self.images.is_empty() && !api.takes_messages() {
            anyhow::bail!(
                "--images: images go in a message's content: use --api chat, responses or messages"
            );
        }
        if !self.images.is_empty() && (self.conversation.is_some() || self.trace.is_some()) {
            anyhow::bail!(
                "--images: not with {}: a conversation's history would drop the earlier turns' images, and a trace's lengths do not count them",
                if self.conversation.is_some() {
                    "--conversation"
                } else {
                    "--trace"
                }
            );
        }
        if self.tools.is_some() && self.conversation.is_some() {
            anyhow::bail!(
                "--tools: not with --conversation: a turn that called a tool would go into the next turn's history without its call or the call's result"
            );
        }
        if self.tools.is_some() || self.json_schema.is_some() {
            let forced = if tracing {
                Some("--trace (a trace's answers are made its lengths)")
            } else if self.ignore_eos {
                Some("--ignore-eos")
            } else if self.min_tokens.is_some_and(|n| n > 1) {
                Some("--min-tokens")
            } else {
                None
            };
            if let Some(forced) = forced {
                anyhow::bail!(
                    "{}: not with {forced}: answers made a given length are cut or run on past the JSON, and their check would judge the length, not the model",
                    if self.tools.is_some() {
                        "--tools"
                    } else {
                        "--json-schema"
                    }
                );
            }
        }
        let cfg = BenchConfig {
            base_url,
            api,
            model: self.model,
            api_key,
            http,
            load,
            per_level,
            rounds,
            // A trace is replayed as recorded: nothing before it.
            warmup: if tracing { Some(0) } else { self.warmup },
            prompts,
            max_tokens,
            // A trace's output lengths are the answers' lengths.
            ignore_eos: self.ignore_eos || tracing,
            min_tokens: self.min_tokens,
            temperature: self.temperature,
            timeout,
            slos,
            slo_classes,
            images: self.images.clone(),
            image_format: self.image_format,
            stall_threshold_ms: stall.as_secs_f64() * 1000.0,
            seed: self.seed,
            label: self.label.clone(),
            snapshot_interval,
            preflight: !self.no_preflight,
            grace,
            raw: self.raw,
            progress: !self.quiet,
            sample_cap: self.sample_cap.max(1),
            server_metrics,
            gpu_metrics,
            continuous_usage: self.continuous_usage,
            answer: answer_contract(
                api,
                self.tools.as_deref(),
                self.tool_choice.as_deref(),
                self.json_schema.as_deref(),
            )?,
            price: match &self.price {
                Some(p) => Some(flag(
                    "price",
                    tokenscope_core::model::cost::Price::parse(p),
                )?),
                None => None,
            },
            scrape_interval,
            metrics_send_key: self.metrics_send_key,
            tokenizer,
            tokens: None,
            context_window: self.context_window,
            shared_prefix: match self.shared_prefix {
                Some(0) => anyhow::bail!("--shared-prefix: 0 must be at least 1"),
                n => n,
            },
            ramp: match &self.ramp {
                Some(r) => Some(flag("ramp", parse_duration(r))?),
                None => None,
            },
            conversation,
            prompt_tier: None,
            metrics_listen: self.metrics_listen,
            metrics_linger: flag(
                "metrics-linger",
                parse_duration_or_zero(&self.metrics_linger),
            )?,
            remote_write: match &self.prometheus_remote_write {
                Some(u) => {
                    let url = reqwest::Url::parse(u)
                        .ok()
                        .filter(|u| matches!(u.scheme(), "http" | "https"))
                        .ok_or_else(|| {
                            anyhow::anyhow!(
                                "--prometheus-remote-write: not an http(s) URL (e.g. http://127.0.0.1:9090/api/v1/write)"
                            )
                        })?;
                    let every = flag(
                        "remote-write-interval",
                        parse_duration(&self.remote_write_interval),
                    )?;
                    anyhow::ensure!(
                        every >= Duration::from_millis(100),
                        "--remote-write-interval: {} is under 100ms",
                        self.remote_write_interval
                    );
                    Some((url, every))
                }
                None => None,
            },
            shard: None,
            start_at: match (&self.start_at, &self.start_after) {
                (Some(t), _) => Some((
                    flag("start-at", tokenscope_measure::parse::rfc3339_ms(t))?,
                    t.clone(),
                )),
                (None, Some(d)) => {
                    let at = tokenscope_loadgen::util::unix_ms()
                        + flag("start-after", parse_duration(d))?.as_secs_f64() * 1000.0;
                    Some((at, tokenscope_loadgen::util::rfc3339_of_ms(at)))
                }
                (None, None) => None,
            },
        };
        say_request_counts(&cfg);
        let cfg = match &self.shard {
            Some(s) => {
                let shard = flag("shard", Shard::parse(s).map_err(|e| e.to_string()))?;
                cfg.split(shard)
                    .map_err(|e| anyhow::anyhow!("--shard {s}: {e}"))?
            }
            None => cfg,
        };
        let quality = match &self.quality {
            Some(reference) => {
                if self.shard.is_some() {
                    anyhow::bail!(
                        "--quality: with --shard each machine would check the answers again; run the quality checks from one (tokenscope quality)"
                    );
                }
                let args = crate::cmd::quality::args_for_bench(
                    reference,
                    &self.url,
                    self.quality_args.as_deref().unwrap_or(""),
                    &self.http,
                )?;
                // Bad settings, a bad reference file, text or tasks file: said
                // before the sweep.
                crate::cmd::quality::check(&args).map_err(|e| e.context("--quality"))?;
                Some(super::plan::QualityPlan {
                    args,
                    gates: crate::cmd::quality::parse_gates(self.fail_on.as_deref(), "--fail-on")?,
                    json: self.json.as_deref().map(super::plan::quality_path),
                })
            }
            None => None,
        };
        let outputs = Outputs {
            json: self.json,
            csv: self.csv,
            markdown: self.markdown,
        };
        Ok((
            Plan {
                cfg,
                tiers,
                synthetic: self.prompts.is_none(),
                pick_by_length,
                quality,
                gates: super::outcome::RunGates {
                    max_error_rate: match &self.max_error_rate {
                        Some(r) => Some(flag("max-error-rate", super::outcome::parse_share(r))?),
                        None => None,
                    },
                    allow_unevaluated: self.allow_unevaluated,
                },
            },
            outputs,
        ))
    }
}

/// Say once, before anything is sent, where the requests per level differ from
/// what was asked: a closed-loop level raised so that every round has each
/// worker busy ([`BenchConfig::raised_requests`]; the report keeps it as the
/// warning `requests_raised`), and the default raised so that the SLOs'
/// percentiles can be evaluated.
fn say_request_counts(cfg: &BenchConfig) {
    if let Some(m) = cfg.raised_requests() {
        eprintln!("note: {m}");
    }
    let need = cfg.slo_min_requests();
    if matches!(cfg.per_level, PerLevel::Auto)
        && cfg.shard.is_none()
        && cfg.load.loads().iter().any(|&l| {
            tokenscope_workload::plan::default_round_requests(l) * u64::from(cfg.rounds) < need
        })
    {
        eprintln!(
            "note: --slo: its percentiles need {need} successful requests per level to be evaluated: each level sends at least {need} (--requests N to choose)"
        );
    }
}

/// `--server-metrics`: `auto` (the endpoint's origin + `/metrics`), `none`, or a URL.
fn server_metrics(s: &str, base: &reqwest::Url) -> Result<loadgen::scrape::ServerMetrics, String> {
    use loadgen::scrape::ServerMetrics;
    match s.trim() {
        "auto" => {
            let mut u = base.clone();
            u.set_path("/metrics");
            u.set_query(None);
            Ok(ServerMetrics::Auto(u))
        }
        "none" | "off" => Ok(ServerMetrics::Off),
        url => metrics_url(url).map(ServerMetrics::Url),
    }
}

/// A metrics URL: http(s) with a host; a bare origin gets `/metrics`.
fn metrics_url(s: &str) -> Result<reqwest::Url, String> {
    let mut u = reqwest::Url::parse(s.trim()).map_err(|e| {
        format!(
            "{:?} is not auto, none or a URL ({e})",
            tokenscope_measure::parse::redact_url(s)
        )
    })?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return Err(format!(
            "{} is not an http(s) URL",
            tokenscope_measure::parse::redact_url(s)
        ));
    }
    if u.path() == "/" {
        u.set_path("/metrics");
    }
    Ok(u)
}

/// Refuse an output path whose folder does not exist, before the run.
fn check_writable(name: &str, path: &Path) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        anyhow::bail!(
            "--{name} {}: the folder {} does not exist",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// `--tools`, `--tool-choice`, `--json-schema`: what every answer is asked to be,
/// its schemas compiled (`None` when none of them is given).
fn answer_contract(
    api: Api,
    tools: Option<&str>,
    tool_choice: Option<&str>,
    schema: Option<&Path>,
) -> anyhow::Result<Option<std::sync::Arc<loadgen::answer::AnswerContract>>> {
    if tools.is_none() && schema.is_none() {
        return Ok(None);
    }
    let tools = tools
        .map(loadgen::answer::read_tools)
        .transpose()?
        .unwrap_or_default();
    let schema = schema.map(loadgen::answer::read_schema).transpose()?;
    let choice = tool_choice.map(tokenscope_measure::openai::ToolChoice::parse);
    let contract = loadgen::answer::AnswerContract::new(api, tools, choice, schema)?;
    Ok(Some(std::sync::Arc::new(contract)))
}

/// `--slo-class NAME=SLOS`, each naming a class the prompts file's lines give.
fn slo_classes(
    given: &[String],
    prompts: &Prompts,
) -> anyhow::Result<Vec<tokenscope_core::analyze::slo::SloClass>> {
    use tokenscope_core::analyze::slo::SloClass;
    let classes = given
        .iter()
        .map(|s| SloClass::parse(s).map_err(|e| anyhow::anyhow!("--slo-class: {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if classes.is_empty() {
        return Ok(classes);
    }
    let Prompts::File { path, prompts } = prompts else {
        anyhow::bail!(
            "--slo-class: classes come from a --prompts file whose lines name theirs (\"class\": \"summarize\")"
        );
    };
    let mut known: Vec<&str> = prompts.iter().filter_map(|p| p.class.as_deref()).collect();
    known.sort_unstable();
    known.dedup();
    for (i, c) in classes.iter().enumerate() {
        if classes[..i].iter().any(|k| k.class == c.class) {
            anyhow::bail!("--slo-class {}: given twice", c.class);
        }
        if !known.contains(&c.class.as_str()) {
            let theirs = if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            };
            anyhow::bail!(
                "--slo-class {}: none of the prompts taken from {} has \"class\": {:?} (theirs: {theirs})",
                c.class,
                path.display(),
                c.class,
            );
        }
    }
    Ok(classes)
}
