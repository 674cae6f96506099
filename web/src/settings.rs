//! The page's settings: read from the URL query (the automation contract, see
//! `docs/web.md`), edited in the form, validated into a [`RunPlan`].
//!
//! Pure Rust (no browser API), so it is unit-tested natively. The API key is never
//! part of the settings: it is held by the page in memory only, and a `key` or
//! `api_key` in the URL is ignored with a warning.

use tokenscope_core::metrics::DEFAULT_STALL_THRESHOLD_MS;
use tokenscope_core::openai::Api;
use tokenscope_core::report::{Load, RunConfig};
use tokenscope_core::sim::{FaultKind, SimConfig};
use tokenscope_core::slo::Slo;

/// Prompt-length tiers offered in the form (any value works from the URL).
pub const INPUT_TIERS: [(u32, &str); 6] = [
    (16, "16 tokens (chat turn)"),
    (64, "64 tokens"),
    (256, "256 tokens (short prompt)"),
    (1024, "1024 tokens (document)"),
    (4096, "4096 tokens (long context)"),
    (16384, "16384 tokens (very long)"),
];

/// Most concurrent streams the page accepts per level.
pub const MAX_CONCURRENCY: u32 = 256;

/// How the first paint is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PaintMode {
    /// Element Timing where the browser has it, else the animation-frame fallback.
    #[default]
    Auto,
    /// Always the animation-frame fallback (to compare the two on one browser).
    Raf,
}

impl PaintMode {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            PaintMode::Auto => "auto",
            PaintMode::Raf => "raf",
        }
    }
}

/// Where the page streams real endpoints from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NetMode {
    /// `fetch` in a dedicated worker: reads stamped off the main thread (default).
    #[default]
    Worker,
    /// `fetch` on the main thread (to compare; the page's own frames then delay
    /// the stamps of concurrent streams).
    Main,
}

impl NetMode {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            NetMode::Worker => "worker",
            NetMode::Main => "main",
        }
    }
}

/// How the animation-frame fallback reads the paint time (diagnostic setting
/// `paint_fallback`; the default was chosen by comparing each with Element Timing
/// in Chromium, see `docs/web.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PaintFallback {
    /// `performance.now()` inside the first rAF callback after the update (before
    /// that frame's rendering: a lower bound).
    Raf,
    /// `performance.now()` in a task posted from that rAF callback: after the
    /// frame's style, layout and paint.
    #[default]
    RafTask,
    /// `performance.now()` inside the second rAF callback (a frame later: an upper bound).
    DoubleRaf,
}

impl PaintFallback {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            PaintFallback::Raf => "raf",
            PaintFallback::RafTask => "raf_task",
            PaintFallback::DoubleRaf => "double_raf",
        }
    }

    /// Parse a query value.
    pub fn parse(s: &str) -> Option<Self> {
        [
            PaintFallback::Raf,
            PaintFallback::RafTask,
            PaintFallback::DoubleRaf,
        ]
        .into_iter()
        .find(|f| f.as_str() == s.trim())
    }
}

/// The built-in simulator's parameters (same meaning and defaults as the flags of
/// `tokenscope mock`), set with `sim_*` query parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct SimParams {
    /// `sim_ttft_ms`: prefill overhead per admitting step.
    pub ttft_ms: f64,
    /// `sim_itl_ms`: decode step at batch 1.
    pub itl_ms: f64,
    /// `sim_prefill_tok_per_s`.
    pub prefill_tok_per_s: f64,
    /// `sim_max_batch`.
    pub max_batch: u32,
    /// `sim_step_growth`.
    pub step_growth: f64,
    /// `sim_jitter_ms`.
    pub jitter_ms: f64,
    /// `sim_tokens_per_chunk`.
    pub tokens_per_chunk: u32,
    /// `sim_error_rate`.
    pub error_rate: f64,
    /// `sim_faults` (comma-separated names).
    pub faults: String,
    /// `sim_stall_ms`.
    pub stall_ms: f64,
}

impl Default for SimParams {
    fn default() -> Self {
        let d = SimConfig::default();
        Self {
            ttft_ms: d.ttft_ms,
            itl_ms: d.itl_ms,
            prefill_tok_per_s: d.prefill_tok_per_s,
            max_batch: d.max_batch,
            step_growth: d.step_growth,
            jitter_ms: d.jitter_ms,
            tokens_per_chunk: d.tokens_per_chunk,
            error_rate: d.error_rate,
            faults: d
                .faults
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(","),
            stall_ms: 5000.0,
        }
    }
}

/// Everything the form edits (never the API key).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Base URL (`http://host:port/v1`); empty: the built-in simulated endpoint.
    pub url: String,
    /// Endpoint kind.
    pub api: Api,
    /// Model; empty: the first one `/v1/models` lists.
    pub model: String,
    /// Concurrency levels, as typed (`1,4,16`).
    pub concurrency: String,
    /// Measured requests per level; `None`: `max(10, 2 x concurrency)` per round.
    pub requests: Option<u64>,
    /// Rounds per level.
    pub rounds: u32,
    /// Warm-up requests per level; `None`: one per concurrency slot.
    pub warmup: Option<u32>,
    /// `max_tokens`.
    pub max_tokens: u32,
    /// Approximate prompt length, tokens.
    pub input_tokens: u32,
    /// Per-request timeout, seconds.
    pub timeout_s: f64,
    /// SLOs, as typed (`ttft_ms:p95<=500,...`).
    pub slo: String,
    /// Send `ignore_eos: true`.
    pub ignore_eos: bool,
    /// Stall threshold, ms.
    pub stall_threshold_ms: f64,
    /// Seed of the prompts (and of the simulator).
    pub seed: u64,
    /// How the first paint is measured.
    pub paint: PaintMode,
    /// How the fallback reads the paint time.
    pub paint_fallback: PaintFallback,
    /// Where real endpoints are streamed from.
    pub net: NetMode,
    /// Send an `x-request-id` header per request (turn off for endpoints whose CORS
    /// policy does not allow it).
    pub request_ids: bool,
    /// Start at once (`autorun=1`).
    pub autorun: bool,
    /// The simulator's parameters.
    pub sim: SimParams,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            url: String::new(),
            api: Api::Chat,
            model: String::new(),
            concurrency: "1,4,16".into(),
            requests: None,
            rounds: 3,
            warmup: None,
            max_tokens: 32,
            input_tokens: 256,
            timeout_s: 60.0,
            slo: String::new(),
            ignore_eos: false,
            stall_threshold_ms: DEFAULT_STALL_THRESHOLD_MS,
            seed: 1,
            paint: PaintMode::Auto,
            paint_fallback: PaintFallback::default(),
            net: NetMode::default(),
            request_ids: true,
            autorun: false,
            sim: SimParams::default(),
        }
    }
}

/// A validated run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPlan {
    /// The endpoint: `None` for the built-in simulator.
    pub base_url: Option<String>,
    /// The levels, in order.
    pub loads: Vec<Load>,
    /// SLOs.
    pub slos: Vec<Slo>,
    /// Timeout, ms.
    pub timeout_ms: f64,
    /// The simulator's configuration (used when `base_url` is `None`).
    pub sim: SimConfig,
}

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

/// Parse a duration (`60`, `60s`, `500ms`, `2m`, `1h`: core's parser) in seconds.
pub fn parse_duration_s(s: &str) -> Option<f64> {
    tokenscope_core::parse::parse_duration(s)
        .ok()
        .map(|d| d.as_secs_f64())
}

/// Parse a list of concurrencies (`1,4,16`: core's list parser), each at most
/// [`MAX_CONCURRENCY`].
pub fn parse_concurrency(s: &str) -> Result<Vec<u32>, String> {
    let levels =
        tokenscope_core::parse::parse_u32_list(s).map_err(|e| format!("concurrency: {e}"))?;
    match levels.iter().find(|&&c| c > MAX_CONCURRENCY) {
        Some(c) => Err(format!(
            "concurrency: {c} is more than the page runs ({MAX_CONCURRENCY})"
        )),
        None => Ok(levels),
    }
}

/// Normalize a typed base URL: trims, drops a trailing `/` and a pasted endpoint path
/// (`/chat/completions`, `/completions`, `/models`).
pub fn normalize_url(url: &str) -> String {
    let mut u = url.trim().trim_end_matches('/').to_owned();
    for suffix in ["/chat/completions", "/completions", "/models"] {
        if let Some(stripped) = u.strip_suffix(suffix) {
            u = stripped.to_owned();
            break;
        }
    }
    u
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
                    format!("api={value:?}: expected chat or completions: ignored")
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
                let n: u32 = num(key, value)?;
                self.max_tokens = n.max(1);
            }
            "input_tokens" => {
                let n: u32 = num(key, value)?;
                self.input_tokens = n.max(4);
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
            "autorun" => self.autorun = flag(value),
            // The view and the GPU view's settings: read by `GpuSettings`.
            "view" | "preset" | "timestamps" => {}
            "sim_ttft_ms" => self.sim.ttft_ms = num(key, value)?,
            "sim_itl_ms" => self.sim.itl_ms = num(key, value)?,
            "sim_prefill_tok_per_s" => self.sim.prefill_tok_per_s = num(key, value)?,
            "sim_max_batch" => self.sim.max_batch = num(key, value)?,
            "sim_step_growth" => self.sim.step_growth = num(key, value)?,
            "sim_jitter_ms" => self.sim.jitter_ms = num(key, value)?,
            "sim_tokens_per_chunk" => self.sim.tokens_per_chunk = num(key, value)?,
            "sim_error_rate" => self.sim.error_rate = num(key, value)?,
            "sim_faults" => self.sim.faults = value.trim().to_owned(),
            "sim_stall_ms" => self.sim.stall_ms = num(key, value)?,
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
        put("max_tokens", self.max_tokens.to_string());
        put("input_tokens", self.input_tokens.to_string());
        if self.timeout_s != d.timeout_s {
            put("timeout", format!("{}s", self.timeout_s));
        }
        if !self.slo.is_empty() {
            put("slo", self.slo.clone());
        }
        if self.ignore_eos {
            put("ignore_eos", "1".into());
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
        if self.url.is_empty() && self.sim != d.sim {
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
            ];
            for (k, v, dv) in nums {
                if v != dv {
                    put(k, v.to_string());
                }
            }
            if s.faults != ds.faults {
                put("sim_faults", s.faults.clone());
            }
        }
        parts
            .iter()
            .map(|(k, v)| format!("{k}={}", form_encode(v)))
            .collect::<Vec<_>>()
            .join("&")
    }

    /// Whether the run uses the built-in simulated endpoint.
    pub fn is_simulated(&self) -> bool {
        self.url.trim().is_empty()
    }

    /// The simulator's configuration.
    pub fn sim_config(&self) -> Result<SimConfig, String> {
        let faults = self
            .sim
            .faults
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| FaultKind::parse(f).ok_or_else(|| format!("sim_faults: unknown fault {f:?}")))
            .collect::<Result<Vec<_>, _>>()?;
        let cfg = SimConfig {
            ttft_ms: self.sim.ttft_ms,
            itl_ms: self.sim.itl_ms,
            prefill_tok_per_s: self.sim.prefill_tok_per_s,
            max_batch: self.sim.max_batch,
            step_growth: self.sim.step_growth,
            jitter_ms: self.sim.jitter_ms,
            tokens_per_chunk: self.sim.tokens_per_chunk,
            error_rate: self.sim.error_rate,
            faults,
            stall_ms: self.sim.stall_ms,
            seed: self.seed,
            ..SimConfig::default()
        };
        cfg.validate().map_err(|e| format!("sim_{e}"))?;
        Ok(cfg)
    }

    /// Check everything and build the plan.
    pub fn validate(&self) -> Result<RunPlan, String> {
        let levels = parse_concurrency(&self.concurrency)?;
        let slos = Slo::parse_list(&self.slo).map_err(|e| e.to_string())?;
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            return Err("timeout: must be more than 0 seconds".into());
        }
        if !(self.stall_threshold_ms.is_finite() && self.stall_threshold_ms > 0.0) {
            return Err("stall threshold: must be more than 0 ms".into());
        }
        let base_url = if self.is_simulated() {
            None
        } else {
            let u = normalize_url(&self.url);
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return Err(format!(
                    "endpoint URL {u:?}: expected http://HOST:PORT/v1 or https://..."
                ));
            }
            if u.contains('@') && u.split('/').nth(2).is_some_and(|h| h.contains('@')) {
                return Err(
                    "endpoint URL: credentials in the URL are not allowed; use the API key field"
                        .into(),
                );
            }
            Some(u)
        };
        Ok(RunPlan {
            base_url,
            loads: levels.into_iter().map(Load::Concurrency).collect(),
            slos,
            timeout_ms: self.timeout_s * 1000.0,
            sim: self.sim_config()?,
        })
    }

    /// The report's record of this run (never the key). `warmup` is what the warm-up
    /// amounted to per level when the user gave none.
    pub fn run_config(&self, plan: &RunPlan, model: &str, warmup: u32) -> RunConfig {
        RunConfig {
            url: plan
                .base_url
                .clone()
                .unwrap_or_else(|| "builtin:simulated".into()),
            api: self.api,
            model: model.to_owned(),
            mode: "concurrency".into(),
            levels: plan.loads.iter().map(Load::value).collect(),
            arrival: None,
            requests_per_level: self.requests,
            duration_per_level_s: None,
            rounds: self.rounds,
            warmup_requests: self.warmup.unwrap_or(warmup),
            input_tokens: Some(self.input_tokens),
            prompts_file: None,
            max_tokens: self.max_tokens,
            ignore_eos: self.ignore_eos,
            min_tokens: None,
            timeout_s: self.timeout_s,
            slos: plan.slos.clone(),
            stall_threshold_ms: self.stall_threshold_ms,
            seed: self.seed,
        }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[test]
    fn gpu_view_query() {
        use tokenscope_core::gpu_page::GpuPreset;
        let q = "?view=gpu&autorun=1&preset=full&timestamps=0";
        let (g, notes) = GpuSettings::from_query(q);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            (g.view, g.preset, g.timestamps, g.autorun),
            (View::Gpu, GpuPreset::Full, false, true)
        );
        // The benchmark's settings take no offence at the view's parameters.
        let (s, notes) = Settings::from_query(q);
        assert!(notes.is_empty(), "{notes:?}");
        assert!(s.autorun);
        // autorun starts only the view the URL opens; bad values are notes.
        let (g, notes) = GpuSettings::from_query("?autorun=1&preset=huge&view=cpu");
        assert_eq!(
            (g.view, g.autorun, g.preset),
            (View::Bench, false, GpuPreset::Quick)
        );
        assert!(g.timestamps);
        assert_eq!(notes.len(), 2, "{notes:?}");
    }

    #[test]
    fn contract_query() {
        let (s, notes) = Settings::from_query(
            "?url=http%3A%2F%2F127.0.0.1%3A8000%2Fv1%2F&api=completions&concurrency=1,4&requests=20&max_tokens=64&input_tokens=64&warmup=2&autorun=1&timeout=30s&slo=ttft_ms:p95%3C%3D500&rounds=2&seed=9",
        );
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(s.url, "http://127.0.0.1:8000/v1");
        assert_eq!(s.api, Api::Completions);
        assert_eq!(s.concurrency, "1,4");
        assert_eq!(s.requests, Some(20));
        assert_eq!(s.max_tokens, 64);
        assert_eq!(s.input_tokens, 64);
        assert_eq!(s.warmup, Some(2));
        assert!(s.autorun);
        assert_eq!(s.timeout_s, 30.0);
        assert_eq!(s.rounds, 2);
        assert_eq!(s.seed, 9);
        let plan = s.validate().unwrap();
        assert_eq!(plan.loads, vec![Load::Concurrency(1), Load::Concurrency(4)]);
        assert_eq!(plan.slos.len(), 1);
        assert_eq!(plan.timeout_ms, 30_000.0);
        let cfg = s.run_config(&plan, "m", 0);
        assert_eq!(cfg.levels, vec![1.0, 4.0]);
        assert_eq!(cfg.warmup_requests, 2);
    }

    #[test]
    fn the_key_is_never_read_from_the_url() {
        let (s, notes) = Settings::from_query("key=sk-secret&api_key=sk-2&concurrency=2");
        assert_eq!(notes.len(), 2);
        assert!(notes[0].contains("never read"));
        let q = s.to_query();
        assert!(!q.contains("sk-"), "{q}");
        assert!(!format!("{s:?}").contains("sk-"));
    }

    #[test]
    fn bad_values_are_reported_and_ignored() {
        let (s, notes) = Settings::from_query(
            "concurrency=0,x&requests=abc&api=grpc&timeout=-1&slo=bogus&zzz=1",
        );
        assert_eq!(notes.len(), 6, "{notes:?}");
        assert_eq!(s.concurrency, Settings::default().concurrency);
        assert!(notes.iter().any(|n| n.contains("unknown setting \"zzz\"")));
    }

    #[test]
    fn query_round_trips() {
        let mut s = Settings {
            url: "https://api.example.com/v1".into(),
            model: "llama 3".into(),
            requests: Some(40),
            slo: "ttft_ms:p95<=500,tpot_ms:p95<=50".into(),
            paint: PaintMode::Raf,
            request_ids: false,
            ..Settings::default()
        };
        let (back, notes) = Settings::from_query(&s.to_query());
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(back, s);
        s.url.clear();
        s.sim.itl_ms = 9.5;
        s.sim.faults = "reset,http_429".into();
        let (back, _) = Settings::from_query(&s.to_query());
        assert_eq!(back, s);
    }

    #[test]
    fn urls_and_durations() {
        assert_eq!(
            normalize_url(" http://h:1/v1/chat/completions/ "),
            "http://h:1/v1"
        );
        assert_eq!(parse_duration_s("500ms"), Some(0.5));
        assert_eq!(parse_duration_s("2m"), Some(120.0));
        assert_eq!(parse_duration_s("7"), Some(7.0));
        assert_eq!(parse_duration_s("0"), None);
        assert_eq!(parse_duration_s("1h"), Some(3600.0));
        assert_eq!(parse_concurrency("1, 4,16"), Ok(vec![1, 4, 16]));
        assert!(parse_concurrency("1,0").unwrap_err().contains("\"0\""));
        let over = (MAX_CONCURRENCY + 1).to_string();
        assert!(parse_concurrency(&over).unwrap_err().contains(&over));
        assert!(parse_concurrency("").is_err());
        assert_eq!(form_decode("a+b%3C%3d%zz"), "a b<=%zz");
        let s = Settings {
            url: "ftp://x".into(),
            ..Settings::default()
        };
        assert!(s.validate().unwrap_err().contains("expected http"));
        let s = Settings {
            url: "http://user:pw@host/v1".into(),
            ..Settings::default()
        };
        assert!(s.validate().unwrap_err().contains("credentials"));
        let s = Settings {
            sim: SimParams {
                faults: "nope".into(),
                ..SimParams::default()
            },
            ..Settings::default()
        };
        assert!(s.validate().unwrap_err().contains("nope"));
    }
}

/// The page's two views.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum View {
    /// Benchmark an endpoint (the default).
    #[default]
    Bench,
    /// The GPU kernels, measured through WebGPU.
    Gpu,
}

/// The view and the GPU view's settings, from the URL: `view=gpu`,
/// `preset=quick|full`, `timestamps=0` (wall clock), and `autorun=1` (which starts
/// the view the URL opens).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpuSettings {
    /// The view the page opens on.
    pub view: View,
    /// The kernel preset.
    pub preset: tokenscope_core::gpu_page::GpuPreset,
    /// Allow timestamp queries (false: wall clock).
    pub timestamps: bool,
    /// Start the GPU run at once (`view=gpu&autorun=1`).
    pub autorun: bool,
}

impl GpuSettings {
    /// Reads the view's parameters; anything invalid is a note and ignored.
    pub fn from_query(query: &str) -> (GpuSettings, Vec<String>) {
        let mut s = GpuSettings {
            timestamps: true,
            ..GpuSettings::default()
        };
        let mut notes = Vec::new();
        let mut autorun = false;
        let query = query.strip_prefix('?').unwrap_or(query);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let value = form_decode(v);
            match form_decode(k).as_str() {
                "view" => match value.trim() {
                    "gpu" | "kernels" => s.view = View::Gpu,
                    "bench" | "benchmark" | "" => s.view = View::Bench,
                    other => notes.push(format!("view={other:?}: expected bench or gpu: ignored")),
                },
                "preset" => match value.parse() {
                    Ok(p) => s.preset = p,
                    Err(e) => notes.push(format!("{e}: ignored")),
                },
                "timestamps" => {
                    s.timestamps = !matches!(value.trim(), "0" | "false" | "no" | "off")
                }
                "autorun" => autorun = matches!(value.trim(), "1" | "true" | "yes" | "on" | ""),
                _ => {}
            }
        }
        s.autorun = autorun && s.view == View::Gpu;
        (s, notes)
    }
}
