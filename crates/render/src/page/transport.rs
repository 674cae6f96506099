//! What the page decides about its transport before and after a request, as pure
//! functions: a request's connection from its Resource Timing entry, whether the
//! browser will block the endpoint as mixed content, and the extra headers the user
//! typed (one `Name: value` per line).

use tokenscope_measure::record::ConnectionUse;

/// The connection fields of a Resource Timing entry (`PerformanceResourceTiming`),
/// ms on one clock. The browser gives 0 for each where it hides them (a
/// cross-origin answer without `Timing-Allow-Origin`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ConnectTiming {
    /// `domainLookupStart`.
    pub domain_lookup_start: f64,
    /// `domainLookupEnd`.
    pub domain_lookup_end: f64,
    /// `connectStart`.
    pub connect_start: f64,
    /// `connectEnd`.
    pub connect_end: f64,
    /// `secureConnectionStart` (0 for plain http, and for a reused connection in
    /// some browsers).
    pub secure_connection_start: f64,
}

impl ConnectTiming {
    /// The request's connection: new when it had one set up (`connectEnd >
    /// connectStart`; a reused connection has them equal), with the setup from the
    /// DNS lookup's start (or the connect's, when there was no lookup) to
    /// `connectEnd`, the lookup, and the TLS handshake (`secureConnectionStart..
    /// connectEnd`). `None` when the browser hid the details (all zero) or they
    /// make no sense (not finite, going backwards).
    pub fn connection(&self) -> Option<ConnectionUse> {
        let ConnectTiming {
            domain_lookup_start: dns0,
            domain_lookup_end: dns1,
            connect_start: c0,
            connect_end: c1,
            secure_connection_start: tls0,
        } = *self;
        if ![dns0, dns1, c0, c1, tls0].iter().all(|t| t.is_finite()) || c0 <= 0.0 || c1 < c0 {
            return None;
        }
        if c1 == c0 {
            return Some(ConnectionUse {
                new: false,
                ..ConnectionUse::default()
            });
        }
        let lookup = dns0 > 0.0 && dns0 <= c0;
        let start = if lookup { dns0 } else { c0 };
        let dns_ms = Some(dns1 - dns0).filter(|d| lookup && *d > 0.0 && dns1 <= c0);
        let tls_ms = Some(c1 - tls0).filter(|d| tls0 > 0.0 && tls0 >= c0 && *d >= 0.0);
        Some(ConnectionUse {
            new: true,
            setup_ms: Some(c1 - start),
            dns_ms,
            tls_ms,
        })
    }
}

/// Whether a page served from `page_url` may not reach `endpoint` because the
/// browser blocks it as mixed content: an `https` page and a plain `http`
/// endpoint, unless the endpoint is one browsers treat as potentially
/// trustworthy (`localhost`, `*.localhost`, `127.0.0.0/8`, `[::1]`).
pub fn is_mixed_content(page_url: &str, endpoint: &str) -> bool {
    let lower = |s: &str| s.trim().to_ascii_lowercase();
    let (page, endpoint) = (lower(page_url), lower(endpoint));
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return false;
    };
    if !page.starts_with("https://") {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    let host = if authority.starts_with('[') {
        authority.split(']').next().map(|h| format!("{h}]"))
    } else {
        authority.split(':').next().map(str::to_owned)
    }
    .unwrap_or_default();
    let host = host.trim_end_matches('.');
    let loopback_v4 = host.strip_prefix("127.").is_some_and(|r| {
        let parts: Vec<&str> = r.split('.').collect();
        parts.len() == 3 && parts.iter().all(|p| p.parse::<u8>().is_ok())
    });
    !(host == "localhost" || host.ends_with(".localhost") || loopback_v4 || host == "[::1]")
}

/// The sentence shown next to the endpoint (and in a failed run's error) when
/// [`is_mixed_content`] holds.
pub const MIXED_CONTENT: &str = "the browser will block it: this page is served over https and the endpoint is plain http (mixed content); serve the endpoint over https, or open the page over http (e.g. `tokenscope serve`)";

/// Header names the page sets itself, or the browser refuses to let a page set
/// (the Fetch standard's forbidden request-header names).
const FORBIDDEN: &[&str] = &[
    "accept-charset",
    "accept-encoding",
    "access-control-request-headers",
    "access-control-request-method",
    "connection",
    "content-length",
    "cookie",
    "cookie2",
    "date",
    "dnt",
    "expect",
    "host",
    "keep-alive",
    "origin",
    "referer",
    "set-cookie",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "via",
];

/// Headers the page sends on its own.
const OWN: &[&str] = &["content-type", "accept", "x-request-id"];

/// Why `name` cannot be an extra header's (or the key's) name, if it cannot: not an
/// HTTP token, forbidden to a page, or one the page sets itself.
pub fn header_name_problem(name: &str) -> Option<String> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() {
        return Some("no header name".into());
    }
    if let Some(c) = name.chars().find(|c| !token(*c)) {
        return Some(format!("`{name}` is not a header name (it has {c:?})"));
    }
    let lower = name.to_ascii_lowercase();
    if FORBIDDEN.contains(&lower.as_str())
        || lower.starts_with("proxy-")
        || lower.starts_with("sec-")
    {
        return Some(format!(
            "`{name}` is a header the browser sets itself and refuses from a page"
        ));
    }
    if OWN.contains(&lower.as_str()) {
        return Some(format!("`{name}` is a header the page sets itself"));
    }
    None
}

/// The extra headers typed in the page, one `Name: value` per line (blank lines
/// skipped, spaces around the name and the value trimmed). The error names the
/// first bad line by its number.
pub fn parse_header_lines(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let n = i + 1;
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("header line {n}: no `:` (write `Name: value`)"));
        };
        if let Some(p) = header_name_problem(name.trim()) {
            return Err(format!("header line {n}: {p}"));
        }
        out.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ct(d0: f64, d1: f64, c0: f64, c1: f64, s: f64) -> ConnectTiming {
        ConnectTiming {
            domain_lookup_start: d0,
            domain_lookup_end: d1,
            connect_start: c0,
            connect_end: c1,
            secure_connection_start: s,
        }
    }

    #[test]
    fn new_connection_with_lookup_and_tls() {
        let c = ct(10.0, 12.5, 12.5, 30.0, 20.0).connection().unwrap();
        assert!(c.new);
        assert_eq!(c.setup_ms, Some(20.0));
        assert_eq!(c.dns_ms, Some(2.5));
        assert_eq!(c.tls_ms, Some(10.0));
    }

    #[test]
    fn new_plain_connection_without_lookup() {
        // An IP address: the lookup's start and end are the connect's start.
        let c = ct(5.0, 5.0, 5.0, 5.75, 0.0).connection().unwrap();
        assert!(c.new);
        assert_eq!(c.setup_ms, Some(0.75));
        assert_eq!((c.dns_ms, c.tls_ms), (None, None));
        // No lookup reported at all.
        let c = ct(0.0, 0.0, 5.0, 6.0, 0.0).connection().unwrap();
        assert_eq!((c.setup_ms, c.dns_ms), (Some(1.0), None));
    }

    #[test]
    fn reused_connection() {
        // A reused connection: every field the fetch's start.
        let c = ct(7.0, 7.0, 7.0, 7.0, 7.0).connection().unwrap();
        assert_eq!(
            c,
            ConnectionUse {
                new: false,
                ..Default::default()
            }
        );
    }

    #[test]
    fn hidden_or_nonsense_is_unknown() {
        // Cross-origin without Timing-Allow-Origin: all zero.
        assert_eq!(ct(0.0, 0.0, 0.0, 0.0, 0.0).connection(), None);
        // Going backwards, not finite.
        assert_eq!(ct(1.0, 2.0, 5.0, 4.0, 0.0).connection(), None);
        assert_eq!(ct(f64::NAN, 2.0, 5.0, 6.0, 0.0).connection(), None);
        assert_eq!(ct(0.0, 0.0, 5.0, f64::INFINITY, 0.0).connection(), None);
        // A lookup after the connect's start is not counted.
        let c = ct(9.0, 9.5, 5.0, 8.0, 0.0).connection().unwrap();
        assert_eq!((c.setup_ms, c.dns_ms), (Some(3.0), None));
        // A TLS start before the connect's is not counted.
        let c = ct(0.0, 0.0, 5.0, 8.0, 4.0).connection().unwrap();
        assert_eq!(c.tls_ms, None);
    }

    #[test]
    fn mixed_content() {
        let https = "https://example.org/tokenscope/";
        assert!(is_mixed_content(https, "http://gpu-box:8000/v1"));
        assert!(is_mixed_content(https, "HTTP://10.0.0.2/v1"));
        assert!(is_mixed_content(https, "http://user@example.com/v1"));
        assert!(is_mixed_content(https, "http://localhost.example.com/v1"));
        assert!(is_mixed_content(https, "http://127.0.0.1.nip.io/v1"));
        for ok in [
            "http://localhost:8000/v1",
            "http://LOCALHOST/v1",
            "http://app.localhost:1/v1",
            "http://127.0.0.1:8000/v1",
            "http://127.1.2.3/v1",
            "http://[::1]:8000/v1",
            "https://gpu-box/v1",
            "",
            "/v1",
        ] {
            assert!(!is_mixed_content(https, ok), "{ok}");
        }
        assert!(!is_mixed_content(
            "http://127.0.0.1:8080/",
            "http://gpu-box/v1"
        ));
        assert!(!is_mixed_content(
            "file:///x/index.html",
            "http://gpu-box/v1"
        ));
    }

    #[test]
    fn header_lines() {
        let h = parse_header_lines("X-Tenant: acme\n\n  api-key :  s3cr:et \r\nX-Empty:").unwrap();
        assert_eq!(
            h,
            vec![
                ("X-Tenant".into(), "acme".into()),
                ("api-key".into(), "s3cr:et".into()),
                ("X-Empty".into(), String::new()),
            ]
        );
        assert_eq!(parse_header_lines("  \n").unwrap(), vec![]);
        let err = |t: &str| parse_header_lines(t).unwrap_err();
        assert_eq!(
            err("X-A: 1\nnocolon"),
            "header line 2: no `:` (write `Name: value`)"
        );
        assert!(err("Host: x").starts_with("header line 1: `Host` is a header the browser sets"));
        assert!(err("a\nb: 1\nConnection: close").starts_with("header line 1"));
        assert!(err("X: 1\nconnection: close").contains("line 2: `connection`"));
        assert!(err("Content-Length: 3").contains("browser sets itself"));
        assert!(err("Sec-Fetch-Mode: x").contains("browser sets itself"));
        assert!(err("Proxy-Authorization: x").contains("browser sets itself"));
        assert!(err("Content-Type: text/plain").contains("page sets itself"));
        assert_eq!(
            err("X Tenant: acme"),
            "header line 1: `X Tenant` is not a header name (it has ' ')"
        );
        assert_eq!(err(": v"), "header line 1: no header name");
        assert!(header_name_problem("api-key").is_none());
        assert!(header_name_problem("Authorization").is_none());
    }
}
