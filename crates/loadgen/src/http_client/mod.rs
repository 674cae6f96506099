//! The one HTTP client factory: every client tokenscope makes (the bench's
//! streams and set-up requests, the quality checks', the scrapes of
//! `/metrics`, the remote write, the collector's OTLP export) is built here,
//! from one [`HttpOptions`] (TLS: system roots, private CAs, a client
//! certificate, or none checked; the HTTP version; the proxy, by `--proxy` or
//! the environment; the extra headers and the header carrying the key), with
//! the few settings where callers differ on purpose given as a [`ClientRole`].
//! The CLI's `cmd::http_args` reads the options from the command line.

pub mod proxy;
pub mod tls;

use std::path::PathBuf;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use tokenscope_core::report::transport::{HeaderInfo, ProxyInfo, TlsInfo, TransportInfo};
use tokenscope_measure::messages;

use self::proxy::{ProxyChoice, ProxyRules};
use crate::error::{Error, Result};
use crate::util::Secret;

/// The HTTP version to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpVersion {
    /// h2 where the server offers it by ALPN (TLS), else HTTP/1.1.
    #[default]
    Auto,
    /// HTTP/1.1 only.
    Http1,
    /// HTTP/2 only: ALPN `h2` over TLS, prior knowledge (h2c) in plaintext.
    Http2,
}

impl HttpVersion {
    /// The name the report gives it.
    pub fn label(self) -> &'static str {
        match self {
            HttpVersion::Auto => "auto",
            HttpVersion::Http1 => "http1",
            HttpVersion::Http2 => "http2",
        }
    }
}

/// One header sent on every request (`--header`).
#[derive(Debug, Clone)]
pub struct ExtraHeader {
    /// Its name.
    pub name: HeaderName,
    /// Its value: hidden like the key unless `public`.
    pub value: Secret,
    /// The user marked the value safe to print and report (`--public-header`).
    pub public: bool,
}

/// What a client is for: the settings where callers differ on purpose.
///
/// Every client names itself `tokenscope/VERSION`, trusts what the options
/// trust, and never follows a redirect: one would carry the key and the
/// headers to wherever it points, and time or check another server than the
/// one named (callers name the redirect's target instead).
#[derive(Debug, Clone, Copy)]
pub enum ClientRole<'a> {
    /// The endpoint's own requests (the bench's streams, pre-flight and
    /// set-up requests; each server of the quality checks): `api_key` (in the
    /// options' key header) and the extra headers on every request, the
    /// options' HTTP version, the one proxy chosen for the endpoint, as many
    /// idle connections as the load keeps, 10 s to connect. `timeout` bounds a
    /// whole request: quality's `--timeout`; none for the bench, whose
    /// requests take what they take (its own `--timeout` is per request, and
    /// a stall is what it measures).
    Endpoint {
        /// The key, when the server gets one.
        api_key: Option<&'a Secret>,
        /// Longest a whole request may take.
        timeout: Option<Duration>,
    },
    /// Requests beside the measured ones, to servers that may be others (the
    /// scrapes of `/metrics`, the remote write, the collector's OTLP export):
    /// neither the key nor the extra headers (they are the endpoint's; callers
    /// add what their server needs per request), the HTTP version negotiated,
    /// the proxy chosen for each host by the options' rules, two idle
    /// connections (never one a measured stream uses), and `timeout` to
    /// connect and for a whole request (a scrape that is late is a failed
    /// scrape; a request may set a longer one).
    Side {
        /// Longest a request (and its connection) may take.
        timeout: Duration,
    },
}

/// Where a redirect that no client follows ([`ClientRole`]) points, for its
/// error: its `Location` without credentials or query (they may be secrets).
pub fn redirect_target(resp: &reqwest::Response) -> String {
    resp.headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map_or_else(
            || "nowhere named".to_owned(),
            tokenscope_measure::parse::redact_url,
        )
}

/// How to reach the endpoint.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// PEM files of CAs to trust besides the system's roots (`--ca-cert`).
    pub ca_certs: Vec<PathBuf>,
    /// A client certificate and its key, PEM (`--client-cert`, `--client-key`).
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Accept any certificate (`--insecure`).
    pub insecure: bool,
    /// The HTTP version.
    pub version: HttpVersion,
    /// The proxy for the endpoint (`--proxy`, else the environment's), decided
    /// once for its URL.
    pub proxy: Option<ProxyChoice>,
    /// The rules it was chosen by, for other hosts (the scrapes, quality's
    /// reference).
    pub proxy_rules: ProxyRules,
    /// Extra headers.
    pub headers: Vec<ExtraHeader>,
    /// The header carrying the key instead of `Authorization: Bearer`.
    pub api_key_header: Option<HeaderName>,
}

impl HttpOptions {
    /// The report's account of these settings (no secret in it).
    pub fn info(&self, https: bool) -> TransportInfo {
        TransportInfo {
            http_version: self.version.label().to_owned(),
            tls: https.then(|| TlsInfo {
                ca_certs: self
                    .ca_certs
                    .iter()
                    .map(|p| {
                        p.file_name()
                            .map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into())
                    })
                    .collect(),
                client_cert: self.client_cert.is_some(),
                insecure: self.insecure,
            }),
            proxy: self.proxy.as_ref().map(|p| ProxyInfo {
                url: p.display(),
                from: p.from.clone(),
                credentials: p.has_credentials(),
            }),
            headers: self
                .headers
                .iter()
                .map(|h| HeaderInfo {
                    name: h.name.as_str().to_owned(),
                    value: h.public.then(|| h.value.expose().to_owned()),
                })
                .collect(),
            api_key_header: self.api_key_header.as_ref().map(|h| h.as_str().to_owned()),
        }
    }

    /// What Anthropic's Messages API asks of every request: the key (where
    /// there is one) in `x-api-key` unless `--api-key-header` names another, and
    /// an `anthropic-version` header unless `--header` gives one.
    pub fn use_messages_api_headers(&mut self, with_key: bool) {
        if with_key {
            self.api_key_header
                .get_or_insert(HeaderName::from_static(messages::KEY_HEADER));
        }
        if !self
            .headers
            .iter()
            .any(|h| h.name == messages::VERSION_HEADER)
        {
            self.headers.push(ExtraHeader {
                name: HeaderName::from_static(messages::VERSION_HEADER),
                value: Secret::new(messages::ANTHROPIC_VERSION.to_owned()),
                public: true,
            });
        }
    }

    /// The headers every request carries: the key (in its header) and the extra
    /// ones, all but the public ones marked sensitive (never logged by the stack).
    pub fn base_headers(&self, api_key: Option<&Secret>) -> HeaderMap {
        let mut h = HeaderMap::new();
        for x in &self.headers {
            if let Ok(mut v) = HeaderValue::from_str(x.value.expose()) {
                v.set_sensitive(!x.public);
                h.append(x.name.clone(), v);
            }
        }
        if let Some(key) = api_key {
            let (name, value) = match &self.api_key_header {
                Some(name) => (name.clone(), key.expose().to_owned()),
                None => (AUTHORIZATION, format!("Bearer {}", key.expose())),
            };
            if let Ok(mut v) = HeaderValue::from_str(&value) {
                v.set_sensitive(true);
                h.insert(name, v);
            }
        }
        h
    }

    /// The TLS settings (private CAs, client certificate, `--insecure`) on a
    /// client builder: every client trusts the same servers.
    fn apply_tls(&self, mut b: reqwest::ClientBuilder) -> Result<reqwest::ClientBuilder> {
        for path in &self.ca_certs {
            let pem = std::fs::read(path)
                .map_err(|e| Error::file("--ca-cert", path, "cannot read it", e))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                Error::Option(format!(
                    "--ca-cert {}: not a PEM certificate ({e})",
                    path.display()
                ))
            })?;
            if certs.is_empty() {
                return Err(Error::Option(format!(
                    "--ca-cert {}: no certificate in it (expected PEM: -----BEGIN CERTIFICATE-----)",
                    path.display()
                )));
            }
            for c in certs {
                b = b.add_root_certificate(c);
            }
        }
        if let Some((cert, key)) = &self.client_cert {
            let mut pem = std::fs::read(cert)
                .map_err(|e| Error::file("--client-cert", cert, "cannot read it", e))?;
            pem.push(b'\n');
            pem.extend(
                std::fs::read(key)
                    .map_err(|e| Error::file("--client-key", key, "cannot read it", e))?,
            );
            let id = reqwest::Identity::from_pem(&pem).map_err(|e| {
                Error::Option(format!(
                    "--client-cert {} / --client-key {}: not a PEM certificate and private key ({e})",
                    cert.display(),
                    key.display()
                ))
            })?;
            b = b.identity(id);
        }
        if self.insecure {
            b = b.danger_accept_invalid_certs(true);
        }
        Ok(b)
    }

    /// The options for another server reached beside this one (quality's
    /// reference): the same TLS settings and proxy rules, the proxy chosen for
    /// `url`. The extra headers, the key's header and the HTTP version are
    /// this server's: kept when `same_origin` (the same server or gateway),
    /// else dropped (the key then goes as `Authorization: Bearer`). The error
    /// is a proxy URL that is not one (without its credentials).
    pub fn for_server(&self, url: &reqwest::Url, same_origin: bool) -> Result<Self, String> {
        let proxy = self.proxy_rules.choose(url)?;
        Ok(if same_origin {
            Self {
                proxy,
                ..self.clone()
            }
        } else {
            Self {
                proxy,
                headers: Vec::new(),
                api_key_header: None,
                version: HttpVersion::Auto,
                ..self.clone()
            }
        })
    }

    /// What the user must hear before anything is sent: an unverified
    /// certificate (loudly; `reported`: the report says so too) and the proxy
    /// in use (its host, never its credentials). One line each.
    pub fn notices(&self, reported: bool) -> Vec<String> {
        let mut lines = Vec::new();
        if self.insecure {
            lines.push(format!(
                "WARNING: --insecure: the server's certificate is NOT verified; anyone on the path could have answered.{}",
                if reported { " The report says so." } else { "" }
            ));
        }
        if let Some(p) = &self.proxy {
            lines.push(format!(
                "note: requests go through the proxy {} (from {})",
                p.display(),
                p.from
            ));
        }
        lines
    }

    /// A client with these settings for `role` ([`ClientRole`]).
    pub fn client(&self, role: ClientRole<'_>) -> Result<reqwest::Client> {
        self.client_with(role, |b| b)
    }

    /// [`Self::client`], with `add` setting what one caller alone needs on
    /// the builder (the bench's connection timing) before it is built.
    pub fn client_with(
        &self,
        role: ClientRole<'_>,
        add: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
    ) -> Result<reqwest::Client> {
        let mut b = reqwest::Client::builder()
            // Ours first: a `--header User-Agent: ...` replaces it.
            .user_agent(concat!("tokenscope/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            // The proxy is ours to choose ([`ProxyRules`]), never reqwest's.
            .no_proxy();
        b = self.apply_tls(b)?;
        match role {
            ClientRole::Endpoint { api_key, timeout } => {
                b = b
                    .default_headers(self.base_headers(api_key))
                    .pool_max_idle_per_host(usize::MAX)
                    .pool_idle_timeout(Duration::from_secs(90))
                    .connect_timeout(Duration::from_secs(10));
                if let Some(t) = timeout {
                    b = b.timeout(t);
                }
                b = match self.version {
                    HttpVersion::Auto => b,
                    HttpVersion::Http1 => b.http1_only(),
                    HttpVersion::Http2 => b.http2_prior_knowledge(),
                };
                if let Some(p) = &self.proxy {
                    b = b.proxy(
                        reqwest::Proxy::all(p.url.clone())
                            .map_err(|e| Error::Option(format!("proxy {}: {e}", p.display())))?,
                    );
                }
            }
            ClientRole::Side { timeout } => {
                let rules = self.proxy_rules.clone();
                b = b
                    .proxy(reqwest::Proxy::custom(move |url| {
                        rules.choose(url).ok().flatten().map(|p| p.url)
                    }))
                    .pool_max_idle_per_host(2)
                    .connect_timeout(timeout)
                    .timeout(timeout);
            }
        }
        add(b)
            .build()
            .map_err(|e| Error::Internal(format!("cannot build the HTTP client: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> reqwest::Url {
        reqwest::Url::parse(s).unwrap()
    }

    #[test]
    fn another_server_keeps_tls_and_proxy_rules_and_gets_headers_only_on_the_same_origin() {
        let env = |n: &str| (n == "NO_PROXY").then(|| "ref.internal".to_owned());
        let rules = ProxyRules::read(Some("http://u:s3cret@proxy.corp:3128"), &env);
        let options = HttpOptions {
            ca_certs: vec!["ca.pem".into()],
            insecure: true,
            version: HttpVersion::Http2,
            proxy: rules.choose(&url("https://cand/v1")).unwrap(),
            proxy_rules: rules,
            headers: vec![ExtraHeader {
                name: HeaderName::from_static("x-tenant"),
                value: Secret::new("t".into()),
                public: false,
            }],
            api_key_header: Some(HeaderName::from_static("api-key")),
            ..Default::default()
        };
        let same = options.for_server(&url("https://cand/v2"), true).unwrap();
        assert_eq!(same.headers.len(), 1);
        assert_eq!(same.version, HttpVersion::Http2);
        assert!(same.api_key_header.is_some());
        let other = options
            .for_server(&url("https://ref.internal/v1"), false)
            .unwrap();
        assert!(other.headers.is_empty() && other.api_key_header.is_none());
        assert_eq!(other.version, HttpVersion::Auto);
        assert_eq!(other.ca_certs, options.ca_certs);
        assert!(other.insecure);
        // NO_PROXY names the reference: direct, by the same rules.
        assert_eq!(other.proxy, None);
        let key = Secret::new("k".into());
        assert_eq!(
            other.base_headers(Some(&key)).get("authorization").unwrap(),
            "Bearer k"
        );
        let said = options.notices(false).join("\n");
        assert!(
            said.contains("WARNING: --insecure")
                && said.contains("http://proxy.corp:3128 (from --proxy)")
                && !said.contains("s3cret")
                && !said.contains("The report says so"),
            "{said}"
        );
        assert!(options.notices(true)[0].ends_with("The report says so."));
    }
}
