//! Progress over the whole sweep: which level of how many, the round, the time
//! gone and an estimate of the time left, refined as each level ends (the
//! request time grown with load as the levels so far grew it). On a
//! terminal a bar on stderr; elsewhere (CI logs, tests) one line per level.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use tokenscope_core::report::LevelReport;
use tokenscope_measure::record::RequestRecord;

use super::estimate::{LevelWork, e2e_at, fmt_duration};

/// Progress display of a run.
pub struct Progress {
    bar: Option<ProgressBar>,
    /// Lines at each level's end where there is no bar.
    lines: bool,
    state: Mutex<State>,
}

/// What the display knows of the run so far.
struct State {
    /// Failed requests in the current phase.
    failed: u64,
    /// Every level's work, in order.
    work: Vec<LevelWork>,
    /// One request's time end to end before any level ended, ms: the
    /// pre-flight's.
    e2e_ms: Option<f64>,
    /// Each level ended so far: its load and the request time that explains
    /// its duration, ms ([`e2e_at`] extrapolates them to the levels ahead).
    measured: Vec<(f64, f64)>,
    /// Requests finished at the current level and their summed time, for an
    /// estimate where there is none yet (no pre-flight).
    level_e2e: (u64, f64),
    level: usize,
    /// The current level has ended (its time is no longer ahead).
    level_over: bool,
    level_start: Instant,
    run_start: Instant,
}

impl State {
    /// Time left, ms: the rest of the current level as planned, then the
    /// levels after it; none while no request time is known.
    fn left_ms(&self) -> Option<f64> {
        let first = self.e2e_ms.or_else(|| {
            let (n, sum) = self.level_e2e;
            (n > 0).then(|| sum / n as f64)
        });
        let e2e = |w: &LevelWork| e2e_at(&self.measured, w.load.value()).or(first);
        let elapsed = self.level_start.elapsed().as_secs_f64() * 1000.0;
        let this = match self.work.get(self.level) {
            Some(w) if !self.level_over => (w.ms(e2e(w)?) - elapsed).max(0.0),
            _ => 0.0,
        };
        let mut rest = 0.0;
        for w in self.work.iter().skip(self.level + 1) {
            rest += w.ms(e2e(w)?);
        }
        Some(this + rest)
    }

    /// `1 min 5 s elapsed, about 2 min left`.
    fn timing(&self) -> String {
        let elapsed = fmt_duration(self.run_start.elapsed().as_secs_f64() * 1000.0);
        match self.left_ms() {
            // Nothing left: the sweep is over (no "about 0 s left").
            Some(left) if left > 0.0 => {
                format!("{elapsed} elapsed, about {} left", fmt_duration(left))
            }
            _ => format!("{elapsed} elapsed"),
        }
    }

    /// `level 2/5 (c=8)`.
    fn level_label(&self) -> String {
        let load = self
            .work
            .get(self.level)
            .map(|w| w.load.label())
            .unwrap_or_default();
        format!("level {}/{} ({load})", self.level + 1, self.work.len())
    }
}

impl Progress {
    /// A progress display of a run of these levels, a request taking `e2e_ms`
    /// (the pre-flight's measure, if any). Shown only if `enabled`: a bar when
    /// stderr is a terminal, else a line per level.
    pub fn new(enabled: bool, work: Vec<LevelWork>, e2e_ms: Option<f64>) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (enabled && terminal).then(|| {
            let bar = ProgressBar::new(0);
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            bar
        });
        let now = Instant::now();
        Self {
            bar,
            lines: enabled && !terminal,
            state: Mutex::new(State {
                failed: 0,
                work,
                e2e_ms,
                measured: Vec::new(),
                level_e2e: (0, 0.0),
                level: 0,
                level_over: false,
                level_start: now,
                run_start: now,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Level `li` (0-based) starts.
    pub fn level_started(&self, li: usize) {
        let mut s = self.state();
        s.level = li;
        s.level_over = false;
        s.level_start = Instant::now();
        s.level_e2e = (0, 0.0);
    }

    /// A new phase (`c=8 warm-up`, `c=8 round 1/3`) with `total` requests if
    /// known.
    pub fn phase(&self, name: &str, total: Option<u64>) {
        let mut s = self.state();
        s.failed = 0;
        let Some(bar) = &self.bar else {
            return;
        };
        // The phase's name begins with the level's load: said once.
        let load = s
            .work
            .get(s.level)
            .map(|w| w.load.label())
            .unwrap_or_default();
        let rest = name.strip_prefix(load.as_str()).unwrap_or(name).trim();
        bar.reset();
        match total {
            Some(n) => {
                bar.set_length(n);
                bar.set_style(
                    ProgressStyle::with_template("{prefix} [{bar:24}] {pos}/{len} {msg}")
                        .expect("valid template")
                        .progress_chars("=> "),
                );
            }
            None => bar.set_style(
                ProgressStyle::with_template("{prefix} {spinner} {pos} done {msg}")
                    .expect("valid template"),
            ),
        }
        bar.set_prefix(format!("{} {rest}", s.level_label()));
        bar.set_position(0);
        bar.set_message(s.timing());
    }

    /// A request finished.
    pub fn tick(&self, r: &RequestRecord) {
        let mut s = self.state();
        if r.outcome.is_ok() {
            if let Some(done) = r.t_done_ms {
                s.level_e2e.0 += 1;
                s.level_e2e.1 += (done - r.t_send_ms).max(0.0);
            }
        } else {
            s.failed += 1;
        }
        if let Some(bar) = &self.bar {
            bar.inc(1);
            bar.set_message(match s.failed {
                0 => s.timing(),
                n => format!("({n} failed) {}", s.timing()),
            });
        }
    }

    /// A level finished: its one-line summary, and the estimate of the time
    /// left refined from how long this level took.
    pub fn level_done(&self, l: &LevelReport) {
        let mut s = self.state();
        let took_ms = s.level_start.elapsed().as_secs_f64() * 1000.0;
        if let Some(w) = s.work.get(s.level).copied()
            && let Some(e2e) = w.e2e_from(took_ms)
        {
            s.measured.push((w.load.value(), e2e));
        }
        s.level_over = true;
        let line = format!(
            "{} done in {}: {} ok / {} sent, TTFT p50 {} ms, TPOT p50 {} ms, {} tok/s; {}",
            s.level_label(),
            fmt_duration(took_ms),
            l.ok,
            l.sent,
            tokenscope_stats::fmt::fmt_ms(l.metrics.ttft_ms.p50),
            tokenscope_stats::fmt::fmt_ms(l.metrics.tpot_ms.p50),
            tokenscope_stats::fmt::fmt_rate(l.output_tokens_per_s),
            s.timing()
        );
        if let Some(bar) = &self.bar {
            bar.println(line);
        } else if self.lines {
            eprintln!("{line}");
        }
    }

    /// The run ended.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
