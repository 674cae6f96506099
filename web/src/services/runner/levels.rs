//! The run's loop: each level's warm-up (or ramp), then its rounds, each a closed
//! loop, an open loop or conversations, until the plan is done or the run is
//! cancelled. Every finished request goes to the record keeping
//! ([`super::record`]) at once, so the next one is sent without waiting.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use futures_util::future::join_all;
use tokenscope_core::report::Load;
use tokenscope_core::report::raw::Phase;
use tokenscope_workload::conversation::{Conversation, History};
use tokenscope_workload::plan;

use super::io::RunEvent;
use super::record::{Ctx, PhaseRun, after_send};
use crate::services::clock::{now, sleep_ms};
use crate::services::transport::run_request;
use crate::settings::OpenLoop;

/// How often the live table is refreshed, ms.
const LIVE_EVERY_MS: f64 = 1000.0;

/// Every level: its warm-up, then its rounds.
pub(super) async fn run_levels(ctx: &Rc<Ctx>) {
    let plan = &ctx.input.plan;
    for (li, load) in plan.loads.iter().copied().enumerate() {
        if ctx.input.cancel.is_cancelled() {
            break;
        }
        let c = match load {
            Load::Concurrency(c) => c,
            Load::Rate(_) => OPEN_LOOP_LANES as u32,
        };
        ctx.input.painter.set_lanes(c as usize);
        let warm_n = plan.warmup_for(load);
        if let Some(ramp_ms) = plan.ramp_ms {
            run_ramp(ctx, li, load, ramp_ms).await;
        } else if warm_n > 0 {
            let phase = PhaseRun {
                level: li,
                load,
                concurrency: plan::warmup_concurrency(load),
                requests: u64::from(warm_n),
                phase: Phase::Warmup,
                label: format!("{} warm-up", load.label()),
            };
            run_closed(ctx, &phase).await;
        }
        let e = ctx.recorder.borrow_mut().start_level(li, load, now());
        ctx.event(e);
        ctx.scrape_now().await;
        for round in 0..plan.rounds {
            if ctx.input.cancel.is_cancelled() {
                break;
            }
            let phase = PhaseRun {
                level: li,
                load,
                concurrency: c,
                requests: plan::round_requests(plan.requests, plan.rounds, round, load),
                phase: Phase::Round(round),
                label: format!("{} round {}/{}", load.label(), round + 1, plan.rounds),
            };
            match (load, &plan.open_loop, plan.conversation) {
                (Load::Rate(rate), Some(open), _) => run_open(ctx, &phase, rate, open, round).await,
                (_, _, Some(conv)) => run_sessions(ctx, &phase, conv).await,
                _ => run_closed(ctx, &phase).await,
            }
        }
        ctx.scrape_now().await;
        let ended = ctx
            .recorder
            .borrow_mut()
            .end_level()
            .map(|(e, level)| (e, level.is_some()));
        let mut settled = false;
        if let Some((e, level)) = ended {
            ctx.event(e);
            settled = level;
        }
        ctx.read_scrapes().await;
        if settled {
            let levels = ctx.recorder.borrow().levels().to_vec();
            ctx.emit(RunEvent::Levels {
                levels,
                settled: true,
            });
        }
    }
}

/// Closed loop: `concurrency` workers, each sending its next request when its last
/// one ends, until the phase's requests are all sent; then wait for their paints.
async fn run_closed(ctx: &Rc<Ctx>, run: &PhaseRun) {
    let queue = RefCell::new(VecDeque::from(ctx.requests.prepare(run.requests)));
    let finished = Cell::new(0u64);
    let last_live = Cell::new(now());
    let measured = matches!(run.phase, Phase::Round(_));
    let progress = |finished: u64| ctx.progress(run, finished, run.requests);
    progress(0);
    let workers = (0..run.concurrency.min(run.requests as u32)).map(|lane| {
        let queue = &queue;
        let finished = &finished;
        let last_live = &last_live;
        let progress = &progress;
        async move {
            let lane = lane as usize;
            loop {
                if ctx.input.cancel.is_cancelled() {
                    break;
                }
                let Some(req) = queue.borrow_mut().pop_front() else {
                    break;
                };
                let sent = run_request(
                    &ctx.transport,
                    &req,
                    Some((&ctx.input.painter, lane)),
                    ctx.input.plan.timeout_ms,
                    &ctx.input.cancel,
                )
                .await;
                after_send(ctx, run, sent, &req, lane);
                finished.set(finished.get() + 1);
                live(ctx, last_live, measured, || progress(finished.get()));
            }
        }
    });
    join_all(workers).await;
    end_phase(ctx, measured, || progress(finished.get())).await;
}

/// A ramp before a level's measured part (`ramp`), as `bench --ramp`: never
/// measured (warm-up records), the rate rising linearly from 0 to the level's or
/// the concurrency from 1 to the level's ([`plan::ramp_send_ms`],
/// [`plan::ramp_join_ms`]).
async fn run_ramp(ctx: &Rc<Ctx>, level: usize, load: Load, ramp_ms: f64) {
    let run = PhaseRun {
        level,
        load,
        concurrency: 0,
        requests: 0,
        phase: Phase::Warmup,
        label: format!("{} ramp", load.label()),
    };
    ctx.progress(&run, 0, 0);
    let (start, timeout) = (now(), ctx.input.plan.timeout_ms);
    let end = start + ramp_ms;
    let cancelled = || ctx.input.cancel.is_cancelled();
    match load {
        Load::Rate(rate) => {
            let in_flight = Rc::new(Cell::new(0u64));
            for k in 1u64.. {
                let t = start + plan::ramp_send_ms(k, rate, ramp_ms);
                if t >= end || cancelled() {
                    break;
                }
                let mut req = ctx.requests.next(None);
                let wait = t - now();
                if wait > 0.0 {
                    sleep_ms(wait).await;
                }
                req.t_scheduled_ms = Some(t);
                in_flight.set(in_flight.get() + 1);
                let (ctx, run, in_flight) = (Rc::clone(ctx), run.clone(), Rc::clone(&in_flight));
                wasm_bindgen_futures::spawn_local(async move {
                    let sent =
                        run_request(&ctx.transport, &req, None, timeout, &ctx.input.cancel).await;
                    after_send(&ctx, &run, sent, &req, OPEN_LOOP_LANES);
                    in_flight.set(in_flight.get() - 1);
                });
            }
            while in_flight.get() > 0 {
                sleep_ms(10.0).await;
            }
        }
        Load::Concurrency(c) => {
            let workers = (0..c).map(|i| {
                let run = &run;
                async move {
                    let join_at = start + plan::ramp_join_ms(i, c, ramp_ms);
                    sleep_ms((join_at - now()).max(0.0)).await;
                    let lane = i as usize;
                    while now() < end && !cancelled() {
                        let req = ctx.requests.next(None);
                        let painter = Some((&ctx.input.painter, lane));
                        let sent =
                            run_request(&ctx.transport, &req, painter, timeout, &ctx.input.cancel)
                                .await;
                        after_send(ctx, run, sent, &req, lane);
                    }
                }
            });
            join_all(workers).await;
        }
    }
    end_phase(ctx, false, || {}).await;
}

/// Conversations (`conversation`), as `bench --conversation` runs them: `c`
/// sessions at once, each sending its turns one after another (the history and
/// a new user message, after the think time from the last answer's end), whole
/// sessions enough for the round's requests. A failed turn ends its session.
async fn run_sessions(ctx: &Rc<Ctx>, run: &PhaseRun, conv: Conversation) {
    let sessions = conv.sessions_for(run.requests);
    let planned = sessions * u64::from(conv.turns);
    let started = Cell::new(0u64);
    let finished = Cell::new(0u64);
    let last_live = Cell::new(now());
    let progress = |finished: u64| ctx.progress(run, finished, planned);
    progress(0);
    let cancelled = || ctx.input.cancel.is_cancelled();
    let workers = (0..run.concurrency.min(sessions as u32)).map(|lane| {
        let (started, finished, last_live, progress) = (&started, &finished, &last_live, &progress);
        async move {
            let lane = lane as usize;
            'sessions: while !cancelled() && started.get() < sessions {
                started.set(started.get() + 1);
                let session = ctx.requests.new_session();
                let mut history = History::default();
                for turn in 1..=conv.turns {
                    if turn > 1 && conv.think_ms > 0.0 {
                        sleep_ms(conv.think_ms).await;
                    }
                    if cancelled() {
                        break 'sessions;
                    }
                    let req = ctx.requests.next(Some((&mut history, session, turn)));
                    let painter = Some((&ctx.input.painter, lane));
                    let timeout = ctx.input.plan.timeout_ms;
                    let mut sent =
                        run_request(&ctx.transport, &req, painter, timeout, &ctx.input.cancel)
                            .await;
                    let answer = sent.timeline.take_answer();
                    let ok = sent.timeline.record().outcome.is_ok();
                    after_send(ctx, run, sent, &req, lane);
                    finished.set(finished.get() + 1);
                    live(ctx, last_live, true, || progress(finished.get()));
                    match answer {
                        Some(a) if ok => history.answered(a),
                        _ => break,
                    }
                }
            }
        }
    });
    join_all(workers).await;
    end_phase(ctx, true, || progress(finished.get())).await;
}

/// The live view, at most every [`LIVE_EVERY_MS`]: progress, and a measured
/// level's figures so far.
fn live(ctx: &Rc<Ctx>, last_live: &Cell<f64>, measured: bool, progress: impl Fn()) {
    if now() - last_live.get() < LIVE_EVERY_MS {
        return;
    }
    last_live.set(now());
    progress();
    if measured {
        // The live snapshot (a clone of the level's samples, sorted for
        // percentiles) runs as its own task once this stream yields, not inline
        // between a response and the next send.
        let ctx = Rc::clone(ctx);
        wasm_bindgen_futures::spawn_local(async move {
            let levels = ctx.recorder.borrow().levels_so_far();
            ctx.emit(RunEvent::Levels {
                levels,
                settled: false,
            });
        });
    }
}

/// A phase's sends are done: wait for their paints, then show where it stands.
async fn end_phase(ctx: &Rc<Ctx>, measured: bool, progress: impl Fn()) {
    while ctx.pending_paints.get() > 0 {
        sleep_ms(10.0).await;
    }
    progress();
    if measured {
        let levels = ctx.recorder.borrow().levels_so_far();
        ctx.emit(RunEvent::Levels {
            levels,
            settled: false,
        });
    }
}

/// Stream lanes on screen in an open-loop level: a request sent while all are
/// busy streams unpainted (counted in the `unpainted` note).
const OPEN_LOOP_LANES: usize = 16;

/// Open loop: every request sent at its scheduled time whatever the responses
/// (a rate's gaps from `tokenscope_workload::plan`, as the native client draws them;
/// a trace's own times), its latencies from that time (no coordinated
/// omission; the lag between schedule and send is `client_lag_ms`). Bodies are
/// built before the round starts.
async fn run_open(ctx: &Rc<Ctx>, run: &PhaseRun, rate: f64, open: &OpenLoop, round: u32) {
    let reqs = ctx.requests.prepare(run.requests);
    let finished = Rc::new(Cell::new(0u64));
    let in_flight = Rc::new(Cell::new(0u64));
    let last_live = Rc::new(Cell::new(now()));
    let measured = matches!(run.phase, Phase::Round(_));
    let free: Rc<RefCell<Vec<usize>>> = Rc::new(RefCell::new((0..OPEN_LOOP_LANES).rev().collect()));
    let progress = {
        let (ctx, run) = (Rc::clone(ctx), run.clone());
        move |finished: u64| ctx.progress(&run, finished, run.requests)
    };
    progress(0);
    let mut rng = plan::arrival_stream(ctx.input.plan.seed, round);
    let start = now();
    let mut t_next = start;
    for (k, mut req) in reqs.into_iter().enumerate() {
        if ctx.input.cancel.is_cancelled() {
            break;
        }
        let wait = t_next - now();
        if wait > 0.0 {
            sleep_ms(wait).await;
        }
        req.t_scheduled_ms = Some(t_next);
        let lane = free.borrow_mut().pop();
        in_flight.set(in_flight.get() + 1);
        let (ctx2, run2, free, finished, in_flight, last_live, progress) = (
            Rc::clone(ctx),
            run.clone(),
            Rc::clone(&free),
            Rc::clone(&finished),
            Rc::clone(&in_flight),
            Rc::clone(&last_live),
            progress.clone(),
        );
        wasm_bindgen_futures::spawn_local(async move {
            let painter = lane.map(|l| (&ctx2.input.painter, l));
            let sent = run_request(
                &ctx2.transport,
                &req,
                painter,
                ctx2.input.plan.timeout_ms,
                &ctx2.input.cancel,
            )
            .await;
            after_send(
                &ctx2,
                &run2,
                sent,
                &req,
                // Without a lane it streamed unshown: its lane is past the last.
                lane.unwrap_or(OPEN_LOOP_LANES),
            );
            if let Some(l) = lane {
                free.borrow_mut().push(l);
            }
            finished.set(finished.get() + 1);
            in_flight.set(in_flight.get() - 1);
            live(&ctx2, &last_live, measured, || progress(finished.get()));
        });
        t_next = match open {
            OpenLoop::Trace { .. } => match ctx.requests.due_ms(k + 1) {
                Some(t_ms) => start + t_ms,
                None => break,
            },
            OpenLoop::Rate { arrival, cv } => {
                t_next + plan::arrival_gap_ms(&mut rng, rate, *arrival, *cv)
            }
        };
    }
    while in_flight.get() > 0 {
        sleep_ms(10.0).await;
    }
    end_phase(ctx, measured, || progress(finished.get())).await;
}
