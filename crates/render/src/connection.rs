//! How the requests reached the server, in the report's notes: the HTTP version
//! per level and what it means for TTFT under concurrency, new and reused
//! connections with their setup, TLS, the proxy and the extra headers (never a
//! secret: those are not in the report to begin with).

use super::fmt::fmt_ms;
use tokenscope_core::report::ClientReport;

/// One note per fact, in the order a reader checks them.
pub fn connection_notes(report: &ClientReport) -> Vec<String> {
    let mut notes = Vec::new();
    for l in &report.levels {
        if l.protocols.is_empty() && l.connections.is_none() {
            continue;
        }
        let protocols = l
            .protocols
            .iter()
            .map(|(p, n)| format!("{p} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut line = format!("{}: protocol {protocols}", l.label());
        if let Some(c) = l.connections {
            line.push_str(&format!(
                "; {} request(s) opened a new connection, {} reused one",
                c.new, c.reused
            ));
            if let Some(s) = l.metrics.connection_setup_ms {
                line.push_str(&format!(
                    "; {} waited for a connection's setup (DNS, TCP, proxy, TLS: p50 {} ms, max {} ms; part of those requests' TTFT)",
                    s.count,
                    fmt_ms(s.p50),
                    fmt_ms(s.max)
                ));
            }
        }
        notes.push(line);
    }
    let h2 = report.levels.iter().any(|l| l.protocols.contains_key("h2"));
    let h1 = report
        .levels
        .iter()
        .any(|l| l.protocols.contains_key("http/1.1"));
    if h2 {
        notes.push(
            "h2: the requests share one connection, each a stream on it. Only the streams sent while it was being set up wait for its setup; after that none does, but at high concurrency all streams share its TCP window and the server's single connection task: a lost packet or a busy connection delays every stream (head-of-line blocking in TCP)".into(),
        );
    } else if h1 {
        notes.push(
            "http/1.1: one connection per request in flight. Each new connection pays its own setup (TCP, TLS) inside its first request's TTFT; after warm-up they are reused, and a browser allows only 6 per host".into(),
        );
    }
    if let Some(t) = &report.environment.transport {
        if let Some(tls) = &t.tls {
            let mut parts = Vec::new();
            if tls.insecure {
                parts.push("certificates NOT verified (--insecure)".to_owned());
            } else if tls.ca_certs.is_empty() {
                parts.push("the system's CA roots".to_owned());
            } else {
                parts.push(format!(
                    "the system's roots and the private CA {}",
                    tls.ca_certs.join(", ")
                ));
            }
            if tls.client_cert {
                parts.push("a client certificate (mutual TLS)".into());
            }
            notes.push(format!("TLS: {}", parts.join("; ")));
        }
        if t.http_version != "auto" {
            notes.push(format!("HTTP version forced: {}", t.http_version));
        }
        if let Some(p) = &t.proxy {
            notes.push(format!(
                "through the proxy {} (from {}{})",
                p.url,
                p.from,
                if p.credentials {
                    ", with credentials not shown"
                } else {
                    ""
                }
            ));
        }
        if !t.headers.is_empty() {
            let hs: Vec<String> = t
                .headers
                .iter()
                .map(|h| match &h.value {
                    Some(v) => format!("{}: {v}", h.name),
                    None => format!("{} (value hidden)", h.name),
                })
                .collect();
            notes.push(format!("extra headers: {}", hs.join(", ")));
        }
        if let Some(h) = &t.api_key_header {
            notes.push(format!("the API key went in the {h} header"));
        }
    }
    notes
}
