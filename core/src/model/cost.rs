//! What each token costs: the run's price (`bench --price`, the page's `price`)
//! and a level's dollars and energy per token. Types, their parsing and serde;
//! `analyze::cost` computes a level's figures.

use serde::{Deserialize, Serialize};

/// What the run's compute costs: the GPUs' hourly price (self-hosted or rented),
/// or a hosted API's price per token.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "basis", rename_all = "snake_case")]
pub enum Price {
    /// `gpu_hour=2.49[,gpus=8]`: dollars per GPU-hour, for this many GPUs,
    /// charged for the level's whole window whether busy or idle.
    GpuHour {
        /// Dollars per GPU-hour.
        usd_per_gpu_hour: f64,
        /// GPUs serving the endpoint.
        gpus: u32,
    },
    /// `input_per_mtok=3,output_per_mtok=15[,cached_input_per_mtok=0.3]`:
    /// dollars per million prompt, cached prompt and output tokens (a hosted
    /// API's price list), charged on each request's `usage`.
    Tokens {
        /// Dollars per million prompt tokens not read from the cache.
        usd_per_million_input: f64,
        /// Dollars per million prompt tokens read from the cache (absent: the
        /// input price).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usd_per_million_cached_input: Option<f64>,
        /// Dollars per million output tokens.
        usd_per_million_output: f64,
    },
}

impl Price {
    /// Parse `gpu_hour=2.49[,gpus=N]` or `input_per_mtok=X,output_per_mtok=Y
    /// [,cached_input_per_mtok=Z]`; the error names the part that is wrong.
    pub fn parse(text: &str) -> Result<Price, String> {
        let mut gpu_hour = None;
        let mut gpus = None;
        let (mut input, mut cached, mut output) = (None, None, None);
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = part.split_once('=') else {
                return Err(format!("{part:?}: expected key=value"));
            };
            let key = key.trim();
            let number = || -> Result<f64, String> {
                let v: f64 = value
                    .trim()
                    .trim_start_matches('$')
                    .parse()
                    .map_err(|_| format!("{key}={value:?}: not a number"))?;
                if v.is_finite() && v >= 0.0 {
                    Ok(v)
                } else {
                    Err(format!("{key}={value}: must be 0 or more"))
                }
            };
            match key {
                "gpu_hour" => gpu_hour = Some(number()?),
                "gpus" => {
                    let n: u32 = value
                        .trim()
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| format!("gpus={value:?}: a whole number, 1 or more"))?;
                    gpus = Some(n);
                }
                "input_per_mtok" => input = Some(number()?),
                "cached_input_per_mtok" => cached = Some(number()?),
                "output_per_mtok" => output = Some(number()?),
                other => {
                    return Err(format!(
                        "{other:?}: not a price; expected gpu_hour (and gpus), or input_per_mtok, output_per_mtok (and cached_input_per_mtok)"
                    ));
                }
            }
        }
        let per_token = input.is_some() || cached.is_some() || output.is_some();
        match (gpu_hour, per_token) {
            (Some(_), true) => Err(
                "give either gpu_hour (self-hosted, by the hour) or the per-token prices, not both"
                    .into(),
            ),
            (Some(usd), false) => Ok(Price::GpuHour {
                usd_per_gpu_hour: usd,
                gpus: gpus.unwrap_or(1),
            }),
            (None, true) if gpus.is_some() => Err("gpus goes with gpu_hour".into()),
            (None, true) => match (input, output) {
                (Some(i), Some(o)) => Ok(Price::Tokens {
                    usd_per_million_input: i,
                    usd_per_million_cached_input: cached,
                    usd_per_million_output: o,
                }),
                _ => Err("per-token prices need both input_per_mtok and output_per_mtok".into()),
            },
            (None, false) => {
                Err("no price: e.g. gpu_hour=2.49 or input_per_mtok=3,output_per_mtok=15".into())
            }
        }
    }

    /// As the flag takes it (round-trips through [`Price::parse`]).
    pub fn label(&self) -> String {
        match self {
            Price::GpuHour {
                usd_per_gpu_hour,
                gpus,
            } => format!("gpu_hour={usd_per_gpu_hour},gpus={gpus}"),
            Price::Tokens {
                usd_per_million_input,
                usd_per_million_cached_input,
                usd_per_million_output,
            } => {
                let mut s = format!("input_per_mtok={usd_per_million_input}");
                if let Some(c) = usd_per_million_cached_input {
                    s.push_str(&format!(",cached_input_per_mtok={c}"));
                }
                s.push_str(&format!(",output_per_mtok={usd_per_million_output}"));
                s
            }
        }
    }
}

/// Where a level's energy figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergySource {
    /// The GPU exporter's energy counter (DCGM's
    /// `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`): its increase over the level.
    Counter,
    /// The mean of the power scraped over the level times its window.
    PowerMean,
}

/// What a level's tokens cost, in dollars (with a price) and in energy (with a
/// GPU exporter). Every figure assumes the endpoint's GPUs served only this run
/// while the level ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LevelCost {
    /// Dollars the level's requests cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// Dollars per request: per successful request (GPU-hour price), per
    /// request the server billed (with `usage`; per-token prices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_request: Option<f64>,
    /// Dollars per million output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_output_tokens: Option<f64>,
    /// The GPUs' energy over the level, joules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// Where `energy_j` comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_source: Option<EnergySource>,
    /// Joules per output token of the successful requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules_per_output_token: Option<f64>,
    /// Output tokens per joule (its inverse).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_joule: Option<f64>,
}

impl LevelCost {
    /// Whether it holds no figure.
    pub fn is_empty(&self) -> bool {
        self.usd.is_none() && self.energy_j.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_parse_and_print_back() {
        for text in [
            "gpu_hour=2.49,gpus=8",
            "input_per_mtok=3,output_per_mtok=15",
            "input_per_mtok=3,cached_input_per_mtok=0.3,output_per_mtok=15",
        ] {
            let p = Price::parse(text).unwrap();
            assert_eq!(p.label(), text);
            assert_eq!(Price::parse(&p.label()).unwrap(), p);
        }
        assert_eq!(
            Price::parse(" gpu_hour=$2.49 ").unwrap(),
            Price::GpuHour {
                usd_per_gpu_hour: 2.49,
                gpus: 1
            }
        );
    }

    #[test]
    fn bad_prices_say_what_is_wrong() {
        for (text, says) in [
            ("", "no price"),
            ("gpu_hour=2,input_per_mtok=1,output_per_mtok=2", "not both"),
            (
                "input_per_mtok=3",
                "both input_per_mtok and output_per_mtok",
            ),
            ("gpu_hour=-1", "0 or more"),
            ("gpu_hour=abc", "not a number"),
            ("gpu_hour=2,gpus=0", "1 or more"),
            (
                "gpus=2,input_per_mtok=1,output_per_mtok=1",
                "gpus goes with gpu_hour",
            ),
            ("per_hour=2", "not a price"),
            ("gpu_hour", "key=value"),
        ] {
            let e = Price::parse(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }
}
