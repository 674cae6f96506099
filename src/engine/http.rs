//! The HTTP client of a run, as the user asked for it: TLS (system roots, private
//! CAs, a client certificate, or none checked), the HTTP version, the proxy, the
//! extra headers and the header carrying the key. One place builds it; the
//! pre-flight, the run and its set-up requests all use the same settings.
//!
//! It also tracks connections: a tower layer around reqwest's connector times
//! each new connection's whole setup (DNS, TCP, proxy tunnel, TLS) and keys it
//! by the socket's two addresses; the first request whose answer came over that
//! socket ([`ConnTracker::claim`]) is the one that opened it, and every request
//! is given the part of the setup it waited for.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use tokenscope_core::measure::record::ConnectionUse;
use tokenscope_core::report::transport::{HeaderInfo, ProxyInfo, TlsInfo, TransportInfo};

use super::proxy::{ProxyChoice, ProxyRules};
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
    /// once for the run's URL.
    pub proxy: Option<ProxyChoice>,
    /// The rules it was chosen by, for other hosts (the scrapes).
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
    /// client builder: the run's streams, its set-up requests and its scrapes
    /// all trust the same servers.
    pub fn apply_tls(
        &self,
        mut b: reqwest::ClientBuilder,
    ) -> anyhow::Result<reqwest::ClientBuilder> {
        use anyhow::Context as _;
        for path in &self.ca_certs {
            let pem = std::fs::read(path)
                .with_context(|| format!("--ca-cert {}: cannot read it", path.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                anyhow::anyhow!("--ca-cert {}: not a PEM certificate ({e})", path.display())
            })?;
            if certs.is_empty() {
                anyhow::bail!(
                    "--ca-cert {}: no certificate in it (expected PEM: -----BEGIN CERTIFICATE-----)",
                    path.display()
                );
            }
            for c in certs {
                b = b.add_root_certificate(c);
            }
        }
        if let Some((cert, key)) = &self.client_cert {
            let mut pem = std::fs::read(cert)
                .with_context(|| format!("--client-cert {}: cannot read it", cert.display()))?;
            pem.push(b'\n');
            pem.extend(
                std::fs::read(key)
                    .with_context(|| format!("--client-key {}: cannot read it", key.display()))?,
            );
            let id = reqwest::Identity::from_pem(&pem).map_err(|e| {
                anyhow::anyhow!(
                    "--client-cert {} / --client-key {}: not a PEM certificate and private key ({e})",
                    cert.display(),
                    key.display()
                )
            })?;
            b = b.identity(id);
        }
        if self.insecure {
            b = b.danger_accept_invalid_certs(true);
        }
        Ok(b)
    }

    /// A client with these settings, sending the key and the extra headers on
    /// every request, its connections tracked by `tracker`.
    pub fn client(
        &self,
        api_key: Option<&Secret>,
        tracker: Option<&ConnTracker>,
    ) -> anyhow::Result<reqwest::Client> {
        let mut b = reqwest::Client::builder()
            // Ours first: a `--header User-Agent: ...` replaces it.
            .user_agent(concat!("tokenscope/", env!("CARGO_PKG_VERSION")))
            .default_headers(self.base_headers(api_key))
            // A redirect is never followed: it would carry the key and the
            // extra headers to wherever it points, and time a different
            // server. The pre-flight names its target instead.
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .pool_max_idle_per_host(usize::MAX)
            .pool_idle_timeout(Duration::from_secs(90))
            .connect_timeout(Duration::from_secs(10))
            // The proxy is decided once for the run (and reported); nothing else.
            .no_proxy();
        b = self.apply_tls(b)?;
        b = match self.version {
            HttpVersion::Auto => b,
            HttpVersion::Http1 => b.http1_only(),
            HttpVersion::Http2 => b.http2_prior_knowledge(),
        };
        if let Some(p) = &self.proxy {
            b = b.proxy(
                reqwest::Proxy::all(p.url.clone())
                    .map_err(|e| anyhow::anyhow!("proxy {}: {e}", p.display()))?,
            );
        }
        if let Some(t) = tracker {
            b = b
                .dns_resolver(Arc::new(TimedResolver))
                .connector_layer(TimeConnect { tracker: t.clone() });
        }
        b.build()
            .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))
    }
}

/// A connection, as both ends name it: the socket's local and remote addresses
/// (a local port alone could be reused towards another server).
pub type ConnKey = (SocketAddr, SocketAddr);

/// One connection's setup on the run's monotonic clock.
#[derive(Debug, Clone, Copy)]
struct Setup {
    /// When the connector began (DNS lookup, TCP connect, proxy tunnel, TLS).
    began: Instant,
    /// When the connection was ready for requests.
    ready: Instant,
    /// Of it, the DNS lookup, ms.
    dns_ms: Option<f64>,
}

/// Connections' setups, by [`ConnKey`], and whether a request used them yet.
///
/// Each request is given the part of a setup it waited for: from the later of
/// its send and the setup's start to the connection being ready. The request
/// that triggered a connection waited for all of it; over HTTP/2 the streams
/// sent while the first connection was being set up waited for the rest of it
/// too (they are reused-connection requests with a setup); a request that
/// found the connection ready waited for none. Over HTTP/1.1 a connection set
/// up for one request can be taken by another that was sent later (the pool
/// hands out whichever is ready first): that one is given only what it waited.
#[derive(Debug, Clone, Default)]
pub struct ConnTracker {
    inner: Arc<Mutex<Tracked>>,
}

#[derive(Debug, Default)]
struct Tracked {
    /// Connections set up and not yet used by a request.
    fresh: HashMap<ConnKey, Setup>,
    /// Connections some request has used (with their setup, when timed).
    seen: HashMap<ConnKey, Option<Setup>>,
}

impl ConnTracker {
    fn record(&self, key: ConnKey, setup: Setup) {
        if let Ok(mut t) = self.inner.lock() {
            // A local port can come back after its connection closed: the new
            // connection on it is fresh again.
            t.seen.remove(&key);
            t.fresh.insert(key, setup);
        }
    }

    /// The connection an answer came over, for a request sent at `sent`: new
    /// for the first request that used it, reused after; with the part of its
    /// setup the request waited for.
    pub fn claim(&self, key: ConnKey, sent: Instant) -> ConnectionUse {
        let Ok(mut t) = self.inner.lock() else {
            return ConnectionUse::default();
        };
        let (new, setup) = match t.fresh.remove(&key) {
            Some(setup) => {
                t.seen.insert(key, Some(setup));
                (true, Some(setup))
            }
            None => match t.seen.get(&key) {
                Some(setup) => (false, *setup),
                // Never seen being set up (made before tracking): new once.
                None => {
                    t.seen.insert(key, None);
                    (true, None)
                }
            },
        };
        let waited_ms = setup.and_then(|s| {
            let from = s.began.max(sent);
            let ms = s.ready.saturating_duration_since(from).as_secs_f64() * 1000.0;
            (ms > 0.0).then_some(ms)
        });
        ConnectionUse {
            new,
            setup_ms: waited_ms,
            // The lookup is the start of the setup: the requests that were
            // there when it began waited for it, whichever is answered first.
            dns_ms: setup.filter(|s| sent <= s.began).and_then(|s| s.dns_ms),
            tls_ms: None,
        }
    }
}

/// The connection a response came over: its local and remote addresses.
pub fn conn_key(resp: &reqwest::Response) -> Option<ConnKey> {
    resp.extensions()
        .get::<hyper_util::client::legacy::connect::HttpInfo>()
        .map(|i| (i.local_addr(), i.remote_addr()))
}

/// The connector layer that times each connection's setup.
#[derive(Debug, Clone)]
struct TimeConnect {
    tracker: ConnTracker,
}

impl<S> tower::Layer<S> for TimeConnect {
    type Service = TimedConnector<S>;
    fn layer(&self, inner: S) -> Self::Service {
        TimedConnector {
            inner,
            tracker: self.tracker.clone(),
        }
    }
}

/// [`TimeConnect`]'s service: the inner connector, timed.
#[derive(Debug, Clone)]
struct TimedConnector<S> {
    inner: S,
    tracker: ConnTracker,
}

type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, R> tower::Service<R> for TimedConnector<S>
where
    S: tower::Service<R>,
    S::Response: hyper_util::client::legacy::connect::Connection,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let began = Instant::now();
        let fut = self.inner.call(req);
        let tracker = self.tracker.clone();
        Box::pin(async move {
            // The resolver, polled inside this future, notes its lookup here.
            let dns = Arc::new(Mutex::new(None));
            let conn = DNS_LOOKUP.scope(Arc::clone(&dns), fut).await?;
            let ready = Instant::now();
            let dns_ms = dns.lock().ok().and_then(|d| *d);
            let mut ext = http::Extensions::new();
            hyper_util::client::legacy::connect::Connection::connected(&conn).get_extras(&mut ext);
            if let Some(info) = ext.get::<hyper_util::client::legacy::connect::HttpInfo>() {
                tracker.record(
                    (info.local_addr(), info.remote_addr()),
                    Setup {
                        began,
                        ready,
                        dns_ms,
                    },
                );
            }
            Ok(conn)
        })
    }
}

tokio::task_local! {
    /// Where the connection being set up notes its DNS lookup, ms.
    static DNS_LOOKUP: Arc<Mutex<Option<f64>>>;
}

/// The system's resolver (getaddrinfo, as reqwest's default), timed: the lookup
/// is noted for the connection being set up ([`TimedConnector`]). An IP address
/// in the URL is never looked up.
#[derive(Debug, Clone, Copy)]
struct TimedResolver;

impl reqwest::dns::Resolve for TimedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let t0 = Instant::now();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let ms = t0.elapsed().as_secs_f64() * 1000.0;
            let _ = DNS_LOOKUP.try_with(|d| {
                if let Ok(mut d) = d.lock() {
                    *d = Some(d.unwrap_or(0.0) + ms);
                }
            });
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// A TLS failure told plainly: the host, the reason, and the flag that fixes
/// it; `None` when the error is not about TLS.
pub fn tls_problem(err: &(dyn std::error::Error + 'static), host: &str) -> Option<String> {
    use rustls::{AlertDescription, CertificateError, Error as TlsError};
    let mut src = Some(err);
    while let Some(e) = src {
        // An I/O error's `source()` skips the error it wraps (and reqwest nests
        // them): look inside each.
        let mut inner: Option<&TlsError> = None;
        let mut cur: &(dyn std::error::Error + 'static) = e;
        while let Some(wrapped) = cur
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            cur = wrapped;
            if let Some(t) = cur.downcast_ref::<TlsError>() {
                inner = Some(t);
                break;
            }
        }
        if let Some(t) = e.downcast_ref::<TlsError>().or(inner) {
            return Some(match t {
                TlsError::InvalidCertificate(c) => match c {
                    CertificateError::UnknownIssuer => format!(
                        "TLS: the certificate of {host} is signed by an unknown issuer (a private CA?): trust its CA with --ca-cert FILE"
                    ),
                    CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                        format!(
                            "TLS: the certificate of {host} has expired: renew it on the server (or, for a test server only, --insecure)"
                        )
                    }
                    CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                        format!(
                            "TLS: the certificate of {host} is not valid yet (is this machine's clock right?)"
                        )
                    }
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. } => format!(
                        "TLS: the certificate of {host} is not valid for the name {host}: use a name it was issued for in --url (or, for a test server only, --insecure)"
                    ),
                    other => format!(
                        "TLS: the certificate of {host} was refused ({other:?}): check it, or trust its CA with --ca-cert FILE"
                    ),
                },
                TlsError::AlertReceived(
                    AlertDescription::CertificateRequired
                    | AlertDescription::HandshakeFailure
                    | AlertDescription::BadCertificate
                    | AlertDescription::UnknownCA,
                ) => format!(
                    "TLS: {host} refused the handshake ({t}): it may want a client certificate its CA signed: --client-cert FILE --client-key FILE"
                ),
                TlsError::NoApplicationProtocol
                | TlsError::AlertReceived(AlertDescription::NoApplicationProtocol) => format!(
                    "TLS: {host} offers none of the HTTP versions asked for by ALPN (with --http2: it does not speak HTTP/2; try without it)"
                ),
                other => format!("TLS with {host} failed: {other}"),
            });
        }
        src = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::{AlertDescription, CertificateError, Error as TlsError};

    /// A TLS error as reqwest hands it over: an I/O error in an I/O error.
    fn wrapped(e: TlsError) -> std::io::Error {
        std::io::Error::other(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    #[test]
    fn certificate_problems_name_the_host_the_reason_and_the_fix() {
        let host = "api.internal:443";
        for (e, needles) in [
            (
                TlsError::InvalidCertificate(CertificateError::UnknownIssuer),
                &["unknown issuer", "--ca-cert"][..],
            ),
            (
                TlsError::InvalidCertificate(CertificateError::Expired),
                &["has expired"][..],
            ),
            (
                TlsError::InvalidCertificate(CertificateError::NotValidForName),
                &["not valid for the name", "--url"][..],
            ),
            (
                TlsError::AlertReceived(AlertDescription::CertificateRequired),
                &["--client-cert", "--client-key"][..],
            ),
            (TlsError::NoApplicationProtocol, &["HTTP/2"][..]),
            (
                TlsError::AlertReceived(AlertDescription::NoApplicationProtocol),
                &["HTTP/2"][..],
            ),
        ] {
            let msg = tls_problem(&wrapped(e), host).unwrap();
            assert!(msg.contains(host), "{msg}");
            for n in needles {
                assert!(msg.contains(n), "{msg} lacks {n}");
            }
        }
        assert_eq!(tls_problem(&std::io::Error::other("refused"), host), None);
    }

    #[test]
    fn each_request_is_given_the_part_of_the_setup_it_waited_for() {
        let t = ConnTracker::default();
        let server: SocketAddr = "127.0.0.1:8000".parse().unwrap();
        let a: ConnKey = ("127.0.0.1:40000".parse().unwrap(), server);
        let t0 = Instant::now();
        let ms = |x: u64| t0 + Duration::from_millis(x);
        // Sent at 0, the connection began at 1 and was ready at 13.
        let setup = |began, ready, dns_ms| Setup {
            began: ms(began),
            ready: ms(ready),
            dns_ms,
        };
        t.record(a, setup(1, 13, Some(0.5)));
        let first = t.claim(a, ms(0));
        assert!(first.new);
        assert!((first.setup_ms.unwrap() - 12.0).abs() < 1e-6, "{first:?}");
        assert_eq!(first.dns_ms, Some(0.5));
        // An HTTP/2 stream sent at 5 waited for the rest: reused, 8 ms of setup.
        let second = t.claim(a, ms(5));
        assert!(!second.new);
        assert!((second.setup_ms.unwrap() - 8.0).abs() < 1e-6, "{second:?}");
        assert_eq!(second.dns_ms, None);
        // Sent after it was ready: none.
        let later = t.claim(a, ms(20));
        assert_eq!((later.new, later.setup_ms), (false, None));
        // The port comes back with a new connection: new again. Taken by a
        // request sent after it began (HTTP/1.1's pool): only what it waited.
        t.record(a, setup(30, 33, Some(0.2)));
        let taken = t.claim(a, ms(32));
        assert!(taken.new);
        assert!((taken.setup_ms.unwrap() - 1.0).abs() < 1e-6, "{taken:?}");
        assert_eq!(taken.dns_ms, None);
        // The same local port towards another server is another connection.
        let other: ConnKey = (a.0, "127.0.0.1:9000".parse().unwrap());
        assert!(t.claim(other, ms(40)).new && !t.claim(other, ms(41)).new);
        // HTTP/2: the stream that triggered the connection (sent at 50) is
        // answered after one sent during its setup (at 52): the first answered
        // is new, and the lookup is the triggering stream's, answered second.
        let b: ConnKey = ("127.0.0.1:40001".parse().unwrap(), server);
        t.record(b, setup(51, 60, Some(0.3)));
        let answered_first = t.claim(b, ms(52));
        assert!(answered_first.new);
        assert_eq!(answered_first.dns_ms, None);
        assert!((answered_first.setup_ms.unwrap() - 8.0).abs() < 1e-6);
        let trigger = t.claim(b, ms(50));
        assert!(!trigger.new);
        assert_eq!(trigger.dns_ms, Some(0.3));
        assert!((trigger.setup_ms.unwrap() - 9.0).abs() < 1e-6);
    }
}
