//! `--raw` JSONL (core's `tokenscope.raw/1`): one header line with the run's
//! config, then one line per finished request, written and flushed as it
//! finishes, so a crash, a SIGKILL or Ctrl-C loses nothing that finished.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;
use tokenscope_core::raw::{RAW_SCHEMA, RawHeader, RawLine};
use tokenscope_core::report::{Load, RunConfig, Source};

use super::{Finished, Phase};

/// Appends request lines to the raw file.
pub struct RawWriter {
    out: BufWriter<File>,
    failed: bool,
}

impl RawWriter {
    /// Create (truncate) the file and write the header line.
    pub fn create(path: &Path, config: &RunConfig) -> anyhow::Result<Self> {
        let file = File::create(path)
            .with_context(|| format!("--raw {}: cannot create the file", path.display()))?;
        let mut w = Self {
            out: BufWriter::new(file),
            failed: false,
        };
        w.line(&RawHeader {
            schema: RAW_SCHEMA.into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            source: Source::Native,
            config: config.clone(),
        });
        if w.failed {
            anyhow::bail!("--raw {}: cannot write the file", path.display());
        }
        Ok(w)
    }

    /// Write one finished request and flush it to the OS.
    pub fn write(&mut self, level: usize, load: Load, f: &Finished) {
        let (concurrency, rate_per_s) = match load {
            Load::Concurrency(c) => (Some(c), None),
            Load::Rate(r) => (None, Some(r)),
        };
        // The record is cloned into the line type; a request's record is small.
        let line = RawLine {
            request_id: f.request_id.clone(),
            level,
            concurrency,
            rate_per_s,
            round: match f.phase {
                Phase::Round(r) => Some(r + 1),
                Phase::Warmup => None,
            },
            warmup: f.phase == Phase::Warmup,
            record: f.record.clone(),
        };
        self.line(&line);
    }

    fn line<T: Serialize>(&mut self, value: &T) {
        if self.failed {
            return;
        }
        let res = serde_json::to_writer(&mut self.out, value)
            .map_err(std::io::Error::other)
            .and_then(|()| self.out.write_all(b"\n"))
            .and_then(|()| self.out.flush());
        if let Err(e) = res {
            // Keep running: the in-memory results still make the report.
            eprintln!("warning: --raw: writing failed ({e}); continuing without the raw file");
            self.failed = true;
        }
    }

    /// Flush (each line is already flushed; this is for symmetry at the end).
    pub fn flush(&mut self) {
        let _ = self.out.flush();
    }
}
