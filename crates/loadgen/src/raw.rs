//! `--raw` JSONL (core's `tokenscope.raw/1.2`): the header line, then every entry
//! (finished requests, level starts, warnings, the end) written and flushed as it
//! happens, so a crash, a SIGKILL or Ctrl-C loses nothing that finished.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde::Serialize;
use tokenscope_core::report::raw::{RawEntry, RawHeader};

use crate::error::{Error, Result};

/// Appends entries to the raw file.
pub struct RawWriter {
    out: BufWriter<File>,
    failed: bool,
}

impl RawWriter {
    /// Create (truncate) the file and write the header line.
    pub fn create(path: &Path, header: &RawHeader) -> Result<Self> {
        let file = File::create(path)
            .map_err(|e| Error::file("--raw", path, "cannot create the file", e))?;
        let mut w = Self {
            out: BufWriter::new(file),
            failed: false,
        };
        w.line(header);
        if w.failed {
            return Err(Error::Option(format!(
                "--raw {}: cannot write the file",
                path.display()
            )));
        }
        Ok(w)
    }

    /// Write one entry and flush it to the OS.
    pub fn write(&mut self, entry: &RawEntry) {
        self.line(entry);
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
}
