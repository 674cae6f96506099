//! From request records to level and sweep results: throughput, error and timeout
//! rates, goodput, round spread, ITL by output position, stalls, long-run snapshots
//! and drift, the knee and the SLO capacity.
//!
//! [`LevelAccumulator`] takes finished requests one at a time and keeps only
//! summaries (samples up to a cap, then histograms), so memory stays flat however
//! long the run. Every request pushed is counted exactly once as ok, error or
//! timeout: `sent = ok + errors + timeouts`.
//!
//! ## The knee
//!
//! For consecutive levels `i -> i+1` with output throughput `X` and p95 E2E latency
//! `L`, the *elasticity* is `ln(L[i+1] / L[i]) / ln(X[i+1] / X[i])` (infinite when
//! throughput did not grow). The knee is the first level `i` after which latency
//! grows faster than throughput in relative terms (elasticity > 1) by a margin that
//! is not noise (`L` grows by at least 10%). Past it, added load buys queueing, not
//! throughput: it is the most load one can promise.
//!
//! ## SLO capacity
//!
//! The highest-throughput level at which every SLO's percentile is within its
//! bound and at most 1% of requests failed or timed out.
//!
//! ## Round outliers
//!
//! With 3 or more rounds, a round is flagged on a figure (TTFT/TPOT/E2E median,
//! throughput) when it is more than 2x above or below the median of all rounds (the
//! median, unlike the mean of the others, is not dragged by the outlier itself)
//! (and, for latencies, at least 2 ms away from it, so sub-millisecond noise is not
//! flagged). With 2 rounds the level is flagged when one is more than 2x the other.

use std::collections::BTreeMap;

use crate::metrics::{MetricOptions, RequestMetrics};
use crate::report::{
    Drift, Knee, LevelMetrics, LevelReport, Load, PositionBucket, RoundReport, RoundSpread,
    SloCapacity, SloCheck, Snapshot, Spread, StallReport, SweepReport,
};
use crate::slo::{Slo, SloMetric};
use crate::stats::{self, LinearFit, Samples, Summary};
use crate::timeline::{Outcome, PaintMethod, RequestRecord};

/// Output-position buckets for ITL: tokens 1-64, 65-256, 257 and on.
pub const POSITION_BUCKETS: [(u64, Option<u64>); 3] = [(1, Some(64)), (65, Some(256)), (257, None)];

/// Points of the quantile curves kept per metric (p0..p100).
pub const QUANTILE_POINTS: usize = 101;

/// Minimum latency difference for a round to count as an outlier, ms.
const ROUND_OUTLIER_FLOOR_MS: f64 = 2.0;

/// Options for a level's analysis.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelOptions {
    /// SLOs for goodput and capacity.
    pub slos: Vec<Slo>,
    /// Metric options (stall threshold).
    pub metric: MetricOptions,
    /// Exact samples kept per metric before switching to a histogram.
    pub sample_cap: usize,
    /// Snapshot interval for long runs, ms (`None`: no snapshots).
    pub snapshot_interval_ms: Option<f64>,
}

impl Default for LevelOptions {
    fn default() -> Self {
        Self {
            slos: Vec::new(),
            metric: MetricOptions::default(),
            sample_cap: stats::DEFAULT_SAMPLE_CAP,
            snapshot_interval_ms: None,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct RoundAcc {
    sent: u64,
    ok: u64,
    ttft: Vec<f64>,
    tpot: Vec<f64>,
    e2e: Vec<f64>,
    tokens: u64,
    t_first_send: Option<f64>,
    t_last_done: Option<f64>,
}

#[derive(Debug, Clone, Default)]
struct SnapAcc {
    finished: u64,
    ok: u64,
    ttft: Vec<f64>,
    tpot: Vec<f64>,
    tokens: u64,
}

/// Collects one level's finished requests.
#[derive(Debug, Clone)]
pub struct LevelAccumulator {
    load: Load,
    opts: LevelOptions,
    rounds: Vec<RoundAcc>,
    ttft: Samples,
    tpot: Samples,
    itl: Samples,
    itl_per_token: Samples,
    e2e: Samples,
    headers: Samples,
    first_byte: Samples,
    decode_rate: Samples,
    out_tokens: Samples,
    rendered: Samples,
    render_delay: Samples,
    lag: Samples,
    server_tpot: Samples,
    server_prompt: Samples,
    positions: Vec<Samples>,
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
    shared_events: u64,
    stall_count: u64,
    stall_requests: u64,
    longest_gap: Option<f64>,
    paint_methods: BTreeMap<String, u64>,
    t_level_start: Option<f64>,
    snapshots: BTreeMap<u64, SnapAcc>,
}

impl LevelAccumulator {
    /// Start a level.
    pub fn new(load: Load, opts: LevelOptions) -> Self {
        let cap = opts.sample_cap;
        let s = || Samples::with_cap(cap);
        Self {
            load,
            rounds: Vec::new(),
            ttft: s(),
            tpot: s(),
            itl: s(),
            itl_per_token: s(),
            e2e: s(),
            headers: s(),
            first_byte: s(),
            decode_rate: s(),
            out_tokens: s(),
            rendered: s(),
            render_delay: s(),
            lag: s(),
            server_tpot: s(),
            server_prompt: s(),
            positions: POSITION_BUCKETS.iter().map(|_| s()).collect(),
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
            shared_events: 0,
            stall_count: 0,
            stall_requests: 0,
            longest_gap: None,
            paint_methods: BTreeMap::new(),
            t_level_start: None,
            snapshots: BTreeMap::new(),
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
        if let Some(lag) = m.client_lag_ms {
            self.lag.push(lag);
        }
        let snap = self.opts.snapshot_interval_ms.map(|iv| {
            let start = self.t_level_start.unwrap_or(t_ref);
            ((t_done - start).max(0.0) / iv).floor() as u64
        });
        if let Some(idx) = snap {
            self.snapshots.entry(idx).or_default().finished += 1;
        }
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
        self.shared_events += u64::from(r.shared_read_events);
        push_samples(&mut self.ttft, m.ttft_ms);
        push_samples(&mut self.tpot, m.tpot_ms);
        push_samples(&mut self.e2e, m.e2e_ms);
        push_samples(&mut self.headers, m.time_to_headers_ms);
        push_samples(&mut self.first_byte, m.time_to_first_byte_ms);
        push_samples(&mut self.decode_rate, m.decode_rate_tok_per_s);
        self.out_tokens.push(m.output_tokens as f64);
        push_samples(&mut self.rendered, m.rendered_ttft_ms);
        push_samples(&mut self.render_delay, m.render_delay_ms);
        if let Some(t) = r.server_timings {
            push_samples(&mut self.server_tpot, t.predicted_per_token_ms);
            push_samples(&mut self.server_prompt, t.prompt_ms);
        }
        if let Some(method) = r.paint_method {
            let key = match method {
                PaintMethod::ElementTiming => "element_timing",
                PaintMethod::RequestAnimationFrame => "request_animation_frame",
            };
            *self.paint_methods.entry(key.to_owned()).or_default() += 1;
        }
        for g in &m.gaps {
            self.itl.push(g.ms);
            self.itl_per_token.push(g.per_token_ms);
            if let Some(b) = POSITION_BUCKETS
                .iter()
                .position(|(from, to)| g.position >= *from && to.is_none_or(|t| g.position <= t))
            {
                self.positions[b].push(g.ms);
            }
        }
        self.stall_count += u64::from(m.stalls);
        if m.stalls > 0 {
            self.stall_requests += 1;
        }
        if let Some(l) = m.longest_gap_ms {
            self.longest_gap = Some(self.longest_gap.map_or(l, |x| x.max(l)));
        }
        if self.opts.slos.iter().all(|slo| slo.request_meets(&m)) {
            self.goodput += 1;
        }
        m
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
        let metrics = LevelMetrics {
            ttft_ms: self.ttft.summary(),
            tpot_ms: self.tpot.summary(),
            itl_ms: self.itl.summary(),
            itl_per_token_ms: self.itl_per_token.summary(),
            e2e_ms: self.e2e.summary(),
            time_to_headers_ms: self.headers.summary(),
            time_to_first_byte_ms: self.first_byte.summary(),
            decode_rate_tok_per_s: self.decode_rate.summary(),
            output_tokens: self.out_tokens.summary(),
            rendered_ttft_ms: nonempty(&self.rendered),
            render_delay_ms: nonempty(&self.render_delay),
            client_lag_ms: nonempty(&self.lag),
            server_tpot_ms: nonempty(&self.server_tpot),
            server_prompt_ms: nonempty(&self.server_prompt),
        };
        let slo_checks: Vec<SloCheck> = self
            .opts
            .slos
            .iter()
            .map(|slo| {
                let value = level_percentile(&metrics, &self.itl, &self.rendered, slo);
                SloCheck {
                    slo: slo.label(),
                    value_ms: value,
                    met: value.is_some_and(|v| v <= slo.max_ms),
                }
            })
            .collect();
        let has_slos = !self.opts.slos.is_empty();
        let (rounds, round_spread) = analyze_rounds(&self.rounds);
        let snapshots = snapshots(&self.snapshots, self.opts.snapshot_interval_ms);
        let drift = drift(&snapshots);
        let (concurrency, rate_per_s) = match self.load {
            Load::Concurrency(c) => (Some(c), None),
            Load::Rate(r) => (None, Some(r)),
        };
        let mut quantiles = BTreeMap::new();
        for (name, s) in [
            ("ttft_ms", &self.ttft),
            ("tpot_ms", &self.tpot),
            ("itl_ms", &self.itl),
            ("e2e_ms", &self.e2e),
            ("rendered_ttft_ms", &self.rendered),
            ("render_delay_ms", &self.render_delay),
        ] {
            let curve = s.quantile_curve(QUANTILE_POINTS);
            if !curve.is_empty() {
                quantiles.insert(name.to_owned(), curve);
            }
        }
        LevelReport {
            quantiles,
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
            slo_checks,
            output_tokens_total: self.tokens_total,
            output_tokens_estimated: self.estimated,
            shared_read_fraction: if self.token_events > 0 {
                self.shared_events as f64 / self.token_events as f64
            } else {
                0.0
            },
            metrics,
            itl_by_position: POSITION_BUCKETS
                .iter()
                .zip(&self.positions)
                .map(|((from, to), s)| PositionBucket {
                    from: *from,
                    to: *to,
                    itl_ms: s.summary(),
                })
                .collect(),
            stalls: StallReport {
                threshold_ms: self.opts.metric.stall_threshold_ms,
                count: self.stall_count,
                requests: self.stall_requests,
                longest_ms: self.longest_gap,
            },
            rounds,
            round_spread,
            paint_methods: self.paint_methods,
            snapshots,
            drift,
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

fn nonempty(s: &Samples) -> Option<Summary> {
    (!s.is_empty()).then(|| s.summary())
}

/// The level's value of an SLO's percentile. Standard percentiles come from the
/// summaries; any other percentile is computed from the exact samples.
fn level_percentile(m: &LevelMetrics, itl: &Samples, rendered: &Samples, slo: &Slo) -> Option<f64> {
    let summary = match slo.metric {
        SloMetric::TtftMs => &m.ttft_ms,
        SloMetric::TpotMs => &m.tpot_ms,
        SloMetric::ItlMs => &m.itl_ms,
        SloMetric::E2eMs => &m.e2e_ms,
        SloMetric::RenderedTtftMs => return rendered_pct(m, rendered, slo.percentile),
    };
    let key = pct_key(slo.percentile);
    match key {
        Some(k) => summary.get(k),
        None => {
            // Non-standard percentile: only ITL keeps its samples accessible here.
            if slo.metric == SloMetric::ItlMs {
                stats::percentile(itl.values(), slo.percentile / 100.0)
            } else {
                summary.get("p95")
            }
        }
    }
}

fn rendered_pct(m: &LevelMetrics, rendered: &Samples, pct: f64) -> Option<f64> {
    match pct_key(pct) {
        Some(k) => m.rendered_ttft_ms.as_ref().and_then(|s| s.get(k)),
        None => stats::percentile(rendered.values(), pct / 100.0),
    }
}

fn pct_key(pct: f64) -> Option<&'static str> {
    stats::QUANTILES
        .iter()
        .find(|(_, q)| (q * 100.0 - pct).abs() < 1e-9)
        .map(|(k, _)| *k)
}

fn analyze_rounds(rounds: &[RoundAcc]) -> (Vec<RoundReport>, RoundSpread) {
    let mut reports: Vec<RoundReport> = rounds
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let window_s = match (r.t_first_send, r.t_last_done) {
                (Some(a), Some(b)) if b > a => Some((b - a) / 1000.0),
                _ => None,
            };
            RoundReport {
                round: i as u32 + 1,
                sent: r.sent,
                ok: r.ok,
                ttft_ms_p50: stats::median(&r.ttft),
                tpot_ms_p50: stats::median(&r.tpot),
                e2e_ms_p50: stats::median(&r.e2e),
                output_tokens_per_s: window_s.map(|w| r.tokens as f64 / w),
                outlier_metrics: Vec::new(),
            }
        })
        .collect();
    type Getter = fn(&RoundReport) -> Option<f64>;
    let figures: [(&str, Getter, f64); 4] = [
        ("ttft_ms_p50", |r| r.ttft_ms_p50, ROUND_OUTLIER_FLOOR_MS),
        ("tpot_ms_p50", |r| r.tpot_ms_p50, ROUND_OUTLIER_FLOOR_MS),
        ("e2e_ms_p50", |r| r.e2e_ms_p50, ROUND_OUTLIER_FLOOR_MS),
        ("output_tokens_per_s", |r| r.output_tokens_per_s, 0.0),
    ];
    let mut spread = RoundSpread::default();
    for (name, get, floor) in figures {
        let values: Vec<(usize, f64)> = reports
            .iter()
            .enumerate()
            .filter_map(|(i, r)| get(r).map(|v| (i, v)))
            .collect();
        let vals: Vec<f64> = values.iter().map(|v| v.1).collect();
        let s = spread_of(&vals);
        match name {
            "ttft_ms_p50" => spread.ttft_ms_p50 = s,
            "tpot_ms_p50" => spread.tpot_ms_p50 = s,
            "e2e_ms_p50" => spread.e2e_ms_p50 = s,
            _ => spread.output_tokens_per_s = s,
        }
        if values.len() == 2 {
            let (a, b) = (vals[0], vals[1]);
            let (lo, hi) = (a.min(b), a.max(b));
            if hi > 2.0 * lo && hi - lo > floor {
                spread.rounds_disagree = true;
            }
        } else if values.len() >= 3 {
            let Some(m) = stats::median(&vals) else {
                continue;
            };
            for &(i, v) in &values {
                if (v > 2.0 * m || v < 0.5 * m) && (v - m).abs() > floor {
                    reports[i].outlier_metrics.push(name.to_owned());
                    spread.rounds_disagree = true;
                }
            }
        }
    }
    (reports, spread)
}

fn spread_of(values: &[f64]) -> Option<Spread> {
    if values.len() < 2 {
        return None;
    }
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let med = stats::median(values)?;
    Some(Spread {
        min,
        max,
        relative: if med != 0.0 { (max - min) / med } else { 0.0 },
    })
}

fn snapshots(acc: &BTreeMap<u64, SnapAcc>, interval_ms: Option<f64>) -> Vec<Snapshot> {
    let Some(iv) = interval_ms else {
        return Vec::new();
    };
    acc.iter()
        .map(|(idx, s)| Snapshot {
            t_s: *idx as f64 * iv / 1000.0,
            finished: s.finished,
            ok: s.ok,
            ttft_ms_p50: stats::median(&s.ttft),
            tpot_ms_p50: stats::median(&s.tpot),
            tpot_ms_p95: stats::percentile(&s.tpot, 0.95),
            output_tokens_per_s: s.tokens as f64 / (iv / 1000.0),
        })
        .collect()
}

/// Fit each snapshot median against time; flag a trend that is significant at 95%
/// and changes the metric by at least 10% over the run.
fn drift(snaps: &[Snapshot]) -> Vec<Drift> {
    type Getter = fn(&Snapshot) -> Option<f64>;
    let metrics: [(&str, Getter); 2] = [
        ("tpot_ms", |s| s.tpot_ms_p50),
        ("ttft_ms", |s| s.ttft_ms_p50),
    ];
    let mut out = Vec::new();
    for (name, get) in metrics {
        let pts: Vec<(f64, f64)> = snaps
            .iter()
            .filter_map(|s| get(s).map(|v| (s.t_s / 60.0, v)))
            .collect();
        let Some(fit) = LinearFit::fit(&pts) else {
            continue;
        };
        let t0 = pts.first().map_or(0.0, |p| p.0);
        let t1 = pts.last().map_or(0.0, |p| p.0);
        let start = fit.intercept + fit.slope * t0;
        let change = if start.abs() > 0.0 {
            fit.slope * (t1 - t0) / start
        } else {
            0.0
        };
        out.push(Drift {
            metric: name.to_owned(),
            slope_ms_per_min: fit.slope,
            slope_ci95_ms_per_min: fit.slope_ci95(),
            change_over_run: change,
            flagged: fit.significant() && change.abs() >= 0.10,
            fit,
        });
    }
    out
}

/// Knee and SLO capacity across the levels of a sweep.
pub fn analyze_sweep(levels: &[LevelReport], slos: &[Slo]) -> SweepReport {
    SweepReport {
        knee: find_knee(levels),
        slo_capacity: slo_capacity(levels, slos),
    }
}

/// Minimum relative latency growth for a knee (noise guard).
const KNEE_MIN_LATENCY_GROWTH: f64 = 0.10;

/// The knee of the throughput-latency curve (see the module docs).
pub fn find_knee(levels: &[LevelReport]) -> Option<Knee> {
    let points: Vec<(usize, f64, f64)> = levels
        .iter()
        .enumerate()
        .filter(|(_, l)| l.ok > 0)
        .filter_map(|(i, l)| Some((i, l.output_tokens_per_s, l.metrics.e2e_ms.p95?)))
        .collect();
    for w in points.windows(2) {
        let (i, x0, l0) = w[0];
        let (_, x1, l1) = w[1];
        if l0 <= 0.0 || x0 <= 0.0 {
            continue;
        }
        let lat_ratio = l1 / l0;
        if lat_ratio < 1.0 + KNEE_MIN_LATENCY_GROWTH {
            continue;
        }
        let thr_ratio = x1 / x0;
        let elasticity = if thr_ratio <= 1.0 {
            f64::INFINITY
        } else {
            lat_ratio.ln() / thr_ratio.ln()
        };
        if elasticity > 1.0 {
            let level = &levels[i];
            return Some(Knee {
                concurrency: level.concurrency,
                rate_per_s: level.rate_per_s,
                level_index: i,
                metric: "e2e_ms.p95".into(),
                elasticity_after: elasticity.is_finite().then_some(elasticity),
                method: "first level after which p95 E2E latency grows faster than output throughput: ln(L[i+1]/L[i]) / ln(X[i+1]/X[i]) > 1, with L growing by at least 10%".into(),
            });
        }
    }
    None
}

/// The highest-throughput level meeting every SLO with at most 1% failures.
pub fn slo_capacity(levels: &[LevelReport], slos: &[Slo]) -> Option<SloCapacity> {
    if slos.is_empty() {
        return None;
    }
    levels
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            l.ok > 0
                && l.error_rate + l.timeout_rate <= 0.01
                && !l.slo_checks.is_empty()
                && l.slo_checks.iter().all(|c| c.met)
        })
        .max_by(|a, b| a.1.output_tokens_per_s.total_cmp(&b.1.output_tokens_per_s))
        .map(|(i, l)| SloCapacity {
            concurrency: l.concurrency,
            rate_per_s: l.rate_per_s,
            level_index: i,
            output_tokens_per_s: l.output_tokens_per_s,
            requests_per_s: l.requests_per_s,
            slos: slos.iter().map(Slo::label).collect(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::Usage;
    use crate::timeline::{ErrorKind, TimeoutPhase};

    fn ok_record(t0: f64, ttft: f64, itl: f64, tokens: u64) -> RequestRecord {
        let events: Vec<f64> = (0..tokens).map(|i| t0 + ttft + i as f64 * itl).collect();
        RequestRecord {
            t_scheduled_ms: None,
            t_send_ms: t0,
            t_headers_ms: Some(t0 + 1.0),
            status: Some(200),
            t_first_byte_ms: Some(t0 + 2.0),
            t_done_ms: Some(*events.last().unwrap() + 1.0),
            token_events_ms: events,
            t_first_paint_ms: None,
            paint_method: None,
            shared_read_events: 0,
            usage: Some(Usage {
                prompt_tokens: Some(10),
                completion_tokens: Some(tokens),
            }),
            server_timings: None,
            output_chars: tokens * 4,
            body_bytes: 0,
            done_received: true,
            finish_reason: Some("length".into()),
            outcome: Outcome::Ok,
        }
    }

    fn failed(t0: f64, outcome: Outcome) -> RequestRecord {
        RequestRecord {
            token_events_ms: vec![t0 + 50.0],
            t_done_ms: Some(t0 + 60.0),
            usage: None,
            outcome,
            ..ok_record(t0, 50.0, 10.0, 1)
        }
    }

    #[test]
    fn counts_add_up_and_throughput_uses_the_window() {
        let mut acc = LevelAccumulator::new(Load::Concurrency(2), LevelOptions::default());
        // Round 0: two requests, window 0 .. 1000+? ms.
        acc.push(0, &ok_record(0.0, 100.0, 10.0, 10)); // done at 191
        acc.push(0, &ok_record(0.0, 100.0, 10.0, 10));
        acc.push(
            0,
            &failed(
                0.0,
                Outcome::Error {
                    kind: ErrorKind::Http(503),
                    message: "x".into(),
                },
            ),
        );
        acc.push(
            0,
            &failed(
                0.0,
                Outcome::Timeout {
                    phase: TimeoutPhase::Stream,
                },
            ),
        );
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
        acc.push(0, &ok_record(0.0, 100.0, 10.0, 5)); // meets
        acc.push(0, &ok_record(200.0, 200.0, 10.0, 5)); // TTFT too slow
        acc.push(0, &ok_record(500.0, 100.0, 60.0, 5)); // TPOT too slow
        let l = acc.finish();
        assert_eq!(l.goodput_fraction, Some(1.0 / 3.0));
        assert_eq!(l.slo_checks[0].value_ms, Some(100.0));
        assert!(l.slo_checks[0].met);
        assert!(!l.slo_checks[1].met);
    }

    #[test]
    fn itl_by_position_buckets() {
        let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
        // 300 tokens, gaps grow with position: position p has gap p/10 ms.
        let mut events = vec![0.0];
        for p in 2..=300u32 {
            events.push(events.last().unwrap() + f64::from(p) / 10.0);
        }
        let mut r = ok_record(0.0, 0.0, 1.0, 300);
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

    #[test]
    fn round_outliers() {
        let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
        for (round, ttft) in [(0, 100.0), (1, 105.0), (2, 400.0)] {
            acc.push(
                round,
                &ok_record(f64::from(round as u32) * 10_000.0, ttft, 10.0, 5),
            );
        }
        let l = acc.finish();
        assert_eq!(l.rounds.len(), 3);
        // The slow round is also a throughput outlier (same tokens over a longer window).
        assert_eq!(
            l.rounds[2].outlier_metrics,
            vec!["ttft_ms_p50", "e2e_ms_p50", "output_tokens_per_s"]
        );
        assert!(l.rounds[0].outlier_metrics.is_empty());
        assert!(l.round_spread.rounds_disagree);
        let s = l.round_spread.ttft_ms_p50.unwrap();
        assert_eq!((s.min, s.max), (100.0, 400.0));
        // Sub-millisecond differences never flag.
        let mut acc = LevelAccumulator::new(Load::Concurrency(1), LevelOptions::default());
        for (round, ttft) in [(0, 0.3), (1, 0.4), (2, 1.1)] {
            acc.push(
                round,
                &ok_record(f64::from(round as u32) * 10_000.0, ttft, 10.0, 5),
            );
        }
        assert!(!acc.finish().round_spread.rounds_disagree);
    }

    fn level(load: u32, tput: f64, e2e_p95: f64) -> LevelReport {
        let mut acc = LevelAccumulator::new(Load::Concurrency(load), LevelOptions::default());
        acc.push(0, &ok_record(0.0, 10.0, 1.0, 2));
        let mut l = acc.finish();
        l.output_tokens_per_s = tput;
        l.metrics.e2e_ms.p95 = Some(e2e_p95);
        l
    }

    #[test]
    fn knee_where_latency_outgrows_throughput() {
        let levels = vec![
            level(1, 50.0, 1000.0),
            level(4, 190.0, 1050.0),
            level(8, 370.0, 1150.0),
            level(16, 700.0, 1400.0),
            level(32, 720.0, 2800.0),
        ];
        let knee = find_knee(&levels).unwrap();
        assert_eq!(knee.concurrency, Some(16));
        assert!(knee.elasticity_after.unwrap() > 1.0);
        // Linear scaling everywhere: no knee.
        let levels = vec![
            level(1, 50.0, 1000.0),
            level(4, 200.0, 1020.0),
            level(8, 400.0, 1040.0),
        ];
        assert!(find_knee(&levels).is_none());
        // Latency growing faster than throughput from the start.
        let levels = vec![level(1, 50.0, 1000.0), level(4, 60.0, 4000.0)];
        assert_eq!(find_knee(&levels).unwrap().concurrency, Some(1));
        // Throughput flat: infinite elasticity, stored as None (JSON has no infinity).
        let levels = vec![level(1, 50.0, 1000.0), level(4, 50.0, 4000.0)];
        let knee = find_knee(&levels).unwrap();
        assert_eq!(knee.elasticity_after, None);
    }

    #[test]
    fn slo_capacity_picks_the_best_passing_level() {
        let slos = Slo::parse_list("e2e_ms:p95<=1500").unwrap();
        let mut levels = vec![
            level(1, 50.0, 1000.0),
            level(8, 370.0, 1150.0),
            level(32, 720.0, 2800.0),
        ];
        for l in &mut levels {
            let v = l.metrics.e2e_ms.p95.unwrap();
            l.slo_checks = vec![SloCheck {
                slo: slos[0].label(),
                value_ms: Some(v),
                met: v <= 1500.0,
            }];
        }
        let cap = slo_capacity(&levels, &slos).unwrap();
        assert_eq!(cap.concurrency, Some(8));
        assert!(slo_capacity(&levels, &[]).is_none());
        levels[1].error_rate = 0.05;
        assert_eq!(slo_capacity(&levels, &slos).unwrap().concurrency, Some(1));
    }

    #[test]
    fn drift_is_flagged_only_when_there_is_a_trend() {
        let run = |grow: f64| {
            let mut acc = LevelAccumulator::new(
                Load::Concurrency(1),
                LevelOptions {
                    snapshot_interval_ms: Some(60_000.0),
                    ..LevelOptions::default()
                },
            );
            acc.set_start(0.0);
            let mut t = 0.0;
            let mut i = 0u32;
            while t < 20.0 * 60_000.0 {
                let jitter = if i.is_multiple_of(2) { 1.0 } else { -1.0 };
                let itl = 20.0 + grow * t / 60_000.0 + jitter;
                let r = ok_record(t, 50.0, itl, 20);
                t = r.t_done_ms.unwrap();
                acc.push(0, &r);
                i += 1;
            }
            acc.finish()
        };
        let flat = run(0.0);
        assert!(flat.snapshots.len() >= 19);
        let tpot = flat.drift.iter().find(|d| d.metric == "tpot_ms").unwrap();
        assert!(!tpot.flagged, "{tpot:?}");
        let growing = run(2.0); // +2 ms per minute: 20 -> 60 ms over 20 minutes
        let tpot = growing
            .drift
            .iter()
            .find(|d| d.metric == "tpot_ms")
            .unwrap();
        assert!(tpot.flagged, "{tpot:?}");
        assert!((tpot.slope_ms_per_min - 2.0).abs() < 0.2, "{tpot:?}");
    }
}
