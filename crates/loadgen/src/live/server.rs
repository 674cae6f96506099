//! `--metrics-listen ADDR`: serves [`Live::render`] at `GET /metrics` for a
//! Prometheus server to scrape while the run goes on. Every other path is 404
//! (another method on `/metrics`: 405).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use super::Live;
use crate::error::Error;

/// The exposition's content type (text format 0.0.4).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Binds `addr` and serves `/metrics` on the current tokio runtime until the
/// returned task is aborted. Returns the task and the address bound (its port
/// when `addr`'s was 0). An address already in use is an error that names it.
pub async fn serve(
    addr: SocketAddr,
    live: Arc<Live>,
) -> crate::error::Result<(tokio::task::JoinHandle<()>, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                Error::Option(format!("--metrics-listen {addr}: address already in use"))
            }
            _ => Error::Option(format!("--metrics-listen {addr}: cannot listen ({e})")),
        })?;
    let bound = listener
        .local_addr()
        .map_err(|e| Error::Option(format!("--metrics-listen {addr}: {e}")))?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .with_state(live);
    let task = tokio::spawn(async move {
        // Serving ends only with an accept error the process cannot recover
        // from; the run goes on without live metrics then.
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("warning: --metrics-listen {bound} stopped: {e}");
        }
    });
    Ok((task, bound))
}

async fn metrics(State(live): State<Arc<Live>>) -> impl IntoResponse {
    let text = live.render();
    live.scraped();
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], text)
}

/// After the run: keep serving until `/metrics` has been scraped once more (so
/// the scraper has the final counts), for at most `max`; then stop serving.
/// Returns whether that scrape came.
pub async fn linger(
    task: tokio::task::JoinHandle<()>,
    live: &Live,
    max: std::time::Duration,
) -> bool {
    let seen = live.scrapes();
    let deadline = tokio::time::Instant::now() + max;
    let mut scraped = false;
    while tokio::time::Instant::now() < deadline {
        if live.scrapes() > seen {
            scraped = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    task.abort();
    scraped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::LiveLabels;
    use tokenscope_core::report::Load;

    #[tokio::test]
    async fn serves_metrics_and_404_elsewhere() {
        let live = Live::new(LiveLabels::default());
        live.level_started(0, Load::Concurrency(4));
        live.request_started(Load::Concurrency(4));
        let (task, addr) = serve("127.0.0.1:0".parse().unwrap(), live.clone())
            .await
            .unwrap();
        let client = crate::live::tests::client();
        let resp = client
            .get(format!("http://{addr}/metrics"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let ct = resp.headers()[reqwest::header::CONTENT_TYPE]
            .to_str()
            .unwrap();
        assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
        let body = resp.text().await.unwrap();
        assert_eq!(body, live.render());
        assert!(
            body.contains("tokenscope_in_flight_requests{level=\"c=4\",shard=\"0/1\"} 1\n"),
            "{body}"
        );
        for path in ["/", "/metricsx", "/metrics/x"] {
            let resp = client
                .get(format!("http://{addr}{path}"))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 404, "{path}");
        }
        task.abort();
    }

    #[tokio::test]
    async fn an_address_in_use_is_named() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let err = serve(addr, Live::new(LiveLabels::default()))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("--metrics-listen {addr}: address already in use")
        );
    }
}
