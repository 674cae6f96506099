//! `tokenscope mock` over TLS and HTTP/2: self-signed certificates, mutual TLS,
//! h2 by ALPN and h2c by prior knowledge, a held connection setup, the log's
//! connection and header fields, and the test proxy (CONNECT and absolute form).
//! The client is reqwest itself (rustls with the ring provider).

use crate::common;

use std::path::Path;

use common::{Mock, TestProxy};
use serde_json::Value;

/// The body every test streams.
const BODY: &str = r#"{"model":"m","prompt":"hi","max_tokens":5,"stream":true}"#;

fn ring() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A mock serving TLS with certificates generated in `dir`, and the extra flags.
fn tls_mock(dir: &Path, extra: &[&str]) -> Mock {
    let mut args = vec!["--tls-self-signed", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mock = Mock::start(&args);
    assert!(mock.url.starts_with("https://127.0.0.1:"), "{}", mock.url);
    mock
}

/// A client for plaintext servers (no proxy from the environment).
fn plain_client() -> reqwest::ClientBuilder {
    ring();
    reqwest::Client::builder().no_proxy()
}

/// A client trusting only the CA of `dir` (`ca.pem`).
fn trusting(dir: &Path) -> reqwest::ClientBuilder {
    ring();
    let ca = std::fs::read(dir.join("ca.pem")).unwrap();
    reqwest::Client::builder()
        .no_proxy()
        .tls_certs_only([reqwest::Certificate::from_pem(&ca).unwrap()])
}

/// `client.pem` + `client-key.pem` of `dir` as a reqwest identity.
fn identity(dir: &Path) -> reqwest::Identity {
    let mut pem = std::fs::read(dir.join("client.pem")).unwrap();
    pem.extend(std::fs::read(dir.join("client-key.pem")).unwrap());
    reqwest::Identity::from_pem(&pem).unwrap()
}

/// Stream a completion from `base` (`.../v1`) with request id `id` and return
/// the body, checking it is SSE ending with `[DONE]`.
async fn stream(client: &reqwest::Client, base: &str, id: &str) -> reqwest::Result<String> {
    let resp = client
        .post(format!("{base}/completions"))
        .header("content-type", "application/json")
        .header("x-request-id", id)
        .body(BODY)
        .send()
        .await?
        .error_for_status()?;
    let text = resp.text().await?;
    assert!(text.contains("data: "), "not SSE: {text}");
    assert!(
        text.trim_end().ends_with("data: [DONE]"),
        "no [DONE]: {text}"
    );
    Ok(text)
}

/// The log record of request `id` (waiting for it).
fn record(mock: &Mock, id: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(r) = common::read_jsonl(&mock.log)
            .into_iter()
            .find(|r| r["request_id"] == id)
        {
            return r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "request {id} is not in the server log"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// An error and its sources, one text.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        text.push_str(" <- ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

#[tokio::test]
async fn self_signed_https_streams_over_h2_and_http1() {
    let dir = tempfile::tempdir().unwrap();
    let mock = tls_mock(dir.path(), &[]);
    for f in [
        "ca.pem",
        "ca-key.pem",
        "server.pem",
        "server-key.pem",
        "client.pem",
        "client-key.pem",
    ] {
        assert!(dir.path().join(f).is_file(), "{f} written");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        for f in ["ca-key.pem", "server-key.pem", "client-key.pem"] {
            let mode = std::fs::metadata(dir.path().join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
    }

    let h2 = trusting(dir.path()).build().unwrap();
    stream(&h2, &mock.url, "h2").await.unwrap();
    let r = record(&mock, "h2");
    assert_eq!(r["tls"], true, "{r}");
    assert_eq!(r["protocol"], "h2", "{r}");
    assert_eq!(r["outcome"], "completed", "{r}");

    let h1 = trusting(dir.path()).http1_only().build().unwrap();
    stream(&h1, &mock.url, "h1").await.unwrap();
    let r = record(&mock, "h1");
    assert_eq!(r["tls"], true, "{r}");
    assert_eq!(r["protocol"], "http/1.1", "{r}");

    // A restarted server reuses the files: the first CA is still the one to trust.
    let ca_before = std::fs::read(dir.path().join("ca.pem")).unwrap();
    drop(mock);
    let again = tls_mock(dir.path(), &[]);
    assert_eq!(std::fs::read(dir.path().join("ca.pem")).unwrap(), ca_before);
    let client = trusting(dir.path()).build().unwrap();
    stream(&client, &again.url, "again").await.unwrap();
}

#[tokio::test]
async fn http1_only_server_gives_an_h2_client_http1() {
    let dir = tempfile::tempdir().unwrap();
    let mock = tls_mock(dir.path(), &["--http1-only"]);
    let client = trusting(dir.path()).build().unwrap();
    stream(&client, &mock.url, "fallback").await.unwrap();
    let r = record(&mock, "fallback");
    assert_eq!(r["protocol"], "http/1.1", "{r}");
    assert_eq!(r["tls"], true, "{r}");
}

#[tokio::test]
async fn a_client_not_trusting_the_ca_fails_with_unknown_issuer() {
    let dir = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let mock = tls_mock(dir.path(), &[]);
    // Another CA's files (made by a second server, stopped at once).
    drop(tls_mock(other.path(), &[]));
    let client = trusting(other.path()).build().unwrap();
    let err = stream(&client, &mock.url, "untrusted").await.unwrap_err();
    let text = chain(&err);
    assert!(
        text.to_lowercase()
            .replace(' ', "")
            .contains("unknownissuer"),
        "{text}"
    );
}

#[tokio::test]
async fn mutual_tls_needs_the_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    // Generate the files first, so the client CA file exists when the server starts.
    drop(tls_mock(dir.path(), &[]));
    let ca = dir.path().join("ca.pem");
    let mock = tls_mock(dir.path(), &["--tls-client-ca", ca.to_str().unwrap()]);

    let with_cert = trusting(dir.path())
        .identity(identity(dir.path()))
        .build()
        .unwrap();
    stream(&with_cert, &mock.url, "mtls").await.unwrap();
    assert_eq!(record(&mock, "mtls")["tls"], true);

    let without = trusting(dir.path()).build().unwrap();
    let err = stream(&without, &mock.url, "no-cert").await;
    assert!(err.is_err(), "a client without a certificate is refused");
}

#[tokio::test]
async fn plaintext_serves_h2c_by_prior_knowledge_and_http1() {
    let mock = Mock::start(&[]);
    assert!(mock.url.starts_with("http://"), "{}", mock.url);
    let h2c = plain_client().http2_prior_knowledge().build().unwrap();
    stream(&h2c, &mock.url, "h2c").await.unwrap();
    let r = record(&mock, "h2c");
    assert_eq!(r["protocol"], "h2", "{r}");
    assert_eq!(r["tls"], false, "{r}");

    let h1 = plain_client().build().unwrap();
    stream(&h1, &mock.url, "h1").await.unwrap();
    assert_eq!(record(&mock, "h1")["protocol"], "http/1.1");
}

#[tokio::test]
async fn connect_delay_holds_each_new_connection_and_connections_are_numbered() {
    let mock = Mock::start(&["--connect-delay-ms", "150"]);
    let a = plain_client().build().unwrap();
    stream(&a, &mock.url, "a1").await.unwrap();
    stream(&a, &mock.url, "a2").await.unwrap();
    let b = plain_client().build().unwrap();
    stream(&b, &mock.url, "b1").await.unwrap();

    let (a1, a2, b1) = (
        record(&mock, "a1"),
        record(&mock, "a2"),
        record(&mock, "b1"),
    );
    let setup = common::f(&a1["t_conn_ready_ms"]) - common::f(&a1["t_conn_accepted_ms"]);
    assert!(setup >= 150.0, "connection setup {setup} ms: {a1}");
    assert!(
        common::f(&a1["t_received_ms"]) >= common::f(&a1["t_conn_ready_ms"]),
        "{a1}"
    );
    assert!(a1["connection"].as_u64().unwrap() >= 1, "{a1}");
    assert_eq!(a1["connection"], a2["connection"], "reused: {a1} {a2}");
    assert_eq!(a1["t_conn_accepted_ms"], a2["t_conn_accepted_ms"]);
    assert_ne!(a1["connection"], b1["connection"], "{a1} {b1}");
}

#[tokio::test]
async fn header_names_are_logged_never_values() {
    let mock = Mock::start(&[]);
    let client = plain_client().build().unwrap();
    let resp = client
        .post(format!("{}/completions", mock.url))
        .header("content-type", "application/json")
        .header("x-request-id", "headers")
        .header("x-tenant", "secret-tenant-value")
        .header("api-key", "k123")
        .body(BODY)
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    resp.text().await.unwrap();
    let r = record(&mock, "headers");
    let names: Vec<&str> = r["header_names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(names.contains(&"x-tenant"), "{r}");
    assert!(names.contains(&"api-key"), "{r}");
    assert!(names.is_sorted(), "{r}");
    assert_eq!(r["api_key_header"], "api-key", "{r}");
    assert_eq!(r["authorized"], false, "{r}");
    let text = std::fs::read_to_string(&mock.log).unwrap();
    assert!(!text.contains("secret-tenant-value"), "{text}");
    assert!(!text.contains("k123"), "{text}");
}

#[tokio::test]
async fn the_test_proxy_tunnels_https_and_forwards_plain_http() {
    let dir = tempfile::tempdir().unwrap();
    let https = tls_mock(dir.path(), &[]);
    let plain = Mock::start(&[]);
    let proxy = TestProxy::start();

    let via = trusting(dir.path())
        .proxy(reqwest::Proxy::all(proxy.url()).unwrap())
        .build()
        .unwrap();
    stream(&via, &https.url, "connect").await.unwrap();
    let https_target = https
        .url
        .trim_start_matches("https://")
        .trim_end_matches("/v1");
    assert!(
        proxy.targets().iter().any(|t| t == https_target),
        "{:?}",
        proxy.targets()
    );
    assert_eq!(record(&https, "connect")["tls"], true);

    let via_plain = plain_client()
        .proxy(reqwest::Proxy::all(proxy.url()).unwrap())
        .build()
        .unwrap();
    stream(&via_plain, &plain.url, "forward").await.unwrap();
    let plain_target = plain
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/v1");
    assert!(
        proxy.targets().iter().any(|t| t == plain_target),
        "{:?}",
        proxy.targets()
    );
    assert_eq!(record(&plain, "forward")["protocol"], "http/1.1");
    assert!(proxy.connections() >= 2);
}

#[tokio::test]
async fn the_auth_proxy_answers_407_without_credentials() {
    let mock = Mock::start(&[]);
    let proxy = TestProxy::start_with_auth("user", "pass");

    let anonymous = plain_client()
        .proxy(reqwest::Proxy::all(proxy.url()).unwrap())
        .build()
        .unwrap();
    let resp = anonymous
        .post(format!("{}/completions", mock.url))
        .body(BODY)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 407);
    assert!(proxy.targets().is_empty(), "{:?}", proxy.targets());
    assert_eq!(proxy.refused(), 1);

    let wrong = plain_client()
        .proxy(
            reqwest::Proxy::all(proxy.url())
                .unwrap()
                .basic_auth("user", "nope"),
        )
        .build()
        .unwrap();
    let resp = wrong
        .post(format!("{}/completions", mock.url))
        .body(BODY)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 407);

    let authed = plain_client()
        .proxy(
            reqwest::Proxy::all(proxy.url())
                .unwrap()
                .basic_auth("user", "pass"),
        )
        .build()
        .unwrap();
    stream(&authed, &mock.url, "authed").await.unwrap();
    assert_eq!(proxy.targets().len(), 1, "{:?}", proxy.targets());
    // The proxy's credentials are not passed on to the server.
    let r = record(&mock, "authed");
    assert!(
        !r["header_names"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "proxy-authorization"),
        "{r}"
    );
}

#[test]
fn tls_file_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pem");
    let key = dir.path().join("k.pem");
    let out = common::run(&[
        "mock",
        "--port",
        "0",
        "--tls-cert",
        missing.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "{}", common::text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("missing.pem"), "{}", common::text(&out));

    // A file that is not PEM.
    let not_pem = dir.path().join("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let out = common::run(&[
        "mock",
        "--port",
        "0",
        "--tls-cert",
        not_pem.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "{}", common::text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not.pem") && stderr.contains("PEM"),
        "{}",
        common::text(&out)
    );

    // A certificate without its key, and two kinds of TLS at once: usage errors.
    let out = common::run(&["mock", "--port", "0", "--tls-cert", "c.pem"]);
    assert_eq!(out.status.code(), Some(2), "{}", common::text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-key"));
    let out = common::run(&[
        "mock",
        "--port",
        "0",
        "--tls-cert",
        "c.pem",
        "--tls-key",
        "k.pem",
        "--tls-self-signed",
        "d",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", common::text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-self-signed"));
}
