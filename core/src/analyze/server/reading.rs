//! One scrape read into tokenscope's series ([`Reading`]), and the server-side
//! histograms with their level deltas and bucket-interpolated percentiles.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::engines::{Combine, Engine, Series, Source};
use tokenscope_measure::prometheus::{Family, MetricKind, Sample, Scrape};

/// A cumulative histogram as Prometheus exposes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// `(le, cumulative count)`, by increasing `le`, the last one `+Inf` (in JSON
    /// the string `"+Inf"`, which JSON numbers cannot hold).
    #[serde(with = "bounds")]
    pub buckets: Vec<(f64, f64)>,
    /// `_sum`.
    pub sum: f64,
    /// `_count`.
    pub count: f64,
}

impl Histogram {
    /// What was observed between `earlier` and `self` (bucket by bucket), or
    /// `None` when the buckets differ or a count went down (the server restarted).
    pub fn since(&self, earlier: &Histogram) -> Option<Histogram> {
        if self.buckets.len() != earlier.buckets.len() || self.count < earlier.count {
            return None;
        }
        let mut buckets = Vec::with_capacity(self.buckets.len());
        for (&(le, n), &(le0, n0)) in self.buckets.iter().zip(&earlier.buckets) {
            if le != le0 || n < n0 {
                return None;
            }
            buckets.push((le, n - n0));
        }
        Some(Histogram {
            buckets,
            sum: self.sum - earlier.sum,
            count: self.count - earlier.count,
        })
    }

    /// The mean observation (`sum / count`).
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }

    /// The `q` quantile (0-1) as Prometheus' `histogram_quantile` computes it: the
    /// bucket holding rank `q * count` is found and the value interpolated linearly
    /// between its bounds (the first bucket's lower bound is 0 when its upper bound
    /// is positive); a rank in the `+Inf` bucket gives the highest finite bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last()?.1;
        if total.is_nan() || total <= 0.0 || !(0.0..=1.0).contains(&q) {
            return None;
        }
        let rank = q * total;
        let mut lower = 0.0_f64;
        let mut below = 0.0_f64;
        for (i, &(le, n)) in self.buckets.iter().enumerate() {
            if n >= rank && n > below {
                if le.is_infinite() {
                    return Some(if i == 0 { 0.0 } else { lower });
                }
                if i == 0 && le <= 0.0 {
                    return Some(le);
                }
                return Some(lower + (le - lower) * (rank - below) / (n - below));
            }
            lower = le;
            below = n;
        }
        None
    }
}

/// Bucket bounds in JSON: finite ones as numbers, `+Inf` as the string Prometheus
/// writes.
mod bounds {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Le {
        Finite(f64),
        Text(String),
    }

    pub fn serialize<S: Serializer>(buckets: &[(f64, f64)], s: S) -> Result<S::Ok, S::Error> {
        let v: Vec<(Le, f64)> = buckets
            .iter()
            .map(|&(le, n)| {
                let le = if le.is_finite() {
                    Le::Finite(le)
                } else {
                    Le::Text(if le > 0.0 { "+Inf" } else { "-Inf" }.into())
                };
                (le, n)
            })
            .collect();
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(f64, f64)>, D::Error> {
        let v: Vec<(Le, f64)> = Vec::deserialize(d)?;
        v.into_iter()
            .map(|(le, n)| match le {
                Le::Finite(x) => Ok((x, n)),
                Le::Text(t) => tokenscope_measure::prometheus::parse_value(&t)
                    .map(|x| (x, n))
                    .ok_or_else(|| serde::de::Error::custom(format!("bad bucket bound {t:?}"))),
            })
            .collect()
    }
}

/// A series' value in one scrape: a number (gauges, counters) or a histogram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// A gauge or a counter, label sets combined.
    Scalar(f64),
    /// A histogram, label sets added bucket by bucket.
    Histogram(Histogram),
}

/// One scrape, read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reading {
    /// Whose names it carries.
    pub engine: Option<Engine>,
    /// The series found.
    pub values: BTreeMap<Series, Value>,
}

impl Reading {
    /// Reads `scrape` by the names of the engine it comes from.
    pub fn of(scrape: &Scrape) -> Reading {
        let Some(engine) = Engine::detect(scrape) else {
            return Reading::default();
        };
        let mut values = BTreeMap::new();
        for source in engine.sources() {
            if values.contains_key(&source.series) {
                continue;
            }
            // A counter's family is `x_total` in the 0.0.4 text format and `x` in
            // OpenMetrics (its samples `x_total` in both).
            let family = scrape.family(source.metric).or_else(|| {
                source
                    .metric
                    .strip_suffix("_total")
                    .and_then(|m| scrape.family(m))
            });
            let Some(family) = family else {
                continue;
            };
            if let Some(v) = read(family, source) {
                values.insert(source.series, v);
            }
        }
        Reading {
            engine: Some(engine),
            values,
        }
    }

    /// A gauge's or counter's value.
    pub fn scalar(&self, series: Series) -> Option<f64> {
        match self.values.get(&series)? {
            Value::Scalar(v) => Some(*v),
            Value::Histogram(_) => None,
        }
    }

    /// A histogram.
    pub fn histogram(&self, series: Series) -> Option<&Histogram> {
        match self.values.get(&series)? {
            Value::Histogram(h) => Some(h),
            Value::Scalar(_) => None,
        }
    }
}

fn selected<'a>(family: &'a Family, source: &'a Source) -> impl Iterator<Item = &'a Sample> {
    family.samples.iter().filter(move |s| {
        source
            .select
            .is_none_or(|(label, value)| s.label(label) == Some(value))
    })
}

fn read(family: &Family, source: &Source) -> Option<Value> {
    match source.series.kind() {
        MetricKind::Histogram => histogram(family, source).map(Value::Histogram),
        _ => {
            // The family's own samples (`x`, or `x_total` under `# TYPE x counter`).
            let total = format!("{}_total", family.name);
            let values: Vec<f64> = selected(family, source)
                .filter(|s| s.name == family.name || s.name == total)
                .map(|s| s.value * source.scale)
                .filter(|v| v.is_finite())
                .collect();
            if values.is_empty() {
                return None;
            }
            let sum: f64 = values.iter().sum();
            Some(Value::Scalar(match source.series.combine() {
                Combine::Sum => sum,
                Combine::Mean => sum / values.len() as f64,
            }))
        }
    }
}

fn histogram(family: &Family, source: &Source) -> Option<Histogram> {
    let (bucket, sum_name, count_name) = (
        format!("{}_bucket", family.name),
        format!("{}_sum", family.name),
        format!("{}_count", family.name),
    );
    let mut raw: Vec<(f64, f64)> = Vec::new();
    let (mut sum, mut count) = (0.0, 0.0);
    for s in selected(family, source) {
        if s.name == bucket {
            let le = s.label("le").and_then(|v| v.parse::<f64>().ok())?;
            raw.push((le * source.scale, s.value));
        } else if s.name == sum_name {
            sum += s.value * source.scale;
        } else if s.name == count_name {
            count += s.value;
        }
    }
    // Label sets added bucket by bucket: sorted by bound (`total_cmp`: a NaN bound
    // sorts after +Inf and so fails the last-bucket check), equal bounds summed.
    raw.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut buckets: Vec<(f64, f64)> = Vec::with_capacity(raw.len());
    for (le, n) in raw {
        match buckets.last_mut() {
            Some(last) if last.0 == le => last.1 += n,
            _ => buckets.push((le, n)),
        }
    }
    if buckets.last().is_none_or(|b| b.0 != f64::INFINITY) {
        return None;
    }
    Some(Histogram {
        buckets,
        sum,
        count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(buckets: &[(f64, f64)], sum: f64) -> Histogram {
        Histogram {
            buckets: buckets.to_vec(),
            sum,
            count: buckets.last().unwrap().1,
        }
    }

    #[test]
    fn quantiles_interpolate_within_the_bucket() {
        // 10 observations: 2 in (0, 0.1], 6 in (0.1, 0.5], 2 in (0.5, 1].
        let x = h(
            &[(0.1, 2.0), (0.5, 8.0), (1.0, 10.0), (f64::INFINITY, 10.0)],
            4.0,
        );
        // p50: rank 5 is 3 of the 6 in (0.1, 0.5]: 0.1 + 0.4 * 3/6.
        assert!((x.quantile(0.5).unwrap() - 0.3).abs() < 1e-12);
        // p10: rank 1 of 2 in (0, 0.1].
        assert!((x.quantile(0.1).unwrap() - 0.05).abs() < 1e-12);
        assert!((x.quantile(0.95).unwrap() - 0.875).abs() < 1e-12);
        assert_eq!(x.quantile(1.0), Some(1.0));
        assert_eq!(x.mean(), Some(0.4));
        // A rank in +Inf: the highest finite bound.
        let tail = h(&[(0.1, 1.0), (f64::INFINITY, 4.0)], 9.0);
        assert_eq!(tail.quantile(0.9), Some(0.1));
        assert_eq!(h(&[(f64::INFINITY, 0.0)], 0.0).quantile(0.5), None);
    }

    #[test]
    fn a_level_is_the_difference_of_two_scrapes() {
        let a = h(&[(0.1, 2.0), (1.0, 5.0), (f64::INFINITY, 5.0)], 2.0);
        let b = h(&[(0.1, 2.0), (1.0, 9.0), (f64::INFINITY, 10.0)], 6.5);
        let d = b.since(&a).unwrap();
        assert_eq!(d.buckets, [(0.1, 0.0), (1.0, 4.0), (f64::INFINITY, 5.0)]);
        assert_eq!((d.sum, d.count), (4.5, 5.0));
        // A restart (counts went down) or other buckets: no delta.
        assert!(a.since(&b).is_none());
        let other = h(&[(0.2, 2.0), (1.0, 9.0), (f64::INFINITY, 10.0)], 6.5);
        assert!(other.since(&a).is_none());
    }

    #[test]
    fn label_sets_combine_and_a_selected_label_filters() {
        let s = Scrape::parse(
            "# TYPE vllm:num_requests_running gauge\n\
             vllm:num_requests_running{model_name=\"a\"} 2\n\
             vllm:num_requests_running{model_name=\"b\"} 3\n\
             # TYPE vllm:kv_cache_usage_perc gauge\n\
             vllm:kv_cache_usage_perc{engine=\"0\"} 0.2\n\
             vllm:kv_cache_usage_perc{engine=\"1\"} 0.6\n\
             # TYPE vllm:e2e_request_latency_seconds histogram\n\
             vllm:e2e_request_latency_seconds_bucket{model_name=\"a\",le=\"1.0\"} 1\n\
             vllm:e2e_request_latency_seconds_bucket{model_name=\"a\",le=\"+Inf\"} 2\n\
             vllm:e2e_request_latency_seconds_bucket{model_name=\"b\",le=\"+Inf\"} 1\n\
             vllm:e2e_request_latency_seconds_bucket{model_name=\"b\",le=\"1.0\"} 1\n\
             vllm:e2e_request_latency_seconds_sum{model_name=\"a\"} 3\n\
             vllm:e2e_request_latency_seconds_sum{model_name=\"b\"} 0.5\n\
             vllm:e2e_request_latency_seconds_count{model_name=\"a\"} 2\n\
             vllm:e2e_request_latency_seconds_count{model_name=\"b\"} 1\n",
        );
        let r = Reading::of(&s);
        assert_eq!(r.engine, Some(Engine::Vllm));
        assert_eq!(r.scalar(Series::RequestsRunning), Some(5.0));
        assert!((r.scalar(Series::KvCacheUsage).unwrap() - 0.4).abs() < 1e-12);
        let e2e = r.histogram(Series::E2eSeconds).unwrap();
        assert_eq!(e2e.buckets, [(1.0, 2.0), (f64::INFINITY, 3.0)]);
        assert_eq!((e2e.sum, e2e.count), (3.5, 3.0));
    }

    #[test]
    fn dcgm_percent_and_mib_in_the_series_units() {
        let s = Scrape::parse(
            "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n\
             DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 50\n\
             DCGM_FI_DEV_GPU_UTIL{gpu=\"1\"} 70\n\
             # TYPE DCGM_FI_DEV_FB_USED gauge\n\
             DCGM_FI_DEV_FB_USED{gpu=\"0\"} 1024\n\
             DCGM_FI_DEV_FB_USED{gpu=\"1\"} 512\n",
        );
        let r = Reading::of(&s);
        assert_eq!(r.engine, Some(Engine::DcgmExporter));
        // Utilisation: percent / 100, averaged over GPUs; memory: MiB summed, in bytes.
        assert!((r.scalar(Series::GpuUtilization).unwrap() - 0.6).abs() < 1e-12);
        assert_eq!(
            r.scalar(Series::GpuMemoryUsedBytes),
            Some(1536.0 * 1_048_576.0)
        );
    }
}
