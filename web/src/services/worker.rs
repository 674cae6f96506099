//! The default transport of the page: `fetch` + `ReadableStream` in a dedicated
//! worker (`web/static/net-worker.js`), stamping every read off the main thread.
//!
//! On the main thread, a read can only be stamped between the page's own tasks, and
//! the browser runs a due rendering update before queued network tasks: with
//! several streams, the frame that paints one stream's token delays the next
//! stream's stamp by the frame's length (`?net=main` selects that transport, to
//! compare). In the worker nothing renders, so a stamp is the arrival; the page then
//! parses and paints on the main thread, and whatever the main thread adds shows in
//! the render delay, where the user feels it.
//!
//! The worker posts times as `timeOrigin + now()` (the shared monotonic clock);
//! they are converted to this page's `performance.now()` timeline on arrival.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};

use js_sys::{Array, Reflect, Uint8Array};
use tokenscope_measure::record::ErrorKind;
use tokenscope_render::page::transport::ConnectTiming;
use wasm_bindgen::prelude::*;
use wasm_bindgen::{JsCast, JsValue};

use super::clock::now;
use super::exchange::{Body, Head, LocalFuture, Prepared, Read, ResourceTiming};

/// One message from the worker about a request.
#[derive(Debug)]
enum Msg {
    Sent(f64),
    Head(f64, Head),
    Chunk(f64, Vec<u8>),
    End(f64),
    Error(f64, ErrorKind, String),
}

/// A request's Resource Timing, as the worker reports it (possibly after its end).
#[derive(Default)]
struct Timing {
    /// Once reported.
    reported: Option<ResourceTiming>,
    waker: Option<Waker>,
}

#[derive(Default)]
struct Stream {
    queue: VecDeque<Msg>,
    waker: Option<Waker>,
}

struct Inner {
    worker: web_sys::Worker,
    streams: HashMap<u64, Stream>,
    timings: HashMap<u64, Timing>,
    next_id: u64,
    protocol: Option<String>,
    /// `performance.timeOrigin` of the page, to convert the worker's times.
    origin: f64,
    _on_message: Option<Closure<dyn FnMut(web_sys::MessageEvent)>>,
}

/// The network worker (one per run).
#[derive(Clone)]
pub struct NetWorker {
    inner: Rc<RefCell<Inner>>,
}

impl std::fmt::Debug for NetWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NetWorker")
    }
}

fn get(v: &JsValue, key: &str) -> JsValue {
    Reflect::get(v, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

impl NetWorker {
    /// Start the worker script at `url`.
    pub fn start(url: &str) -> Result<Self, String> {
        let worker = web_sys::Worker::new(url).map_err(|e| {
            format!(
                "cannot start the network worker: {}",
                super::fetch::js_error_text(&e)
            )
        })?;
        let origin = web_sys::window()
            .and_then(|w| w.performance())
            .map(|p| p.time_origin())
            .unwrap_or(0.0);
        let inner = Rc::new(RefCell::new(Inner {
            worker: worker.clone(),
            streams: HashMap::new(),
            timings: HashMap::new(),
            next_id: 0,
            protocol: None,
            origin,
            _on_message: None,
        }));
        let weak = Rc::downgrade(&inner);
        let on_message =
            Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |e: web_sys::MessageEvent| {
                if let Some(inner) = weak.upgrade() {
                    deliver(&inner, &e.data());
                }
            });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        inner.borrow_mut()._on_message = Some(on_message);
        Ok(Self { inner })
    }

    /// The protocol the worker's requests used, once the browser told it.
    pub fn protocol(&self) -> Option<String> {
        self.inner.borrow().protocol.clone()
    }

    fn post(&self, msg: &JsValue) -> Result<(), String> {
        self.inner
            .borrow()
            .worker
            .post_message(msg)
            .map_err(|e| super::fetch::js_error_text(&e))
    }

    async fn next(&self, id: u64) -> Option<Msg> {
        poll_fn(|cx| {
            let mut inner = self.inner.borrow_mut();
            match inner.streams.get_mut(&id) {
                Some(s) => match s.queue.pop_front() {
                    Some(m) => Poll::Ready(Some(m)),
                    None => {
                        s.waker = Some(cx.waker().clone());
                        Poll::Pending
                    }
                },
                None => Poll::Ready(None),
            }
        })
        .await
    }

    /// Request `id`'s Resource Timing on this page's clock: `None` when the
    /// worker does not report it within `wait_ms` of the call.
    pub async fn resource_timing(&self, id: u64, wait_ms: f64) -> Option<ResourceTiming> {
        let reported = poll_fn(|cx| {
            let mut inner = self.inner.borrow_mut();
            match inner.timings.get_mut(&id) {
                Some(t) => match t.reported.take() {
                    Some(rt) => Poll::Ready(Some(rt)),
                    None => {
                        t.waker = Some(cx.waker().clone());
                        Poll::Pending
                    }
                },
                None => Poll::Ready(None),
            }
        });
        let rs = {
            let reported = std::pin::pin!(reported);
            let timer = std::pin::pin!(super::clock::sleep_ms(wait_ms));
            match futures_util::future::select(reported, timer).await {
                futures_util::future::Either::Left((rs, _)) => rs,
                futures_util::future::Either::Right(_) => None,
            }
        };
        self.inner.borrow_mut().timings.remove(&id);
        rs
    }

    fn close(&self, id: u64, abort: bool) {
        let known = self.inner.borrow_mut().streams.remove(&id).is_some();
        if known && abort {
            let msg = js_sys::Object::new();
            let _ = Reflect::set(&msg, &"type".into(), &"abort".into());
            let _ = Reflect::set(&msg, &"id".into(), &JsValue::from_f64(id as f64));
            let _ = self.post(&msg);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.worker.set_onmessage(None);
        self.worker.terminate();
    }
}

/// Route one worker message to its request.
fn deliver(inner: &Rc<RefCell<Inner>>, data: &JsValue) {
    let mut i = inner.borrow_mut();
    let Some(id) = get(data, "id").as_f64().map(|v| v as u64) else {
        return;
    };
    let t = get(data, "t").as_f64().map_or_else(now, |t| t - i.origin);
    let msg = match get(data, "type").as_string().as_deref() {
        Some("sent") => Msg::Sent(t),
        Some("head") => Msg::Head(
            t,
            Head {
                status: get(data, "status").as_f64().unwrap_or(0.0) as u16,
                content_type: get(data, "contentType").as_string(),
            },
        ),
        Some("chunk") => Msg::Chunk(
            t,
            get(data, "bytes")
                .dyn_into::<Uint8Array>()
                .map(|b| b.to_vec())
                .unwrap_or_default(),
        ),
        Some("end") => Msg::End(t),
        Some("timing") => {
            if let Some(p) = get(data, "protocol").as_string().filter(|p| !p.is_empty()) {
                i.protocol = Some(p);
            }
            let origin = i.origin;
            let at = |key: &str| get(data, key).as_f64().map(|t| t - origin);
            let c: Vec<f64> = js_sys::Array::from(&get(data, "connect"))
                .iter()
                .map(|v| v.as_f64().unwrap_or(0.0))
                .collect();
            let rt = ResourceTiming {
                request_start_ms: at("requestStart"),
                response_start_ms: at("responseStart"),
                protocol: get(data, "protocol").as_string().filter(|p| !p.is_empty()),
                connection: match c[..] {
                    [a, b, d, e, f] => ConnectTiming {
                        domain_lookup_start: a,
                        domain_lookup_end: b,
                        connect_start: d,
                        connect_end: e,
                        secure_connection_start: f,
                    }
                    .connection(),
                    _ => None,
                },
            };
            if let Some(slot) = i.timings.get_mut(&id) {
                slot.reported = Some(rt);
                if let Some(w) = slot.waker.take() {
                    w.wake();
                }
            }
            return;
        }
        Some("error") => {
            let name = get(data, "name").as_string().unwrap_or_default();
            let message = get(data, "message").as_string().unwrap_or_default();
            let kind = if name == "AbortError" {
                ErrorKind::Cancelled
            } else if get(data, "phase").as_string().as_deref() == Some("connect") {
                ErrorKind::Connect
            } else {
                ErrorKind::Reset
            };
            Msg::Error(t, kind, format!("{name}: {message}"))
        }
        _ => return,
    };
    if let Some(s) = i.streams.get_mut(&id) {
        s.queue.push_back(msg);
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    }
}

/// Where the worker sends requests.
#[derive(Clone)]
pub struct WorkerTarget {
    /// The worker.
    pub worker: NetWorker,
    /// The endpoint (`.../v1/chat/completions`).
    pub url: String,
    /// The key and extra headers (memory only; they go to the worker by
    /// `postMessage`, never anywhere else).
    pub auth: super::fetch::Auth,
    /// Send `x-request-id`.
    pub send_request_id: bool,
}

impl WorkerTarget {
    /// Build the `send` message ahead of time.
    pub fn build(&self, req: &Prepared) -> Result<(u64, JsValue), (ErrorKind, String)> {
        let id = {
            let mut i = self.worker.inner.borrow_mut();
            i.next_id += 1;
            i.next_id
        };
        let headers = Array::new();
        let pair = |k: &str, v: &str| Array::of2(&JsValue::from_str(k), &JsValue::from_str(v));
        headers.push(&pair("content-type", "application/json"));
        headers.push(&pair("accept", "text/event-stream"));
        for (name, value) in self.auth.pairs() {
            headers.push(&pair(&name, &value));
        }
        if self.send_request_id {
            headers.push(&pair("x-request-id", &req.request_id));
        }
        let msg = js_sys::Object::new();
        let set = |k: &str, v: &JsValue| {
            Reflect::set(&msg, &JsValue::from_str(k), v)
                .map_err(|e| (ErrorKind::Other, super::fetch::js_error_text(&e)))
        };
        set("type", &"send".into())?;
        set("id", &JsValue::from_f64(id as f64))?;
        set("url", &JsValue::from_str(&self.url))?;
        set("headers", &headers)?;
        set("body", &JsValue::from_str(&req.body))?;
        Ok((id, msg.into()))
    }

    /// Send a built request; `on_sent` gets the send stamp (taken in the worker right
    /// before `fetch()`); resolves at the response head.
    pub async fn open(
        &self,
        id: u64,
        msg: &JsValue,
        on_sent: &mut dyn FnMut(f64),
    ) -> Result<(f64, Head, WorkerBody), (ErrorKind, String)> {
        {
            let mut inner = self.worker.inner.borrow_mut();
            inner.streams.insert(id, Stream::default());
            inner.timings.insert(id, Timing::default());
        }
        let body = WorkerBody {
            worker: self.worker.clone(),
            id,
            open: true,
        };
        if let Err(e) = self.worker.post(msg) {
            on_sent(now());
            return Err((ErrorKind::Other, e));
        }
        loop {
            match self.worker.next(id).await {
                Some(Msg::Sent(t)) => on_sent(t),
                Some(Msg::Head(t, head)) => return Ok((t, head, body)),
                Some(Msg::Error(_, kind, message)) => {
                    let message = if kind == ErrorKind::Connect {
                        super::fetch::no_response_message(&message)
                    } else {
                        message
                    };
                    return Err((kind, message));
                }
                Some(_) => {}
                None => {
                    return Err((
                        ErrorKind::Other,
                        "the network worker lost the request".into(),
                    ));
                }
            }
        }
    }
}

/// A response body read by the worker.
pub struct WorkerBody {
    worker: NetWorker,
    id: u64,
    open: bool,
}

impl Body for WorkerBody {
    fn read(&mut self) -> LocalFuture<'_, (f64, Read)> {
        Box::pin(async move {
            if !self.open {
                return (now(), Read::End);
            }
            let read = match self.worker.next(self.id).await {
                Some(Msg::Chunk(t, bytes)) => (t, Read::Bytes(bytes)),
                Some(Msg::End(t)) => (t, Read::End),
                Some(Msg::Error(t, kind, message)) => (t, Read::Error(kind, message)),
                Some(Msg::Sent(t) | Msg::Head(t, _)) => (t, Read::Bytes(Vec::new())),
                None => (now(), Read::End),
            };
            if matches!(read.1, Read::End | Read::Error(..)) {
                self.open = false;
                self.worker.close(self.id, false);
            }
            read
        })
    }

    fn cancel(&mut self) {
        if self.open {
            self.open = false;
            self.worker.close(self.id, true);
        }
    }
}

impl Drop for WorkerBody {
    fn drop(&mut self) {
        // A timed-out or cancelled request: stop the worker's fetch.
        self.cancel();
    }
}
