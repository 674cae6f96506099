//! The metric registry: every metric a level reports, defined once. Its key (the
//! JSON field and CSV column's name), how people read it (name, column label,
//! unit), which way is better, how to read it from a level and from a request's
//! metrics, whether an SLO can bound it, and its definition for the glossary
//! (the same as `docs/metrics.md`, the spec).
//!
//! Readers select from [`METRICS`] by key ([`by_key`]) or through the named
//! entries ([`TTFT_MS`], ...); a table that shows a subset of the metrics, or its
//! own order, lists keys, never a second copy of a metric's identity. Computing
//! a metric stays where it is: [`RequestMetrics`] per request, the level's
//! collector (`analyze::level`, `analyze::level_samples`) per level.
//!
//! Plain consts: the page carries this table (SLO parsing reads it), so the
//! definitions' text lives apart, in [`super::metric_defs`], which only the
//! renderers read.

use crate::model::level::{LevelMetrics, LevelReport};
use tokenscope_measure::metrics::RequestMetrics;
use tokenscope_stats::compare::Direction;
use tokenscope_stats::stats::{Summary, percentile};

/// A metric's unit (its key ends with it: `_ms`, `_per_s`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Milliseconds.
    Ms,
    /// Tokens (a count).
    Tokens,
    /// Tokens per second.
    TokensPerS,
    /// Requests per second.
    RequestsPerS,
    /// A fraction of the sent requests, 0..1 (shown as a percentage).
    Fraction,
}

/// Where a level keeps a metric.
#[derive(Clone, Copy)]
pub enum LevelValue {
    /// A distribution over the level's requests: its summary in
    /// [`LevelMetrics`] (`None`: the level has no sample of it).
    Summary(fn(&LevelMetrics) -> Option<&Summary>),
    /// One figure of the level ([`LevelReport`]'s field).
    Figure(fn(&LevelReport) -> Option<f64>),
}

/// What one request contributes to a metric.
#[derive(Clone, Copy)]
pub enum PerRequest {
    /// One value (absent: the request does not have it).
    One(fn(&RequestMetrics) -> Option<f64>),
    /// Each gap between its content events (ITL).
    Gaps,
}

/// One metric.
#[derive(Clone, Copy)]
pub struct Metric {
    /// The JSON field's and CSV column's name, unit included (`ttft_ms`).
    pub key: &'static str,
    /// Its name in prose and the glossary (`TTFT`).
    pub name: &'static str,
    /// Its label in the level tables' headers (`TTFT`, `out tok/s`).
    pub column: &'static str,
    /// Its unit.
    pub unit: Unit,
    /// Which way is better (`None`: neither, a figure of the workload).
    pub better: Option<Direction>,
    /// How to read it from a level.
    pub level: LevelValue,
    /// How to read it from one request's metrics, for the readers that take
    /// it per request: SLOs (goodput) and compare's bootstrap (`None`: only
    /// the level's collector reads it, `analyze::level`).
    pub request: Option<PerRequest>,
    /// An SLO can bound it (`ttft_ms:p95<=500`); the names accepted for it
    /// besides its key, with or without `_ms`.
    pub slo: Option<&'static [&'static str]>,
    /// Why a level may lack every sample of it (said when an SLO on it
    /// cannot be evaluated).
    pub absent: Option<&'static str>,
    /// The report keeps its quantile curve (`levels[].quantiles`, charted).
    pub curve: bool,
    /// Exported live as a Prometheus histogram in seconds (`bench
    /// --metrics-listen`, `--remote-write`), observed per request through
    /// [`Metric::request`].
    pub live: Option<LiveFamily>,
}

/// A metric's live Prometheus family.
#[derive(Debug, Clone, Copy)]
pub struct LiveFamily {
    /// The family's name: the key in seconds (`tokenscope_ttft_seconds`).
    pub name: &'static str,
    /// Its `# HELP` text.
    pub help: &'static str,
}

impl Metric {
    /// The level's summary of it (`None` for a level figure, or a level
    /// without samples of it).
    pub fn summary<'a>(&self, m: &'a LevelMetrics) -> Option<&'a Summary> {
        match self.level {
            LevelValue::Summary(get) => get(m),
            LevelValue::Figure(_) => None,
        }
    }

    /// The level's figure (`None` for a distribution, or a figure the level
    /// does not have).
    pub fn figure(&self, l: &LevelReport) -> Option<f64> {
        match self.level {
            LevelValue::Figure(get) => get(l),
            LevelValue::Summary(_) => None,
        }
    }

    /// A request's values of it: one, or its gaps (empty: none).
    pub fn request_values(&self, m: &RequestMetrics) -> Vec<f64> {
        match self.request {
            Some(PerRequest::One(get)) => get(m).into_iter().collect(),
            Some(PerRequest::Gaps) => m.gaps.iter().map(|g| g.ms).collect(),
            None => Vec::new(),
        }
    }

    /// A request's own value of it at quantile `q`: its value, or the `q`
    /// quantile of its gaps.
    pub fn request_value(&self, m: &RequestMetrics, q: f64) -> Option<f64> {
        match self.request? {
            PerRequest::One(get) => get(m),
            PerRequest::Gaps => percentile(&self.request_values(m), q),
        }
    }

    /// Its samples are gaps between tokens, not requests.
    pub fn per_gap(&self) -> bool {
        matches!(self.request, Some(PerRequest::Gaps))
    }

    /// Whether `name` names it in an SLO: its key, without `_ms`, or an alias.
    pub fn slo_named(&self, name: &str) -> bool {
        let Some(aliases) = self.slo else {
            return false;
        };
        let bare = |s: &'static str| s.strip_suffix("_ms").unwrap_or(s);
        let name = name.strip_suffix("_ms").unwrap_or(name);
        bare(self.key) == name || aliases.iter().any(|a| bare(a) == name)
    }
}

impl std::fmt::Debug for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key)
    }
}

/// The metric with this key.
pub fn by_key(key: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.key == key)
}

/// The metrics exported live as Prometheus histograms, in registry order.
pub fn live() -> impl Iterator<Item = &'static Metric> {
    METRICS.iter().filter(|m| m.live.is_some())
}

/// The metrics an SLO can bound, in registry order.
pub fn gateable() -> impl Iterator<Item = &'static Metric> {
    METRICS.iter().filter(|m| m.slo.is_some())
}

const LOWER: Option<Direction> = Some(Direction::LowerIsBetter);
const HIGHER: Option<Direction> = Some(Direction::HigherIsBetter);

/// A per-request distribution: by default a latency in ms, lower is better,
/// no per-request reader, no SLO, no curve; the fields that vary.
const fn distribution(
    key: &'static str,
    name: &'static str,
    column: &'static str,
    level: fn(&LevelMetrics) -> Option<&Summary>,
) -> Metric {
    Metric {
        key,
        name,
        column,
        unit: Unit::Ms,
        better: LOWER,
        level: LevelValue::Summary(level),
        request: None,
        slo: None,
        absent: None,
        curve: false,
        live: None,
    }
}

/// Time to first token.
pub const TTFT_MS: Metric = Metric {
    request: Some(PerRequest::One(|m| m.ttft_ms)),
    slo: Some(&[]),
    curve: true,
    live: Some(LiveFamily {
        name: "tokenscope_ttft_seconds",
        help: "Time to first token of measured successful requests, seconds.",
    }),
    ..distribution("ttft_ms", "TTFT", "TTFT", |m| Some(&m.ttft_ms))
};
/// TTFT of the requests mostly served from the prefix cache.
pub const TTFT_CACHED_MS: Metric = Metric {
    request: Some(PerRequest::One(|m| {
        m.ttft_ms.filter(|_| m.prompt_cached == Some(true))
    })),
    ..distribution("ttft_cached_ms", "TTFT (cached)", "TTFT cached", |m| {
        m.ttft_cached_ms.as_ref()
    })
};
/// TTFT of the requests not mostly served from the prefix cache.
pub const TTFT_UNCACHED_MS: Metric = Metric {
    request: Some(PerRequest::One(|m| {
        m.ttft_ms.filter(|_| m.prompt_cached == Some(false))
    })),
    ..distribution(
        "ttft_uncached_ms",
        "TTFT (uncached)",
        "TTFT uncached",
        |m| m.ttft_uncached_ms.as_ref(),
    )
};
/// Time per output token.
pub const TPOT_MS: Metric = Metric {
    request: Some(PerRequest::One(|m| m.tpot_ms)),
    slo: Some(&[]),
    curve: true,
    live: Some(LiveFamily {
        name: "tokenscope_tpot_seconds",
        help: "Time per output token after the first, seconds.",
    }),
    ..distribution("tpot_ms", "TPOT", "TPOT", |m| Some(&m.tpot_ms))
};
/// Inter-token latency, per chunk.
pub const ITL_MS: Metric = Metric {
    request: Some(PerRequest::Gaps),
    slo: Some(&[]),
    curve: true,
    live: Some(LiveFamily {
        name: "tokenscope_itl_seconds",
        help: "Inter-token latency: one observation per gap between content events, seconds.",
    }),
    ..distribution("itl_ms", "ITL", "ITL", |m| Some(&m.itl_ms))
};
/// Inter-token latency, per token.
pub const ITL_PER_TOKEN_MS: Metric =
    distribution("itl_per_token_ms", "ITL (per token)", "ITL/token", |m| {
        Some(&m.itl_per_token_ms)
    });
/// End-to-end latency.
pub const E2E_MS: Metric = Metric {
    request: Some(PerRequest::One(|m| m.e2e_ms)),
    slo: Some(&["e2el"]),
    curve: true,
    live: Some(LiveFamily {
        name: "tokenscope_e2e_seconds",
        help: "End-to-end latency of measured successful requests, seconds.",
    }),
    ..distribution("e2e_ms", "E2E", "E2E", |m| Some(&m.e2e_ms))
};
/// Time to the response's headers.
pub const TIME_TO_HEADERS_MS: Metric =
    distribution("time_to_headers_ms", "Time to headers", "headers", |m| {
        Some(&m.time_to_headers_ms)
    });
/// Time to the body's first bytes.
pub const TIME_TO_FIRST_BYTE_MS: Metric =
    distribution("time_to_first_byte_ms", "Time to first byte", "TTFB", |m| {
        Some(&m.time_to_first_byte_ms)
    });
/// A request's decode rate.
pub const DECODE_RATE_TOK_PER_S: Metric = Metric {
    unit: Unit::TokensPerS,
    better: HIGHER,
    ..distribution(
        "decode_rate_tok_per_s",
        "Decode rate",
        "decode tok/s",
        |m| Some(&m.decode_rate_tok_per_s),
    )
};
/// A request's output tokens.
pub const OUTPUT_TOKENS: Metric = Metric {
    unit: Unit::Tokens,
    better: None,
    ..distribution("output_tokens", "Output tokens", "out tokens", |m| {
        Some(&m.output_tokens)
    })
};
/// User-perceived (painted) TTFT, browser only.
pub const RENDERED_TTFT_MS: Metric = Metric {
    request: Some(PerRequest::One(|m| m.rendered_ttft_ms)),
    slo: Some(&[]),
    absent: Some("a paint time: measured in the browser only"),
    curve: true,
    live: Some(LiveFamily {
        name: "tokenscope_rendered_ttft_seconds",
        help: "Time to the first token painted (browser), seconds.",
    }),
    ..distribution("rendered_ttft_ms", "Rendered TTFT", "painted", |m| {
        m.rendered_ttft_ms.as_ref()
    })
};
/// From the first token's arrival to its paint.
pub const RENDER_DELAY_MS: Metric = Metric {
    curve: true,
    ..distribution("render_delay_ms", "Render delay", "render delay", |m| {
        m.render_delay_ms.as_ref()
    })
};
/// A request's longest gap between tokens (stream smoothness).
pub const MAX_GAP_MS: Metric = Metric {
    request: Some(PerRequest::One(|m| m.longest_gap_ms)),
    slo: Some(&[]),
    ..distribution("max_gap_ms", "Longest gap", "longest gap", |m| {
        m.max_gap_ms.as_ref()
    })
};
/// A reasoning model's first answer token.
pub const TIME_TO_FIRST_ANSWER_MS: Metric = distribution(
    "time_to_first_answer_ms",
    "Time to first answer",
    "first answer",
    |m| m.time_to_first_answer_ms.as_ref(),
);
/// The first piece of a tool call.
pub const TIME_TO_FIRST_TOOL_CALL_MS: Metric = distribution(
    "time_to_first_tool_call_ms",
    "Time to first tool call",
    "first tool call",
    |m| m.time_to_first_tool_call_ms.as_ref(),
);
/// A reasoning model's reasoning tokens.
pub const REASONING_TOKENS: Metric = Metric {
    unit: Unit::Tokens,
    better: None,
    ..distribution(
        "reasoning_tokens",
        "Reasoning tokens",
        "reasoning tokens",
        |m| m.reasoning_tokens.as_ref(),
    )
};
/// The browser's delay from `fetch()` to sending.
pub const BROWSER_SEND_MS: Metric =
    distribution("browser_send_ms", "Browser send", "browser send", |m| {
        m.browser_send_ms.as_ref()
    });
/// The browser's delay from its network stack to the page's script.
pub const BROWSER_DELIVERY_MS: Metric = distribution(
    "browser_delivery_ms",
    "Browser delivery",
    "browser delivery",
    |m| m.browser_delivery_ms.as_ref(),
);
/// Rate mode: actual minus scheduled send time.
pub const CLIENT_LAG_MS: Metric = distribution("client_lag_ms", "Client lag", "client lag", |m| {
    m.client_lag_ms.as_ref()
});
/// The server's own time per output token (llama.cpp's `timings`).
pub const SERVER_TPOT_MS: Metric =
    distribution("server_tpot_ms", "Server TPOT", "server TPOT", |m| {
        m.server_tpot_ms.as_ref()
    });
/// The server's own prompt time (llama.cpp's `timings`).
pub const SERVER_PROMPT_MS: Metric = distribution(
    "server_prompt_ms",
    "Server prompt time",
    "server prompt",
    |m| m.server_prompt_ms.as_ref(),
);
/// The wait for a connection's setup.
pub const CONNECTION_SETUP_MS: Metric = distribution(
    "connection_setup_ms",
    "Connection setup",
    "connection setup",
    |m| m.connection_setup_ms.as_ref(),
);

/// A level's figure: its unit, direction and field vary.
const fn figure(
    key: &'static str,
    name: &'static str,
    column: &'static str,
    unit: Unit,
    better: Option<Direction>,
    level: fn(&LevelReport) -> Option<f64>,
) -> Metric {
    Metric {
        key,
        name,
        column,
        unit,
        better,
        level: LevelValue::Figure(level),
        request: None,
        slo: None,
        absent: None,
        curve: false,
        live: None,
    }
}

/// Output throughput.
pub const OUTPUT_TOKENS_PER_S: Metric = figure(
    "output_tokens_per_s",
    "Output throughput",
    "out tok/s",
    Unit::TokensPerS,
    HIGHER,
    |l| Some(l.output_tokens_per_s),
);
/// Request throughput.
pub const REQUESTS_PER_S: Metric = figure(
    "requests_per_s",
    "Request throughput",
    "req/s",
    Unit::RequestsPerS,
    HIGHER,
    |l| Some(l.requests_per_s),
);
/// Requests per second that met every SLO.
pub const GOODPUT_PER_S: Metric = figure(
    "goodput_per_s",
    "Goodput",
    "goodput/s",
    Unit::RequestsPerS,
    HIGHER,
    |l| l.goodput_per_s,
);
/// The share of sent requests that met every SLO.
pub const GOODPUT_FRACTION: Metric = figure(
    "goodput_fraction",
    "Goodput fraction",
    "goodput %",
    Unit::Fraction,
    HIGHER,
    |l| l.goodput_fraction,
);
/// Failed requests over sent.
pub const ERROR_RATE: Metric = figure(
    "error_rate",
    "Error rate",
    "err %",
    Unit::Fraction,
    LOWER,
    |l| Some(l.error_rate),
);
/// Timed-out requests over sent.
pub const TIMEOUT_RATE: Metric = figure(
    "timeout_rate",
    "Timeout rate",
    "t/o %",
    Unit::Fraction,
    LOWER,
    |l| Some(l.timeout_rate),
);

/// Every metric, the per-request distributions first (in `LevelMetrics`'
/// order), then the level's figures.
pub const METRICS: &[Metric] = &[
    TTFT_MS,
    TTFT_CACHED_MS,
    TTFT_UNCACHED_MS,
    TPOT_MS,
    ITL_MS,
    ITL_PER_TOKEN_MS,
    E2E_MS,
    TIME_TO_HEADERS_MS,
    TIME_TO_FIRST_BYTE_MS,
    DECODE_RATE_TOK_PER_S,
    OUTPUT_TOKENS,
    RENDERED_TTFT_MS,
    RENDER_DELAY_MS,
    MAX_GAP_MS,
    TIME_TO_FIRST_ANSWER_MS,
    TIME_TO_FIRST_TOOL_CALL_MS,
    REASONING_TOKENS,
    BROWSER_SEND_MS,
    BROWSER_DELIVERY_MS,
    CLIENT_LAG_MS,
    SERVER_TPOT_MS,
    SERVER_PROMPT_MS,
    CONNECTION_SETUP_MS,
    OUTPUT_TOKENS_PER_S,
    REQUESTS_PER_S,
    GOODPUT_PER_S,
    GOODPUT_FRACTION,
    ERROR_RATE,
    TIMEOUT_RATE,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_family_is_its_metric_in_seconds_read_per_request() {
        assert_eq!(live().count(), 5);
        for m in live() {
            let family = m.live.unwrap();
            assert_eq!(m.unit, Unit::Ms, "{}", m.key);
            assert_eq!(
                family.name,
                format!("tokenscope_{}_seconds", m.key.trim_end_matches("_ms")),
            );
            assert!(family.help.ends_with("seconds."), "{}", family.help);
            assert!(m.request.is_some(), "{} has no per-request reader", m.key);
        }
    }

    #[test]
    fn keys_are_unique_and_carry_their_unit() {
        for (i, m) in METRICS.iter().enumerate() {
            assert!(
                METRICS[i + 1..].iter().all(|o| o.key != m.key),
                "{} twice",
                m.key
            );
            let suffix = match m.unit {
                Unit::Ms => "_ms",
                Unit::Tokens => "tokens",
                Unit::TokensPerS => "_per_s",
                Unit::RequestsPerS => "_per_s",
                Unit::Fraction => "_rate",
            };
            assert!(
                m.key.ends_with(suffix) || m.key == "goodput_fraction",
                "{} does not end with {suffix}",
                m.key
            );
            assert!(by_key(m.key).is_some_and(|b| b.key == m.key));
        }
    }

    #[test]
    fn slo_names_find_one_metric_each() {
        for (name, key) in [
            ("ttft", "ttft_ms"),
            ("ttft_ms", "ttft_ms"),
            ("e2el", "e2e_ms"),
            ("e2el_ms", "e2e_ms"),
            ("rendered_ttft", "rendered_ttft_ms"),
        ] {
            let found: Vec<&str> = gateable()
                .filter(|m| m.slo_named(name))
                .map(|m| m.key)
                .collect();
            assert_eq!(found, [key], "{name}");
        }
        assert!(!TIME_TO_HEADERS_MS.slo_named("time_to_headers_ms"));
        // A gateable metric is read per request (goodput) and per level.
        for m in gateable() {
            assert!(m.request.is_some() && m.unit == Unit::Ms, "{}", m.key);
            assert!(matches!(m.level, LevelValue::Summary(_)), "{}", m.key);
        }
    }
}
