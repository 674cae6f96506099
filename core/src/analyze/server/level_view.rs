//! A level's server view from the scrapes taken within it and the client's own
//! level report: the series summarised over the level, the client's TTFT split
//! into stages with the server's own histograms, and the engine's token counters
//! checked against the `usage` the client received.

use super::engines::Series;
use super::level::{SeriesSummary, TimedReading, summarize};
use super::scrape::{ScrapeRecord, ScrapeTarget};
use super::view::{ServerLevel, StageSplit, TokenCheck};
use crate::model::LevelReport;

impl ServerLevel {
    /// The level's view from the scrapes taken within it (in order, the first at
    /// its start, the last at its end) and the client's own level report.
    pub fn of(scrapes: &[ScrapeRecord], level: &LevelReport) -> ServerLevel {
        let timed = |target| -> Vec<TimedReading> {
            scrapes
                .iter()
                .filter(|s| s.target == target && s.ok())
                .map(|s| TimedReading {
                    t_ms: s.t_ms,
                    reading: s.reading(),
                })
                .collect()
        };
        let server = timed(ScrapeTarget::Server);
        let gpu = timed(ScrapeTarget::Gpu);
        let mut series = summarize(&server);
        // The GPU's series come from its exporter; the server's own (if any) win.
        let gpu_only: Vec<SeriesSummary> = summarize(&gpu)
            .into_iter()
            .filter(|g| series.iter().all(|s| s.series != g.series))
            .collect();
        series.extend(gpu_only);
        series.sort_by_key(|s| s.series);
        let mut view = ServerLevel {
            engine: server.iter().find_map(|r| r.reading.engine),
            gpu_exporter: gpu.iter().find_map(|r| r.reading.engine),
            scrapes: scrapes.len() as u32,
            failed_scrapes: scrapes.iter().filter(|s| !s.ok()).count() as u32,
            series,
            stages: None,
            tokens: None,
            spec_decode: None,
        };
        view.stages = view.stages(level);
        view.tokens = view.token_check(level);
        view.spec_decode = view.spec_decode();
        view
    }

    fn stages(&self, level: &LevelReport) -> Option<StageSplit> {
        let server = self.get(Series::TtftSeconds)?.histogram.as_ref()?;
        let server_ttft_ms = server.mean? * 1000.0;
        let client_ttft_ms = level.metrics.ttft_ms.mean?;
        let paint_ms = level
            .metrics
            .rendered_ttft_ms
            .as_ref()
            .and_then(|r| r.mean)
            .map(|r| r - client_ttft_ms);
        Some(StageSplit {
            client_ttft_ms,
            client_requests: level.metrics.ttft_ms.count,
            server_ttft_ms,
            server_requests: server.count,
            network_and_client_ms: client_ttft_ms - server_ttft_ms,
            queue_ms: self.mean_ms(Series::QueueSeconds),
            prefill_ms: self.mean_ms(Series::PrefillSeconds),
            decode_ms: self.mean_ms(Series::DecodeSeconds),
            paint_ms,
            browser_delivery_ms: level
                .metrics
                .browser_delivery_ms
                .as_ref()
                .and_then(|d| d.mean),
            browser_send_ms: level.metrics.browser_send_ms.as_ref().and_then(|d| d.mean),
        })
    }

    fn token_check(&self, level: &LevelReport) -> Option<TokenCheck> {
        self.engine?;
        let server_generated = self.increase(Series::GenerationTokens)?;
        let server_prompt = self.prompt_tokens();
        let same = |server: f64, client: u64| (server - client as f64).abs() < 0.5;
        let agrees = level.requests_without_usage == 0
            && same(server_generated, level.usage_completion_tokens)
            && server_prompt.is_none_or(|p| same(p, level.usage_prompt_tokens));
        Some(TokenCheck {
            server_generated,
            client_completion: level.usage_completion_tokens,
            server_prompt,
            client_prompt: level.usage_prompt_tokens,
            requests_without_usage: level.requests_without_usage,
            agrees,
        })
    }
}
