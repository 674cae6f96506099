// The Real users view: a small chat UI with the RUM probe (rum/tokenscope-rum.js)
// embedded as a product embeds it, and the turns the probe collected. Loaded by
// boot.js only when the view opens; the page calls mount(root, endpoint) with the
// endpoint the Benchmark view is set to:
//   { sim, model }                      the built-in simulator (a DemoSim from the
//                                       page's wasm: the benchmark's own simulator)
//   { url, modelsUrl, model, headers }  a real endpoint (CORS as for a benchmark)
//
// The probe runs unchanged, started with `patch: false` and this page's `fetch`
// (the chat calls `tokenscope.fetch`, as an app hands it to its SDK): requests to
// the simulator's URL are answered in the page through a real Response whose body
// the simulator feeds, beacons to the collector's URL are kept here, the rest goes
// to the network. So the table shows exactly what a collector would receive (no
// prompt or answer text: lengths and times only), and, for the simulator, the
// server's own time to the first token beside it, from the simulator's log.

const SIM_URL = new URL('./sim/v1/chat/completions', location.href).href;
const COLLECT_URL = new URL('./collect', location.href).href;

let probe = null;
let endpoint = null;
let ui = null;
let sending = null;
const turns = [];
// The simulator's log: [received, first token] per request, on the page's clock.
const truth = [];
const pageFetch = window.fetch.bind(window);

// The page's own network, as the probe sees it.
function network(input, init) {
  const url = typeof input === 'string' ? new URL(input, location.href).href : input.url;
  if (url === COLLECT_URL) {
    collect(init && init.body);
    return Promise.resolve(new Response(null, { status: 204 }));
  }
  if (url === SIM_URL && endpoint && endpoint.sim) return simFetch(endpoint.sim, init || {});
  return pageFetch(input, init);
}

// The simulator's answer as a fetch Response: the simulator pushes its bytes
// into the body as a network does; an abort of the request's signal rejects the
// fetch or errors the body with an AbortError, as the browser's fetch does.
function simFetch(open, init) {
  const signal = init.signal;
  const aborted = () => new DOMException('The operation was aborted.', 'AbortError');
  if (signal && signal.aborted) return Promise.reject(aborted());
  let body;
  try {
    body = JSON.parse(String(init.body ?? '{}'));
  } catch (_) {
    return Promise.reject(new TypeError('simulated server: the body is not JSON'));
  }
  const prompt = (body.messages || []).map((m) => (typeof m.content === 'string' ? m.content : '')).join('\n');
  return new Promise((resolve, reject) => {
    let ctl = null;
    const req = { prompt, max_tokens: body.max_tokens ?? body.max_completion_tokens ?? 128, cancelled: false };
    const fail = (e) => {
      req.cancelled = true;
      reject(e);
      if (ctl) try { ctl.error(e); } catch (_) { /* already closed */ }
    };
    if (signal) signal.addEventListener('abort', () => fail(aborted()), { once: true });
    req.sink = (kind, value) => {
      if (kind === 'truth') { truth.push(value); render(); return; }
      if (req.cancelled) return;
      if (kind === 'head') {
        const stream = new ReadableStream({
          start(c) { ctl = c; },
          cancel() { req.cancelled = true; },
        });
        resolve(new Response(stream, { status: value[0], headers: { 'content-type': value[1] } }));
      } else if (kind === 'bytes') {
        ctl.enqueue(value);
      } else if (kind === 'end') {
        ctl.close();
      } else if (kind === 'error') {
        fail(new TypeError(value));
      }
    };
    open(req);
  });
}

// One beacon: a batch of turns, as the collector's intake takes it.
function collect(body) {
  let batch;
  try {
    batch = JSON.parse(String(body));
  } catch (_) {
    return;
  }
  for (const t of batch.turns || []) turns.push(t);
  render();
}

export async function mount(root, options) {
  // The probe matches the URL it sees, normalised as the browser does.
  if (options.url) options.url = new URL(options.url, location.href).href;
  endpoint = options;
  if (!probe) {
    probe = await import("./tokenscope-rum.js");
    probe.init({
      collector: COLLECT_URL,
      fetch: network,
      patch: false,
      streams: [(u) => u === chatUrl()],
      container: '#rum-demo-answer',
      flushMs: 200,
    });
  }
  if (!ui || !root.contains(ui.view)) ui = build(root);
  ui.target.textContent = options.sim
    ? `the built-in simulator (model ${options.model}), answering in this page`
    : `${options.url} (model ${options.model ?? 'the first /models lists'})`;
  render();
}

function chatUrl() {
  return endpoint && endpoint.sim ? SIM_URL : endpoint && endpoint.url;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  e.append(...children);
  return e;
}

function build(root) {
  root.textContent = '';
  const prompt = el('textarea', { id: 'rum-demo-prompt', rows: '2', 'aria-label': 'Message' });
  prompt.value = 'Tell me about the sea.';
  const send = el('button', { id: 'rum-demo-send', type: 'submit' }, 'Send');
  const stop = el('button', { id: 'rum-demo-stop', type: 'button', disabled: '' }, 'Stop');
  const form = el('form', { class: 'rum-demo-form' }, prompt, send, stop);
  const answer = el('div', { id: 'rum-demo-answer', class: 'rum-demo-answer', 'aria-live': 'polite' });
  const target = el('span', { id: 'rum-demo-target' });
  const status = el('p', { id: 'rum-demo-status', class: 'hint', role: 'status' });
  const table = el('table', { id: 'rum-demo-turns', class: 'levels' });
  const json = el('pre', { id: 'rum-demo-json', class: 'json' });
  const view = el('section', { id: 'rum-demo', class: 'panel rum-demo', 'data-turns': '0' },
    el('h2', {}, 'Real users: the probe in a chat'),
    el('p', { class: 'hint' },
      'A chat UI with the tokenscope RUM probe embedded as a product embeds it (one line: ',
      el('code', {}, 'tokenscope.init(...)'), '). Each answer is measured as this page paints it; ',
      'the probe sends its turns to a collector (here kept in the page). Talking to: ', target, '.'),
    form, answer, status,
    el('h3', {}, 'Collected turns'),
    el('p', { class: 'hint' },
      'What a collector receives: times and lengths, never the text. Received: the first answer ',
      'text read by the app; painted: the first frame showing it. Server: the simulator\'s own ',
      'log (request received to its first token handed over, reasoning included). docs/rum.md explains each figure.'),
    el('div', { class: 'table-scroll' }, table),
    el('details', {}, el('summary', {}, 'The beacons as received (JSON)'), json));
  root.append(view);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!sending) sending = chat(prompt.value).finally(() => { sending = null; });
  });
  return { view, prompt, send, stop, answer, target, status, table, json };
}

// One chat turn, as any chat UI does it: POST, read the stream, paint each delta.
async function chat(text) {
  const { answer, send, stop, status } = ui;
  // The endpoint when Send was pressed (a remount meanwhile changes the next turn's).
  const ep = endpoint;
  const url = chatUrl();
  let reader = null;
  let done = false;
  const ctl = new AbortController();
  const onstop = () => ctl.abort();
  stop.addEventListener('click', onstop);
  send.disabled = true;
  stop.disabled = false;
  answer.textContent = '';
  status.textContent = 'waiting for the first token...';
  try {
    const headers = { 'content-type': 'application/json', ...(ep.headers || {}) };
    const model = ep.model ?? (await firstModel(ep, headers));
    const res = await probe.fetch(url, {
      method: 'POST', signal: ctl.signal, headers,
      body: JSON.stringify({ model, stream: true, max_tokens: 64, messages: [{ role: 'user', content: text }] }),
    });
    if (!res.ok) throw new Error(`the server answered ${res.status}`);
    reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    let p = null;
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      buf += dec.decode(r.value, { stream: true }).replace(/\r\n?/g, '\n');
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const data = buf.slice(0, i).split('\n').filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).trim()).join('\n');
        buf = buf.slice(i + 2);
        if (!data || data === '[DONE]') continue;
        const delta = JSON.parse(data).choices?.[0]?.delta?.content;
        if (!delta) continue;
        if (!p) {
          p = el('p', {}, delta);
          answer.append(p);
          status.textContent = 'streaming...';
        } else {
          p.textContent += delta;
        }
      }
    }
    done = true;
    status.textContent = 'done';
  } catch (e) {
    status.textContent = e.name === 'AbortError' ? 'stopped' : `failed: ${e.message}`;
  } finally {
    // A broken stream (not JSON, say) is let go of, so the turn ends now.
    if (reader && !done) reader.cancel().catch(() => {});
    stop.removeEventListener('click', onstop);
    send.disabled = false;
    stop.disabled = true;
  }
}

async function firstModel(ep, headers) {
  const r = await pageFetch(ep.modelsUrl, { headers });
  const list = await r.json();
  const id = list.data?.[0]?.id;
  if (!id) throw new Error(`${ep.modelsUrl} lists no model`);
  ep.model = id;
  return id;
}

// The server's time to first token for a turn: the request the simulator
// received when the probe's turn began.
function serverTtft(turn) {
  const t0 = turn.started_unix_ms - performance.timeOrigin;
  const r = truth.find(([received, first]) => Math.abs(received - t0) < 50 && !Number.isNaN(first));
  return r ? r[1] - r[0] : undefined;
}

function median(v) {
  if (!v.length) return undefined;
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const ms = (v) => (v === undefined ? '–' : v.toFixed(1));

function render() {
  if (!ui) return;
  const head = ['#', 'route', 'outcome', 'TTFT received (ms)', 'TTFT painted (ms)', 'paint − received (ms)',
    'server TTFT (ms)', 'chunks', 'stalls ≥250 ms', 'ITL p50 (ms)'];
  const rows = turns.map((t, i) => {
    const c = t.chunk_ms || [];
    const gaps = c.slice(1).map((v, k) => v - c[k]);
    const rec = t.ms.first_chunk;
    const painted = t.ms.first_paint;
    return [String(i + 1), t.route, t.outcome, ms(rec), ms(painted),
      ms(painted !== undefined && rec !== undefined ? painted - rec : undefined),
      ms(serverTtft(t)), String(t.chunks ?? 0), String(t.stalls_250 ?? 0), ms(median(gaps))];
  });
  ui.table.replaceChildren(
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))),
    el('tbody', {}, ...rows.map((r) => el('tr', {}, ...r.map((v) => el('td', {}, v))))));
  ui.json.textContent = JSON.stringify({ turns, server_log: truth.map(([received, first]) => ({ t_received_ms: received, first_token_ms: Number.isNaN(first) ? null : first })) }, null, 1);
  ui.view.setAttribute('data-turns', String(turns.length));
}
