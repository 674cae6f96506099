//! The checks' requests over HTTP: [`Http`] carries `core::quality::session`'s
//! requests with reqwest (the key as a bearer token, never in an error), and
//! says progress on stderr.

use std::time::Duration;

use serde_json::Value;
use tokenscope_core::quality::session::{Server, Transport};

use crate::util::Secret;

/// reqwest, a key, and the server's name as shown (for errors).
pub(super) struct Http {
    client: reqwest::Client,
    key: Option<Secret>,
    shown: String,
}

/// The server at `url` over HTTP, with `key` (a bearer token) if any.
pub(super) fn server(url: &str, key: Option<&str>, timeout: f64) -> anyhow::Result<Server<Http>> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs_f64(timeout))
        .build()?;
    let http = Http {
        client,
        key: key.map(|k| Secret::new(k.to_owned())),
        shown: tokenscope_core::parse::redact_url(url),
    };
    Server::new(url, http).map_err(|e| anyhow::anyhow!("{e}"))
}

impl Http {
    async fn send(&self, req: reqwest::RequestBuilder) -> Result<Value, String> {
        let req = match &self.key {
            Some(k) => req.bearer_auth(k.expose()),
            None => req,
        };
        // reqwest's errors name the URL, query and all: never shown.
        let resp = req.send().await.map_err(|e| {
            // The cause chain (refused, timed out) without the URL.
            let e = e.without_url();
            let mut why = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                why.push_str(&format!(": {s}"));
                source = s.source();
            }
            format!("{}: no answer ({why})", self.shown)
        })?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if status.as_u16() == 401 || status.as_u16() == 403 {
            return Err(format!(
                "{} answered {status}: it wants a key (the candidate's: --api-key or TOKENSCOPE_API_KEY; the reference's: TOKENSCOPE_REF_API_KEY)",
                self.shown
            ));
        }
        if !status.is_success() {
            return Err(format!("{} answered {status}", self.shown));
        }
        serde_json::from_str(&text).map_err(|_| format!("{}: the answer is not JSON", self.shown))
    }
}

impl Transport for Http {
    async fn post(&self, url: &str, body: &Value) -> Result<Value, String> {
        self.send(self.client.post(url).json(body)).await
    }

    async fn get(&self, url: &str) -> Result<Value, String> {
        self.send(self.client.get(url)).await
    }

    fn say(&self, line: &str) {
        eprintln!("{line}");
    }
}
