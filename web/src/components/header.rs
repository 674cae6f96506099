//! The page header, with the simulated-endpoint label.

use yew::prelude::*;

/// Header props.
#[derive(Properties, PartialEq)]
pub struct HeaderProps {
    /// The endpoint is (or will be) the built-in simulator.
    pub simulated: bool,
}

/// The page header.
#[function_component]
pub fn Header(props: &HeaderProps) -> Html {
    html! {
        <header class="top">
            <h1>{ "tokenscope" }</h1>
            <p class="tagline">{ "How fast your LLM service really feels: time to first token as the user sees it, painted in this browser." }</p>
            if props.simulated {
                <span class="badge sim" id="simulated-badge" title="No URL given: requests go to a simulated server running inside this page (the same model as `tokenscope mock`).">
                    { "SIMULATED endpoint (built into the page)" }
                </span>
            }
        </header>
    }
}
