//! The endpoints real teams have, end to end over loopback against `tokenscope
//! mock`: HTTPS with a private CA, certificate problems told plainly, mutual
//! TLS, `--insecure`, HTTP/2 by ALPN or forced, a proxy (`--proxy` and the
//! environment's), extra headers and the key in another header, and connection
//! setup timed against the server's own record of each connection.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{Mock, TestProxy, bin, read_jsonl, text};

/// `tokenscope bench` with a small plan and the given extra arguments and
/// environment (no proxy or key variables inherited).
fn bench(url: &str, dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let out = dir.join("r.json");
    let raw = dir.join("raw.jsonl");
    let mut c = Command::new(bin());
    c.args([
        "bench",
        "--url",
        url,
        "--api",
        "completions",
        "--concurrency",
        "2",
        "--requests",
        "6",
        "--rounds",
        "1",
        "--max-tokens",
        "8",
        "--input-tokens",
        "32",
        "--server-metrics",
        "off",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
    ])
    .args(extra);
    for v in [
        "TOKENSCOPE_API_KEY",
        "OPENAI_API_KEY",
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "SSL_CERT_FILE",
    ] {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run tokenscope bench")
}

fn report(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap()
}

/// A TLS mock with a fresh private CA; its `ca.pem` path.
fn tls_mock(extra: &[&str]) -> (Mock, tempfile::TempDir, String) {
    let certs = tempfile::tempdir().unwrap();
    let mut args = vec!["--tls-self-signed", certs.path().to_str().unwrap()];
    args.extend(extra);
    let mock = Mock::start(&args);
    let ca = certs.path().join("ca.pem").to_str().unwrap().to_owned();
    (mock, certs, ca)
}

#[test]
fn https_with_a_private_ca_and_certificate_problems_told_plainly() {
    let (mock, _certs, ca) = tls_mock(&[]);
    assert!(mock.url.starts_with("https://127.0.0.1:"), "{}", mock.url);
    let dir = tempfile::tempdir().unwrap();

    // Not trusted: one line naming the host, the reason and the flag.
    let o = bench(&mock.url, dir.path(), &[], &[]);
    assert!(!o.status.success());
    let err = text(&o);
    assert!(
        err.contains("unknown issuer") && err.contains("--ca-cert") && err.contains("127.0.0.1"),
        "{err}"
    );

    // Trusted: h2 by ALPN, recorded per request and per level.
    let o = bench(&mock.url, dir.path(), &["--ca-cert", &ca], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let r = report(dir.path());
    assert_eq!(r["environment"]["protocol"], "h2");
    assert_eq!(r["environment"]["transport"]["http_version"], "auto");
    assert_eq!(
        r["environment"]["transport"]["tls"]["ca_certs"][0],
        "ca.pem"
    );
    let level = &r["levels"][0];
    assert_eq!(level["protocols"]["h2"], 6, "{}", level["protocols"]);
    let conns = &level["connections"];
    assert_eq!(
        conns["new"].as_u64().unwrap() + conns["reused"].as_u64().unwrap(),
        6
    );
    common::assert_schema("client.schema.json", &r, "https report");
    let server = mock.log_records(6);
    assert!(
        server
            .iter()
            .all(|s| s["tls"] == true && s["protocol"] == "h2")
    );

    // A name is looked up (its DNS time within the setup of the connections
    // that needed it), and the certificate is valid for it.
    let by_name = mock.url.replace("127.0.0.1", "localhost");
    let o = bench(&by_name, dir.path(), &["--ca-cert", &ca], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let raw = read_jsonl(&dir.path().join("raw.jsonl"));
    let opened: Vec<&serde_json::Value> = raw
        .iter()
        .filter(|r| r["connection"]["new"] == true)
        .collect();
    assert!(!opened.is_empty());
    for r in opened {
        let c = &r["connection"];
        let (dns, setup) = (
            c["dns_ms"].as_f64().unwrap(),
            c["setup_ms"].as_f64().unwrap(),
        );
        assert!(dns > 0.0 && dns <= setup, "{c}");
    }

    // The system's roots, as the platform finds them (SSL_CERT_FILE on Linux).
    let o = bench(&mock.url, dir.path(), &[], &[("SSL_CERT_FILE", &ca)]);
    assert!(o.status.success(), "{}", text(&o));

    // A CA file that is not one.
    let bogus = dir.path().join("bogus.pem");
    std::fs::write(&bogus, "not a certificate").unwrap();
    let o = bench(
        &mock.url,
        dir.path(),
        &["--ca-cert", bogus.to_str().unwrap()],
        &[],
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("bogus.pem"), "{}", text(&o));
}

#[test]
fn http_versions_forced_or_negotiated() {
    let (mock, _certs, ca) = tls_mock(&[]);
    let dir = tempfile::tempdir().unwrap();
    let o = bench(&mock.url, dir.path(), &["--ca-cert", &ca, "--http1"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let r = report(dir.path());
    assert_eq!(r["levels"][0]["protocols"]["http/1.1"], 6);
    assert_eq!(r["environment"]["transport"]["http_version"], "http1");

    // A server that offers only HTTP/1.1: auto falls back, --http2 is a clear error.
    let (old, _c2, ca2) = tls_mock(&["--http1-only"]);
    let o = bench(&old.url, dir.path(), &["--ca-cert", &ca2], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(report(dir.path())["levels"][0]["protocols"]["http/1.1"], 6);
    let o = bench(&old.url, dir.path(), &["--ca-cert", &ca2, "--http2"], &[]);
    assert!(!o.status.success());
    assert!(text(&o).contains("HTTP/2"), "{}", text(&o));

    // Plaintext h2 (prior knowledge).
    let plain = Mock::start(&[]);
    let o = bench(&plain.url, dir.path(), &["--http2"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(report(dir.path())["levels"][0]["protocols"]["h2"], 6);
}

#[test]
fn mutual_tls_and_insecure() {
    let certs = tempfile::tempdir().unwrap();
    let d = certs.path().to_str().unwrap();
    let ca = format!("{d}/ca.pem");
    let mock = Mock::start(&["--tls-self-signed", d, "--tls-client-ca", &ca]);
    let dir = tempfile::tempdir().unwrap();
    let o = bench(&mock.url, dir.path(), &["--ca-cert", &ca], &[]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--client-cert"), "{}", text(&o));
    let (cert, key) = (format!("{d}/client.pem"), format!("{d}/client-key.pem"));
    let o = bench(
        &mock.url,
        dir.path(),
        &[
            "--ca-cert",
            &ca,
            "--client-cert",
            &cert,
            "--client-key",
            &key,
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        report(dir.path())["environment"]["transport"]["tls"]["client_cert"],
        true
    );

    // --insecure: no CA, a loud warning in the output and the report.
    let (open, _c, _ca) = tls_mock(&[]);
    let o = bench(&open.url, dir.path(), &["--insecure"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("WARNING: --insecure"), "{}", text(&o));
    let r = report(dir.path());
    assert_eq!(r["environment"]["transport"]["tls"]["insecure"], true);
    assert!(
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "tls_not_verified"),
        "{}",
        r["warnings"]
    );
}

#[test]
fn proxies_from_the_flag_and_the_environment_never_their_credentials() {
    let (mock, _certs, ca) = tls_mock(&[]);
    let port = mock
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();

    // HTTPS through a CONNECT proxy named by the environment.
    let proxy = TestProxy::start();
    let o = bench(
        &mock.url,
        dir.path(),
        &["--ca-cert", &ca],
        &[("HTTPS_PROXY", &proxy.url())],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        proxy
            .targets()
            .iter()
            .any(|t| t == &format!("127.0.0.1:{port}")),
        "{:?}",
        proxy.targets()
    );
    let r = report(dir.path());
    assert_eq!(
        r["environment"]["transport"]["proxy"]["from"],
        "HTTPS_PROXY"
    );
    assert_eq!(r["environment"]["transport"]["proxy"]["url"], proxy.url());
    // NO_PROXY takes the endpoint out of it.
    let before = proxy.targets().len();
    let o = bench(
        &mock.url,
        dir.path(),
        &["--ca-cert", &ca],
        &[("HTTPS_PROXY", &proxy.url()), ("NO_PROXY", "127.0.0.1")],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(proxy.targets().len(), before);
    assert!(
        report(dir.path())["environment"]["transport"]
            .get("proxy")
            .is_none()
    );

    // Plain HTTP through --proxy with credentials: used, never written.
    let authed = TestProxy::start_with_auth("user", "pr0xy-pass");
    let plain = Mock::start(&[]);
    let with_creds = authed.url().replace("http://", "http://user:pr0xy-pass@");
    let o = bench(&plain.url, dir.path(), &["--proxy", &with_creds], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!authed.targets().is_empty());
    let r = report(dir.path());
    assert_eq!(r["environment"]["transport"]["proxy"]["credentials"], true);
    assert_eq!(r["environment"]["transport"]["proxy"]["url"], authed.url());
    for f in ["r.json", "raw.jsonl"] {
        let t = std::fs::read_to_string(dir.path().join(f)).unwrap();
        assert!(!t.contains("pr0xy-pass"), "{f} holds the proxy's password");
    }
    assert!(!text(&o).contains("pr0xy-pass"));
    // Wrong credentials: the proxy's 407 is one clear failure.
    let wrong = authed.url().replace("http://", "http://user:nope@");
    let o = bench(&plain.url, dir.path(), &["--proxy", &wrong], &[]);
    assert!(!o.status.success());
    assert!(!text(&o).contains("nope"), "{}", text(&o));
}

#[test]
fn extra_headers_arrive_and_their_values_stay_secret() {
    let mock = Mock::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let o = bench(
        &mock.url,
        dir.path(),
        &[
            "--header",
            "X-Tenant: tenant-s3cret",
            "-H",
            "x-trace: visible-1",
            "--public-header",
            "x-trace",
            "--api-key-header",
            "api-key",
        ],
        &[("TOKENSCOPE_API_KEY", "key-s3cret")],
    );
    assert!(o.status.success(), "{}", text(&o));
    let server = mock.log_records(6);
    for s in &server {
        let names: Vec<&str> = s["header_names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"x-tenant") && names.contains(&"x-trace"),
            "{names:?}"
        );
        assert!(!names.contains(&"authorization"), "{names:?}");
        assert_eq!(s["api_key_header"], "api-key");
    }
    let r = report(dir.path());
    let t = &r["environment"]["transport"];
    assert_eq!(t["api_key_header"], "api-key");
    assert_eq!(t["headers"][0]["name"], "x-tenant");
    assert!(t["headers"][0].get("value").is_none());
    assert_eq!(t["headers"][1]["value"], "visible-1");
    let log = std::fs::read_to_string(&mock.log).unwrap();
    for (what, t) in [
        (
            "report",
            std::fs::read_to_string(dir.path().join("r.json")).unwrap(),
        ),
        (
            "raw",
            std::fs::read_to_string(dir.path().join("raw.jsonl")).unwrap(),
        ),
        ("output", text(&o)),
        ("server log", log),
    ] {
        assert!(
            !t.contains("tenant-s3cret") && !t.contains("key-s3cret"),
            "the {what} holds a secret value"
        );
    }
    // A query in --url (a gateway's api-version) reaches the server.
    let url = format!("{}?api-version=2024-10-21", mock.url);
    let o = bench(&url, dir.path(), &[], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let server = mock.log_records(server.len() + 6);
    assert_eq!(server.last().unwrap()["query_names"][0], "api-version");
}

#[test]
fn connection_setup_is_timed_against_the_servers_record() {
    // The server holds each new connection 150 ms before its TLS handshake (a
    // slow TLS terminator): a known setup cost that only the requests that
    // opened a connection pay. (In plaintext the kernel completes the TCP
    // connect at once: such a hold shows in the time to headers instead.)
    let delay_ms = 150.0;
    let (mock, _certs, ca) = tls_mock(&["--connect-delay-ms", "150"]);
    let dir = tempfile::tempdir().unwrap();
    let o = bench(
        &mock.url,
        dir.path(),
        &["--warmup", "0", "--ca-cert", &ca],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let raw: Vec<serde_json::Value> = read_jsonl(&dir.path().join("raw.jsonl"))
        .into_iter()
        .filter(|l| l.get("request_id").is_some())
        .collect();
    let server = mock.log_records(raw.len());
    let mut opened = 0;
    for r in &raw {
        let id = r["request_id"].as_str().unwrap();
        let s = server
            .iter()
            .find(|s| s["request_id"] == id)
            .unwrap_or_else(|| panic!("{id} not in the server log"));
        let held =
            s["t_conn_ready_ms"].as_f64().unwrap() - s["t_conn_accepted_ms"].as_f64().unwrap();
        assert!(held >= delay_ms, "the server held {held} ms");
        let c = &r["connection"];
        if c["new"] == true {
            opened += 1;
            let setup = c["setup_ms"].as_f64().unwrap();
            // Its setup covers the server's hold, plus a loopback connect.
            assert!(
                setup >= delay_ms - 1.0 && setup < delay_ms + 250.0,
                "{id}: setup {setup} ms"
            );
            let ttft = r["token_events_ms"][0].as_f64().unwrap() - r["t_send_ms"].as_f64().unwrap();
            assert!(
                ttft >= setup,
                "{id}: TTFT {ttft} ms holds the setup {setup} ms"
            );
        } else {
            assert_eq!(c["new"], false, "{id}: {c}");
        }
    }
    let distinct: std::collections::BTreeSet<u64> = server
        .iter()
        .filter(|s| raw.iter().any(|r| r["request_id"] == s["request_id"]))
        .map(|s| s["connection"].as_u64().unwrap())
        .collect();
    assert_eq!(
        opened,
        distinct.len(),
        "new connections: client {opened}, server {}",
        distinct.len()
    );
    let r = report(dir.path());
    let level = &r["levels"][0];
    assert_eq!(level["connections"]["new"], opened as u64);
    // An IP address is never looked up.
    assert!(raw.iter().all(|r| r["connection"].get("dns_ms").is_none()));
    let p50 = level["metrics"]["connection_setup_ms"]["p50"]
        .as_f64()
        .unwrap();
    assert!(p50 >= delay_ms - 1.0, "{p50}");
}

/// A CA, and a server certificate it signed for `names`, valid over the given
/// years: written to `dir` as `ca.pem`, `leaf.pem`, `leaf-key.pem`.
fn private_ca_and_leaf(dir: &Path, names: &[&str], years: (i32, i32)) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(
        DnType::CommonName,
        format!("endpoints test CA {}", dir.display()),
    );
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let mut leaf =
        CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()).unwrap();
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.use_authority_key_identifier_extension = true;
    leaf.not_before = rcgen::date_time_ymd(years.0, 1, 1);
    leaf.not_after = rcgen::date_time_ymd(years.1, 1, 1);
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("leaf.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("leaf-key.pem"), key.serialize_pem()).unwrap();
}

#[test]
fn a_wrong_name_and_an_expired_certificate_are_told_plainly() {
    for (names, years, needle) in [
        (
            &["wrong.example"][..],
            (2020, 2090),
            "not valid for the name 127.0.0.1",
        ),
        (&["127.0.0.1", "localhost"][..], (2000, 2001), "has expired"),
    ] {
        let certs = tempfile::tempdir().unwrap();
        private_ca_and_leaf(certs.path(), names, years);
        let p = |f: &str| certs.path().join(f).to_str().unwrap().to_owned();
        let mock = Mock::start(&[
            "--tls-cert",
            &p("leaf.pem"),
            "--tls-key",
            &p("leaf-key.pem"),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let o = bench(&mock.url, dir.path(), &["--ca-cert", &p("ca.pem")], &[]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = text(&o);
        assert!(err.contains(needle) && err.contains("TLS:"), "{err}");
        // --insecure reaches it anyway, and says so.
        let o = bench(&mock.url, dir.path(), &["--insecure"], &[]);
        assert!(o.status.success(), "{}", text(&o));
    }
}
