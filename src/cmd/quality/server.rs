//! The checks' requests over HTTP: [`Http`] carries `tokenscope_quality::session`'s
//! requests over a client from the one factory ([`tokenscope_loadgen::http_client`]), with
//! the connection options the user gave (the key never in an error), and says
//! progress on stderr. [`connections`] decides which options each server gets.

use serde_json::Value;
use tokenscope_quality::session::{Server, Transport};

use super::args::QualityArgs;
use tokenscope_loadgen::http_client::tls::tls_problem;
use tokenscope_loadgen::http_client::{ClientRole, HttpOptions};
use tokenscope_loadgen::util::Secret;

/// The connection options of each server.
#[derive(Debug)]
pub(super) struct Connections {
    /// The candidate's: every flag given (`--ca-cert`, `--proxy`, `--header`,
    /// ...).
    pub candidate: HttpOptions,
    /// The reference's ([`HttpOptions::for_server`]): the same TLS settings
    /// and proxy rules; the candidate's headers, key header and HTTP version
    /// only on the candidate's origin (the same server or gateway).
    pub reference: HttpOptions,
}

impl Connections {
    /// What the user must hear before anything is sent
    /// ([`HttpOptions::notices`]): the candidate's, and the reference's proxy
    /// where it is another.
    pub fn notices(&self) -> Vec<String> {
        let mut lines = self.candidate.notices(false);
        if let Some(p) = &self.reference.proxy
            && self.reference.proxy != self.candidate.proxy
        {
            lines.push(format!(
                "note: the reference's requests go through the proxy {} (from {})",
                p.display(),
                p.from
            ));
        }
        lines
    }
}

/// Whether two base URLs are on the same origin (scheme, host and port): the
/// same server or gateway, which may be given what the other is.
pub fn same_origin(a: &str, b: &str) -> bool {
    let origin = |u: &str| {
        tokenscope_measure::parse::parse_base_url(u)
            .ok()
            .map(|b| b.origin())
    };
    origin(a).is_some() && origin(a) == origin(b)
}

/// Each server's options from the flags; errors name the flag (never a
/// header's value or a proxy's credentials).
pub(super) fn connections(args: &QualityArgs) -> anyhow::Result<Connections> {
    let url = |s: &str| tokenscope_loadgen::util::parse_base_url(s).map(|(u, _)| u);
    let reference = args
        .reference
        .contains("://")
        .then(|| url(&args.reference))
        .transpose()
        .map_err(|e| anyhow::anyhow!("--ref: {e}"))?;
    let candidate = args
        .candidate
        .as_deref()
        .map(url)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--cand: {e}"))?;
    // The options are read for the candidate (for the reference when it is
    // the only server); a golden reference alone needs none.
    let Some(first) = candidate.as_ref().or(reference.as_ref()) else {
        return Ok(Connections {
            candidate: HttpOptions::default(),
            reference: HttpOptions::default(),
        });
    };
    let candidate = args
        .http
        .clone()
        .into_options(first, &|name| std::env::var(name).ok())?;
    let reference = match &reference {
        Some(r) => {
            let same = args
                .candidate
                .as_deref()
                .is_none_or(|c| same_origin(c, &args.reference));
            candidate.for_server(r, same).map_err(anyhow::Error::msg)?
        }
        None => candidate.clone(),
    };
    Ok(Connections {
        candidate,
        reference,
    })
}

/// The client, a server's name as shown (for errors) and its `host:port` (for
/// TLS errors).
pub(super) struct Http {
    client: reqwest::Client,
    shown: String,
    host: String,
}

/// The server at `url` over HTTP with `options`, sending `key` (in the
/// options' key header) if any; a whole request takes at most `timeout` s.
pub(super) fn server(
    url: &str,
    options: &HttpOptions,
    key: Option<&str>,
    timeout: f64,
) -> anyhow::Result<Server<Http>> {
    let key = key.map(|k| Secret::new(k.to_owned()));
    let client = options.client(ClientRole::Endpoint {
        api_key: key.as_ref(),
        timeout: Some(std::time::Duration::from_secs_f64(timeout)),
    })?;
    let host = tokenscope_loadgen::util::parse_base_url(url)
        .ok()
        .and_then(|(u, _)| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
        .unwrap_or_else(|| "the server".to_owned());
    let http = Http {
        client,
        shown: tokenscope_measure::parse::redact_url(url),
        host,
    };
    Server::new(url, http).map_err(|e| anyhow::anyhow!("{e}"))
}

impl Http {
    async fn send(&self, req: reqwest::RequestBuilder) -> Result<Value, String> {
        // reqwest's errors name the URL, query and all: never shown.
        let resp = req.send().await.map_err(|e| {
            let e = e.without_url();
            // A certificate problem told plainly, with the flag that fixes it;
            // else the cause chain (refused, timed out).
            let why = tls_problem(&e, &self.host)
                .unwrap_or_else(|| tokenscope_loadgen::util::error_chain(&e));
            format!("{}: no answer ({why})", self.shown)
        })?;
        let status = resp.status();
        if status.is_redirection() {
            let to = tokenscope_loadgen::http_client::redirect_target(&resp);
            return Err(format!(
                "{} answered {status} (a redirect to {to}): tokenscope does not follow redirects (they would carry the key elsewhere); give the final URL",
                self.shown
            ));
        }
        let text = resp.text().await.unwrap_or_default();
        if status.as_u16() == 401 || status.as_u16() == 403 {
            return Err(format!(
                "{} answered {status}: it wants a key (the candidate's: --api-key or TOKENSCOPE_API_KEY; the reference's: TOKENSCOPE_REF_API_KEY)",
                self.shown
            ));
        }
        if !status.is_success() {
            return Err(format!("{} answered {status}", self.shown));
        }
        serde_json::from_str(&text).map_err(|_| format!("{}: the answer is not JSON", self.shown))
    }
}

impl Transport for Http {
    async fn post(&self, url: &str, body: &Value) -> Result<Value, String> {
        self.send(self.client.post(url).json(body)).await
    }

    async fn get(&self, url: &str) -> Result<Value, String> {
        self.send(self.client.get(url)).await
    }

    fn say(&self, line: &str) {
        eprintln!("{line}");
    }
}
