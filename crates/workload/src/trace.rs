//! Request traces replayed as they happened: when each request arrived and how
//! many tokens it read and wrote (and, in Mooncake's traces, which prefix blocks
//! it shared with others). Three public formats are read:
//!
//! | format | fields | source |
//! |---|---|---|
//! | Mooncake JSONL | `timestamp` (ms from the trace's start), `input_length`, `output_length`, `hash_ids` (prefix blocks of 512 tokens) | kvcache-ai/Mooncake `FAST25-release/traces` |
//! | Azure LLM inference CSV (2023) | `TIMESTAMP` (`2023-11-16 18:17:03.9799600`), `ContextTokens`, `GeneratedTokens` | Azure/AzurePublicDataset |
//! | BurstGPT CSV | `Timestamp` (s from the first day's 0:00), `Request tokens`, `Response tokens` (0: the request failed), and more columns | HPMLL/BurstGPT |
//!
//! The format is recognised from the text (a JSON line, or the CSV header). Every
//! problem names the line and the field; timestamps must not go backwards.
//! [`Trace::replay`] applies `--trace-speed` (compress time) and
//! `--trace-token-scale` (shrink every length and the prefix block, for a small
//! server), keeping the trace's own shape.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use tokenscope_measure::parse::datetime_ms;

/// Tokens per prefix block in Mooncake's traces (their README).
pub const MOONCAKE_BLOCK_TOKENS: u64 = 512;

/// The trace formats read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceFormat {
    /// Mooncake JSONL.
    Mooncake,
    /// Azure LLM inference trace CSV.
    Azure,
    /// BurstGPT CSV.
    Burstgpt,
}

impl TraceFormat {
    /// How reports name it.
    pub fn label(self) -> &'static str {
        match self {
            TraceFormat::Mooncake => "Mooncake JSONL",
            TraceFormat::Azure => "Azure LLM trace CSV",
            TraceFormat::Burstgpt => "BurstGPT CSV",
        }
    }
}

/// One request of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest {
    /// When it arrived, ms after the trace's first request.
    pub t_ms: f64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Prefix blocks (Mooncake): requests with the same leading ids share those
    /// blocks of their prompts. Empty: no prefix shared.
    pub hash_ids: Vec<u64>,
}

/// A trace read from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Its format.
    pub format: TraceFormat,
    /// Its requests, by arrival.
    pub requests: Vec<TraceRequest>,
    /// Lines left out, and why (BurstGPT's failed requests: 0 response tokens).
    pub skipped: Vec<String>,
    /// Tokens per prefix block.
    pub block_tokens: u64,
}

/// A trace that cannot be read.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum TraceError {
    /// Nothing in it.
    #[error("the trace is empty")]
    Empty,
    /// Not a format this reads.
    #[error(
        "not a trace this reads: expected Mooncake JSONL (timestamp, input_length, output_length, hash_ids), an Azure LLM trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens) or a BurstGPT CSV (Timestamp, Request tokens, Response tokens); the first line is {0:?}"
    )]
    Unknown(String),
    /// A line with a field missing or wrong.
    #[error("line {line}: {field}: {reason}")]
    Field {
        /// 1-based line number.
        line: usize,
        /// The field.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A timestamp earlier than the one before it.
    #[error(
        "line {line}: {field} goes backwards ({t} after {previous}): a trace must be in arrival order"
    )]
    Backwards {
        /// 1-based line number.
        line: usize,
        /// The field.
        field: &'static str,
        /// Its value, as read.
        t: String,
        /// The previous line's, as read.
        previous: String,
    },
}

fn field_err(line: usize, field: &str, reason: impl Into<String>) -> TraceError {
    TraceError::Field {
        line,
        field: field.to_owned(),
        reason: reason.into(),
    }
}

impl Trace {
    /// Read a trace's text, recognising its format.
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .ok_or(TraceError::Empty)?;
        if first.starts_with('{') {
            return parse_mooncake(text);
        }
        let header: Vec<String> = split_csv(first)
            .into_iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .collect();
        if header.iter().any(|h| h == "contexttokens") {
            parse_azure(text, &header)
        } else if header.iter().any(|h| h == "request tokens") {
            parse_burstgpt(text, &header)
        } else {
            Err(TraceError::Unknown(first.chars().take(120).collect()))
        }
    }

    /// The trace as it will be replayed: times divided by `speed`, every length
    /// (and the prefix block) multiplied by `token_scale` (at least 1 token each),
    /// at most `limit` requests.
    pub fn replay(&self, speed: f64, token_scale: f64, limit: Option<usize>) -> Trace {
        let scale = |n: u64| ((n as f64 * token_scale).round() as u64).max(1);
        let requests = self
            .requests
            .iter()
            .take(limit.unwrap_or(usize::MAX))
            .map(|r| TraceRequest {
                t_ms: r.t_ms / speed,
                input_tokens: scale(r.input_tokens),
                output_tokens: scale(r.output_tokens),
                hash_ids: r.hash_ids.clone(),
            })
            .collect();
        Trace {
            format: self.format,
            requests,
            skipped: self.skipped.clone(),
            block_tokens: scale(self.block_tokens),
        }
    }

    /// From the first request's arrival to the last's, ms.
    pub fn span_ms(&self) -> f64 {
        match (self.requests.first(), self.requests.last()) {
            (Some(a), Some(b)) => b.t_ms - a.t_ms,
            _ => 0.0,
        }
    }

    /// Requests per second over the trace's span (its request count when it has
    /// no span: every request at once).
    pub fn mean_rate_per_s(&self) -> f64 {
        let n = self.requests.len() as f64;
        let span_s = self.span_ms() / 1000.0;
        if span_s > 0.0 {
            (n - 1.0).max(1.0) / span_s
        } else {
            n.max(1.0)
        }
    }
}

#[derive(Deserialize)]
struct MooncakeLine {
    timestamp: Option<serde_json::Value>,
    input_length: Option<serde_json::Value>,
    output_length: Option<serde_json::Value>,
    #[serde(default)]
    hash_ids: Option<serde_json::Value>,
}

fn count_of(line: usize, field: &str, v: Option<&serde_json::Value>) -> Result<u64, TraceError> {
    let v = v.ok_or_else(|| field_err(line, field, "missing"))?;
    v.as_u64()
        .or_else(|| {
            v.as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                .map(|f| f as u64)
        })
        .ok_or_else(|| field_err(line, field, format!("{v} is not a count of tokens")))
}

fn parse_mooncake(text: &str) -> Result<Trace, TraceError> {
    let mut requests: Vec<TraceRequest> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        let l: MooncakeLine = serde_json::from_str(raw)
            .map_err(|e| field_err(line, "(the line)", format!("not a JSON object: {e}")))?;
        let t = l
            .timestamp
            .as_ref()
            .ok_or_else(|| field_err(line, "timestamp", "missing"))?;
        let t_ms = t
            .as_f64()
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| field_err(line, "timestamp", format!("{t} is not a time in ms")))?;
        let hash_ids = match &l.hash_ids {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(serde_json::Value::Array(ids)) => ids
                .iter()
                .map(|id| {
                    id.as_u64().ok_or_else(|| {
                        field_err(line, "hash_ids", format!("{id} is not a block id"))
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(field_err(
                    line,
                    "hash_ids",
                    format!("{other} is not a list of block ids"),
                ));
            }
        };
        push_in_order(
            &mut requests,
            line,
            "timestamp",
            TraceRequest {
                t_ms,
                input_tokens: count_of(line, "input_length", l.input_length.as_ref())?,
                output_tokens: count_of(line, "output_length", l.output_length.as_ref())?,
                hash_ids,
            },
            &t.to_string(),
        )?;
    }
    finish(TraceFormat::Mooncake, requests, Vec::new())
}

/// Append `r`, refusing a time earlier than the last one's.
fn push_in_order(
    requests: &mut Vec<TraceRequest>,
    line: usize,
    field: &'static str,
    r: TraceRequest,
    shown: &str,
) -> Result<(), TraceError> {
    if let Some(prev) = requests.last()
        && r.t_ms < prev.t_ms
    {
        return Err(TraceError::Backwards {
            line,
            field,
            t: shown.to_owned(),
            previous: format!("{}", prev.t_ms),
        });
    }
    requests.push(r);
    Ok(())
}

/// Times relative to the first request.
fn finish(
    format: TraceFormat,
    mut requests: Vec<TraceRequest>,
    skipped: Vec<String>,
) -> Result<Trace, TraceError> {
    let t0 = requests.first().ok_or(TraceError::Empty)?.t_ms;
    for r in &mut requests {
        r.t_ms -= t0;
    }
    Ok(Trace {
        format,
        requests,
        skipped,
        block_tokens: MOONCAKE_BLOCK_TOKENS,
    })
}

/// One CSV line's fields (double quotes around a field, `""` inside one).
fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// The CSV's data lines (after the header), 1-based numbers, split into fields.
fn csv_rows(text: &str) -> impl Iterator<Item = (usize, Vec<String>)> + '_ {
    text.lines()
        .enumerate()
        .skip(1)
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| (n, split_csv(l)))
}

fn column(header: &[String], name: &str) -> Result<usize, TraceError> {
    header
        .iter()
        .position(|h| h == name)
        .ok_or_else(|| field_err(1, name, "the header has no such column"))
}

fn cell<'a>(row: &'a [String], at: usize, line: usize, field: &str) -> Result<&'a str, TraceError> {
    row.get(at)
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| field_err(line, field, "missing"))
}

fn csv_count(row: &[String], at: usize, line: usize, field: &str) -> Result<u64, TraceError> {
    let v = cell(row, at, line, field)?;
    v.parse::<u64>()
        .map_err(|_| field_err(line, field, format!("{v:?} is not a count of tokens")))
}

fn parse_azure(text: &str, header: &[String]) -> Result<Trace, TraceError> {
    let (t_col, in_col, out_col) = (
        column(header, "timestamp")?,
        column(header, "contexttokens")?,
        column(header, "generatedtokens")?,
    );
    let mut requests = Vec::new();
    for (line, row) in csv_rows(text) {
        let t = cell(&row, t_col, line, "TIMESTAMP")?;
        let t_ms = datetime_ms(t).ok_or_else(|| {
            field_err(
                line,
                "TIMESTAMP",
                format!("{t:?} is not a time like 2023-11-16 18:17:03.9799600"),
            )
        })?;
        push_in_order(
            &mut requests,
            line,
            "TIMESTAMP",
            TraceRequest {
                t_ms,
                input_tokens: csv_count(&row, in_col, line, "ContextTokens")?,
                output_tokens: csv_count(&row, out_col, line, "GeneratedTokens")?,
                hash_ids: Vec::new(),
            },
            t,
        )?;
    }
    finish(TraceFormat::Azure, requests, Vec::new())
}

fn parse_burstgpt(text: &str, header: &[String]) -> Result<Trace, TraceError> {
    let (t_col, in_col, out_col) = (
        column(header, "timestamp")?,
        column(header, "request tokens")?,
        column(header, "response tokens")?,
    );
    let mut requests = Vec::new();
    let mut skipped = Vec::new();
    for (line, row) in csv_rows(text) {
        let t = cell(&row, t_col, line, "Timestamp")?;
        let t_s: f64 = t
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| field_err(line, "Timestamp", format!("{t:?} is not seconds")))?;
        let output_tokens = csv_count(&row, out_col, line, "Response tokens")?;
        let input_tokens = csv_count(&row, in_col, line, "Request tokens")?;
        if output_tokens == 0 {
            skipped.push(format!(
                "line {line}: 0 response tokens (a failed request in BurstGPT)"
            ));
            continue;
        }
        push_in_order(
            &mut requests,
            line,
            "Timestamp",
            TraceRequest {
                t_ms: t_s * 1000.0,
                input_tokens,
                output_tokens,
                hash_ids: Vec::new(),
            },
            t,
        )?;
    }
    finish(TraceFormat::Burstgpt, requests, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes() {
        assert_eq!(datetime_ms("1970-01-01 00:00:00"), Some(0.0));
        assert_eq!(datetime_ms("1970-01-02 00:00:01.5"), Some(86_401_500.0));
        let a = datetime_ms("2023-11-16 18:17:03.9799600").unwrap();
        let b = datetime_ms("2023-11-16 18:17:04.0319600").unwrap();
        assert!((b - a - 52.0).abs() < 1e-6, "{}", b - a);
        // Across a month's end and a leap day.
        let c = datetime_ms("2024-02-28 23:59:59").unwrap();
        let d = datetime_ms("2024-03-01 00:00:00").unwrap();
        assert_eq!(d - c, 86_401_000.0);
        assert_eq!(datetime_ms("2023-13-01 00:00:00"), None);
        assert_eq!(datetime_ms("yesterday"), None);
    }

    #[test]
    fn csv_fields() {
        assert_eq!(split_csv("a,\"b,c\",\"d\"\"e\","), ["a", "b,c", "d\"e", ""]);
    }

    #[test]
    fn replay_scales_time_and_tokens() {
        let t = Trace::parse(
            "{\"timestamp\": 100, \"input_length\": 1000, \"output_length\": 10, \"hash_ids\": [1, 2]}\n\
             {\"timestamp\": 300, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n",
        )
        .unwrap();
        assert_eq!(t.requests[0].t_ms, 0.0, "relative to the first request");
        assert_eq!(t.span_ms(), 200.0);
        let r = t.replay(2.0, 0.1, None);
        assert_eq!(r.requests[1].t_ms, 100.0);
        assert_eq!(
            (r.requests[0].input_tokens, r.requests[0].output_tokens),
            (100, 1)
        );
        assert_eq!(r.requests[1].output_tokens, 1, "at least one token");
        assert_eq!(r.block_tokens, 51);
        assert_eq!(t.replay(1.0, 1.0, Some(1)).requests.len(), 1);
        assert_eq!(r.mean_rate_per_s(), 10.0);
    }
}
