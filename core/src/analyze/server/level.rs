//! A load level as the server saw it: the scrapes taken from its start to its
//! end summarised per series — gauges by their mean and max, counters by their
//! increase and rate, histograms by the level's delta (count, mean and
//! interpolated p50 / p95 / p99; `docs/metrics.md`, "Server metrics").

use serde::{Deserialize, Serialize};

use super::engines::Series;
use super::reading::{Histogram, Reading};
use tokenscope_measure::prometheus::MetricKind;

/// A reading and when it was taken (ms on the run's clock).
#[derive(Debug, Clone, PartialEq)]
pub struct TimedReading {
    /// When the scrape's answer arrived.
    pub t_ms: f64,
    /// What it said.
    pub reading: Reading,
}

/// One series over one level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesSummary {
    /// Which series.
    pub series: Series,
    /// Gauges: the mean over the level's scrapes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// Gauges: the largest value scraped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Counters: the increase over the level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub increase: Option<f64>,
    /// Counters: the increase per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// Histograms: what the level observed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histogram: Option<HistogramSummary>,
}

/// A histogram's level delta, summarised (values in the series' unit: seconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramSummary {
    /// Observations in the level.
    pub count: f64,
    /// `Δsum / Δcount`.
    pub mean: Option<f64>,
    /// Interpolated median.
    pub p50: Option<f64>,
    /// Interpolated 95th percentile.
    pub p95: Option<f64>,
    /// Interpolated 99th percentile.
    pub p99: Option<f64>,
}

impl HistogramSummary {
    fn of(h: &Histogram) -> HistogramSummary {
        HistogramSummary {
            count: h.count,
            mean: h.mean(),
            p50: h.quantile(0.5),
            p95: h.quantile(0.95),
            p99: h.quantile(0.99),
        }
    }
}

/// Every series the level's scrapes carry, summarised. `readings` are the scrapes
/// taken within the level, in time order, the first at its start and the last at
/// its end; counters and histograms need at least two.
pub fn summarize(readings: &[TimedReading]) -> Vec<SeriesSummary> {
    let mut out = Vec::new();
    for series in Series::ALL {
        let points: Vec<(f64, &Reading)> = readings
            .iter()
            .filter(|r| r.reading.values.contains_key(&series))
            .map(|r| (r.t_ms, &r.reading))
            .collect();
        if points.is_empty() {
            continue;
        }
        let mut s = SeriesSummary {
            series,
            mean: None,
            max: None,
            increase: None,
            rate_per_s: None,
            histogram: None,
        };
        let (t0, first) = points[0];
        let (t1, last) = points[points.len() - 1];
        match series.kind() {
            MetricKind::Histogram => {
                if points.len() >= 2
                    && let (Some(a), Some(b)) = (first.histogram(series), last.histogram(series))
                {
                    s.histogram = b.since(a).as_ref().map(HistogramSummary::of);
                }
            }
            MetricKind::Counter => {
                if points.len() >= 2
                    && let (Some(a), Some(b)) = (first.scalar(series), last.scalar(series))
                    && b >= a
                {
                    s.increase = Some(b - a);
                    s.rate_per_s = (t1 > t0).then(|| (b - a) / ((t1 - t0) / 1000.0));
                }
            }
            _ => {
                let values: Vec<f64> = points
                    .iter()
                    .filter_map(|(_, r)| r.scalar(series))
                    .collect();
                if !values.is_empty() {
                    s.mean = Some(values.iter().sum::<f64>() / values.len() as f64);
                    s.max = values.iter().copied().reduce(f64::max);
                }
            }
        }
        if s.mean.is_some() || s.increase.is_some() || s.histogram.is_some() {
            out.push(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_measure::prometheus::Scrape;

    fn reading(t_ms: f64, running: f64, tokens: f64, ttft: [f64; 3], sum: f64) -> TimedReading {
        let text = format!(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running {running}\n\
             # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total {tokens}\n\
             # TYPE vllm:time_to_first_token_seconds histogram\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"0.05\"}} {}\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"0.1\"}} {}\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {}\n\
             vllm:time_to_first_token_seconds_sum {sum}\n\
             vllm:time_to_first_token_seconds_count {}\n",
            ttft[0], ttft[1], ttft[2], ttft[2]
        );
        TimedReading {
            t_ms,
            reading: Reading::of(&Scrape::parse(&text)),
        }
    }

    #[test]
    fn gauges_counters_and_histograms_over_a_level() {
        let level = [
            reading(1000.0, 0.0, 100.0, [1.0, 2.0, 2.0], 0.1),
            reading(2000.0, 4.0, 300.0, [3.0, 6.0, 6.0], 0.3),
            reading(3000.0, 2.0, 500.0, [5.0, 10.0, 12.0], 0.9),
        ];
        let s = summarize(&level);
        let get = |series| s.iter().find(|x| x.series == series).unwrap();
        let running = get(Series::RequestsRunning);
        assert_eq!((running.mean, running.max), (Some(2.0), Some(4.0)));
        let tokens = get(Series::GenerationTokens);
        assert_eq!(
            (tokens.increase, tokens.rate_per_s),
            (Some(400.0), Some(200.0))
        );
        let ttft = get(Series::TtftSeconds).histogram.clone().unwrap();
        // The level saw 10 first tokens: 4 under 50 ms, 4 in (50, 100] ms, 2 above.
        assert_eq!(ttft.count, 10.0);
        assert!((ttft.mean.unwrap() - 0.08).abs() < 1e-12);
        // p50: rank 5 is the first of 4 in (0.05, 0.1]: 0.05 + 0.05 / 4.
        assert!((ttft.p50.unwrap() - 0.0625).abs() < 1e-12);
        assert_eq!(ttft.p99, Some(0.1));
    }

    #[test]
    fn one_scrape_gives_gauges_only_and_a_reset_no_delta() {
        let s = summarize(&[reading(0.0, 3.0, 10.0, [1.0, 1.0, 1.0], 0.01)]);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].series, Series::RequestsRunning);
        // The server restarted between the two scrapes: counts went down.
        let s = summarize(&[
            reading(0.0, 1.0, 500.0, [5.0, 9.0, 9.0], 1.0),
            reading(1000.0, 1.0, 20.0, [1.0, 1.0, 1.0], 0.01),
        ]);
        assert!(
            s.iter()
                .all(|x| x.increase.is_none() && x.histogram.is_none())
        );
    }
}
