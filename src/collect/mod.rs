//! `tokenscope collect`'s server: the probe's batches in (`POST /rum`), stored
//! durably (`store`), counted for Prometheus (`GET /metrics`). The intake rules
//! (origins, sizes, rates, formats) are in `intake`.

pub mod intake;
pub mod metrics;
pub mod otlp;
pub mod store;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokenscope_core::rum::{MAX_BODY_BYTES, browser_family};

use intake::{RateLimiter, Refusal};
use store::Store;

/// How the collector runs.
#[derive(Debug, Clone)]
pub struct CollectOptions {
    /// Origins allowed to post (empty: any).
    pub allow_origins: Vec<String>,
    /// A key the probe's requests must carry in `?key=` (a public ingest key: it
    /// tells your pages from others', it is not a secret).
    pub ingest_key: Option<String>,
    /// Batches a minute per client address.
    pub per_minute: u32,
    /// Take the client address from `X-Forwarded-For` (behind your own proxy).
    pub trust_forwarded: bool,
}

/// The collector's shared state.
pub struct Collector {
    store: Mutex<Store>,
    opts: CollectOptions,
    limiter: Mutex<RateLimiter>,
    metrics: Mutex<metrics::Metrics>,
}

impl Collector {
    /// A collector over `store`.
    pub fn new(store: Store, opts: CollectOptions) -> Arc<Collector> {
        Arc::new(Collector {
            store: Mutex::new(store),
            limiter: Mutex::new(RateLimiter::new(opts.per_minute)),
            opts,
            metrics: Mutex::new(metrics::Metrics::default()),
        })
    }

    /// Deletes turns older than `keep_ms`; returns how many. Blocks: call it off the
    /// runtime.
    pub fn expire(&self, keep_ms: f64) -> anyhow::Result<usize> {
        let store = self
            .store
            .lock()
            .map_err(|_| anyhow::anyhow!("store lock"))?;
        Ok(store.expire(unix_ms() - keep_ms)?)
    }
}

impl Collector {
    /// The live figures as an OTLP/HTTP JSON request (`--otlp`).
    pub fn otlp_request(&self, start_ns: u64, now_ns: u64, instance: &str) -> serde_json::Value {
        match self.metrics.lock() {
            Ok(m) => otlp::request(&m, start_ns, now_ns, instance),
            Err(p) => otlp::request(&p.into_inner(), start_ns, now_ns, instance),
        }
    }
}

/// Nanoseconds since the Unix epoch.
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// The routes: `POST /rum` (and its CORS preflight), `GET /metrics`.
pub fn router(c: Arc<Collector>) -> Router {
    // A body past the limit is refused as it arrives, never read whole.
    Router::new()
        .route("/rum", post(intake_batch).options(preflight))
        .route("/metrics", get(metrics))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(c)
}

fn cors(c: &Collector, headers: &HeaderMap, resp: &mut Response) {
    let h = resp.headers_mut();
    if c.opts.allow_origins.is_empty() {
        h.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        return;
    }
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    if let Some(o) = origin
        && intake::origin_allowed(&c.opts.allow_origins, Some(o))
        && let Ok(v) = HeaderValue::from_str(o)
    {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
        h.insert(header::VARY, HeaderValue::from_static("origin"));
    }
}

async fn preflight(State(c): State<Arc<Collector>>, headers: HeaderMap) -> Response {
    let mut resp = StatusCode::NO_CONTENT.into_response();
    cors(&c, &headers, &mut resp);
    let h = resp.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("content-type"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    resp
}

/// The client's address: the peer's, or behind your own proxy (`--trust-forwarded`)
/// the last `X-Forwarded-For` entry, the one that proxy added (earlier entries are
/// the client's to write).
fn client_of(c: &Collector, peer: SocketAddr, headers: &HeaderMap) -> std::net::IpAddr {
    if c.opts.trust_forwarded
        && let Some(ip) = headers
            .get_all("x-forwarded-for")
            .iter()
            .next_back()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .and_then(|v| v.trim().parse().ok())
    {
        return ip;
    }
    peer.ip()
}

async fn intake_batch(
    State(c): State<Arc<Collector>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let result = match &body {
        Ok(body) => accept(&c, peer, &uri, &headers, body).await,
        Err(_) => Err(Refusal::TooLarge),
    };
    let mut resp = match result {
        Ok((accepted, rejected)) => (
            StatusCode::ACCEPTED,
            [(header::CONTENT_TYPE, "application/json")],
            format!(r#"{{"accepted":{accepted},"rejected":{rejected}}}"#),
        )
            .into_response(),
        Err(r) => {
            if let Ok(mut m) = c.metrics.lock() {
                m.refused(r);
            }
            (
                StatusCode::from_u16(r.status()).unwrap_or(StatusCode::BAD_REQUEST),
                format!("refused: {}\n", r.reason()),
            )
                .into_response()
        }
    };
    cors(&c, &headers, &mut resp);
    resp
}

async fn accept(
    c: &Arc<Collector>,
    peer: SocketAddr,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(usize, usize), Refusal> {
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let key_ok = c.opts.ingest_key.as_deref().is_none_or(|want| {
        uri.query()
            .into_iter()
            .flat_map(|q| q.split('&'))
            .any(|p| p.strip_prefix("key=") == Some(want))
    });
    if !key_ok || !intake::origin_allowed(&c.opts.allow_origins, origin) {
        return Err(Refusal::Forbidden);
    }
    let client = client_of(c, peer, headers);
    let allowed = c
        .limiter
        .lock()
        .map(|mut l| l.allow(client, Instant::now()))
        .unwrap_or(false);
    if !allowed {
        return Err(Refusal::RateLimited);
    }
    let accepted = intake::parse(body)?;
    let browser = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| "other".to_string(), browser_family);
    let n = accepted.turns.len();
    let rejected = accepted.rejected;
    let turns = Arc::new(accepted.turns);
    if n > 0 {
        let (c2, turns2, browser2) = (Arc::clone(c), Arc::clone(&turns), browser.clone());
        // SQLite blocks: off the runtime. Acknowledged only once committed.
        let stored = tokio::task::spawn_blocking(move || {
            let mut s = c2.store.lock().map_err(|_| ())?;
            s.insert(unix_ms(), &browser2, &turns2).map_err(|e| {
                eprintln!("error: {e}");
            })
        })
        .await;
        if !matches!(stored, Ok(Ok(()))) {
            // Not stored, so not acknowledged: the sender may try again.
            return Err(Refusal::Unavailable);
        }
    }
    if let Ok(mut m) = c.metrics.lock() {
        m.accepted(&browser, &turns, rejected);
    }
    Ok((n, rejected))
}

async fn metrics(State(c): State<Arc<Collector>>) -> Response {
    match c.metrics.lock() {
        Ok(m) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            m.render(),
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}
