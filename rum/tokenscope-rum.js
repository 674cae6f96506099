// tokenscope RUM probe: real users' chat turns as they see them, time to first
// token received and painted, stalls while the answer streams. No dependencies;
// no prompt or answer text ever leaves the page (lengths only). See docs/rum.md.
//
//   import * as tokenscope from './tokenscope-rum.js';
//   tokenscope.init({ collector: '/rum', streams: ['/api/chat'], container: '#answer' });

const SCHEMA = 'tokenscope.rum/1';
const MAX_BATCH_BYTES = 60000; // fetch keepalive allows 64 KiB in flight per page
const MAX_IN_FLIGHT = 2;
const STALLS_MS = [250, 500, 1000];

let cfg = null;
let pageFetch = null;
let sampled = true;
let queue = [];
let inFlight = 0;
let timer = 0;
let restored = false;
const active = new Set();
const now = () => performance.now();

/** Starts the probe (once; later calls return the same handle). */
export function init(options) {
  if (cfg || typeof window === 'undefined' || !window.fetch) return handle;
  const o = options || {};
  if (!o.collector) throw new Error('tokenscope.init: `collector` (a URL path) is required');
  cfg = {
    collector: o.collector,
    streams: (o.streams || []).map(matcher),
    container: o.container || null,
    sampleRate: clamp(o.sampleRate ?? 1, 0, 1),
    slowMs: o.slowMs ?? 2000,
    flushMs: o.flushMs ?? 5000,
    route: o.route || routeOf,
    traceUrls: (o.traceUrls || []).map(matcher),
  };
  sampled = Math.random() < cfg.sampleRate;
  pageFetch = window.fetch;
  window.fetch = function fetch(input, init) {
    return tap(input, init);
  };
  addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'hidden') {
      active.forEach((t) => (t.hidden = true));
      flush();
    }
  }, true);
  addEventListener('pagehide', () => flush(), true);
  addEventListener('pageshow', (e) => { if (e.persisted) restored = true; }, true);
  return handle;
}

/** Sends what is queued now (the probe also does on a timer and when the page hides). */
export function flush() {
  clearTimeout(timer);
  timer = 0;
  while (queue.length && inFlight < MAX_IN_FLIGHT) {
    let body = '';
    let n = 0;
    for (; n < queue.length; n++) {
      const next = JSON.stringify({ schema: SCHEMA, turns: queue.slice(0, n + 1) });
      if (next.length > MAX_BATCH_BYTES && n > 0) break;
      body = next;
    }
    queue = queue.slice(n);
    send(body);
  }
}

const handle = { init, flush };

function send(body) {
  inFlight++;
  const done = () => { inFlight--; if (queue.length) flush(); };
  try {
    pageFetch.call(window, cfg.collector, {
      method: 'POST', body, keepalive: true, credentials: 'omit',
      headers: { 'content-type': 'text/plain' },
    }).then(done, done);
  } catch (_) {
    inFlight--;
    if (!(navigator.sendBeacon && navigator.sendBeacon(cfg.collector, body))) queue = [];
  }
}

function matcher(p) {
  if (p instanceof RegExp) return (u) => p.test(u);
  if (typeof p === 'function') return p;
  return (u) => u.includes(String(p));
}

function clamp(v, lo, hi) {
  return Math.min(hi, Math.max(lo, Number(v) || 0));
}

// A URL's route template: no origin kept, no query, ids replaced.
function routeOf(url) {
  let path;
  try { path = new URL(url, location.href).pathname; } catch (_) { return '?'; }
  return path.split('/').map((s) =>
    /^\d+$|^[0-9a-f-]{16,}$|^[A-Za-z0-9_-]{24,}$/i.test(s) ? ':id' : s).join('/');
}

function urlOf(input) {
  if (typeof input === 'string') return input;
  if (input instanceof URL) return input.href;
  return input && input.url ? input.url : String(input);
}

function tap(input, init) {
  const url = urlOf(input);
  const wanted = cfg.streams.some((m) => m(url));
  if (wanted && cfg.traceUrls.some((m) => m(url))) {
    ({ input, init } = withTraceparent(input, init));
  }
  const t0 = now();
  const turn = newTurn(url, t0);
  const p = pageFetch.call(window, input, init);
  return p.then((res) => {
    const stream = /text\/event-stream|ndjson|jsonl/i.test(res.headers.get('content-type') || '');
    if (!(wanted || (cfg.streams.length === 0 && stream)) || res.type === 'opaque') {
      return res;
    }
    turn.ms.headers = now() - t0;
    if (!res.ok) {
      // An error page is the app's to read; the turn ends with its status.
      turn.outcome = 'error';
      turn.error_kind = 'http_' + res.status;
      finish(turn);
      return res;
    }
    if (!res.body) { finish(turn); return res; }
    return watch(res, turn, stream);
  }, (err) => {
    if (wanted) {
      turn.outcome = isAbort(err) ? 'aborted' : 'error';
      if (turn.outcome === 'error') turn.error_kind = 'network';
      finish(turn);
    }
    throw err;
  });
}

function withTraceparent(input, init) {
  const hex = (n) => Array.from(crypto.getRandomValues(new Uint8Array(n)),
    (b) => b.toString(16).padStart(2, '0')).join('');
  const tp = `00-${hex(16)}-${hex(8)}-01`;
  const headers = new Headers((init && init.headers) || (input instanceof Request ? input.headers : undefined));
  if (!headers.has('traceparent')) headers.set('traceparent', tp);
  return { input, init: { ...(init || {}), headers } };
}

function isAbort(e) {
  return e && (e.name === 'AbortError' || e === 'cancel' || e.name === 'cancel');
}

function newTurn(url, t0) {
  return {
    route: cfg.route(url),
    started_unix_ms: Math.round(performance.timeOrigin + t0),
    t0,
    ms: {},
    chunks: 0, events: 0, chars: 0, paints: 0, merged: 0,
    outcome: 'complete',
    hidden: document.visibilityState === 'hidden',
    restored,
    paint_method: 'raf+task',
    gaps: [], lastChunk: null, lastPaint: null, pending: false, observer: null,
  };
}

// The app reads the same bytes as without the probe, through a stream that
// reads the network's only when the app reads its own: each chunk is stamped as
// the app receives it, and the app's cancel reaches the network.
function watch(res, turn, stream) {
  active.add(turn);
  const dec = new TextDecoder();
  const parse = parser(turn, stream, /ndjson|jsonl/i.test(res.headers.get('content-type') || ''));
  const reader = res.body.getReader();
  const body = new ReadableStream({
    async pull(ctl) {
      let r;
      try {
        r = await reader.read();
      } catch (e) {
        turn.outcome = isAbort(e) ? 'aborted' : 'error';
        if (turn.outcome === 'error') turn.error_kind = 'network';
        finish(turn);
        throw e;
      }
      if (r.done) {
        ctl.close();
        finish(turn);
        return;
      }
      const t = now() - turn.t0;
      if (turn.ms.first_byte === undefined) turn.ms.first_byte = t;
      turn.ms.last_byte = t;
      parse(dec.decode(r.value, { stream: true }), t);
      ctl.enqueue(r.value);
    },
    cancel(reason) {
      turn.outcome = 'aborted';
      finish(turn);
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
  const out = new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  for (const k of ['url', 'redirected', 'type']) Object.defineProperty(out, k, { value: res[k] });
  return out;
}

// SSE (WHATWG rules: LF, CR or CRLF; `data:` lines joined by LF; a blank line
// dispatches) or NDJSON; each event's text delta counted, never kept.
function parser(turn, sse, ndjson) {
  let buf = '';
  let data = null;
  let cr = false;
  return (text, t) => {
    if (!sse && !ndjson) { onText(turn, text.length, t); return; }
    if (cr && text[0] === '\n') text = text.slice(1);
    cr = false;
    buf += text;
    let m;
    const re = /\r\n|\r|\n/g;
    let start = 0;
    while ((m = re.exec(buf))) {
      if (m[0] === '\r' && m.index === buf.length - 1) { cr = true; }
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
  };
}

// One event: the text it adds, by the shapes of OpenAI chat and completions,
// Anthropic messages and the AI SDK's UI message stream; `usage` when given.
function onEvent(turn, data, t) {
  turn.events++;
  if (data === '[DONE]') return;
  let o;
  try { o = JSON.parse(data); } catch (_) { return; }
  if (!o || typeof o !== 'object') return;
  if (o.error || o.type === 'error') { turn.outcome = 'error'; turn.error_kind = 'stream'; }
  const c = o.choices && o.choices[0];
  const d = o.delta || {};
  const text = (c && ((c.delta && c.delta.content) || c.text))
    || (o.type === 'content_block_delta' && d.text)
    || (o.type === 'text-delta' && (typeof o.delta === 'string' ? o.delta : o.textDelta))
    || '';
  const u = o.usage || (o.message && o.message.usage);
  if (u) {
    const out = u.completion_tokens ?? u.output_tokens;
    if (out !== undefined) turn.output_tokens = out;
    const inp = u.prompt_tokens ?? u.input_tokens;
    if (inp !== undefined) turn.input_tokens = inp;
  }
  if (text) onText(turn, text.length, t);
}

function onText(turn, n, t) {
  turn.chunks++;
  turn.chars += n;
  if (turn.lastChunk !== null) turn.gaps.push(t - turn.lastChunk);
  turn.lastChunk = t;
  turn.ms.last_chunk = t;
  if (turn.ms.first_chunk === undefined) {
    turn.ms.first_chunk = t;
    observe(turn);
  }
  turn.unpainted = (turn.unpainted || 0) + 1;
}

function containerOf(turn) {
  const c = cfg.container;
  if (!c) return document.body;
  if (typeof c === 'function') return c(turn.route) || document.body;
  if (typeof c === 'string') return document.querySelector(c) || document.body;
  return c;
}

// Paint: the first DOM change after the first chunk, then the next frame (rAF,
// then a task: the frame has been produced by then).
function observe(turn) {
  const mo = new MutationObserver(() => {
    const t = now() - turn.t0;
    if (turn.ms.first_dom === undefined) turn.ms.first_dom = t;
    if (turn.pending) return;
    turn.pending = true;
    const chunks = turn.unpainted || 0;
    turn.unpainted = 0;
    requestAnimationFrame(() => {
      const ch = new MessageChannel();
      ch.port1.onmessage = () => painted(turn, chunks);
      ch.port2.postMessage(0);
    });
  });
  mo.observe(containerOf(turn), { childList: true, subtree: true, characterData: true });
  turn.observer = mo;
}

function painted(turn, chunks) {
  const t = now() - turn.t0;
  turn.pending = false;
  turn.paints++;
  if (chunks > 1) turn.merged += chunks - 1;
  if (turn.ms.first_paint === undefined) turn.ms.first_paint = t;
  else turn.paintGap = Math.max(turn.paintGap || 0, t - turn.lastPaint);
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
  if (turn.observer) turn.observer.disconnect();
  const ms = turn.ms;
  const stalls = STALLS_MS.map((s) => turn.gaps.filter((g) => g > s).length);
  const rec = {
    route: turn.route,
    started_unix_ms: turn.started_unix_ms,
    ms: {},
    chunks: turn.chunks, events: turn.events, chars: turn.chars,
    paints: turn.paints, chunks_merged: turn.merged,
    stalls_250: stalls[0], stalls_500: stalls[1], stalls_1000: stalls[2],
    longest_gap_ms: round(Math.max(0, ...turn.gaps)),
    longest_paint_gap_ms: turn.hidden ? 0 : round(turn.paintGap || 0),
    outcome: turn.outcome,
    hidden: turn.hidden,
    restored: turn.restored,
    paint_method: turn.paint_method,
  };
  if (turn.error_kind) rec.error_kind = turn.error_kind;
  if (turn.output_tokens !== undefined) rec.output_tokens = turn.output_tokens;
  if (turn.input_tokens !== undefined) rec.input_tokens = turn.input_tokens;
  for (const k of ['headers', 'first_byte', 'first_chunk', 'first_dom', 'first_paint', 'last_chunk', 'last_paint', 'last_byte']) {
    const v = ms[k];
    // A hidden page paints nothing: its paint times are dropped, its network kept.
    if (v === undefined || (turn.hidden && /dom|paint/.test(k))) continue;
    if (!(v >= 0 && v < 3.6e6)) { rec.clamped = (rec.clamped || 0) + 1; continue; }
    rec.ms[k] = round(v);
  }
  if (turn.hidden) rec.paints = 0;
  // Sampling per session; errors, aborts and slow turns always kept (weight 1).
  const special = rec.outcome !== 'complete' || (ms.first_paint ?? ms.first_chunk ?? 0) >= cfg.slowMs;
  if (!special && !sampled) return;
  rec.weight = special ? 1 : 1 / cfg.sampleRate;
  queue.push(rec);
  if (!timer) timer = setTimeout(flush, cfg.flushMs);
}

function round(v) {
  return Math.round(v * 1000) / 1000;
}
