//! Live metrics of a running `bench`: what a Prometheus server scrapes from
//! `--metrics-listen` ([`server`]) or receives by remote write
//! (`--prometheus-remote-write`, [`remote_write`]) while the run goes on.
//!
//! The run reports each event to one shared [`Live`] (a mutex around a small
//! registry: a few increments per request); [`Live::render`] writes the Prometheus
//! text exposition format 0.0.4 and [`Live::series`] the same series for remote
//! write, both built from one list of families so they never disagree.
//!
//! The values are core's [`RequestMetrics`], so the live figures are the report's
//! figures, and they count what the report counts: the histograms and
//! `tokenscope_output_tokens_total` take the measured requests that succeeded;
//! `tokenscope_requests_total`, `tokenscope_request_errors_total` and
//! `tokenscope_input_tokens_total` every measured request; warm-up and ramp
//! requests only `tokenscope_warmup_requests_total`. Durations are in seconds.
//! Counters and histograms are cumulative over the whole run (Prometheus
//! semantics: `rate()` and `increase()` find each level's share); every level
//! seen keeps its series to the end of the run.
//!
//! Series (every one also labelled `shard` (`"0/1"` unsharded) and `label` when
//! `bench --label` was given):
//!
//! | name | type | labels |
//! |---|---|---|
//! | `tokenscope_ttft_seconds`, `tokenscope_rendered_ttft_seconds`, `tokenscope_tpot_seconds`, `tokenscope_itl_seconds` (one per gap), `tokenscope_e2e_seconds` | histogram | `level` |
//! | `tokenscope_event_loop_lag_seconds` | histogram | |
//! | `tokenscope_requests_total` | counter | `level`, `outcome` (`ok`, `error`, `timeout`) |
//! | `tokenscope_request_errors_total` | counter | `level`, `kind` (`http_503`, `reset`, …) |
//! | `tokenscope_warmup_requests_total`, `tokenscope_input_tokens_total`, `tokenscope_output_tokens_total` | counter | `level` |
//! | `tokenscope_in_flight_requests` | gauge | `level` |
//! | `tokenscope_level_load` | gauge | `mode` (`concurrency`, `rate`) |
//! | `tokenscope_level_index` | gauge | |
//!
//! `level` is core's [`Load::label`] (`c=16`, `5 req/s`). The two level gauges
//! describe the current level and carry no `level` label (one unbroken series
//! across the run); they appear once a level has started. Histogram buckets: see
//! [`histogram`].

pub mod histogram;
pub mod remote_write;
mod series;
pub mod server;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokenscope_core::model::metric::{self, PerRequest};
use tokenscope_core::report::Load;
use tokenscope_measure::exposition::{Floats, Writer};
use tokenscope_measure::metrics::RequestMetrics;
use tokenscope_measure::prometheus::MetricKind;
use tokenscope_measure::record::{Outcome, RequestRecord};

use histogram::Histogram;
use series::TimeSeries;

/// The labels every series carries.
#[derive(Debug, Clone, Default)]
pub struct LiveLabels {
    /// `(index, count)` of a sharded run (`--shard`); `None`: `"0/1"`.
    pub shard: Option<(u32, u32)>,
    /// `bench --label`.
    pub label: Option<String>,
}

/// The live registry of one run. `Send + Sync`: share it as `Arc<Live>`.
#[derive(Debug)]
pub struct Live {
    /// `shard`, then `label` when set.
    base: Vec<(&'static str, String)>,
    inner: Mutex<Registry>,
    /// Times `/metrics` was served ([`server`]).
    scrapes: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Clone, Default)]
struct Registry {
    /// Every level seen, in the order first seen.
    levels: Vec<LevelSeries>,
    /// The current level: its index and load.
    current: Option<(usize, Load)>,
    lag: Histogram,
}

/// The series of one level (keyed by its label).
#[derive(Debug, Clone, Default)]
struct LevelSeries {
    label: String,
    in_flight: u64,
    /// Measured requests by outcome: ok, error, timeout.
    outcomes: [u64; 3],
    errors: BTreeMap<String, u64>,
    warmup: u64,
    input_tokens: u64,
    output_tokens: u64,
    /// One histogram per metric of the registry's [`metric::live`], in its order.
    latency: Vec<Histogram>,
}

impl Registry {
    fn level(&mut self, load: Load) -> &mut LevelSeries {
        let label = load.label();
        let i = match self.levels.iter().position(|l| l.label == label) {
            Some(i) => i,
            None => {
                self.levels.push(LevelSeries {
                    label,
                    latency: metric::live().map(|_| Histogram::default()).collect(),
                    ..LevelSeries::default()
                });
                self.levels.len() - 1
            }
        };
        &mut self.levels[i]
    }
}

impl Live {
    /// A registry with no level yet.
    pub fn new(labels: LiveLabels) -> Arc<Live> {
        let (index, count) = labels.shard.unwrap_or((0, 1));
        let mut base = vec![("shard", format!("{index}/{count}"))];
        if let Some(label) = labels.label {
            base.push(("label", label));
        }
        Arc::new(Live {
            base,
            inner: Mutex::new(Registry::default()),
            scrapes: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Times the exposition was served so far.
    pub fn scrapes(&self) -> u64 {
        self.scrapes.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn scraped(&self) {
        self.scrapes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        // A panic elsewhere while holding the lock leaves counts that are still
        // counts: keep serving them.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A level starts (its warm-up or ramp included): sets the level gauges.
    pub fn level_started(&self, level_index: usize, load: Load) {
        let mut r = self.registry();
        r.level(load);
        r.current = Some((level_index, load));
    }

    /// A request was sent: its level's in-flight gauge +1.
    pub fn request_started(&self, load: Load) {
        self.registry().level(load).in_flight += 1;
    }

    /// A request finished: its level's in-flight gauge -1, and the counters and
    /// histograms (see the module's doc). `measured`: false for warm-up and ramp
    /// requests, which are only counted apart.
    pub fn request_finished(
        &self,
        load: Load,
        measured: bool,
        record: &RequestRecord,
        metrics: &RequestMetrics,
    ) {
        let mut r = self.registry();
        let l = r.level(load);
        l.in_flight = l.in_flight.saturating_sub(1);
        if !measured {
            l.warmup += 1;
            return;
        }
        if let Some(n) = record
            .usage
            .and_then(|u| u.prompt_tokens)
            .or(record.prompt_tokens_sent)
        {
            l.input_tokens += n;
        }
        match &record.outcome {
            Outcome::Ok => l.outcomes[0] += 1,
            Outcome::Error { kind, .. } => {
                l.outcomes[1] += 1;
                *l.errors.entry(kind.key()).or_default() += 1;
                return;
            }
            Outcome::Timeout { .. } => {
                l.outcomes[2] += 1;
                return;
            }
        }
        l.output_tokens += metrics.output_tokens;
        for (h, m) in l.latency.iter_mut().zip(metric::live()) {
            match m.request {
                Some(PerRequest::One(read)) => {
                    if let Some(ms) = read(metrics) {
                        h.observe(ms / 1000.0);
                    }
                }
                Some(PerRequest::Gaps) => {
                    for g in &metrics.gaps {
                        h.observe(g.ms / 1000.0);
                    }
                }
                None => {}
            }
        }
    }

    /// How late the runtime woke a timer, ms (the load generator's lag probe).
    pub fn event_loop_lag_ms(&self, ms: f64) {
        self.registry().lag.observe(ms / 1000.0);
    }

    /// The Prometheus text exposition format 0.0.4 (`text/plain; version=0.0.4`),
    /// written by core's [`Writer`].
    pub fn render(&self) -> String {
        let mut w = Writer::new(FLOATS);
        for f in self.families() {
            w.family(f.name, f.kind, f.help);
            for s in &f.samples {
                w.sample(&format!("{}{}", f.name, s.suffix), &s.labels, s.value);
            }
        }
        w.finish()
    }

    /// The same series as [`Live::render`], each with one sample at `t_unix_ms`,
    /// for remote write: labels sorted by name (`__name__` first), plus
    /// `job="tokenscope"` and `instance` (the `shard` value).
    pub fn series(&self, t_unix_ms: i64) -> Vec<TimeSeries> {
        let instance = self.base[0].1.clone();
        let mut out = Vec::new();
        for f in self.families() {
            for s in f.samples {
                let mut labels: Vec<(String, String)> = s
                    .labels
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect();
                labels.push(("__name__".into(), format!("{}{}", f.name, s.suffix)));
                labels.push(("job".into(), "tokenscope".into()));
                labels.push(("instance".into(), instance.clone()));
                labels.sort();
                out.push(TimeSeries {
                    labels,
                    samples: vec![(s.value, t_unix_ms)],
                });
            }
        }
        out
    }

    /// Every family with its samples: the one model behind `render` and `series`.
    /// Built from a copy of the registry (a few tens of KB), so the run never
    /// waits on a scrape's formatting.
    fn families(&self) -> Vec<Family> {
        let r = self.registry().clone();
        let mut out = Exposition::default();
        let labels = |extra: &[(&'static str, &str)]| {
            let mut v: Vec<(&'static str, String)> =
                extra.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
            v.extend(self.base.iter().cloned());
            v
        };
        for l in &r.levels {
            let level = ("level", l.label.as_str());
            let lv = labels(&[level]);
            for (h, m) in l.latency.iter().zip(metric::live()) {
                // A metric a level may lack altogether (a paint time, from a
                // browser only) is left out while it has no observation.
                if m.absent.is_none() || h.counts().count() > 0 {
                    out.histogram(m.live.map_or("", |f| f.name), h, &lv);
                }
            }
            for (outcome, n) in ["ok", "error", "timeout"].into_iter().zip(l.outcomes) {
                let with = labels(&[level, ("outcome", outcome)]);
                out.add("tokenscope_requests_total", "", with, n as f64);
            }
            for (kind, n) in &l.errors {
                let with = labels(&[level, ("kind", kind)]);
                out.add("tokenscope_request_errors_total", "", with, *n as f64);
            }
            out.add(
                "tokenscope_warmup_requests_total",
                "",
                lv.clone(),
                l.warmup as f64,
            );
            out.add(
                "tokenscope_input_tokens_total",
                "",
                lv.clone(),
                l.input_tokens as f64,
            );
            out.add(
                "tokenscope_output_tokens_total",
                "",
                lv.clone(),
                l.output_tokens as f64,
            );
            out.add("tokenscope_in_flight_requests", "", lv, l.in_flight as f64);
        }
        out.histogram("tokenscope_event_loop_lag_seconds", &r.lag, &labels(&[]));
        if let Some((i, load)) = r.current {
            let mode = match load {
                Load::Concurrency(_) => "concurrency",
                Load::Rate(_) => "rate",
            };
            out.add(
                "tokenscope_level_load",
                "",
                labels(&[("mode", mode)]),
                load.value(),
            );
            out.add("tokenscope_level_index", "", labels(&[]), i as f64);
        }
        out.0.retain(|f| !f.samples.is_empty());
        out.0
    }
}

/// How the live figures and bucket edges are spelled: the shortest form.
const FLOATS: Floats = Floats::Shortest;

/// The families besides the registry's latency histograms ([`metric::live`],
/// exposed first): name, type and help, in the order exposed.
const OTHER_FAMILIES: [(&str, MetricKind, &str); 9] = [
    (
        "tokenscope_event_loop_lag_seconds",
        MetricKind::Histogram,
        "How late the client's runtime woke a timer, seconds.",
    ),
    (
        "tokenscope_requests_total",
        MetricKind::Counter,
        "Measured requests finished, by outcome.",
    ),
    (
        "tokenscope_request_errors_total",
        MetricKind::Counter,
        "Measured requests failed, by error kind.",
    ),
    (
        "tokenscope_warmup_requests_total",
        MetricKind::Counter,
        "Warm-up and ramp requests finished (never measured).",
    ),
    (
        "tokenscope_input_tokens_total",
        MetricKind::Counter,
        "Prompt tokens of measured requests (usage, else as sent).",
    ),
    (
        "tokenscope_output_tokens_total",
        MetricKind::Counter,
        "Output tokens of measured successful requests.",
    ),
    (
        "tokenscope_in_flight_requests",
        MetricKind::Gauge,
        "Requests sent and not yet finished.",
    ),
    (
        "tokenscope_level_load",
        MetricKind::Gauge,
        "The current level's concurrency or rate (req/s).",
    ),
    (
        "tokenscope_level_index",
        MetricKind::Gauge,
        "The current level's index in the run (0 the first).",
    ),
];

/// The families being filled, in [`Exposition::default`]'s order.
struct Exposition(Vec<Family>);

impl Default for Exposition {
    fn default() -> Self {
        Self(
            metric::live()
                .filter_map(|m| m.live)
                .map(|f| (f.name, MetricKind::Histogram, f.help))
                .chain(OTHER_FAMILIES)
                .map(|(name, kind, help)| Family {
                    name,
                    help,
                    kind,
                    samples: Vec::new(),
                })
                .collect(),
        )
    }
}

impl Exposition {
    /// One sample of family `name` (one of the families [`Exposition::default`] lists).
    fn add(
        &mut self,
        name: &str,
        suffix: &'static str,
        labels: Vec<(&'static str, String)>,
        value: f64,
    ) {
        let family = self.0.iter_mut().find(|f| f.name == name);
        let family = family.unwrap_or_else(|| panic!("{name} is not a family"));
        family.samples.push(FamilySample {
            suffix,
            labels,
            value,
        });
    }

    /// A histogram's series as core's `Histogram::series` lists them (every
    /// boundary, then `+Inf`; `_sum`; `_count`).
    fn histogram(&mut self, name: &str, h: &Histogram, labels: &[(&'static str, String)]) {
        for (suffix, le, value) in h.counts().series() {
            let mut l = labels.to_vec();
            if let Some(le) = le {
                l.push(("le", FLOATS.format(le)));
            }
            self.add(name, suffix, l, value.as_f64());
        }
    }
}

/// A metric family as exposed: `# TYPE` name, help and samples.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: MetricKind,
    samples: Vec<FamilySample>,
}

/// One exposed sample: `name + suffix {labels} value`.
struct FamilySample {
    suffix: &'static str,
    labels: Vec<(&'static str, String)>,
    value: f64,
}

#[cfg(test)]
mod tests;
