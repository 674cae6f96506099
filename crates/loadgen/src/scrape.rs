//! Scraping the server's and the GPU exporter's `/metrics` during a run.
//!
//! One task owns the scraping. It scrapes every `interval` and whenever the
//! engine asks ([`Scraper::now`]: at each level's start and end), one scrape at a
//! time, so a scrape asked for comes after any periodic one already under way.
//! Scrapes go over their own HTTP client (their own connections, never one a
//! measured stream uses), and the text is parsed off the runtime's threads
//! (`spawn_blocking`), so the streams being timed are not disturbed. Each
//! scrape, read or failed, is recorded at once ([`Recorder::scrape`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue};
use tokenscope_core::analyze::server::scrape::{ScrapeRecord, ScrapeTarget};
use tokio::sync::{mpsc, oneshot};

use super::clock::Clock;
use crate::http_client::{ClientRole, HttpOptions};
use crate::util::Secret;

/// Longest a scrape may take.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(3);

/// Largest exposition read (a vLLM scrape with many models is ~100 KB).
const MAX_BODY_BYTES: usize = 8 << 20;

/// What `--server-metrics` asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerMetrics {
    /// The endpoint's origin + `/metrics`, dropped quietly when not there.
    Auto(reqwest::Url),
    /// This URL, scraped whatever it answers.
    Url(reqwest::Url),
    /// No scraping.
    Off,
}

/// One target to scrape.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Whose metrics.
    pub target: ScrapeTarget,
    /// Where.
    pub url: reqwest::Url,
    /// The key sent with it (only where the user's rules allow it).
    pub api_key: Option<Secret>,
}

/// Where a scrape goes once it is read.
pub trait Recorder: Send + 'static {
    /// Record a scrape.
    fn scrape(&mut self, s: ScrapeRecord);
}

/// The HTTP client for scrapes: separate from the measured streams' pool,
/// trusting what the run's client trusts (`--ca-cert`, `--client-cert`,
/// `--insecure`), going through the proxy the run's rules choose for each
/// scraped host, and given [`SCRAPE_TIMEOUT`] (the factory's side role).
pub fn client(http: &HttpOptions) -> crate::error::Result<reqwest::Client> {
    http.client(ClientRole::Side {
        timeout: SCRAPE_TIMEOUT,
    })
}

/// Scrape `ep` once: the record, timed on `clock`.
pub async fn scrape_once(http: &reqwest::Client, ep: &Endpoint, clock: &Clock) -> ScrapeRecord {
    let mut req = http
        .get(ep.url.clone())
        .header(ACCEPT, "text/plain;version=0.0.4;q=1,*/*;q=0.1");
    if let Some(key) = &ep.api_key
        && let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {}", key.expose()))
    {
        v.set_sensitive(true);
        req = req.header(AUTHORIZATION, v);
    }
    let fail = |why: String| ScrapeRecord::failed(ep.target, clock.now_ms(), why);
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return fail(describe(&e)),
    };
    let status = resp.status();
    if !status.is_success() {
        let hint = match status.as_u16() {
            401 | 403 if ep.api_key.is_none() => {
                " (no key was sent: the key goes only to the endpoint's own origin unless --metrics-send-key)"
            }
            401 | 403 => " (the key sent was refused)",
            404 => " (no /metrics there: llama-server needs --metrics)",
            _ => "",
        };
        return fail(format!("HTTP {}{hint}", status.as_u16()));
    }
    let body = match read_capped(resp).await {
        Ok(b) => b,
        Err(why) => return fail(why),
    };
    let t_ms = clock.now_ms();
    let target = ep.target;
    let text = String::from_utf8_lossy(&body).into_owned();
    tokio::task::spawn_blocking(move || ScrapeRecord::read(target, t_ms, &text))
        .await
        .unwrap_or_else(|_| ScrapeRecord::failed(target, t_ms, "the parser stopped"))
}

async fn read_capped(mut resp: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                body.extend_from_slice(&c);
                if body.len() > MAX_BODY_BYTES {
                    return Err(format!("the answer passed {} MiB", MAX_BODY_BYTES >> 20));
                }
            }
            Ok(None) => return Ok(body),
            Err(e) => return Err(describe(&e)),
        }
    }
}

/// A scrape error in a line, without its URL (which may hold a query key).
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!("no answer within {} s", SCRAPE_TIMEOUT.as_secs())
    } else if e.is_connect() {
        "connection refused or unreachable".into()
    } else {
        super::transport::strip_url(e)
    }
}

enum Cmd {
    Now(oneshot::Sender<()>),
}

/// The scraping task.
pub struct Scraper {
    tx: mpsc::Sender<Cmd>,
    task: tokio::task::JoinHandle<()>,
}

impl Scraper {
    /// Start scraping `endpoints` every `interval` into `rec`.
    pub fn spawn<R: Recorder>(
        http: reqwest::Client,
        endpoints: Vec<Endpoint>,
        interval: Duration,
        clock: Clock,
        rec: Arc<Mutex<R>>,
    ) -> Scraper {
        let (tx, mut rx) = mpsc::channel::<Cmd>(4);
        let task = tokio::spawn(async move {
            let scrape_all = || async {
                let records = futures_util::future::join_all(
                    endpoints.iter().map(|ep| scrape_once(&http, ep, &clock)),
                )
                .await;
                if let Ok(mut r) = rec.lock() {
                    for s in records {
                        r.scrape(s);
                    }
                }
            };
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tokio::select! {
                    cmd = rx.recv() => match cmd {
                        Some(Cmd::Now(reply)) => {
                            scrape_all().await;
                            let _ = reply.send(());
                            tick.reset();
                        }
                        None => break,
                    },
                    _ = tick.tick() => scrape_all().await,
                }
            }
        });
        Scraper { tx, task }
    }

    /// Scrape now and wait until the scrape is recorded.
    pub async fn now(&self) {
        let (reply, done) = oneshot::channel();
        if self.tx.send(Cmd::Now(reply)).await.is_ok() {
            let _ = done.await;
        }
    }

    /// Stop scraping.
    pub async fn stop(self) {
        drop(self.tx);
        let _ = self.task.await;
    }
}
