//! How load is applied within a round: closed loop (`c` workers, each sending its
//! next request when its last one ends) and open loop (sends on a precomputed
//! schedule whatever the responses (a rate, or a trace's own times), latencies
//! measured from the scheduled time: no coordinated omission).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokenscope_core::report::raw::Phase;
use tokenscope_core::report::{Arrival, Load};
use tokenscope_workload::conversation::{Conversation, History};
use tokenscope_workload::plan;
use tokenscope_workload::trace::Trace;
use tokio::sync::mpsc;

use super::request::{Body, Ctx, Finished};
use super::{BenchConfig, PerLevel, pacer};

/// How much a round sends.
#[derive(Debug, Clone, Copy)]
pub(super) enum Quota {
    /// This many requests.
    Count(u64),
    /// New requests for this long (ms) from the round's start; in-flight ones finish.
    For(f64),
}

/// A round's quota at `load` (a shard's part of `plan_load`): the default is
/// the whole plan's, split over the shards, so N shards send what one client would.
pub(super) fn quota_for(cfg: &BenchConfig, load: Load, plan_load: Load, round: u32) -> Quota {
    let need = cfg.slo_min_requests();
    match cfg.per_level {
        PerLevel::Requests(_) => Quota::Count(plan::split(
            cfg.level_requests(load).unwrap_or(0),
            cfg.rounds,
            round,
        )),
        PerLevel::Duration(d) => {
            Quota::For(d.as_secs_f64() * 1000.0 / f64::from(cfg.rounds.max(1)))
        }
        PerLevel::Auto if cfg.shard.is_some() => Quota::Count(
            cfg.shard_or_whole()
                .part(plan::default_round_requests_for(
                    plan_load, cfg.rounds, need,
                ))
                .max(1),
        ),
        PerLevel::Auto => Quota::Count(plan::default_round_requests_for(load, cfg.rounds, need)),
    }
}

/// The most bytes of bodies a round builds before it starts (256 MiB): a
/// thousand prompts with a large image each would otherwise be gigabytes.
const PREBUILT_BYTES_MAX: usize = 256 << 20;

/// Closed loop: `c` workers, each sending its next request when its last one ends.
///
/// With a request count, every body is built before the round starts (up to
/// [`PREBUILT_BYTES_MAX`]), so building one request's prompt never delays
/// another's send (a round starts with a burst of `c` sends at once).
pub(super) async fn run_closed(
    ctx: &Arc<Ctx>,
    c: u32,
    quota: Quota,
    phase: Phase,
    mut sink: impl FnMut(Finished),
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let started = Arc::new(AtomicU64::new(0));
    let prebuilt: Arc<Vec<(u64, Body)>> = Arc::new(match quota {
        Quota::Count(n) => {
            // Up to PREBUILT_BYTES_MAX of bodies (prompts with images are
            // megabytes each); the rest are built by the worker that sends them.
            let (mut bodies, mut bytes) = (Vec::new(), 0usize);
            while (bodies.len() as u64) < n && bytes < PREBUILT_BYTES_MAX {
                let index = ctx.next_index.fetch_add(1, Ordering::Relaxed);
                let body = ctx.body(index);
                bytes += body.bytes.len();
                bodies.push((index, body));
            }
            bodies
        }
        Quota::For(_) => Vec::new(),
    });
    let deadline_ms = match quota {
        Quota::For(ms) => Some(ctx.clock.now_ms() + ms),
        Quota::Count(_) => None,
    };
    for _ in 0..c {
        let ctx = Arc::clone(ctx);
        let tx = tx.clone();
        let started = Arc::clone(&started);
        let prebuilt = Arc::clone(&prebuilt);
        tokio::spawn(async move {
            loop {
                if ctx.stop.is_cancelled() {
                    break;
                }
                let (index, body) = match quota {
                    Quota::Count(n) => {
                        let k = started.fetch_add(1, Ordering::Relaxed) as usize;
                        match prebuilt.get(k) {
                            Some((index, body)) => (*index, body.clone()),
                            None if (k as u64) < n => {
                                let index = ctx.next_index.fetch_add(1, Ordering::Relaxed);
                                (index, ctx.body_for_send(index).await)
                            }
                            None => break,
                        }
                    }
                    Quota::For(_) => {
                        if deadline_ms.is_some_and(|d| ctx.clock.now_ms() >= d) {
                            break;
                        }
                        let index = ctx.next_index.fetch_add(1, Ordering::Relaxed);
                        (index, ctx.body_for_send(index).await)
                    }
                };
                let f = ctx.one(None, phase, body, index).await;
                if tx.send(f).is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    while let Some(f) = rx.recv().await {
        sink(f);
    }
}

/// Closed loop of conversations: `c` sessions at once, each sending its turns
/// one after another (the next when the last answer has ended and the think
/// time has passed), then starting a new session. A count quota runs whole
/// sessions ([`Conversation::sessions_for`]); a time quota starts no session
/// after its end, and lets those under way finish. A turn that fails ends its
/// session (its history has no answer to send back).
pub(super) async fn run_sessions(
    ctx: &Arc<Ctx>,
    c: u32,
    conv: Conversation,
    quota: Quota,
    phase: Phase,
    mut sink: impl FnMut(Finished),
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let started = Arc::new(AtomicU64::new(0));
    let sessions = match quota {
        Quota::Count(n) => Some(conv.sessions_for(n)),
        Quota::For(_) => None,
    };
    let deadline_ms = match quota {
        Quota::For(ms) => Some(ctx.clock.now_ms() + ms),
        Quota::Count(_) => None,
    };
    let think = Duration::from_secs_f64(conv.think_ms / 1000.0);
    for _ in 0..c {
        let ctx = Arc::clone(ctx);
        let tx = tx.clone();
        let started = Arc::clone(&started);
        tokio::spawn(async move {
            'sessions: loop {
                if ctx.stop.is_cancelled()
                    || deadline_ms.is_some_and(|d| ctx.clock.now_ms() >= d)
                    || sessions.is_some_and(|n| started.fetch_add(1, Ordering::Relaxed) >= n)
                {
                    break;
                }
                let session = ctx.next_session.fetch_add(1, Ordering::Relaxed);
                let mut history = History::default();
                for turn in 1..=conv.turns {
                    if turn > 1 && !think.is_zero() {
                        tokio::select! {
                            () = tokio::time::sleep(think) => {}
                            () = ctx.stop.cancelled() => break 'sessions,
                        }
                    }
                    if ctx.stop.is_cancelled() {
                        break 'sessions;
                    }
                    let index = ctx.next_index.fetch_add(1, Ordering::Relaxed);
                    let body = ctx.turn_body(index, &mut history);
                    let (f, answer) = ctx
                        .send(None, phase, body, index, Some((session, turn)))
                        .await;
                    let ok = f.record.outcome.is_ok();
                    if tx.send(f).is_err() {
                        break 'sessions;
                    }
                    match answer {
                        Some(a) if ok => history.answered(a),
                        _ => break,
                    }
                }
            }
        });
    }
    drop(tx);
    while let Some(f) = rx.recv().await {
        sink(f);
    }
}

/// When an open-loop round sends.
#[derive(Debug, Clone)]
pub(super) enum Schedule {
    /// At `rate` req/s, gaps drawn from `arrival`.
    Rate {
        /// Requests per second.
        rate: f64,
        /// The gaps' distribution.
        arrival: Arrival,
        /// Their coefficient of variation (`Arrival::Gamma`).
        cv: Option<f64>,
    },
    /// At each request's own time in a trace, ms after the round's start.
    Trace(Arc<Trace>),
}

/// Open loop: sends on a schedule regardless of responses.
pub(super) async fn run_open(
    ctx: &Arc<Ctx>,
    schedule: Schedule,
    quota: Quota,
    round: u32,
    mut sink: impl FnMut(Finished),
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let ctx2 = Arc::clone(ctx);
    let runtime = tokio::runtime::Handle::current();
    // The schedule runs on a thread of its own, which hands each request to the
    // runtime at its time (`pacer`: tokio's timer wakes up to a millisecond late).
    let scheduler = std::thread::spawn(move || {
        let ctx = ctx2;
        // A shard's own stream: N shards' arrivals together are the plan's.
        let seed = ctx.cfg.shard_or_whole().stream_seed(ctx.cfg.seed);
        let mut rng = plan::arrival_stream(seed, round);
        let start = ctx.clock.now_ms();
        let until = match quota {
            Quota::For(ms) => Some(start + ms),
            Quota::Count(_) => None,
        };
        // A trace's first request at its own time (a shard's part of a trace
        // does not start at 0).
        let mut t_next = match &schedule {
            Schedule::Trace(trace) => start + trace.requests.first().map_or(0.0, |r| r.t_ms),
            Schedule::Rate { .. } => start,
        };
        let mut sent = 0u64;
        loop {
            if let Quota::Count(n) = quota
                && sent >= n
            {
                break;
            }
            if until.is_some_and(|u| t_next >= u) || ctx.stop.is_cancelled() {
                break;
            }
            // Build the body before the scheduled time, so the send is on time.
            let index = ctx.next_index.fetch_add(1, Ordering::Relaxed);
            let body = ctx.body(index);
            if !pacer::wait_until(&ctx.clock, t_next - pacer::HANDOFF_MS, &ctx.stop) {
                break;
            }
            let t_sched = t_next;
            let ctx3 = Arc::clone(&ctx);
            let tx = tx.clone();
            runtime.spawn(async move {
                pacer::spin_until(&ctx3.clock, t_sched);
                let f = ctx3
                    .one(Some(t_sched), Phase::Round(round), body, index)
                    .await;
                let _ = tx.send(f);
            });
            sent += 1;
            t_next = match &schedule {
                Schedule::Rate { rate, arrival, cv } => {
                    t_next + plan::arrival_gap_ms(&mut rng, *rate, *arrival, *cv)
                }
                Schedule::Trace(trace) => match trace.requests.get(sent as usize) {
                    Some(r) => start + r.t_ms,
                    None => break,
                },
            };
        }
    });
    // The scheduler holds the last sender clone until it ends; each request holds one.
    while let Some(f) = rx.recv().await {
        sink(f);
    }
    // Every sender is gone: the scheduler's loop has ended (or is returning).
    let _ = tokio::task::spawn_blocking(move || scheduler.join()).await;
}

/// A ramp before a level's measured part (`--ramp`), never measured: the rate
/// rising linearly from 0 to the level's over `ramp_ms` (the k-th send at
/// `sqrt(2 · ramp · k / rate)`), or the concurrency rising from 1 to the level's
/// (worker `i` of `c` joins at `ramp · i / c`, each sending closed loop until the
/// ramp ends).
pub(super) async fn run_ramp(
    ctx: &Arc<Ctx>,
    load: tokenscope_core::report::Load,
    ramp_ms: f64,
    mut sink: impl FnMut(Finished),
) {
    use tokenscope_core::report::Load;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let start = ctx.clock.now_ms();
    let end = start + ramp_ms;
    match load {
        Load::Rate(rate) => {
            let ctx = Arc::clone(ctx);
            tokio::spawn(async move {
                for k in 1u64.. {
                    let t = start + plan::ramp_send_ms(k, rate, ramp_ms);
                    if t >= end || ctx.stop.is_cancelled() {
                        break;
                    }
                    let index = ctx.next_index.fetch_add(1, Ordering::Relaxed);
                    let body = ctx.body_for_send(index).await;
                    tokio::time::sleep_until(ctx.clock.instant_at(t)).await;
                    let (ctx2, tx) = (Arc::clone(&ctx), tx.clone());
                    tokio::spawn(async move {
                        let _ = tx.send(ctx2.one(Some(t), Phase::Warmup, body, index).await);
                    });
                }
            });
        }
        Load::Concurrency(c) => {
            for i in 0..c {
                let (ctx, tx) = (Arc::clone(ctx), tx.clone());
                let join_at = start + plan::ramp_join_ms(i, c, ramp_ms);
                tokio::spawn(async move {
                    tokio::time::sleep_until(ctx.clock.instant_at(join_at)).await;
                    while ctx.clock.now_ms() < end && !ctx.stop.is_cancelled() {
                        let index = ctx.next_index.fetch_add(1, Ordering::Relaxed);
                        let body = ctx.body_for_send(index).await;
                        if tx
                            .send(ctx.one(None, Phase::Warmup, body, index).await)
                            .is_err()
                        {
                            break;
                        }
                    }
                });
            }
            drop(tx);
        }
    }
    while let Some(f) = rx.recv().await {
        sink(f);
    }
}
