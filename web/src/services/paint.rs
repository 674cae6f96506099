//! What the user sees, and when: the in-flight responses' text, and the time each
//! request's first token was painted.
//!
//! ## The first-token probe
//!
//! The moment the transport's read carries a request's first token, the text goes
//! into a **freshly inserted element** with its own `elementtiming` name (never
//! batched, never deferred). The element is an `inline-block`: Chromium attributes
//! text to its containing block, so an inline span's text would never be reported. Where the browser has Element Timing (Chromium), a
//! `PerformanceObserver({type: "element", buffered: true})` gives that element's
//! `renderTime`: when the frame holding the first token was presented. Elsewhere
//! (Firefox, Safari) the paint time comes from the animation frame after the DOM
//! update: `performance.now()` read in a task posted from the `requestAnimationFrame`
//! callback, which runs once that frame's rendering (style, layout, paint) is done
//! ([`Fallback::RafTask`], the default). The rAF *timestamp argument* is never used:
//! it is the frame's start and can precede the insertion. Which method produced each
//! request's time is recorded ([`PaintMethod`]).
//!
//! ## Later tokens
//!
//! Later text is batched: queued per lane and written once per animation frame, as
//! text (`CharacterData.appendData` on a text node; never `innerHTML`), so the page
//! does not become the latency it measures. The time of each synchronous probe
//! insertion and of each frame's batched update is recorded (the page's overhead).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use js_sys::{Array, Reflect};
use tokenscope_measure::record::PaintMethod;
use wasm_bindgen::prelude::*;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{Document, Element, Text};

use crate::settings::{PaintFallback, PaintMode};

use super::clock::{now, sleep_ms};

/// How long to wait for an Element Timing entry before settling for the fallback
/// (an element scrolled out of view, or a hidden tab, never reports).
const ELEMENT_TIMING_WAIT_MS: f64 = 1000.0;
/// How long to wait for any paint at all (a hidden tab paints nothing).
const PAINT_WAIT_MS: f64 = 5000.0;

pub use crate::settings::PaintFallback as Fallback;

/// Whether this browser reports Element Timing.
pub fn element_timing_supported() -> bool {
    let Ok(ctor) = Reflect::get(&js_sys::global(), &JsValue::from_str("PerformanceObserver"))
    else {
        return false;
    };
    Reflect::get(&ctor, &JsValue::from_str("supportedEntryTypes"))
        .ok()
        .and_then(|t| t.dyn_into::<Array>().ok())
        .is_some_and(|types| types.includes(&JsValue::from_str("element"), 0))
}

/// The paint state of one request's first token.
#[derive(Debug, Default)]
struct ProbeCell {
    t_inserted: Cell<f64>,
    element_ms: Cell<Option<f64>>,
    fallback_ms: Cell<Option<f64>>,
    /// The paint is settled (the element may leave the page).
    done: Cell<bool>,
}

impl ProbeCell {
    /// Whether the element can be removed without losing its paint entry.
    fn removable(&self) -> bool {
        self.done.get() || self.element_ms.get().is_some()
    }
}

/// A request's first-token paint probe.
#[derive(Debug)]
pub struct Probe {
    cell: Rc<ProbeCell>,
    name: String,
    painter: Painter,
}

/// How a first paint was settled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paint {
    /// The paint time used for the record (`None`: nothing was painted in time).
    pub time: Option<(f64, PaintMethod)>,
    /// The fallback's reading, also kept when Element Timing gave the time (to
    /// compare the two methods on one browser).
    pub fallback_ms: Option<f64>,
    /// When the probe element was inserted.
    pub inserted_ms: f64,
}

impl Probe {
    /// Wait until the paint is known: the Element Timing entry, else (no Element
    /// Timing here, or none came in time) the fallback's reading.
    pub async fn settle(self) -> Paint {
        let use_element = self.painter.inner.borrow().use_element_timing;
        let t0 = self.cell.t_inserted.get();
        let time = loop {
            if let Some(t) = self.cell.element_ms.get() {
                break Some((t, PaintMethod::ElementTiming));
            }
            let fallback = self.cell.fallback_ms.get();
            let waited = now() - t0;
            if let Some(t) = fallback
                && (!use_element || waited > ELEMENT_TIMING_WAIT_MS)
            {
                break Some((t, PaintMethod::RequestAnimationFrame));
            }
            if waited > PAINT_WAIT_MS {
                break None;
            }
            sleep_ms(if fallback.is_some() { 16.0 } else { 8.0 }).await;
        };
        self.cell.done.set(true);
        self.painter.inner.borrow_mut().probes.remove(&self.name);
        self.painter.sweep();
        Paint {
            time,
            fallback_ms: self.cell.fallback_ms.get(),
            inserted_ms: t0,
        }
    }
}

/// One in-flight stream's box on screen.
struct Lane {
    root: Element,
    label: Element,
    body: Element,
    tail: Option<Text>,
    pending: String,
    /// The probe of the response shown.
    current: Option<Rc<ProbeCell>>,
    /// Earlier responses' nodes kept until their first token's paint is settled
    /// (removing an element before it is painted would lose its timing).
    stale: Vec<(Rc<ProbeCell>, Vec<web_sys::Node>)>,
}

impl Lane {
    /// Remove the earlier responses whose paint is settled.
    fn sweep(&mut self) {
        let body = &self.body;
        self.stale.retain(|(probe, nodes)| {
            if !probe.removable() {
                return true;
            }
            for n in nodes {
                let _ = body.remove_child(n);
            }
            false
        });
    }
}

/// The page's own DOM work, ms.
#[derive(Debug, Clone, Default)]
pub struct UpdateCost {
    /// Each synchronous first-token insertion.
    pub insert_ms: Vec<f64>,
    /// Each animation frame's batched text update.
    pub frame_ms: Vec<f64>,
    /// Text events written by the batched updates.
    pub batched_events: u64,
}

/// The Element Timing observer and its callback (kept alive together).
type Observer = (web_sys::PerformanceObserver, Closure<dyn FnMut(JsValue)>);

struct Inner {
    document: Document,
    container: Option<Element>,
    lanes: Vec<Lane>,
    use_element_timing: bool,
    fallback: PaintFallback,
    probes: HashMap<String, Rc<ProbeCell>>,
    seq: u64,
    frame_requested: bool,
    dirty: Vec<usize>,
    /// Probes inserted since the last frame.
    awaiting_frame: Vec<Rc<ProbeCell>>,
    /// Probes waiting for the task posted from a frame (RafTask) or for the next
    /// frame (DoubleRaf).
    awaiting_after: Vec<Vec<Rc<ProbeCell>>>,
    cost: UpdateCost,
    on_frame: Option<Closure<dyn FnMut(f64)>>,
    on_message: Option<Closure<dyn FnMut(JsValue)>>,
    channel: Option<web_sys::MessageChannel>,
    observer: Option<Observer>,
}

/// The stream view and paint probe (one per page).
#[derive(Clone)]
pub struct Painter {
    inner: Rc<RefCell<Inner>>,
}

impl std::fmt::Debug for Painter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Painter")
    }
}

impl Painter {
    /// A painter drawing lanes into `container` (cleared), measuring paint as `mode` says.
    pub fn new(container: Option<Element>, mode: PaintMode, fallback: Fallback) -> Self {
        let document = web_sys::window()
            .and_then(|w| w.document())
            .expect("a document");
        let use_element_timing = mode == PaintMode::Auto && element_timing_supported();
        let painter = Painter {
            inner: Rc::new(RefCell::new(Inner {
                document,
                container,
                lanes: Vec::new(),
                use_element_timing,
                fallback,
                probes: HashMap::new(),
                seq: 0,
                frame_requested: false,
                dirty: Vec::new(),
                awaiting_frame: Vec::new(),
                awaiting_after: Vec::new(),
                cost: UpdateCost::default(),
                on_frame: None,
                on_message: None,
                channel: None,
                observer: None,
            })),
        };
        painter.install();
        painter
    }

    /// Whether Element Timing is in use.
    pub fn uses_element_timing(&self) -> bool {
        self.inner.borrow().use_element_timing
    }

    fn install(&self) {
        // The frame callback (one, reused).
        let weak = Rc::downgrade(&self.inner);
        let on_frame = Closure::<dyn FnMut(f64)>::new(move |_frame_start: f64| {
            // The argument is the frame's start: never used as a paint time.
            if let Some(inner) = weak.upgrade() {
                Painter { inner }.frame();
            }
        });
        // The task posted from a frame callback (runs after that frame's rendering).
        let weak = Rc::downgrade(&self.inner);
        let on_message = Closure::<dyn FnMut(JsValue)>::new(move |_ev: JsValue| {
            let t = now();
            if let Some(inner) = weak.upgrade() {
                let batch = {
                    let mut i = inner.borrow_mut();
                    if i.awaiting_after.is_empty() {
                        Vec::new()
                    } else {
                        i.awaiting_after.remove(0)
                    }
                };
                for p in batch {
                    p.fallback_ms.set(Some(t));
                }
            }
        });
        let channel = web_sys::MessageChannel::new().ok();
        if let Some(ch) = &channel {
            ch.port1()
                .set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        }
        let observer = if self.inner.borrow().use_element_timing {
            self.observe_element_timing()
        } else {
            None
        };
        let mut i = self.inner.borrow_mut();
        i.on_frame = Some(on_frame);
        i.on_message = Some(on_message);
        i.channel = channel;
        i.observer = observer;
    }

    fn observe_element_timing(&self) -> Option<Observer> {
        let weak = Rc::downgrade(&self.inner);
        let callback = Closure::<dyn FnMut(JsValue)>::new(move |list: JsValue| {
            let Some(inner) = weak.upgrade() else { return };
            let list: web_sys::PerformanceObserverEntryList = list.unchecked_into();
            let inner = inner.borrow();
            for entry in list.get_entries().iter() {
                let name = Reflect::get(&entry, &JsValue::from_str("identifier"))
                    .ok()
                    .and_then(|v| v.as_string());
                let render = Reflect::get(&entry, &JsValue::from_str("renderTime"))
                    .ok()
                    .and_then(|v| v.as_f64())
                    .filter(|t| *t > 0.0);
                if let (Some(name), Some(t)) = (name, render)
                    && let Some(cell) = inner.probes.get(&name)
                    && cell.element_ms.get().is_none()
                {
                    cell.element_ms.set(Some(t));
                }
            }
        });
        let observer = web_sys::PerformanceObserver::new(callback.as_ref().unchecked_ref()).ok()?;
        let init = js_sys::Object::new();
        Reflect::set(&init, &"type".into(), &"element".into()).ok()?;
        Reflect::set(&init, &"buffered".into(), &JsValue::TRUE).ok()?;
        observer.observe(init.unchecked_ref());
        Some((observer, callback))
    }

    /// Lay out `n` lanes (one per concurrent stream), replacing the old ones.
    pub fn set_lanes(&self, n: usize) {
        let mut i = self.inner.borrow_mut();
        let Some(container) = i.container.clone() else {
            i.lanes.clear();
            return;
        };
        container.set_text_content(None);
        let columns = match n {
            0..=2 => n.max(1),
            3..=4 => 2,
            5..=9 => 3,
            10..=16 => 4,
            17..=36 => 6,
            _ => 8,
        };
        if let Some(el) = container.dyn_ref::<web_sys::HtmlElement>() {
            // CSSOM (allowed by the Content-Security-Policy), not a style attribute.
            let _ = el.style().set_property(
                "grid-template-columns",
                &format!("repeat({columns}, minmax(0, 1fr))"),
            );
        }
        let doc = i.document.clone();
        let lanes = (0..n)
            .filter_map(|k| {
                let root = doc.create_element("div").ok()?;
                root.set_class_name("lane");
                let label = doc.create_element("div").ok()?;
                label.set_class_name("lane-label");
                label.set_text_content(Some(&format!("slot {}", k + 1)));
                let body = doc.create_element("div").ok()?;
                body.set_class_name("lane-text");
                root.append_child(&label).ok()?;
                root.append_child(&body).ok()?;
                container.append_child(&root).ok()?;
                Some(Lane {
                    root,
                    label,
                    body,
                    tail: None,
                    pending: String::new(),
                    current: None,
                    stale: Vec::new(),
                })
            })
            .collect();
        i.lanes = lanes;
        i.dirty.clear();
    }

    /// A request starts in `lane`: clear it and show the request's id.
    pub fn begin(&self, lane: usize, request_id: &str) {
        let mut i = self.inner.borrow_mut();
        let doc = i.document.clone();
        if let Some(l) = i.lanes.get_mut(lane) {
            l.sweep();
            match l.current.take() {
                // The last response's first token is not painted yet (a short
                // answer): keep it on screen until it is, below a line break.
                Some(probe) if !probe.removable() => {
                    let children = l.body.child_nodes();
                    let mut nodes: Vec<web_sys::Node> = (0..children.length())
                        .filter_map(|k| children.item(k))
                        .collect();
                    if let Ok(br) = doc.create_element("br") {
                        let _ = l.body.append_child(&br);
                        nodes.push(br.into());
                    }
                    l.stale.push((probe, nodes));
                }
                _ if l.stale.is_empty() => l.body.set_text_content(None),
                _ => {}
            }
            l.tail = None;
            l.pending.clear();
            l.label.set_text_content(Some(request_id));
            let _ = l.root.class_list().remove_1("streaming");
        }
    }

    /// The first token arrived: insert it now, in a new element with its own
    /// `elementtiming` name, and start measuring its paint.
    pub fn first_token(&self, lane: usize, text: &str) -> Probe {
        let t_start = now();
        let cell = Rc::new(ProbeCell::default());
        let mut i = self.inner.borrow_mut();
        i.seq += 1;
        let name = format!("tokenscope-first-token-{}", i.seq);
        let doc = i.document.clone();
        if let Some(l) = i.lanes.get_mut(lane)
            && let Ok(span) = doc.create_element("span")
        {
            span.set_class_name("first-token");
            let _ = span.set_attribute("elementtiming", &name);
            // Chromium times text per block: an inline span's text is attributed
            // to its containing block and never reported. An inline-block is its
            // own block (set through CSSOM: no style attribute, CSP-safe).
            if let Some(el) = span.dyn_ref::<web_sys::HtmlElement>() {
                let _ = el.style().set_property("display", "inline-block");
            }
            span.set_text_content(Some(text));
            let tail = doc.create_text_node("");
            let _ = l.body.append_child(&span);
            let _ = l.body.append_child(&tail);
            l.tail = Some(tail);
            l.current = Some(Rc::clone(&cell));
            let _ = l.root.class_list().add_1("streaming");
        }
        let t_inserted = now();
        cell.t_inserted.set(t_inserted);
        i.probes.insert(name.clone(), Rc::clone(&cell));
        i.awaiting_frame.push(Rc::clone(&cell));
        i.cost.insert_ms.push(t_inserted - t_start);
        drop(i);
        self.request_frame();
        Probe {
            cell,
            name,
            painter: self.clone(),
        }
    }

    /// Later text for `lane`: written at the next animation frame.
    pub fn append(&self, lane: usize, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut i = self.inner.borrow_mut();
        let Some(l) = i.lanes.get_mut(lane) else {
            return;
        };
        let was_clean = l.pending.is_empty();
        l.pending.push_str(text);
        if was_clean {
            i.dirty.push(lane);
        }
        drop(i);
        self.request_frame();
    }

    fn request_frame(&self) {
        let mut i = self.inner.borrow_mut();
        if i.frame_requested {
            return;
        }
        if let (Some(w), Some(cb)) = (web_sys::window(), i.on_frame.as_ref())
            && w.request_animation_frame(cb.as_ref().unchecked_ref())
                .is_ok()
        {
            i.frame_requested = true;
        }
    }

    fn frame(&self) {
        let mut i = self.inner.borrow_mut();
        i.frame_requested = false;
        let t0 = now();
        let dirty = std::mem::take(&mut i.dirty);
        let mut events = 0u64;
        for k in &dirty {
            if let Some(l) = i.lanes.get_mut(*k) {
                let text = std::mem::take(&mut l.pending);
                match &l.tail {
                    Some(tail) => {
                        let _ = tail.append_data(&text);
                    }
                    None => {
                        let _ = l.body.append_with_str_1(&text);
                    }
                }
                events += 1;
            }
        }
        if events > 0 {
            i.cost.frame_ms.push(now() - t0);
            i.cost.batched_events += events;
        }
        let probes = std::mem::take(&mut i.awaiting_frame);
        let mut again = false;
        match i.fallback {
            Fallback::Raf => {
                let t = now();
                for p in &probes {
                    p.fallback_ms.set(Some(t));
                }
            }
            Fallback::RafTask => {
                if !probes.is_empty() {
                    i.awaiting_after.push(probes);
                    if let Some(ch) = &i.channel {
                        let _ = ch.port2().post_message(&JsValue::NULL);
                    }
                }
            }
            Fallback::DoubleRaf => {
                // Last frame's probes are stamped now; this frame's wait for the next.
                let t = now();
                for batch in i.awaiting_after.drain(..) {
                    for p in batch {
                        p.fallback_ms.set(Some(t));
                    }
                }
                if !probes.is_empty() {
                    i.awaiting_after.push(probes);
                    again = true;
                }
            }
        }
        drop(i);
        if again {
            self.request_frame();
        }
    }

    /// Remove earlier responses whose first token's paint is settled.
    fn sweep(&self) {
        let mut i = self.inner.borrow_mut();
        for l in &mut i.lanes {
            l.sweep();
        }
    }

    /// The DOM work recorded so far (and reset).
    pub fn take_cost(&self) -> UpdateCost {
        std::mem::take(&mut self.inner.borrow_mut().cost)
    }

    /// Requests whose paint is still awaited.
    pub fn pending_probes(&self) -> usize {
        self.inner.borrow().probes.len()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some((observer, _)) = &self.observer {
            observer.disconnect();
        }
        if let Some(ch) = &self.channel {
            ch.port1().set_onmessage(None);
        }
    }
}
