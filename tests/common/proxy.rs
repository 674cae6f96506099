//! A small HTTP proxy for tests, on its own thread and tokio runtime: `CONNECT
//! host:port` (200, then a byte tunnel) and absolute-form plain-HTTP requests
//! (`POST http://host:port/path HTTP/1.1`: the head is passed on, then bytes are
//! relayed both ways, so one client connection reaches one target). Optionally
//! requires `Proxy-Authorization: Basic ...` (407 otherwise). It records the
//! targets it reached and the connections it accepted.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy saw.
#[derive(Debug, Default)]
struct Seen {
    /// `host:port` of each tunnel or forwarded connection, in order.
    targets: Vec<String>,
    /// Client connections accepted.
    connections: u64,
    /// Requests answered 407.
    refused: u64,
}

/// A running test proxy (it stops with the test process).
#[derive(Debug, Clone)]
pub struct TestProxy {
    port: u16,
    seen: Arc<Mutex<Seen>>,
}

impl TestProxy {
    /// A proxy on 127.0.0.1:0 that asks for no credentials.
    pub fn start() -> TestProxy {
        Self::spawn(None)
    }

    /// A proxy that requires `Proxy-Authorization: Basic base64(user:pass)`.
    pub fn start_with_auth(user: &str, pass: &str) -> TestProxy {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        Self::spawn(Some(format!("Basic {token}")))
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The `host:port` targets tunnelled or forwarded to, in order.
    pub fn targets(&self) -> Vec<String> {
        self.seen.lock().unwrap().targets.clone()
    }

    /// Client connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.seen.lock().unwrap().connections
    }

    /// Requests refused with 407 so far.
    pub fn refused(&self) -> u64 {
        self.seen.lock().unwrap().refused
    }

    fn spawn(auth: Option<String>) -> TestProxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = seen.clone();
        std::thread::Builder::new()
            .name("test-proxy".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let listener = TcpListener::from_std(listener).unwrap();
                    let auth = Arc::new(auth);
                    loop {
                        let Ok((tcp, _)) = listener.accept().await else {
                            continue;
                        };
                        let _ = tcp.set_nodelay(true);
                        shared.lock().unwrap().connections += 1;
                        tokio::spawn(handle(tcp, auth.clone(), shared.clone()));
                    }
                });
            })
            .unwrap();
        TestProxy { port, seen }
    }
}

/// Read a request head (through the blank line); returns it and any bytes read
/// past it.
async fn read_head(tcp: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = tcp.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Some((String::from_utf8(buf).ok()?, rest));
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
    }
}

/// One client connection: check credentials, then tunnel or forward.
async fn handle(mut client: TcpStream, auth: Arc<Option<String>>, seen: Arc<Mutex<Seen>>) {
    let Some((head, rest)) = read_head(&mut client).await else {
        return;
    };
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_owned();
    let mut parts = request_line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let headers: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
    if let Some(expected) = auth.as_deref() {
        let given = headers.iter().find_map(|h| {
            let (name, value) = h.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("proxy-authorization")
                .then(|| value.trim())
        });
        if given != Some(expected) {
            seen.lock().unwrap().refused += 1;
            let _ = client
                .write_all(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n\
                      Proxy-Authenticate: Basic realm=\"test-proxy\"\r\n\
                      Content-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            return;
        }
    }
    if method.eq_ignore_ascii_case("CONNECT") {
        let host_port = target.to_owned();
        let Ok(mut upstream) = TcpStream::connect(&host_port).await else {
            let _ = client
                .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                .await;
            return;
        };
        let _ = upstream.set_nodelay(true);
        seen.lock().unwrap().targets.push(host_port);
        if client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .is_err()
            || upstream.write_all(&rest).await.is_err()
        {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        return;
    }
    // Absolute form: `METHOD http://host:port/path HTTP/1.1`.
    let Some(after) = target.strip_prefix("http://") else {
        let _ = client
            .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            .await;
        return;
    };
    let authority = after.split('/').next().unwrap_or(after);
    let host_port = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let Ok(mut upstream) = TcpStream::connect(&host_port).await else {
        let _ = client
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            .await;
        return;
    };
    let _ = upstream.set_nodelay(true);
    seen.lock().unwrap().targets.push(host_port);
    // The head as sent, less the credentials meant for the proxy.
    let mut forwarded = format!("{request_line}\r\n");
    for h in headers.iter().filter(|h| {
        !h.split_once(':')
            .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case("proxy-authorization"))
    }) {
        forwarded.push_str(h);
        forwarded.push_str("\r\n");
    }
    forwarded.push_str("\r\n");
    if upstream.write_all(forwarded.as_bytes()).await.is_err()
        || upstream.write_all(&rest).await.is_err()
    {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}
