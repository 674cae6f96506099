//! Scraping the server's (and a GPU exporter's) `/metrics` during a page run, as
//! `tokenscope bench` does: once before the run, at each level's start and end,
//! and every interval within it. The text is kept as it came (reading it takes
//! the report module: see [`tokenscope_render::page::scrape`]); the built-in
//! simulator answers with its own exposition.
//!
//! A scrape is a `fetch` of its own. For a URL on the page's own origin it is
//! made with credentials (`include`) while the measured streams go without
//! (`omit`): Chromium keeps the two in separate connection pools, so a scrape
//! never takes a connection a stream is waiting for. On another origin the
//! server must allow the page's origin (CORS), and the scrape shares the
//! browser's connections to that host. The API key goes only to a URL on the
//! endpoint's own origin.

use std::cell::Cell;
use std::rc::Rc;

use futures_util::future::{Either, join_all, select};
use tokenscope_core::analyze::server::scrape::ScrapeTarget;
use tokenscope_render::page::scrape::TakenScrape;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{RequestInit, Response};

use super::clock::{now, sleep_ms};
use super::fetch::js_error_text;
use super::sim::SimServer;

/// Longest a scrape may take, ms (as `bench`'s).
const SCRAPE_TIMEOUT_MS: f64 = 3000.0;

/// Largest exposition read, bytes (as `bench`'s).
const MAX_TEXT_BYTES: usize = 8 << 20;

/// Where one target's metrics come from.
#[derive(Clone)]
pub enum Source {
    /// The built-in simulator's exposition.
    Sim(SimServer),
    /// A URL, with the key when it is on the endpoint's origin.
    Url {
        /// Where.
        url: String,
        /// The key (on the endpoint's origin only) and extra headers.
        auth: super::fetch::Auth,
    },
}

/// One target to scrape.
#[derive(Clone)]
pub struct Target {
    /// Whose metrics.
    pub target: ScrapeTarget,
    /// Where from.
    pub source: Source,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Target").field(&self.target).finish()
    }
}

/// Scrape one target now.
pub async fn take(t: &Target) -> TakenScrape {
    let result = match &t.source {
        Source::Sim(sim) => Ok(sim.metrics_text()),
        Source::Url { url, auth } => {
            let fetched = std::pin::pin!(fetch_text(url, auth));
            let timer = std::pin::pin!(sleep_ms(SCRAPE_TIMEOUT_MS));
            match select(fetched, timer).await {
                Either::Left((r, _)) => r,
                Either::Right(_) => {
                    Err(format!("no answer within {} s", SCRAPE_TIMEOUT_MS / 1000.0))
                }
            }
        }
    };
    let t_ms = now();
    let (text, error) = match result {
        Ok(text) => (Some(text), None),
        Err(e) => (None, Some(e)),
    };
    TakenScrape {
        target: t.target,
        t_ms,
        text,
        error,
    }
}

fn same_origin(url: &str) -> bool {
    let page = web_sys::window().and_then(|w| w.location().origin().ok());
    let theirs = web_sys::Url::new(url).ok().map(|u| u.origin());
    page.is_some() && page == theirs
}

/// `GET url`: the body text, or why there is none (never the URL: it may hold a
/// key).
async fn fetch_text(url: &str, auth: &super::fetch::Auth) -> Result<String, String> {
    let init = RequestInit::new();
    init.set_method("GET");
    init.set_mode(web_sys::RequestMode::Cors);
    // Own pool on the page's origin (see the module's doc).
    init.set_credentials(if same_origin(url) {
        web_sys::RequestCredentials::Include
    } else {
        web_sys::RequestCredentials::Omit
    });
    let headers = web_sys::Headers::new().map_err(|e| js_error_text(&e))?;
    headers
        .set("accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
        .map_err(|e| js_error_text(&e))?;
    auth.apply(&headers)?;
    init.set_headers(&headers);
    let window = web_sys::window().ok_or("no window")?;
    let resp: Response = JsFuture::from(window.fetch_with_str_and_init(url, &init))
        .await
        .map_err(|e| {
            format!(
                "no response ({}): connection refused, or a CORS refusal (the server must allow this page's origin)",
                js_error_text(&e)
            )
        })?
        .unchecked_into();
    let status = resp.status();
    if !(200..300).contains(&status) {
        let hint = match status {
            401 | 403 if auth.key.is_none() => {
                " (no key was sent: the key goes only to the endpoint's own origin)"
            }
            401 | 403 => " (the key sent was refused)",
            404 => " (no /metrics there: llama-server needs --metrics)",
            _ => "",
        };
        return Err(format!("HTTP {status}{hint}"));
    }
    let text = JsFuture::from(resp.text().map_err(|e| js_error_text(&e))?)
        .await
        .map_err(|e| format!("the answer broke off ({})", js_error_text(&e)))?
        .as_string()
        .unwrap_or_default();
    if text.len() > MAX_TEXT_BYTES {
        return Err(format!("the answer passed {} MiB", MAX_TEXT_BYTES >> 20));
    }
    Ok(text)
}

/// The run's scraper: scrapes every target when asked ([`Scraper::now`]) and
/// every interval, one scrape of all targets at a time, handing each scrape to
/// the run as it is taken.
pub struct Scraper {
    targets: Vec<Target>,
    interval_ms: f64,
    busy: Cell<bool>,
    last_ms: Cell<f64>,
    stopped: Cell<bool>,
    sink: Box<dyn Fn(TakenScrape)>,
}

impl std::fmt::Debug for Scraper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scraper")
            .field("targets", &self.targets)
            .field("interval_ms", &self.interval_ms)
            .finish()
    }
}

impl Scraper {
    /// A scraper of `targets` every `interval_ms`, handing scrapes to `sink`.
    pub fn new(targets: Vec<Target>, interval_ms: f64, sink: Box<dyn Fn(TakenScrape)>) -> Self {
        Self {
            targets,
            interval_ms,
            busy: Cell::new(false),
            last_ms: Cell::new(now()),
            stopped: Cell::new(false),
            sink,
        }
    }

    /// Scrape every target now and wait until the scrapes are handed on (after
    /// any periodic scrape under way, so this one is the latest).
    pub async fn now(&self) {
        while self.busy.get() {
            sleep_ms(5.0).await;
        }
        self.busy.set(true);
        let taken = join_all(self.targets.iter().map(take)).await;
        for t in taken {
            (self.sink)(t);
        }
        self.last_ms.set(now());
        self.busy.set(false);
    }

    /// Scrape every interval (counted from the latest scrape) until stopped.
    pub fn start_periodic(self: &Rc<Self>) {
        let me = Rc::clone(self);
        wasm_bindgen_futures::spawn_local(async move {
            loop {
                let due = me.last_ms.get() + me.interval_ms;
                sleep_ms((due - now()).max(1.0)).await;
                if me.stopped.get() {
                    return;
                }
                if !me.busy.get() && now() >= me.last_ms.get() + me.interval_ms - 1.0 {
                    me.now().await;
                }
            }
        });
    }

    /// Stop the periodic scrapes.
    pub fn stop(&self) {
        self.stopped.set(true);
    }
}
