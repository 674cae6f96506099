//! The settings on exact inputs: the URL contract, round trips, validation.

use tokenscope_core::report::Load;
use tokenscope_sim::SimConfig;

use super::*;

#[test]
fn gpu_view_query() {
    use tokenscope_render::page::gpu::GpuPreset;
    let q = "?view=gpu&autorun=1&preset=full&timestamps=0";
    let (g, notes) = GpuSettings::from_query(q);
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(
        (g.view, g.preset, g.timestamps, g.autorun),
        (View::Gpu, GpuPreset::Full, false, true)
    );
    // The benchmark's settings take no offence at the view's parameters.
    let (s, notes) = Settings::from_query(q);
    assert!(notes.is_empty(), "{notes:?}");
    assert!(s.autorun);
    // autorun starts only the view the URL opens; bad values are notes.
    let (g, notes) = GpuSettings::from_query("?autorun=1&preset=huge&view=cpu");
    assert_eq!(
        (g.view, g.autorun, g.preset),
        (View::Bench, false, GpuPreset::Quick)
    );
    assert!(g.timestamps);
    assert_eq!(notes.len(), 2, "{notes:?}");
    // tune=1 searches within the page's budget, tune=N within N seconds.
    let (g, notes) = GpuSettings::from_query("?view=gpu&tune=1");
    assert!(notes.is_empty() && g.tune && g.tune_budget_s.is_none());
    let (g, _) = GpuSettings::from_query("?view=gpu&tune=8");
    assert_eq!((g.tune, g.tune_budget_s), (true, Some(8.0)));
    let (g, notes) = GpuSettings::from_query("?view=gpu&tune=fast");
    assert!(!g.tune && notes[0].contains("tune=\"fast\""), "{notes:?}");
    let (s, notes) = Settings::from_query("?view=gpu&tune=8");
    assert!(notes.is_empty() && !s.autorun, "{notes:?}");
    // view=rum opens the Real users view (autorun there starts nothing).
    let (g, notes) = GpuSettings::from_query("?view=rum&autorun=1");
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!((g.view, g.autorun), (View::Rum, false));
    // view=quality opens the Quality view.
    let (g, notes) = GpuSettings::from_query("?view=quality");
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(g.view, View::Quality);
    let (_, notes) = GpuSettings::from_query("?view=chat");
    assert!(notes[0].contains("bench, gpu, rum or quality"), "{notes:?}");
}

#[test]
fn contract_query() {
    let (s, notes) = Settings::from_query(
        "?url=http%3A%2F%2F127.0.0.1%3A8000%2Fv1%2F&api=completions&concurrency=1,4&requests=20&max_tokens=64&input_tokens=64&warmup=2&autorun=1&timeout=30s&slo=ttft_ms:p95%3C%3D500&rounds=2&seed=9",
    );
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(s.url, "http://127.0.0.1:8000/v1");
    assert_eq!(s.api, Api::Completions);
    assert_eq!(s.concurrency, "1,4");
    assert_eq!(s.requests, Some(20));
    assert_eq!(s.max_tokens, "64");
    assert_eq!(s.input_tokens, "64");
    assert_eq!(s.warmup, Some(2));
    assert!(s.autorun);
    assert_eq!(s.timeout_s, 30.0);
    assert_eq!(s.rounds, 2);
    assert_eq!(s.seed, 9);
    let plan = s.validate().unwrap();
    assert_eq!(plan.loads, vec![Load::Concurrency(1), Load::Concurrency(4)]);
    assert_eq!(plan.slos.len(), 1);
    assert_eq!(plan.timeout_ms, 30_000.0);
    let cfg = plan.run_config("m");
    assert_eq!(cfg.levels, vec![1.0, 4.0]);
    assert_eq!(cfg.warmup_requests, 2);
}

#[test]
fn the_key_is_never_read_from_the_url() {
    let (s, notes) = Settings::from_query("key=sk-secret&api_key=sk-2&concurrency=2");
    assert_eq!(notes.len(), 2);
    assert!(notes[0].contains("never read"));
    let q = s.to_query();
    assert!(!q.contains("sk-"), "{q}");
    assert!(!format!("{s:?}").contains("sk-"));
}

#[test]
fn bad_values_are_reported_and_ignored() {
    let (s, notes) =
        Settings::from_query("concurrency=0,x&requests=abc&api=grpc&timeout=-1&slo=bogus&zzz=1");
    assert_eq!(notes.len(), 6, "{notes:?}");
    assert_eq!(s.concurrency, Settings::default().concurrency);
    assert!(notes.iter().any(|n| n.contains("unknown setting \"zzz\"")));
}

#[test]
fn query_round_trips() {
    let mut s = Settings {
        url: "https://api.example.com/v1".into(),
        model: "llama 3".into(),
        requests: Some(40),
        slo: "ttft_ms:p95<=500,tpot_ms:p95<=50".into(),
        paint: PaintMode::Raf,
        request_ids: false,
        ..Settings::default()
    };
    let (back, notes) = Settings::from_query(&s.to_query());
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(back, s);
    s.url.clear();
    s.sim.itl_ms = 9.5;
    s.sim_faults = "reset,http_429".into();
    let (back, _) = Settings::from_query(&s.to_query());
    assert_eq!(back, s);
}

/// Every setting the URL carries, each set to a value other than its default:
/// the link written for them reads back to the same settings, so no field is
/// silently dropped by `to_query` or misread by `set`.
#[test]
fn every_field_survives_the_url() {
    let d = Settings::default();
    let ds = SimConfig::default();
    let benchmark = Settings {
        url: "https://gw.example.com/openai/v1?api-version=2024-02-01".into(),
        api: Api::Completions,
        model: "gemma 3".into(),
        concurrency: "2,8".into(),
        requests: Some(24),
        rounds: 4,
        warmup: Some(3),
        max_tokens: "77".into(),
        input_tokens: "1024".into(),
        timeout_s: 12.5,
        slo: "ttft_ms:p95<=400".into(),
        ignore_eos: true,
        stall_threshold_ms: 333.0,
        seed: 42,
        paint: PaintMode::Raf,
        paint_fallback: PaintFallback::DoubleRaf,
        net: NetMode::Main,
        request_ids: false,
        autorun: false,
        ..d.clone()
    };
    // The simulator's parameters are written only for the built-in endpoint.
    let simulated = Settings {
        url: String::new(),
        sim: SimConfig {
            ttft_ms: 11.0,
            itl_ms: 7.5,
            prefill_tok_per_s: 1234.0,
            max_batch: 5,
            step_growth: 0.5,
            jitter_ms: 0.25,
            tokens_per_chunk: 3,
            error_rate: 0.2,
            stall_ms: 900.0,
            ..ds.clone()
        },
        sim_faults: "reset,stall".into(),
        ..benchmark.clone()
    };
    for s in [benchmark, simulated] {
        // Each field really is off its default (a field left at its default
        // would pass the round trip without being read at all).
        macro_rules! differs {
            ($($f:ident),*) => {$(assert_ne!(s.$f, d.$f, stringify!($f));)*};
        }
        differs!(
            api,
            model,
            concurrency,
            requests,
            rounds,
            warmup,
            max_tokens,
            input_tokens,
            timeout_s,
            slo,
            ignore_eos,
            stall_threshold_ms,
            seed,
            paint,
            paint_fallback,
            net,
            request_ids
        );
        let q = s.to_query();
        let (back, notes) = Settings::from_query(&q);
        assert!(notes.is_empty(), "{q}: {notes:?}");
        assert_eq!(back, s, "{q}");
        if s.url.is_empty() {
            macro_rules! sim_differs {
                ($($f:ident),*) => {$(assert_ne!(s.sim.$f, ds.$f, stringify!($f));)*};
            }
            sim_differs!(
                ttft_ms,
                itl_ms,
                prefill_tok_per_s,
                max_batch,
                step_growth,
                jitter_ms,
                tokens_per_chunk,
                error_rate,
                stall_ms
            );
            assert_ne!(s.sim_faults, d.sim_faults);
        } else {
            assert_ne!(s.url, d.url);
        }
    }
}

#[test]
fn the_simulator_defaults_are_the_mocks() {
    // One definition: core's SimConfig (the CLI's `mock` flags default to it too).
    let s = Settings::default();
    assert_eq!(s.sim, SimConfig::default());
    let plan = s.validate().unwrap();
    assert_eq!(plan.sim.stall_ms, SimConfig::default().stall_ms);
    assert_eq!(plan.sim.faults, SimConfig::default().faults);
    assert_eq!(plan.sim.seed, s.seed);
}

#[test]
fn urls_and_durations() {
    assert_eq!(
        normalize_url(" http://h:1/v1/chat/completions/ "),
        "http://h:1/v1"
    );
    assert_eq!(parse_duration_s("500ms"), Some(0.5));
    assert_eq!(parse_duration_s("2m"), Some(120.0));
    assert_eq!(parse_duration_s("7"), Some(7.0));
    assert_eq!(parse_duration_s("0"), None);
    assert_eq!(parse_duration_s("1h"), Some(3600.0));
    assert_eq!(parse_concurrency("1, 4,16"), Ok(vec![1, 4, 16]));
    assert!(parse_concurrency("1,0").unwrap_err().contains("\"0\""));
    let over = (MAX_CONCURRENCY + 1).to_string();
    assert!(parse_concurrency(&over).unwrap_err().contains(&over));
    assert!(parse_concurrency("").is_err());
    assert_eq!(form_decode("a+b%3C%3d%zz"), "a b<=%zz");
    let s = Settings {
        url: "ftp://x".into(),
        ..Settings::default()
    };
    assert!(
        s.validate()
            .unwrap_err()
            .contains("scheme must be http or https")
    );
    let s = Settings {
        url: "http://user:pw@host/v1".into(),
        ..Settings::default()
    };
    assert!(s.validate().unwrap_err().contains("credentials"));
    let s = Settings {
        sim_faults: "nope".into(),
        ..Settings::default()
    };
    assert!(s.validate().unwrap_err().contains("nope"));
}

#[test]
fn metrics_settings_and_where_the_key_goes() {
    let (s, notes) = Settings::from_query(
        "url=http://127.0.0.1:8000/v1&metrics=none&gpu_metrics=http://gpu:9400/metrics&scrape_interval=250ms",
    );
    assert!(notes.is_empty(), "{notes:?}");
    let plan = s.validate().unwrap();
    assert_eq!(plan.scrape.server, ServerMetricsTarget::Off);
    assert_eq!(plan.scrape.gpu.as_deref(), Some("http://gpu:9400/metrics"));
    assert_eq!(plan.scrape.interval_ms, 250.0);
    let q = s.to_query();
    assert!(
        q.contains("metrics=none") && q.contains("scrape_interval=0.25s"),
        "{q}"
    );

    // auto: the endpoint's origin + /metrics; the simulator's own without an endpoint.
    let (s, _) = Settings::from_query("url=http://127.0.0.1:8000/v1/chat/completions");
    let plan = s.validate().unwrap();
    assert_eq!(
        plan.scrape.server,
        ServerMetricsTarget::Auto("http://127.0.0.1:8000/metrics".into())
    );
    assert!(plan.sends_key_to("http://127.0.0.1:8000/metrics"));
    assert!(!plan.sends_key_to("http://127.0.0.1:8001/metrics"));
    assert!(!plan.sends_key_to("http://127.0.0.1:8000.example.com/metrics"));
    assert!(!plan.sends_key_to("http://gpu:9400/metrics"));
    let (s, _) = Settings::from_query("");
    let plan = s.validate().unwrap();
    assert_eq!(plan.scrape.server, ServerMetricsTarget::Simulator);
    assert!(!plan.sends_key_to("http://127.0.0.1:8000/metrics"));
    assert_eq!(
        plan.run_config("m").server_metrics_url.as_deref(),
        Some("builtin:simulated/metrics")
    );

    // Bad values: named and ignored.
    let (s, notes) = Settings::from_query(
        "metrics=ftp://x/metrics&gpu_metrics=http://u:pw@h/m&scrape_interval=10ms",
    );
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert!(
        notes[0].contains("scheme must be http or https"),
        "{notes:?}"
    );
    assert!(
        notes[1].contains("credentials") && !notes[1].contains("pw"),
        "{notes:?}"
    );
    assert!(notes[2].contains("at least 0.1 s"), "{notes:?}");
    assert_eq!(s.metrics, MetricsSetting::Auto);
}

#[test]
fn prompts_file_sample_and_reasoning_from_the_url() {
    let (s, notes) = Settings::from_query(
        "?prompts=data%2Fprompts.jsonl&sample=5&reasoning=hidden&sim_reasoning_tokens=12",
    );
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(s.prompts, "data/prompts.jsonl");
    assert_eq!(s.prompts_sample, Some(5));
    assert_eq!(s.reasoning, ReasoningDisplay::Hidden);
    assert_eq!(s.sim.reasoning_tokens, 12);
    let plan = s.validate().unwrap();
    assert_eq!(
        plan.prompts,
        Some(PromptsPlan {
            url: "data/prompts.jsonl".into(),
            sample: Some(5)
        })
    );
    let cfg = plan.run_config("m");
    assert_eq!(cfg.prompts_file.as_deref(), Some("data/prompts.jsonl"));
    assert_eq!(cfg.input_tokens, None, "the file's prompts, not a length");
    assert_eq!(cfg.reasoning_display, Some(ReasoningDisplay::Hidden));
    // The link that reruns it says the same.
    let (again, notes) = Settings::from_query(&s.to_query());
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(again, s);
    // Defaults: synthetic prompts, reasoning shown (and recorded so).
    let cfg = Settings::default().validate().unwrap().run_config("m");
    assert_eq!(cfg.prompts_file, None);
    assert_eq!(cfg.reasoning_display, Some(ReasoningDisplay::Shown));
    // Bad values are notes naming them, or refusals naming the field.
    let (_, notes) = Settings::from_query("?reasoning=maybe&sample=0");
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].contains("reasoning=\"maybe\""), "{notes:?}");
    for bad in ["javascript:alert(1)", "http://user:pw@example.com/p.jsonl"] {
        let s = Settings {
            prompts: bad.into(),
            ..Settings::default()
        };
        let e = s.validate().unwrap_err();
        assert!(e.contains("prompts file URL"), "{bad}: {e}");
        assert!(!e.contains("pw@"), "no credentials in the error: {e}");
    }
}

#[test]
fn open_loop_rates_arrivals_and_a_trace_from_the_url() {
    use tokenscope_core::report::{Arrival, LoadMode};
    let (s, notes) = Settings::from_query("?rate=2,4.5&arrival=gamma:2");
    assert!(notes.is_empty(), "{notes:?}");
    let plan = s.validate().unwrap();
    assert_eq!(plan.loads, vec![Load::Rate(2.0), Load::Rate(4.5)]);
    assert_eq!(
        plan.open_loop,
        Some(OpenLoop::Rate {
            arrival: Arrival::Gamma,
            cv: Some(2.0)
        })
    );
    let cfg = plan.run_config("m");
    assert_eq!(cfg.mode, LoadMode::Rate);
    assert_eq!(cfg.arrival, Some(Arrival::Gamma));
    assert_eq!(cfg.arrival_cv, Some(2.0));
    let (again, _) = Settings::from_query(&s.to_query());
    assert_eq!(again, s);

    let (s, notes) =
        Settings::from_query("?trace=t%2Fmooncake.jsonl&trace_speed=10&trace_token_scale=0.02");
    assert!(notes.is_empty(), "{notes:?}");
    let plan = s.validate().unwrap();
    assert_eq!(
        plan.open_loop,
        Some(OpenLoop::Trace {
            url: "t/mooncake.jsonl".into(),
            speed: 10.0,
            token_scale: 0.02
        })
    );
    let cfg = plan.run_config("m");
    assert_eq!(cfg.arrival, Some(Arrival::Trace));
    assert_eq!(cfg.input_tokens, None, "the trace's own lengths");
    let (again, _) = Settings::from_query(&s.to_query());
    assert_eq!(again, s);

    // Bad values: notes naming them, or a refusal naming the field.
    let (_, notes) = Settings::from_query("?rate=0&arrival=gamma:-1");
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[0].starts_with("rate:") && notes[1].starts_with("arrival:"),
        "{notes:?}"
    );
    let slow = Settings {
        trace: "t.jsonl".into(),
        trace_speed: 0.0,
        ..Settings::default()
    };
    assert!(slow.validate().unwrap_err().contains("trace_speed"));
}

#[test]
fn production_shaped_settings_from_the_url() {
    use tokenscope_workload::conversation::Conversation;
    let (s, notes) = Settings::from_query(
        "?conversation=turns%3D3,think%3D250ms&shared_prefix=64&tokenizer=server&input_tokens=0.75max&context_window=2048&ramp=2s",
    );
    assert!(notes.is_empty(), "{notes:?}");
    let plan = s.validate().unwrap();
    assert_eq!(
        plan.conversation,
        Some(Conversation {
            turns: 3,
            think_ms: 250.0
        })
    );
    assert_eq!(plan.tokenizer, TokenizerSetting::Server);
    assert_eq!(plan.shared_prefix, Some(64));
    assert_eq!(plan.input_of_context, Some(0.75));
    assert_eq!(plan.context_window, Some(2048));
    assert_eq!(plan.ramp_ms, Some(2000.0));
    assert_eq!(
        plan.warmup_for(Load::Concurrency(4)),
        0,
        "the ramp replaces it"
    );
    let cfg = plan.run_config("m");
    assert_eq!(cfg.ramp_s, Some(2.0));
    assert_eq!(cfg.shared_prefix_tokens, Some(64));
    assert_eq!(cfg.conversation, plan.conversation);
    let (again, notes) = Settings::from_query(&s.to_query());
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(again, s);
    // A number clears the fraction.
    let (s2, _) = Settings::from_query("?input_tokens=0.5max&input_tokens=64");
    let plan = s2.validate().unwrap();
    assert_eq!((plan.input_tokens, plan.input_of_context), (64, None));

    // Bad values are notes naming them; conversations refuse what the CLI refuses.
    let (_, notes) = Settings::from_query(
        "?conversation=turns%3D0&shared_prefix=0&tokenizer=file&input_tokens=2max",
    );
    assert_eq!(notes.len(), 4, "{notes:?}");
    for (n, key) in notes
        .iter()
        .zip(["conversation", "shared_prefix", "tokenizer", "input_tokens"])
    {
        assert!(n.starts_with(key), "{n}");
    }
    let completions = Settings {
        conversation: "turns=2".into(),
        api: Api::Completions,
        ..Settings::default()
    };
    assert!(
        completions
            .validate()
            .unwrap_err()
            .contains("the chat, responses or messages API")
    );
    let rated = Settings {
        conversation: "turns=2".into(),
        rate: "2".into(),
        ..Settings::default()
    };
    assert!(rated.validate().unwrap_err().starts_with("conversation"));
}

#[test]
fn input_and_output_tiers_from_the_url() {
    use tokenscope_workload::tokens::{InputLength, Tier};
    let (s, notes) = Settings::from_query("?input_tokens=64,0.5max&max_tokens=16,32");
    assert!(notes.is_empty(), "{notes:?}");
    let plan = s.validate().unwrap();
    // Every pair, inputs outer (core's grid, as bench makes them).
    let inputs = InputLength::parse_list("64,0.5max").unwrap();
    assert_eq!(plan.tiers, Tier::grid(&inputs, &[16, 32]));
    // Each tier's plan: its lengths, the rest as the run's.
    let t1 = plan.for_tier(1);
    assert_eq!(
        (t1.input_tokens, t1.max_tokens, t1.input_of_context),
        (64, 32, None)
    );
    let t2 = plan.for_tier(2);
    assert_eq!((t2.max_tokens, t2.input_of_context), (16, Some(0.5)));
    assert_eq!(t2.run_config("m").max_tokens, 16);
    let (again, _) = Settings::from_query(&s.to_query());
    assert_eq!(again, s);
    // Bad lists are notes; tiers with a trace are refused.
    let (_, notes) = Settings::from_query("?input_tokens=64,x&max_tokens=16,0");
    assert_eq!(notes.len(), 2, "{notes:?}");
    let traced = Settings {
        trace: "t.jsonl".into(),
        max_tokens: "16,32".into(),
        ..Settings::default()
    };
    assert!(traced.validate().unwrap_err().starts_with("trace"));
}
