//! One module per subcommand: options (clap) -> validated config -> runner -> exporters.

pub mod bench;
pub mod calibrate;
pub mod collect;
pub mod compare;
pub mod demo;
pub mod history;
mod http_args;
pub mod kernels;
pub mod merge;
pub mod mock;
pub mod output;
pub mod plan;
pub mod quality;
pub mod report;
mod runs;
pub mod serve;

/// The multi-threaded tokio runtime a subcommand runs on.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context as _;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Bind `host:port` for `mock` and `serve`: the listener and its origin
/// (`http://host:port`, an IPv6 host in brackets). Warns on stderr when the address
/// is reachable from the network.
pub(crate) async fn listen(
    host: std::net::IpAddr,
    port: u16,
) -> anyhow::Result<(tokio::net::TcpListener, String)> {
    use anyhow::Context as _;
    let listener = tokio::net::TcpListener::bind((host, port))
        .await
        .with_context(|| format!("cannot listen on {host}:{port}"))?;
    let addr = listener.local_addr()?;
    if !host.is_loopback() {
        eprintln!("warning: bound to {host}: reachable from the network");
    }
    let shown = if addr.is_ipv6() {
        format!("[{}]", addr.ip())
    } else {
        addr.ip().to_string()
    };
    Ok((listener, format!("http://{shown}:{}", addr.port())))
}
