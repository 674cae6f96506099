//! The one way a client report is put together.
//!
//! [`assemble`] makes a [`ClientReport`] from its levels, configuration,
//! environment and the run's own warnings: it adds the warnings drawn from the
//! levels and the sweep analysis (knee, SLO capacity). [`RunRecorder`] is the run
//! as it happens (levels starting, requests finishing, warnings raised) feeding
//! the level accumulators and, at the end, [`assemble`]. The native engine and the
//! page drive a recorder live, and write each step to their raw file; the raw
//! rebuild replays those steps through a recorder. So a report rebuilt from a raw
//! file is the measured one.

use super::raw::{Phase, RawEvent, RawHeader, RawLine};
use super::warning::{histogram_warning, level_warnings};
use crate::analyze::level::{LevelAccumulator, LevelOptions};
use crate::analyze::sweep::analyze_sweep;
use crate::report::{
    CLIENT_SCHEMA, ClientReport, Environment, LevelReport, Load, ReportWarning, RunConfig, Source,
};

/// What a client report is made of.
#[derive(Debug, Clone)]
pub struct ReportParts {
    /// Who measured.
    pub source: Source,
    /// The run's configuration.
    pub config: RunConfig,
    /// Where and with what it ran.
    pub environment: Environment,
    /// The levels, in the order run.
    pub levels: Vec<LevelReport>,
    /// Warnings the run raised itself (pre-flight, event loop, the page's checks).
    pub warnings: Vec<ReportWarning>,
    /// The run was stopped early.
    pub interrupted: bool,
}

/// The client report from its parts: the run's warnings, then those drawn from
/// the levels (late sends, levels without a success, histogram summaries), and the
/// sweep analysis.
pub fn assemble(parts: ReportParts) -> ClientReport {
    let ReportParts {
        source,
        config,
        environment,
        mut levels,
        mut warnings,
        interrupted,
    } = parts;
    crate::analyze::cost::cost_levels(&mut levels, config.price.as_ref());
    let sample_cap = LevelOptions::from_config(&config).sample_cap;
    warnings.extend(level_warnings(&levels));
    warnings.extend(histogram_warning(&levels, sample_cap));
    ClientReport {
        schema: CLIENT_SCHEMA.into(),
        source,
        sweep: analyze_sweep(&levels, &config.slos),
        config,
        environment,
        levels,
        warnings,
        interrupted,
        server: None,
    }
}

/// A run as it happens, level by level, turned into its report.
#[derive(Debug, Clone)]
pub struct RunRecorder {
    source: Source,
    config: RunConfig,
    opts: LevelOptions,
    levels: Vec<LevelReport>,
    current: Option<(usize, LevelAccumulator)>,
    started: usize,
    warnings: Vec<ReportWarning>,
}

impl RunRecorder {
    /// A run by `source` with `config` (the levels are analysed with the options
    /// the configuration implies: [`LevelOptions::from_config`]).
    pub fn new(source: Source, config: RunConfig) -> Self {
        Self {
            source,
            opts: LevelOptions::from_config(&config),
            config,
            levels: Vec::new(),
            current: None,
            started: 0,
            warnings: Vec::new(),
        }
    }

    /// The run's configuration.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// The raw file's header for this run.
    pub fn raw_header(&self) -> RawHeader {
        RawHeader::new(self.source, self.config.clone())
    }

    /// Level `level` at `load` starts its measured rounds at `t_ms` (after its
    /// warm-up); the level before it ends. Returns the raw line to write.
    pub fn start_level(&mut self, level: usize, load: Load, t_ms: f64) -> RawEvent {
        self.begin(level, load, Some(t_ms));
        RawEvent::level_start(level, load, t_ms)
    }

    fn begin(&mut self, level: usize, load: Load, t_ms: Option<f64>) {
        self.close_level();
        let mut acc = LevelAccumulator::new(load, self.opts.clone());
        if let Some(t) = t_ms {
            acc.set_start(t);
        }
        self.current = Some((level, acc));
        self.started += 1;
    }

    /// A request finished (its raw line). A measured one counts in its level; a
    /// warm-up one only in the raw file.
    pub fn record(&mut self, line: &RawLine) {
        let Phase::Round(round) = line.phase() else {
            return;
        };
        if self.current.as_ref().is_none_or(|(l, _)| *l != line.level) {
            // A raw file from before `level_start` lines: the level starts here.
            self.begin(line.level, line.load(), None);
        }
        if let Some((_, acc)) = self.current.as_mut() {
            acc.push(round as usize, &line.record);
        }
    }

    /// The run raised a warning. Returns the raw line to write.
    pub fn warn(&mut self, w: ReportWarning) -> RawEvent {
        self.warnings.push(w.clone());
        RawEvent::Warning(w)
    }

    /// The current level ends: it joins the report if it sent anything. Returns
    /// the raw line to write (so a rebuild closes the level at the same point:
    /// scrapes after it belong to no level) and the level.
    pub fn end_level(&mut self) -> Option<(RawEvent, Option<&LevelReport>)> {
        let level = self.current.as_ref()?.0;
        Some((RawEvent::LevelEnd { level }, self.close_level()))
    }

    fn close_level(&mut self) -> Option<&LevelReport> {
        let (_, acc) = self.current.take()?;
        if acc.sent() == 0 {
            return None;
        }
        self.levels.push(acc.finish());
        self.levels.last()
    }

    /// Levels started so far.
    pub fn levels_started(&self) -> usize {
        self.started
    }

    /// The finished levels.
    pub fn levels(&self) -> &[LevelReport] {
        &self.levels
    }

    /// The finished levels and a snapshot of the current one (for a live view).
    pub fn levels_so_far(&self) -> Vec<LevelReport> {
        let mut out = self.levels.clone();
        if let Some((_, acc)) = &self.current
            && acc.sent() > 0
        {
            out.push(acc.clone().finish());
        }
        out
    }

    /// The warnings raised so far.
    pub fn warnings(&self) -> &[ReportWarning] {
        &self.warnings
    }

    /// The run ended: its report ([`assemble`]d) and the raw file's last line.
    pub fn finish(mut self, environment: Environment, interrupted: bool) -> ClientReport {
        self.close_level();
        assemble(ReportParts {
            source: self.source,
            config: self.config,
            environment,
            levels: self.levels,
            warnings: self.warnings,
            interrupted,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::WarningKind;
    use crate::testing;

    #[test]
    fn the_recorder_counts_measured_requests_and_adds_the_drawn_warnings() {
        let mut cfg = testing::run_config(&[1, 2]);
        cfg.sample_cap = Some(4);
        let mut rec = RunRecorder::new(Source::Native, cfg);
        rec.warn(ReportWarning::new(WarningKind::PreflightFailed, "p"));
        let line = |level, load, phase, t0| {
            RawLine::new(
                format!("r{t0}"),
                level,
                load,
                phase,
                testing::record(t0, 10.0, 1.0, 3),
            )
        };
        let c1 = Load::Concurrency(1);
        rec.record(&line(0, c1, Phase::Warmup, 0.0));
        rec.start_level(0, c1, 50.0);
        rec.record(&line(0, c1, Phase::Round(0), 100.0));
        assert_eq!(rec.levels_so_far()[0].sent, 1);
        let c2 = Load::Concurrency(2);
        rec.start_level(1, c2, 150.0);
        for i in 0..3 {
            rec.record(&line(1, c2, Phase::Round(0), 200.0 + f64::from(i)));
        }
        // A level without requests is left out.
        rec.start_level(2, Load::Concurrency(4), 300.0);
        let r = rec.finish(Environment::default(), false);
        assert_eq!(r.levels.len(), 2);
        assert_eq!((r.levels[0].sent, r.levels[1].sent), (1, 3));
        let kinds: Vec<WarningKind> = r.warnings.iter().map(|w| w.kind).collect();
        // 3 requests x 2 gaps = 6 ITL samples > the cap of 4.
        assert_eq!(
            kinds,
            [
                WarningKind::PreflightFailed,
                WarningKind::HistogramSummaries
            ]
        );
    }
}
