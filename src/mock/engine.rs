//! The simulator's engine loop on tokio: requests arrive as messages, steps are
//! timed by the model and slept on the runtime's timer, tokens go to each
//! request's stream.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokenscope_sim::{Admission, Emission, Engine, FaultKind, SimRequest};
use tokio::sync::{mpsc, oneshot};

use tokenscope_loadgen::clock::Clock;

/// Messages to the engine task.
pub(super) enum EngineMsg {
    Submit {
        req: SimRequest,
        reply: oneshot::Sender<Admission>,
        tokens: mpsc::UnboundedSender<Step>,
    },
    Cancel(u64),
}

/// What a request's stream gets after a step: the emission and when the step
/// began. A request's first token ends the step that admitted it, so the first
/// `started_ms` a request sees is when it left the queue.
pub(super) struct Step {
    pub em: Emission,
    pub started_ms: f64,
}

/// The engine's state as `/metrics` shows it, updated after every message and step.
#[derive(Default)]
pub(super) struct Gauges {
    pub running: AtomicU64,
    pub waiting: AtomicU64,
    pub kv_tokens: AtomicU64,
}

impl Gauges {
    fn update(&self, engine: &Engine) {
        self.running
            .store(engine.running() as u64, Ordering::Relaxed);
        self.waiting
            .store(engine.waiting() as u64, Ordering::Relaxed);
        self.kv_tokens.store(engine.kv_tokens(), Ordering::Relaxed);
    }
}

/// The engine loop: admit, step, sleep, emit.
pub(super) async fn engine_task(
    mut engine: Engine,
    mut rx: mpsc::UnboundedReceiver<EngineMsg>,
    clock: Clock,
    gauges: Arc<Gauges>,
) {
    let mut senders: HashMap<u64, mpsc::UnboundedSender<Step>> = HashMap::new();
    // Steps are scheduled back to back from the previous step's end, so timer
    // lateness does not accumulate; after idling, the next step starts now.
    let mut next_start: Option<f64> = None;
    loop {
        if !engine.has_work() {
            next_start = None;
            match rx.recv().await {
                Some(msg) => apply(&mut engine, &mut senders, msg),
                None => return,
            }
        }
        while let Ok(msg) = rx.try_recv() {
            apply(&mut engine, &mut senders, msg);
        }
        let now = clock.now_ms();
        let start = next_start.map_or(now, |s: f64| s.max(now - 1.0));
        let step = engine.start_step(start);
        gauges.update(&engine);
        let Some(ms) = step else {
            continue;
        };
        let end = start + ms;
        tokio::time::sleep_until(clock.instant_at(end)).await;
        next_start = Some(end);
        for em in engine.finish_step() {
            let last = em.finished || em.fault.is_some_and(|f| f != FaultKind::Stall);
            let sent = Step {
                em: em.clone(),
                started_ms: start,
            };
            if let Some(tx) = senders.get(&em.id)
                && tx.send(sent).is_err()
            {
                // The client left: free the slot.
                engine.cancel(em.id);
                senders.remove(&em.id);
                continue;
            }
            if last {
                senders.remove(&em.id);
            }
        }
        gauges.update(&engine);
    }
}

fn apply(
    engine: &mut Engine,
    senders: &mut HashMap<u64, mpsc::UnboundedSender<Step>>,
    msg: EngineMsg,
) {
    match msg {
        EngineMsg::Submit { req, reply, tokens } => {
            let adm = engine.submit(req);
            if let Admission::Accepted { id } = adm {
                senders.insert(id, tokens);
            }
            let _ = reply.send(adm);
        }
        EngineMsg::Cancel(id) => {
            engine.cancel(id);
            senders.remove(&id);
        }
    }
}
