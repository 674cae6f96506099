//! The settings form. Every field carries its URL query name and goes through
//! [`Settings::set`], so the form and the URL share one parser and one validation.

use tokenscope_render::page::transport::{
    MIXED_CONTENT, header_name_problem, is_mixed_content, parse_header_lines,
};
use wasm_bindgen::JsCast;
use web_sys::{HtmlInputElement, HtmlSelectElement, HtmlTextAreaElement};
use yew::prelude::*;

use crate::services::browser;
use crate::settings::{
    INPUT_TIERS, NetMode, PaintMode, ReasoningDisplay, Settings, TokenizerSetting,
};
use crate::state::Action;

/// Form props.
#[derive(Properties, PartialEq)]
pub struct SettingsFormProps {
    /// The settings shown.
    pub settings: Settings,
    /// The API key (memory only).
    pub api_key: AttrValue,
    /// "Remember in this tab".
    pub remember_key: bool,
    /// Extra headers, one `Name: value` per line (memory only).
    pub headers: AttrValue,
    /// The header that carries the key (empty: `Authorization: Bearer`).
    pub key_header: AttrValue,
    /// The extra headers or the key's header changed.
    pub onauth: Callback<Action>,
    /// Models listed by the endpoint.
    pub models: Vec<String>,
    /// Why listing failed.
    pub models_error: Option<AttrValue>,
    /// A run is going (fields locked).
    pub disabled: bool,
    /// New settings.
    pub onchange: Callback<Settings>,
    /// New key.
    pub onkey: Callback<String>,
    /// Remember toggled.
    pub onremember: Callback<bool>,
    /// List the endpoint's models.
    pub onlistmodels: Callback<()>,
}

/// The `name` and value of the field an event came from (`1`/`0` for a checkbox).
fn field(e: &Event) -> Option<(String, String)> {
    let target = e.target()?;
    if let Some(i) = target.dyn_ref::<HtmlInputElement>() {
        let value = if i.type_() == "checkbox" {
            if i.checked() { "1" } else { "0" }.to_owned()
        } else {
            i.value()
        };
        return Some((i.name(), value));
    }
    let s = target.dyn_ref::<HtmlSelectElement>()?;
    Some((s.name(), s.value()))
}

/// The settings form.
#[function_component]
pub fn SettingsForm(props: &SettingsFormProps) -> Html {
    let error = use_state(|| None::<String>);
    let s = &props.settings;
    let onfield = {
        let settings = props.settings.clone();
        let cb = props.onchange.clone();
        let error = error.clone();
        Callback::from(move |e: Event| {
            let Some((name, value)) = field(&e) else {
                return;
            };
            let mut next = settings.clone();
            match next.set(&name, &value) {
                Ok(()) => {
                    error.set(None);
                    cb.emit(next);
                }
                Err(msg) => error.set(Some(msg)),
            }
        })
    };
    let onkey = {
        let cb = props.onkey.clone();
        Callback::from(move |e: InputEvent| {
            let i: HtmlInputElement = e.target_unchecked_into();
            cb.emit(i.value());
        })
    };
    let onremember = {
        let cb = props.onremember.clone();
        Callback::from(move |e: Event| {
            let i: HtmlInputElement = e.target_unchecked_into();
            cb.emit(i.checked());
        })
    };
    let onlist = {
        let cb = props.onlistmodels.clone();
        Callback::from(move |_: MouseEvent| cb.emit(()))
    };
    let onheaders = {
        let cb = props.onauth.clone();
        Callback::from(move |e: InputEvent| {
            let t: HtmlTextAreaElement = e.target_unchecked_into();
            cb.emit(Action::Headers(t.value()));
        })
    };
    let onkeyheader = {
        let cb = props.onauth.clone();
        Callback::from(move |e: InputEvent| {
            let i: HtmlInputElement = e.target_unchecked_into();
            cb.emit(Action::KeyHeader(i.value()));
        })
    };
    let headers_error = parse_header_lines(&props.headers).err().or_else(|| {
        Some(props.key_header.trim())
            .filter(|h| !h.is_empty())
            .and_then(header_name_problem)
            .map(|p| format!("key header: {p}"))
    });
    let mixed = is_mixed_content(&browser::location_base(), &s.url);
    let d = props.disabled;
    html! {
        <form class="settings panel" onsubmit={Callback::from(|e: SubmitEvent| e.prevent_default())}>
            <h2>{ "Settings" }</h2>
            <label>{ "Endpoint URL" }
                <input name="url" type="url" value={s.url.clone()} onchange={onfield.clone()} disabled={d}
                    placeholder="empty: the simulated endpoint in this page" autocomplete="url" spellcheck="false" />
                <small>{ "OpenAI-compatible base, e.g. http://127.0.0.1:8000/v1" }</small>
                if mixed {
                    <small id="mixed-content" class="error" role="alert">{ MIXED_CONTENT }</small>
                }
            </label>
            <div class="two">
                <label>{ "API" }
                    <select name="api" onchange={onfield.clone()} disabled={d}>
                        <option value="chat" selected={s.api.as_str() == "chat"}>{ "chat/completions" }</option>
                        <option value="completions" selected={s.api.as_str() == "completions"}>{ "completions" }</option>
                        <option value="responses" selected={s.api.as_str() == "responses"}>{ "responses (OpenAI)" }</option>
                        <option value="messages" selected={s.api.as_str() == "messages"}>{ "messages (Anthropic)" }</option>
                    </select>
                </label>
                <label>{ "Model" }
                    <input name="model" value={s.model.clone()} onchange={onfield.clone()} disabled={d}
                        list="models" placeholder="first listed" spellcheck="false" />
                    <datalist id="models">
                        { for props.models.iter().map(|m| html! { <option value={m.clone()} /> }) }
                    </datalist>
                </label>
            </div>
            <div class="inline">
                <button type="button" onclick={onlist} disabled={d || s.is_simulated()}>{ "List models" }</button>
                if let Some(e) = &props.models_error {
                    <small class="error">{ e.clone() }</small>
                } else if !props.models.is_empty() {
                    <small>{ format!("{} model(s) listed", props.models.len()) }</small>
                }
            </div>
            <label>{ "API key" }
                <input name="api_key_field" type="password" value={props.api_key.clone()} oninput={onkey} disabled={d}
                    autocomplete="off" placeholder="optional; kept in memory only" />
            </label>
            <label class="check">
                <input type="checkbox" checked={props.remember_key} onchange={onremember} disabled={d} />
                { "remember in this tab (sessionStorage; never in the URL or the report)" }
            </label>
            <label>{ "Key header" }
                <input name="key_header_field" value={props.key_header.clone()} oninput={onkeyheader} disabled={d}
                    autocomplete="off" spellcheck="false" placeholder="empty: Authorization: Bearer; or e.g. api-key" />
            </label>
            <label>{ "Extra headers" }
                <textarea name="headers_field" rows="2" value={props.headers.clone()} oninput={onheaders} disabled={d}
                    autocomplete="off" spellcheck="false" placeholder="Name: value, one per line; kept in memory only" />
                if let Some(e) = headers_error {
                    <small id="headers-error" class="error" role="alert">{ e }</small>
                }
            </label>
            { load_fields(s, &onfield, d) }
            { more_fields(s, &onfield, d) }
            if let Some(e) = &*error {
                <p class="error" role="alert">{ e.clone() }</p>
            }
        </form>
    }
}

/// The load: input length, output length, concurrency, requests, rounds,
/// warm-up, timeout and SLOs.
fn load_fields(s: &Settings, onfield: &Callback<Event>, d: bool) -> Html {
    html! {
        <>
        <label>{ "Input tokens" }
            <input name="input_tokens" value={s.input_tokens.clone()} list="input-tiers"
                placeholder="256, 0.75max, or tiers 64,256,512" onchange={onfield.clone()} disabled={d} spellcheck="false" />
            <datalist id="input-tiers">
                { for INPUT_TIERS.iter().map(|(v, l)| html! { <option value={*v}>{ *l }</option> }) }
            </datalist>
        </label>
        { row("two", [
            text_field("Max tokens", "max_tokens", s.max_tokens.clone(), "32, or tiers 128,256", onfield, d),
            text_field("Concurrency levels", "concurrency", s.concurrency.clone(), "1,4,16", onfield, d),
        ]) }
        { row("three", [
            text_field("Requests / level", "requests", opt(s.requests), "auto", onfield, d),
            text_field("Rounds", "rounds", s.rounds.to_string(), "", onfield, d),
            text_field("Warm-up", "warmup", opt(s.warmup), "auto", onfield, d),
        ]) }
        { row("three", [
            text_field("or rates (req/s, open loop)", "rate", s.rate.clone(), "2,4 (instead of concurrency)", onfield, d),
            text_field("Arrivals", "arrival", s.arrival.clone(), "poisson, constant, gamma:2", onfield, d),
            text_field("Ramp", "ramp", s.ramp_s.map(|r| format!("{r}s")).unwrap_or_default(), "30s (instead of warm-up)", onfield, d),
        ]) }
        { row("three", [
            text_field("or a trace to replay", "trace", s.trace.clone(), "Mooncake / Azure / BurstGPT file URL", onfield, d),
            text_field("speed", "trace_speed", s.trace_speed.to_string(), "", onfield, d),
            text_field("token scale", "trace_token_scale", s.trace_token_scale.to_string(), "", onfield, d),
        ]) }
        { row("two", [
            text_field("Prompts file", "prompts", s.prompts.clone(), "URL of a JSONL / ShareGPT file (optional)", onfield, d),
            text_field("Sample", "sample", opt(s.prompts_sample), "all", onfield, d),
        ]) }
        { row("two", [
            text_field("Conversations", "conversation", s.conversation.clone(), "turns=3,think=2s (optional)", onfield, d),
            text_field("Shared prefix (tokens)", "shared_prefix", opt(s.shared_prefix), "none", onfield, d),
        ]) }
        { row("two", [
            text_field("Timeout", "timeout", format!("{}s", s.timeout_s), "", onfield, d),
            text_field("SLOs", "slo", s.slo.clone(), "ttft_ms:p95<=500", onfield, d),
        ]) }
        </>
    }
}

/// One labelled text field named as its query key (the settings validate what
/// is typed: one code path for every field keeps the page's wasm small).
fn text_field(
    label: &'static str,
    name: &'static str,
    value: String,
    placeholder: &'static str,
    onfield: &Callback<Event>,
    d: bool,
) -> Html {
    html! {
        <label>{ label }
            <input {name} {value} {placeholder} onchange={onfield.clone()} disabled={d} spellcheck="false" />
        </label>
    }
}

/// Fields side by side (`class`: `two`, `three`).
fn row<const N: usize>(class: &'static str, fields: [Html; N]) -> Html {
    html! { <div {class}>{ for fields }</div> }
}

/// An optional number as typed (empty: the default).
fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// The "More" section: seed, paint and stream modes, request options, the stall
/// threshold and the simulated endpoint.
fn more_fields(s: &Settings, onfield: &Callback<Event>, d: bool) -> Html {
    html! {
        <details>
            <summary>{ "More" }</summary>
            <div class="two">
                { text_field("Seed", "seed", s.seed.to_string(), "", onfield, d) }
                <label>{ "Paint timing" }
                    <select name="paint" onchange={onfield.clone()} disabled={d}>
                        <option value="auto" selected={s.paint == PaintMode::Auto}>{ "Element Timing (fallback: frames)" }</option>
                        <option value="raf" selected={s.paint == PaintMode::Raf}>{ "animation frames only" }</option>
                    </select>
                </label>
            </div>
            <label>{ "Reasoning (thinking) tokens" }
                <select name="reasoning" onchange={onfield.clone()} disabled={d}>
                    <option value="shown" selected={s.reasoning == ReasoningDisplay::Shown}>{ "shown as they stream (rendered TTFT: the first token)" }</option>
                    <option value="hidden" selected={s.reasoning == ReasoningDisplay::Hidden}>{ "hidden (rendered TTFT: the first answer token)" }</option>
                </select>
            </label>
            <label>{ "Streams read in" }
                <select name="net" onchange={onfield.clone()} disabled={d}>
                    <option value="worker" selected={s.net == NetMode::Worker}>{ "a worker (stamps off the main thread)" }</option>
                    <option value="main" selected={s.net == NetMode::Main}>{ "the page's main thread" }</option>
                </select>
            </label>
            <label class="check">
                <input name="ignore_eos" type="checkbox" checked={s.ignore_eos} onchange={onfield.clone()} disabled={d} />
                { "send ignore_eos (every answer max_tokens long)" }
            </label>
            <label class="check">
                <input name="continuous_usage" type="checkbox" checked={s.continuous_usage} onchange={onfield.clone()} disabled={d} />
                { "ask for usage in every chunk (vLLM's continuous_usage_stats: ITL per token counted)" }
            </label>
            <label class="check">
                <input name="request_ids" type="checkbox" checked={s.request_ids} onchange={onfield.clone()} disabled={d} />
                { "send x-request-id (turn off if the endpoint's CORS policy refuses it)" }
            </label>
            <div class="two">
                <label>{ "Prompt tokens counted by" }
                    <select name="tokenizer" onchange={onfield.clone()} disabled={d}>
                        <option value="auto" selected={s.tokenizer == TokenizerSetting::Auto}>{ "the server's /tokenize if it has one" }</option>
                        <option value="server" selected={s.tokenizer == TokenizerSetting::Server}>{ "the server's /tokenize (required)" }</option>
                        <option value="approx" selected={s.tokenizer == TokenizerSetting::Approx}>{ "one token a word (approximate)" }</option>
                    </select>
                </label>
                { text_field("Context window", "context_window", opt(s.context_window), "as the server says", onfield, d) }
            </div>
            { text_field("Stall threshold (ms)", "stall_ms", s.stall_threshold_ms.to_string(), "", onfield, d) }
            { metrics_fields(s, onfield, d) }
            { sim_fields(s, onfield, d) }
        </details>
    }
}

/// The server view: which `/metrics` to scrape during the run, and how often.
fn metrics_fields(s: &Settings, onfield: &Callback<Event>, d: bool) -> Html {
    html! {
        <fieldset disabled={d}>
            <legend>{ "Server view (scraped /metrics)" }</legend>
            <label>{ "Server metrics" }
                <input name="metrics" value={s.metrics.as_query()} onchange={onfield.clone()} spellcheck="false"
                    placeholder="auto" />
                <small>{ "auto: the endpoint's origin + /metrics (the simulator's own without an endpoint); none; or a URL" }</small>
            </label>
            <div class="two">
                { text_field("GPU exporter", "gpu_metrics", s.gpu_metrics.clone(), "dcgm-exporter URL (optional)", onfield, false) }
                { text_field("Scrape every", "scrape_interval", format!("{}s", s.scrape_interval_s), "", onfield, false) }
            </div>
            { text_field("Price", "price", s.price.clone(), "gpu_hour=2.49,gpus=8 or input_per_mtok=3,output_per_mtok=15 (optional)", onfield, false) }
        </fieldset>
    }
}

/// The simulated endpoint's parameters (enabled only when no URL is set).
fn sim_fields(s: &Settings, onfield: &Callback<Event>, d: bool) -> Html {
    html! {
        <fieldset disabled={d || !s.is_simulated()}>
            <legend>{ "Simulated endpoint (as tokenscope mock)" }</legend>
            <div class="three">
                { text_field("TTFT ms", "sim_ttft_ms", s.sim.ttft_ms.to_string(), "", onfield, false) }
                { text_field("ITL ms", "sim_itl_ms", s.sim.itl_ms.to_string(), "", onfield, false) }
                { text_field("max batch", "sim_max_batch", s.sim.max_batch.to_string(), "", onfield, false) }
                { text_field("jitter ms", "sim_jitter_ms", s.sim.jitter_ms.to_string(), "", onfield, false) }
                { text_field("error rate", "sim_error_rate", s.sim.error_rate.to_string(), "", onfield, false) }
                { text_field("tokens/chunk", "sim_tokens_per_chunk", s.sim.tokens_per_chunk.to_string(), "", onfield, false) }
                { text_field("reasoning tokens", "sim_reasoning_tokens", s.sim.reasoning_tokens.to_string(), "", onfield, false) }
            </div>
            <label>{ "faults" }<input name="sim_faults" value={s.sim_faults.clone()} onchange={onfield.clone()} spellcheck="false" /></label>
        </fieldset>
    }
}
