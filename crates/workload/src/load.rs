//! How a run applied load: who measured, closed or open loop, the load of one
//! level, the arrival process, and what a browser run showed of reasoning.

use serde::{Deserialize, Serialize};

/// Who measured. (The default, the native CLI, stands in where a report's
/// source is not read: the page's main module.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The native CLI (`tokenscope bench`).
    #[default]
    Native,
    /// The web page.
    Browser,
    /// Real users' pages: turns the browser probe sent to `tokenscope collect`.
    Rum,
}

impl Source {
    /// `native` or `browser`, as in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Native => "native",
            Source::Browser => "browser",
            Source::Rum => "rum",
        }
    }
}

/// How load was applied: closed loop (concurrency) or open loop (rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LoadMode {
    /// A fixed number of requests in flight.
    #[default]
    Concurrency,
    /// Requests sent on a schedule.
    Rate,
}

impl LoadMode {
    /// `concurrency` or `rate`, as in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadMode::Concurrency => "concurrency",
            LoadMode::Rate => "rate",
        }
    }
}

impl std::fmt::Display for LoadMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How load was applied at one level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Load {
    /// Closed loop: this many requests in flight at all times.
    Concurrency(u32),
    /// Open loop: requests sent on a schedule at this mean rate (req/s).
    Rate(f64),
}

impl Load {
    /// A short label: `c=8` or `5 req/s`.
    pub fn label(&self) -> String {
        match self {
            Load::Concurrency(c) => format!("c={c}"),
            Load::Rate(r) => {
                // At most two decimals (a trace's mean rate is any number).
                let text = format!("{r:.2}");
                let text = text.trim_end_matches('0').trim_end_matches('.');
                format!("{text} req/s")
            }
        }
    }

    /// The load as a number (concurrency or rate), for charts.
    pub fn value(&self) -> f64 {
        match self {
            Load::Concurrency(c) => f64::from(*c),
            Load::Rate(r) => *r,
        }
    }
}

/// What a browser run's page showed of a reasoning model's answer (`reasoning`):
/// its rendered TTFT is the paint of the first token shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningDisplay {
    /// The reasoning is shown as it streams: the first token of any kind is
    /// painted first.
    #[default]
    Shown,
    /// Only the answer is shown: the first answer token is painted first.
    Hidden,
}

/// Inter-arrival distribution in rate mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// Exponential gaps (a Poisson process).
    #[default]
    Poisson,
    /// Equal gaps.
    Constant,
    /// The arrivals of a replayed trace (`config.trace`).
    Trace,
    /// Gamma-distributed gaps with the coefficient of variation in
    /// `config.arrival_cv` (1: Poisson; above: burstier).
    Gamma,
}

/// Parse an arrival process: `poisson`, `constant`, or `gamma:CV` (the gaps'
/// coefficient of variation: 1 is Poisson, above 1 burstier). The CLI's
/// `--arrival` and the page's `arrival`.
pub fn parse_arrival(s: &str) -> Result<(Arrival, Option<f64>), String> {
    match s.trim() {
        "poisson" => Ok((Arrival::Poisson, None)),
        "constant" => Ok((Arrival::Constant, None)),
        other => {
            let cv = other.strip_prefix("gamma:").ok_or_else(|| {
                format!("{other:?}: expected poisson, constant or gamma:CV (e.g. gamma:2)")
            })?;
            match cv.trim().parse::<f64>() {
                Ok(cv) if cv > 0.0 && cv.is_finite() => Ok((Arrival::Gamma, Some(cv))),
                _ => Err(format!(
                    "{other:?}: the coefficient of variation must be a number above 0"
                )),
            }
        }
    }
}
