//! What the collector accepts: a batch from an allowed origin, under the size and
//! rate limits, in the probe's format; each turn validated on its own (a bad turn is
//! dropped and counted, its batch's good turns kept). Nothing a client sent is ever
//! echoed into a response or a log: refusals name the rule, not the content.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

use tokenscope_core::rum::{BatchError, Turn, parse_batch};

/// Why a batch was refused: the HTTP status and the counter it goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Over [`tokenscope_core::rum::MAX_BODY_BYTES`] (413).
    TooLarge,
    /// Not JSON, not the probe's schema, or too many turns (400).
    Malformed,
    /// An origin not on the allow-list, or a wrong ingest key (403).
    Forbidden,
    /// Over the client's rate (429).
    RateLimited,
    /// The store failed (503): nothing was acknowledged, the sender may retry.
    Unavailable,
}

impl Refusal {
    /// Every refusal, in counter order.
    pub const ALL: [Refusal; 5] = [
        Refusal::TooLarge,
        Refusal::Malformed,
        Refusal::Forbidden,
        Refusal::RateLimited,
        Refusal::Unavailable,
    ];

    /// Its place in [`Self::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The HTTP status.
    pub fn status(self) -> u16 {
        match self {
            Refusal::TooLarge => 413,
            Refusal::Malformed => 400,
            Refusal::Forbidden => 403,
            Refusal::RateLimited => 429,
            Refusal::Unavailable => 503,
        }
    }

    /// The counter's label, and the response's one-line reason.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::TooLarge => "too_large",
            Refusal::Malformed => "malformed",
            Refusal::Forbidden => "forbidden",
            Refusal::RateLimited => "rate_limited",
            Refusal::Unavailable => "unavailable",
        }
    }
}

/// A batch's turns, split into the valid and a count of the rest.
#[derive(Debug)]
pub struct Accepted {
    /// Turns that passed [`tokenscope_core::rum::Turn::validate`].
    pub turns: Vec<Turn>,
    /// Turns dropped.
    pub rejected: usize,
}

/// Parses and validates a body ([`parse_batch`]).
pub fn parse(body: &[u8]) -> Result<Accepted, Refusal> {
    match parse_batch(body) {
        Ok((turns, rejected)) => Ok(Accepted { turns, rejected }),
        Err(BatchError::TooLarge) => Err(Refusal::TooLarge),
        Err(BatchError::Malformed) => Err(Refusal::Malformed),
    }
}

/// Whether a request's `Origin` may post: any when the list is empty; otherwise it
/// must be on it (a missing origin too is refused: forwarders must pass it on).
pub fn origin_allowed(allowed: &[String], origin: Option<&str>) -> bool {
    allowed.is_empty() || origin.is_some_and(|o| allowed.iter().any(|a| a == o))
}

/// Most clients the rate limiter remembers.
const MAX_CLIENTS: usize = 100_000;

/// Per-client token buckets: `per_minute` batches a minute, bursts of a tenth of
/// that (at least 10). Clients are keyed by address, never stored.
#[derive(Debug)]
pub struct RateLimiter {
    per_minute: f64,
    burst: f64,
    buckets: HashMap<IpAddr, (f64, Instant)>,
}

impl RateLimiter {
    /// A limiter allowing `per_minute` batches a minute per client.
    pub fn new(per_minute: u32) -> RateLimiter {
        let per_minute = f64::from(per_minute.max(1));
        RateLimiter {
            per_minute,
            burst: (per_minute / 10.0).max(10.0),
            buckets: HashMap::new(),
        }
    }

    /// Takes a token for `client` at `now`; false when its bucket is empty. IPv6
    /// clients are keyed by their /64 (one host holds a whole /64).
    pub fn allow(&mut self, client: IpAddr, now: Instant) -> bool {
        if self.buckets.len() >= MAX_CLIENTS {
            // Forget clients whose bucket has refilled (they lose nothing), and past
            // the cap everyone: memory stays bounded under a flood of addresses.
            let (rate, burst) = (self.per_minute / 60.0, self.burst);
            self.buckets.retain(|_, (tokens, last)| {
                *tokens + now.duration_since(*last).as_secs_f64() * rate < burst
            });
            if self.buckets.len() >= MAX_CLIENTS {
                self.buckets.clear();
            }
        }
        let client = match client {
            IpAddr::V6(v6) => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
            v4 => v4,
        };
        let (tokens, last) = self.buckets.entry(client).or_insert((self.burst, now));
        let refill = now.duration_since(*last).as_secs_f64() * self.per_minute / 60.0;
        *tokens = (*tokens + refill).min(self.burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const TURN: &str = r#"{"route":"/v1/chat/completions","started_unix_ms":1.7e12,
        "ms":{"first_chunk":31.5,"first_dom":32,"first_paint":48},
        "chunks":10,"events":12,"chars":200,"paints":9,"chunks_merged":1,"stalls_250":0,"stalls_500":0,"stalls_1000":0,
        "longest_gap_ms":40,"longest_paint_gap_ms":45,"outcome":"complete","hidden":false,"restored":false,
        "paint_method":"raf+task","weight":1}"#;

    #[test]
    fn good_turns_are_kept_bad_ones_counted_garbage_refused() {
        let ok =
            parse(format!(r#"{{"schema":"tokenscope.rum/1","turns":[{TURN},{TURN}]}}"#).as_bytes())
                .unwrap();
        assert_eq!((ok.turns.len(), ok.rejected), (2, 0));
        let bad = TURN.replace("\"first_paint\":48", "\"first_paint\":-5");
        let text = TURN.replace("\"chars\":200", "\"chars\":200,\"answer\":\"secret\"");
        let mixed = parse(
            format!(r#"{{"schema":"tokenscope.rum/1","turns":[{TURN},{bad},{text}]}}"#).as_bytes(),
        )
        .unwrap();
        assert_eq!((mixed.turns.len(), mixed.rejected), (1, 2));
        for garbage in [
            &b"not json"[..],
            br#"{"schema":"other/1","turns":[]}"#,
            br#"{"turns":[]}"#,
            b"\xff\xfe",
        ] {
            assert_eq!(parse(garbage).unwrap_err(), Refusal::Malformed);
        }
        assert_eq!(
            parse(&vec![b' '; tokenscope_core::rum::MAX_BODY_BYTES + 1]).unwrap_err(),
            Refusal::TooLarge
        );
    }

    #[test]
    fn origins_and_rates() {
        let allowed = vec!["https://chat.example.com".to_string()];
        assert!(origin_allowed(&[], None));
        assert!(origin_allowed(&allowed, Some("https://chat.example.com")));
        assert!(!origin_allowed(&allowed, Some("https://evil.example")));
        assert!(!origin_allowed(&allowed, None));
        let mut r = RateLimiter::new(600);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let t0 = Instant::now();
        let burst = (0..100).filter(|_| r.allow(ip, t0)).count();
        assert_eq!(burst, 60);
        assert!(r.allow(other, t0), "each client has its own bucket");
        // 600 a minute: 10 a second come back.
        let later = t0 + Duration::from_secs(1);
        assert_eq!((0..100).filter(|_| r.allow(ip, later)).count(), 10);
        // One IPv6 /64 is one client.
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let b: IpAddr = "2001:db8::2:3".parse().unwrap();
        assert_eq!((0..100).filter(|_| r.allow(a, t0)).count(), 60);
        assert!(!r.allow(b, t0));
    }

    #[test]
    fn a_flood_of_addresses_stays_bounded() {
        let mut r = RateLimiter::new(600);
        let t0 = Instant::now();
        for i in 0..(MAX_CLIENTS as u32 + 10) {
            r.allow(IpAddr::V4(std::net::Ipv4Addr::from(i)), t0);
        }
        assert!(r.buckets.len() <= MAX_CLIENTS, "{}", r.buckets.len());
    }
}
