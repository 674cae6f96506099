// tokenscope's network worker: streams requests with fetch + ReadableStream off the
// page's main thread, and stamps performance.now() the moment each read resolves.
//
// On the main thread a read's promise can only resolve between the page's own
// tasks, and the browser runs a due rendering update (style, layout, paint) before
// queued network tasks: with several streams, the frame drawn for one stream's
// token delays the next stream's stamp by the frame's length. Here nothing renders,
// so a stamp is the arrival. The page parses and paints on the main thread, so the
// render delay (paint minus this stamp) holds whatever the main thread added, as the
// user sees it.
//
// Times are posted as performance.timeOrigin + performance.now(): the same shared
// monotonic clock as the page's, which subtracts its own timeOrigin.
//
// Messages in:  {type: "send", id, url, headers: [[name, value]...], body}
//               {type: "abort", id}
// Messages out: {type: "sent", id, t}
//               {type: "head", id, t, status, contentType}
//               {type: "chunk", id, t, bytes}            (bytes: a transferred Uint8Array)
//               {type: "end", id, t}
//               {type: "error", id, t, phase: "connect" | "stream", name, message}
//               {type: "timing", id, requestStart, responseStart, protocol, connect}
//
// "timing" is the request's Resource Timing entry, once the browser has made it
// (when the response ended; it may come after "end"): requestStart and
// responseStart (shared clock, like t) are when the browser's network stack began
// sending the request and had the response's first bytes, null where the browser
// hides them (a cross-origin endpoint without Timing-Allow-Origin);
// protocol is its nextHopProtocol ("http/1.1", "h2"), null when hidden; connect is
// [domainLookupStart, domainLookupEnd, connectStart, connectEnd,
// secureConnectionStart] as the entry has them (all 0 when hidden).
"use strict";

const inflight = new Map();
const clock = () => performance.timeOrigin + performance.now();

// Requests waiting for their Resource Timing entry: id -> {url, start, ended}
// (start: this worker's performance.now() right before fetch(), which the
// entry's startTime follows within a fraction of a millisecond; only an ended
// request claims an entry, the closest in start among those for its URL).
const awaiting = new Map();
// Entries seen before their request asked (the observer may be first).
let unclaimed = [];
const MATCH_MS = 50;
const WAIT_MS = 5000;

function timingOf(entry) {
  const at = (t) => (t > 0 ? performance.timeOrigin + t : null);
  return {
    requestStart: at(entry.requestStart),
    responseStart: at(entry.responseStart),
    protocol: entry.nextHopProtocol || null,
    connect: [entry.domainLookupStart, entry.domainLookupEnd, entry.connectStart, entry.connectEnd, entry.secureConnectionStart],
  };
}

// The entry of request `id` among `entries`: same URL, the closest start.
function claim(id, entries) {
  const want = awaiting.get(id);
  if (!want) return false;
  let best = -1;
  let bestGap = MATCH_MS;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    if (e.name !== want.url) continue;
    const gap = Math.abs(e.startTime - want.start);
    if (gap <= bestGap) {
      best = i;
      bestGap = gap;
    }
  }
  if (best < 0) return false;
  const entry = entries.splice(best, 1)[0];
  awaiting.delete(id);
  self.postMessage(Object.assign({ type: "timing", id }, timingOf(entry)));
  return true;
}

// Entries as the browser makes them; the buffer is emptied at once (the observer
// sees every entry whatever the buffer holds).
// A browser without resource entries in workers leaves the times unreported: the
// streams are measured all the same.
try {
  new PerformanceObserver((list) => {
    unclaimed = unclaimed.concat(list.getEntriesByType("resource"));
    performance.clearResourceTimings();
    for (const [id, want] of Array.from(awaiting)) if (want.ended) claim(id, unclaimed);
    const old = performance.now() - WAIT_MS;
    unclaimed = unclaimed.filter((e) => e.responseEnd > old);
  }).observe({ type: "resource" });
} catch (e) {
  // no PerformanceObserver for "resource" here
}

// A request that ended: its entry now, or when the observer brings it; given up
// after WAIT_MS (the page then records no responseStart).
function lookUp(id) {
  const want = awaiting.get(id);
  if (!want) return;
  want.ended = true;
  if (claim(id, unclaimed)) return;
  setTimeout(() => awaiting.delete(id), WAIT_MS);
}

async function send(m) {
  const controller = new AbortController();
  inflight.set(m.id, controller);
  const init = {
    method: "POST",
    headers: m.headers,
    body: m.body,
    signal: controller.signal,
    mode: "cors",
    credentials: "omit",
  };
  let response;
  // The request starts right after the stamp; telling the page comes after.
  awaiting.set(m.id, { url: new URL(m.url, self.location.href).href, start: performance.now() });
  const tSend = clock();
  const pending = fetch(m.url, init);
  self.postMessage({ type: "sent", id: m.id, t: tSend });
  try {
    response = await pending;
  } catch (err) {
    const t = clock();
    inflight.delete(m.id);
    awaiting.delete(m.id);
    self.postMessage({ type: "error", id: m.id, t, phase: "connect", name: err.name, message: String(err.message || err) });
    return;
  }
  const tHead = clock();
  self.postMessage({
    type: "head",
    id: m.id,
    t: tHead,
    status: response.status,
    contentType: response.headers.get("content-type"),
  });
  const reader = response.body ? response.body.getReader() : null;
  try {
    for (;;) {
      const r = reader ? await reader.read() : { done: true };
      const t = clock();
      if (r.done) {
        self.postMessage({ type: "end", id: m.id, t });
        lookUp(m.id);
        break;
      }
      let bytes = r.value;
      if (bytes.byteOffset !== 0 || bytes.byteLength !== bytes.buffer.byteLength) {
        bytes = bytes.slice();
      }
      self.postMessage({ type: "chunk", id: m.id, t, bytes }, [bytes.buffer]);
    }
  } catch (err) {
    const t = clock();
    self.postMessage({ type: "error", id: m.id, t, phase: "stream", name: err.name, message: String(err.message || err) });
    lookUp(m.id);
  } finally {
    inflight.delete(m.id);
  }
}

self.onmessage = (e) => {
  const m = e.data;
  if (m.type === "send") {
    send(m);
  } else if (m.type === "abort") {
    const c = inflight.get(m.id);
    if (c) c.abort();
  }
};
