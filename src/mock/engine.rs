//! The simulator's engine loop on tokio: requests arrive as messages, steps are
//! timed by the model and slept on the runtime's timer, tokens go to each
//! request's stream.

use std::collections::HashMap;

use tokenscope_core::sim::{Admission, Emission, Engine, FaultKind, SimRequest};
use tokio::sync::{mpsc, oneshot};

use crate::engine::clock::Clock;

/// Messages to the engine task.
pub(super) enum EngineMsg {
    Submit {
        req: SimRequest,
        reply: oneshot::Sender<Admission>,
        tokens: mpsc::UnboundedSender<Emission>,
    },
    Cancel(u64),
}

/// The engine loop: admit, step, sleep, emit.
pub(super) async fn engine_task(
    mut engine: Engine,
    mut rx: mpsc::UnboundedReceiver<EngineMsg>,
    clock: Clock,
) {
    let mut senders: HashMap<u64, mpsc::UnboundedSender<Emission>> = HashMap::new();
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
        let Some(ms) = engine.start_step(start) else {
            continue;
        };
        let end = start + ms;
        tokio::time::sleep_until(clock.instant_at(end)).await;
        next_start = Some(end);
        for em in engine.finish_step() {
            let last = em.finished || em.fault.is_some_and(|f| f != FaultKind::Stall);
            if let Some(tx) = senders.get(&em.id)
                && tx.send(em.clone()).is_err()
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
    }
}

fn apply(
    engine: &mut Engine,
    senders: &mut HashMap<u64, mpsc::UnboundedSender<Emission>>,
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
