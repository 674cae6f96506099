//! `bench`'s flags for reaching real endpoints: TLS, HTTP version, proxy,
//! headers. Validated here into [`HttpOptions`].

use std::path::PathBuf;

use clap::Args;
use reqwest::header::HeaderName;

use tokenscope_loadgen::http_client::proxy;
use tokenscope_loadgen::http_client::{ExtraHeader, HttpOptions, HttpVersion};
use tokenscope_loadgen::util::Secret;

/// How to reach the endpoint. Its `Debug` shows header names and the proxy's
/// host only: the values may be secrets.
#[derive(Clone, Default, Args)]
#[command(next_help_heading = "Connection (TLS, HTTP version, proxy, headers)")]
pub struct HttpArgs {
    /// Trust this CA (PEM, one or several certificates) besides the system's
    /// roots: for a private CA. Repeatable. (SSL_CERT_FILE also replaces the
    /// system's roots.)
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Vec<PathBuf>,

    /// Client certificate for mutual TLS (PEM; with --client-key).
    #[arg(long, value_name = "FILE", requires = "client_key")]
    pub client_cert: Option<PathBuf>,

    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "client_cert")]
    pub client_key: Option<PathBuf>,

    /// Do not verify the server's certificate. Anyone on the path could answer:
    /// for test servers only; the output and the report say so loudly.
    #[arg(long)]
    pub insecure: bool,

    /// Speak HTTP/1.1 only (default: HTTP/2 where the server offers it by ALPN).
    #[arg(long, conflicts_with = "http2")]
    pub http1: bool,

    /// Speak HTTP/2 only (ALPN h2 over TLS; prior knowledge, h2c, in plaintext).
    #[arg(long)]
    pub http2: bool,

    /// Send the requests through this proxy (http://[user:pass@]HOST:PORT).
    /// Default: HTTPS_PROXY / HTTP_PROXY / ALL_PROXY, minus NO_PROXY. The report
    /// names the proxy's host, never its credentials.
    #[arg(long, value_name = "URL")]
    pub proxy: Option<String>,

    /// Send this header on every request ('Name: value'; repeatable). Values are
    /// treated like the key: never printed or reported (see --public-header).
    #[arg(long = "header", short = 'H', value_name = "'NAME: VALUE'")]
    pub headers: Vec<String>,

    /// A --header whose value may be printed and reported (by name; repeatable).
    #[arg(long, value_name = "NAME")]
    pub public_header: Vec<String>,

    /// Send the API key in this header instead of 'Authorization: Bearer'
    /// (Azure OpenAI and some gateways: api-key).
    #[arg(long, value_name = "NAME")]
    pub api_key_header: Option<String>,
}

impl std::fmt::Debug for HttpArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .headers
            .iter()
            .map(|h| h.split_once(':').map_or("?", |(n, _)| n.trim()))
            .map(|n| {
                if HeaderName::from_bytes(n.as_bytes()).is_ok() {
                    n
                } else {
                    "?"
                }
            })
            .collect();
        f.debug_struct("HttpArgs")
            .field("ca_cert", &self.ca_cert)
            .field("client_cert", &self.client_cert)
            .field("client_key", &self.client_key)
            .field("insecure", &self.insecure)
            .field("http1", &self.http1)
            .field("http2", &self.http2)
            .field(
                "proxy",
                &self
                    .proxy
                    .as_deref()
                    .map(tokenscope_measure::parse::redact_url),
            )
            .field("headers", &names)
            .field("public_header", &self.public_header)
            .field("api_key_header", &self.api_key_header)
            .finish()
    }
}

impl HttpArgs {
    /// The options for requests to `url`; `env` reads environment variables
    /// (the proxy's). Errors name the flag and the value (never a header's value).
    pub fn into_options(
        self,
        url: &reqwest::Url,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<HttpOptions> {
        let headers = self
            .headers
            .iter()
            .enumerate()
            .map(|(i, h)| parse_header(i + 1, h, &self.public_header))
            .collect::<Result<Vec<ExtraHeader>, _>>()?;
        for (i, h) in headers.iter().enumerate() {
            if headers[..i].iter().any(|e| e.name == h.name) {
                anyhow::bail!(
                    "--header {}: given twice; send one value per header (join values with ', ' if the server reads a list)",
                    h.name
                );
            }
        }
        for name in &self.public_header {
            if !headers
                .iter()
                .any(|h| h.name.as_str().eq_ignore_ascii_case(name))
            {
                anyhow::bail!("--public-header {name}: no --header of that name");
            }
        }
        let api_key_header = self
            .api_key_header
            .as_deref()
            .map(|n| {
                HeaderName::from_bytes(n.trim().as_bytes())
                    .map_err(|_| anyhow::anyhow!("--api-key-header {n:?}: not a header name"))
            })
            .transpose()?;
        if self.insecure && url.scheme() != "https" {
            anyhow::bail!(
                "--insecure: {} is not https; there is no certificate to skip",
                url.scheme()
            );
        }
        let proxy_rules = proxy::ProxyRules::read(self.proxy.as_deref(), env);
        let proxy = proxy_rules.choose(url).map_err(anyhow::Error::msg)?;
        Ok(HttpOptions {
            ca_certs: self.ca_cert,
            client_cert: self.client_cert.zip(self.client_key),
            insecure: self.insecure,
            version: if self.http1 {
                HttpVersion::Http1
            } else if self.http2 {
                HttpVersion::Http2
            } else {
                HttpVersion::Auto
            },
            proxy,
            proxy_rules,
            headers,
            api_key_header,
        })
    }
}

/// The `nth` `--header 'Name: value'`. The error names the header, never its
/// value; a name that is not one is not shown either (a value typed without
/// its name, `Bearer sk-...: x`, would be).
fn parse_header(nth: usize, h: &str, public: &[String]) -> anyhow::Result<ExtraHeader> {
    let Some((name, value)) = h.split_once(':') else {
        anyhow::bail!(
            "--header (the {nth}{}): expected 'Name: value', got a line without ':' (not shown: it may hold a secret)",
            ordinal(nth)
        );
    };
    let name = name.trim();
    let parsed = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
        anyhow::anyhow!(
            "--header (the {nth}{}): what comes before ':' is not a header name (letters, digits and -, no spaces; not shown: it may hold a secret)",
            ordinal(nth)
        )
    })?;
    let reserved = [
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
    ];
    if reserved.contains(&parsed.as_str()) {
        anyhow::bail!("--header {name}: set by tokenscope itself; it cannot be replaced");
    }
    let value = value.trim();
    if reqwest::header::HeaderValue::from_str(value).is_err() {
        anyhow::bail!("--header {name}: its value has characters a header cannot carry");
    }
    Ok(ExtraHeader {
        public: public.iter().any(|p| p.eq_ignore_ascii_case(name)),
        name: parsed,
        value: Secret::new(value.to_owned()),
    })
}

fn ordinal(n: usize) -> &'static str {
    match (n % 10, n % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> reqwest::Url {
        reqwest::Url::parse(s).unwrap()
    }

    #[test]
    fn headers_parse_and_errors_never_show_values() {
        let args = HttpArgs {
            headers: vec!["X-Tenant: t-secret".into(), "x-trace:  on ".into()],
            public_header: vec!["x-trace".into()],
            ..Default::default()
        };
        let o = args.into_options(&url("https://a/v1"), &|_| None).unwrap();
        assert_eq!(o.headers.len(), 2);
        assert_eq!(o.headers[0].name.as_str(), "x-tenant");
        assert!(!o.headers[0].public && o.headers[1].public);
        assert_eq!(o.headers[1].value.expose(), "on");
        let info = o.info(true);
        assert_eq!(info.headers[0].value, None);
        assert_eq!(info.headers[1].value.as_deref(), Some("on"));
        assert!(!format!("{o:?}").contains("t-secret"));
        let args = HttpArgs {
            headers: vec!["X-Tenant: t-secret".into(), "Bearer t-secret".into()],
            proxy: Some("http://u:t-secret@p:1".into()),
            ..Default::default()
        };
        let shown = format!("{args:?}");
        assert!(
            shown.contains("X-Tenant") && !shown.contains("t-secret"),
            "{shown}"
        );
        for (bad, needle) in [
            ("no colon t-secret", "without ':'"),
            ("Bad Name: t-secret", "not a header name"),
            ("Bearer t-secret: x", "the 1st"),
            ("Host: t-secret", "set by tokenscope"),
            ("X-A: t-secret\u{7f}", "characters"),
        ] {
            let args = HttpArgs {
                headers: vec![bad.into()],
                ..Default::default()
            };
            let e = args
                .into_options(&url("https://a/v1"), &|_| None)
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle) && !e.contains("t-secret"), "{e}");
        }
        let args = HttpArgs {
            headers: vec!["X-A: 1".into(), "x-a: t-secret".into()],
            ..Default::default()
        };
        let e = args
            .into_options(&url("https://a/v1"), &|_| None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("x-a") && e.contains("twice") && !e.contains("t-secret"),
            "{e}"
        );
        let args = HttpArgs {
            public_header: vec!["x-none".into()],
            ..Default::default()
        };
        assert!(args.into_options(&url("https://a/v1"), &|_| None).is_err());
    }

    #[test]
    fn the_key_goes_in_its_header_and_insecure_needs_https() {
        let args = HttpArgs {
            api_key_header: Some("api-key".into()),
            ..Default::default()
        };
        let o = args.into_options(&url("https://a/v1"), &|_| None).unwrap();
        let h = o.base_headers(Some(&Secret::new("k-123".into())));
        assert_eq!(h.get("api-key").unwrap().to_str().unwrap(), "k-123");
        assert!(h.get("authorization").is_none());
        assert!(h.get("api-key").unwrap().is_sensitive());
        let plain = HttpOptions::default().base_headers(Some(&Secret::new("k".into())));
        assert_eq!(plain.get("authorization").unwrap(), "Bearer k");
        let args = HttpArgs {
            insecure: true,
            ..Default::default()
        };
        assert!(args.into_options(&url("http://a/v1"), &|_| None).is_err());
    }
}
