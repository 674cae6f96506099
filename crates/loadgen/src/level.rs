//! One load level as it runs (warm-up or ramp, then its rounds), the run's record
//! as it happens ([`Recording`]: core's recorder and the raw file), and the
//! event-loop lag monitor.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokenscope_core::report::assemble::RunRecorder;
use tokenscope_core::report::raw::{Phase, RawEntry};
use tokenscope_core::report::server::ScrapeLog;
use tokenscope_core::report::{Arrival, Load, ReportWarning};
use tokenscope_workload::plan;
use tokio_util::sync::CancellationToken;

use super::config::LoadPlan;
use super::load::{Quota, Schedule, quota_for, run_closed, run_open, run_ramp, run_sessions};
use super::progress::Progress;
use super::raw::RawWriter;
use super::request::{Ctx, Finished};
use super::scrape;
use super::scrape::Scraper;
use crate::live::Live;
use tokenscope_core::analyze::server::scrape::ScrapeRecord;
use tokenscope_measure::metrics::{MetricOptions, RequestMetrics};

pub(super) fn lock(run: &Mutex<Recording>) -> MutexGuard<'_, Recording> {
    // A panic elsewhere while recording leaves the data as it was: keep going.
    run.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The run's record as it happens: core's recorder (which makes the report) and
/// the raw file (which gets every step as it happens).
pub(super) struct Recording {
    pub(super) rec: RunRecorder,
    pub(super) raw: Option<RawWriter>,
    /// The scrapes, attributed to levels, joined to the report at the end.
    pub(super) scrapes: ScrapeLog,
    /// Live metrics, and how a request's metrics are computed (as the report does).
    pub(super) live: Option<(Arc<Live>, MetricOptions)>,
}

impl Recording {
    pub(super) fn log(&mut self, entry: RawEntry) {
        if let Some(w) = self.raw.as_mut() {
            w.write(&entry);
        }
    }

    pub(super) fn warn(&mut self, w: ReportWarning) {
        let e = self.rec.warn(w);
        self.log(RawEntry::Event(e));
    }

    pub(super) fn finished(&mut self, f: Finished, level: usize, load: Load) {
        if let Some((live, opts)) = &self.live {
            let m = RequestMetrics::from_record(&f.record, opts);
            live.request_finished(load, f.phase != Phase::Warmup, &f.record, &m);
        }
        let line = f.into_line(level, load);
        self.rec.record(&line);
        self.log(RawEntry::Request(Box::new(line)));
    }
}

impl scrape::Recorder for Recording {
    fn scrape(&mut self, s: ScrapeRecord) {
        let e = self.scrapes.scrape(s);
        self.log(e);
    }
}

/// One level: its warm-up (closed loop at the level's concurrency; rate: about
/// one second's worth), then its rounds.
pub(super) async fn run_level(
    ctx: &Arc<Ctx>,
    li: usize,
    load: Load,
    run: &Mutex<Recording>,
    scraper: Option<&Scraper>,
    progress: &Progress,
) {
    let cfg = &ctx.cfg;
    if let Some((live, current)) = &ctx.live {
        *current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = load;
        live.level_started(li, load);
    }
    let warm_n = cfg.warmup.unwrap_or(plan::default_warmup(load));
    if let Some(ramp) = cfg.ramp {
        // The ramp replaces the warm-up: load rising to the level's, not measured.
        progress.phase(&format!("{} ramp", load.label()), None);
        run_ramp(ctx, load, ramp.as_secs_f64() * 1000.0, |f| {
            progress.tick(&f.record);
            lock(run).finished(f, li, load);
        })
        .await;
    } else if warm_n > 0 {
        progress.phase(
            &format!("{} warm-up", load.label()),
            Some(u64::from(warm_n)),
        );
        let quota = Quota::Count(u64::from(warm_n));
        let warm_c = plan::warmup_concurrency(load);
        run_closed(ctx, warm_c, quota, Phase::Warmup, |f| {
            progress.tick(&f.record);
            lock(run).finished(f, li, load);
        })
        .await;
    }
    {
        let mut r = lock(run);
        let t_ms = ctx.clock.now_ms();
        let e = r.rec.start_level(li, load, t_ms);
        r.scrapes.level_started(li, t_ms);
        r.log(RawEntry::Event(e));
    }
    if let Some(s) = scraper {
        s.now().await;
    }
    for round in 0..cfg.rounds {
        if ctx.stop.is_cancelled() {
            break;
        }
        let quota = quota_for(cfg, load, cfg.plan_load(li, load), round);
        progress.phase(
            &format!("{} round {}/{}", load.label(), round + 1, cfg.rounds),
            match (quota, cfg.conversation) {
                (Quota::Count(n), Some(conv)) => Some(conv.sessions_for(n) * u64::from(conv.turns)),
                (Quota::Count(n), None) => Some(n),
                (Quota::For(_), _) => None,
            },
        );
        let mut sink = |f: Finished| {
            progress.tick(&f.record);
            lock(run).finished(f, li, load);
        };
        match load {
            Load::Concurrency(c) => match cfg.conversation {
                Some(conv) => {
                    run_sessions(ctx, c, conv, quota, Phase::Round(round), &mut sink).await;
                }
                None => run_closed(ctx, c, quota, Phase::Round(round), &mut sink).await,
            },
            Load::Rate(rate) => {
                let schedule = match &cfg.load {
                    LoadPlan::Rate { arrival, cv, .. } => Schedule::Rate {
                        rate,
                        arrival: *arrival,
                        cv: *cv,
                    },
                    LoadPlan::Trace { trace, .. } => Schedule::Trace(Arc::clone(trace)),
                    LoadPlan::Concurrency(_) => Schedule::Rate {
                        rate,
                        arrival: Arrival::Poisson,
                        cv: None,
                    },
                };
                run_open(ctx, schedule, quota, round, &mut sink).await;
            }
        }
    }
    if let Some(s) = scraper {
        s.now().await;
    }
    let mut r = lock(run);
    if let Some((e, level)) = r.rec.end_level() {
        if let Some(level) = level {
            progress.level_done(level);
        }
        r.log(RawEntry::Event(e));
    }
    r.scrapes.level_ended();
}

/// Measures how late a 10 ms timer fires on the client's runtime, all run long.
pub(super) struct LagMonitor {
    pub(super) stop: CancellationToken,
    pub(super) task: tokio::task::JoinHandle<tokenscope_stats::stats::Samples>,
}

impl LagMonitor {
    pub(super) fn spawn(live: Option<Arc<Live>>) -> Self {
        let stop = CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            let mut samples = tokenscope_stats::stats::Samples::with_cap(100_000);
            let period = Duration::from_millis(10);
            loop {
                let start = std::time::Instant::now();
                tokio::select! {
                    () = tokio::time::sleep(period) => {}
                    () = token.cancelled() => break,
                }
                let late = start.elapsed().saturating_sub(period);
                samples.push(late.as_secs_f64() * 1000.0);
                if let Some(l) = &live {
                    l.event_loop_lag_ms(late.as_secs_f64() * 1000.0);
                }
            }
            samples
        });
        Self { stop, task }
    }

    pub(super) async fn stop(self) -> tokenscope_stats::stats::Summary {
        self.stop.cancel();
        self.task.await.map(|s| s.summary()).unwrap_or_default()
    }
}
