//! The mock's shared state: its engine, clock, log and metrics, built by
//! [`MockState::start`], and the guard that logs a request whose client left.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokenscope_sim::{Engine, SimConfig};
use tokio::sync::mpsc;

use tokenscope_loadgen::clock::Clock;

use super::engine::{EngineMsg, Gauges, engine_task};
use super::log::LogRecord;
use super::metrics::ServerMetrics;

/// Shared server state.
#[derive(Clone)]
pub struct MockState {
    pub(super) cfg: Arc<SimConfig>,
    pub(super) engine: mpsc::UnboundedSender<EngineMsg>,
    pub(super) clock: Clock,
    pub(super) log: Option<mpsc::UnboundedSender<LogRecord>>,
    pub(super) served: Arc<AtomicU64>,
    pub(super) gauges: Arc<Gauges>,
    pub(super) metrics: Arc<ServerMetrics>,
    /// `/metrics` answers 404 (a server without metrics, like llama-server
    /// started without `--metrics`).
    pub(super) metrics_off: bool,
    /// Hold the response head until the first chunk, and send the two together.
    pub(super) head_with_first_token: bool,
    /// Send llama.cpp's `timings` in each complete stream's last chunk.
    pub(super) timings: bool,
    /// The prompts seen (`--prefix-cache`).
    pub(super) prefix_cache: Arc<std::sync::Mutex<tokenscope_sim::prefix::PrefixCache>>,
    /// How requests for log-probabilities are answered (`--lm-*`).
    pub(super) lm: tokenscope_quality::toy_serve::LmServe,
    /// `--cors-allow-headers`: what a CORS preflight allows (`None`: whatever it
    /// asks for).
    pub(super) cors_allow_headers: Option<Arc<str>>,
    /// `--gpu-watts`: a simulated GPU drawing this power, exported at
    /// `/gpu/metrics` in dcgm-exporter's names (`None`: 404 there).
    pub(super) gpu_watts: Option<f64>,
}

impl MockState {
    /// Start the engine (and the log writer) on the current tokio runtime.
    pub fn start(cfg: SimConfig, log_path: Option<&Path>) -> anyhow::Result<Self> {
        cfg.validate().map_err(|e| anyhow::anyhow!("--{e}"))?;
        let cfg_seed = cfg.seed;
        let clock = Clock::start();
        let (tx, rx) = mpsc::unbounded_channel();
        let gauges = Arc::new(Gauges::default());
        tokio::spawn(engine_task(
            Engine::new(cfg.clone()),
            rx,
            clock,
            gauges.clone(),
        ));
        let log = match log_path {
            Some(path) => {
                let file = std::fs::File::create(path).map_err(|e| {
                    anyhow::anyhow!("--log {}: cannot create the file ({e})", path.display())
                })?;
                let (ltx, mut lrx) = mpsc::unbounded_channel::<LogRecord>();
                tokio::spawn(async move {
                    let mut out = std::io::BufWriter::new(file);
                    while let Some(rec) = lrx.recv().await {
                        if serde_json::to_writer(&mut out, &rec).is_ok() {
                            let _ = out.write_all(b"\n");
                            let _ = out.flush();
                        }
                    }
                });
                Some(ltx)
            }
            None => None,
        };
        Ok(Self {
            cfg: Arc::new(cfg),
            engine: tx,
            clock,
            log,
            served: Arc::new(AtomicU64::new(0)),
            gauges,
            metrics: Arc::new(ServerMetrics::new()),
            metrics_off: false,
            head_with_first_token: false,
            timings: false,
            cors_allow_headers: None,
            gpu_watts: None,
            prefix_cache: Arc::default(),
            lm: tokenscope_quality::toy_serve::LmServe {
                lm: tokenscope_quality::toy_lm::ToyLm::new(cfg_seed, usize::MAX),
                logprobs: true,
                tasks_right: 1.0,
                seed: cfg_seed,
                tokenizer_seed: 0,
                batch_noise: 0.0,
                token_ids: true,
                echo_logprobs: true,
                native_generate: true,
            },
        })
    }

    /// The same server with a simulated GPU drawing `watts` at `/gpu/metrics`.
    pub fn with_gpu_watts(mut self, watts: Option<f64>) -> Self {
        self.gpu_watts = watts;
        self
    }

    /// The same server with no `/metrics` (it answers 404).
    pub fn without_metrics(mut self) -> Self {
        self.metrics_off = true;
        self
    }

    /// The same server allowing only `list` in a CORS preflight
    /// (`--cors-allow-headers`; `None`: whatever the preflight asks for).
    pub fn cors_allow_headers(mut self, list: Option<&str>) -> Self {
        self.cors_allow_headers = list.map(Arc::from);
        self
    }

    /// The same server holding each stream's response head until its first
    /// chunk and writing them together, as servers do that write nothing before
    /// the first body bytes (Go's `net/http` unless the handler flushes first).
    pub fn head_with_first_token(mut self, yes: bool) -> Self {
        self.head_with_first_token = yes;
        self
    }

    /// The same server ending each complete stream with llama.cpp's `timings`
    /// (`prompt_ms`: the request's arrival to its first token's chunk, as the
    /// mock's log has them; `predicted_ms`: that chunk to the last).
    pub fn with_timings(mut self, yes: bool) -> Self {
        self.timings = yes;
        self
    }

    /// The same server answering requests for log-probabilities (and greedy
    /// ones) as `lm` says.
    pub fn with_lm(mut self, lm: tokenscope_quality::toy_serve::LmServe) -> Self {
        self.lm = lm;
        self
    }

    /// Requests received so far.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// The simulator's configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// The server's clock (ms since it started), shared by its request and
    /// connection times.
    pub fn clock(&self) -> Clock {
        self.clock
    }
}

impl MockState {
    pub(super) fn write_log(&self, rec: LogRecord) {
        self.metrics.observe(&rec);
        if let Some(tx) = &self.log {
            let _ = tx.send(rec);
        }
    }
}

/// Logs a request whose client went away (and frees its engine slot).
pub(super) struct LogOnDrop {
    pub(super) state: MockState,
    pub(super) log: Option<LogRecord>,
}

impl Drop for LogOnDrop {
    fn drop(&mut self) {
        if let Some(mut log) = self.log.take() {
            if log.outcome == "completed" {
                log.outcome = "disconnected";
            }
            log.t_end_ms = self.state.clock.now_ms();
            let _ = self.state.engine.send(EngineMsg::Cancel(log.id));
            self.state.write_log(log);
        }
    }
}
