// tokenscope RUM probe: real users' chat turns as they see them, time to first
// token received and painted, stalls while the answer streams. No dependencies;
// no prompt or answer text ever leaves the page (lengths only). See docs/rum.md.
//
//   import * as tokenscope from './tokenscope-rum.js';
//   tokenscope.init({ collector: '/rum', streams: ['/api/chat'], container: '#answer' });
//
// Whatever the probe does, the app's own requests behave as without it: every
// probe step is guarded, and a failure of the probe drops the turn, not the app's.

const SCHEMA = 'tokenscope.rum/1';
// keepalive requests share 64 KiB in flight per page with the app's own: the
// probe keeps one batch of at most 30,000 bytes in flight, the rest by sendBeacon.
const MAX_BATCH_BYTES = 30000;
const MAX_QUEUE = 500;
const MAX_TURN_MS = 600000;
const STALLS_MS = [250, 500, 1000];
// Each text chunk's time is sent for the first MAX_CHUNK_TIMES chunks (the ITL).
const MAX_CHUNK_TIMES = 1000;
const MARK = Symbol.for('tokenscope.rum');

let cfg = null;
let pageFetch = null;
let sampled = true;
let queue = [];
let inFlight = false;
let timer = 0;
let restored = false;
let lastInput = -1e9;
let elementTiming = false;
const watching = new Set();
const frames = [];
const active = new Set();
const now = () => performance.now();

// Starts the probe (once; later calls, or a second copy, return the same handle).
export function init(options) {
  if (cfg || typeof window === 'undefined' || !window.fetch || window.fetch[MARK]) return handle;
  const o = options || {};
  if (!o.collector) throw new Error('tokenscope.init: collector (a URL path) is required');
  cfg = {
    collector: o.collector,
    streams: (o.streams || []).map(matcher),
    container: o.container || null,
    // Weights stay within the collector's 1..10,000.
    sampleRate: ((r) => (r > 0 ? Math.max(r, 1e-4) : 0))(Math.min(1, Math.max(0, Number(o.sampleRate ?? 1) || 0))),
    slowMs: o.slowMs ?? 2000,
    flushMs: o.flushMs ?? 5000,
    route: o.route || routeOf,
    traceUrls: (o.traceUrls || []).map(matcher),
    // 'best': Element Timing where the browser has it, else the next frame;
    // 'frame': the next frame everywhere (the same method across browsers).
    paint: o.paint === 'frame' ? 'frame' : 'best',
    wsTurn: o.wsTurn || ((d) => typeof d === 'string' && /"(messages|prompt|input)"/.test(d)),
  };
  sampled = Math.random() < cfg.sampleRate;
  pageFetch = o.fetch || window.fetch;
  // `patch: false` leaves the globals alone: the app hands `tokenscope.fetch` to
  // its SDK instead (only those requests are seen).
  if (o.patch !== false) {
    const patched = function fetch(input, init) {
      return tap(input, init);
    };
    patched[MARK] = true;
    window.fetch = patched;
    if (window.EventSource) window.EventSource = tapped(window.EventSource, tapEventSource);
    if (window.WebSocket) window.WebSocket = tapped(window.WebSocket, tapWebSocket);
  }
  addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'hidden') {
      active.forEach((t) => (t.hidden = true));
      flush(true);
    }
  }, true);
  addEventListener('pagehide', () => flush(true), true);
  addEventListener('pageshow', (e) => { if (e.persisted) restored = true; }, true);
  // Element Timing: the browser's own paint time of the answer's first text, for
  // the turn whose container holds the element (the app's elementtiming
  // attributes, or the probe's on blocks inserted before the first paint).
  guard(() => {
    if (cfg.paint !== 'best' || !entryTypes().includes('element')) return;
    elementTiming = true;
    new PerformanceObserver((list) => guard(() => {
      for (const e of list.getEntries()) {
        const at = e.renderTime || e.loadTime;
        if (!at || !e.element) continue;
        for (const turn of watching) {
          const t = at - turn.t0;
          const box = containerOf(turn);
          if (turn.etPaint === undefined && t >= turn.ms.first_chunk && box && box.contains(e.element)) turn.etPaint = t;
        }
      }
    })).observe({ type: 'element' });
  });
  // The user's last click or key (the event's own time: its input delay counts).
  const input = (e) => { if (e.isTrusted) lastInput = e.timeStamp; };
  addEventListener('click', input, true);
  addEventListener('keydown', input, true);
  // Frames the main thread held up: long animation frames (their blocking time),
  // or long tasks where the browser has no LoAF.
  guard(() => {
    const types = entryTypes();
    const type = ['long-animation-frame', 'longtask'].find((x) => types.includes(x));
    if (!type) return;
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        frames.push([e.startTime, e.duration, e.blockingDuration ?? Math.max(0, e.duration - 50)]);
      }
      if (frames.length > 100) frames.splice(0, frames.length - 100);
    }).observe({ type });
  });
  return handle;
}

// Sends what is queued now (the probe also does on a timer and when the page hides).
export function flush(leaving) {
  clearTimeout(timer);
  timer = 0;
  while (queue.length) {
    let body = '';
    let n = 0;
    for (; n < queue.length; n++) {
      const next = JSON.stringify({ schema: SCHEMA, turns: queue.slice(0, n + 1) });
      if (next.length > MAX_BATCH_BYTES && n > 0) break;
      body = next;
    }
    if (!inFlight) {
      queue = queue.slice(n);
      send(body);
    } else if (leaving === true && beacon(body)) {
      queue = queue.slice(n);
    } else {
      return;
    }
  }
}

// A `fetch` for an SDK's `fetch` option (`new OpenAI({ fetch: tokenscope.fetch })`,
// the AI SDK's transports, Anthropic's client): the same tap as the patched global,
// for teams that start the probe with `patch: false`. Before `init`, the browser's.
export function fetch(input, init) {
  return cfg ? tap(input, init) : (pageFetch || window.fetch).call(window, input, init);
}

const handle = { init, flush, fetch };

function beacon(body) {
  try {
    return !!(navigator.sendBeacon && navigator.sendBeacon(cfg.collector, body));
  } catch (_) {
    return false;
  }
}

function send(body) {
  inFlight = true;
  // After a failure the rest waits for the timer: a collector that is down is
  // not hammered.
  const done = (ok) => {
    inFlight = false;
    if (queue.length && !timer) timer = setTimeout(flush, ok ? 0 : cfg.flushMs);
  };
  const failed = () => {
    const sent = beacon(body);
    if (!sent) requeue(body);
    done(sent);
  };
  try {
    pageFetch.call(window, cfg.collector, {
      method: 'POST', body, keepalive: true, credentials: 'omit',
      headers: { 'content-type': 'text/plain' },
    }).then((r) => (r.status >= 500 || r.status === 429 ? failed() : done(true)), failed);
  } catch (_) {
    failed();
  }
}

function requeue(body) {
  try {
    queue = JSON.parse(body).turns.concat(queue).slice(0, MAX_QUEUE);
  } catch (_) { /* dropped */ }
}

function matcher(p) {
  if (p instanceof RegExp) return (u) => { p.lastIndex = 0; return p.test(u); };
  if (typeof p === 'function') return p;
  return (u) => u.includes(String(p));
}

// A URL's route template: only http(s) and ws(s), no origin, no query; a segment that is not
// a short plain word (letters, digits, `_`; under 3 digits) becomes `:id`, so
// slugs, ids and encoded text never leave the page.
function routeOf(url) {
  let u;
  try { u = new URL(url, location.href); } catch (_) { return ':other'; }
  if (!/^(https?|wss?):$/.test(u.protocol)) return ':other';
  return u.pathname.split('/').map((s) =>
    s === '' || (/^[a-z][a-z0-9_]{0,23}$/i.test(s) && !/\d{3}/.test(s)) ? s : ':id').join('/');
}

function absolute(input) {
  const u = typeof input === 'string' ? input
    : input instanceof URL ? input.href
    : input && input.url ? input.url : String(input);
  try { return new URL(u, location.href).href; } catch (_) { return u; }
}

function tap(input, init) {
  let turn = null;
  let signal = null;
  try {
    const url = absolute(input);
    const wanted = cfg.streams.some((m) => m(url));
    if (wanted && cfg.traceUrls.some((m) => m(url))) guard(() => ({ input, init } = withTraceparent(input, init)));
    signal = (init && init.signal) || (input instanceof Request ? input.signal : null);
    turn = newTurn(url, now());
    turn.wanted = wanted;
    if (wanted) track(turn);
  } catch (_) {
    turn = null;
  }
  const p = pageFetch.call(window, input, init);
  if (!turn) return p;
  return p.then((res) => {
    try {
      return watchResponse(res, turn);
    } catch (_) {
      active.delete(turn);
      return res;
    }
  }, (err) => {
    if (turn.wanted) {
      guard(() => {
        end(turn, isAbort(err) || (signal && signal.aborted) ? 'aborted' : 'error', 'network');
      });
    }
    throw err;
  });
}

function entryTypes() {
  return PerformanceObserver.supportedEntryTypes || [];
}

function guard(f) {
  // A failure is the probe's loss, never the app's.
  try { f(); } catch (_) { /* dropped */ }
}

function watchResponse(res, turn) {
  const type = res.headers.get('content-type') || '';
  const stream = /text\/event-stream|ndjson|jsonl/i.test(type);
  if (!(turn.wanted || (cfg.streams.length === 0 && stream))
    || res.type === 'opaque' || res.type === 'opaqueredirect') {
    active.delete(turn);
    return res;
  }
  track(turn);
  turn.ms.headers = now() - turn.t0;
  if (!res.ok) {
    // An error page is the app's to read; the turn ends with its status.
    end(turn, 'error', 'http_' + res.status);
    return res;
  }
  if (!res.body || res.status === 204 || res.status === 205) {
    finish(turn);
    return res;
  }
  return watch(res, turn, stream, /ndjson|jsonl/i.test(type));
}

function end(turn, outcome, kind) {
  if (turn.done) return;
  turn.outcome = outcome;
  if (outcome === 'error') turn.error_kind = kind;
  finish(turn);
}

// A constructor that builds the page's own object (a subclass's too: new.target)
// and, for a stream URL, hands it to `on`.
function tapped(Page, on) {
  function Tapped(url) {
    const o = Reflect.construct(Page, arguments, new.target || Tapped);
    guard(() => {
      const u = absolute(url);
      if (cfg.streams.some((m) => m(u))) on(o, u);
    });
    return o;
  }
  Tapped.prototype = Page.prototype;
  Object.setPrototypeOf(Tapped, Page);
  return Tapped;
}

// EventSource: the same turn, from the constructor to close() (or the first
// error: the browser would reconnect, which a chat answer does not want; what a
// reconnection brings is not the turn's). Only unnamed (`message`) events are
// seen, as the app's onmessage sees them.
function tapEventSource(es, u) {
  const turn = newTurn(u, now());
  track(turn);
  const t = () => now() - turn.t0;
  es.addEventListener('open', () => { if (!turn.done) turn.ms.headers = t(); });
  es.addEventListener('message', (e) => guard(() => {
    if (turn.done) return;
    const at = t();
    if (turn.ms.first_byte === undefined) turn.ms.first_byte = at;
    turn.ms.last_byte = at;
    onEvent(turn, e.data, at);
  }));
  es.addEventListener('error', () => guard(() => {
    if (turn.chunks) finish(turn); else end(turn, 'error', 'network');
  }));
  const close = es.close;
  es.close = function () { guard(() => finish(turn)); return close.call(es); };
}

// WebSocket: one socket carries many turns. A turn starts when the app sends a
// chat request (`wsTurn`: by default a string naming `messages`, `prompt` or
// `input`; heartbeats, acks and audio frames are not turns) and ends at the
// answer's last event (`[DONE]`, Anthropic's message_stop, the AI SDK's finish),
// a second after a finish_reason with nothing more, or else at the app's next
// request or the socket's close (aborted or failed). Each text message is one
// event, parsed as an SSE event's data (a `data: ` prefix is taken off).
function tapWebSocket(ws, u) {
  let turn = null;
  const live = () => turn && !turn.done;
  const send = ws.send;
  ws.send = function (data) {
    guard(() => {
      if (!cfg.wsTurn(data)) return;
      if (live()) end(turn, turn.finishing ? 'complete' : 'aborted');
      turn = newTurn(u, now());
      track(turn);
    });
    return send.call(ws, data);
  };
  ws.addEventListener('message', (e) => guard(() => {
    if (!live() || typeof e.data !== 'string') return;
    const at = now() - turn.t0;
    if (turn.ms.first_byte === undefined) turn.ms.first_byte = at;
    turn.ms.last_byte = at;
    onEvent(turn, e.data.replace(/^data: ?/, ''), at);
    if (turn.ended) finish(turn);
    else if (turn.finishing) {
      const t = turn;
      clearTimeout(t.fin);
      t.fin = setTimeout(() => finish(t), 1000);
    }
  }));
  ws.addEventListener('close', () => guard(() => {
    if (live()) end(turn, turn.finishing ? 'complete' : 'error', 'network');
  }));
}

function withTraceparent(input, init) {
  // Random trace and span ids (UUIDs' hex digits: on https and localhost pages;
  // elsewhere no traceparent, the turn still measured).
  const hex = () => crypto.randomUUID().replace(/-/g, '');
  const tp = `00-${hex()}-${hex().slice(16)}-01`;
  const headers = new Headers((init && init.headers) || (input instanceof Request ? input.headers : undefined));
  if (!headers.has('traceparent')) headers.set('traceparent', tp);
  return { input, init: { ...(init || {}), headers } };
}

function isAbort(e) {
  return e && e.name === 'AbortError';
}

function newTurn(url, t0) {
  return {
    route: cfg.route(url),
    started_unix_ms: Math.round(performance.timeOrigin + t0),
    t0,
    ms: {},
    chunks: 0, events: 0, chars: 0, paints: 0, merged: 0, chunkMs: [],
    stalls: [0, 0, 0], longestGap: 0, paintGap: 0,
    outcome: 'complete',
    hidden: document.visibilityState === 'hidden',
    restored,
    paint_method: 'raf+task',
    lastChunk: null, lastPaint: null, pending: false, observer: null,
    // The user's click or key that sent it, when within a second.
    input: t0 - lastInput < 1000 ? t0 - lastInput : undefined,
  };
}

// A turn is followed from here on; one that never ends (the app never read it, a
// feed that never closes) is sent as aborted after MAX_TURN_MS.
function track(turn) {
  if (active.has(turn)) return;
  active.add(turn);
  turn.expiry = setTimeout(() => guard(() => end(turn, 'aborted')), MAX_TURN_MS);
}

// The app reads the same bytes as without the probe, through a byte stream that
// reads the network's only when the app reads its own: each chunk is stamped as
// the app receives it, and the app's cancel reaches the network first.
function watch(res, turn, sse, ndjson) {
  const dec = new TextDecoder();
  const parse = parser(turn, sse, ndjson);
  const reader = res.body.getReader();
  const source = {
    async pull(ctl) {
      let r;
      try {
        r = await reader.read();
      } catch (e) {
        guard(() => end(turn, isAbort(e) ? 'aborted' : 'error', 'network'));
        throw e;
      }
      if (r.done) {
        guard(() => { parse(dec.decode(), now() - turn.t0, true); finish(turn); });
        ctl.close();
        return;
      }
      guard(() => {
        const t = now() - turn.t0;
        if (turn.ms.first_byte === undefined) turn.ms.first_byte = t;
        turn.ms.last_byte = t;
        parse(dec.decode(r.value, { stream: true }), t, false);
      });
      ctl.enqueue(r.value);
    },
    cancel(reason) {
      const cancelled = reader.cancel(reason);
      guard(() => end(turn, 'aborted'));
      return cancelled;
    },
  };
  let body;
  try {
    body = new ReadableStream({ type: 'bytes', ...source });
  } catch (_) {
    body = new ReadableStream(source, { highWaterMark: 0 });
  }
  const out = new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  sameAs(out, res);
  return out;
}

// What a Response built here cannot take from its init: url, redirected, type,
// also on its clones.
function sameAs(out, res) {
  for (const k of ['url', 'redirected', 'type']) Object.defineProperty(out, k, { value: res[k] });
  const clone = out.clone;
  Object.defineProperty(out, 'clone', {
    value() { const c = clone.call(this); sameAs(c, res); return c; },
  });
}

// SSE (WHATWG rules: LF, CR or CRLF; `data:` lines joined by LF; a blank line
// dispatches; an event the stream ends inside is discarded) or NDJSON (a last line
// without its newline counts); each event's text delta counted, never kept.
function parser(turn, sse, ndjson) {
  let buf = '';
  let data = null;
  let cr = false;
  return (text, t, last) => {
    if (!sse && !ndjson) { if (text) onText(turn, text, t); return; }
    if (cr && text[0] === '\n') text = text.slice(1);
    cr = false;
    buf += text;
    const re = /\r\n|\r|\n/g;
    let start = 0;
    let m;
    while ((m = re.exec(buf))) {
      if (m[0] === '\r' && m.index === buf.length - 1) cr = true;
      const line = buf.slice(start, m.index);
      start = m.index + m[0].length;
      if (ndjson) { if (line.trim()) onEvent(turn, line, t); continue; }
      if (line === '') { if (data !== null) onEvent(turn, data, t); data = null; continue; }
      if (line[0] === ':') continue;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? '' : line.slice(i + 1);
      if (value[0] === ' ') value = value.slice(1);
      if (field === 'data') data = data === null ? value : data + '\n' + value;
    }
    buf = buf.slice(start);
    if (last && ndjson && buf.trim()) onEvent(turn, buf, t);
  };
}

// One event: the text it adds, by the shapes of OpenAI chat and completions,
// OpenAI's Responses API, Anthropic messages and the AI SDK's UI message
// stream; `usage` when given.
function onEvent(turn, data, t) {
  turn.events++;
  if (data === '[DONE]') { turn.ended = true; return; }
  let o;
  try { o = JSON.parse(data); } catch (_) { return; }
  if (!o || typeof o !== 'object') return;
  if (o.error || o.type === 'error' || o.type === 'response.failed') { turn.outcome = 'error'; turn.error_kind = 'stream'; }
  const c = o.choices && o.choices[0];
  if (c && c.finish_reason) turn.finishing = true;
  if (o.type === 'message_stop' || o.type === 'finish' || o.type === 'response.completed' || o.type === 'response.incomplete') turn.ended = true;
  const d = o.delta || {};
  const text = (c && ((c.delta && c.delta.content) || c.text))
    || (o.type === 'content_block_delta' && d.text)
    || (o.type === 'text-delta' && (typeof o.delta === 'string' ? o.delta : o.textDelta))
    || ((o.type === 'response.output_text.delta' || o.type === 'response.refusal.delta') && typeof o.delta === 'string' && o.delta)
    || '';
  // llama.cpp's own time to the first token: the server's part of the TTFT.
  const pm = o.timings && o.timings.prompt_ms;
  if (typeof pm === 'number' && pm >= 0 && pm < 3.6e6) turn.server_prefill_ms = round(pm);
  const u = o.usage || (o.message && o.message.usage) || (o.response && o.response.usage);
  if (u) {
    const out = u.completion_tokens ?? u.output_tokens;
    if (out !== undefined) turn.output_tokens = out;
    const inp = u.prompt_tokens ?? u.input_tokens;
    if (inp !== undefined) turn.input_tokens = inp;
  }
  if (typeof text === 'string' && text) onText(turn, text, t);
}

function onText(turn, text, t) {
  turn.chunks++;
  turn.chars += text.length;
  if (turn.lastChunk !== null) {
    const gap = t - turn.lastChunk;
    turn.longestGap = Math.max(turn.longestGap, gap);
    STALLS_MS.forEach((s, i) => { if (gap > s) turn.stalls[i]++; });
  }
  turn.lastChunk = t;
  turn.ms.last_chunk = t;
  if (turn.chunkMs.length < MAX_CHUNK_TIMES) turn.chunkMs.push(Math.round(t * 10) / 10);
  if (turn.ms.first_chunk === undefined) {
    turn.ms.first_chunk = t;
    // Without a configured container, the answer is where this text shows up:
    // its first characters are kept (in memory only) to recognise it.
    if (!cfg.container) turn.head = text.trim().slice(0, 16);
    observe(turn);
  }
  turn.unpainted = (turn.unpainted || 0) + 1;
}

// The answer's container; none found yet: undefined.
function containerOf(turn) {
  const c = cfg.container;
  if (!c) return turn.box;
  if (typeof c === 'function') return c(turn.route) || document.body;
  if (typeof c === 'string') return document.querySelector(c) || document.body;
  return c;
}

// Paint: the first DOM change after the first chunk, then the next frame (rAF,
// then a task: the frame has been produced by then).
function observe(turn) {
  const mo = new MutationObserver((records) => guard(() => {
    const t = now() - turn.t0;
    if (turn.head && !turn.box) {
      // The first change that shows the answer's first text (new nodes, or a text
      // node's new data), not a spinner's or a clock's.
      for (const r of records) {
        for (const n of r.type === 'characterData' ? [r.target] : r.addedNodes) {
          if (!turn.box && (n.nodeType === 3 ? n.data : n.textContent || '').includes(turn.head)) {
            turn.box = n.nodeType === 3 ? n.parentElement : n;
          }
        }
      }
      if (!turn.box) return;
      // From here on only the answer's part of the page (its block and siblings).
      mo.disconnect();
      mo.observe(turn.box.parentElement || turn.box, opts);
    }
    if (turn.ms.first_dom === undefined) turn.ms.first_dom = t;
    if (elementTiming && turn.ms.first_paint === undefined) {
      for (const r of records) {
        for (const n of r.addedNodes) {
          const box = containerOf(turn);
          if (n.nodeType === 1 && !n.hasAttribute('elementtiming') && box && box.contains(n)) n.setAttribute('elementtiming', 'tokenscope');
        }
      }
    }
    if (turn.pending || turn.closed) return;
    turn.pending = true;
    const chunks = turn.unpainted || 0;
    turn.unpainted = 0;
    requestAnimationFrame(() => {
      const ch = new MessageChannel();
      ch.port1.onmessage = () => { ch.port1.close(); guard(() => painted(turn, chunks)); };
      ch.port2.postMessage(0);
    });
  }));
  const opts = { childList: true, subtree: true, characterData: true };
  mo.observe(containerOf(turn) || document.body, opts);
  turn.observer = mo;
  watching.add(turn);
}

function painted(turn, chunks) {
  const t = now() - turn.t0;
  turn.pending = false;
  if (turn.closed) return;
  turn.paints++;
  if (chunks > 1) turn.merged += chunks - 1;
  if (turn.ms.first_paint === undefined) turn.ms.first_paint = t;
  else turn.paintGap = Math.max(turn.paintGap, t - turn.lastPaint);
  turn.lastPaint = t;
  turn.ms.last_paint = t;
  if (turn.done) close(turn);
}

function finish(turn) {
  if (turn.done) return;
  turn.done = true;
  active.delete(turn);
  if (!turn.observer) { close(turn); return; }
  // The last chunk's paint comes a frame or so later; a hidden page has no frames.
  requestAnimationFrame(() => setTimeout(() => { if (!turn.pending) close(turn); }, 50));
  setTimeout(() => close(turn), 1000);
}

function close(turn) {
  if (turn.closed) return;
  turn.closed = true;
  clearTimeout(turn.expiry);
  if (turn.observer) turn.observer.disconnect();
  watching.delete(turn);
  const ms = turn.ms;
  if (turn.etPaint >= (ms.first_dom ?? 0)) {
    ms.first_paint = turn.etPaint;
    ms.last_paint = Math.max(ms.last_paint ?? 0, turn.etPaint);
    turn.paint_method = 'element';
  }
  const rec = {
    route: turn.route,
    started_unix_ms: turn.started_unix_ms,
    ms: {},
    chunks: turn.chunks, events: turn.events, chars: turn.chars,
    paints: turn.hidden ? 0 : turn.paints, chunks_merged: turn.merged,
    stalls_250: turn.stalls[0], stalls_500: turn.stalls[1], stalls_1000: turn.stalls[2],
    longest_gap_ms: round(turn.longestGap),
    longest_paint_gap_ms: turn.hidden ? 0 : round(turn.paintGap),
    outcome: turn.outcome,
    hidden: turn.hidden,
    restored: turn.restored,
    paint_method: turn.paint_method,
  };
  if (turn.error_kind) rec.error_kind = turn.error_kind;
  if (turn.output_tokens !== undefined) rec.output_tokens = turn.output_tokens;
  if (turn.input_tokens !== undefined) rec.input_tokens = turn.input_tokens;
  if (turn.server_prefill_ms !== undefined) rec.server_prefill_ms = turn.server_prefill_ms;
  if (turn.input >= 0) rec.input_to_fetch_ms = round(turn.input);
  // Long frames that overlapped the turn, and the time they blocked input.
  const endAt = turn.t0 + (ms.last_paint ?? ms.last_byte ?? ms.last_chunk ?? 0);
  let n = 0;
  let blocked = 0;
  for (const [start, dur, blocking] of frames) {
    if (start < endAt && start + dur > turn.t0) { n++; blocked += blocking; }
  }
  // Sent when there were some (a browser without LoAF or long tasks sends none).
  if (n) { rec.long_frames = n; rec.blocking_ms = round(blocked); }
  // turn.ms holds only the times a turn sends (headers ... last_byte).
  for (const k of Object.keys(ms)) {
    const v = ms[k];
    // A hidden page paints nothing: its paint times are dropped, its network kept.
    if (v === undefined || (turn.hidden && /dom|paint/.test(k))) continue;
    if (!(v >= 0 && v < 3.6e6)) { rec.clamped = (rec.clamped || 0) + 1; continue; }
    rec.ms[k] = round(v);
  }
  if (turn.chunkMs.length && rec.ms.first_chunk !== undefined) rec.chunk_ms = turn.chunkMs.slice();
  // Sampling per session; errors, aborts and slow turns always kept (weight 1).
  const ttft = turn.hidden ? ms.first_chunk : (ms.first_paint ?? ms.first_chunk);
  const special = rec.outcome !== 'complete' || (ttft ?? 0) >= cfg.slowMs;
  if (!special && !sampled) return;
  rec.weight = special ? 1 : 1 / cfg.sampleRate;
  if (queue.length < MAX_QUEUE) queue.push(rec);
  if (!timer) timer = setTimeout(flush, cfg.flushMs);
}

function round(v) {
  return Math.round(v * 1000) / 1000;
}
