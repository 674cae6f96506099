//! Small helpers shared by the subcommands: parsers (core's), URLs, secrets.

pub use tokenscope_measure::parse::{
    parse_duration, parse_duration_or_zero, parse_f64_list, parse_u32_list,
};

/// A secret (API key): never printed, logged or serialized.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Wrap a secret.
    pub fn new(s: String) -> Self {
        Self(s)
    }

    /// The secret itself, for the one place that sends it (the Authorization header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A URL for reports and messages: no credentials, no query, no fragment.
pub fn redact_url(url: &reqwest::Url) -> String {
    tokenscope_measure::parse::redact_url(url.as_str())
        .trim_end_matches('/')
        .to_owned()
}

/// Parse an OpenAI-compatible base URL (core's parser: the same rules as the
/// page's) into the URL requests go to, and a note for the user when the URL was
/// changed beyond trimming (a pasted `/chat/completions` removed, `/v1` added).
pub fn parse_base_url(s: &str) -> Result<(reqwest::Url, Option<String>), String> {
    let base = tokenscope_measure::parse::parse_base_url(s)?;
    let url = reqwest::Url::parse(&base.url)
        .map_err(|e| format!("{:?} is not a URL ({e})", base.redacted()))?;
    Ok((url, base.note()))
}

/// `base` + `/` + `path`, keeping the base's query (some gateways put the API
/// version there).
pub fn join_url(base: &reqwest::Url, path: &str) -> reqwest::Url {
    let mut u = base.clone();
    let p = format!("{}/{}", base.path().trim_end_matches('/'), path);
    u.set_path(&p);
    u
}

/// CPU time used by this process so far (user + system), seconds. Linux only.
pub fn process_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 here.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // USER_HZ is 100 on every Linux configuration in practice.
    Some((utime + stime) / 100.0)
}

/// Wall-clock now, ms since the Unix epoch.
pub fn unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// RFC 3339 UTC time of now (for "started_at" in reports).
pub fn now_rfc3339() -> String {
    rfc3339_of_ms(unix_ms())
}

/// RFC 3339 UTC time (whole seconds) of `ms` since the Unix epoch.
pub fn rfc3339_of_ms(ms: f64) -> String {
    let secs = (ms / 1000.0).max(0.0) as u64;
    let days = secs / 86_400;
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    let (y, mo, d) = tokenscope_measure::parse::civil_from_days(days as i64);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

/// A model's shape from a Hugging Face `config.json`, named after the file (or,
/// for a file called `config.json`, after its directory): the one reader the
/// subcommands share. `flag` names the option in errors.
pub fn model_from_config(
    path: &std::path::Path,
    flag: &str,
) -> crate::error::Result<tokenscope_hw::floor::ModelShape> {
    use crate::error::Error;
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::file(flag, path, "cannot read", e))?;
    tokenscope_hw::floor::ModelShape::from_hf_config(&model_name_for(path), &text)
        .map_err(|e| Error::Option(format!("{flag} {}: {e}", path.display())))
}

/// The name a custom model's config gives it.
fn model_name_for(path: &std::path::Path) -> String {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("custom");
    if stem != "config" {
        return stem.to_string();
    }
    path.canonicalize()
        .ok()
        .and_then(|p| {
            p.parent()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "custom".into())
}

/// An error and its causes, `: `-joined (reqwest's own message alone is "error
/// sending request"; the cause says "Connection refused").
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// Ok for a 2xx answer to a push (remote write, OTLP); else `HTTP <status> <the
/// first 200 characters of its body>`.
pub async fn accepted(resp: reqwest::Response) -> Result<(), String> {
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let text = resp.text().await.unwrap_or_default();
    let text: String = text.trim().chars().take(200).collect();
    Err(format!("HTTP {status} {text}").trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    /// `--start-at`'s parser against the times this module writes.
    #[test]
    fn rfc3339_times_read_back() {
        use tokenscope_measure::parse::rfc3339_ms as parse_rfc3339_ms;
        let now = unix_ms();
        let t = parse_rfc3339_ms(&now_rfc3339()).unwrap();
        assert!((now - t).abs() < 2000.0, "{now} vs {t}");
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Ok(0.0));
        assert_eq!(
            parse_rfc3339_ms("2000-03-01T00:00:01.5Z"),
            Ok(951_868_801_500.0)
        );
        assert_eq!(
            parse_rfc3339_ms("2026-12-03T15:00:00+01:00"),
            parse_rfc3339_ms("2026-12-03T14:00:00Z")
        );
        assert_eq!(
            parse_rfc3339_ms("2026-12-03T13:30:00-00:30"),
            parse_rfc3339_ms("2026-12-03T14:00:00Z")
        );
        for bad in [
            "",
            "2026-12-03",
            "2026-13-01T00:00:00Z",
            "2026-12-03T14:00:00",
            "2026-12-03 14:00:00Z",
            "noon",
        ] {
            assert!(parse_rfc3339_ms(bad).is_err(), "{bad}");
        }
    }

    use super::*;

    #[test]
    fn urls() {
        let (u, note) = parse_base_url("http://127.0.0.1:8000").unwrap();
        assert_eq!(u.as_str(), "http://127.0.0.1:8000/v1");
        assert!(note.unwrap().contains("/v1"));
        let (u, note) = parse_base_url("http://127.0.0.1:8000/v1/chat/completions").unwrap();
        assert_eq!(u.as_str(), "http://127.0.0.1:8000/v1");
        assert!(
            note.unwrap()
                .contains("removed the endpoint path /chat/completions")
        );
        let (u, note) = parse_base_url("https://user:pw@api.example.com/v1/?key=sk-123").unwrap();
        assert_eq!(note, None);
        assert_eq!(redact_url(&u), "https://api.example.com/v1");
        assert_eq!(
            join_url(&u, "chat/completions").path(),
            "/v1/chat/completions"
        );
        assert!(parse_base_url("ftp://x").is_err());
        let e = parse_base_url("http://u:sk-1@host:99999/v1?key=sk-2#sk-3").unwrap_err();
        assert!(!e.contains("sk-"), "{e}");
        assert!(parse_base_url("not a url").is_err());
        let s = Secret::new("sk-secret".into());
        assert_eq!(format!("{s:?}"), "Secret(***)");
    }

    #[test]
    fn rfc3339_shape() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z'));
        assert!(t.starts_with("20"));
    }
}
