//! Warnings (typed, with what was seen).

use tokenscope_core::report::ReportWarning;
use yew::prelude::*;

/// Warning list props.
#[derive(Properties, PartialEq)]
pub struct WarningsProps {
    /// The warnings.
    pub warnings: Vec<ReportWarning>,
    /// Notes about ignored URL settings.
    pub notes: Vec<String>,
}

/// The warnings.
#[function_component]
pub fn Warnings(props: &WarningsProps) -> Html {
    if props.warnings.is_empty() && props.notes.is_empty() {
        return html! { <section class="warnings empty"></section> };
    }
    let info = |kind: &str| matches!(kind, "page_overhead" | "simulated_endpoint");
    html! {
        <section class="warnings" id="warnings">
            <ul>
                { for props.notes.iter().map(|n| html! { <li class="note"><b>{ "URL: " }</b>{ n }</li> }) }
                { for props.warnings.iter().map(|w| html! {
                    <li class={ if info(&w.kind) { "info" } else { "warn" } } data-kind={ w.kind.clone() }>
                        <b>{ format!("{}: ", w.kind) }</b>{ &w.message }
                    </li>
                }) }
            </ul>
        </section>
    }
}
