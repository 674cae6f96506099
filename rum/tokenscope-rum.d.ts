/** Which URLs are chat streams: a substring, a RegExp or a predicate. */
export type UrlPattern = string | RegExp | ((url: string) => boolean);

export interface Options {
  /** Where batches are POSTed: a path on the product's own origin that forwards to `tokenscope collect`. */
  collector: string;
  /** Chat stream URLs; empty: any response typed text/event-stream or NDJSON. */
  streams?: UrlPattern[];
  /** The answer's container (a selector, an element, or a function of the route); default: found per turn as the element that first shows the answer's text. */
  container?: string | Element | ((route: string) => Element | null);
  /** Share of sessions whose ordinary turns are sent (0..1, default 1); errors, aborts and slow turns always are. */
  sampleRate?: number;
  /** A turn at least this slow (first paint, ms) is always sent. Default 2000. */
  slowMs?: number;
  /** How long turns wait to be batched, ms. Default 5000 (the page hiding sends at once). */
  flushMs?: number;
  /** The route a URL is reported as; default: its path with ids replaced by `:id`. */
  route?: (url: string) => string;
  /** Stream URLs that may receive a W3C `traceparent` header. Default: none. */
  traceUrls?: UrlPattern[];
  /** Wrap the globals (`fetch`, `EventSource`, `WebSocket`); `false`: leave them, and pass `fetch` below to your SDK. Default true. */
  patch?: boolean;
  /** The `fetch` the probe sends through (the app's requests it taps, and its beacons); default: the page's `fetch` at `init`. */
  fetch?: typeof globalThis.fetch;
  /** Which messages an app sends on a stream WebSocket are chat requests (start a turn); default: a string naming "messages", "prompt" or "input". */
  wsTurn?: (data: unknown) => boolean;
}

export interface Probe {
  init(options: Options): Probe;
  flush(): void;
  fetch: typeof globalThis.fetch;
}

/** Starts the probe (wraps `fetch`, `EventSource` and `WebSocket`); later calls return the same handle. */
export function init(options: Options): Probe;
/** Sends the queued turns now. */
export function flush(): void;
/** A `fetch` for an SDK's `fetch` option (OpenAI, Anthropic, the AI SDK): the probe's tap without patching globals. */
export declare const fetch: typeof globalThis.fetch;
