//! One load level's results: its counts, throughputs, metric summaries and
//! quantile curves, ITL by output position, stalls, rounds, SLO checks, long-run
//! snapshots and drift, conversation turns, and its server view.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::is_zero;
use super::load::Load;
use crate::analyze::server::view::ServerLevel;
use tokenscope_stats::stats::{LinearFit, Summary};

/// Summaries of every per-request metric at one level (successful requests only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LevelMetrics {
    /// Time to first token.
    pub ttft_ms: Summary,
    /// TTFT of the requests whose server said at least half their prompt came
    /// from its prefix cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_cached_ms: Option<Summary>,
    /// TTFT of the requests whose server said less of their prompt came from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_uncached_ms: Option<Summary>,
    /// Time per output token.
    pub tpot_ms: Summary,
    /// Inter-token latency per chunk (all gaps of all requests).
    pub itl_ms: Summary,
    /// Inter-token latency per token.
    pub itl_per_token_ms: Summary,
    /// End-to-end latency.
    pub e2e_ms: Summary,
    /// Time to response headers.
    pub time_to_headers_ms: Summary,
    /// Time to first body byte.
    pub time_to_first_byte_ms: Summary,
    /// Per-request decode rate, tokens/s.
    pub decode_rate_tok_per_s: Summary,
    /// Output tokens per request.
    pub output_tokens: Summary,
    /// User-perceived TTFT (browser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendered_ttft_ms: Option<Summary>,
    /// Render delay (browser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render_delay_ms: Option<Summary>,
    /// A reasoning model's time to its first answer token (requests that
    /// reasoned; TTFT counts the reasoning's first token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_first_answer_ms: Option<Summary>,
    /// Time to the first piece of a tool call (requests whose answer called one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_first_tool_call_ms: Option<Summary>,
    /// Reasoning tokens per request (requests that reasoned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<Summary>,
    /// Each request's longest gap between tokens (stream smoothness; requests
    /// with at least two content events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_gap_ms: Option<Summary>,
    /// The browser's own send delay: from the page's send to its network stack
    /// beginning the request (Resource Timing's `requestStart`; a new
    /// connection's setup included) (browser, where exposed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_send_ms: Option<Summary>,
    /// The browser's own delivery delay: from its network stack having the
    /// response's first bytes (Resource Timing's `responseStart`) to the page's
    /// script having the response (browser, where exposed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_delivery_ms: Option<Summary>,
    /// Actual minus scheduled send (rate mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_lag_ms: Option<Summary>,
    /// llama.cpp's own generation time per token, when the server sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_tpot_ms: Option<Summary>,
    /// llama.cpp's own prompt evaluation time, when the server sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_prompt_ms: Option<Summary>,
    /// Waiting for a connection's setup (DNS, TCP, proxy tunnel, TLS), over the
    /// requests that waited for one (of every outcome that got a connection):
    /// those that opened one, and HTTP/2 streams sent while it was set up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_setup_ms: Option<Summary>,
}

/// A level's requests by the connection they went over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ConnectionCounts {
    /// Requests that opened a new connection.
    pub new: u64,
    /// Requests that went over a connection an earlier request had opened.
    pub reused: u64,
}

/// ITL of the gaps whose later event starts at output positions `from..=to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PositionBucket {
    /// First output position (1-based).
    pub from: u64,
    /// Last output position, `None` for open-ended.
    pub to: Option<u64>,
    /// ITL of the gaps in this range.
    pub itl_ms: Summary,
}

/// How many tokens a level's content events carried, where some carried more
/// than one (engines that batch the stream, speculative decoding, reasoning and
/// tool-call chunks): the source of its ITL per token.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EventTokens {
    /// Successful requests whose every content event said how many tokens it
    /// carried (a running `usage` in each chunk): their ITL per token divides
    /// each gap by those counts.
    pub counted: u64,
    /// Successful requests whose events' tokens the run's tokenizer counted
    /// (`--tokenizer FILE`: the generated text's tokens, each given to the
    /// event its first byte came in), where the server did not.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tokenized: u64,
    /// Successful requests with more tokens than events and no count per
    /// event: their tokens are spread evenly over their events.
    pub spread: u64,
    /// Output tokens per content event over the successful requests.
    pub tokens_per_event: f64,
}

/// What the answers to requests that offered tools or asked for a JSON answer
/// were (successful requests; `--tools`, `--json-schema`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Answers {
    /// Successful requests that offered tools or asked for JSON.
    pub requests: u64,
    /// Of them, those whose answer called at least one tool.
    pub called_tool: u64,
    /// Tool calls made, all answers together.
    pub tool_calls: u64,
    /// Answers checked against a schema (a tool's, or the answer's own).
    pub checked: u64,
    /// Of those, the answers that kept to every schema.
    pub valid: u64,
    /// Why the others did not, most frequent first (at most 5): the tool, the
    /// place in the JSON and the rule broken (`get_weather: /unit: enum`),
    /// never the answer's text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<AnswerProblem>,
}

/// One reason answers failed their schema, and how many.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerProblem {
    /// The reason (`not JSON`, `/unit: enum`).
    pub problem: String,
    /// Answers it was the first problem of.
    pub count: u64,
}

impl Answers {
    /// The share of answers that called a tool.
    pub fn tool_call_share(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.called_tool as f64 / self.requests as f64)
    }

    /// The share of checked answers valid against their schema.
    pub fn valid_share(&self) -> Option<f64> {
        (self.checked > 0).then(|| self.valid as f64 / self.checked as f64)
    }

    /// Count one request's answer (its problems kept in full until
    /// [`Answers::finished`], up to 64 distinct ones).
    pub fn add(&mut self, check: &tokenscope_measure::record::AnswerCheck) {
        // (Every request of a run that offered tools or asked for JSON.)
        self.requests += 1;
        self.called_tool += u64::from(check.tool_calls > 0);
        self.tool_calls += u64::from(check.tool_calls);
        let Some(valid) = check.valid else { return };
        self.checked += 1;
        if valid {
            self.valid += 1;
            return;
        }
        let problem = check.problem.as_deref().unwrap_or("invalid");
        let room = self.problems.len() < 64;
        match self.problems.iter_mut().find(|q| q.problem == problem) {
            Some(q) => q.count += 1,
            None if room => self.problems.push(AnswerProblem {
                problem: problem.to_owned(),
                count: 1,
            }),
            None => {}
        }
    }

    /// The counts, with the most frequent problems only.
    pub fn finished(self) -> Answers {
        self.merged(&Answers::default())
    }

    /// The sum of two levels' (shards of one level: the problems counted
    /// together).
    pub fn merged(mut self, other: &Answers) -> Answers {
        self.requests += other.requests;
        self.called_tool += other.called_tool;
        self.tool_calls += other.tool_calls;
        self.checked += other.checked;
        self.valid += other.valid;
        for p in &other.problems {
            match self.problems.iter_mut().find(|q| q.problem == p.problem) {
                Some(q) => q.count += p.count,
                None => self.problems.push(p.clone()),
            }
        }
        self.problems
            .sort_by(|a, b| b.count.cmp(&a.count).then(a.problem.cmp(&b.problem)));
        self.problems.truncate(MAX_ANSWER_PROBLEMS);
        self
    }
}

/// One class of a mixed workload at a level: its requests, and those that met
/// the class's own SLOs (`--slo-class`; the run's `--slo` where it has none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassReport {
    /// The class (a prompts file line's `class`).
    pub class: String,
    /// Its SLOs, as given (`ttft_ms:p95<=500`); empty: none (every
    /// successful request meets them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slos: Vec<String>,
    /// Its requests sent in the measured rounds.
    pub sent: u64,
    /// Of those, the successful ones.
    pub ok: u64,
    /// Of those, the ones whose own values met every one of its SLOs.
    pub met: u64,
    /// `met / sent`: the class's goodput share.
    pub met_fraction: f64,
}

/// The most problems [`Answers`] lists.
pub const MAX_ANSWER_PROBLEMS: usize = 5;

/// What the server's prefix cache served, as the server said per request.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct PromptCache {
    /// Requests whose server said how many prompt tokens came from its cache.
    pub requests: u64,
    /// Their prompt tokens (`usage.prompt_tokens`).
    pub prompt_tokens: u64,
    /// Of those, the cached ones.
    pub cached_tokens: u64,
}

impl PromptCache {
    /// The share of prompt tokens served from the cache (0 to 1).
    pub fn cached_fraction(&self) -> Option<f64> {
        (self.prompt_tokens > 0).then(|| self.cached_tokens as f64 / self.prompt_tokens as f64)
    }

    /// Add one request's counts.
    pub fn add(&mut self, prompt_tokens: u64, cached_tokens: u64) {
        self.requests += 1;
        self.prompt_tokens += prompt_tokens;
        self.cached_tokens += cached_tokens;
    }
}

/// One turn of a level's conversations: the requests that were that turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnReport {
    /// The turn, 1 the first.
    pub turn: u32,
    /// Requests sent as this turn.
    pub sent: u64,
    /// Of those, successful.
    pub ok: u64,
    /// Time to first token of the successful ones.
    pub ttft_ms: Summary,
    /// Their time per output token.
    pub tpot_ms: Summary,
    /// Their prompt tokens (`usage.prompt_tokens`: the whole history sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<Summary>,
    /// What the server's prefix cache served for this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache: Option<PromptCache>,
}

/// Stalls (ITL gaps above the threshold).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StallReport {
    /// The threshold, ms.
    pub threshold_ms: f64,
    /// Gaps above it.
    pub count: u64,
    /// Requests with at least one.
    pub requests: u64,
    /// The longest gap of all, ms.
    pub longest_ms: Option<f64>,
}

/// One round of a level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundReport {
    /// 1-based round number.
    pub round: u32,
    /// Requests sent in the round.
    pub sent: u64,
    /// Successful ones.
    pub ok: u64,
    /// Median TTFT.
    pub ttft_ms_p50: Option<f64>,
    /// Median TPOT.
    pub tpot_ms_p50: Option<f64>,
    /// Median E2E.
    pub e2e_ms_p50: Option<f64>,
    /// Output throughput of the round.
    pub output_tokens_per_s: Option<f64>,
    /// Metrics on which this round is more than 2x off the median of the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outlier_metrics: Vec<String>,
}

/// Round-to-round spread of one figure: `(max - min) / median`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Smallest round value.
    pub min: f64,
    /// Largest round value.
    pub max: f64,
    /// `(max - min) / median` of the round values.
    pub relative: f64,
}

/// Spread between rounds of the key figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RoundSpread {
    /// Of the rounds' TTFT medians.
    pub ttft_ms_p50: Option<Spread>,
    /// Of the rounds' TPOT medians.
    pub tpot_ms_p50: Option<Spread>,
    /// Of the rounds' E2E medians.
    pub e2e_ms_p50: Option<Spread>,
    /// Of the rounds' throughputs.
    pub output_tokens_per_s: Option<Spread>,
    /// Some round is more than 2x off the others.
    pub rounds_disagree: bool,
}

/// Whether a level met one SLO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloCheck {
    /// The SLO (`ttft_ms:p95<=500`).
    pub slo: String,
    /// The level's value of that percentile.
    pub value_ms: Option<f64>,
    /// Whether it is within the bound (false when it could not be evaluated).
    pub met: bool,
    /// Why the level's data cannot carry this check, and the fix (`24
    /// successful requests: a p95 needs 100 (--requests 100 or more)`); absent
    /// when the check was evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_evaluable: Option<String>,
}

/// The load a level really offered: the requests the client had in flight at
/// once during the measured rounds (a conversation level: the conversations
/// under way, its concurrency being sessions).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReachedLoad {
    /// The most in flight at once.
    pub client_in_flight_max: u32,
    /// The time-weighted mean in flight over the measured window.
    pub client_in_flight_mean: f64,
    /// A closed-loop level whose client never had its concurrency in flight at
    /// once: its figures are not those of its concurrency, and the knee, the
    /// SLO capacity and the verdict leave it out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub under_loaded: bool,
}

/// A per-minute (or per-interval) snapshot of a long run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Interval start, seconds since the level began.
    pub t_s: f64,
    /// Requests finished in the interval.
    pub finished: u64,
    /// Successful ones.
    pub ok: u64,
    /// Median TTFT.
    pub ttft_ms_p50: Option<f64>,
    /// Median TPOT.
    pub tpot_ms_p50: Option<f64>,
    /// 95th percentile TPOT.
    pub tpot_ms_p95: Option<f64>,
    /// Output tokens/s in the interval.
    pub output_tokens_per_s: f64,
}

/// The trend of one metric across a long run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    /// Metric (`tpot_ms`, `ttft_ms`).
    pub metric: String,
    /// Fit of per-request values against their finish time (minutes).
    pub fit: LinearFit,
    /// Slope, ms per minute.
    pub slope_ms_per_min: f64,
    /// Half-width of the slope's 95% confidence interval, ms per minute.
    pub slope_ci95_ms_per_min: f64,
    /// Relative change over the run: `slope * duration / level at start`.
    pub change_over_run: f64,
    /// The slope differs from 0 at 95% and the change over the run is at least 10%.
    pub flagged: bool,
}

/// Results of one load level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LevelReport {
    /// Closed-loop concurrency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Open-loop rate, req/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// Requests sent in the measured window (warm-up excluded).
    pub sent: u64,
    /// Successful requests.
    pub ok: u64,
    /// Failed requests (every kind, see `error_kinds`).
    pub errors: u64,
    /// Requests that hit the client timeout.
    pub timeouts: u64,
    /// Failures by kind (`http_503`, `reset`, ...).
    pub error_kinds: BTreeMap<String, u64>,
    /// Timeouts by phase (`headers`, `first_token`, `stream`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub timeout_phases: BTreeMap<String, u64>,
    /// Measured window: the sum over rounds of (last `t_done` - first `t_send`), seconds.
    pub window_s: f64,
    /// Output tokens of successful requests per second of window.
    pub output_tokens_per_s: f64,
    /// Successful requests per second of window.
    pub requests_per_s: f64,
    /// `errors / sent`.
    pub error_rate: f64,
    /// `timeouts / sent`.
    pub timeout_rate: f64,
    /// Requests/s that met every SLO (when SLOs were given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_per_s: Option<f64>,
    /// Fraction of sent requests that met every SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_fraction: Option<f64>,
    /// The load the level really offered (absent: not known, e.g. a report
    /// older than this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reached: Option<ReachedLoad>,
    /// Per-SLO verdicts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_checks: Vec<SloCheck>,
    /// Output tokens of successful requests.
    pub output_tokens_total: u64,
    /// Some successful request had no `usage`: its tokens were counted from events.
    pub output_tokens_estimated: bool,
    /// Fraction of content events that shared their read with another.
    pub shared_read_fraction: f64,
    /// Metric summaries.
    pub metrics: LevelMetrics,
    /// ITL by output position (does decode slow down on long outputs?).
    pub itl_by_position: Vec<PositionBucket>,
    /// Stalls.
    pub stalls: StallReport,
    /// Rounds.
    pub rounds: Vec<RoundReport>,
    /// Spread between rounds.
    pub round_spread: RoundSpread,
    /// How first paints were measured (browser): method -> requests.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub paint_methods: BTreeMap<String, u64>,
    /// Successful requests whose TTFT was taken at the browser's network stack
    /// (`responseStart`: their first token came in the response's first bytes).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ttft_at_network_stack: u64,
    /// Requests by the HTTP version of their answer (`http/1.1`, `h2`), where
    /// known. (Written by the page's main module, not read back: as `transport`.)
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub protocols: BTreeMap<String, u64>,
    /// Requests that opened a new connection and requests that reused one
    /// (where the client knew which).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<ConnectionCounts>,
    /// Quantile curves for CDFs and histograms: metric -> 101 values, the
    /// percentiles p0, p1, ..., p100 (`ttft_ms`, `itl_ms`, `e2e_ms`, `tpot_ms`,
    /// and in the browser `rendered_ttft_ms`, `render_delay_ms`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub quantiles: BTreeMap<String, Vec<f64>>,
    /// A shard's samples, metric by metric, as HdrHistograms (3 significant
    /// digits; [`tokenscope_stats::stats::HistogramData`]), so that `tokenscope
    /// merge` combines shards exactly within the histogram's precision without
    /// their raw files. Only shards' reports carry them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub histograms: BTreeMap<String, tokenscope_stats::stats::HistogramData>,
    /// Per-minute snapshots (long runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub snapshots: Vec<Snapshot>,
    /// Trends across the run (long runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<Drift>,
    /// `usage.prompt_tokens` summed over every request sent in the level
    /// (whatever its outcome).
    #[serde(default)]
    pub usage_prompt_tokens: u64,
    /// `usage.completion_tokens`, summed the same way.
    #[serde(default)]
    pub usage_completion_tokens: u64,
    /// Requests whose prompt the run's tokenizer counted exactly, checked against
    /// their `usage.prompt_tokens` (the count plus the template's overhead).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prompt_tokens_checked: u64,
    /// Of those, the ones whose `usage.prompt_tokens` was something else.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prompt_tokens_differ: u64,
    /// Requests whose generated text the run's local tokenizer counted
    /// (`completion_tokens_counted`) beside a `usage.completion_tokens`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub output_tokens_checked: u64,
    /// Of those, the ones where the two differ (a model's text, tokenized again,
    /// need not be the tokens it generated; a server may count others).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub output_tokens_differ: u64,
    /// Requests sent in the level without a `usage`.
    #[serde(default)]
    pub requests_without_usage: u64,
    /// The prompt tokens of the level's requests whose server said how many it
    /// took from its prefix cache, and those cached tokens; absent: none said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache: Option<PromptCache>,
    /// Where content events carried several tokens: how ITL per token counted
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_tokens: Option<EventTokens>,
    /// Where requests offered tools or asked for a JSON answer: the tool calls
    /// made and the answers valid against their schemas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<Answers>,
    /// Per class of request (a prompts file's `class`), the share that met its
    /// own SLOs; empty when no request had a class.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassReport>,
    /// Per image spec the requests carried (`--images`), smallest first: the
    /// server's prompt and image tokens and TTFT; empty without images.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<crate::model::ImageGroup>,
    /// Per turn of the level's conversations (`--conversation`), first turn
    /// first; empty outside conversations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<TurnReport>,
    /// The level as the server's `/metrics` (and the GPU exporter's) saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerLevel>,
    /// What its tokens cost: dollars (`--price`), energy (a GPU exporter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<super::cost::LevelCost>,
    /// The level's name where it is a group of real users' turns rather than a
    /// load (`all`, `route /api/chat`, `browser Chrome 131`): its label, and what
    /// `compare` matches levels by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// What real users' turns add (`tokenscope collect --report`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rum: Option<super::rum::RumLevel>,
}

impl LevelReport {
    /// The level's server view, if it was scraped.
    pub fn server_view(&self) -> Option<&ServerLevel> {
        self.server.as_ref()
    }

    /// The level's name in tables and comparisons: its group, else its load
    /// (`c=8`, `5 req/s`).
    pub fn label(&self) -> String {
        self.group.clone().unwrap_or_else(|| self.load().label())
    }

    /// A closed-loop level whose client never had its concurrency in flight
    /// ([`ReachedLoad::under_loaded`]): no conclusion across levels uses it.
    pub fn under_loaded(&self) -> bool {
        self.reached.is_some_and(|r| r.under_loaded)
    }

    /// The server's largest count of running requests over the level, where its
    /// `/metrics` was scraped and says it (informative: a server that batches
    /// fewer than the client sends queues the rest).
    pub fn server_running_max(&self) -> Option<f64> {
        use crate::analyze::server::engines::Series;
        self.server
            .as_ref()?
            .series
            .iter()
            .find(|s| s.series == Series::RequestsRunning)?
            .max
    }

    /// The level's load.
    pub fn load(&self) -> Load {
        match (self.concurrency, self.rate_per_s) {
            (Some(c), _) => Load::Concurrency(c),
            (None, Some(r)) => Load::Rate(r),
            (None, None) => Load::Concurrency(0),
        }
    }
}
