//! The built-in simulated endpoint: core's simulator model ([`tokenscope_sim`],
//! the same one `tokenscope mock` serves over HTTP) driven by browser timers inside
//! the page, so the static page is a working demo with no server at all.
//!
//! One engine loop runs the model's steps on `setTimeout`; each step's emissions are
//! formatted as SSE bytes by [`StreamWriter`] and queued on the request's body, which
//! the page reads exactly like a `fetch` body (same timeline code, same stamps).
//! Steps are scheduled back to back from the previous step's end, so timer lateness
//! does not accumulate. The simulator logs, per request, when it handed each chunk
//! over (the truth the tests compare the page's measurements against), and
//! answers the page's scrapes with the `/metrics` `tokenscope mock` serves (core's
//! [`Exposition`], fed the same log), so the demo has a server view too.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};

use tokenscope_measure::record::ErrorKind;
use tokenscope_sim::exposition::{Exposition, Gauges, Served};
use tokenscope_sim::{
    Admission, Emission, Engine, FaultAction, SimConfig, SimRequest, StreamWriter,
    context_exceeded_body, immediate_response,
};

use super::clock::{now, sleep_ms};
use super::exchange::{Body, Head, LocalFuture, Prepared, Read};

/// One request as the simulator saw it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SimLog {
    /// The page's request id.
    pub request_id: String,
    /// Received (page clock, ms).
    pub t_received_ms: f64,
    /// When the engine step that admitted it began (its queueing ended).
    pub t_scheduled_ms: Option<f64>,
    /// When each content chunk was handed to the page.
    pub chunk_times_ms: Vec<f64>,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Tokens handed over.
    pub completion_tokens: u64,
    /// When its last chunk was handed over, or when the page let go of it.
    pub t_end_ms: Option<f64>,
    /// It streamed to its end (no fault, not abandoned).
    pub completed: bool,
}

#[derive(Default)]
struct Slot {
    queue: VecDeque<Emission>,
    waker: Option<Waker>,
    log: usize,
}

struct Inner {
    engine: Engine,
    slots: HashMap<u64, Slot>,
    running: bool,
    log: Vec<SimLog>,
    exposition: Exposition,
}

/// The in-page simulated server.
#[derive(Clone)]
pub struct SimServer {
    inner: Rc<RefCell<Inner>>,
    cfg: Rc<SimConfig>,
}

impl SimServer {
    /// A server with this model.
    pub fn new(cfg: SimConfig) -> Self {
        Self {
            inner: Rc::new(RefCell::new(Inner {
                engine: Engine::new(cfg.clone()),
                slots: HashMap::new(),
                running: false,
                log: Vec::new(),
                exposition: Exposition::new(),
            })),
            cfg: Rc::new(cfg),
        }
    }

    /// The model's configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// What the simulator logged so far.
    pub fn log(&self) -> Vec<SimLog> {
        self.inner.borrow().log.clone()
    }

    /// Its `/metrics` now: the text `tokenscope mock` serves in the same state.
    pub fn metrics_text(&self) -> String {
        let inner = self.inner.borrow();
        inner
            .exposition
            .render(Gauges::of(&inner.engine), &self.cfg)
    }

    /// Submit a request; resolves with the response head (never, for a
    /// `no_headers` fault: the client's timeout ends it).
    pub async fn open(&self, req: &Prepared) -> Result<(Head, SimBody), (ErrorKind, String)> {
        let t_received = now();
        let (admission, log) = {
            let mut inner = self.inner.borrow_mut();
            let admission = inner.engine.submit(SimRequest {
                cached_tokens: 0,
                prompt_tokens: req.prompt_tokens,
                max_tokens: req.max_tokens,
            });
            inner.log.push(SimLog {
                request_id: req.request_id.clone(),
                t_received_ms: t_received,
                t_scheduled_ms: None,
                chunk_times_ms: Vec::new(),
                prompt_tokens: req.prompt_tokens,
                completion_tokens: 0,
                t_end_ms: None,
                completed: false,
            });
            (admission, inner.log.len() - 1)
        };
        match admission {
            Admission::Accepted { id } => {
                let start = {
                    let mut inner = self.inner.borrow_mut();
                    inner.slots.insert(
                        id,
                        Slot {
                            log,
                            ..Slot::default()
                        },
                    );
                    !std::mem::replace(&mut inner.running, true)
                };
                if start {
                    let me = self.clone();
                    wasm_bindgen_futures::spawn_local(async move { me.engine_loop().await });
                }
                let writer = StreamWriter::new(
                    req.api,
                    id,
                    &self.cfg.model,
                    true,
                    req.prompt_tokens,
                    self.cfg.seed,
                )
                .with_reasoning(self.cfg.reasoning_tokens);
                Ok((
                    Head {
                        status: 200,
                        content_type: Some("text/event-stream".into()),
                    },
                    SimBody {
                        server: self.clone(),
                        state: BodyState::Stream {
                            id,
                            writer: Box::new(writer),
                            started: false,
                            stall_until: None,
                        },
                    },
                ))
            }
            Admission::ContextExceeded {
                requested, limit, ..
            } => Ok(immediate(
                self,
                400,
                "application/json",
                context_exceeded_body(requested, limit),
            )),
            Admission::Fault { fault, .. } => {
                match immediate_response(fault, self.cfg.retry_after_s) {
                    Some(r) => Ok(immediate(self, r.status, r.content_type, r.body)),
                    None => {
                        // The headers never come.
                        std::future::pending::<()>().await;
                        unreachable!("pending never resolves")
                    }
                }
            }
        }
    }

    /// The engine loop: admit, step, sleep, emit; ends when there is no work.
    async fn engine_loop(&self) {
        let mut next_start: Option<f64> = None;
        loop {
            let step = {
                let mut inner = self.inner.borrow_mut();
                if !inner.engine.has_work() {
                    inner.running = false;
                    return;
                }
                let t = now();
                let start = next_start.map_or(t, |s: f64| s.max(t - 1.0));
                inner.engine.start_step(start).map(|ms| (start, ms))
            };
            let Some((start, ms)) = step else {
                self.inner.borrow_mut().running = false;
                return;
            };
            let end = start + ms;
            sleep_ms(end - now()).await;
            next_start = Some(end);
            let mut inner = self.inner.borrow_mut();
            let emissions = inner.engine.finish_step();
            let t = now();
            for em in emissions {
                let Inner {
                    slots, log, engine, ..
                } = &mut *inner;
                match slots.get_mut(&em.id) {
                    Some(slot) => {
                        let l = &mut log[slot.log];
                        l.t_scheduled_ms.get_or_insert(start);
                        if em.tokens > 0 {
                            l.chunk_times_ms.push(t);
                            l.completion_tokens += u64::from(em.tokens);
                        }
                        if em.finished && em.fault.is_none() {
                            l.completed = true;
                            l.t_end_ms = Some(t);
                        }
                        slot.queue.push_back(em);
                        if let Some(w) = slot.waker.take() {
                            w.wake();
                        }
                    }
                    // The client went away: free the slot.
                    None => engine.cancel(em.id),
                }
            }
        }
    }

    /// The request is over (finished, failed, or let go by the page): free its
    /// slot and count it in the exposition, once.
    fn close(&self, id: u64) {
        let mut inner = self.inner.borrow_mut();
        let Inner {
            slots,
            engine,
            log,
            exposition,
            ..
        } = &mut *inner;
        engine.cancel(id);
        let Some(slot) = slots.remove(&id) else {
            return;
        };
        let l = &mut log[slot.log];
        let t_end_ms = *l.t_end_ms.get_or_insert_with(now);
        exposition.observe(&Served {
            t_received_ms: l.t_received_ms,
            t_scheduled_ms: l.t_scheduled_ms,
            chunk_times_ms: &l.chunk_times_ms,
            prompt_tokens: l.prompt_tokens,
            completion_tokens: l.completion_tokens,
            completed: l.completed,
            t_end_ms,
        });
    }
}

fn immediate(server: &SimServer, status: u16, content_type: &str, body: String) -> (Head, SimBody) {
    (
        Head {
            status,
            content_type: Some(content_type.to_owned()),
        },
        SimBody {
            server: server.clone(),
            state: BodyState::Once(Some(body.into_bytes())),
        },
    )
}

enum BodyState {
    /// A whole body at once (error answers).
    Once(Option<Vec<u8>>),
    /// An event stream fed by the engine.
    Stream {
        id: u64,
        writer: Box<StreamWriter>,
        started: bool,
        stall_until: Option<f64>,
    },
    /// The connection is to be cut at the next read.
    Reset,
    /// Nothing more.
    Ended,
}

/// A simulated response body.
pub struct SimBody {
    server: SimServer,
    state: BodyState,
}

impl SimBody {
    async fn next(&mut self) -> Read {
        let (id, stall) = match &mut self.state {
            BodyState::Once(bytes) => {
                return match bytes.take() {
                    Some(b) => Read::Bytes(b),
                    None => Read::End,
                };
            }
            BodyState::Reset => {
                self.state = BodyState::Ended;
                return Read::Error(ErrorKind::Reset, "simulated: connection reset".into());
            }
            BodyState::Ended => return Read::End,
            BodyState::Stream {
                id, stall_until, ..
            } => (*id, stall_until.take()),
        };
        if let Some(until) = stall {
            sleep_ms(until - now()).await;
        }
        let server = self.server.clone();
        let em = poll_fn(|cx| {
            let mut inner = server.inner.borrow_mut();
            match inner.slots.get_mut(&id) {
                Some(slot) => match slot.queue.pop_front() {
                    Some(em) => Poll::Ready(Some(em)),
                    None => {
                        slot.waker = Some(cx.waker().clone());
                        Poll::Pending
                    }
                },
                None => Poll::Ready(None),
            }
        })
        .await;
        let Some(em) = em else {
            // The engine dropped the request: the body ends without [DONE].
            self.state = BodyState::Ended;
            return Read::End;
        };
        let BodyState::Stream {
            writer,
            started,
            stall_until,
            ..
        } = &mut self.state
        else {
            return Read::End;
        };
        let mut out = String::new();
        if !*started {
            out.push_str(&writer.start());
            *started = true;
        }
        out.push_str(&writer.tokens(em.tokens));
        let mut next = None;
        if let Some(fault) = em.fault {
            match writer.fault(fault, self.server.cfg.stall_ms) {
                FaultAction::SendThenEnd(bytes) => {
                    out.push_str(&bytes);
                    next = Some(BodyState::Ended);
                }
                FaultAction::Reset => next = Some(BodyState::Reset),
                FaultAction::Stall { ms } => *stall_until = Some(now() + ms),
            }
        } else if em.finished {
            out.push_str(&writer.finish());
            next = Some(BodyState::Ended);
        }
        if let Some(n) = next {
            self.server.close(id);
            self.state = n;
        }
        Read::Bytes(out.into_bytes())
    }
}

impl Body for SimBody {
    fn read(&mut self) -> LocalFuture<'_, (f64, Read)> {
        Box::pin(async move {
            let read = self.next().await;
            (now(), read)
        })
    }

    fn cancel(&mut self) {
        if let BodyState::Stream { id, .. } = self.state {
            self.server.close(id);
        }
        self.state = BodyState::Ended;
    }
}

impl Drop for SimBody {
    fn drop(&mut self) {
        // A timed-out or cancelled request frees its engine slot.
        if let BodyState::Stream { id, .. } = self.state {
            self.server.close(id);
        }
    }
}
