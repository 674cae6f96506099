//! The page's services and components in headless Chromium (wasm-bindgen-test):
//!
//!     CHROMEDRIVER=/usr/bin/chromedriver cargo test -p tokenscope-web --target wasm32-unknown-unknown --profile web-test
//!
//! The simulator built into the page is the truth here: it logs when it handed each
//! chunk over, on the same clock the page stamps reads with.

#![cfg(target_arch = "wasm32")]

use tokenscope_core::report::Source;
use tokenscope_measure::openai::Api;
use tokenscope_measure::record::{ErrorKind, Outcome, PaintMethod, TimeoutPhase};
use tokenscope_sim::{FaultKind, SimConfig};
use tokenscope_web::services::clock::{CancelToken, now, sleep_ms};
use tokenscope_web::services::fetch::{Auth, FetchTarget};
use tokenscope_web::services::paint::{Fallback, Painter, element_timing_supported};
use tokenscope_web::services::runner::{self, RunEvent, RunInput};
use tokenscope_web::services::sim::SimServer;
use tokenscope_web::services::transport::{Prepared, Transport, run_request};
use tokenscope_web::settings::{PaintMode, Settings};
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn document() -> web_sys::Document {
    web_sys::window().unwrap().document().unwrap()
}

/// A visible container for the lanes, at the top of the page.
fn container() -> web_sys::Element {
    let doc = document();
    let div = doc.create_element("div").unwrap();
    div.set_class_name("lanes");
    let body = doc.body().unwrap();
    body.insert_before(&div, body.first_child().as_ref())
        .unwrap();
    div
}

fn request(id: &str, prompt_tokens: u64, max_tokens: u32) -> Prepared {
    Prepared {
        request_id: id.into(),
        body: "{}".into(),
        api: Api::Chat,
        prompt_tokens,
        max_tokens,
        hide_reasoning: false,
        t_scheduled_ms: None,
        keep_answer: false,
        prompt_tokens_sent: None,
        turn: None,
    }
}

fn quiet_sim() -> SimConfig {
    SimConfig {
        jitter_ms: 0.0,
        ttft_ms: 20.0,
        itl_ms: 5.0,
        ..SimConfig::default()
    }
}

#[wasm_bindgen_test]
async fn a_simulated_request_is_measured_and_its_paint_timed() {
    assert!(element_timing_supported(), "Chromium has Element Timing");
    let painter = Painter::new(Some(container()), PaintMode::Auto, Fallback::default());
    painter.set_lanes(1);
    let sim = SimServer::new(quiet_sim());
    let req = request("t-1", 80, 6);
    let sent = run_request(
        &Transport::Sim(sim.clone()),
        &req,
        Some((&painter, 0)),
        10_000.0,
        &CancelToken::new(),
    )
    .await;
    assert!(!sent.parse.per_read_ms.is_empty());
    let paint = sent.probe.expect("a first token").settle().await;
    let (t_paint, method) = paint.time.expect("the first token was painted");
    assert_eq!(method, PaintMethod::ElementTiming);
    let mut tl = sent.timeline;
    tl.on_first_paint(t_paint, method);
    assert!(tl.text().split(' ').count() == 6, "{:?}", tl.text());
    let r = tl.finish();
    assert_eq!(r.outcome, Outcome::Ok);
    assert_eq!(r.token_events_ms.len(), 6);
    assert_eq!(r.usage.unwrap().completion_tokens, Some(6));
    // TTFT against the simulator's own log, on the same clock.
    let log = &sim.log()[0];
    assert_eq!(log.request_id, "t-1");
    let client = r.token_events_ms[0] - r.t_send_ms;
    let server = log.chunk_times_ms[0] - log.t_received_ms;
    assert!(
        (0.0..3.0).contains(&(client - server)),
        "page TTFT {client} vs simulator {server}"
    );
    // 20 ms + 80 tokens at 8000/s = 30 ms, give or take a timer's lateness.
    assert!((29.0..60.0).contains(&server), "simulated TTFT {server}");
    let delay = t_paint - r.token_events_ms[0];
    assert!((0.0..200.0).contains(&delay), "render delay {delay}");
    assert!(paint.inserted_ms >= r.token_events_ms[0]);
}

#[wasm_bindgen_test]
async fn the_fallback_paints_after_the_update_for_every_variant() {
    for fallback in [Fallback::Raf, Fallback::RafTask, Fallback::DoubleRaf] {
        let painter = Painter::new(Some(container()), PaintMode::Raf, fallback);
        assert!(!painter.uses_element_timing());
        painter.set_lanes(2);
        let t0 = now();
        let probe = painter.first_token(1, "hello");
        let paint = probe.settle().await;
        let (t, method) = paint.time.expect("painted");
        assert_eq!(method, PaintMethod::RequestAnimationFrame);
        assert!(
            t >= paint.inserted_ms && paint.inserted_ms >= t0,
            "{fallback:?}"
        );
        assert!(t - t0 < 200.0, "{fallback:?}: {} ms", t - t0);
    }
}

#[wasm_bindgen_test]
async fn streamed_text_is_text_never_html() {
    let div = container();
    let painter = Painter::new(Some(div.clone()), PaintMode::Auto, Fallback::default());
    painter.set_lanes(1);
    let probe = painter.first_token(0, "<b>bold</b>");
    painter.append(0, " <img src=x onerror=alert(1)>");
    painter.append(0, " & more");
    probe.settle().await;
    sleep_ms(40.0).await;
    let text = div.text_content().unwrap_or_default();
    assert!(
        text.contains("<b>bold</b> <img src=x onerror=alert(1)> & more"),
        "{text:?}"
    );
    assert!(div.query_selector("b").unwrap().is_none());
    assert!(div.query_selector("img").unwrap().is_none());
    let first = div.query_selector("[elementtiming]").unwrap().unwrap();
    assert_eq!(first.text_content().as_deref(), Some("<b>bold</b>"));
    let cost = painter.take_cost();
    assert_eq!(cost.insert_ms.len(), 1);
    // Two appends in one task: one frame update writes both (one lane, one write).
    assert_eq!(
        cost.frame_ms.len(),
        1,
        "one frame update: {:?}",
        cost.frame_ms
    );
    assert_eq!(cost.batched_events, 1, "one lane written once");
}

#[wasm_bindgen_test]
async fn simulated_faults_are_classified_like_the_native_client() {
    let cases = [
        (FaultKind::Http503, Some(ErrorKind::Http(503))),
        (FaultKind::Http429, Some(ErrorKind::Http(429))),
        (FaultKind::Html, Some(ErrorKind::NonSse)),
        (FaultKind::Reset, Some(ErrorKind::Reset)),
        (FaultKind::ErrorEvent, Some(ErrorKind::StreamError)),
        (FaultKind::Malformed, Some(ErrorKind::MalformedChunk)),
        (FaultKind::NoDone, Some(ErrorKind::Truncated)),
        (FaultKind::NoHeaders, None),
    ];
    for (fault, kind) in cases {
        let sim = SimServer::new(SimConfig {
            error_rate: 1.0,
            faults: vec![fault],
            itl_ms: 1.0,
            ttft_ms: 1.0,
            ..quiet_sim()
        });
        let sent = run_request(
            &Transport::Sim(sim),
            &request("f", 4, 8),
            None,
            300.0,
            &CancelToken::new(),
        )
        .await;
        let r = sent.timeline.finish();
        match (kind, &r.outcome) {
            (Some(k), Outcome::Error { kind, .. }) => assert_eq!(*kind, k, "{fault:?}"),
            (None, Outcome::Timeout { phase }) => assert_eq!(*phase, TimeoutPhase::Headers),
            (_, other) => panic!("{fault:?}: {other:?}"),
        }
    }
}

#[wasm_bindgen_test]
async fn cancel_and_timeout_end_a_stream() {
    let sim = SimServer::new(SimConfig {
        itl_ms: 50.0,
        ..quiet_sim()
    });
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    wasm_bindgen_futures::spawn_local(async move {
        sleep_ms(120.0).await;
        c2.cancel();
    });
    let sent = run_request(
        &Transport::Sim(sim.clone()),
        &request("c", 4, 100),
        None,
        10_000.0,
        &cancel,
    )
    .await;
    let r = sent.timeline.finish();
    assert!(
        matches!(
            r.outcome,
            Outcome::Error {
                kind: ErrorKind::Cancelled,
                ..
            }
        ),
        "{:?}",
        r.outcome
    );
    assert!(
        !r.token_events_ms.is_empty(),
        "tokens before the stop are kept"
    );
    let sent = run_request(
        &Transport::Sim(sim),
        &request("t", 4, 100),
        None,
        150.0,
        &CancelToken::new(),
    )
    .await;
    assert_eq!(
        sent.timeline.finish().outcome,
        Outcome::Timeout {
            phase: TimeoutPhase::Stream
        }
    );
}

#[wasm_bindgen_test]
async fn fetch_failures_are_classified() {
    // Nothing listens on port 9: no response at all is `connect`.
    let target = FetchTarget {
        url: "http://127.0.0.1:9/v1/chat/completions".into(),
        auth: Auth {
            key: Some("sk-test".into()),
            ..Auth::default()
        },
        send_request_id: true,
    };
    let sent = run_request(
        &Transport::Fetch(target),
        &request("x", 4, 4),
        None,
        5_000.0,
        &CancelToken::new(),
    )
    .await;
    match sent.timeline.finish().outcome {
        Outcome::Error { kind, message } => {
            assert_eq!(kind, ErrorKind::Connect);
            assert!(!message.contains("sk-test"));
        }
        other => panic!("{other:?}"),
    }
    // The test page's own server answers, but not with an event stream.
    let origin = web_sys::window().unwrap().location().origin().unwrap();
    let target = FetchTarget {
        url: format!("{origin}/"),
        auth: Auth::default(),
        send_request_id: false,
    };
    let sent = run_request(
        &Transport::Fetch(target),
        &request("y", 4, 4),
        None,
        5_000.0,
        &CancelToken::new(),
    )
    .await;
    let r = sent.timeline.finish();
    match r.outcome {
        Outcome::Error { kind, .. } => assert!(
            matches!(kind, ErrorKind::Http(_) | ErrorKind::NonSse),
            "{kind:?}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(r.t_headers_ms.is_some());
}

#[wasm_bindgen_test]
async fn a_run_on_the_built_in_simulator_gives_a_browser_report() {
    let (settings, notes) = Settings::from_query(
        "concurrency=1,3&requests=6&rounds=2&warmup=1&max_tokens=6&input_tokens=16&sim_itl_ms=4&sim_ttft_ms=8&slo=ttft_ms:p95<=500",
    );
    assert!(notes.is_empty(), "{notes:?}");
    let plan = settings.validate().expect("valid settings");
    let painter = Painter::new(Some(container()), plan.paint, plan.paint_fallback);
    let events = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let seen = events.clone();
    let out = runner::run(
        RunInput {
            plan,
            auth: Auth::default(),
            painter,
            cancel: CancelToken::new(),
            worker_url: None,
            tokens: Default::default(),
        },
        move |e| seen.borrow_mut().push(e),
    )
    .await
    .expect("the run completes");
    let report = &out.report;
    assert_eq!(report.source, Source::Browser);
    assert!(report.environment.simulated);
    assert!(report.environment.user_agent.is_some());
    assert!(report.environment.event_loop_lag_ms.is_some());
    assert_eq!(report.config.url, "builtin:simulated");
    assert_eq!(report.levels.len(), 2);
    for l in &report.levels {
        assert_eq!(l.sent, 6);
        assert_eq!(l.ok + l.errors + l.timeouts, l.sent);
        assert_eq!(l.ok, 6, "{:?}", l.error_kinds);
        assert_eq!(l.rounds.len(), 2);
        assert_eq!(l.paint_methods.get("element_timing"), Some(&6));
        let delay = l.metrics.render_delay_ms.expect("render delay");
        assert!(
            delay.min.unwrap() >= 0.0 && delay.max.unwrap() < 200.0,
            "{delay:?}"
        );
        assert!(l.quantiles.contains_key("rendered_ttft_ms"));
        assert_eq!(l.slo_checks.len(), 1);
    }
    let kinds: Vec<&str> = report.warnings.iter().map(|w| w.kind.as_str()).collect();
    assert!(
        kinds.contains(&"page_overhead") && kinds.contains(&"simulated_endpoint"),
        "{kinds:?}"
    );
    // Every request has a record, warm-up included, with a unique id.
    assert_eq!(out.records.len(), 2 * (6 + 1));
    let mut ids: Vec<&str> = out
        .records
        .iter()
        .map(|r| r.line.request_id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), out.records.len());
    assert_eq!(out.sim_log.as_ref().unwrap().len(), out.records.len());
    // The raw export is a tokenscope.raw/1.2 file from which core rebuilds the
    // page's report exactly: everything but the environment (which the end line
    // restores too, marked as rebuilt).
    let raw = runner::raw_jsonl(&out.raw, &out.records);
    let parsed = tokenscope_core::report::raw::parse(&raw).expect("a valid raw file");
    let rebuilt = tokenscope_core::report::raw::rebuild_report(&parsed);
    assert_eq!(rebuilt.source, Source::Browser);
    tokenscope_core::testing::assert_same_but_environment(&rebuilt, report);
    assert!(rebuilt.environment.rebuilt_from_raw);
    assert_eq!(
        rebuilt.environment.user_agent,
        report.environment.user_agent
    );
    // The page heard about the run as it went.
    let events = events.borrow();
    assert!(events.iter().any(|e| matches!(
        e,
        RunEvent::Started {
            simulated: true,
            ..
        }
    )));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, RunEvent::Levels { levels, settled: true } if levels.len() == 2))
    );
}

/// `window.tokenscopeRun`, as `boot.js` defines it, resolving to the run
/// module's exports: here this crate's own (web-run's `lib.rs` wraps the same
/// functions), so the page's run goes through the module's JSON messages.
fn install_run_module() {
    use tokenscope_web::services::lazy_run;
    let exports = js_sys::Object::new();
    let run = wasm_bindgen::closure::Closure::<
        dyn Fn(String, wasm_bindgen::JsValue, js_sys::Function) -> js_sys::Promise,
    >::new(lazy_run::run_bench)
    .into_js_value();
    let stop =
        wasm_bindgen::closure::Closure::<dyn Fn()>::new(lazy_run::stop_current).into_js_value();
    js_sys::Reflect::set(&exports, &"run_bench".into(), &run).unwrap();
    js_sys::Reflect::set(&exports, &"stop_bench".into(), &stop).unwrap();
    let load = wasm_bindgen::closure::Closure::<dyn Fn() -> js_sys::Promise>::new(move || {
        js_sys::Promise::resolve(&wasm_bindgen::JsValue::from(exports.clone()))
    })
    .into_js_value();
    js_sys::Reflect::set(&web_sys::window().unwrap(), &"tokenscopeRun".into(), &load).unwrap();
}

#[wasm_bindgen_test]
async fn the_app_autoruns_and_fills_the_contract() {
    install_run_module();
    let root = document().create_element("div").unwrap();
    document().body().unwrap().append_child(&root).unwrap();
    yew::Renderer::<tokenscope_web::app::App>::with_root_and_props(
        root.clone(),
        tokenscope_web::app::AppProps {
            query: "concurrency=2&requests=4&rounds=1&warmup=0&max_tokens=4&sim_itl_ms=2&sim_ttft_ms=4&autorun=1&api_key=sk-nope".into(),
            worker_url: None,
        },
    )
    .render();
    let body = document().body().unwrap();
    let t0 = now();
    loop {
        let state = body.get_attribute("data-run-state").unwrap_or_default();
        if state == "done" || state == "failed" {
            assert_eq!(state, "done");
            break;
        }
        assert!(now() - t0 < 15_000.0, "no end of run (state {state})");
        sleep_ms(50.0).await;
    }
    // Let the DOM settle after the last render.
    sleep_ms(20.0).await;
    let report = document()
        .get_element_by_id("report-json")
        .unwrap()
        .text_content()
        .unwrap();
    // The key is nowhere in the report's text (this module's reading of it
    // skips most fields: see `ClientReport`).
    assert!(!report.contains("sk-nope"));
    let report = tokenscope_core::report::ClientReport::from_json(&report).expect("#report-json");
    assert_eq!(report.levels[0].sent, 4);
    let records = document()
        .get_element_by_id("records-json")
        .unwrap()
        .text_content()
        .unwrap();
    let records: serde_json::Value = serde_json::from_str(&records).unwrap();
    assert_eq!(records.as_array().unwrap().len(), 4);
    assert!(
        records[0]["request_id"]
            .as_str()
            .unwrap()
            .starts_with("web-")
    );
    let badge = document()
        .get_element_by_id("simulated-badge")
        .expect("labelled simulated");
    assert!(badge.text_content().unwrap().contains("SIMULATED"));
    let warnings = document()
        .get_element_by_id("warnings")
        .unwrap()
        .text_content()
        .unwrap();
    assert!(warnings.contains("never read"), "{warnings}");
    for id in [
        "chart-throughput-latency",
        "chart-ttft-cdf",
        "chart-itl-histogram",
        "chart-request-timeline",
    ] {
        let fig = document()
            .get_element_by_id(id)
            .unwrap_or_else(|| panic!("{id}"));
        assert!(
            fig.query_selector("svg title").unwrap().is_some(),
            "{id} has an accessible title"
        );
    }
    let table = document().get_element_by_id("summary-table").unwrap();
    assert!(table.text_content().unwrap().contains("c=2"));
    let _ = root.dyn_into::<web_sys::HtmlElement>();
}

#[wasm_bindgen_test]
async fn the_simulators_metrics_count_what_its_log_says_it_did() {
    use tokenscope_core::analyze::server::engines::{Engine, Series};
    use tokenscope_core::analyze::server::reading::Reading;
    use tokenscope_measure::prometheus::Scrape;
    // Two slots, three requests: the third queues behind the first two.
    let sim = SimServer::new(SimConfig {
        max_batch: 2,
        ..quiet_sim()
    });
    let transport = Transport::Sim(sim.clone());
    let reqs = [
        request("m-1", 40, 5),
        request("m-2", 60, 4),
        request("m-3", 20, 6),
    ];
    let cancel = CancelToken::new();
    let sends = reqs
        .iter()
        .map(|r| run_request(&transport, r, None, 10_000.0, &cancel));
    for sent in futures_util::future::join_all(sends).await {
        assert_eq!(sent.timeline.finish().outcome, Outcome::Ok);
    }
    let reading = Reading::of(&Scrape::parse(&sim.metrics_text()));
    assert_eq!(reading.engine, Some(Engine::Vllm));
    let log = sim.log();
    assert_eq!(log.len(), 3);
    let sum = |f: &dyn Fn(&tokenscope_web::services::sim::SimLog) -> f64| -> f64 {
        log.iter().map(f).sum::<f64>() / 1000.0
    };
    let ttft = reading.histogram(Series::TtftSeconds).unwrap();
    assert_eq!(ttft.count, 3.0);
    let want = sum(&|l| l.chunk_times_ms[0] - l.t_received_ms);
    assert!((ttft.sum - want).abs() < 1e-9, "{} vs {want}", ttft.sum);
    let queue = reading.histogram(Series::QueueSeconds).unwrap();
    let want = sum(&|l| l.t_scheduled_ms.unwrap() - l.t_received_ms);
    assert!((queue.sum - want).abs() < 1e-9, "{} vs {want}", queue.sum);
    assert!(want > 0.0, "the third request queued");
    assert_eq!(reading.scalar(Series::GenerationTokens), Some(15.0));
    assert_eq!(reading.scalar(Series::PromptTokens), Some(120.0));
    assert_eq!(reading.scalar(Series::RequestsRunning), Some(0.0));
}
