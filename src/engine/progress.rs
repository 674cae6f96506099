//! A progress bar on stderr when it is a terminal; silent otherwise.

use std::io::IsTerminal;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use tokenscope_core::measure::record::RequestRecord;
use tokenscope_core::report::LevelReport;

/// Progress display of a run.
pub struct Progress {
    bar: Option<ProgressBar>,
    counts: Mutex<(u64, u64)>,
}

impl Progress {
    /// A progress display (shown only if `enabled` and stderr is a terminal).
    pub fn new(enabled: bool) -> Self {
        let bar = (enabled && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(0);
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            bar
        });
        Self {
            bar,
            counts: Mutex::new((0, 0)),
        }
    }

    /// A new phase (warm-up, round) with `total` requests if known.
    pub fn phase(&self, name: &str, total: Option<u64>) {
        *self.counts.lock().expect("progress lock") = (0, 0);
        if let Some(bar) = &self.bar {
            bar.reset();
            match total {
                Some(n) => {
                    bar.set_length(n);
                    bar.set_style(
                        ProgressStyle::with_template(
                            "{prefix:>18} [{bar:30}] {pos}/{len} {msg} ({elapsed})",
                        )
                        .expect("valid template")
                        .progress_chars("=> "),
                    );
                }
                None => bar.set_style(
                    ProgressStyle::with_template(
                        "{prefix:>18} {spinner} {pos} done {msg} ({elapsed})",
                    )
                    .expect("valid template"),
                ),
            }
            bar.set_prefix(name.to_owned());
            bar.set_position(0);
        }
    }

    /// A request finished.
    pub fn tick(&self, r: &RequestRecord) {
        let mut c = self.counts.lock().expect("progress lock");
        if r.outcome.is_ok() {
            c.0 += 1;
        } else {
            c.1 += 1;
        }
        if let Some(bar) = &self.bar {
            bar.inc(1);
            bar.set_message(format!("ok {} failed {}", c.0, c.1));
        }
    }

    /// A level finished: print its one-line summary above the bar.
    pub fn level_done(&self, l: &LevelReport) {
        if let Some(bar) = &self.bar {
            bar.println(format!(
                "{:>8}: {} ok / {} sent, TTFT p50 {} ms, TPOT p50 {} ms, {} tok/s",
                l.load().label(),
                l.ok,
                l.sent,
                tokenscope_core::render::fmt::fmt_ms(l.metrics.ttft_ms.p50),
                tokenscope_core::render::fmt::fmt_ms(l.metrics.tpot_ms.p50),
                tokenscope_core::render::fmt::fmt_rate(l.output_tokens_per_s)
            ));
        }
    }

    /// The run ended.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
