//! Which proxy the run's requests go through: `--proxy URL`, else the
//! environment's `HTTPS_PROXY` (https endpoints) or `HTTP_PROXY` (http ones),
//! else `ALL_PROXY` (each also lowercase, which wins as in curl), unless
//! `NO_PROXY` names the endpoint's host. Decided once, here, so that the report
//! says exactly what was used (its host, never its credentials).

use std::net::IpAddr;

/// The proxy chosen for the endpoint. Its `Debug` shows what [`Self::display`]
/// does: the URL's credentials never reach a log.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyChoice {
    /// Its URL (credentials included: used, never shown).
    pub url: reqwest::Url,
    /// `--proxy`, or the environment variable it came from.
    pub from: String,
}

impl std::fmt::Debug for ProxyChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyChoice")
            .field("url", &self.display())
            .field("credentials", &self.has_credentials())
            .field("from", &self.from)
            .finish()
    }
}

impl ProxyChoice {
    /// Scheme, host and port: what may be printed and reported.
    pub fn display(&self) -> String {
        let host = self.url.host_str().unwrap_or("?");
        match self.url.port_or_known_default() {
            Some(p) => format!("{}://{host}:{p}", self.url.scheme()),
            None => format!("{}://{host}", self.url.scheme()),
        }
    }

    /// It carries a user name or password.
    pub fn has_credentials(&self) -> bool {
        !self.url.username().is_empty() || self.url.password().is_some()
    }
}

/// The proxy settings as given (`--proxy`, and the environment's proxy
/// variables read once), to choose a proxy for any URL: the scrapes of other
/// hosts' `/metrics` follow the same rules as the run. `Debug` shows only which
/// variables are set.
#[derive(Clone, Default)]
pub struct ProxyRules {
    flag: Option<String>,
    vars: Vec<(String, String)>,
}

impl std::fmt::Debug for ProxyRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.vars.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ProxyRules")
            .field("flag", &self.flag.is_some())
            .field("vars", &names)
            .finish()
    }
}

impl ProxyRules {
    /// The variables [`choose`] reads.
    const VARS: [&'static str; 8] = [
        "https_proxy",
        "HTTPS_PROXY",
        "http_proxy",
        "HTTP_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
    ];

    /// `--proxy`'s value and the environment's proxy variables.
    pub fn read(flag: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> Self {
        Self {
            flag: flag.map(str::to_owned),
            vars: Self::VARS
                .iter()
                .filter_map(|n| env(n).map(|v| ((*n).to_owned(), v)))
                .collect(),
        }
    }

    /// The proxy for requests to `target`, by [`choose`].
    pub fn choose(&self, target: &reqwest::Url) -> Result<Option<ProxyChoice>, String> {
        let env = |n: &str| {
            self.vars
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.clone())
        };
        choose(target, self.flag.as_deref(), &env)
    }
}

/// The proxy for requests to `target`. `flag` is `--proxy`'s value; `env` reads
/// an environment variable. An unparsable proxy URL is an error naming where it
/// came from (without its credentials).
pub fn choose(
    target: &reqwest::Url,
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ProxyChoice>, String> {
    let get = |name: &str| -> Option<(String, String)> {
        let lower = name.to_ascii_lowercase();
        [lower, name.to_owned()]
            .into_iter()
            .find_map(|n| env(&n).filter(|v| !v.trim().is_empty()).map(|v| (n, v)))
    };
    let host = target.host_str().unwrap_or_default();
    let (from, value) = match flag {
        Some(v) => ("--proxy".to_owned(), v.to_owned()),
        None => {
            let scheme_var = if target.scheme() == "https" {
                "HTTPS_PROXY"
            } else {
                "HTTP_PROXY"
            };
            match get(scheme_var).or_else(|| get("ALL_PROXY")) {
                Some(found) => found,
                None => return Ok(None),
            }
        }
    };
    let port = target.port_or_known_default();
    if let Some((_, no_proxy)) = get("NO_PROXY")
        && bypasses(&no_proxy, host, port)
    {
        return Ok(None);
    }
    let with_scheme = if value.contains("://") {
        value.clone()
    } else {
        format!("http://{value}")
    };
    let url = reqwest::Url::parse(&with_scheme).map_err(|e| {
        format!(
            "{from}: {:?} is not a proxy URL ({e})",
            tokenscope_measure::parse::redact_url(&with_scheme)
        )
    })?;
    if url.scheme().starts_with("socks") {
        return Err(format!(
            "{from}: {} is a SOCKS proxy; tokenscope speaks to HTTP(S) proxies only (http://HOST:PORT, or https://)",
            tokenscope_measure::parse::redact_url(&with_scheme)
        ));
    }
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(format!(
            "{from}: {} is not a proxy URL (http://HOST:PORT or https://HOST:PORT)",
            tokenscope_measure::parse::redact_url(&with_scheme)
        ));
    }
    Ok(Some(ProxyChoice { url, from }))
}

/// Whether `NO_PROXY` names `host` (on `port`). Its entries, comma- or
/// space-separated, as curl reads them: `*`; host names matching themselves
/// and their subdomains (a leading `.` or `*.` and a trailing `.` ignored); IP
/// addresses (IPv6 with or without brackets) and CIDR blocks; any of them with
/// `:PORT`, which then matches that port only.
pub fn bypasses(no_proxy: &str, host: &str, port: Option<u16>) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = host.strip_suffix('.').unwrap_or(host);
    let ip: Option<IpAddr> = host.parse().ok();
    no_proxy
        .split([',', ' '])
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .any(|entry| {
            if entry == "*" {
                return true;
            }
            let (entry, entry_port) = split_port(entry);
            if entry_port.is_some() && entry_port != port {
                return false;
            }
            let entry = entry.trim_start_matches('[').trim_end_matches(']');
            if let Some(ip) = ip {
                return match entry.split_once('/') {
                    Some((net, bits)) => match (net.parse::<IpAddr>(), bits.parse::<u32>()) {
                        (Ok(net), Ok(bits)) => in_cidr(ip, net, bits),
                        _ => false,
                    },
                    None => entry.parse::<IpAddr>() == Ok(ip),
                };
            }
            let domain = entry.trim_start_matches('*').trim_start_matches('.');
            let domain = domain
                .strip_suffix('.')
                .unwrap_or(domain)
                .to_ascii_lowercase();
            let host = host.to_ascii_lowercase();
            host == domain || host.ends_with(&format!(".{domain}"))
        })
}

/// A `NO_PROXY` entry and its `:PORT`, if it has one: `host:80`, `[::1]:80`,
/// `10.0.0.1:80`; a bare IPv6 address (`::1`, `fd00::/8`) has none.
fn split_port(entry: &str) -> (&str, Option<u16>) {
    if let Some(rest) = entry.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((ip, tail)) => (ip, tail.strip_prefix(':').and_then(|p| p.parse().ok())),
            None => (entry, None),
        };
    }
    match entry.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => match p.parse() {
            Ok(p) => (h, Some(p)),
            Err(_) => (entry, None),
        },
        _ => (entry, None),
    }
}

fn in_cidr(ip: IpAddr, net: IpAddr, bits: u32) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) if bits <= 32 => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) if bits <= 128 => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |n| {
            vars.iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn url(s: &str) -> reqwest::Url {
        reqwest::Url::parse(s).unwrap()
    }

    #[test]
    fn the_scheme_picks_the_variable_and_lowercase_wins() {
        let vars = [
            ("HTTPS_PROXY", "http://upper:1"),
            ("https_proxy", "http://lower:2"),
            ("HTTP_PROXY", "http://plain:3"),
        ];
        let e = env(&vars);
        let p = choose(&url("https://api.example.com/v1"), None, &e)
            .unwrap()
            .unwrap();
        assert_eq!(
            (p.display().as_str(), p.from.as_str()),
            ("http://lower:2", "https_proxy")
        );
        let p = choose(&url("http://api.example.com/v1"), None, &e)
            .unwrap()
            .unwrap();
        assert_eq!(
            (p.display().as_str(), p.from.as_str()),
            ("http://plain:3", "HTTP_PROXY")
        );
        let all = [("ALL_PROXY", "proxy.corp:3128")];
        let p = choose(&url("http://x/v1"), None, &env(&all))
            .unwrap()
            .unwrap();
        assert_eq!(p.display(), "http://proxy.corp:3128");
        assert_eq!(choose(&url("http://x/v1"), None, &env(&[])).unwrap(), None);
    }

    #[test]
    fn the_flag_wins_and_credentials_are_never_shown() {
        let vars = [("HTTPS_PROXY", "http://env:1")];
        let p = choose(
            &url("https://api.example.com/v1"),
            Some("http://user:s3cret@proxy.corp:8080"),
            &env(&vars),
        )
        .unwrap()
        .unwrap();
        assert_eq!(p.from, "--proxy");
        assert_eq!(p.display(), "http://proxy.corp:8080");
        assert!(p.has_credentials());
        let err = choose(&url("https://a/v1"), Some("http://user:s3cret@"), &env(&[])).unwrap_err();
        assert!(err.contains("--proxy") && !err.contains("s3cret"), "{err}");
        for odd in [
            "http://user:s3?cret@",
            "http://user:s3#cret@p:1",
            "socks5://u:s3cret@p:1",
        ] {
            let err = choose(&url("https://a/v1"), Some(odd), &env(&[])).unwrap_err();
            assert!(!err.contains("s3"), "{err}");
        }
        let socks = choose(&url("https://a/v1"), Some("socks5h://p:1080"), &env(&[])).unwrap_err();
        assert!(socks.contains("SOCKS"), "{socks}");
        let rules = ProxyRules::read(Some("http://user:s3cret@proxy.corp:8080"), &env(&vars));
        assert!(!format!("{rules:?}").contains("s3cret"));
        assert_eq!(
            rules.choose(&url("https://other.host/metrics")).unwrap(),
            Some(p.clone())
        );
        // Debug, as a log would write it, shows no credentials.
        let shown = format!("{p:?}");
        assert!(
            shown.contains("proxy.corp:8080") && !shown.contains("s3cret"),
            "{shown}"
        );
    }

    #[test]
    fn no_proxy_matches_hosts_domains_ips_and_blocks() {
        for (list, host, yes) in [
            ("*", "anything", true),
            ("example.com", "api.example.com", true),
            (".example.com", "api.example.com", true),
            ("example.com", "example.com", true),
            ("example.com", "badexample.com", false),
            ("localhost, 127.0.0.1", "127.0.0.1", true),
            ("10.0.0.0/8", "10.1.2.3", true),
            ("10.0.0.0/8", "11.1.2.3", false),
            ("::1", "[::1]", true),
            ("fd00::/8", "fd12::1", true),
            ("", "x", false),
            ("*.example.com", "api.example.com", true),
            ("example.com.", "api.example.com", true),
            ("example.com", "api.example.com.", true),
            ("a.com b.com", "x.b.com", true),
            ("[::1]", "[::1]", true),
        ] {
            assert_eq!(bypasses(list, host, Some(443)), yes, "{list:?} vs {host}");
        }
        // An entry with a port matches that port only.
        assert!(bypasses("gw.corp:8443", "gw.corp", Some(8443)));
        assert!(!bypasses("gw.corp:8443", "gw.corp", Some(443)));
        assert!(bypasses("10.0.0.1:80", "10.0.0.1", Some(80)));
        assert!(!bypasses("[::1]:80", "[::1]", Some(81)));
        assert!(bypasses("[::1]:80", "::1", Some(80)));
        let vars = [("HTTP_PROXY", "http://p:1"), ("no_proxy", "127.0.0.1")];
        assert_eq!(
            choose(&url("http://127.0.0.1:8000/v1"), None, &env(&vars)).unwrap(),
            None
        );
        let p = choose(
            &url("http://127.0.0.1:8000/v1"),
            Some("http://p:2"),
            &env(&vars),
        )
        .unwrap();
        assert_eq!(p, None, "NO_PROXY applies to --proxy too, as in curl");
    }
}
