//! The page's scrapes, between its main module and its report module.
//!
//! The page fetches `/metrics` during a run (or asks its built-in simulator) and
//! keeps what came back as it is; parsing it takes the Prometheus parser and the
//! engines' names, which stay out of the first load. At each level's end (and at
//! the run's) the page hands the scrapes taken since to the report module, which
//! reads each into the raw file's `scrape` line ([`read_scrapes`]); at the run's
//! end it rebuilds the report from the page's raw file ([`rebuild_report`]), which
//! joins the server view to the levels exactly as `tokenscope report --raw` does.

use serde::{Deserialize, Serialize};

use tokenscope_core::analyze::server::scrape::ScrapeTarget;

/// One scrape as the page took it: the exposition text, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TakenScrape {
    /// Whose metrics.
    pub target: ScrapeTarget,
    /// When the answer was read (or the scrape failed), ms on the page's clock.
    pub t_ms: f64,
    /// The text, when an answer came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Why nothing came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A scrape read by the report module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadScrape {
    /// The raw file's line (`{"event": "scrape", ...}`), without its newline.
    pub line: String,
    /// Why nothing was read (no answer, an HTTP error, no known engine's names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Read each scrape into its raw-file line (what `tokenscope bench` writes for a
/// scrape of its own).
pub fn read_scrapes(taken: &[TakenScrape]) -> Vec<ReadScrape> {
    use tokenscope_core::analyze::server::scrape::ScrapeRecord;
    use tokenscope_core::report::raw::RawEntry;
    taken
        .iter()
        .map(|t| {
            let record = match (&t.text, &t.error) {
                (Some(text), None) => ScrapeRecord::read(t.target, t.t_ms, text),
                (_, error) => ScrapeRecord::failed(
                    t.target,
                    t.t_ms,
                    error.clone().unwrap_or_else(|| "no answer".into()),
                ),
            };
            let error = record.error.clone();
            let line =
                serde_json::to_string(&RawEntry::Scrape(Box::new(record))).unwrap_or_default();
            ReadScrape { line, error }
        })
        .collect()
}

/// The client report (JSON) of a page run, from its raw file: the page's own
/// report with the server view joined to its levels (the run wrote it, so it is
/// not marked rebuilt).
pub fn rebuild_report(raw_jsonl: &str) -> Result<String, String> {
    let raw = tokenscope_core::report::raw::parse(raw_jsonl)
        .map_err(|e| format!("the page's raw file: {e}"))?;
    let mut report = tokenscope_core::report::raw::rebuild_report(&raw);
    report.environment.rebuilt_from_raw = false;
    Ok(report.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrapes_read_into_raw_lines_and_failures_say_why() {
        let taken = [
            TakenScrape {
                target: ScrapeTarget::Server,
                t_ms: 10.0,
                text: Some(
                    "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 2\n".into(),
                ),
                error: None,
            },
            TakenScrape {
                target: ScrapeTarget::Server,
                t_ms: 20.0,
                text: Some("hello\n".into()),
                error: None,
            },
            TakenScrape {
                target: ScrapeTarget::Gpu,
                t_ms: 30.0,
                text: None,
                error: Some("HTTP 401".into()),
            },
        ];
        let read = read_scrapes(&taken);
        assert_eq!(read[0].error, None);
        assert!(
            read[0].line.starts_with("{\"event\":\"scrape\""),
            "{}",
            read[0].line
        );
        assert!(
            read[0].line.contains("\"requests_running\":2"),
            "{}",
            read[0].line
        );
        assert!(
            read[1]
                .error
                .as_deref()
                .unwrap()
                .starts_with("no known engine"),
            "{:?}",
            read[1].error
        );
        assert_eq!(read[2].error.as_deref(), Some("HTTP 401"));
        assert!(read[2].line.contains("\"target\":\"gpu\""));
    }
}
