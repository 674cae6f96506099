//! Parsers of what people type, shared by the CLI and the page: durations, byte
//! sizes, comma-separated lists and endpoint base URLs. Errors name the bad value (never
//! a secret a URL may carry).

use std::time::Duration;

/// Parse a duration: `250ms`, `60s`, `30m`, `1h`, or a plain number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    match duration_ms(s)? {
        ms if ms > 0.0 => from_ms(s, ms),
        _ => Err(format!("{s:?} must be a positive duration")),
    }
}

/// [`parse_duration`], where zero means "none" (`0`, `0s`): for waits a user
/// may switch off, such as `--metrics-linger`.
pub fn parse_duration_or_zero(s: &str) -> Result<Duration, String> {
    match duration_ms(s)? {
        ms if ms >= 0.0 => from_ms(s, ms),
        _ => Err(format!("{s:?} must be zero or a positive duration")),
    }
}

fn from_ms(s: &str, ms: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(ms / 1000.0).map_err(|_| format!("{s:?} is too long a duration"))
}

/// A duration's number and unit, in ms (any sign); a finite number.
fn duration_ms(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, unit_ms) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1000.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60_000.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3_600_000.0)
    } else if let Some(n) = t.strip_suffix('d') {
        (n, 86_400_000.0)
    } else {
        (t, 1000.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 500ms, 60s, 30m, 1h, 7d)"))?;
    if !v.is_finite() {
        return Err(format!("{s:?} must be a positive duration"));
    }
    Ok(v * unit_ms)
}

/// Parse a comma-separated list of positive integers (`1,4,8`).
pub fn parse_u32_list(s: &str) -> Result<Vec<u32>, String> {
    let items: Result<Vec<u32>, String> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| match x.parse::<u32>() {
            Ok(0) => Err(format!("{x:?} must be at least 1")),
            Ok(v) => Ok(v),
            Err(_) => Err(format!("{x:?} is not a positive whole number")),
        })
        .collect();
    let items = items?;
    if items.is_empty() {
        return Err("the list is empty".into());
    }
    Ok(items)
}

/// Parse a comma-separated list of positive numbers (`2.5,5`).
pub fn parse_f64_list(s: &str) -> Result<Vec<f64>, String> {
    let items: Result<Vec<f64>, String> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| match x.parse::<f64>() {
            Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
            Ok(_) => Err(format!("{x:?} must be a positive number")),
            Err(_) => Err(format!("{x:?} is not a number")),
        })
        .collect();
    let items = items?;
    if items.is_empty() {
        return Err("the list is empty".into());
    }
    Ok(items)
}

/// An endpoint's base URL (`http://host:port/v1`), normalized from what was typed
/// or pasted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    /// `scheme://[user:pass@]host[:port]/path`, no trailing slash, the query kept
    /// (gateways take `?api-version=...`), no fragment: where requests go.
    pub url: String,
    /// An endpoint path pasted after the base and removed (`/chat/completions`).
    pub stripped: Option<&'static str>,
    /// `/v1` was added because the URL had no path.
    pub added_v1: bool,
    /// The URL carries `user:password@` (kept out of every output; the page
    /// refuses it and asks for the key field instead).
    pub has_credentials: bool,
}

/// Endpoint paths people paste after the base URL.
const ENDPOINT_SUFFIXES: [&str; 5] = [
    "/chat/completions",
    "/completions",
    "/responses",
    "/messages",
    "/models",
];

impl BaseUrl {
    /// The URL of `path` under the base (`chat/completions`), the query kept.
    pub fn endpoint(&self, path: &str) -> String {
        let (base, query) = split_query(&self.url);
        let mut out = format!("{}/{}", base, path.trim_start_matches('/'));
        if let Some(q) = query {
            out.push('?');
            out.push_str(q);
        }
        out
    }

    /// `scheme://host[:port]`: where the server's other routes (`/metrics`) are;
    /// no credentials, path or query.
    pub fn origin(&self) -> String {
        let (scheme, after) = self.url.split_once("://").unwrap_or(("http", &self.url));
        let authority = after.split(['/', '?']).next().unwrap_or("");
        let host = authority.rsplit('@').next().unwrap_or("");
        format!("{scheme}://{host}")
    }

    /// The URL for reports and messages: no credentials, no query.
    pub fn redacted(&self) -> String {
        redact_url(&self.url)
    }

    /// A note for the user when the URL was changed beyond trimming, e.g.
    /// `removed the endpoint path /chat/completions`.
    pub fn note(&self) -> Option<String> {
        match (self.stripped, self.added_v1) {
            (Some(p), _) => Some(format!(
                "removed the endpoint path {p} from the URL: using the base {}",
                self.redacted()
            )),
            (None, true) => Some(format!(
                "the URL has no path: using {} (OpenAI-compatible servers serve /v1)",
                self.redacted()
            )),
            (None, false) => None,
        }
    }
}

fn split_query(url: &str) -> (&str, Option<&str>) {
    match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    }
}

/// A URL made safe to print, even one that does not parse: no query, no
/// fragment, no `user:password@` (any of them may hold a key).
///
/// The credentials go first: a password may hold `?`, `#` or `/`, so cutting
/// the query first could show part of it. They end at the last `@` before the
/// first `/` that follows the first `@`; an `@` only in the query (an e-mail
/// address) may then take the host with it, which hides too much, never too
/// little.
pub fn redact_url(s: &str) -> String {
    let s = s.trim();
    let (scheme, rest) = match s.find("://") {
        Some(i) => (&s[..i + 3], &s[i + 3..]),
        None => ("", s),
    };
    let rest = match rest.find('@') {
        Some(first) => {
            let end = rest[first..].find('/').map_or(rest.len(), |i| first + i);
            let at = rest[..end].rfind('@').unwrap_or(first);
            &rest[at + 1..]
        }
        None => rest,
    };
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    format!("{scheme}{rest}")
}

/// Parse an OpenAI-compatible base URL as typed: `http` or `https` with a host;
/// surrounding spaces, a trailing `/` and a pasted endpoint path
/// (`/chat/completions`, `/completions`, `/models`) removed; `/v1` added when
/// there is no path; the query kept; the fragment dropped.
pub fn parse_base_url(s: &str) -> Result<BaseUrl, String> {
    let typed = s.trim();
    let shown = redact_url(typed);
    let without_fragment = typed.split('#').next().unwrap_or("");
    let (rest, query) = split_query(without_fragment);
    let Some((scheme, after)) = rest.split_once("://") else {
        return Err(format!(
            "{shown:?} is not a URL: expected http://HOST:PORT/v1 or https://..."
        ));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!("{shown:?}: the scheme must be http or https"));
    }
    let (authority, path) = match after.find('/') {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, ""),
    };
    let has_credentials = authority.contains('@');
    let host = authority.rsplit('@').next().unwrap_or("");
    let host_name = if host.starts_with('[') {
        host.split(']').next().unwrap_or("").trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or("")
    };
    if host_name.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!("{shown:?} has no host"));
    }
    if let Some(port) = host
        .rsplit_once("]:")
        .map(|p| p.1)
        .or_else(|| (!host.starts_with('[')).then(|| host.split_once(':').map(|p| p.1))?)
        && port.parse::<u16>().is_err()
    {
        return Err(format!("{shown:?}: the port {port:?} is not a port number"));
    }
    let mut path = path.trim_end_matches('/').to_owned();
    let mut stripped = None;
    for suffix in ENDPOINT_SUFFIXES {
        if let Some(p) = path.strip_suffix(suffix) {
            path = p.trim_end_matches('/').to_owned();
            stripped = Some(suffix);
            break;
        }
    }
    let added_v1 = path.is_empty();
    if added_v1 {
        path = "/v1".into();
    }
    let mut url = format!("{}://{authority}{path}", scheme.to_ascii_lowercase());
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        url.push('?');
        url.push_str(q);
    }
    Ok(BaseUrl {
        url,
        stripped,
        added_v1: added_v1 && stripped.is_none(),
        has_credentials,
    })
}

/// A byte size as people write it: `80GiB`, `24 GB`, `512MiB`, `1.5TiB`, or a plain
/// number of bytes. Binary (`KiB`, `MiB`, `GiB`, `TiB`) and decimal (`KB`, `MB`,
/// `GB`, `TB`) units, case-insensitive; `G` alone is binary, as GPU memory is.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("`{text}`: expected a size such as 80GiB or 24GB"))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024f64.powi(2),
        "g" | "gib" => 1024f64.powi(3),
        "t" | "tib" => 1024f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        other => {
            return Err(format!(
                "`{text}`: unknown unit `{other}` (use GiB, GB, MiB, ...)"
            ));
        }
    };
    let bytes = n * scale;
    if !bytes.is_finite() || bytes < 1.0 {
        return Err(format!("`{text}`: must be at least one byte"));
    }
    Ok(bytes.round() as u64)
}

/// `YYYY-MM-DD HH:MM:SS[.fraction]` (or with a `T`) as ms since 1970-01-01,
/// the time taken as UTC: a trace's timestamps, and with its zone
/// ([`rfc3339_ms`]) a time someone typed.
pub fn datetime_ms(s: &str) -> Option<f64> {
    let (date, time) = s.trim().split_once([' ', 'T'])?;
    let mut d = date.split('-');
    let (y, m, day): (i64, i64, i64) = (
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
    );
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let mut t = time.split(':');
    let (h, min): (i64, i64) = (t.next()?.parse().ok()?, t.next()?.parse().ok()?);
    let sec: f64 = t.next()?.parse().ok()?;
    if t.next().is_some()
        || !(0..24).contains(&h)
        || !(0..60).contains(&min)
        || !(0.0..61.0).contains(&sec)
    {
        return None;
    }
    let days = days_from_civil(y, m, day);
    Some(((days * 24 + h) * 60 + min) as f64 * 60_000.0 + sec * 1000.0)
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian; Howard
/// Hinnant's algorithm): month 1-12, day 1-31.
pub fn days_from_civil(y: i64, m: i64, day: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date `(year, month 1-12, day 1-31)` of days since 1970-01-01
/// (the inverse of [`days_from_civil`]).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    (y, mo, d)
}

/// An RFC 3339 time (`2026-12-03T14:05:00Z`, a fraction of a second and a
/// `+01:00` offset allowed) as ms since the Unix epoch.
pub fn rfc3339_ms(s: &str) -> Result<f64, String> {
    let bad = || format!("{s:?} is not an RFC 3339 time such as 2026-12-03T14:05:00Z");
    let t = s.trim();
    let (local, offset_min) = if let Some(l) = t.strip_suffix(['Z', 'z']) {
        (l, 0.0)
    } else {
        // The offset's sign comes after the time's colons.
        let at = t.rfind(['+', '-']).filter(|&i| i > 10).ok_or_else(bad)?;
        let (l, off) = t.split_at(at);
        let (h, m) = off[1..].split_once(':').ok_or_else(bad)?;
        let (h, m): (f64, f64) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
        let sign = if off.starts_with('-') { -1.0 } else { 1.0 };
        (l, sign * (h * 60.0 + m))
    };
    if !local.contains(['T', 't']) {
        return Err(bad());
    }
    let ms = datetime_ms(&local.replace('t', "T")).ok_or_else(bad)?;
    Ok(ms - offset_min * 60_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("1e308h").unwrap_err().contains("too long"));
        assert!(parse_duration_or_zero("inf").is_err());
        assert_eq!(parse_duration_or_zero("0s").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration_or_zero("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration_or_zero(" 0.0ms ").unwrap(), Duration::ZERO);
        assert_eq!(
            parse_duration_or_zero("15s").unwrap(),
            Duration::from_secs(15)
        );
        assert!(parse_duration_or_zero("0x").unwrap_err().contains("\"0x\""));
        let e = parse_duration_or_zero("-1s").unwrap_err();
        assert!(e.contains("zero or a positive duration"), "{e}");
    }

    #[test]
    fn lists() {
        assert_eq!(parse_u32_list("1, 4,8").unwrap(), vec![1, 4, 8]);
        assert!(parse_u32_list("1,0").unwrap_err().contains("\"0\""));
        assert!(parse_f64_list("2.5,-5").unwrap_err().contains("\"-5\""));
        assert!(parse_u32_list("").is_err());
    }

    #[test]
    fn origins() {
        let o = |u: &str| parse_base_url(u).unwrap().origin();
        assert_eq!(o("http://127.0.0.1:8000/v1"), "http://127.0.0.1:8000");
        assert_eq!(
            o("https://api.example.com/openai/v1?api-version=2"),
            "https://api.example.com"
        );
        assert_eq!(
            o("http://u:secret@host:1/v1/chat/completions"),
            "http://host:1"
        );
        assert_eq!(o("http://[::1]:8080"), "http://[::1]:8080");
    }

    #[test]
    fn base_urls() {
        let b = parse_base_url(" http://127.0.0.1:8000 ").unwrap();
        assert_eq!(b.url, "http://127.0.0.1:8000/v1");
        assert!(b.added_v1 && b.stripped.is_none());
        assert!(b.note().unwrap().contains("/v1"));
        let b = parse_base_url("http://h:1/v1/chat/completions/").unwrap();
        assert_eq!(b.url, "http://h:1/v1");
        assert_eq!(b.stripped, Some("/chat/completions"));
        assert!(!b.added_v1);
        assert!(b.note().unwrap().contains("/chat/completions"));
        let b = parse_base_url(
            "https://gw.example.com/openai/deployments/x/completions?api-version=2024-02-01",
        )
        .unwrap();
        assert_eq!(
            b.url,
            "https://gw.example.com/openai/deployments/x?api-version=2024-02-01"
        );
        assert_eq!(
            b.endpoint("chat/completions"),
            "https://gw.example.com/openai/deployments/x/chat/completions?api-version=2024-02-01"
        );
        assert_eq!(b.redacted(), "https://gw.example.com/openai/deployments/x");
        // A paste of the models URL, or of the newer APIs' endpoints, gives the base too.
        for api in ["responses", "messages"] {
            let b = parse_base_url(&format!("https://api.example.com/v1/{api}")).unwrap();
            assert_eq!(b.url, "https://api.example.com/v1");
        }
        assert_eq!(
            parse_base_url("http://h/v1/models").unwrap().url,
            "http://h/v1"
        );
        assert_eq!(parse_base_url("http://h/v1").unwrap().note(), None);
        assert_eq!(
            parse_base_url("http://[::1]:8000/v1#x").unwrap().url,
            "http://[::1]:8000/v1"
        );
    }

    #[test]
    fn bad_base_urls_name_the_problem_and_never_a_secret() {
        assert!(parse_base_url("ftp://x").unwrap_err().contains("scheme"));
        assert!(
            parse_base_url("not a url")
                .unwrap_err()
                .contains("not a URL")
        );
        assert!(
            parse_base_url("http:///v1")
                .unwrap_err()
                .contains("no host")
        );
        for bad in [
            "http://u:sk-1@host:99999/v1?key=sk-2#sk-3",
            "gopher://u:sk-1@h/?key=sk-2",
            "http://u:sk-1@/v1",
        ] {
            let e = parse_base_url(bad).unwrap_err();
            assert!(!e.contains("sk-"), "{e}");
        }
        let b = parse_base_url("https://user:sk-9@api.example.com/v1/?key=sk-123").unwrap();
        assert!(b.has_credentials);
        assert_eq!(b.redacted(), "https://api.example.com/v1");
        assert_eq!(redact_url("https://a:b@h/p?q"), "https://h/p");
        // A password holding '?', '#', '/' or '@' never shows, not even in part.
        for url in [
            "https://u:pa?ss@h/p",
            "https://u:pa#ss@h/p",
            "https://u:p/a?ss@h/p?x=1",
            "https://u:p@ss@h/p",
        ] {
            let shown = redact_url(url);
            assert_eq!(shown, "https://h/p", "{url}");
        }
        assert_eq!(redact_url("http://u:s3cret@"), "http://");
        assert_eq!(redact_url("h:1/v1?k=x"), "h:1/v1");
    }

    #[test]
    fn sizes_as_people_write_them() {
        assert_eq!(parse_bytes("80GiB").unwrap(), 80 * (1u64 << 30));
        assert_eq!(parse_bytes("80 gib").unwrap(), 80 * (1u64 << 30));
        assert_eq!(parse_bytes("24GB").unwrap(), 24_000_000_000);
        assert_eq!(parse_bytes("1.5G").unwrap(), 3 * (1u64 << 30) / 2);
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert!(parse_bytes("80 furlongs").unwrap_err().contains("furlongs"));
        assert!(parse_bytes("GiB").is_err());
        assert!(parse_bytes("0").is_err());
    }
}
