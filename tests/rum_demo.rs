//! The static page's Real users view: a chat UI with the RUM probe embedded as a
//! product embeds it (`web/static/rum-demo.js`, the shipped `tokenscope-rum.min.js`),
//! talking to the page's built-in simulator, showing the turns the probe sent.
//! In headless Chromium against `tokenscope serve` of the built page: the view
//! and the probe load only when the view opens; each collected turn's received
//! TTFT is compared with the simulator's own log (when it handed the first token
//! over, on the same page clock); the painted TTFT with the received one; the
//! inter-chunk gaps with the simulator's ITL; a Stop is an aborted turn; no
//! prompt or answer text is in what the probe sent.

#[path = "common/chromium.rs"]
mod chromium;
mod common;

use std::time::Duration;

use chromium::{Browser, Serve};

/// One Chromium at a time: two at once on a 2-core machine would time each other.
static BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
use common::{f, median};
use serde_json::Value;

/// The simulator's pace in this test (`sim_ttft_ms`, `sim_itl_ms`).
const TTFT_MS: f64 = 120.0;
const ITL_MS: f64 = 20.0;
const CANARY: &str = "CANARY-DEMO-5c1e";

/// Send one turn with the view's Send button and wait for it to end; its status.
async fn send_turn(browser: &Browser) -> String {
    browser
        .js("document.getElementById('rum-demo-send').click();")
        .await;
    browser
        .wait_for(
            "/^(done|failed|stopped)/.test(document.getElementById('rum-demo-status').textContent)",
            Duration::from_secs(30),
        )
        .await;
    browser.text_of("rum-demo-status").await
}

/// Once `n` turns are collected: the beacons' JSON as the view shows it.
async fn collected(browser: &Browser, n: usize) -> String {
    browser
        .wait_for(
            &format!("document.getElementById('rum-demo').getAttribute('data-turns') === '{n}'"),
            Duration::from_secs(30),
        )
        .await;
    let json = browser
        .js("return document.getElementById('rum-demo-json').textContent;")
        .await;
    json.as_str().unwrap().to_owned()
}

#[tokio::test]
#[ignore = "needs headless Chromium and the built page (scripts/build-web.sh)"]
async fn the_pages_chat_demo_collects_its_turns_against_the_simulator_log() {
    let _one = BROWSER.lock().await;
    let serve = Serve::start(&[]);
    let browser = Browser::start(&[]).await;
    let url = format!(
        "{}?sim_ttft_ms={TTFT_MS}&sim_itl_ms={ITL_MS}&sim_jitter_ms=0",
        serve.url
    );
    browser.client.goto(&url).await.unwrap();
    browser
        .wait_for(
            "document.getElementById('tab-rum')",
            Duration::from_secs(30),
        )
        .await;
    // Lazy: neither the demo nor the probe is fetched before the view opens.
    let lazy = |r: &[String]| {
        r.iter()
            .filter(|n| n.contains("rum-demo-") || n.contains("tokenscope-rum-"))
            .count()
    };
    assert_eq!(lazy(&browser.resources().await), 0);
    browser
        .js("document.getElementById('tab-rum').click();")
        .await;
    browser
        .wait_for(
            "document.getElementById('rum-demo-send')",
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(
        lazy(&browser.resources().await),
        2,
        "the demo and the probe"
    );
    assert!(
        browser
            .text_of("rum-demo-target")
            .await
            .contains("simulator"),
        "{}",
        browser.text_of("rum-demo-target").await
    );

    // Three whole answers, typed and sent as a user does, then one stopped.
    browser
        .js(&format!(
            "document.getElementById('rum-demo-prompt').value = 'tell me {CANARY} a story';"
        ))
        .await;
    for _ in 0..3 {
        assert_eq!(send_turn(&browser).await, "done");
    }
    browser
        .js("document.getElementById('rum-demo-send').click();")
        .await;
    browser
        .wait_for(
            "document.getElementById('rum-demo-status').textContent === 'streaming...'",
            Duration::from_secs(30),
        )
        .await;
    browser
        .js("document.getElementById('rum-demo-stop').click();")
        .await;
    let json = collected(&browser, 4).await;
    assert!(!json.contains(CANARY), "no prompt text in what was sent");
    assert!(!json.contains("tell me"), "no prompt text in what was sent");
    let doc: Value = serde_json::from_str(&json).unwrap();
    let turns = doc["turns"].as_array().unwrap();
    let log = doc["server_log"].as_array().unwrap();
    assert_eq!(
        log.len(),
        4,
        "the simulator received four requests: {log:?}"
    );
    let origin = f(&browser.js("return performance.timeOrigin;").await);

    let complete: Vec<&Value> = turns
        .iter()
        .filter(|t| t["outcome"] == "complete")
        .collect();
    let aborted = turns.iter().filter(|t| t["outcome"] == "aborted").count();
    assert_eq!((complete.len(), aborted), (3, 1), "{turns:#?}");
    let mut lags = Vec::new();
    let mut gaps = Vec::new();
    for t in &complete {
        // The turn's start on the page clock (ms since timeOrigin, whole ms).
        let t0 = f(&t["started_unix_ms"]) - origin;
        let l = log
            .iter()
            .find(|l| (f(&l["t_received_ms"]) - t0).abs() < 50.0)
            .unwrap_or_else(|| panic!("no simulator request for the turn at {t0}: {log:?}"));
        let received = t0 + f(&t["ms"]["first_chunk"]);
        // The app read the first token this long after the simulator handed it
        // over (t0 is whole ms: ±1 ms).
        let lag = received - f(&l["first_token_ms"]);
        lags.push(lag);
        // Per turn loosely (a busy host holds the page off the CPU for
        // milliseconds); tightly at the median, below.
        assert!(
            (-1.5..=50.0).contains(&lag),
            "received {lag} ms after the simulator: {t}"
        );
        let server = f(&l["first_token_ms"]) - f(&l["t_received_ms"]);
        assert!(server >= TTFT_MS - 1.0, "the simulator's TTFT {server} ms");
        let painted = f(&t["ms"]["first_paint"]);
        assert!(
            painted >= f(&t["ms"]["first_chunk"]),
            "painted before received: {t}"
        );
        assert!(
            painted - f(&t["ms"]["first_chunk"]) < 100.0,
            "painted {painted} ms: {t}"
        );
        let c: Vec<f64> = t["chunk_ms"].as_array().unwrap().iter().map(f).collect();
        assert!(c.len() > 10, "{t}");
        gaps.extend(c.windows(2).map(|w| w[1] - w[0]));
        assert_eq!(t["stalls_250"], 0);
    }
    let itl = median(&gaps);
    eprintln!(
        "demo: received - simulator's first token, per turn {lags:.2?} ms; chunk gap p50 {itl:.2} ms (simulator {ITL_MS})"
    );
    assert!((itl - ITL_MS).abs() < 3.0, "chunk gap p50 {itl}");
    assert!((-1.5..=5.0).contains(&median(&lags)), "{lags:?}");
    // The table shows each turn.
    let rows = browser
        .js("return document.querySelectorAll('#rum-demo-turns tbody tr').length;")
        .await;
    assert_eq!(rows, 4);
    browser.screenshot("rum-demo").await;
    browser.close().await;
}

/// Any endpoint: the view talks to the endpoint the Benchmark view is set to
/// (here `tokenscope mock` over real HTTP, CORS and all), the probe sees the
/// browser's own fetch, and its received TTFT is the mock's logged TTFT plus the
/// network both ways.
#[tokio::test]
#[ignore = "needs headless Chromium and the built page (scripts/build-web.sh)"]
async fn the_pages_chat_demo_measures_a_real_endpoint() {
    let _one = BROWSER.lock().await;
    let mock = common::Mock::start(&["--ttft-ms", "80", "--itl-ms", "10", "--jitter-ms", "0"]);
    let serve = Serve::start(&[]);
    let browser = Browser::start(&[]).await;
    let url = format!(
        "{}?view=rum&url={}&model=tokenscope-sim",
        serve.url, mock.url
    );
    browser.client.goto(&url).await.unwrap();
    browser
        .wait_for(
            "document.getElementById('rum-demo-send')",
            Duration::from_secs(30),
        )
        .await;
    let target = browser.text_of("rum-demo-target").await;
    assert!(target.contains(&mock.url), "{target}");
    // Nine turns: the bound below is on the median of the eight on an open
    // connection, which two or three turns held off the CPU by a busy host
    // cannot move (four turns' median once read 10 ms: 13 and 21 ms beside
    // 6.7 and 5.8, with 2.0-2.7 ms usual).
    const TURNS: usize = 9;
    for _ in 0..TURNS {
        assert_eq!(send_turn(&browser).await, "done");
    }
    let doc: Value = serde_json::from_str(&collected(&browser, TURNS).await).unwrap();
    let turns = doc["turns"].as_array().unwrap();
    let log: Vec<Value> = mock
        .log_records(TURNS)
        .into_iter()
        .filter(|r| {
            r["chunk_times_ms"]
                .as_array()
                .is_some_and(|c| !c.is_empty())
        })
        .collect();
    assert_eq!(
        (turns.len(), log.len()),
        (TURNS, TURNS),
        "{turns:?} {log:?}"
    );
    let mut later_gaps = Vec::new();
    for (i, (t, server)) in turns.iter().zip(&log).enumerate() {
        assert_eq!(t["outcome"], "complete", "{t}");
        assert_eq!(t["route"], "/v1/chat/completions", "{t}");
        let server_ttft = f(&server["chunk_times_ms"][0]) - f(&server["t_received_ms"]);
        let gap = f(&t["ms"]["first_chunk"]) - server_ttft;
        eprintln!("demo, real endpoint, turn {i}: received - server TTFT {gap:.2} ms");
        // The send and the delivery over loopback: never negative, and loosely
        // bounded per turn (a busy 2-core host holds the browser off the CPU for
        // milliseconds: 6.4 ms was seen on one); the first turn also waits for
        // the CORS preflight (the endpoint is another origin) and a new
        // connection, as a real user's first turn does.
        assert!((0.0..60.0).contains(&gap), "{gap} ms: {t} vs {server}");
        if i > 0 {
            later_gaps.push(gap);
        }
        assert_eq!(
            t["chunks"].as_u64().unwrap(),
            server["chunk_times_ms"].as_array().unwrap().len() as u64
        );
    }
    // Tightly at the median of the turns on an open connection: the page's own
    // bound for the same path (tests/browser_e2e.rs, tests/e2e/rum.rs).
    assert!((0.0..=6.0).contains(&median(&later_gaps)), "{later_gaps:?}");
    browser.close().await;
}
