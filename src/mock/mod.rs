//! `tokenscope mock`: an OpenAI-compatible streaming server driven by core's
//! simulator model ([`tokenscope_sim`]), for demos and tests.
//!
//! One engine task runs the model's steps on tokio timers; each request's body is a
//! stream fed by the engine. The server logs, per request, the time it handed each
//! chunk to the HTTP layer (`--log`): the ground truth the fidelity tests compare
//! the client against.

use std::path::Path;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Version, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokenscope_measure::openai::{Api, encode};
use tokenscope_sim::{
    Admission, FaultKind, SimConfig, SimRequest, StreamWriter, context_exceeded_body,
    immediate_response,
};
use tokenscope_workload::prompts::approx_tokens;
use tokio::sync::{mpsc, oneshot};

mod answer;
mod engine;
pub use tokenscope_quality::toy_serve::LmServe;
mod log;
mod metrics;
mod native;
pub mod server;
mod state;
pub mod tls;
mod ws;

use answer::{non_streaming, sse_stream};
use engine::EngineMsg;
pub use log::LogRecord;
pub use server::{ConnInfo, ServeOptions, serve};
use state::LogOnDrop;
pub use state::MockState;

/// The API routes (`/v1/...`), with permissive CORS so a page on another origin can
/// call them.
pub fn router(state: MockState) -> Router {
    Router::new()
        .route("/v1/models", get(models).options(preflight))
        .route("/v1/chat/completions", post(chat).options(preflight))
        .route("/v1/completions", post(completions).options(preflight))
        .route("/v1/chat/ws", get(chat_ws))
        .route("/health", get(|| async { "ok" }))
        .route("/metrics", get(server_metrics))
        .route("/tokenize", post(tokenize).options(preflight))
        .route("/generate", post(native::generate).options(preflight))
        .layer(axum::middleware::map_response(cors))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            stamp_arrival,
        ))
        .with_state(state)
}

/// When the request's headers were parsed (before its body is read or routed).
#[derive(Debug, Clone, Copy)]
struct Arrival(f64);

async fn stamp_arrival(
    State(s): State<MockState>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    req.extensions_mut().insert(Arrival(s.clock.now_ms()));
    next.run(req).await
}

async fn cors(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert("access-control-allow-origin", HeaderValue::from_static("*"));
    // A preflight's answer has its own (see `preflight`).
    h.entry("access-control-allow-headers")
        .or_insert(HeaderValue::from_static(
            "authorization, content-type, x-request-id",
        ));
    h.insert(
        "access-control-allow-methods",
        HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    h.insert("access-control-max-age", HeaderValue::from_static("600"));
    // Lets a page on another origin read Resource Timing details (protocol, phases).
    h.insert("timing-allow-origin", HeaderValue::from_static("*"));
    resp
}

/// A CORS preflight: allows the headers it asks for (so a page's extra headers
/// reach the mock), or only `--cors-allow-headers` (to see a refusal).
async fn preflight(State(s): State<MockState>, headers: HeaderMap) -> Response {
    let allowed = match &s.cors_allow_headers {
        Some(list) => HeaderValue::from_str(list).ok(),
        None => headers.get("access-control-request-headers").cloned(),
    };
    let mut resp = StatusCode::NO_CONTENT.into_response();
    if let Some(v) = allowed {
        resp.headers_mut().insert("access-control-allow-headers", v);
    }
    resp
}

/// `/metrics`: the engine's state and what it did, in vLLM's names.
async fn server_metrics(State(s): State<MockState>) -> Response {
    if s.metrics_off {
        return StatusCode::NOT_FOUND.into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics.render(&s.gauges, &s.cfg),
    )
        .into_response()
}

/// `POST /tokenize` in llama.cpp's contract (`{content}` -> `{tokens}`), counting
/// as the simulator counts prompts (one token per word and punctuation mark), so
/// `bench --tokenizer server` sizes prompts exactly as the mock's `usage` counts them;
/// the ids are [`tokenscope_quality::toy_serve::token_ids`] (`--tokenizer-seed` salts them).
async fn tokenize(State(s): State<MockState>, body: Bytes) -> Response {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return json_error(
            StatusCode::BAD_REQUEST,
            "the body is not JSON",
            "invalid_request_error",
        );
    };
    let Some(content) = v.get("content").and_then(|c| c.as_str()) else {
        return json_error(
            StatusCode::BAD_REQUEST,
            "\"content\" (a string) is required",
            "invalid_request_error",
        );
    };
    let ids = tokenscope_quality::toy_serve::token_ids(content, s.lm.tokenizer_seed);
    debug_assert_eq!(ids.len() as u64, approx_tokens(content));
    axum::Json(serde_json::json!({ "tokens": ids })).into_response()
}

async fn models(State(s): State<MockState>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        encode::models_body(&s.cfg.model, s.cfg.max_context_tokens),
    )
        .into_response()
}

async fn chat(
    State(s): State<MockState>,
    arrival: Option<axum::Extension<Arrival>>,
    conn: Option<axum::Extension<ConnInfo>>,
    version: Version,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let t = arrival.map_or_else(|| s.clock.now_ms(), |a| a.0.0);
    let via = Via::new(conn.map(|c| c.0), version, &uri);
    handle(s, Api::Chat, t, via, headers, body).await
}

/// `GET /v1/chat/ws`: the chat API over a WebSocket (`ws`), each message answered
/// by [`handle`] as a `POST /v1/chat/completions` would be.
async fn chat_ws(
    State(s): State<MockState>,
    conn: Option<axum::Extension<ConnInfo>>,
    uri: axum::http::Uri,
    upgrade: axum::extract::ws::WebSocketUpgrade,
) -> Response {
    let conn = conn.map(|c| c.0);
    upgrade.on_upgrade(move |socket| {
        let state = s.clone();
        ws::serve(s, socket, move |t, headers, body| {
            let via = Via::new(conn, Version::HTTP_11, &uri);
            handle(state.clone(), Api::Chat, t, via, headers, body)
        })
    })
}

async fn completions(
    State(s): State<MockState>,
    arrival: Option<axum::Extension<Arrival>>,
    conn: Option<axum::Extension<ConnInfo>>,
    version: Version,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let t = arrival.map_or_else(|| s.clock.now_ms(), |a| a.0.0);
    let via = Via::new(conn.map(|c| c.0), version, &uri);
    handle(s, Api::Completions, t, via, headers, body).await
}

/// How a request came: its connection and HTTP version.
struct Via {
    conn: Option<ConnInfo>,
    protocol: &'static str,
    /// The query's parameter names (never their values: a key may be there).
    query_names: Vec<String>,
}

impl Via {
    fn new(conn: Option<ConnInfo>, version: Version, uri: &axum::http::Uri) -> Self {
        let query_names = uri
            .query()
            .unwrap_or_default()
            .split('&')
            .filter_map(|kv| kv.split('=').next())
            .filter(|k| !k.is_empty())
            .map(str::to_owned)
            .collect();
        let protocol = match version {
            Version::HTTP_2 => "h2",
            Version::HTTP_3 => "h3",
            Version::HTTP_10 => "http/1.0",
            Version::HTTP_09 => "http/0.9",
            _ => "http/1.1",
        };
        Self {
            conn,
            protocol,
            query_names,
        }
    }
}

/// The headers that carry API keys in some deployments (Azure's `api-key`,
/// gateways' `x-api-key`), in the order looked for.
const API_KEY_HEADERS: [&str; 2] = ["api-key", "x-api-key"];

/// The request's header names, lowercased, sorted and without repeats.
fn header_names(headers: &HeaderMap) -> Vec<String> {
    let mut names: Vec<String> = headers
        .keys()
        .map(|k| k.as_str().to_ascii_lowercase())
        .collect();
    names.sort();
    names.dedup();
    names
}

fn json_error(status: StatusCode, message: &str, kind: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        encode::error_body(message, kind, status.as_u16()),
    )
        .into_response()
}

/// Text of the prompt: chat messages' contents joined, or the completions prompt.
fn prompt_text(api: Api, v: &serde_json::Value) -> Option<String> {
    match api {
        Api::Chat => {
            let msgs = v.get("messages")?.as_array()?;
            let mut text = String::new();
            for m in msgs {
                match m.get("content") {
                    Some(serde_json::Value::String(s)) => text.push_str(s),
                    Some(serde_json::Value::Array(parts)) => {
                        for p in parts {
                            if let Some(t) = p.get("text").and_then(|t| t.as_str()) {
                                text.push_str(t);
                                text.push(' ');
                            }
                        }
                    }
                    _ => {}
                }
                text.push(' ');
            }
            Some(text)
        }
        Api::Completions => match v.get("prompt")? {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Array(a) => Some(
                a.iter()
                    .filter_map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        },
    }
}

async fn handle(
    s: MockState,
    api: Api,
    t_received: f64,
    via: Via,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    s.served.fetch_add(1, Ordering::Relaxed);
    let asked = match read_request(&s, api, &headers, &body) {
        Ok(a) => a,
        Err(why) => return json_error(StatusCode::BAD_REQUEST, &why, "invalid_request_error"),
    };
    let Asked {
        prompt,
        max_tokens,
        streaming,
        include_usage,
        request_id,
        authorized,
        api_key_header,
        logprobs,
        greedy,
        echo,
        token_ids,
    } = asked;
    let prompt_tokens = approx_tokens(&prompt).max(1);
    // The words an earlier prompt began with: cached (at most all but one token,
    // as a server always computes the last).
    let cached_tokens = if s.cfg.prefix_cache {
        let words = s
            .prefix_cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .lookup_and_keep(&prompt);
        approx_tokens(&tokenscope_sim::prefix::leading_words(&prompt, words)).min(prompt_tokens - 1)
    } else {
        0
    };
    let (reply_tx, reply_rx) = oneshot::channel();
    let (tok_tx, tok_rx) = mpsc::unbounded_channel();
    let req = SimRequest {
        cached_tokens,
        prompt_tokens,
        max_tokens,
    };
    if s.engine
        .send(EngineMsg::Submit {
            req,
            reply: reply_tx,
            tokens: tok_tx,
        })
        .is_err()
    {
        return json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the engine stopped",
            "server_error",
        );
    }
    let Ok(admission) = reply_rx.await else {
        return json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the engine stopped",
            "server_error",
        );
    };
    let mut log = LogRecord {
        id: 0,
        request_id,
        authorized,
        api_key_header,
        header_names: header_names(&headers),
        query_names: via.query_names.clone(),
        protocol: via.protocol,
        tls: via.conn.is_some_and(|c| c.tls),
        connection: via.conn.map_or(0, |c| c.number),
        t_conn_accepted_ms: via.conn.map_or(t_received, |c| c.t_accepted_ms),
        t_conn_ready_ms: via.conn.map_or(t_received, |c| c.t_ready_ms),
        api: api.as_str(),
        prompt_tokens,
        cached_tokens,
        max_tokens,
        t_received_ms: t_received,
        t_scheduled_ms: None,
        t_headers_ms: None,
        chunk_times_ms: Vec::new(),
        chunk_tokens: Vec::new(),
        completion_tokens: 0,
        fault: None,
        outcome: "completed",
        t_end_ms: t_received,
    };
    let id = match admission {
        Admission::Accepted { id } => id,
        Admission::ContextExceeded {
            id,
            requested,
            limit,
        } => {
            log.id = id;
            log.outcome = "context_exceeded";
            log.t_end_ms = s.clock.now_ms();
            s.write_log(log);
            return (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "application/json")],
                context_exceeded_body(requested, limit),
            )
                .into_response();
        }
        Admission::Fault { id, fault } => return answer_fault(s, log, id, fault).await,
    };
    log.id = id;
    let writer = StreamWriter::new(
        api,
        id,
        &s.cfg.model,
        include_usage,
        prompt_tokens,
        s.cfg.seed,
    )
    .with_reasoning(s.cfg.reasoning_tokens)
    .with_cached(s.cfg.prefix_cache.then_some(cached_tokens));
    if !streaming {
        // The toy model answers what asks for log-probabilities or for greedy
        // decoding (temperature 0): `tokenscope quality`'s requests.
        let lm = logprobs
            .or(greedy.then_some(0))
            .filter(|_| api == Api::Chat || (echo && logprobs.is_some() && s.lm.echo_logprobs))
            .map(|k| (prompt.trim_end(), k, token_ids));
        return non_streaming(s, api, id, tok_rx, log, prompt_tokens, lm).await;
    }
    let mut tok_rx = tok_rx;
    // Held head: wait for the first chunk; the stream hands it over at once, so
    // the HTTP layer writes the head and the chunk together.
    let first = if s.head_with_first_token {
        tok_rx.recv().await
    } else {
        None
    };
    log.t_headers_ms = Some(s.clock.now_ms());
    let body = Body::from_stream(sse_stream(s.clone(), tok_rx, first, writer, log));
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no")
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// What a request asks for.
struct Asked {
    prompt: String,
    max_tokens: u32,
    streaming: bool,
    include_usage: bool,
    request_id: Option<String>,
    authorized: bool,
    api_key_header: Option<&'static str>,
    /// `logprobs: true` asked, with this many `top_logprobs`.
    logprobs: Option<usize>,
    /// `temperature: 0` asked.
    greedy: bool,
    /// A completion that echoes its prompt with `logprobs`.
    echo: bool,
    /// `return_tokens_as_token_ids: true` asked (vLLM's).
    token_ids: bool,
}

/// Read a request's body and headers, or say why it is not a request (an HTTP
/// 400 then).
fn read_request(
    s: &MockState,
    api: Api,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Asked, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let Some(prompt) = prompt_text(api, &v) else {
        let field = match api {
            Api::Chat => "messages",
            Api::Completions => "prompt",
        };
        return Err(format!("missing or invalid \"{field}\""));
    };
    let max_tokens = v
        .get("max_tokens")
        .or_else(|| v.get("max_completion_tokens"))
        .and_then(|m| m.as_u64())
        .map_or(s.cfg.default_max_tokens, |m| m.clamp(1, 1 << 20) as u32);
    let streaming = v.get("stream").and_then(|b| b.as_bool()).unwrap_or(false);
    let include_usage = v
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(|b| b.as_bool())
        .unwrap_or(false);
    let request_id = headers
        .get("x-request-id")
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned);
    let authorized = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer ") && v.len() > 7);
    let api_key_header = API_KEY_HEADERS
        .into_iter()
        .find(|name| headers.get(*name).is_some_and(|v| !v.is_empty()));
    // Chat's `logprobs: true` + `top_logprobs: k`; legacy completions'
    // `logprobs: k`, read with `echo: true` (the prompt's own, teacher-forced).
    let echo = api == Api::Completions && v.get("echo").and_then(|b| b.as_bool()) == Some(true);
    let logprobs = match v.get("logprobs") {
        Some(serde_json::Value::Bool(true)) => Some(
            v.get("top_logprobs")
                .and_then(|k| k.as_u64())
                .map_or(0, |k| k.min(1000) as usize),
        ),
        Some(serde_json::Value::Number(k)) if echo => k.as_u64().map(|k| k.min(1000) as usize),
        _ => None,
    };
    Ok(Asked {
        prompt,
        max_tokens,
        streaming,
        include_usage,
        request_id,
        authorized,
        api_key_header,
        logprobs,
        greedy: v.get("temperature").and_then(|t| t.as_f64()) == Some(0.0),
        echo,
        token_ids: v
            .get("return_tokens_as_token_ids")
            .and_then(|b| b.as_bool())
            == Some(true),
    })
}

/// The answer to a request drawn a fault before any token: an HTTP error, an
/// HTML page, or headers that never come (held until the client gives up).
async fn answer_fault(s: MockState, mut log: LogRecord, id: u64, fault: FaultKind) -> Response {
    log.id = id;
    log.fault = Some(fault);
    log.outcome = "fault";
    match immediate_response(fault, s.cfg.retry_after_s) {
        Some(r) => {
            log.t_headers_ms = Some(s.clock.now_ms());
            log.t_end_ms = s.clock.now_ms();
            s.write_log(log);
            let mut resp = (
                StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                [(header::CONTENT_TYPE, r.content_type)],
                r.body,
            )
                .into_response();
            if let Some(secs) = r.retry_after_s {
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            resp
        }
        None => {
            // Headers never come: hold the request until the client gives up.
            let _guard = LogOnDrop {
                state: s.clone(),
                log: Some(log),
            };
            std::future::pending::<()>().await;
            unreachable!("pending never resolves")
        }
    }
}

/// Start the simulated server inside this process on a free loopback port, on its
/// own thread and tokio runtime (it competes with the client for the CPU as a
/// separate process would, not on the client's runtime). Returns its `/v1` base URL.
/// `worker_threads`: the server runtime's worker threads (`None`: one per core).
pub fn start_in_thread(
    cfg: SimConfig,
    log: Option<&Path>,
    worker_threads: Option<usize>,
) -> anyhow::Result<String> {
    use anyhow::Context as _;
    let (tx, rx) = std::sync::mpsc::channel();
    let log = log.map(Path::to_owned);
    std::thread::Builder::new()
        .name("tokenscope-mock".into())
        .spawn(move || {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            if let Some(n) = worker_threads {
                builder.worker_threads(n);
            }
            let rt = match builder.enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(anyhow::anyhow!("cannot start the server runtime: {e}")));
                    return;
                }
            };
            rt.block_on(async move {
                let started = async {
                    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
                    let addr = listener.local_addr()?;
                    let state = MockState::start(cfg, log.as_deref())?;
                    anyhow::Ok((listener, addr, state))
                };
                match started.await {
                    Ok((listener, addr, state)) => {
                        let _ = tx.send(Ok(format!("http://{addr}/v1")));
                        let opts = ServeOptions::plain(state.clock);
                        let _ = serve(listener, router(state), opts).await;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            });
        })
        .context("cannot start the server thread")?;
    rx.recv().context("the simulated server did not start")?
}
