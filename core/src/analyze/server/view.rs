//! The server view of a run: per level, the series summarised over the level,
//! the client's TTFT split into stages with the server's own histograms, and the
//! engine's token counters checked against the `usage` the client received; for
//! the run, the gauges over time (`docs/metrics.md`, "Server metrics").

use serde::{Deserialize, Serialize};

use super::engines::{Engine, Series};
use super::level::SeriesSummary;
use super::scrape::{ScrapeRecord, ScrapeTarget};

/// One level as the server (and the GPU exporter) saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerLevel {
    /// The engine recognised on the server's `/metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<Engine>,
    /// The GPU exporter recognised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_exporter: Option<Engine>,
    /// Scrapes taken in the level (both targets).
    pub scrapes: u32,
    /// Of those, the ones that read nothing.
    pub failed_scrapes: u32,
    /// Every series found, summarised over the level.
    pub series: Vec<SeriesSummary>,
    /// The client's TTFT split into stages, where the engine has the histograms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<StageSplit>,
    /// The engine's token counters against the client's `usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenCheck>,
    /// Speculative decoding over the level, where the engine counts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode: Option<SpecDecode>,
}

/// Speculative decoding over a level, from the engine's counters' increases
/// (vLLM's `spec_decode_num_drafts`, `_num_draft_tokens`, `_num_accepted_tokens`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecDecode {
    /// Drafts proposed (decode steps that speculated).
    pub drafts: f64,
    /// Draft tokens proposed.
    pub draft_tokens: f64,
    /// Of those, accepted by the target model.
    pub accepted_tokens: f64,
    /// `accepted_tokens / draft_tokens`.
    pub acceptance_rate: f64,
    /// Tokens a speculating step yields: `1 + accepted_tokens / drafts` (the
    /// target model's own token plus the accepted drafts; vLLM's "mean
    /// acceptance length").
    pub tokens_per_step: f64,
}

/// Where a level's time to first token went, as means (ms): what the client
/// measured, what the server measured (request received to first token handed
/// out), and the server's queue and prefill stages. Means, because a difference
/// of means is the mean of the differences, which no percentile is; the server's
/// means are exact (`Δsum / Δcount`), its percentiles interpolated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageSplit {
    /// The client's mean TTFT over its successful requests.
    pub client_ttft_ms: f64,
    /// Successful requests the client measured.
    pub client_requests: u64,
    /// The server's mean TTFT over the level.
    pub server_ttft_ms: f64,
    /// Requests the server's TTFT histogram counted in the level.
    pub server_requests: f64,
    /// `client_ttft_ms - server_ttft_ms`: the network, the HTTP layers on both
    /// sides and the client's own reading of the stream.
    pub network_and_client_ms: f64,
    /// Mean time queued before scheduling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_ms: Option<f64>,
    /// Mean prefill time (scheduled to first token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_ms: Option<f64>,
    /// Mean decode time (first token to last), after the first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_ms: Option<f64>,
    /// The browser's parse-to-paint delay (the page only): rendered TTFT minus TTFT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paint_ms: Option<f64>,
    /// The browser's own delivery delay (the page only, where the browser
    /// exposes Resource Timing): from its network stack having the response's
    /// first bytes to the page's script having them. It is inside
    /// `network_and_client_ms` for requests whose TTFT the page read itself, and
    /// inside `paint_ms` for those timed at the network stack (their first token
    /// came in the response's first bytes: the level's `ttft_at_network_stack`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_delivery_ms: Option<f64>,
    /// The browser's own send delay (the page only, where exposed): from the
    /// page's send to its network stack beginning the request; inside
    /// `network_and_client_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_send_ms: Option<f64>,
}

/// The engine's token counters over the level against the sums of the `usage`
/// the client received for the level's requests. They agree when nobody else
/// used the server and both count the same tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenCheck {
    /// The engine's generated-token counter's increase.
    pub server_generated: f64,
    /// The client's `usage.completion_tokens`, summed.
    pub client_completion: u64,
    /// The engine's prompt tokens (plus those served from its cache, where its
    /// prompt counter leaves them out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_prompt: Option<f64>,
    /// The client's `usage.prompt_tokens`, summed.
    pub client_prompt: u64,
    /// Requests whose `usage` never came (errors, timeouts, servers that omit it).
    pub requests_without_usage: u64,
    /// Every count present agrees exactly.
    pub agrees: bool,
}

impl ServerLevel {
    /// A series' summary, if the level has it.
    pub fn get(&self, series: Series) -> Option<&SeriesSummary> {
        self.series.iter().find(|s| s.series == series)
    }

    /// A gauge's `(mean, max)` over the level.
    pub fn gauge(&self, series: Series) -> Option<(f64, f64)> {
        let x = self.get(series)?;
        Some((x.mean?, x.max?))
    }

    /// A counter's increase over the level.
    pub fn increase(&self, series: Series) -> Option<f64> {
        self.get(series)?.increase
    }

    /// Speculative decoding from the counters, where the level drafted.
    pub(super) fn spec_decode(&self) -> Option<SpecDecode> {
        let drafts = self.increase(Series::SpecDecodeDrafts)?;
        let draft_tokens = self.increase(Series::SpecDecodeDraftTokens)?;
        let accepted_tokens = self.increase(Series::SpecDecodeAcceptedTokens)?;
        (drafts > 0.0 && draft_tokens > 0.0).then(|| SpecDecode {
            drafts,
            draft_tokens,
            accepted_tokens,
            acceptance_rate: accepted_tokens / draft_tokens,
            tokens_per_step: 1.0 + accepted_tokens / drafts,
        })
    }

    /// A histogram's level mean, in ms.
    pub fn mean_ms(&self, series: Series) -> Option<f64> {
        Some(self.get(series)?.histogram.as_ref()?.mean? * 1000.0)
    }

    /// The engine's prompt tokens over the level, those served from its cache
    /// included (added back where its prompt counter leaves them out).
    pub(super) fn prompt_tokens(&self) -> Option<f64> {
        let prompt = self.increase(Series::PromptTokens)?;
        Some(
            if self
                .engine
                .is_some_and(Engine::prompt_counter_excludes_cached)
            {
                prompt + self.increase(Series::CachedPromptTokens).unwrap_or(0.0)
            } else {
                prompt
            },
        )
    }

    /// The prefix cache's hits and lookups over the level, in tokens: from the
    /// engine's hit and query counters, else from its cached-prompt-token counter
    /// against all prompt tokens.
    pub fn prefix_hits(&self) -> Option<(f64, f64)> {
        if let (Some(h), Some(q)) = (
            self.increase(Series::PrefixCacheHits),
            self.increase(Series::PrefixCacheQueries),
        ) {
            return Some((h, q));
        }
        Some((
            self.increase(Series::CachedPromptTokens)?,
            self.prompt_tokens()?,
        ))
    }
}

/// The run's server side: what was scraped, how it went, and the gauges over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ServerRun {
    /// Per target: scrapes taken, failed, and the first failure.
    pub targets: Vec<TargetStatus>,
    /// One point per successful scrape, in time order.
    pub timeline: Vec<ServerPoint>,
}

/// How scraping one target went over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetStatus {
    /// Whose metrics.
    pub target: ScrapeTarget,
    /// The engine or exporter recognised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<Engine>,
    /// Scrapes taken.
    pub scrapes: u32,
    /// Scrapes that read nothing.
    pub failed: u32,
    /// The first failure's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Lines the parser skipped, over all scrapes.
    pub skipped_lines: u64,
}

/// The gauges at one scrape, and the generated-token rate since the previous one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerPoint {
    /// Seconds on the run's clock.
    pub t_s: f64,
    /// Whose metrics.
    pub target: ScrapeTarget,
    /// Requests running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<f64>,
    /// Requests waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<f64>,
    /// KV-cache usage, 0-1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_usage: Option<f64>,
    /// GPU utilisation, 0-1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_utilization: Option<f64>,
    /// Generated tokens per second since the target's previous scrape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_tokens_per_s: Option<f64>,
}

impl ServerRun {
    /// The run's view from all its scrapes, in the order taken.
    pub fn of(scrapes: &[ScrapeRecord]) -> ServerRun {
        let mut targets: Vec<TargetStatus> = Vec::new();
        let mut timeline = Vec::new();
        let mut last_tokens: Vec<(ScrapeTarget, f64, f64)> = Vec::new();
        for s in scrapes {
            let t = match targets.iter_mut().find(|t| t.target == s.target) {
                Some(t) => t,
                None => {
                    targets.push(TargetStatus {
                        target: s.target,
                        engine: None,
                        scrapes: 0,
                        failed: 0,
                        first_error: None,
                        skipped_lines: 0,
                    });
                    targets.last_mut().expect("just pushed")
                }
            };
            t.scrapes += 1;
            t.skipped_lines += u64::from(s.skipped_lines);
            if !s.ok() {
                t.failed += 1;
                if t.first_error.is_none() {
                    t.first_error = s.error.clone();
                }
                continue;
            }
            t.engine = t.engine.or(s.engine);
            let r = s.reading();
            let tokens = r.scalar(Series::GenerationTokens);
            let prev = last_tokens.iter_mut().find(|p| p.0 == s.target);
            let rate = match (&prev, tokens) {
                (Some((_, t0, n0)), Some(n)) if s.t_ms > *t0 && n >= *n0 => {
                    Some((n - n0) / ((s.t_ms - t0) / 1000.0))
                }
                _ => None,
            };
            if let Some(n) = tokens {
                match prev {
                    Some(p) => *p = (s.target, s.t_ms, n),
                    None => last_tokens.push((s.target, s.t_ms, n)),
                }
            }
            timeline.push(ServerPoint {
                t_s: s.t_ms / 1000.0,
                target: s.target,
                running: r.scalar(Series::RequestsRunning),
                waiting: r.scalar(Series::RequestsWaiting),
                kv_cache_usage: r.scalar(Series::KvCacheUsage),
                gpu_utilization: r.scalar(Series::GpuUtilization),
                generation_tokens_per_s: rate,
            });
        }
        ServerRun { targets, timeline }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(series: Series, increase: f64) -> SeriesSummary {
        SeriesSummary {
            series,
            mean: None,
            max: None,
            increase: Some(increase),
            rate_per_s: None,
            histogram: None,
        }
    }

    #[test]
    fn spec_decode_from_the_counters_increases() {
        let view = |series| ServerLevel {
            engine: Some(Engine::Vllm),
            gpu_exporter: None,
            scrapes: 3,
            failed_scrapes: 0,
            series,
            stages: None,
            tokens: None,
            spec_decode: None,
        };
        let v = view(vec![
            counter(Series::SpecDecodeDrafts, 100.0),
            counter(Series::SpecDecodeDraftTokens, 300.0),
            counter(Series::SpecDecodeAcceptedTokens, 195.0),
        ]);
        let s = v.spec_decode().unwrap();
        assert_eq!(s.acceptance_rate, 0.65);
        // 1 + 195 / 100: the target's own token and 1.95 accepted drafts a step.
        assert_eq!(s.tokens_per_step, 2.95);
        // No draft in the level, or a counter missing: nothing to say.
        assert!(
            view(vec![
                counter(Series::SpecDecodeDrafts, 0.0),
                counter(Series::SpecDecodeDraftTokens, 0.0),
                counter(Series::SpecDecodeAcceptedTokens, 0.0),
            ])
            .spec_decode()
            .is_none()
        );
        assert!(
            view(vec![counter(Series::SpecDecodeDrafts, 5.0)])
                .spec_decode()
                .is_none()
        );
    }
}
