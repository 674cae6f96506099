//! What the page keeps of a run: every finished request as a `tokenscope.raw/1.2`
//! line plus what only the page knows (its lane, the paint probe's readings), and
//! the raw file's other lines (level starts, scrapes, warnings, the end) in the order they
//! happened, so the raw export rebuilds the page's report exactly
//! (`tokenscope report --raw`).

use serde::Serialize;
use tokenscope_core::report::raw::{RawEvent, RawHeader, RawLine};

/// One finished request as the page keeps it: a `tokenscope.raw/1.2` line plus
/// what only the page knows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PageRecord {
    /// The raw line (request id, level, round, warm-up flag, the record).
    #[serde(flatten)]
    pub line: RawLine,
    /// Which on-screen lane (concurrency slot) showed it.
    pub lane: usize,
    /// When the first-token element was inserted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paint_inserted_ms: Option<f64>,
    /// The animation-frame fallback's reading, kept even when Element Timing gave
    /// the paint time (to compare the two methods on one browser).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paint_fallback_ms: Option<f64>,
}

/// One line of the raw file after the header.
#[derive(Debug, Clone, PartialEq)]
pub enum PageEntry {
    /// The request at this index of the run's records.
    Request(usize),
    /// Something that happened to the run.
    Event(RawEvent),
    /// The scrape at this index of the raw file's scrape lines.
    Scrape(usize),
}

/// The raw file of a page run: its header and its lines, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct PageRaw {
    /// The header.
    pub header: RawHeader,
    /// The lines (requests by index into the records, scrapes into `scrapes`).
    pub entries: Vec<PageEntry>,
    /// Each scrape's raw line (`{"event": "scrape", ...}`, as the report module
    /// read it); `None` for one that could not be read (no report module).
    pub scrapes: Vec<Option<String>>,
}

/// The run as a `tokenscope.raw/1.2` JSONL file.
pub fn raw_jsonl(raw: &PageRaw, records: &[PageRecord]) -> String {
    let mut out = serde_json::to_string(&raw.header).unwrap_or_default();
    out.push('\n');
    for e in &raw.entries {
        let line = match e {
            PageEntry::Request(i) => records.get(*i).and_then(|r| serde_json::to_string(r).ok()),
            PageEntry::Event(ev) => serde_json::to_string(ev).ok(),
            PageEntry::Scrape(i) => raw.scrapes.get(*i).cloned().flatten(),
        };
        if let Some(line) = line {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}
