//! `bench --metrics-listen` and `--prometheus-remote-write` against real
//! Prometheus servers (the Debian package, started here on free loopback ports
//! with a generated config and a temporary storage dir): one scrapes the run,
//! the other receives its pushes. PromQL over their HTTP API must give the
//! report's request counts exactly and its TTFT percentiles within the buckets'
//! resolution. Opt-in: needs `prometheus` (scripts/setup.sh installs it).

use crate::common;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Mock, bin, f, free_port, text};
use serde_json::Value;

/// A Prometheus server, killed on drop.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(config: &str, extra: &[&str]) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("prometheus.yml");
        std::fs::write(&cfg, config).unwrap();
        let port = free_port();
        let exe = std::env::var("PROMETHEUS").unwrap_or_else(|_| "/usr/bin/prometheus".into());
        let child = Command::new(&exe)
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{exe}: {e} (Debian: apt-get install -y --no-install-recommends prometheus)")
            });
        let p = Prometheus {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while http_get(p.port, "/-/ready").is_none_or(|b| !b.contains("Ready")) {
            assert!(Instant::now() < deadline, "prometheus did not get ready");
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// An instant query's single value, `None` while there is none.
    fn value(&self, promql: &str) -> Option<f64> {
        let body = http_get(
            self.port,
            &format!("/api/v1/query?query={}", encode(promql)),
        )?;
        let v: Value = serde_json::from_str(&body).ok()?;
        let r = v["data"]["result"].as_array()?;
        r.first()?["value"][1].as_str()?.parse().ok()
    }

    /// Wait until `promql` gives `want` (the last push or scrape arrived).
    fn wait_for(&self, promql: &str, want: f64) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.value(promql);
            if got == Some(want) || Instant::now() > deadline {
                return got.unwrap_or(f64::NAN);
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GET over plain HTTP/1.1 on loopback; the body, or `None` if not 200.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Some(dechunk(body));
    }
    Some(body.to_owned())
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
#[ignore = "opt-in: needs prometheus (scripts/setup.sh installs it); scripts/test.sh runs it"]
fn prometheus_scrapes_and_receives_the_run() {
    let mock = Mock::start(&[
        "--ttft-ms",
        "15",
        "--itl-ms",
        "3",
        "--jitter-ms",
        "3",
        "--error-rate",
        "0.05",
    ]);
    let metrics_port = free_port();
    let scraper = Prometheus::start(
        &format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: tokenscope\n    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
        ),
        &[],
    );
    let receiver = Prometheus::start("global: {}\n", &["--web.enable-remote-write-receiver"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let o = Command::new(bin())
        .args([
            "bench",
            "--url",
            &mock.url,
            "--concurrency",
            "4",
            "--duration",
            "5s",
        ])
        .args([
            "--rounds",
            "1",
            "--max-tokens",
            "16",
            "--server-metrics",
            "none",
            "--quiet",
        ])
        .args(["--label", "live-test"])
        .arg("--metrics-listen")
        .arg(format!("127.0.0.1:{metrics_port}"))
        .arg("--prometheus-remote-write")
        .arg(format!("http://127.0.0.1:{}/api/v1/write", receiver.port))
        .args([
            "--remote-write-interval",
            "1s",
            "--metrics-linger",
            "20s",
            "--json",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let report = read(&out);
    let l = &report["levels"][0];
    let ok = f(&l["ok"]);
    let failed = f(&l["errors"]) + f(&l["timeouts"]);
    assert!(
        ok > 50.0 && failed > 0.0,
        "a run with errors: {ok} ok, {failed} failed"
    );
    assert!(
        report["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["kind"] != "remote_write"),
        "no push failed: {}",
        report["warnings"]
    );
    let mut figures = Vec::new();
    for (name, prom) in [("scraped", &scraper), ("remote-written", &receiver)] {
        // The counters: exactly the report's.
        let q_ok = r#"sum(tokenscope_requests_total{outcome="ok",label="live-test"})"#;
        assert_eq!(prom.wait_for(q_ok, ok), ok, "{name}: ok requests");
        let q_failed = r#"sum(tokenscope_requests_total{outcome!="ok",label="live-test"})"#;
        assert_eq!(
            prom.wait_for(q_failed, failed),
            failed,
            "{name}: failed requests"
        );
        let q_tokens = r#"sum(tokenscope_output_tokens_total{label="live-test"})"#;
        let tokens = f(&l["output_tokens_total"]);
        assert_eq!(
            prom.wait_for(q_tokens, tokens),
            tokens,
            "{name}: output tokens"
        );
        // The histograms: as many observations as the report's samples.
        for metric in ["ttft", "itl"] {
            let q_count = format!("sum(tokenscope_{metric}_seconds_count{{label=\"live-test\"}})");
            let count = f(&l["metrics"][format!("{metric}_ms")]["count"]);
            assert_eq!(
                prom.wait_for(&q_count, count),
                count,
                "{name}: {metric} count"
            );
        }
        // The quantiles over the whole run (the histograms are cumulative). PromQL
        // interpolates inside the bucket (2^(1/8) wide) that holds the sample of
        // rank ceil(q n); the report takes the samples around rank q n. Where the
        // samples are dense (p50) the two lie within a bucket of each other. In a
        // sparse tail (p99 of ITL: a few stalls) the samples of neighbouring ranks
        // can be buckets apart, so there PromQL's value must lie between the
        // report's p99 and its p999 or maximum (the sample of rank ceil(0.99 n) is
        // between them), widened by two buckets for the definitions' ends.
        let bucket = 2f64.powf(1.0 / 8.0) * 1.002;
        for metric in ["ttft", "itl"] {
            let s = &l["metrics"][format!("{metric}_ms")];
            for (q, key) in [(0.5, "p50"), (0.99, "p99")] {
                let promql = format!(
                    "histogram_quantile({q}, sum by (le) (tokenscope_{metric}_seconds_bucket{{label=\"live-test\"}}))"
                );
                let got_ms = prom.value(&promql).unwrap_or(f64::NAN) * 1000.0;
                let want_ms = f(&s[key]);
                // p999 needs enough samples; below that the maximum bounds the tail.
                let tail_ms = s["p999"].as_f64().unwrap_or_else(|| f(&s["max"]));
                figures.push(format!(
                    "{name} {metric} {key}: PromQL {got_ms:.2} ms, report {want_ms:.2} ms (tail {tail_ms:.2})"
                ));
                let (lo, hi) = if key == "p50" {
                    (want_ms / bucket, want_ms * bucket)
                } else {
                    (want_ms / bucket.powi(2), tail_ms * bucket.powi(2))
                };
                assert!(
                    (lo..=hi).contains(&got_ms),
                    "{name} {metric} {key}: {got_ms:.2} ms outside {lo:.2}..{hi:.2}\n{}",
                    figures.join("\n")
                );
            }
        }
    }
    println!("{}", figures.join("\n"));
}

#[test]
fn a_remote_write_endpoint_that_is_down_loses_nothing() {
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let down = free_port();
    let o = Command::new(bin())
        .args([
            "bench",
            "--url",
            &mock.url,
            "--concurrency",
            "2",
            "--requests",
            "20",
        ])
        .args([
            "--rounds",
            "1",
            "--max-tokens",
            "4",
            "--server-metrics",
            "none",
            "--quiet",
        ])
        .arg("--prometheus-remote-write")
        .arg(format!("http://user:sekrit@127.0.0.1:{down}/api/v1/write"))
        .args(["--remote-write-interval", "200ms", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let report = read(&out);
    assert_eq!(
        report["levels"][0]["sent"], 20,
        "everything measured is kept"
    );
    let said: Vec<&Value> = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] == "remote_write")
        .collect();
    assert_eq!(said.len(), 1, "said once: {}", report["warnings"]);
    let msg = said[0]["message"].as_str().unwrap();
    assert!(
        msg.contains("pushes to the remote-write endpoint failed"),
        "{msg}"
    );
    let all = std::fs::read_to_string(&out).unwrap() + &text(&o);
    assert!(!all.contains("sekrit"), "the URL's password leaked");

    // A metrics port already in use: one clear line before anything is sent.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let o = Command::new(bin())
        .args([
            "bench",
            "--url",
            &mock.url,
            "--concurrency",
            "1",
            "--requests",
            "3",
        ])
        .args(["--metrics-listen", &addr, "--quiet"])
        .env("TOKENSCOPE_RESULTS_DIR", common::results_dir())
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o).contains(&format!("--metrics-listen {addr}: address already in use")),
        "{}",
        text(&o)
    );
}

/// `--metrics-linger 0` (its help's "stop at once", and what `demo` passes) is
/// taken: the run ends without waiting for a last scrape. A value that is no
/// duration is named.
#[test]
fn a_linger_of_zero_stops_at_once_and_a_bad_one_is_named() {
    let mock = Mock::start(&["--ttft-ms", "5", "--itl-ms", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let listen = format!("127.0.0.1:{}", free_port());
    let bench = |linger: &str| {
        Command::new(bin())
            .args(["bench", "--url", &mock.url, "--concurrency", "1"])
            .args(["--requests", "3", "--rounds", "1", "--max-tokens", "4"])
            .args(["--server-metrics", "none", "--quiet"])
            .args(["--metrics-listen", &listen, "--metrics-linger", linger])
            .arg("--json")
            .arg(&out)
            .output()
            .unwrap()
    };
    let waits = "waiting up to";
    let o = bench("0");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read(&out)["levels"][0]["ok"], 3);
    assert!(
        !text(&o).contains(waits),
        "no wait after the run: {}",
        text(&o)
    );
    // Unscraped, a linger of 1 s is waited for, and said.
    let o = bench("1s");
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains(&format!("{waits} 1 s")), "{}", text(&o));
    let o = bench("0x");
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--metrics-linger") && text(&o).contains("\"0x\""),
        "{}",
        text(&o)
    );
}
