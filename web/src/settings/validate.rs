//! The settings checked and made into a [`RunPlan`] ([`Settings::validate`]):
//! every error names the setting, as the form and the URL call it.

use tokenscope_core::analyze::slo::Slo;
use tokenscope_core::report::Load;
use tokenscope_measure::parse::{BaseUrl, parse_base_url};
use tokenscope_sim::{SimConfig, parse_faults};
use tokenscope_workload::conversation::Conversation;
use tokenscope_workload::tokens::{InputLength, Tier};

use super::choices::{MetricsSetting, metrics_url};
use super::plan::{OpenLoop, PromptsPlan, RunPlan, ScrapePlan, ServerMetricsTarget};
use super::{MIN_SCRAPE_INTERVAL_S, Settings, parse_concurrency};

/// A file's URL as typed: a path on the page's own site, or an `http(s)` URL
/// without credentials. `what` names the field in the error.
fn site_or_http_url(url: &str, what: &str) -> Result<String, String> {
    let url = url.trim();
    if url.contains("://") {
        metrics_url(url).map_err(|e| format!("{what} {e}"))?;
    } else if url.contains(':') {
        return Err(format!(
            "{what} {:?}: expected a path on this site or an http(s) URL",
            tokenscope_measure::parse::redact_url(url)
        ));
    }
    Ok(url.to_owned())
}

impl Settings {
    /// Whether the run uses the built-in simulated endpoint.
    pub fn is_simulated(&self) -> bool {
        self.url.trim().is_empty()
    }

    /// The simulator's configuration.
    fn sim_config(&self) -> Result<SimConfig, String> {
        let cfg = SimConfig {
            faults: parse_faults(&self.sim_faults).map_err(|e| format!("sim_faults: {e}"))?,
            seed: self.seed,
            ..self.sim.clone()
        };
        cfg.validate().map_err(|e| format!("sim_{e}"))?;
        Ok(cfg)
    }

    /// The levels and how they load: concurrencies, rates, or a trace.
    fn loads(&self) -> Result<(Vec<Load>, Option<OpenLoop>), String> {
        if !self.trace.trim().is_empty() {
            let url = site_or_http_url(&self.trace, "trace file URL")?;
            for (name, v) in [
                ("trace_speed", self.trace_speed),
                ("trace_token_scale", self.trace_token_scale),
            ] {
                if !(v.is_finite() && v > 0.0) {
                    return Err(format!("{name}: {v} must be more than 0"));
                }
            }
            // The level's rate is the trace's, known once it is read.
            return Ok((
                vec![Load::Rate(1.0)],
                Some(OpenLoop::Trace {
                    url,
                    speed: self.trace_speed,
                    token_scale: self.trace_token_scale,
                }),
            ));
        }
        if !self.rate.trim().is_empty() {
            let rates = tokenscope_measure::parse::parse_f64_list(&self.rate)
                .map_err(|e| format!("rate: {e}"))?;
            let (arrival, cv) = tokenscope_workload::load::parse_arrival(&self.arrival)
                .map_err(|e| format!("arrival: {e}"))?;
            return Ok((
                rates.into_iter().map(Load::Rate).collect(),
                Some(OpenLoop::Rate { arrival, cv }),
            ));
        }
        let levels = parse_concurrency(&self.concurrency)?;
        Ok((levels.into_iter().map(Load::Concurrency).collect(), None))
    }

    /// Check everything and build the plan.
    pub fn validate(&self) -> Result<RunPlan, String> {
        let (loads, open_loop) = self.loads()?;
        let slos = Slo::parse_list(&self.slo).map_err(|e| e.to_string())?;
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            return Err("timeout: must be more than 0 seconds".into());
        }
        if !(self.stall_threshold_ms.is_finite() && self.stall_threshold_ms > 0.0) {
            return Err("stall threshold: must be more than 0 ms".into());
        }
        let base = if self.is_simulated() {
            None
        } else {
            let b = parse_base_url(&self.url).map_err(|e| format!("endpoint URL {e}"))?;
            if b.has_credentials {
                return Err(
                    "endpoint URL: credentials in the URL are not allowed; use the API key field"
                        .into(),
                );
            }
            Some(b)
        };
        let base_origin = base.as_ref().map(BaseUrl::origin);
        let conversation = self.conversation_plan(open_loop.is_some())?;
        let tiers = self.tiers(open_loop.as_ref())?;
        Ok(RunPlan {
            base,
            api: self.api,
            model: Some(self.model.trim().to_owned()).filter(|m| !m.is_empty()),
            loads,
            requests: self.requests,
            rounds: self.rounds.max(1),
            warmup: self.warmup,
            max_tokens: tiers[0].max_tokens,
            input_tokens: tiers[0].input.tokens().unwrap_or(1),
            ignore_eos: self.ignore_eos,
            continuous_usage: self.continuous_usage,
            timeout_ms: self.timeout_s * 1000.0,
            slos,
            stall_threshold_ms: self.stall_threshold_ms,
            seed: self.seed,
            paint: self.paint,
            paint_fallback: self.paint_fallback,
            net: self.net,
            request_ids: self.request_ids,
            sim: self.sim_config()?,
            scrape: self.scrape_plan(base_origin.as_deref())?,
            price: match self.price.trim() {
                "" => None,
                p => Some(
                    tokenscope_core::model::cost::Price::parse(p)
                        .map_err(|e| format!("price: {e}"))?,
                ),
            },
            prompts: self.prompts_plan()?,
            reasoning: self.reasoning,
            open_loop,
            tokenizer: self.tokenizer,
            conversation,
            shared_prefix: self.shared_prefix,
            input_of_context: match tiers[0].input {
                InputLength::OfContext(f) => Some(f),
                InputLength::Tokens(_) => None,
            },
            context_window: self.context_window,
            ramp_ms: self.ramp_s.map(|s| s * 1000.0),
            tiers,
        })
    }

    /// The input and output tiers (`input_tokens`, `max_tokens` lists), as
    /// `bench` makes them; several with a trace (whose requests carry their own
    /// lengths) is an error.
    fn tiers(&self, open_loop: Option<&OpenLoop>) -> Result<Vec<Tier>, String> {
        let inputs = InputLength::parse_list(&self.input_tokens)
            .map_err(|e| format!("input_tokens: {e}"))?;
        let outputs = tokenscope_measure::parse::parse_u32_list(&self.max_tokens)
            .map_err(|e| format!("max_tokens: {e}"))?;
        if outputs.contains(&0) {
            return Err("max_tokens: 0 must be at least 1".into());
        }
        if inputs.len() > 1
            && !self.prompts.trim().is_empty()
            && let Some(f) = inputs.iter().find(|i| i.tokens().is_none())
        {
            return Err(format!(
                "input_tokens: {} with a prompts file: the tiers that pick the file's prompts are numbers of tokens",
                f.label()
            ));
        }
        let tiers = Tier::grid(&inputs, &outputs);
        if tiers.len() > 1 && matches!(open_loop, Some(OpenLoop::Trace { .. })) {
            return Err("trace: a trace gives every request its own lengths; one input_tokens and one max_tokens at most".into());
        }
        Ok(tiers)
    }

    /// Conversations, when asked: chat, closed loop (as `bench --conversation`).
    fn conversation_plan(&self, open_loop: bool) -> Result<Option<Conversation>, String> {
        if self.conversation.trim().is_empty() {
            return Ok(None);
        }
        let c =
            Conversation::parse(&self.conversation).map_err(|e| format!("conversation: {e}"))?;
        if !self.api.takes_messages() {
            return Err("conversation: a conversation's history is a list of messages: use the chat, responses or messages API".into());
        }
        if open_loop {
            return Err("conversation: sessions are the concurrency unit (closed loop): clear the rates and the trace".into());
        }
        Ok(Some(c))
    }

    /// The prompts file, when one is set: a relative URL or an `http(s)` one
    /// without credentials.
    fn prompts_plan(&self) -> Result<Option<PromptsPlan>, String> {
        if self.prompts.trim().is_empty() {
            return Ok(None);
        }
        let url = site_or_http_url(&self.prompts, "prompts file URL")?;
        if self.prompts_sample == Some(0) {
            return Err("sample: 0 prompts; give at least 1".into());
        }
        Ok(Some(PromptsPlan {
            url,
            sample: self.prompts_sample,
        }))
    }

    /// What to scrape: the endpoint's origin + `/metrics` by default (the
    /// simulator's own exposition with no endpoint).
    fn scrape_plan(&self, origin: Option<&str>) -> Result<ScrapePlan, String> {
        if !(self.scrape_interval_s.is_finite() && self.scrape_interval_s >= MIN_SCRAPE_INTERVAL_S)
        {
            return Err(format!(
                "scrape interval: at least {MIN_SCRAPE_INTERVAL_S} s"
            ));
        }
        let server = match (&self.metrics, origin) {
            (MetricsSetting::Off, _) => ServerMetricsTarget::Off,
            (MetricsSetting::Url(u), _) => {
                ServerMetricsTarget::Url(metrics_url(u).map_err(|e| format!("metrics URL {e}"))?)
            }
            (MetricsSetting::Auto, None) => ServerMetricsTarget::Simulator,
            (MetricsSetting::Auto, Some(o)) => ServerMetricsTarget::Auto(format!("{o}/metrics")),
        };
        let gpu = match self.gpu_metrics.trim() {
            "" => None,
            u => Some(metrics_url(u).map_err(|e| format!("GPU metrics URL {e}"))?),
        };
        Ok(ScrapePlan {
            server,
            gpu,
            interval_ms: self.scrape_interval_s * 1000.0,
        })
    }
}
