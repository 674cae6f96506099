//! Prometheus remote write (protocol 1.0) of the live series, for runs too short
//! for a scraper to catch (k6 does the same): every interval, one
//! `prometheus.WriteRequest` of [`Live::series`], protobuf encoded by hand (four
//! small messages) and snappy *block* compressed, POSTed with the protocol's
//! headers. A refused or failed push is counted and the run goes on; the first
//! error is kept for the report, with the URL's credentials removed.

use std::sync::Arc;
use std::time::Duration;

use super::Live;
use super::series::encode;

/// What the pushes did over the run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteWriteStats {
    /// Pushes the receiver accepted (2xx).
    pub pushes: u64,
    /// Pushes refused (non-2xx) or failed (connection, timeout).
    pub failures: u64,
    /// The first failure, saying why (no credentials).
    pub first_error: Option<String>,
}

/// Longest a push may take before it counts as failed (a hung receiver must not
/// hold up the final push at the end of the run for long).
const PUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// The shortest interval between pushes (a zero interval would spin).
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// Pushes [`Live::series`] every interval until [`RemoteWriter::stop`].
#[derive(Debug)]
pub struct RemoteWriter {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<RemoteWriteStats>,
}

impl RemoteWriter {
    /// Starts pushing to `url` every `interval` (at least [`MIN_INTERVAL`]; the
    /// first push one interval from now), on the current tokio runtime. `client`:
    /// the caller's (its proxy and TLS settings); each push has its own 10 s
    /// timeout.
    pub fn spawn(
        url: reqwest::Url,
        interval: Duration,
        live: Arc<Live>,
        client: reqwest::Client,
    ) -> Self {
        let interval = interval.max(MIN_INTERVAL);
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut pusher = Pusher {
                url,
                live,
                client,
                last_t_ms: i64::MIN,
                stats: RemoteWriteStats::default(),
            };
            let start = tokio::time::Instant::now() + interval;
            let mut ticks = tokio::time::interval_at(start, interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticks.tick() => pusher.push().await,
                    _ = &mut stopped => break,
                }
            }
            pusher.push().await;
            pusher.stats
        });
        Self { stop, task }
    }

    /// Pushes once more (the run's final figures), stops, and says how it went.
    pub async fn stop(self) -> RemoteWriteStats {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_else(|e| RemoteWriteStats {
            failures: 1,
            first_error: Some(format!("remote write stopped abnormally: {e}")),
            ..RemoteWriteStats::default()
        })
    }
}

struct Pusher {
    url: reqwest::Url,
    live: Arc<Live>,
    client: reqwest::Client,
    /// The last push's timestamp: each push's is later (a receiver rejects a
    /// second, different sample at the same millisecond).
    last_t_ms: i64,
    stats: RemoteWriteStats,
}

impl Pusher {
    async fn push(&mut self) {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let t_ms = now_ms.max(self.last_t_ms.saturating_add(1));
        self.last_t_ms = t_ms;
        let body = encode(&self.live.series(t_ms));
        match self.send(body).await {
            Ok(()) => self.stats.pushes += 1,
            Err(why) => {
                self.stats.failures += 1;
                if self.stats.first_error.is_none() {
                    let url = crate::util::redact_url(&self.url);
                    self.stats.first_error = Some(format!("remote write to {url}: {why}"));
                }
            }
        }
    }

    async fn send(&self, body: Vec<u8>) -> Result<(), String> {
        let resp = self
            .client
            .post(self.url.clone())
            .timeout(PUSH_TIMEOUT)
            .header("Content-Encoding", "snappy")
            .header("Content-Type", "application/x-protobuf")
            .header("X-Prometheus-Remote-Write-Version", "0.1.0")
            .body(body)
            .send()
            .await
            // The error without its URL: that one may carry credentials.
            .map_err(|e| crate::util::error_chain(&e.without_url()))?;
        crate::util::accepted(resp).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::LiveLabels;
    use crate::live::series::TimeSeries;
    use tokenscope_core::report::Load;

    /// A protobuf field as read back: its number and value.
    #[derive(Debug)]
    enum Field<'a> {
        Varint(u64),
        Fixed64([u8; 8]),
        Bytes(&'a [u8]),
    }

    /// Reads protobuf fields one by one (the wire format, by hand: varint keys,
    /// wire types 0, 1 and 2 — all a WriteRequest uses).
    fn fields(mut b: &[u8]) -> Vec<(u64, Field<'_>)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                let byte = b[0];
                *b = &b[1..];
                v |= u64::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    return v;
                }
            }
            panic!("varint longer than 10 bytes")
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            let field = match key & 7 {
                0 => Field::Varint(varint(&mut b)),
                1 => {
                    let (v, rest) = b.split_at(8);
                    b = rest;
                    Field::Fixed64(v.try_into().unwrap())
                }
                2 => {
                    let len = varint(&mut b) as usize;
                    let (v, rest) = b.split_at(len);
                    b = rest;
                    Field::Bytes(v)
                }
                t => panic!("wire type {t}"),
            };
            out.push((key >> 3, field));
        }
        out
    }

    /// The series of a push body: snappy block decompressed, then decoded.
    fn decode(body: &[u8]) -> Vec<TimeSeries> {
        let raw = snap::raw::Decoder::new().decompress_vec(body).unwrap();
        let bytes = |f: &Field<'_>| match f {
            Field::Bytes(b) => b.to_vec(),
            other => panic!("{other:?}"),
        };
        let text = |f: &Field<'_>| String::from_utf8(bytes(f)).unwrap();
        let mut out = Vec::new();
        for (n, ts) in fields(&raw) {
            assert_eq!(n, 1, "WriteRequest.timeseries");
            let ts = bytes(&ts);
            let mut series = TimeSeries {
                labels: Vec::new(),
                samples: Vec::new(),
            };
            for (n, f) in fields(&ts) {
                let inner = bytes(&f);
                let inner = fields(&inner);
                match n {
                    1 => {
                        assert!(matches!(inner[..], [(1, _), (2, _)]), "Label");
                        series.labels.push((text(&inner[0].1), text(&inner[1].1)));
                    }
                    2 => match inner[..] {
                        [(1, Field::Fixed64(v)), (2, Field::Varint(t))] => {
                            series.samples.push((f64::from_le_bytes(v), t as i64));
                        }
                        ref other => panic!("Sample {other:?}"),
                    },
                    n => panic!("TimeSeries field {n}"),
                }
            }
            out.push(series);
        }
        out
    }

    fn ts(labels: &[(&str, &str)], samples: &[(f64, i64)]) -> TimeSeries {
        TimeSeries {
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            samples: samples.to_vec(),
        }
    }

    #[test]
    fn encode_writes_a_snappy_compressed_write_request() {
        let long = "v".repeat(300); // a length past one varint byte
        let series = [
            ts(
                &[
                    ("job", "tokenscope"),
                    ("__name__", "a_total"),
                    ("level", "c=4"),
                ],
                &[(3.0, 1_700_000_000_123), (4.5, 1_700_000_000_124)],
            ),
            ts(&[("__name__", "b"), ("label", "ünï \"q\"")], &[(-0.25, -5)]),
            ts(&[("__name__", "c"), ("x", &long)], &[(f64::INFINITY, 0)]),
        ];
        let decoded = decode(&encode(&series));
        let sorted = |s: &TimeSeries| {
            let mut s = s.clone();
            s.labels.sort();
            s
        };
        let want: Vec<TimeSeries> = series.iter().map(sorted).collect();
        assert_eq!(decoded, want);
        assert_eq!(decoded[0].labels[0].0, "__name__");
        assert_eq!(decode(&encode(&[])), []);
    }

    #[test]
    fn the_live_series_round_trip() {
        let live = Live::new(LiveLabels::default());
        live.level_started(0, Load::Concurrency(2));
        live.event_loop_lag_ms(3.0);
        let series = live.series(42);
        assert!(series.len() > 300);
        assert_eq!(decode(&encode(&series)), series);
    }

    /// A remote-write receiver on loopback that answers `status` and keeps what
    /// it was sent: the headers that matter and the decoded series.
    async fn receiver(
        status: u16,
    ) -> (
        reqwest::Url,
        Arc<std::sync::Mutex<Vec<(Vec<String>, Vec<TimeSeries>)>>>,
    ) {
        use axum::http::HeaderMap;
        let got = Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = got.clone();
        let app = axum::Router::new().route(
            "/api/v1/write",
            axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
                let keep = keep.clone();
                async move {
                    let h = [
                        "content-encoding",
                        "content-type",
                        "x-prometheus-remote-write-version",
                        "user-agent",
                        "authorization",
                    ]
                    .map(|k| format!("{k}: {:?}", headers.get(k)));
                    keep.lock().unwrap().push((h.to_vec(), decode(&body)));
                    let status = axum::http::StatusCode::from_u16(status).unwrap();
                    let text = if status.is_success() {
                        ""
                    } else {
                        "out of order sample"
                    };
                    (status, text)
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let url = format!("http://user:s3cret@{addr}/api/v1/write");
        (url.parse().unwrap(), got)
    }

    #[tokio::test]
    async fn pushes_every_interval_with_the_protocols_headers_and_once_more_at_stop() {
        let (url, got) = receiver(204).await;
        let live = Live::new(LiveLabels::default());
        live.level_started(0, Load::Concurrency(2));
        let w = RemoteWriter::spawn(
            url,
            Duration::from_millis(100),
            live.clone(),
            crate::live::tests::client(),
        );
        tokio::time::sleep(Duration::from_millis(350)).await;
        live.level_started(1, Load::Concurrency(8));
        let stats = w.stop().await;
        assert_eq!(stats.failures, 0, "{stats:?}");
        let got = got.lock().unwrap();
        assert_eq!(stats.pushes, got.len() as u64);
        assert!((3..=5).contains(&got.len()), "{} pushes", got.len());
        let (headers, series) = &got[0];
        assert_eq!(
            headers[..4],
            [
                "content-encoding: Some(\"snappy\")",
                "content-type: Some(\"application/x-protobuf\")",
                "x-prometheus-remote-write-version: Some(\"0.1.0\")",
                &format!(
                    "user-agent: Some(\"tokenscope/{}\")",
                    env!("CARGO_PKG_VERSION")
                ),
            ]
        );
        assert!(series.iter().all(|s| s.samples.len() == 1));
        // Every push later than the one before; the final push has the final level.
        let t = |i: usize| got[i].1[0].samples[0].1;
        assert!((1..got.len()).all(|i| t(i) > t(i - 1)));
        let index = |i: usize| {
            got[i]
                .1
                .iter()
                .find(|s| s.labels[0].1 == "tokenscope_level_index")
                .unwrap()
                .samples[0]
                .0
        };
        assert_eq!((index(0), index(got.len() - 1)), (0.0, 1.0));
    }

    #[tokio::test]
    async fn a_refused_push_is_counted_and_said_without_credentials() {
        let (url, got) = receiver(400).await;
        let w = RemoteWriter::spawn(
            url.clone(),
            Duration::from_secs(3600),
            Live::new(LiveLabels::default()),
            crate::live::tests::client(),
        );
        let stats = w.stop().await;
        assert_eq!(got.lock().unwrap().len(), 1, "the final push");
        assert_eq!((stats.pushes, stats.failures), (0, 1));
        let err = stats.first_error.unwrap();
        let host = url.host_str().unwrap();
        let port = url.port().unwrap();
        assert_eq!(
            err,
            format!(
                "remote write to http://{host}:{port}/api/v1/write: HTTP 400 Bad Request out of order sample"
            )
        );
    }

    #[tokio::test]
    async fn a_closed_port_counts_failures_and_stop_still_returns() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let url: reqwest::Url = format!("http://u:s3cret@127.0.0.1:{port}/api/v1/write")
            .parse()
            .unwrap();
        let w = RemoteWriter::spawn(
            url,
            Duration::from_millis(50),
            Live::new(LiveLabels::default()),
            crate::live::tests::client(),
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let stats = tokio::time::timeout(Duration::from_secs(15), w.stop())
            .await
            .unwrap();
        assert_eq!(stats.pushes, 0);
        assert!(stats.failures >= 3, "{stats:?}");
        let err = stats.first_error.unwrap();
        assert!(
            err.starts_with(&format!(
                "remote write to http://127.0.0.1:{port}/api/v1/write: "
            )),
            "{err}"
        );
        assert!(!err.contains("s3cret") && !err.contains("u:"), "{err}");
        assert!(err.to_lowercase().contains("refused"), "{err}");
    }

    /// A Prometheus server of our own on a free loopback port, killed on drop.
    struct Prometheus {
        child: std::process::Child,
        base: String,
        _dir: tempfile::TempDir,
    }

    impl Drop for Prometheus {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    impl Prometheus {
        async fn start() -> Prometheus {
            let bin = std::env::var("PROMETHEUS").unwrap_or_else(|_| "/usr/bin/prometheus".into());
            assert!(
                std::path::Path::new(&bin).exists(),
                "{bin} is missing: apt-get install -y --no-install-recommends prometheus \
                 (or set PROMETHEUS to its path)"
            );
            let dir = tempfile::tempdir().unwrap();
            let config = dir.path().join("prometheus.yml");
            std::fs::write(&config, "global:\n  scrape_interval: 1m\n").unwrap();
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
            let child = std::process::Command::new(&bin)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--web.enable-remote-write-receiver")
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap();
            let p = Prometheus {
                child,
                base: format!("http://127.0.0.1:{port}"),
                _dir: dir,
            };
            let ready = format!("{}/-/ready", p.base);
            p.poll("ready", || async {
                let r = crate::live::tests::client().get(&ready).send().await.ok()?;
                r.status().is_success().then_some(())
            })
            .await;
            p
        }

        /// Calls `f` until it answers, for 30 s at most.
        async fn poll<T, F: std::future::Future<Output = Option<T>>>(
            &self,
            what: &str,
            mut f: impl FnMut() -> F,
        ) -> T {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            loop {
                if let Some(v) = f().await {
                    return v;
                }
                if std::time::Instant::now() > deadline {
                    let log = std::fs::read_to_string(self._dir.path().join("prometheus.log"));
                    panic!(
                        "prometheus: no {what} after 30 s; its log:\n{}",
                        log.unwrap_or_default()
                    );
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }

        /// The one value of an instant query, once it has one.
        async fn query(&self, q: &str) -> f64 {
            let url = format!("{}/api/v1/query", self.base);
            self.poll(q, || async {
                let url = reqwest::Url::parse_with_params(&url, [("query", q)]).ok()?;
                let r = crate::live::tests::client().get(url).send().await.ok()?;
                let v: serde_json::Value = r.json().await.ok()?;
                let result = v["data"]["result"].as_array()?;
                assert!(result.len() <= 1, "{q}: {v}");
                result.first()?["value"][1].as_str()?.parse().ok()
            })
            .await
        }
    }

    #[tokio::test]
    #[ignore = "opt-in: needs prometheus; scripts/test.sh runs it"]
    async fn prometheus_stores_the_pushed_series() {
        use tokenscope_core::testing;
        use tokenscope_measure::metrics::{MetricOptions, RequestMetrics};
        use tokenscope_measure::record::{ErrorKind, RequestRecord};
        use tokenscope_stats::stats::percentile;

        let prom = Prometheus::start().await;
        let live = Live::new(LiveLabels {
            shard: None,
            label: Some("it".into()),
        });
        let c4 = Load::Concurrency(4);
        live.level_started(0, c4);
        let finish = |r: &RequestRecord| {
            let m = RequestMetrics::from_record(r, &MetricOptions::default());
            live.request_started(c4);
            live.request_finished(c4, true, r, &m);
            m.ttft_ms
        };
        // TTFTs 37, 74, ..., 3700 ms: exact p50 = 1868.5 ms.
        let ttft_ms: Vec<f64> = (1..=100)
            .filter_map(|i| finish(&testing::record(0.0, 37.0 * f64::from(i), 10.0, 4)))
            .collect();
        for _ in 0..3 {
            finish(&testing::failed(0.0, ErrorKind::Http(503)));
        }
        let url = format!("{}/api/v1/write", prom.base).parse().unwrap();
        let w = RemoteWriter::spawn(
            url,
            Duration::from_millis(300),
            live.clone(),
            crate::live::tests::client(),
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
        let stats = w.stop().await;
        assert_eq!(
            (stats.failures, &stats.first_error),
            (0, &None),
            "{stats:?}"
        );
        assert!(stats.pushes >= 3, "{stats:?}");

        let sel = r#"{job="tokenscope",instance="0/1",shard="0/1",label="it",level="c=4"}"#;
        let ok = prom
            .query(&format!(
                r#"tokenscope_requests_total{{outcome="ok",{}"#,
                &sel[1..]
            ))
            .await;
        let e503 = prom
            .query(&format!(
                r#"tokenscope_request_errors_total{{kind="http_503",{}"#,
                &sel[1..]
            ))
            .await;
        let tokens = prom
            .query(&format!("tokenscope_output_tokens_total{sel}"))
            .await;
        let count = prom
            .query(&format!("tokenscope_ttft_seconds_count{sel}"))
            .await;
        let p50 = prom
            .query(&format!(
                "histogram_quantile(0.5, tokenscope_ttft_seconds_bucket{sel})"
            ))
            .await;
        let p99 = prom
            .query(&format!(
                "histogram_quantile(0.99, tokenscope_ttft_seconds_bucket{sel})"
            ))
            .await;
        let exact50 = percentile(&ttft_ms, 0.5).unwrap() / 1000.0;
        let exact99 = percentile(&ttft_ms, 0.99).unwrap() / 1000.0;
        eprintln!(
            "prometheus: ok {ok}, http_503 {e503}, output tokens {tokens}, ttft count {count}, \
             p50 {p50} s (exact {exact50}), p99 {p99} s (exact {exact99}), {} pushes",
            stats.pushes
        );
        assert_eq!((ok, e503, tokens, count), (100.0, 3.0, 400.0, 100.0));
        let resolution = super::super::histogram::max_bucket_ratio();
        for (est, exact) in [(p50, exact50), (p99, exact99)] {
            assert!(
                est.max(exact) / est.min(exact) <= resolution,
                "{est} vs {exact}"
            );
        }
    }
}
