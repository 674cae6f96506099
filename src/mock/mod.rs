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
mod request;
pub mod server;
mod state;
pub mod tls;
mod ws;

use answer::{non_streaming, sse_stream};
use engine::EngineMsg;
pub use log::LogRecord;
use request::{Asked, read_request};
pub use server::{ConnInfo, ServeOptions, serve};
use state::LogOnDrop;
pub use state::MockState;

/// The largest request body served: 64 MiB (images in base64).
const BODY_LIMIT_BYTES: usize = 64 << 20;

/// The API routes (`/v1/...`), with permissive CORS so a page on another origin can
/// call them.
pub fn router(state: MockState) -> Router {
    Router::new()
        .route("/v1/models", get(models).options(preflight))
        .route("/v1/chat/completions", endpoint(Api::Chat))
        .route("/v1/completions", endpoint(Api::Completions))
        .route("/v1/responses", endpoint(Api::Responses))
        .route("/v1/messages", endpoint(Api::Messages))
        .route("/v1/chat/ws", get(chat_ws))
        .route("/health", get(|| async { "ok" }))
        .route("/metrics", get(server_metrics))
        .route("/gpu/metrics", get(gpu_metrics))
        .route("/tokenize", post(tokenize).options(preflight))
        .route("/generate", post(native::generate).options(preflight))
        // Prompts with images are megabytes (axum's default limit is 2 MB).
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT_BYTES))
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
            "authorization, content-type, x-request-id, x-api-key, anthropic-version",
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

/// `/gpu/metrics`: the simulated GPU (`--gpu-watts`), in dcgm-exporter's names.
async fn gpu_metrics(State(s): State<MockState>) -> Response {
    let Some(watts) = s.gpu_watts else {
        return StatusCode::NOT_FOUND.into_response();
    };
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        metrics::gpu_exposition(
            watts,
            s.clock.now_ms(),
            s.gauges.running.load(Ordering::Relaxed),
        ),
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

/// `POST` of one API's streaming endpoint, answered by [`handle`].
fn endpoint(api: Api) -> axum::routing::MethodRouter<MockState> {
    post(
        move |State(s): State<MockState>,
              arrival: Option<axum::Extension<Arrival>>,
              conn: Option<axum::Extension<ConnInfo>>,
              version: Version,
              uri: axum::http::Uri,
              headers: HeaderMap,
              body: Bytes| async move {
            let t = arrival.map_or_else(|| s.clock.now_ms(), |a| a.0.0);
            let via = Via::new(conn.map(|c| c.0), version, &uri);
            handle(s, api, t, via, headers, body).await
        },
    )
    .options(preflight)
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
        continuous_usage,
        tools,
        tool_choice,
        output_schema,
        images,
    } = asked;
    let image_tokens: u64 = images.iter().map(|i| i.tokens).sum();
    let prompt_tokens = approx_tokens(&prompt).max(1) + image_tokens;
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
        answer: None,
        images,
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
    let script =
        (api != Api::Completions && (!tools.is_empty() || output_schema.is_some())).then(|| {
            tokenscope_sim::answer::plan(
                &tools,
                tool_choice.as_ref(),
                output_schema.as_ref(),
                max_tokens.saturating_sub(s.cfg.reasoning_tokens),
                (s.cfg.tool_call_share, s.cfg.invalid_answer_share),
                (s.cfg.seed, id),
            )
        });
    let (script, planned) = script.unzip();
    log.answer = planned;
    let writer = StreamWriter::new(
        api,
        id,
        &s.cfg.model,
        include_usage,
        prompt_tokens,
        s.cfg.seed,
    )
    .with_reasoning(s.cfg.reasoning_tokens)
    .with_cached(s.cfg.prefix_cache.then_some(cached_tokens))
    .with_continuous_usage(continuous_usage)
    .with_script(script.unwrap_or_default());
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
