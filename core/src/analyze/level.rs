//! One load level: from request records to the level's results (throughput, error
//! and timeout rates, goodput and SLO checks, metric summaries and quantile curves,
//! ITL by output position, stalls), with the round spread ([`super::rounds`]) and
//! long-run snapshots and drift ([`super::long_run`]).
//!
//! [`LevelAccumulator`] takes finished requests one at a time and keeps only
//! summaries (samples up to a cap, then histograms), so memory stays flat however
//! long the run. Every request pushed is counted exactly once as ok, error or
//! timeout: `sent = ok + errors + timeouts`.

use std::collections::BTreeMap;

use super::classes::ClassesAcc;
use super::images::{ImageSample, ImagesAcc};
use super::in_flight::InFlightAcc;
use super::level_samples::LevelSamples;
use super::long_run::{SnapAcc, drift, snapshots};
use super::rounds::{RoundAcc, analyze_rounds};
use crate::analyze::slo::{Slo, SloClass};
use crate::model::{
    Answers, ConnectionCounts, EventTokens, LevelReport, Load, ReasoningDisplay, RunConfig,
    StallReport,
};
use tokenscope_measure::metrics::{MetricOptions, RequestMetrics};
use tokenscope_measure::record::{Outcome, PaintMethod, RequestRecord};
use tokenscope_stats::stats::{self, Samples};

pub use super::level_samples::{POSITION_BUCKETS, QUANTILE_POINTS};

/// Options for a level's analysis.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelOptions {
    /// SLOs for goodput and capacity.
    pub slos: Vec<Slo>,
    /// Classes of requests held to their own SLOs for goodput (`--slo-class`).
    pub slo_classes: Vec<SloClass>,
    /// Every request offered tools or asked for a JSON answer: its answer was
    /// checked (`config.answer`).
    pub answers: bool,
    /// Events' tokens, where counted, came from the run's tokenizer file (no
    /// `--continuous-usage` asked the server for them).
    pub events_tokenized: bool,
    /// Metric options (stall threshold).
    pub metric: MetricOptions,
    /// Exact samples kept per metric before switching to a histogram.
    pub sample_cap: usize,
    /// Snapshot interval for long runs, ms (`None`: no snapshots).
    pub snapshot_interval_ms: Option<f64>,
    /// Tokens the server adds around a prompt (`config.tokens`): a request's
    /// `usage.prompt_tokens` should be its counted prompt plus this.
    pub template_overhead: Option<i64>,
    /// Carry the samples' histograms in the report (a shard's: they merge).
    pub histograms: bool,
}

impl Default for LevelOptions {
    fn default() -> Self {
        Self {
            slos: Vec::new(),
            slo_classes: Vec::new(),
            answers: false,
            events_tokenized: false,
            metric: MetricOptions::default(),
            sample_cap: stats::DEFAULT_SAMPLE_CAP,
            snapshot_interval_ms: None,
            template_overhead: None,
            histograms: false,
        }
    }
}

impl LevelOptions {
    /// The options a run's configuration implies. The native engine, the page and
    /// the raw rebuild all take them from here, so a rebuilt level is analysed
    /// exactly as the measured one was.
    pub fn from_config(cfg: &RunConfig) -> Self {
        Self {
            slos: cfg.slos.clone(),
            slo_classes: cfg.slo_classes.clone(),
            answers: cfg.answer.is_some(),
            events_tokenized: !cfg.continuous_usage
                && cfg.tokens.as_ref().is_some_and(|t| t.method == "file"),
            metric: MetricOptions {
                stall_threshold_ms: cfg.stall_threshold_ms,
                paint_follows_answer: cfg.reasoning_display == Some(ReasoningDisplay::Hidden),
            },
            sample_cap: cfg
                .sample_cap
                .map_or(stats::DEFAULT_SAMPLE_CAP, |c| c as usize),
            snapshot_interval_ms: cfg.snapshot_interval_s.map(|s| s * 1000.0),
            template_overhead: cfg
                .tokens
                .as_ref()
                .filter(|t| t.exact)
                .and_then(|t| t.template_overhead),
            histograms: cfg.shard.is_some(),
        }
    }
}

/// Collects one level's finished requests.
#[derive(Debug, Clone)]
pub struct LevelAccumulator {
    load: Load,
    opts: LevelOptions,
    rounds: Vec<RoundAcc>,
    in_flight: InFlightAcc,
    samples: LevelSamples,
    ttft_at_network_stack: u64,
    sent: u64,
    ok: u64,
    errors: u64,
    timeouts: u64,
    error_kinds: BTreeMap<String, u64>,
    timeout_phases: BTreeMap<String, u64>,
    goodput: u64,
    tokens_total: u64,
    estimated: bool,
    token_events: u64,
    /// Successful requests with tokens per event counted by the server, by
    /// the run's tokenizer, and spread.
    event_tokens: (u64, u64, u64),
    shared_events: u64,
    stall_count: u64,
    stall_requests: u64,
    longest_gap: Option<f64>,
    paint_methods: BTreeMap<String, u64>,
    protocols: BTreeMap<String, u64>,
    connections: Option<ConnectionCounts>,
    t_level_start: Option<f64>,
    snapshots: BTreeMap<u64, SnapAcc>,
    /// `usage` summed: prompt tokens, completion tokens, requests without one.
    usage: (u64, u64, u64),
    /// Requests whose counted prompt was checked against `usage`, and those whose
    /// `usage.prompt_tokens` was not the count plus the template's overhead.
    prompt_check: (u64, u64),
    /// Requests whose output the run's tokenizer counted beside a `usage`, and
    /// those where the two differ.
    output_check: (u64, u64),
    /// Conversation turns and prefix-cache counts.
    turns: super::turns::TurnsAcc,
    /// Tool calls and answers checked against their schemas.
    answers: Option<Answers>,
    /// Requests per class, and those that met their class's SLOs.
    classes: ClassesAcc,
    images: ImagesAcc,
}

impl LevelAccumulator {
    /// Start a level.
    pub fn new(load: Load, opts: LevelOptions) -> Self {
        Self {
            load,
            rounds: Vec::new(),
            in_flight: InFlightAcc::default(),
            samples: LevelSamples::new(opts.sample_cap),
            ttft_at_network_stack: 0,
            sent: 0,
            ok: 0,
            errors: 0,
            timeouts: 0,
            error_kinds: BTreeMap::new(),
            timeout_phases: BTreeMap::new(),
            goodput: 0,
            tokens_total: 0,
            estimated: false,
            token_events: 0,
            event_tokens: (0, 0, 0),
            answers: None,
            classes: ClassesAcc::default(),
            images: ImagesAcc::default(),
            shared_events: 0,
            stall_count: 0,
            stall_requests: 0,
            longest_gap: None,
            paint_methods: BTreeMap::new(),
            protocols: BTreeMap::new(),
            connections: None,
            t_level_start: None,
            snapshots: BTreeMap::new(),
            usage: (0, 0, 0),
            prompt_check: (0, 0),
            output_check: (0, 0),
            turns: Default::default(),
            opts,
        }
    }

    /// The level's load.
    pub fn load(&self) -> Load {
        self.load
    }

    /// Requests pushed so far (`sent`).
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Successful requests so far.
    pub fn ok(&self) -> u64 {
        self.ok
    }

    /// Set the level's start (for snapshot intervals); defaults to the first send seen.
    pub fn set_start(&mut self, t_ms: f64) {
        self.t_level_start = Some(t_ms);
    }

    /// Add one finished request of round `round` (0-based). Returns its metrics.
    pub fn push(&mut self, round: usize, r: &RequestRecord) -> RequestMetrics {
        let m = RequestMetrics::from_record(r, &self.opts.metric);
        let t_ref = r.t_reference_ms();
        let t_done = r.t_done_ms.unwrap_or(t_ref);
        if self.t_level_start.is_none() {
            self.t_level_start = Some(t_ref);
        }
        if self.rounds.len() <= round {
            self.rounds.resize_with(round + 1, RoundAcc::default);
        }
        let ra = &mut self.rounds[round];
        ra.sent += 1;
        ra.t_first_send = Some(ra.t_first_send.map_or(t_ref, |t| t.min(t_ref)));
        ra.t_last_done = Some(ra.t_last_done.map_or(t_done, |t| t.max(t_done)));
        self.sent += 1;
        if let Some(class) = &r.class {
            self.classes.sent(class);
        }
        if let Some(images) = &r.images {
            self.images.sent(images);
        }
        self.in_flight.push(round, r);
        if let Some(lag) = m.client_lag_ms {
            self.samples.lag.push(lag);
        }
        let snap = self.opts.snapshot_interval_ms.map(|iv| {
            let start = self.t_level_start.unwrap_or(t_ref);
            ((t_done - start).max(0.0) / iv).floor() as u64
        });
        if let Some(idx) = snap {
            self.snapshots.entry(idx).or_default().finished += 1;
        }
        match r.usage {
            Some(u) => {
                self.usage.0 += u.prompt_tokens.unwrap_or(0);
                self.usage.1 += u.completion_tokens.unwrap_or(0);
            }
            None => self.usage.2 += 1,
        }
        // A prompt with images: the server's count less the text's is the
        // images' tokens, not a tokenizer that counts differently.
        if let (Some(sent), Some(overhead), Some(used)) = (
            r.prompt_tokens_sent,
            self.opts.template_overhead,
            r.usage.and_then(|u| u.prompt_tokens),
        ) && r.images.is_none()
        {
            self.prompt_check.0 += 1;
            if used as i64 != sent as i64 + overhead {
                self.prompt_check.1 += 1;
            }
        }
        if let (Some(counted), Some(used)) = (
            r.completion_tokens_counted,
            r.usage.and_then(|u| u.completion_tokens),
        ) {
            self.output_check.0 += 1;
            if counted != used {
                self.output_check.1 += 1;
            }
        }
        self.turns.push(r, &m, self.opts.sample_cap);
        self.push_transport(r);
        match &r.outcome {
            Outcome::Ok => {}
            Outcome::Error { kind, .. } => {
                self.errors += 1;
                *self.error_kinds.entry(kind.key()).or_default() += 1;
                return m;
            }
            Outcome::Timeout { phase } => {
                self.timeouts += 1;
                let key = serde_json::to_value(phase)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                *self.timeout_phases.entry(key).or_default() += 1;
                return m;
            }
        }
        self.ok += 1;
        let ra = &mut self.rounds[round];
        ra.ok += 1;
        ra.tokens += m.output_tokens;
        push_opt(&mut ra.ttft, m.ttft_ms);
        push_opt(&mut ra.tpot, m.tpot_ms);
        push_opt(&mut ra.e2e, m.e2e_ms);
        if let Some(idx) = snap {
            let s = self.snapshots.entry(idx).or_default();
            s.ok += 1;
            s.tokens += m.output_tokens;
            push_opt(&mut s.ttft, m.ttft_ms);
            push_opt(&mut s.tpot, m.tpot_ms);
        }
        self.tokens_total += m.output_tokens;
        self.estimated |= m.tokens_estimated;
        self.token_events += r.token_events_ms.len() as u64;
        if !r.event_tokens.is_empty() && self.opts.events_tokenized {
            self.event_tokens.1 += 1;
        } else if !r.event_tokens.is_empty() {
            self.event_tokens.0 += 1;
        } else if m.output_tokens > r.token_events_ms.len() as u64 {
            self.event_tokens.2 += 1;
        }
        self.shared_events += u64::from(r.shared_read_events);
        if self.opts.answers {
            let a = self.answers.get_or_insert_with(Answers::default);
            a.add(&r.answer());
        }
        push_samples(&mut self.samples.ttft, m.ttft_ms);
        match m.prompt_cached {
            Some(true) => push_samples(&mut self.samples.ttft_cached, m.ttft_ms),
            Some(false) => push_samples(&mut self.samples.ttft_uncached, m.ttft_ms),
            None => {}
        }
        push_samples(&mut self.samples.tpot, m.tpot_ms);
        push_samples(&mut self.samples.e2e, m.e2e_ms);
        push_samples(&mut self.samples.headers, m.time_to_headers_ms);
        push_samples(&mut self.samples.first_byte, m.time_to_first_byte_ms);
        push_samples(&mut self.samples.decode_rate, m.decode_rate_tok_per_s);
        self.samples.out_tokens.push(m.output_tokens as f64);
        push_samples(&mut self.samples.rendered, m.rendered_ttft_ms);
        push_samples(&mut self.samples.render_delay, m.render_delay_ms);
        push_samples(&mut self.samples.send, m.browser_send_ms);
        push_samples(&mut self.samples.first_answer, m.time_to_first_answer_ms);
        push_samples(
            &mut self.samples.first_tool_call,
            m.time_to_first_tool_call_ms,
        );
        push_samples(
            &mut self.samples.reasoning,
            m.reasoning_tokens.map(|n| n as f64),
        );
        push_samples(&mut self.samples.delivery, m.browser_delivery_ms);
        if m.ttft_at_network_stack {
            self.ttft_at_network_stack += 1;
        }
        if let Some(t) = r.server_timings {
            push_samples(&mut self.samples.server_tpot, t.predicted_per_token_ms);
            push_samples(&mut self.samples.server_prompt, t.prompt_ms);
        }
        if let Some(method) = r.paint_method {
            let key = match method {
                PaintMethod::ElementTiming => "element_timing",
                PaintMethod::RequestAnimationFrame => "request_animation_frame",
            };
            *self.paint_methods.entry(key.to_owned()).or_default() += 1;
        }
        for g in &m.gaps {
            self.samples.itl.push(g.ms);
            self.samples.itl_per_token.push(g.per_token_ms);
            if let Some(b) = POSITION_BUCKETS
                .iter()
                .position(|(from, to)| g.position >= *from && to.is_none_or(|t| g.position <= t))
            {
                self.samples.positions[b].push(g.ms);
            }
        }
        self.stall_count += u64::from(m.stalls);
        if m.stalls > 0 {
            self.stall_requests += 1;
        }
        if let Some(l) = m.longest_gap_ms {
            self.longest_gap = Some(self.longest_gap.map_or(l, |x| x.max(l)));
            self.samples.max_gap.push(l);
        }
        let class = r.class.as_deref();
        let slos = SloClass::slos_for(&self.opts.slo_classes, class, &self.opts.slos);
        let met = slos.iter().all(|slo| slo.request_meets(&m));
        self.goodput += u64::from(met);
        if let Some(class) = class {
            self.classes.ok(class, met);
        }
        if let Some(images) = &r.images {
            let used = r.usage.and_then(|u| u.prompt_tokens);
            let text = r.prompt_tokens_sent.zip(self.opts.template_overhead);
            self.images.ok(
                images,
                ImageSample {
                    prompt_tokens: used,
                    image_tokens: used.zip(text).map(|(u, (s, o))| u as i64 - s as i64 - o),
                    ttft_ms: m.ttft_ms,
                },
            );
        }
        m
    }

    /// The request's HTTP version and connection (any outcome: a failed request
    /// that got a connection set it up too).
    fn push_transport(&mut self, r: &RequestRecord) {
        if let Some(p) = &r.protocol {
            *self.protocols.entry(p.clone()).or_default() += 1;
        }
        if let Some(c) = r.connection {
            let counts = self.connections.get_or_insert_default();
            if c.new {
                counts.new += 1;
            } else {
                counts.reused += 1;
            }
            // Any request that waited for a setup: the one that opened the
            // connection, and HTTP/2 streams sent while it was being set up.
            push_samples(&mut self.samples.connection_setup, c.setup_ms);
        }
    }

    /// The level's results.
    pub fn finish(self) -> LevelReport {
        let window_ms: f64 = self
            .rounds
            .iter()
            .filter_map(|r| Some(r.t_last_done? - r.t_first_send?))
            .sum();
        let window_s = window_ms / 1000.0;
        let per_s = |n: u64| {
            if window_s > 0.0 {
                n as f64 / window_s
            } else {
                0.0
            }
        };
        let sent_f = self.sent.max(1) as f64;
        let metrics = self.samples.metrics();
        let slo_checks = self.samples.slo_checks(&metrics, &self.opts.slos);
        let has_slos = !self.opts.slos.is_empty() || !self.opts.slo_classes.is_empty();
        let (prompt_cache, turns) = self.turns.finish();
        let (rounds, round_spread) = analyze_rounds(&self.rounds);
        let snapshots = snapshots(&self.snapshots, self.opts.snapshot_interval_ms);
        let drift = drift(&snapshots);
        let (concurrency, rate_per_s) = match self.load {
            Load::Concurrency(c) => (Some(c), None),
            Load::Rate(r) => (None, Some(r)),
        };
        let histograms = if self.opts.histograms {
            self.samples.histograms()
        } else {
            BTreeMap::new()
        };
        LevelReport {
            quantiles: self.samples.quantiles(),
            histograms,
            concurrency,
            rate_per_s,
            sent: self.sent,
            ok: self.ok,
            errors: self.errors,
            timeouts: self.timeouts,
            error_kinds: self.error_kinds,
            timeout_phases: self.timeout_phases,
            window_s,
            output_tokens_per_s: per_s(self.tokens_total),
            requests_per_s: per_s(self.ok),
            error_rate: self.errors as f64 / sent_f,
            timeout_rate: self.timeouts as f64 / sent_f,
            goodput_per_s: has_slos.then(|| per_s(self.goodput)),
            goodput_fraction: has_slos.then(|| self.goodput as f64 / sent_f),
            reached: self.in_flight.finish(self.load),
            slo_checks,
            output_tokens_total: self.tokens_total,
            output_tokens_estimated: self.estimated,
            shared_read_fraction: if self.token_events > 0 {
                self.shared_events as f64 / self.token_events as f64
            } else {
                0.0
            },
            metrics,
            itl_by_position: self.samples.positions(),
            stalls: StallReport {
                threshold_ms: self.opts.metric.stall_threshold_ms,
                count: self.stall_count,
                requests: self.stall_requests,
                longest_ms: self.longest_gap,
            },
            rounds,
            round_spread,
            paint_methods: self.paint_methods,
            ttft_at_network_stack: self.ttft_at_network_stack,
            protocols: self.protocols,
            connections: self.connections,
            snapshots,
            drift,
            usage_prompt_tokens: self.usage.0,
            usage_completion_tokens: self.usage.1,
            requests_without_usage: self.usage.2,
            prompt_tokens_checked: self.prompt_check.0,
            prompt_tokens_differ: self.prompt_check.1,
            output_tokens_checked: self.output_check.0,
            output_tokens_differ: self.output_check.1,
            prompt_cache,
            event_tokens: (self.event_tokens != (0, 0, 0)).then(|| EventTokens {
                counted: self.event_tokens.0,
                tokenized: self.event_tokens.1,
                spread: self.event_tokens.2,
                tokens_per_event: self.tokens_total as f64 / self.token_events.max(1) as f64,
            }),
            answers: self.answers.map(Answers::finished),
            classes: self.classes.finish(&self.opts.slo_classes, &self.opts.slos),
            images: self.images.finish(),
            turns,
            server: None,
            cost: None,
            group: None,
            rum: None,
        }
    }
}

fn push_opt(v: &mut Vec<f64>, x: Option<f64>) {
    if let Some(x) = x {
        v.push(x);
    }
}

fn push_samples(s: &mut Samples, x: Option<f64>) {
    if let Some(x) = x {
        s.push(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use tokenscope_measure::record::{ErrorKind, TimeoutPhase};

    #[test]
    fn ttft_splits_by_what_the_prefix_cache_served() {
        use tokenscope_measure::openai::{PromptTokensDetails, Usage};
        let with_cache = |ttft: f64, cached: Option<u64>| {
            let mut r = testing::record(0.0, ttft, 10.0, 4);
            r.usage = Some(Usage {
                prompt_tokens: Some(100),
                completion_tokens: Some(4),
                prompt_tokens_details: cached.map(|c| PromptTokensDetails {
                    cached_tokens: Some(c),
                }),
                ..Usage::default()
            });
            r
        };
        let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
        // Half or more of the prompt cached: cached; less: uncached; unsaid: neither.
        for r in [
            with_cache(20.0, Some(50)),
            with_cache(30.0, Some(99)),
            with_cache(200.0, Some(49)),
            with_cache(300.0, Some(0)),
            with_cache(999.0, None),
        ] {
            acc.push(0, &r);
        }
        let l = acc.finish();
        let cached = l.metrics.ttft_cached_ms.unwrap();
        let uncached = l.metrics.ttft_uncached_ms.unwrap();
        assert_eq!((cached.count, cached.max), (2, Some(30.0)));
        assert_eq!((uncached.count, uncached.min), (2, Some(200.0)));
        assert_eq!(l.metrics.ttft_ms.count, 5);
        // A level whose server said nothing has no split.
        let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
        acc.push(0, &testing::record(0.0, 20.0, 10.0, 4));
        let l = acc.finish();
        assert!(l.metrics.ttft_cached_ms.is_none() && l.metrics.ttft_uncached_ms.is_none());
    }

    #[test]
    fn counts_add_up_and_throughput_uses_the_window() {
        let mut acc = LevelAccumulator::new(Load::Concurrency(2), LevelOptions::default());
        // Round 0: two requests, window 0 .. 1000+? ms.
        acc.push(0, &testing::record(0.0, 100.0, 10.0, 10)); // done at 191
        acc.push(0, &testing::record(0.0, 100.0, 10.0, 10));
        acc.push(0, &testing::failed(0.0, ErrorKind::Http(503)));
        acc.push(0, &testing::timed_out(0.0, TimeoutPhase::Stream));
        let l = acc.finish();
        assert_eq!((l.sent, l.ok, l.errors, l.timeouts), (4, 2, 1, 1));
        assert_eq!(l.sent, l.ok + l.errors + l.timeouts);
        assert_eq!(l.error_kinds.get("http_503"), Some(&1));
        assert_eq!(l.timeout_phases.get("stream"), Some(&1));
        assert!((l.window_s - 0.191).abs() < 1e-9);
        assert!((l.output_tokens_per_s - 20.0 / 0.191).abs() < 1e-6);
        assert_eq!(l.metrics.ttft_ms.p50, Some(100.0));
        assert_eq!(
            l.metrics.ttft_ms.count, 2,
            "failed requests are not in latency summaries"
        );
        assert_eq!(l.metrics.itl_ms.count, 18);
        assert_eq!(l.error_rate, 0.25);
        assert_eq!(l.goodput_per_s, None);
    }

    #[test]
    fn goodput_and_slo_checks() {
        let slos = Slo::parse_list("ttft_ms:p50<=150,tpot_ms:p95<=50").unwrap();
        let mut acc = LevelAccumulator::new(
            Load::Concurrency(1),
            LevelOptions {
                slos: slos.clone(),
                ..LevelOptions::default()
            },
        );
        for i in 0..4 {
            let t = 1000.0 * f64::from(i);
            acc.push(0, &testing::record(t, 100.0, 10.0, 5)); // meets
            acc.push(0, &testing::record(t + 200.0, 200.0, 10.0, 5)); // TTFT too slow
            acc.push(0, &testing::record(t + 500.0, 100.0, 60.0, 5)); // TPOT too slow
        }
        let l = acc.finish();
        assert!((l.goodput_fraction.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(l.slo_checks[0].value_ms, Some(100.0));
        assert!(l.slo_checks[0].met);
        assert_eq!(l.slo_checks[0].not_evaluable, None);
        // 12 requests cannot carry a p95 (it needs 100): not met, and said why.
        assert!(!l.slo_checks[1].met);
        assert_eq!(
            l.slo_checks[1].not_evaluable.as_deref(),
            Some("12 successful requests: a p95 needs 100 (run --requests 100 or more)")
        );
    }

    #[test]
    fn turns_and_the_prefix_cache_as_the_server_said() {
        use tokenscope_measure::openai::{PromptTokensDetails, ServerTimings};
        let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
        let turn = |t0: f64, ttft: f64, turn: u32, prompt: u64, cached: Option<u64>| {
            let mut r = testing::record(t0, ttft, 10.0, 4);
            r.turn = Some(turn);
            r.session = Some(0);
            if let Some(u) = r.usage.as_mut() {
                u.prompt_tokens = Some(prompt);
            }
            r.server_timings = cached.map(|c| ServerTimings {
                cache_n: Some(c),
                ..ServerTimings::default()
            });
            r
        };
        acc.push(0, &turn(0.0, 100.0, 1, 100, Some(0)));
        acc.push(0, &turn(1000.0, 40.0, 2, 300, Some(200)));
        acc.push(0, &turn(2000.0, 110.0, 1, 100, None));
        // usage's own figure wins over the timings'.
        let mut r = turn(3000.0, 50.0, 2, 300, Some(1));
        r.usage.as_mut().unwrap().prompt_tokens_details = Some(PromptTokensDetails {
            cached_tokens: Some(250),
        });
        acc.push(0, &r);
        acc.push(0, &testing::failed(4000.0, ErrorKind::Http(503)));
        let l = acc.finish();
        assert_eq!(l.turns.len(), 2);
        let (t1, t2) = (&l.turns[0], &l.turns[1]);
        assert_eq!((t1.turn, t1.sent, t1.ok), (1, 2, 2));
        assert_eq!((t2.turn, t2.sent, t2.ok), (2, 2, 2));
        assert_eq!(t1.ttft_ms.p50, Some(105.0));
        assert_eq!(t2.ttft_ms.p50, Some(45.0));
        assert_eq!(t2.prompt_tokens.unwrap().p50, Some(300.0));
        let c1 = t1.prompt_cache.unwrap();
        assert_eq!(
            (c1.requests, c1.prompt_tokens, c1.cached_tokens),
            (1, 100, 0)
        );
        let c2 = t2.prompt_cache.unwrap();
        assert_eq!(
            (c2.requests, c2.prompt_tokens, c2.cached_tokens),
            (2, 600, 450)
        );
        assert_eq!(c2.cached_fraction(), Some(0.75));
        let all = l.prompt_cache.unwrap();
        assert_eq!(
            (all.requests, all.prompt_tokens, all.cached_tokens),
            (3, 700, 450)
        );
        // Outside conversations: no turns, and no cache without the server saying.
        let plain = testing::level(Load::Concurrency(1), &[testing::record(0.0, 1.0, 1.0, 2)]);
        assert!(plain.turns.is_empty() && plain.prompt_cache.is_none());
    }

    #[test]
    fn itl_by_position_buckets() {
        let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
        // 300 tokens, gaps grow with position: position p has gap p/10 ms.
        let mut events = vec![0.0];
        for p in 2..=300u32 {
            events.push(events.last().unwrap() + f64::from(p) / 10.0);
        }
        let mut r = testing::record(0.0, 0.0, 1.0, 300);
        r.token_events_ms = events;
        acc.push(0, &r);
        let l = acc.finish();
        let b = &l.itl_by_position;
        assert_eq!(b[0].itl_ms.count, 63); // positions 2..=64
        assert_eq!(b[1].itl_ms.count, 192); // 65..=256
        assert_eq!(b[2].itl_ms.count, 44); // 257..=300
        assert!(b[0].itl_ms.p50.unwrap() < b[1].itl_ms.p50.unwrap());
        assert!(b[1].itl_ms.p50.unwrap() < b[2].itl_ms.p50.unwrap());
    }
}
