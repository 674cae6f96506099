//! `tokenscope serve`: the built web page (`dist/`, from `scripts/build-web.sh`) on
//! localhost; `--mock` co-hosts the simulated server (`tokenscope mock`'s API at
//! `/v1`) on the same origin, so a first run needs no CORS setup at all.
//!
//! Files are served as they are (the page's URLs are all relative, so any static
//! host works the same way); `--base-path` serves them under a sub-path to try a
//! sub-path deployment. Every answer is `Cache-Control: no-cache`, so a rebuilt page
//! is picked up at once.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use clap::Args;
use tower_http::services::ServeDir;

use crate::cmd::mock::SimArgs;
use crate::mock::{MockState, ServeOptions, router, serve};

/// Serve the web page on localhost.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
  scripts/build-web.sh && tokenscope serve
  tokenscope serve --mock                      # page + simulated server, same origin
  tokenscope serve --port 0 --base-path /tokenscope/

With --mock, open the printed page URL with ?url=<origin>/v1 (printed on stderr),
or leave the URL empty to use the simulator built into the page.")]
pub struct ServeArgs {
    /// The built page (written by scripts/build-web.sh).
    #[arg(long, default_value = "dist", value_name = "DIR")]
    pub dir: PathBuf,

    /// Address to bind. Anything but loopback exposes the page to the network.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,

    /// Port (0 picks a free one; the URL is printed on the first line).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,

    /// Serve the page under this path (as a sub-path deployment would), e.g. /tokenscope/.
    #[arg(long, default_value = "/", value_name = "PATH")]
    pub base_path: String,

    /// Co-host the simulated server on the same origin (its API at /v1).
    #[arg(long)]
    pub mock: bool,

    /// With --mock: log, per request, when each chunk was handed to HTTP (JSONL).
    #[arg(long, value_name = "FILE", requires = "mock")]
    pub mock_log: Option<PathBuf>,

    /// With --mock: hold each stream's response head until its first token and
    /// send them together (as servers that write nothing before the first body
    /// bytes do).
    #[arg(long, requires = "mock")]
    pub head_with_first_token: bool,

    #[command(flatten, next_help_heading = "Simulated server (with --mock)")]
    pub sim: SimArgs,
}

/// `/` or `/a/b/`: a leading and a trailing slash, no `..`, no doubled slashes.
fn normalize_base(base: &str) -> anyhow::Result<String> {
    let parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    if parts
        .iter()
        .any(|p| *p == "." || *p == ".." || p.contains(['?', '#', '\\']))
    {
        anyhow::bail!("--base-path {base:?}: expected a plain path such as /tokenscope/");
    }
    Ok(if parts.is_empty() {
        "/".to_owned()
    } else {
        format!("/{}/", parts.join("/"))
    })
}

/// Check that `dir` holds a built page.
fn check_dist(dir: &Path) -> anyhow::Result<()> {
    if !dir.join("index.html").is_file() {
        anyhow::bail!(
            "{} has no index.html: build the page first with scripts/build-web.sh",
            dir.display()
        );
    }
    Ok(())
}

/// The static page under its base path.
struct Page {
    dir: ServeDir,
    base: String,
}

impl Page {
    async fn serve(&self, req: Request) -> Response {
        let (mut parts, body) = req.into_parts();
        let path = parts.uri.path().to_owned();
        let prefix = self.base.trim_end_matches('/');
        if !prefix.is_empty() {
            if path == prefix || path == "/" {
                // Relative URLs need the trailing slash.
                return Redirect::temporary(&self.base).into_response();
            }
            let Some(rest) = path.strip_prefix(prefix).filter(|r| r.starts_with('/')) else {
                return (StatusCode::NOT_FOUND, "not found").into_response();
            };
            let rewritten = match parts.uri.query() {
                Some(q) => format!("{rest}?{q}"),
                None => rest.to_owned(),
            };
            match rewritten.parse::<Uri>() {
                Ok(uri) => parts.uri = uri,
                Err(_) => return (StatusCode::BAD_REQUEST, "bad path").into_response(),
            }
        }
        let mut dir = self.dir.clone();
        let mut resp = match dir.try_call(Request::from_parts(parts, body)).await {
            Ok(r) => r.map(Body::new).into_response(),
            Err(e) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read the page: {e}"),
            )
                .into_response(),
        };
        let h = resp.headers_mut();
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        h.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
        resp
    }
}

/// The app: the page (fallback) and, with a simulator, its `/v1` API.
fn app(dir: &Path, base: &str, mock: Option<MockState>) -> Router {
    let page = Arc::new(Page {
        dir: ServeDir::new(dir).redirect_path_prefix(base.trim_end_matches('/')),
        base: base.to_owned(),
    });
    let fallback = move |req: Request| {
        let page = Arc::clone(&page);
        async move { page.serve(req).await }
    };
    match mock {
        Some(state) => router(state).fallback(fallback),
        None => Router::new().fallback(fallback),
    }
}

/// Run the subcommand (until Ctrl-C).
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    check_dist(&args.dir)?;
    let base = normalize_base(&args.base_path)?;
    let sim = if args.mock {
        Some(args.sim.clone().into_config()?)
    } else {
        None
    };
    let rt = super::runtime()?;
    rt.block_on(async move {
        let (listener, origin) = super::listen(args.host, args.port).await?;
        let mock = match sim {
            Some(cfg) => Some(
                MockState::start(cfg, args.mock_log.as_deref())?
                    .head_with_first_token(args.head_with_first_token),
            ),
            None => None,
        };
        println!("tokenscope serve listening on {origin}{base}");
        if let Some(m) = &mock {
            eprintln!(
                "simulated server ({}) on the same origin: open {origin}{base}?url={origin}/v1",
                m.config().model
            );
        }
        let served = mock.clone();
        let clock = mock
            .as_ref()
            .map_or_else(tokenscope_loadgen::clock::Clock::start, MockState::clock);
        let opts = ServeOptions::plain(clock);
        tokio::select! {
            r = serve(listener, app(&args.dir, &base, mock), opts) => r.context("the server failed")?,
            _ = tokio::signal::ctrl_c() => {}
        }
        if let Some(m) = served {
            eprintln!("the simulated server answered {} requests", m.served());
        }
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_paths() {
        assert_eq!(normalize_base("/").unwrap(), "/");
        assert_eq!(normalize_base("").unwrap(), "/");
        assert_eq!(normalize_base("sub").unwrap(), "/sub/");
        assert_eq!(normalize_base("/a//b/").unwrap(), "/a/b/");
        assert!(normalize_base("/../etc").is_err());
        assert!(normalize_base("/a?b").is_err());
    }

    #[test]
    fn missing_dist_says_how_to_build_it() {
        let dir = tempfile::tempdir().unwrap();
        let e = check_dist(dir.path()).unwrap_err().to_string();
        assert!(e.contains("scripts/build-web.sh"), "{e}");
    }
}
