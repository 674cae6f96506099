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
    // Nothing to say: no panel at all (an empty one sat between the results).
    if props.warnings.is_empty() && props.notes.is_empty() {
        return html! {};
    }
    html! {
        <section class="warnings" id="warnings">
            <ul>
                { for props.notes.iter().map(|n| html! { <li class="note"><b>{ "URL: " }</b>{ n }</li> }) }
                { for props.warnings.iter().map(|w| html! {
                    <li class={ if w.kind.is_info() { "info" } else { "warn" } } data-kind={ w.kind.as_str() }>
                        <b>{ format!("{}: ", w.kind) }</b>{ &w.message }
                    </li>
                }) }
            </ul>
        </section>
    }
}
