//! The endpoints real teams have, end to end over loopback against `tokenscope
//! mock`: HTTPS with a private CA, certificate problems told plainly, mutual
//! TLS, `--insecure`, HTTP/2 by ALPN or forced, a proxy (`--proxy` and the
//! environment's), extra headers and the key in another header, and connection
//! setup timed against the server's own record of each connection.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{Mock, TestProxy, bin, read_jsonl, text};

/// `tokenscope bench` with a small plan and the given extra arguments and
/// environment (no proxy or key variables inherited).
fn bench(url: &str, dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    bench_with(url, dir, &[&["--quiet"], extra].concat(), env)
}

/// [`bench`] with its progress and summary printed (what a log would keep).
fn bench_with(url: &str, dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
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
        "--json",
        out.to_str().unwrap(),
        "--raw",
        raw.to_str().unwrap(),
    ])
    .args(extra);
    if !extra.contains(&"--server-metrics") {
        c.args(["--server-metrics", "none"]);
    }
    for v in common::NETWORK_ENV {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run tokenscope bench")
}

/// The port of `http://127.0.0.1:PORT/...`.
fn port_of(url: &str) -> &str {
    url.split(':').nth(2).unwrap().split('/').next().unwrap()
}

/// Whether `proxy` carried a request to `127.0.0.1:port`.
fn reached(proxy: &TestProxy, port: &str) -> bool {
    proxy
        .targets()
        .iter()
        .any(|t| t == &format!("127.0.0.1:{port}"))
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
    // The lookup is given to the requests sent before it began: the one that
    // triggered the connection, and any stream sent with it. Which of them is
    // answered first (`new`) is the server's order, so `new` is not asked here.
    let raw = read_jsonl(&dir.path().join("raw.jsonl"));
    let looked_up: Vec<&serde_json::Value> = raw
        .iter()
        .map(|r| &r["connection"])
        .filter(|c| c.get("dns_ms").is_some())
        .collect();
    assert!(
        !looked_up.is_empty(),
        "no request carries the lookup: {:?}",
        raw.iter().map(|r| &r["connection"]).collect::<Vec<_>>()
    );
    for c in &looked_up {
        let (dns, setup) = (
            c["dns_ms"].as_f64().unwrap(),
            c["setup_ms"].as_f64().expect("a lookup outside a setup"),
        );
        assert!(dns > 0.0 && dns <= setup, "{c}");
    }
    // One h2 connection: the request that waited longest for it (the trigger)
    // was there when the lookup began, so it carries it.
    assert_eq!(report(dir.path())["environment"]["protocol"], "h2");
    let longest = raw
        .iter()
        .map(|r| &r["connection"])
        .filter(|c| c.get("setup_ms").is_some())
        .max_by(|a, b| {
            a["setup_ms"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["setup_ms"].as_f64().unwrap())
        })
        .unwrap();
    assert!(longest.get("dns_ms").is_some(), "{longest}");

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
    let port = port_of(&mock.url);
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
    assert!(reached(&proxy, port), "{:?}", proxy.targets());
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
    // The server's metrics on another host: scraped through the same proxy.
    let metrics_host = Mock::start(&[]);
    let metrics_url = format!(
        "{}/metrics",
        metrics_host
            .url
            .trim_end_matches('/')
            .trim_end_matches("/v1")
    );
    let o = bench(
        &plain.url,
        dir.path(),
        &["--proxy", &with_creds, "--server-metrics", &metrics_url],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let metrics_port = port_of(&metrics_url);
    assert!(
        reached(&authed, metrics_port),
        "the scrapes did not go through the proxy: {:?}",
        authed.targets()
    );
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
    // Not quiet: the progress and summary a CI log keeps must not hold them.
    let o = bench_with(
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
    let raw = read_jsonl(&dir.path().join("raw.jsonl"));
    let id = raw
        .iter()
        .find_map(|r| r["request_id"].as_str())
        .unwrap()
        .to_owned();
    let server = mock.log_records_for(&[&id]);
    let s = server
        .iter()
        .find(|s| s["request_id"] == id.as_str())
        .unwrap();
    assert_eq!(s["query_names"][0], "api-version", "{s}");
}

#[test]
fn a_redirect_is_never_followed_and_its_target_is_named() {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    // Where the redirect points: it must never see a connection (the key and
    // the headers would go with it).
    let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
    elsewhere.set_nonblocking(true).unwrap();
    let target = format!(
        "http://127.0.0.1:{}/v1/models?sig=q-s3cret",
        elsewhere.local_addr().unwrap().port()
    );
    let gateway = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://127.0.0.1:{}/v1",
        gateway.local_addr().unwrap().port()
    );
    let answer = format!(
        "HTTP/1.1 307 Temporary Redirect\r\nLocation: {target}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let seen = std::thread::spawn(move || {
        let (mut sock, _) = gateway.accept().unwrap();
        let mut buf = vec![0u8; 8192];
        let mut got = Vec::new();
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = sock.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        sock.write_all(answer.as_bytes()).unwrap();
        String::from_utf8_lossy(&got).to_lowercase()
    });
    let dir = tempfile::tempdir().unwrap();
    let o = bench_with(
        &url,
        dir.path(),
        &[
            "--header",
            "X-Tenant: tenant-s3cret",
            "--header",
            "User-Agent: my-agent/1",
        ],
        &[("TOKENSCOPE_API_KEY", "key-s3cret")],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("redirect") && out.contains(&target[..target.find('?').unwrap()]),
        "{out}"
    );
    assert!(!out.contains("s3cret"), "the error shows a secret: {out}");
    let request = seen.join().unwrap();
    // The user's User-Agent replaced tokenscope's.
    assert!(request.contains("user-agent: my-agent/1"), "{request}");
    assert!(!request.contains("tokenscope/"), "{request}");
    assert!(
        matches!(elsewhere.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the redirect was followed"
    );
}

#[test]
fn connection_setup_is_timed_against_the_servers_record() {
    // The server holds each new connection 300 ms before its TLS handshake (a
    // slow TLS terminator): a known setup cost that only the requests that
    // waited for a connection pay. (In plaintext the kernel completes the TCP
    // connect at once: such a hold shows in the time to headers instead.)
    let delay_ms = 300.0;
    let (mock, _certs, ca) = tls_mock(&["--connect-delay-ms", "300"]);
    for version in ["--http1", "--http2"] {
        let dir = tempfile::tempdir().unwrap();
        let o = bench(
            &mock.url,
            dir.path(),
            &["--warmup", "0", "--ca-cert", &ca, version],
            &[],
        );
        assert!(o.status.success(), "{version}: {}", text(&o));
        let raw: Vec<serde_json::Value> = read_jsonl(&dir.path().join("raw.jsonl"))
            .into_iter()
            .filter(|l| l.get("request_id").is_some())
            .collect();
        let ids: Vec<&str> = raw
            .iter()
            .map(|r| r["request_id"].as_str().unwrap())
            .collect();
        let server = mock.log_records_for(&ids);
        let (mut opened, mut waited) = (0, 0);
        for r in &raw {
            let id = r["request_id"].as_str().unwrap();
            let s = server
                .iter()
                .find(|s| s["request_id"] == id)
                .unwrap_or_else(|| panic!("{version}: {id} not in the server log"));
            let held =
                s["t_conn_ready_ms"].as_f64().unwrap() - s["t_conn_accepted_ms"].as_f64().unwrap();
            assert!(held >= delay_ms, "the server held {held} ms");
            let c = &r["connection"];
            let ttft = r["token_events_ms"][0].as_f64().unwrap() - r["t_send_ms"].as_f64().unwrap();
            if c["new"] == true {
                opened += 1;
            }
            match c["setup_ms"].as_f64() {
                // It waited for a setup: all of the server's hold plus a
                // loopback connect if it triggered the connection; an h2
                // stream sent just after (both are sent together) may miss the
                // first few ms of it, and may be answered first (`new`): the
                // trigger's whole wait is the level's maximum, below.
                Some(setup) => {
                    waited += 1;
                    let slack_ms = if version == "--http1" { 1.0 } else { 5.0 };
                    assert!(
                        setup >= delay_ms - slack_ms && setup < delay_ms + 250.0,
                        "{version} {id}: setup {setup} ms ({c})"
                    );
                    assert!(
                        ttft >= setup,
                        "{version} {id}: TTFT {ttft} ms holds the setup {setup} ms"
                    );
                }
                // It found its connection ready: no hold in its TTFT.
                None => assert!(
                    ttft < delay_ms,
                    "{version} {id}: TTFT {ttft} ms without a setup ({c})"
                ),
            }
        }
        let distinct: std::collections::BTreeSet<u64> = server
            .iter()
            .filter(|s| ids.iter().any(|id| s["request_id"] == *id))
            .map(|s| s["connection"].as_u64().unwrap())
            .collect();
        assert_eq!(
            opened,
            distinct.len(),
            "{version}: new connections: client {opened}, server {}",
            distinct.len()
        );
        if version == "--http2" {
            // One connection, both first streams waited for it.
            assert_eq!((opened, waited), (1, 2), "{version}");
        } else {
            // A connection per request in flight, each set up for one.
            assert_eq!((opened, waited), (2, 2), "{version}");
        }
        let r = report(dir.path());
        let level = &r["levels"][0];
        assert_eq!(level["connections"]["new"], opened as u64);
        let setup = &level["metrics"]["connection_setup_ms"];
        assert_eq!(setup["count"], waited as u64, "{setup}");
        assert!(setup["max"].as_f64().unwrap() >= delay_ms - 1.0, "{setup}");
        assert!(setup["p50"].as_f64().unwrap() >= delay_ms - 5.0, "{setup}");
        // An IP address is never looked up.
        assert!(raw.iter().all(|r| r["connection"].get("dns_ms").is_none()));
    }
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
