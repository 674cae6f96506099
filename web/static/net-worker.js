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
//               {type: "end", id, t, protocol}
//               {type: "error", id, t, phase: "connect" | "stream", name, message}
"use strict";

const inflight = new Map();
const clock = () => performance.timeOrigin + performance.now();

// Resource Timing entries are only read here (protocol), so keep them few.
function protocolOf(url) {
  const entries = performance.getEntriesByName(url);
  let protocol = null;
  for (let i = entries.length - 1; i >= 0; i--) {
    if (entries[i].nextHopProtocol) {
      protocol = entries[i].nextHopProtocol;
      break;
    }
  }
  if (entries.length > 100) performance.clearResourceTimings();
  return protocol;
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
  const tSend = clock();
  const pending = fetch(m.url, init);
  self.postMessage({ type: "sent", id: m.id, t: tSend });
  try {
    response = await pending;
  } catch (err) {
    const t = clock();
    inflight.delete(m.id);
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
        self.postMessage({ type: "end", id: m.id, t, protocol: protocolOf(m.url) });
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
