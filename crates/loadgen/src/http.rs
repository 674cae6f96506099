//! The run's connections, timed: a tower layer around reqwest's connector times
//! each new connection's whole setup (DNS, TCP, proxy tunnel, TLS) and keys it
//! by the socket's two addresses; the first request whose answer came over that
//! socket ([`ConnTracker::claim`]) is the one that opened it, and every request
//! is given the part of the setup it waited for. The client itself, as the user
//! asked for it, is [`crate::http_client`]'s; [`tracked`] adds the timing to it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use tokenscope_measure::record::ConnectionUse;

/// `b` with its connections timed by `tracker`: the DNS lookup and the
/// connector's whole setup of each new connection.
pub fn tracked(b: reqwest::ClientBuilder, tracker: &ConnTracker) -> reqwest::ClientBuilder {
    b.dns_resolver(Arc::new(TimedResolver))
        .connector_layer(TimeConnect {
            tracker: tracker.clone(),
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
