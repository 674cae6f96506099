//! `--raw` JSONL: one header line (`tokenscope.raw/1` with the run's config), then
//! one line per finished request, written and flushed as it finishes, so a crash,
//! a SIGKILL or Ctrl-C loses nothing that finished. Every complete line parses.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;
use tokenscope_core::report::{Load, RunConfig};
use tokenscope_core::timeline::RequestRecord;

use super::{Finished, Phase};

/// The raw file's schema.
pub const RAW_SCHEMA: &str = "tokenscope.raw/1";

#[derive(Serialize)]
struct Header<'a> {
    schema: &'static str,
    tool_version: &'static str,
    config: &'a RunConfig,
}

#[derive(Serialize)]
struct Line<'a> {
    request_id: &'a str,
    level: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    concurrency: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_per_s: Option<f64>,
    /// 1-based round; absent for warm-up requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    round: Option<u32>,
    warmup: bool,
    #[serde(flatten)]
    record: &'a RequestRecord,
}

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
        let header = Header {
            schema: RAW_SCHEMA,
            tool_version: env!("CARGO_PKG_VERSION"),
            config,
        };
        w.line(&header);
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
        let line = Line {
            request_id: &f.request_id,
            level,
            concurrency,
            rate_per_s,
            round: match f.phase {
                Phase::Round(r) => Some(r + 1),
                Phase::Warmup => None,
            },
            warmup: f.phase == Phase::Warmup,
            record: &f.record,
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
