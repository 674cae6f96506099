//! The static page's Quality view (`web-quality/`, core's quality checks in the
//! browser): in headless Chromium against `tokenscope serve` of the built page.
//! The module loads only when the view opens; against two `tokenscope mock`s
//! over real HTTP (CORS and all: the reference another endpoint, the candidate
//! the Benchmark view's) and against the page's own simulator, the report's
//! figures are the exact ones of the toy models the servers answer with
//! (`tokenscope_quality::toy_lm`), computed here from the same models.

#[path = "common/chromium.rs"]
mod chromium;
mod common;
#[path = "common/quality_truth.rs"]
mod quality_truth;

use std::time::Duration;

use chromium::{Browser, Serve};
use quality_truth::forced_truth;
use serde_json::Value;
use tokenscope_quality::sample::probe_prompts;
use tokenscope_quality::toy_lm::{ToyLm, kld_exact};

/// One Chromium at a time: two at once on a 2-core machine would time each other.
static BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The page's own settings (`web-quality/src/view.rs`): seed 0, 7 chunks.
const PAGE_SEED: u64 = 0;
const PAGE_CHUNKS: usize = 7;

/// The mean KLD over generated tokens (each prompt up to and including its
/// first divergence) and the exact-match share.
fn generated_truth(r: ToyLm, c: ToyLm, prompts: &[String], n: usize) -> (f64, f64) {
    let (mut same, mut klds) = (0, Vec::new());
    for p in prompts {
        let (a, b) = (r.greedy(p, n), c.greedy(p, n));
        let d = a.iter().zip(&b).position(|(x, y)| x != y);
        same += usize::from(d.is_none());
        let mut state = r.start(p);
        for &t in a.iter().take(d.map_or(n, |d| d + 1)) {
            klds.push(kld_exact(&r.logprobs(state), &c.logprobs(state)));
            state = ToyLm::next(state, t);
        }
    }
    (
        klds.iter().sum::<f64>() / klds.len() as f64,
        same as f64 / prompts.len() as f64,
    )
}

/// Open the Quality view of `url` (checking that its module loads only then),
/// fill the form with `fields` (`[id, value]`), run, and return the report.
async fn run_view(browser: &Browser, url: &str, fields: &[(&str, &str)]) -> Value {
    browser.client.goto(url).await.unwrap();
    browser
        .wait_for(
            "document.getElementById('tab-quality')",
            Duration::from_secs(30),
        )
        .await;
    let lazy = |r: &[String]| {
        r.iter()
            .filter(|n| n.contains("tokenscope_web_quality"))
            .count()
    };
    assert_eq!(
        lazy(&browser.resources().await),
        0,
        "loaded before the view"
    );
    browser
        .js("document.getElementById('tab-quality').click();")
        .await;
    browser
        .wait_for("document.getElementById('q-run')", Duration::from_secs(60))
        .await;
    assert_eq!(
        lazy(&browser.resources().await),
        2,
        "the module's js and wasm"
    );
    for (id, value) in fields {
        browser
            .js(&format!(
                "const e = document.getElementById('{id}'); e.value = {value:?}; e.dispatchEvent(new Event('change'));"
            ))
            .await;
    }
    browser
        .js("document.getElementById('q-run').click();")
        .await;
    let state = browser.wait_run(Duration::from_secs(120)).await;
    assert_eq!(state, "done", "{}", browser.text_of("q-error").await);
    let json = browser
        .js("return document.getElementById('q-json').textContent;")
        .await;
    serde_json::from_str(json.as_str().unwrap()).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[tokio::test]
#[ignore = "needs headless Chromium and the built page (scripts/build-web.sh)"]
async fn the_pages_quality_view_measures_two_real_endpoints_exactly() {
    let _one = BROWSER.lock().await;
    let mock = |perturb: &str| {
        common::Mock::start(&[
            "--seed",
            "11",
            "--ttft-ms",
            "1",
            "--itl-ms",
            "0.2",
            "--jitter-ms",
            "0",
            "--lm-vocab",
            "16",
            "--lm-perturb",
            perturb,
        ])
    };
    let (reference, candidate) = (mock("0"), mock("0.3"));
    let serve = Serve::start(&[]);
    let browser = Browser::start(&[]).await;
    let url = format!(
        "{}?view=bench&url={}&model=tokenscope-sim",
        serve.url, candidate.url
    );
    let report = run_view(
        &browser,
        &url,
        &[
            ("q-ref", "url"),
            ("q-ref-url", &reference.url),
            ("q-prompts", "6"),
            ("q-tokens", "8"),
            ("q-tasks", "4"),
            ("q-levels", "1,3"),
        ],
    )
    .await;
    let view = browser.text_of("q-result").await;
    assert!(view.contains("Quality"), "{view}");
    assert_eq!(report["schema"], "tokenscope.quality/1");
    assert!(
        report["candidate"]["source"]
            .as_str()
            .unwrap()
            .contains(&candidate.url)
    );
    let (r, c) = (ToyLm::new(11, 16), ToyLm::new(11, 16).perturbed(0.3, 1));
    let (kld, exact_match) = generated_truth(r, c, &probe_prompts(PAGE_SEED, 6), 8);
    let forced = forced_truth(r, c, PAGE_CHUNKS).0;
    let levels = report["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for l in levels {
        let got = f(&l["figures"]["distribution"]["kld"]["mean"]);
        assert!((got - kld).abs() < 1e-9, "generated KLD {got} vs {kld}");
        assert_eq!(l["figures"]["distribution"]["kld"]["exact"], true);
        assert!((f(&l["figures"]["exact_match"]) - exact_match).abs() < 1e-12);
        let tf = f(&l["teacher_forced"]["kld"]["mean"]);
        assert!(
            (tf - forced).abs() < 1e-9,
            "teacher-forced KLD {tf} vs {forced}"
        );
        assert_eq!(f(&l["tasks"]["tasks"]), 4.0);
        eprintln!(
            "page, two mocks, c={}: KLD {got:.7} (exact {kld:.7}), teacher-forced {tf:.7} (exact {forced:.7}), exact match {:.3}",
            l["concurrency"],
            f(&l["figures"]["exact_match"])
        );
    }
    // The reference asked twice: its own noise floor is none.
    assert_eq!(f(&report["self_check"]["exact_match"]), 1.0);
    assert_eq!(report["tokenizer"]["first_difference"], Value::Null);
    browser.screenshot("quality-view").await;
    browser.close().await;
}

#[tokio::test]
#[ignore = "needs headless Chromium and the built page (scripts/build-web.sh)"]
async fn the_pages_quality_view_runs_against_its_simulator() {
    let _one = BROWSER.lock().await;
    let serve = Serve::start(&[]);
    let browser = Browser::start(&[]).await;
    let url = format!("{}?seed=5", serve.url);
    for sigma in ["0", "0.4"] {
        let report = run_view(
            &browser,
            &url,
            &[
                ("q-sigma", sigma),
                ("q-prompts", "5"),
                ("q-tokens", "6"),
                ("q-tasks", "3"),
                ("q-levels", "2"),
            ],
        )
        .await;
        assert!(
            report["candidate"]["source"]
                .as_str()
                .unwrap()
                .contains("simulator")
        );
        let sigma: f64 = sigma.parse().unwrap();
        let (r, c) = (
            ToyLm::new(5, 36),
            ToyLm::new(5, 36).perturbed(sigma, 5 ^ 0x5157),
        );
        let (kld, exact_match) = generated_truth(r, c, &probe_prompts(PAGE_SEED, 5), 6);
        let l = &report["levels"][0];
        let got = f(&l["figures"]["distribution"]["kld"]["mean"]);
        // 36 words, top 20: a lower bound, equal to the truth only at σ 0.
        if sigma == 0.0 {
            assert_eq!(got, 0.0);
            assert_eq!(f(&l["figures"]["exact_match"]), 1.0);
            assert_eq!(f(&l["teacher_forced"]["kld"]["mean"]), 0.0);
        } else {
            assert!(got > 0.0 && got <= kld + 1e-9, "{got} vs {kld}");
            assert_eq!(l["figures"]["distribution"]["kld"]["exact"], false);
            assert!((f(&l["figures"]["exact_match"]) - exact_match).abs() < 1e-12);
            let tf = f(&l["teacher_forced"]["kld"]["mean"]);
            let forced = forced_truth(r, c, PAGE_CHUNKS).0;
            assert!(tf > 0.0 && tf <= forced + 1e-9, "{tf} vs {forced}");
        }
        assert_eq!(f(&l["tasks"]["candidate_flexible"]["accuracy"]), 1.0);
        eprintln!(
            "page, simulator σ {sigma}: KLD (lower bound over the top 20 of 36) {got:.7}, exact {kld:.7}; exact match {:.3}",
            f(&l["figures"]["exact_match"])
        );
    }
    browser.close().await;
}
