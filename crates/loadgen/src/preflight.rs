//! Before a run: is the endpoint there, which model does it serve, and does it
//! answer a tiny streaming request with an event stream? A failure here is one
//! clear line and a non-zero exit, before anything is measured. The streamed
//! request's time is kept: it is what the run's time estimate starts from.

use std::time::Duration;

use bytes::Bytes;
use tokenscope_core::report::{ReportWarning, WarningKind};
use tokenscope_measure::metrics::{MetricOptions, RequestMetrics};
use tokenscope_measure::openai::{RequestSpec, first_model_id, request_body};
use tokenscope_measure::record::{ErrorKind, Outcome};
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
use super::estimate::RequestTime;
use super::transport::{self, Target};
use super::{BenchConfig, Preflight};
use crate::error::{Error, Result};
use crate::http_client::ClientRole;
use crate::util::{join_url, redact_url};
use tokenscope_workload::images::{ImageSpec, extremes, request_images};

/// How many tiny requests the pre-flight tries before giving up on a transient failure.
const ATTEMPTS: u32 = 3;

/// Check the endpoint. Errors are one line naming what was wrong.
pub async fn check(cfg: &BenchConfig) -> Result<Preflight> {
    let client = cfg.http.client(ClientRole::Endpoint {
        api_key: cfg.api_key.as_ref(),
        timeout: None,
    })?;
    let base = redact_url(&cfg.base_url);
    let listing = list_models(&client, cfg, &base).await?;
    let model = match (&cfg.model, listing.first_model) {
        (Some(m), _) => m.clone(),
        (None, Some(m)) => m,
        (None, None) => {
            if listing.status == 404 && route_status(&client, cfg).await == Some(404) {
                return Err(Error::Endpoint(wrong_base(&client, cfg, &base).await));
            }
            return Err(Error::Endpoint(format!(
                "no --model given and GET {base}/models listed none (HTTP {}): pass --model NAME",
                listing.status
            )));
        }
    };
    let (mut warnings, mut timing) = (Vec::new(), None);
    if cfg.preflight {
        // With images, one request per extreme of them (the most images, the
        // largest image); the first one's time is the run's estimate.
        let mut images: Vec<Option<ImageSpec>> =
            extremes(&cfg.images).into_iter().map(Some).collect();
        if images.is_empty() {
            images.push(None);
        }
        for (k, image) in images.into_iter().enumerate() {
            match tiny_request(&client, cfg, &model, &base, listing.status, image).await? {
                Tiny::Timed(t) if k == 0 => timing = t,
                Tiny::Timed(_) => {}
                Tiny::Failed(w) => {
                    warnings.push(w);
                    break;
                }
            }
        }
    }
    Ok(Preflight {
        model,
        protocol: Some(listing.protocol),
        warnings,
        timing,
    })
}

/// The status of the completion route to a request of no model the server
/// knows (none when it did not answer): a 404 there too says the path is wrong.
async fn route_status(client: &reqwest::Client, cfg: &BenchConfig) -> Option<u16> {
    let spec = tiny_spec(cfg, "tokenscope-preflight", None);
    let resp = client
        .post(join_url(&cfg.base_url, cfg.api.path()))
        .json(&request_body(&spec))
        .timeout(cfg.timeout.min(Duration::from_secs(15)))
        .send()
        .await
        .ok()?;
    Some(resp.status().as_u16())
}

/// The error for a base path that serves neither `/models` nor the
/// completion route, with the usual base where the server answers there.
async fn wrong_base(client: &reqwest::Client, cfg: &BenchConfig, base: &str) -> String {
    let mut usual = cfg.base_url.clone();
    usual.set_path("/v1");
    let hint = if usual.path() != cfg.base_url.path().trim_end_matches('/') {
        let answers = client
            .get(join_url(&usual, "models"))
            .timeout(cfg.timeout.min(Duration::from_secs(15)))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if answers {
            format!(
                ": {} answers GET /models, try --url {}",
                redact_url(&usual),
                redact_url(&usual)
            )
        } else {
            String::new()
        }
    } else {
        String::new()
    };
    format!(
        "GET {base}/models and POST {base}/{} both answered HTTP 404: the base path of --url is probably wrong (OpenAI-compatible servers usually serve the API under /v1, e.g. http://HOST:PORT/v1){hint}",
        cfg.api.path()
    )
}

/// The pre-flight's tiny request of `model`, with `image`'s images.
fn tiny_spec(cfg: &BenchConfig, model: &str, image: Option<ImageSpec>) -> RequestSpec {
    // With the run's tools and schema, and images of the run's, sent as the
    // run will send them: a server that refuses them (a text-only model
    // refuses images, another limits their count or size) says so before the
    // run.
    let spec = RequestSpec {
        system: None,
        messages: None,
        api: cfg.api,
        model: model.to_owned(),
        prompt: "Say hello.".into(),
        max_tokens: 4,
        ignore_eos: cfg.ignore_eos,
        min_tokens: None,
        temperature: cfg.temperature,
        continuous_usage: cfg.continuous_usage,
        tools: Vec::new(),
        tool_choice: None,
        output_schema: None,
        images: image
            .map(|s| request_images(s, cfg.image_format, cfg.seed, u64::MAX))
            .unwrap_or_default(),
    };
    crate::answer::AnswerContract::ask(cfg.answer.as_deref(), spec)
}

/// How the tiny request went, when it did not stop the run.
enum Tiny {
    /// It streamed: its time, where it had a first token.
    Timed(Option<RequestTime>),
    /// It kept failing transiently: the run goes ahead, warned.
    Failed(ReportWarning),
}

/// What `GET /models` said.
struct Listing {
    /// The HTTP version it was answered over.
    protocol: String,
    /// Its status.
    status: u16,
    /// The first model listed (on success).
    first_model: Option<String>,
}

/// `GET /models`: an unreachable endpoint or a refused key fails the run here.
async fn list_models(client: &reqwest::Client, cfg: &BenchConfig, base: &str) -> Result<Listing> {
    let req = client
        .get(join_url(&cfg.base_url, "models"))
        .timeout(cfg.timeout.min(Duration::from_secs(15)));
    let resp = match req.send().await {
        Ok(resp) => resp,
        Err(e) => {
            let (kind, msg) = transport::classify(&e, true);
            if kind == ErrorKind::Connect || e.is_timeout() {
                return Err(Error::Endpoint(format!("cannot reach {base}: {msg}")));
            }
            // With TLS 1.3 a server that wants a client certificate refuses it
            // after the client's side of the handshake: the first request then
            // meets a closed connection.
            let hint = if cfg.base_url.scheme() == "https" && cfg.http.client_cert.is_none() {
                " (an HTTPS server that requires a client certificate closes the connection this way: --client-cert FILE --client-key FILE)"
            } else {
                ""
            };
            return Err(Error::Endpoint(format!(
                "GET {base}/models failed: {msg}{hint}"
            )));
        }
    };
    let protocol = transport::protocol_name(resp.version());
    let status = resp.status();
    if status.is_redirection() {
        let to = crate::http_client::redirect_target(&resp);
        return Err(Error::Endpoint(format!(
            "GET {base}/models answered HTTP {} (a redirect to {to}): tokenscope does not follow redirects (they would carry the key elsewhere and time another server); pass the final URL as --url",
            status.as_u16()
        )));
    }
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return Err(Error::Endpoint(format!(
            "{base} refused the request (GET /models answered HTTP {}): check the API key (--api-key, TOKENSCOPE_API_KEY or OPENAI_API_KEY)",
            status.as_u16()
        )));
    }
    let first_model = if status.is_success() {
        first_model_id(&resp.text().await.unwrap_or_default())
    } else {
        None
    };
    Ok(Listing {
        protocol,
        status: status.as_u16(),
        first_model,
    })
}

/// One tiny streamed request, tried up to [`ATTEMPTS`] times: an endpoint that
/// cannot stream fails the run; one that keeps failing transiently gets a warning
/// and the run goes ahead (its failures are data).
async fn tiny_request(
    client: &reqwest::Client,
    cfg: &BenchConfig,
    model: &str,
    base: &str,
    models_status: u16,
    image: Option<ImageSpec>,
) -> Result<Tiny> {
    let target = Target {
        url: join_url(&cfg.base_url, cfg.api.path()),
        timeout: cfg.timeout.min(Duration::from_secs(30)),
        connections: None,
    };
    let spec = tiny_spec(cfg, model, image);
    let body = Bytes::from(
        serde_json::to_vec(&request_body(&spec)).map_err(|e| Error::Internal(e.to_string()))?,
    );
    let clock = Clock::start();
    let never = CancellationToken::new();
    let endpoint = format!("POST {base}/{}", cfg.api.path());
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        let rec = transport::run_request(
            client,
            &target,
            body.clone(),
            &format!("preflight-{attempt}"),
            &clock,
            None,
            &never,
        )
        .await;
        match &rec.outcome {
            Outcome::Ok => {
                let m = RequestMetrics::from_record(&rec, &MetricOptions::default());
                return Ok(Tiny::Timed(m.ttft_ms.map(|ttft_ms| RequestTime {
                    ttft_ms,
                    per_token_ms: m.tpot_ms.unwrap_or(0.0),
                })));
            }
            Outcome::Error { kind, message } => match kind {
                ErrorKind::Connect => {
                    return Err(Error::Endpoint(format!(
                        "cannot reach {endpoint}: {message}"
                    )));
                }
                ErrorKind::NonSse => {
                    return Err(Error::Endpoint(format!(
                        "{endpoint} did not answer with an event stream: {message}"
                    )));
                }
                ErrorKind::Http(404) if models_status == 404 => {
                    return Err(Error::Endpoint(wrong_base(client, cfg, base).await));
                }
                ErrorKind::Http(s) if *s != 429 && *s != 503 && *s != 502 && *s != 504 => {
                    return Err(Error::Endpoint(format!("{endpoint} failed: {message}")));
                }
                _ => last = format!("{kind}: {message}"),
            },
            Outcome::Timeout { phase } => {
                last = format!(
                    "timed out ({phase:?}) after {:.0} s",
                    target.timeout.as_secs_f64()
                );
            }
        }
    }
    eprintln!("warning: pre-flight request failed {ATTEMPTS} times (last: {last}); running anyway");
    Ok(Tiny::Failed(ReportWarning {
        kind: WarningKind::PreflightFailed,
        message: format!(
            "the pre-flight request failed {ATTEMPTS} times (last: {last}); the run went ahead and counts such failures as data"
        ),
    }))
}
