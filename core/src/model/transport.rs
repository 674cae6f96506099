//! How the client reached the endpoint: the HTTP version asked for, TLS, the
//! proxy and the extra headers. Never a secret: header values only where the
//! user marked them public, a proxy without its credentials.

use serde::{Deserialize, Serialize};

/// The run's transport settings, as the client applied them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TransportInfo {
    /// The HTTP version asked for: `auto` (h2 where the server offers it by
    /// ALPN, else HTTP/1.1), `http1` or `http2` (`--http1`, `--http2`).
    pub http_version: String,
    /// TLS settings, for an `https` endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsInfo>,
    /// The proxy the requests went through, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyInfo>,
    /// Headers sent on every request besides the API's own (`--header`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderInfo>,
    /// The header that carried the API key, when not `Authorization: Bearer`
    /// (`--api-key-header`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_header: Option<String>,
}

/// TLS settings of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TlsInfo {
    /// The private CA files trusted besides the system's roots (`--ca-cert`),
    /// by file name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ca_certs: Vec<String>,
    /// A client certificate was presented (mutual TLS).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client_cert: bool,
    /// Certificates were NOT verified (`--insecure`): anyone on the path could
    /// have answered.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
}

/// The proxy of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ProxyInfo {
    /// Its scheme, host and port (never its credentials).
    pub url: String,
    /// Where it came from: `--proxy`, or the environment variable's name.
    pub from: String,
    /// It was given credentials (used, never written).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub credentials: bool,
}

/// One extra header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct HeaderInfo {
    /// Its name.
    pub name: String,
    /// Its value, only where the user marked it public; else hidden like a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}
