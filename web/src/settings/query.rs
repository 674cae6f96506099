//! The URL query: the page's settings read from it (every parameter of the
//! automation contract, `docs/url.md`) and written back to it (a link that reruns
//! the settings). Never the API key, either way.

use tokenscope_core::analyze::slo::Slo;
use tokenscope_measure::openai::Api;
use tokenscope_sim::parse_faults;

use tokenscope_workload::conversation::Conversation;
use tokenscope_workload::tokens::InputLength;

use super::{
    MetricsSetting, NetMode, PaintFallback, PaintMode, ReasoningDisplay, Settings,
    TokenizerSetting, metrics_url, normalize_url, parse_concurrency, parse_duration_s,
};

/// Decode `application/x-www-form-urlencoded` text (`+` is a space, `%XX` a byte).
pub fn form_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Encode a query value (RFC 3986 unreserved characters and `,:/` stay as they are,
/// so shared links stay readable).
pub fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'-'
            | b'_'
            | b'.'
            | b'~'
            | b','
            | b':'
            | b'/' => out.push(b as char),
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl Settings {
    /// Read settings from a URL query (with or without the leading `?`). Returns the
    /// settings and a message for every parameter that was ignored.
    pub fn from_query(query: &str) -> (Settings, Vec<String>) {
        let mut s = Settings::default();
        let mut notes = Vec::new();
        let query = query.strip_prefix('?').unwrap_or(query);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let key = form_decode(k);
            let value = form_decode(v);
            if let Err(e) = s.set(&key, &value) {
                notes.push(e);
            }
        }
        (s, notes)
    }

    /// Set one parameter by its query name.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        fn num<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, String> {
            value
                .trim()
                .parse()
                .map_err(|_| format!("{key}={value:?} is not a valid number: ignored"))
        }
        fn flag(value: &str) -> bool {
            matches!(value.trim(), "1" | "true" | "yes" | "on" | "")
        }
        match key {
            "url" => self.url = normalize_url(value),
            "api" => {
                self.api = Api::parse(value.trim()).ok_or_else(|| {
                    format!("api={value:?}: expected chat, completions, responses or messages: ignored")
                })?
            }
            "model" => self.model = value.trim().to_owned(),
            "concurrency" | "c" => {
                parse_concurrency(value)?;
                self.concurrency = value.trim().to_owned();
            }
            "requests" | "n" if value.trim().is_empty() || value.trim() == "auto" => {
                self.requests = None
            }
            "requests" | "n" => {
                let n: u64 = num(key, value)?;
                if n == 0 {
                    return Err("requests=0: ignored (give at least 1)".into());
                }
                self.requests = Some(n);
            }
            "rounds" => {
                let n: u32 = num(key, value)?;
                self.rounds = n.max(1);
            }
            "warmup" if value.trim().is_empty() || value.trim() == "auto" => self.warmup = None,
            "warmup" => self.warmup = Some(num(key, value)?),
            "max_tokens" => {
                match tokenscope_measure::parse::parse_u32_list(value) {
                    Ok(v) if !v.contains(&0) => {}
                    _ => {
                        return Err(format!(
                            "max_tokens={value:?}: expected a number of tokens or tiers (128,256), each at least 1: ignored"
                        ));
                    }
                }
                self.max_tokens = value.trim().to_owned();
            }
            "input_tokens" => {
                InputLength::parse_list(value).map_err(|e| format!("input_tokens={e}: ignored"))?;
                self.input_tokens = value.trim().to_owned();
            }
            "ramp" if value.trim().is_empty() => self.ramp_s = None,
            "ramp" => {
                let s = parse_duration_s(value)
                    .filter(|s| *s > 0.0)
                    .ok_or_else(|| {
                        format!("ramp={value:?}: expected e.g. 30s or 500ms: ignored")
                    })?;
                self.ramp_s = Some(s);
            }
            "context_window" if value.trim().is_empty() => self.context_window = None,
            "context_window" => self.context_window = Some(num(key, value)?),
            "tokenizer" => {
                self.tokenizer = TokenizerSetting::parse(value).ok_or_else(|| {
                    format!(
                        "tokenizer={value:?}: expected auto, server or approx (the page counts with the server's /tokenize; a tokenizer.json is for bench --tokenizer): ignored"
                    )
                })?
            }
            "conversation" => {
                if !value.trim().is_empty() {
                    Conversation::parse(value)
                        .map_err(|e| format!("conversation: {e}: ignored"))?;
                }
                self.conversation = value.trim().to_owned();
            }
            "shared_prefix" if value.trim().is_empty() => self.shared_prefix = None,
            "shared_prefix" => {
                let n: u32 = num(key, value)?;
                if n == 0 {
                    return Err("shared_prefix=0: ignored (give at least 1)".into());
                }
                self.shared_prefix = Some(n);
            }
            "timeout" => {
                self.timeout_s = parse_duration_s(value).ok_or_else(|| {
                    format!("timeout={value:?}: expected e.g. 60s or 500ms: ignored")
                })?
            }
            "slo" => {
                Slo::parse_list(value).map_err(|e| format!("{e}: ignored"))?;
                self.slo = value.trim().to_owned();
            }
            "ignore_eos" => self.ignore_eos = flag(value),
            "continuous_usage" => self.continuous_usage = flag(value),
            "stall_ms" => self.stall_threshold_ms = num(key, value)?,
            "seed" => self.seed = num(key, value)?,
            "paint" => {
                self.paint = match value.trim() {
                    "auto" | "element" | "element_timing" => PaintMode::Auto,
                    "raf" | "request_animation_frame" => PaintMode::Raf,
                    _ => return Err(format!("paint={value:?}: expected auto or raf: ignored")),
                }
            }
            "paint_fallback" => {
                self.paint_fallback = PaintFallback::parse(value).ok_or_else(|| {
                    format!(
                        "paint_fallback={value:?}: expected raf, raf_task or double_raf: ignored"
                    )
                })?
            }
            "net" => {
                self.net = match value.trim() {
                    "worker" => NetMode::Worker,
                    "main" => NetMode::Main,
                    _ => return Err(format!("net={value:?}: expected worker or main: ignored")),
                }
            }
            "request_ids" => self.request_ids = flag(value),
            "metrics" => {
                self.metrics =
                    MetricsSetting::parse(value).map_err(|e| format!("metrics={e}: ignored"))?
            }
            "price" if value.trim().is_empty() => self.price.clear(),
            "price" => {
                tokenscope_core::model::cost::Price::parse(value)
                    .map_err(|e| format!("price={value:?}: {e}: ignored"))?;
                self.price = value.trim().to_owned();
            }
            "gpu_metrics" if value.trim().is_empty() => self.gpu_metrics.clear(),
            "gpu_metrics" => {
                self.gpu_metrics =
                    metrics_url(value).map_err(|e| format!("gpu_metrics={e}: ignored"))?
            }
            "scrape_interval" => {
                let s = parse_duration_s(value).ok_or_else(|| {
                    format!("scrape_interval={value:?}: expected e.g. 1s or 500ms: ignored")
                })?;
                if s < super::MIN_SCRAPE_INTERVAL_S {
                    return Err(format!(
                        "scrape_interval={value:?}: at least {} s: ignored",
                        super::MIN_SCRAPE_INTERVAL_S
                    ));
                }
                self.scrape_interval_s = s;
            }
            "prompts" => self.prompts = value.trim().to_owned(),
            "sample" if value.trim().is_empty() => self.prompts_sample = None,
            "sample" => {
                let n: u64 = num(key, value)?;
                if n == 0 {
                    return Err("sample=0: ignored (give at least 1)".into());
                }
                self.prompts_sample = Some(n);
            }
            "reasoning" => {
                self.reasoning = match value.trim() {
                    "shown" | "show" => ReasoningDisplay::Shown,
                    "hidden" | "hide" => ReasoningDisplay::Hidden,
                    _ => {
                        return Err(format!(
                            "reasoning={value:?}: expected shown or hidden: ignored"
                        ));
                    }
                }
            }
            "rate" => {
                if !value.trim().is_empty() {
                    tokenscope_measure::parse::parse_f64_list(value)
                        .map_err(|e| format!("rate: {e}: ignored"))?;
                }
                self.rate = value.trim().to_owned();
            }
            "arrival" => {
                tokenscope_workload::load::parse_arrival(value)
                    .map_err(|e| format!("arrival: {e}: ignored"))?;
                self.arrival = value.trim().to_owned();
            }
            "trace" => self.trace = value.trim().to_owned(),
            "trace_speed" => self.trace_speed = num(key, value)?,
            "trace_token_scale" => self.trace_token_scale = num(key, value)?,
            "autorun" => self.autorun = flag(value),
            // The view and the GPU view's settings: read by `GpuSettings`.
            "view" | "preset" | "timestamps" | "tune" => {}
            "sim_ttft_ms" => self.sim.ttft_ms = num(key, value)?,
            "sim_itl_ms" => self.sim.itl_ms = num(key, value)?,
            "sim_prefill_tok_per_s" => self.sim.prefill_tok_per_s = num(key, value)?,
            "sim_max_batch" => self.sim.max_batch = num(key, value)?,
            "sim_step_growth" => self.sim.step_growth = num(key, value)?,
            "sim_jitter_ms" => self.sim.jitter_ms = num(key, value)?,
            "sim_tokens_per_chunk" => self.sim.tokens_per_chunk = num(key, value)?,
            "sim_error_rate" => self.sim.error_rate = num(key, value)?,
            "sim_faults" => {
                parse_faults(value).map_err(|e| format!("sim_faults: {e}: ignored"))?;
                self.sim_faults = value.trim().to_owned();
            }
            "sim_stall_ms" => self.sim.stall_ms = num(key, value)?,
            "sim_reasoning_tokens" => self.sim.reasoning_tokens = num(key, value)?,
            "key" | "api_key" | "apikey" | "token" => {
                return Err(format!(
                    "{key}= in the URL is ignored: the API key is never read from (or written to) the URL; type it in the form"
                ));
            }
            other => return Err(format!("unknown setting {other:?}: ignored")),
        }
        Ok(())
    }

    /// The query string for these settings (a link that reruns them), without
    /// `autorun` and never with a key. Defaults are left out.
    pub fn to_query(&self) -> String {
        let d = Settings::default();
        let mut parts: Vec<(String, String)> = Vec::new();
        let mut put = |k: &str, v: String| parts.push((k.to_owned(), v));
        if !self.url.is_empty() {
            put("url", self.url.clone());
        }
        if self.api != d.api {
            put("api", self.api.as_str().into());
        }
        if !self.model.is_empty() {
            put("model", self.model.clone());
        }
        put("concurrency", self.concurrency.clone());
        if let Some(n) = self.requests {
            put("requests", n.to_string());
        }
        if self.rounds != d.rounds {
            put("rounds", self.rounds.to_string());
        }
        if let Some(w) = self.warmup {
            put("warmup", w.to_string());
        }
        put("max_tokens", self.max_tokens.clone());
        put("input_tokens", self.input_tokens.clone());
        if let Some(r) = self.ramp_s {
            put("ramp", format!("{r}s"));
        }
        if let Some(n) = self.context_window {
            put("context_window", n.to_string());
        }
        if self.tokenizer != d.tokenizer {
            put("tokenizer", self.tokenizer.as_str().into());
        }
        if !self.conversation.is_empty() {
            put("conversation", self.conversation.clone());
        }
        if let Some(n) = self.shared_prefix {
            put("shared_prefix", n.to_string());
        }
        if self.timeout_s != d.timeout_s {
            put("timeout", format!("{}s", self.timeout_s));
        }
        if !self.slo.is_empty() {
            put("slo", self.slo.clone());
        }
        if self.ignore_eos {
            put("ignore_eos", "1".into());
        }
        if self.continuous_usage {
            put("continuous_usage", "1".into());
        }
        if self.stall_threshold_ms != d.stall_threshold_ms {
            put("stall_ms", self.stall_threshold_ms.to_string());
        }
        if self.seed != d.seed {
            put("seed", self.seed.to_string());
        }
        if self.paint != d.paint {
            put("paint", self.paint.as_str().into());
        }
        if self.paint_fallback != d.paint_fallback {
            put("paint_fallback", self.paint_fallback.as_str().into());
        }
        if self.net != d.net {
            put("net", self.net.as_str().into());
        }
        if !self.request_ids {
            put("request_ids", "0".into());
        }
        if self.metrics != d.metrics {
            put("metrics", self.metrics.as_query());
        }
        if !self.gpu_metrics.is_empty() {
            put("gpu_metrics", self.gpu_metrics.clone());
        }
        if !self.price.is_empty() {
            put("price", self.price.clone());
        }
        if self.scrape_interval_s != d.scrape_interval_s {
            put("scrape_interval", format!("{}s", self.scrape_interval_s));
        }
        if !self.prompts.is_empty() {
            put("prompts", self.prompts.clone());
        }
        if let Some(n) = self.prompts_sample {
            put("sample", n.to_string());
        }
        if self.reasoning != d.reasoning {
            put("reasoning", "hidden".into());
        }
        if !self.rate.is_empty() {
            put("rate", self.rate.clone());
        }
        if self.arrival != d.arrival {
            put("arrival", self.arrival.clone());
        }
        if !self.trace.is_empty() {
            put("trace", self.trace.clone());
        }
        if self.trace_speed != d.trace_speed {
            put("trace_speed", self.trace_speed.to_string());
        }
        if self.trace_token_scale != d.trace_token_scale {
            put("trace_token_scale", self.trace_token_scale.to_string());
        }
        if self.url.is_empty() && (self.sim != d.sim || self.sim_faults != d.sim_faults) {
            let (s, ds) = (&self.sim, &d.sim);
            let nums = [
                ("sim_ttft_ms", s.ttft_ms, ds.ttft_ms),
                ("sim_itl_ms", s.itl_ms, ds.itl_ms),
                (
                    "sim_prefill_tok_per_s",
                    s.prefill_tok_per_s,
                    ds.prefill_tok_per_s,
                ),
                (
                    "sim_max_batch",
                    f64::from(s.max_batch),
                    f64::from(ds.max_batch),
                ),
                ("sim_step_growth", s.step_growth, ds.step_growth),
                ("sim_jitter_ms", s.jitter_ms, ds.jitter_ms),
                (
                    "sim_tokens_per_chunk",
                    f64::from(s.tokens_per_chunk),
                    f64::from(ds.tokens_per_chunk),
                ),
                ("sim_error_rate", s.error_rate, ds.error_rate),
                ("sim_stall_ms", s.stall_ms, ds.stall_ms),
                (
                    "sim_reasoning_tokens",
                    f64::from(s.reasoning_tokens),
                    f64::from(ds.reasoning_tokens),
                ),
            ];
            for (k, v, dv) in nums {
                if v != dv {
                    put(k, v.to_string());
                }
            }
            if self.sim_faults != d.sim_faults {
                put("sim_faults", self.sim_faults.clone());
            }
        }
        parts
            .iter()
            .map(|(k, v)| format!("{k}={}", form_encode(v)))
            .collect::<Vec<_>>()
            .join("&")
    }
}
