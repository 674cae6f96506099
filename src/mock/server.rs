//! The server's own accept loop: TCP (Nagle off), an optional held connection
//! setup (`--connect-delay-ms`), an optional TLS handshake, then HTTP/1.1 or
//! HTTP/2 on the connection (by ALPN over TLS, by the client's first bytes in
//! plaintext: h2c with prior knowledge).
//!
//! Each connection's facts ([`ConnInfo`]) reach the handlers as a request
//! extension, so the server's log says which connection a request came on.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

use tokenscope_loadgen::clock::Clock;

/// How the server serves its connections.
#[derive(Clone)]
pub struct ServeOptions {
    /// The clock of the connection times (the mock state's, so they compare with
    /// its request times).
    pub clock: Clock,
    /// TLS, with the ALPN protocols offered already set (`None`: plaintext).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Speak only HTTP/1.1 (no h2 by ALPN, no h2c by prior knowledge).
    pub http1_only: bool,
    /// How long each new connection is held after its accept, before its TLS
    /// handshake (or its first byte is read, in plaintext).
    pub connect_delay: Duration,
}

impl ServeOptions {
    /// Plaintext, HTTP/1.1 and h2c, no delay.
    pub fn plain(clock: Clock) -> Self {
        Self {
            clock,
            tls: None,
            http1_only: false,
            connect_delay: Duration::ZERO,
        }
    }

    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }
}

/// One connection as the server saw it (a request extension).
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo {
    /// Its number in accept order (1 = first).
    pub number: u64,
    /// Whether it is TLS.
    pub tls: bool,
    /// When it was accepted (ms on the server's clock).
    pub t_accepted_ms: f64,
    /// When it was ready to serve: after the delay and the TLS handshake.
    pub t_ready_ms: f64,
}

/// Serve until the future is dropped or the listener fails. Nagle's algorithm is
/// off on every connection: the server writes headers and each chunk separately,
/// and a held-back small segment would add the peer's delayed-ACK time to a token.
/// A connection's error (a failed handshake, a reset) ends only that connection.
pub async fn serve(listener: TcpListener, app: Router, opts: ServeOptions) -> std::io::Result<()> {
    let opts = Arc::new(opts);
    let acceptor = opts.tls.clone().map(TlsAcceptor::from);
    let accepted = AtomicU64::new(0);
    loop {
        let (tcp, _peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) if is_connection_error(&e) => continue,
            Err(_) => {
                // Out of file descriptors and the like: wait rather than spin.
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let t_accepted_ms = opts.clock.now_ms();
        let number = accepted.fetch_add(1, Ordering::Relaxed) + 1;
        let _ = tcp.set_nodelay(true);
        tokio::spawn(connection(
            tcp,
            number,
            t_accepted_ms,
            opts.clone(),
            acceptor.clone(),
            app.clone(),
        ));
    }
}

/// Errors of one connection that the accept loop just goes past.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// Set up and serve one connection; its errors end only it.
async fn connection(
    tcp: TcpStream,
    number: u64,
    t_accepted_ms: f64,
    opts: Arc<ServeOptions>,
    acceptor: Option<TlsAcceptor>,
    app: Router,
) {
    if !opts.connect_delay.is_zero() {
        tokio::time::sleep(opts.connect_delay).await;
    }
    match acceptor {
        Some(acceptor) => {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return; // a failed handshake (an untrusted or missing client certificate)
            };
            let info = ConnInfo {
                number,
                tls: true,
                t_accepted_ms,
                t_ready_ms: opts.clock.now_ms(),
            };
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            serve_http(TokioIo::new(tls), info, opts.http1_only || !h2, h2, app).await;
        }
        None => {
            let info = ConnInfo {
                number,
                tls: false,
                t_accepted_ms,
                t_ready_ms: opts.clock.now_ms(),
            };
            serve_http(TokioIo::new(tcp), info, opts.http1_only, false, app).await;
        }
    }
}

/// HTTP on a ready connection: only HTTP/1.1, only HTTP/2 (negotiated by ALPN),
/// or either, told apart by the client's first bytes.
async fn serve_http<I>(io: I, info: ConnInfo, http1_only: bool, http2_only: bool, app: Router)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = app.map_request(move |mut req: axum::http::Request<Incoming>| {
        req.extensions_mut().insert(info);
        req.map(Body::new)
    });
    let mut builder = Builder::new(TokioExecutor::new());
    if http1_only {
        builder = builder.http1_only();
    } else if http2_only {
        builder = builder.http2_only();
    }
    let _ = builder
        .serve_connection_with_upgrades(io, TowerToHyperService::new(service))
        .await;
}
