//! The Prometheus text exposition format (0.0.4) and OpenMetrics text, as
//! inference servers and GPU exporters really emit them: one parser, line by line.
//! Its writer, for the expositions tokenscope serves, is [`super::exposition`].
//!
//! Written here rather than taken from a crate: the crates checked either drop
//! names with colons (`vllm:…`, `sglang:…`, `llamacpp:…`), split labels without
//! respecting quotes, reject a whole scrape for one bad line, require OpenMetrics'
//! `_total` suffix, or pull in a clock that wasm32 lacks (prometheus-parse 0.2,
//! openmetrics-parser 0.4, prom_text_format_parser 0.1, nom-openmetrics 0.2, read
//! against `tests/fixtures/metrics/`). A scrape must never fail a run: a line that
//! does not parse is skipped and counted with its line number, never a panic.
//!
//! Accepted: `# HELP` (text optional, `\\` and `\n` decoded), `# TYPE` (any type;
//! unknown ones read as untyped), `# UNIT`, other comments, blank lines, CRLF,
//! names `[a-zA-Z_:][a-zA-Z0-9_:]*`, labels with escapes (`\\ \" \n`), spaces
//! around them, a trailing comma or `{}`, values as Rust parses floats (`+Inf`,
//! `-Inf`, `NaN`, exponents), an optional timestamp, an OpenMetrics exemplar
//! (` # {…} value [ts]`, ignored) and `# EOF` (ends the scrape).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// What kind of metric a family is (`# TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricKind {
    /// Only goes up (reset on restart).
    Counter,
    /// Any value.
    Gauge,
    /// Cumulative `_bucket{le=…}` counts with `_sum` and `_count`.
    Histogram,
    /// `{quantile=…}` values with `_sum` and `_count`.
    Summary,
    /// No `# TYPE`, or a type this parser does not know (`info`, `stateset`, …).
    Untyped,
}

impl MetricKind {
    fn parse(s: &str) -> MetricKind {
        match s {
            "counter" => MetricKind::Counter,
            "gauge" => MetricKind::Gauge,
            "histogram" | "gaugehistogram" => MetricKind::Histogram,
            "summary" => MetricKind::Summary,
            _ => MetricKind::Untyped,
        }
    }

    /// The `# TYPE` word for this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
            MetricKind::Summary => "summary",
            MetricKind::Untyped => "untyped",
        }
    }

    /// The sample-name suffixes that belong to a family of this kind.
    fn suffixes(self) -> &'static [&'static str] {
        match self {
            MetricKind::Counter => &["_total", "_created"],
            MetricKind::Histogram => &["_bucket", "_sum", "_count", "_created", "_gcount", "_gsum"],
            MetricKind::Summary => &["_sum", "_count", "_created"],
            MetricKind::Gauge | MetricKind::Untyped => &[],
        }
    }
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's own name (`…_bucket`, `…_total`, …).
    pub name: String,
    /// Its labels, in the order written, values unescaped.
    pub labels: Labels,
    /// Its value.
    pub value: f64,
    /// Its timestamp, if the line had one (as written: ms in 0.0.4, s in OpenMetrics).
    pub timestamp: Option<f64>,
}

impl Sample {
    /// The value of label `name`.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A metric family: its samples under one name and type.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The family's name (the `# TYPE` name, or the sample name when untyped).
    pub name: String,
    /// Its kind.
    pub kind: MetricKind,
    /// Its `# HELP` text.
    pub help: Option<String>,
    /// Its samples, in the order written.
    pub samples: Vec<Sample>,
}

/// A line that did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedLine {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub reason: String,
}

/// One parsed scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// Families in the order first seen.
    pub families: Vec<Family>,
    /// Lines skipped, with why.
    pub skipped: Vec<SkippedLine>,
}

impl Scrape {
    /// Parses a whole exposition. Never fails: bad lines land in `skipped`.
    pub fn parse(text: &str) -> Scrape {
        let mut b = Builder::default();
        for (i, raw) in text.split('\n').enumerate() {
            let line = raw.strip_suffix('\r').unwrap_or(raw).trim_start();
            if line.trim().is_empty() {
                continue;
            }
            match b.line(line) {
                Ok(Flow::Go) => {}
                Ok(Flow::Eof) => break,
                Err(reason) => b.scrape.skipped.push(SkippedLine {
                    line: i + 1,
                    reason,
                }),
            }
        }
        b.scrape
    }

    /// The family named `name`.
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    /// Every sample named exactly `name` (in whichever family holds it).
    pub fn samples<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.families
            .iter()
            .flat_map(|f| f.samples.iter())
            .filter(move |s| s.name == name)
    }
}

enum Flow {
    Go,
    Eof,
}

#[derive(Default)]
struct Builder {
    scrape: Scrape,
    /// Family name -> index.
    index: HashMap<String, usize>,
    /// Sample name -> index of the family it was found to belong to.
    resolved: HashMap<String, usize>,
}

impl Builder {
    fn line(&mut self, line: &str) -> Result<Flow, String> {
        if let Some(rest) = line.strip_prefix('#') {
            return Ok(self.comment(rest.trim_start()));
        }
        let sample = parse_sample(line)?;
        let at = self.family_for(&sample.name);
        self.scrape.families[at].samples.push(sample);
        Ok(Flow::Go)
    }

    fn comment(&mut self, rest: &str) -> Flow {
        let (word, tail) = split_word(rest);
        match word {
            "EOF" if tail.trim().is_empty() => return Flow::Eof,
            "HELP" => {
                let (name, text) = split_word(tail.trim_start());
                if valid_name(name) {
                    let at = self.declare(name);
                    let text = text.strip_prefix(' ').unwrap_or(text);
                    self.scrape.families[at].help = Some(unescape_help(text));
                }
            }
            "TYPE" => {
                let (name, kind) = split_word(tail.trim_start());
                if valid_name(name) {
                    let at = self.declare(name);
                    self.scrape.families[at].kind = MetricKind::parse(kind.trim());
                }
            }
            // `# UNIT` and every other comment: nothing to keep.
            _ => {}
        }
        Flow::Go
    }

    /// The family declared (by HELP or TYPE) as `name`, created if new.
    fn declare(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        self.push(name, MetricKind::Untyped)
    }

    fn push(&mut self, name: &str, kind: MetricKind) -> usize {
        let i = self.scrape.families.len();
        self.scrape.families.push(Family {
            name: name.to_owned(),
            kind,
            help: None,
            samples: Vec::new(),
        });
        self.index.insert(name.to_owned(), i);
        i
    }

    /// Which family a sample belongs to: the family of its exact name, else the one
    /// whose kind owns the suffix it carries (`x_bucket` -> histogram `x`, `x_total`
    /// -> counter `x`), else a new untyped family of its own.
    fn family_for(&mut self, sample: &str) -> usize {
        if let Some(&i) = self.index.get(sample).or_else(|| self.resolved.get(sample)) {
            return i;
        }
        let owner = self.scrape.families.iter().position(|f| {
            sample
                .strip_prefix(f.name.as_str())
                .is_some_and(|suffix| f.kind.suffixes().contains(&suffix))
        });
        let i = owner.unwrap_or_else(|| self.push(sample, MetricKind::Untyped));
        self.resolved.insert(sample.to_owned(), i);
        i
    }
}

/// The first whitespace-separated word and the rest (starting at the whitespace).
fn split_word(s: &str) -> (&str, &str) {
    let end = s.find([' ', '\t']).unwrap_or(s.len());
    (&s[..end], &s[end..])
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn unescape_help(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('\\') => out.push('\\'),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `name{labels} value [timestamp] [# exemplar]`.
fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err(format!("not a metric name at {:?}", clip(line)));
    }
    let mut rest = line[name_end..].trim_start_matches([' ', '\t']);
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, tail) = parse_labels(after)?;
        labels = parsed;
        rest = tail;
    }
    // After the labels, or the name, at least one blank before the value.
    let mut words = rest.split([' ', '\t']).filter(|w| !w.is_empty());
    let value_text = words.next().ok_or_else(|| format!("{name}: no value"))?;
    let value = parse_value(value_text).ok_or_else(|| format!("{name}: value {value_text:?}"))?;
    let timestamp = match words.next() {
        None | Some("#") => None,
        Some(ts) => Some(
            parse_value(ts)
                .filter(|t| t.is_finite())
                .ok_or_else(|| format!("{name}: timestamp {ts:?}"))?,
        ),
    };
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
        timestamp,
    })
}

/// A value as the format spells it: Go's float syntax, which Rust's `f64` parser
/// reads too (`+Inf`, `-Inf`, `NaN` in any case, exponents).
pub fn parse_value(s: &str) -> Option<f64> {
    s.parse::<f64>().ok()
}

/// A sample's labels, in the order written.
pub type Labels = Vec<(String, String)>;

/// The labels after `{`, up to and including `}`; returns them and what follows.
fn parse_labels(s: &str) -> Result<(Labels, &str), String> {
    let mut labels = Vec::new();
    let mut rest = s;
    loop {
        rest = rest.trim_start_matches([' ', '\t']);
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((labels, after));
        }
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = &rest[..name_end];
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("label name expected at {:?}", clip(rest)));
        }
        rest = rest[name_end..].trim_start_matches([' ', '\t']);
        rest = rest
            .strip_prefix('=')
            .ok_or_else(|| format!("label {name}: `=` expected"))?
            .trim_start_matches([' ', '\t']);
        rest = rest
            .strip_prefix('"')
            .ok_or_else(|| format!("label {name}: a quoted value expected"))?;
        let (value, after) = quoted(rest).ok_or_else(|| format!("label {name}: unclosed quote"))?;
        labels.push((name.to_owned(), value));
        rest = after.trim_start_matches([' ', '\t']);
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with('}') {
            return Err(format!("label {name}: `,` or `}}` expected"));
        }
    }
}

/// A label value after its opening quote, unescaped (`\\`, `\"`, `\n`; any other
/// backslash is kept as written), and what follows the closing quote.
fn quoted(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[i + 1..])),
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, '"')) => out.push('"'),
                Some((_, '\\')) => out.push('\\'),
                Some((_, other)) => {
                    out.push('\\');
                    out.push(other);
                }
                None => return None,
            },
            _ => out.push(c),
        }
    }
    None
}

/// A line's start, for an error message.
fn clip(s: &str) -> String {
    s.chars().take(60).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_take_their_suffixed_samples() {
        let s = Scrape::parse(
            "# HELP x_seconds Time.\n# TYPE x_seconds histogram\n\
             x_seconds_bucket{le=\"0.1\"} 1\nx_seconds_bucket{le=\"+Inf\"} 3\n\
             x_seconds_sum 0.5\nx_seconds_count 3\n\
             # TYPE req counter\nreq_total 7\n# TYPE tgi_ok counter\ntgi_ok 9\n\
             loose 1\n",
        );
        assert!(s.skipped.is_empty(), "{:?}", s.skipped);
        let h = s.family("x_seconds").unwrap();
        assert_eq!(h.kind, MetricKind::Histogram);
        assert_eq!(h.help.as_deref(), Some("Time."));
        assert_eq!(h.samples.len(), 4);
        assert_eq!(h.samples[1].label("le"), Some("+Inf"));
        assert_eq!(s.family("req").unwrap().samples[0].value, 7.0);
        // A counter without `_total` (TGI, Triton) is its own sample.
        assert_eq!(s.family("tgi_ok").unwrap().samples[0].value, 9.0);
        assert_eq!(s.family("loose").unwrap().kind, MetricKind::Untyped);
    }

    #[test]
    fn labels_with_escapes_spaces_and_odd_characters() {
        let s = Scrape::parse(
            "m{a=\"x,y}=\\\"q\\\"\",b = \"l1\\nl2\" , c=\"C:\\\\dir\\d\",} 1.5e-05 1700000000000\n\
             e{} +Inf\nn NaN\nneg -inf\n",
        );
        assert!(s.skipped.is_empty(), "{:?}", s.skipped);
        let m = &s.family("m").unwrap().samples[0];
        assert_eq!(m.label("a"), Some("x,y}=\"q\""));
        assert_eq!(m.label("b"), Some("l1\nl2"));
        assert_eq!(m.label("c"), Some("C:\\dir\\d"));
        assert_eq!(m.value, 1.5e-5);
        assert_eq!(m.timestamp, Some(1.7e12));
        assert_eq!(s.family("e").unwrap().samples[0].value, f64::INFINITY);
        assert!(s.family("n").unwrap().samples[0].value.is_nan());
        assert_eq!(s.family("neg").unwrap().samples[0].value, f64::NEG_INFINITY);
    }

    #[test]
    fn openmetrics_exemplars_created_and_eof() {
        let s = Scrape::parse(
            "# TYPE r counter\n# UNIT r seconds\nr_total 3 # {trace_id=\"a\"} 1 1.5\n\
             r_created 1.7e9\n# EOF\nafter 1\n",
        );
        assert!(s.skipped.is_empty(), "{:?}", s.skipped);
        let r = s.family("r").unwrap();
        assert_eq!(r.samples.len(), 2);
        assert_eq!(r.samples[0].timestamp, None);
        assert!(s.family("after").is_none(), "nothing after # EOF");
    }

    #[test]
    fn bad_lines_are_skipped_with_their_number_and_the_rest_is_kept() {
        let s = Scrape::parse(
            "ok 1\r\n...\r\nm{a=\"open} 1\nm{a=1} 2\nm{\"x\"=\"y\"} 3\nnovalue\nv abc\nok2 2 zz\nlast 3\n",
        );
        let lines: Vec<usize> = s.skipped.iter().map(|l| l.line).collect();
        assert_eq!(lines, [2, 3, 4, 5, 6, 7, 8], "{:?}", s.skipped);
        assert_eq!(s.family("ok").unwrap().samples[0].value, 1.0);
        assert_eq!(s.family("last").unwrap().samples[0].value, 3.0);
        assert!(
            s.skipped[1].reason.contains("unclosed quote"),
            "{:?}",
            s.skipped[1]
        );
    }

    #[test]
    fn help_without_text_and_type_before_help() {
        let s = Scrape::parse(
            "# HELP DCGM_FI_DEV_SLOWDOWN_TEMP\n# TYPE g gauge\n# HELP g Line\\none \\\\ two\ng 1\n",
        );
        assert_eq!(
            s.family("DCGM_FI_DEV_SLOWDOWN_TEMP")
                .unwrap()
                .help
                .as_deref(),
            Some("")
        );
        let g = s.family("g").unwrap();
        assert_eq!(g.kind, MetricKind::Gauge);
        assert_eq!(g.help.as_deref(), Some("Line\none \\ two"));
    }
}
