//! What a level's tokens cost: dollars from the run's price (`--price`) and
//! energy from the GPU exporter's series, per request and per output token
//! (`docs/metrics.md`, "What each token costs").

use crate::analyze::server::engines::Series;
use crate::model::cost::{EnergySource, LevelCost, Price};
use crate::model::level::LevelReport;

/// Every level's cost ([`level_cost`]), set in place.
pub fn cost_levels(levels: &mut [LevelReport], price: Option<&Price>) {
    for level in levels {
        level.cost = level_cost(level, price);
    }
}

/// The level's cost figures, `None` where it has none (no price and no GPU
/// energy). Reads the level's counts, its window, its `usage` sums and, once the
/// scrapes are joined, its server view: computed again after the join.
pub fn level_cost(level: &LevelReport, price: Option<&Price>) -> Option<LevelCost> {
    let mut cost = LevelCost::default();
    let per = |usd: f64, n: u64| (n > 0).then(|| usd / n as f64);
    match price {
        Some(Price::GpuHour {
            usd_per_gpu_hour,
            gpus,
        }) => {
            let usd = usd_per_gpu_hour * f64::from(*gpus) * level.window_s / 3600.0;
            cost.usd = Some(usd);
            cost.usd_per_request = per(usd, level.ok);
            cost.usd_per_million_output_tokens =
                per(usd, level.output_tokens_total).map(|u| u * 1e6);
        }
        Some(Price::Tokens {
            usd_per_million_input,
            usd_per_million_cached_input,
            usd_per_million_output,
        }) => {
            let prompt = level.usage_prompt_tokens as f64;
            let cached = level
                .prompt_cache
                .map_or(0.0, |c| c.cached_tokens as f64)
                .min(prompt);
            let cached_price = usd_per_million_cached_input.unwrap_or(*usd_per_million_input);
            let output = level.usage_completion_tokens;
            let usd = ((prompt - cached) * usd_per_million_input
                + cached * cached_price
                + output as f64 * usd_per_million_output)
                / 1e6;
            cost.usd = Some(usd);
            cost.usd_per_request = per(usd, level.sent - level.requests_without_usage);
            cost.usd_per_million_output_tokens = per(usd, output).map(|u| u * 1e6);
        }
        None => {}
    }
    if let Some(server) = level.server_view() {
        let energy = match server.increase(Series::GpuEnergyJoules) {
            Some(j) => Some((j, EnergySource::Counter)),
            None => server
                .get(Series::GpuPowerWatts)
                .and_then(|p| p.mean)
                .map(|w| (w * level.window_s, EnergySource::PowerMean)),
        };
        if let Some((joules, source)) = energy.filter(|(j, _)| *j > 0.0) {
            cost.energy_j = Some(joules);
            cost.energy_source = Some(source);
            cost.joules_per_output_token = per(joules, level.output_tokens_total);
            cost.output_tokens_per_joule = Some(level.output_tokens_total as f64 / joules);
        }
    }
    (!cost.is_empty()).then_some(cost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::server::level::SeriesSummary;
    use crate::analyze::server::view::ServerLevel;
    use crate::model::level::PromptCache;

    fn level() -> LevelReport {
        let mut l = crate::testing::level(crate::model::load::Load::Concurrency(4), &[]);
        l.sent = 10;
        l.ok = 8;
        l.window_s = 36.0;
        l.output_tokens_total = 8_000;
        l.usage_prompt_tokens = 20_000;
        l.usage_completion_tokens = 8_100;
        l.requests_without_usage = 1;
        l.prompt_cache = Some(PromptCache {
            requests: 9,
            prompt_tokens: 20_000,
            cached_tokens: 5_000,
        });
        l
    }

    #[test]
    fn gpu_hours_are_charged_for_the_whole_window() {
        let price = Price::GpuHour {
            usd_per_gpu_hour: 2.5,
            gpus: 4,
        };
        let c = level_cost(&level(), Some(&price)).unwrap();
        // 4 GPUs x $2.50 x 36 s = $0.10, over 8 requests and 8,000 tokens.
        assert!((c.usd.unwrap() - 0.1).abs() < 1e-12);
        assert!((c.usd_per_request.unwrap() - 0.0125).abs() < 1e-12);
        assert!((c.usd_per_million_output_tokens.unwrap() - 12.5).abs() < 1e-9);
        assert_eq!(c.energy_j, None, "no GPU exporter");
    }

    #[test]
    fn token_prices_charge_each_requests_usage_cached_apart() {
        let price = Price::Tokens {
            usd_per_million_input: 3.0,
            usd_per_million_cached_input: Some(0.3),
            usd_per_million_output: 15.0,
        };
        let c = level_cost(&level(), Some(&price)).unwrap();
        // 15,000 x $3 + 5,000 x $0.30 + 8,100 x $15, per million.
        let usd = (15_000.0 * 3.0 + 5_000.0 * 0.3 + 8_100.0 * 15.0) / 1e6;
        assert!((c.usd.unwrap() - usd).abs() < 1e-12);
        // Billed: the 9 requests with usage.
        assert!((c.usd_per_request.unwrap() - usd / 9.0).abs() < 1e-12);
        assert!((c.usd_per_million_output_tokens.unwrap() - usd / 8_100.0 * 1e6).abs() < 1e-9);
        // Without a cached price the cache's tokens cost the input price.
        let plain = Price::Tokens {
            usd_per_million_input: 3.0,
            usd_per_million_cached_input: None,
            usd_per_million_output: 15.0,
        };
        let c = level_cost(&level(), Some(&plain)).unwrap();
        assert!((c.usd.unwrap() - (20_000.0 * 3.0 + 8_100.0 * 15.0) / 1e6).abs() < 1e-12);
    }

    fn with_series(mut l: LevelReport, series: Vec<SeriesSummary>) -> LevelReport {
        l.server = Some(ServerLevel {
            engine: None,
            gpu_exporter: None,
            scrapes: 3,
            failed_scrapes: 0,
            series,
            stages: None,
            tokens: None,
            spec_decode: None,
        });
        l
    }

    fn summary(series: Series) -> SeriesSummary {
        SeriesSummary {
            series,
            mean: None,
            max: None,
            increase: None,
            rate_per_s: None,
            histogram: None,
        }
    }

    #[test]
    fn energy_comes_from_the_counter_else_the_mean_power() {
        let power = SeriesSummary {
            mean: Some(500.0),
            max: Some(700.0),
            ..summary(Series::GpuPowerWatts)
        };
        let energy = SeriesSummary {
            increase: Some(16_000.0),
            ..summary(Series::GpuEnergyJoules)
        };
        let c = level_cost(&with_series(level(), vec![power.clone(), energy]), None).unwrap();
        assert_eq!(c.energy_source, Some(EnergySource::Counter));
        assert_eq!(c.energy_j, Some(16_000.0));
        assert_eq!(c.joules_per_output_token, Some(2.0));
        assert_eq!(c.output_tokens_per_joule, Some(0.5));
        assert_eq!(c.usd, None, "no price");
        // Power alone: 500 W over 36 s.
        let c = level_cost(&with_series(level(), vec![power]), None).unwrap();
        assert_eq!(c.energy_source, Some(EnergySource::PowerMean));
        assert_eq!(c.energy_j, Some(18_000.0));
        assert_eq!(c.joules_per_output_token, Some(2.25));
        // Neither: nothing to say.
        assert_eq!(level_cost(&level(), None), None);
    }
}
