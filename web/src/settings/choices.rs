//! The settings that pick one way among a few: how the first paint is measured
//! and read, where real endpoints are streamed from, how prompt tokens are
//! counted, and which `/metrics` the run scrapes.

use serde::{Deserialize, Serialize};

/// How the first paint is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PaintMode {
    /// Element Timing where the browser has it, else the animation-frame fallback.
    #[default]
    Auto,
    /// Always the animation-frame fallback (to compare the two on one browser).
    Raf,
}

impl PaintMode {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            PaintMode::Auto => "auto",
            PaintMode::Raf => "raf",
        }
    }
}

/// Where the page streams real endpoints from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum NetMode {
    /// `fetch` in a dedicated worker: reads stamped off the main thread (default).
    #[default]
    Worker,
    /// `fetch` on the main thread (to compare; the page's own frames then delay
    /// the stamps of concurrent streams).
    Main,
}

impl NetMode {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            NetMode::Worker => "worker",
            NetMode::Main => "main",
        }
    }
}

/// How the animation-frame fallback reads the paint time (diagnostic setting
/// `paint_fallback`; the default was chosen by comparing each with Element Timing
/// in Chromium, see `docs/web.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PaintFallback {
    /// `performance.now()` inside the first rAF callback after the update (before
    /// that frame's rendering: a lower bound).
    Raf,
    /// `performance.now()` in a task posted from that rAF callback: after the
    /// frame's style, layout and paint.
    #[default]
    RafTask,
    /// `performance.now()` inside the second rAF callback (a frame later: an upper bound).
    DoubleRaf,
}

impl PaintFallback {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            PaintFallback::Raf => "raf",
            PaintFallback::RafTask => "raf_task",
            PaintFallback::DoubleRaf => "double_raf",
        }
    }

    /// Parse a query value.
    pub fn parse(s: &str) -> Option<Self> {
        [
            PaintFallback::Raf,
            PaintFallback::RafTask,
            PaintFallback::DoubleRaf,
        ]
        .into_iter()
        .find(|f| f.as_str() == s.trim())
    }
}

/// How prompts' tokens are counted (`tokenizer`), as `bench --tokenizer`
/// (which also takes a `tokenizer.json`; the page uses the server's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum TokenizerSetting {
    /// The endpoint's `/tokenize` when it has one, else approximate.
    #[default]
    Auto,
    /// The endpoint's `/tokenize`, or the run does not start.
    Server,
    /// One token per word and punctuation mark.
    Approx,
}

impl TokenizerSetting {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenizerSetting::Auto => "auto",
            TokenizerSetting::Server => "server",
            TokenizerSetting::Approx => "approx",
        }
    }

    /// Parse a query value.
    pub fn parse(s: &str) -> Option<Self> {
        [
            TokenizerSetting::Auto,
            TokenizerSetting::Server,
            TokenizerSetting::Approx,
        ]
        .into_iter()
        .find(|t| t.as_str() == s.trim())
    }
}

/// Which `/metrics` the page scrapes during a run (`metrics`: the server view).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum MetricsSetting {
    /// The endpoint's origin + `/metrics` (the simulator's own with no endpoint),
    /// dropped quietly when it does not answer with metrics.
    #[default]
    Auto,
    /// No scraping.
    Off,
    /// This URL, scraped whatever it answers.
    Url(String),
}

impl MetricsSetting {
    /// Parse a query value: `auto`, `none` (`off`), or an `http(s)` URL.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value.trim() {
            "" | "auto" => Ok(MetricsSetting::Auto),
            "none" | "off" | "0" => Ok(MetricsSetting::Off),
            url => Ok(MetricsSetting::Url(metrics_url(url)?)),
        }
    }

    /// The query value.
    pub fn as_query(&self) -> String {
        match self {
            MetricsSetting::Auto => "auto".into(),
            MetricsSetting::Off => "none".into(),
            MetricsSetting::Url(u) => u.clone(),
        }
    }
}

/// A metrics URL as typed: `http(s)://host[:port]/path`, no credentials (the
/// key goes in the key field).
pub fn metrics_url(url: &str) -> Result<String, String> {
    let url = url.trim();
    let shown = tokenscope_measure::parse::redact_url(url);
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "{shown:?} is not a URL: expected http://HOST:PORT/metrics"
        ));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!("{shown:?}: the scheme must be http or https"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(format!(
            "{shown:?}: credentials in the URL are not allowed; use the API key field"
        ));
    }
    if authority.is_empty() {
        return Err(format!("{shown:?} has no host"));
    }
    Ok(url.to_owned())
}
