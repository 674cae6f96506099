//! The tiers side by side, for a run with input or output tiers
//! (`input_tokens=64,256`, `max_tokens=16,32`: the whole sweep at each, a report
//! each, as `bench` runs them): per tier and level, TTFT, TPOT, E2E and
//! throughput with each tier's knee (core's `render::tiers`, the table `bench`
//! prints), each tier's report to export, and `#tiers-json` (every tier's report,
//! in order) for automation. The page shows the last tier's report above.

use tokenscope_core::report::ClientReport;
use tokenscope_render::tiers::tier_rows;
use yew::prelude::*;

use crate::services::browser;
use crate::state::TierResult;

/// Tiers props.
#[derive(Properties, PartialEq)]
pub struct TiersProps {
    /// The run's finished tiers (none: a run without tiers).
    pub tiers: Vec<TierResult>,
}

/// The tiers' table and exports.
#[function_component]
pub fn Tiers(props: &TiersProps) -> Html {
    if props.tiers.is_empty() {
        return Html::default();
    }
    let done: Vec<(String, &ClientReport)> = props
        .tiers
        .iter()
        .map(|t| (t.label.clone(), &*t.report))
        .collect();
    let (headers, rows) = tier_rows(&done);
    let all: Vec<&str> = props.tiers.iter().map(|t| t.report_json.as_str()).collect();
    let exports = props.tiers.iter().map(|t| {
        let (label, json) = (t.label.clone(), t.report_json.clone());
        let onclick = Callback::from(move |_: MouseEvent| {
            let name = format!("tokenscope-report.{label}.json");
            let _ = browser::download(&name, &json, "application/json");
        });
        html! { <button {onclick}>{ format!("Export {}", t.label) }</button> }
    });
    html! {
        <section class="panel" id="tiers">
            <h2>{ "Tiers " }<span class="hint">{ "the whole sweep at each input and output length, a report each (the last one's is shown above)" }</span></h2>
            <div class="scroll">
                <table class="levels" id="tiers-table">
                    <thead><tr>{ for headers.iter().map(|h| html! { <th>{ h.clone() }</th> }) }</tr></thead>
                    <tbody>{ for rows.iter().map(|r| html! {
                        <tr>{ for r.iter().map(|c| html! { <td>{ c.clone() }</td> }) }</tr>
                    }) }</tbody>
                </table>
            </div>
            <p class="exports">{ for exports }</p>
            <pre id="tiers-json" hidden=true>{ format!("[{}]", all.join(",")) }</pre>
        </section>
    }
}
