//! The in-flight responses. The lanes inside are drawn by the paint service
//! (`services::paint`), not by yew: text arrives once per animation frame and the
//! first token goes in at once, without a re-render of the page.

use yew::prelude::*;

/// Stream view props.
#[derive(Properties, PartialEq)]
pub struct StreamsProps {
    /// The container the paint service fills.
    pub lanes: NodeRef,
    /// A run is going.
    pub running: bool,
}

/// The in-flight responses.
#[function_component]
pub fn Streams(props: &StreamsProps) -> Html {
    html! {
        <section class="panel streams" aria-live="off">
            <h2>{ "Responses as they stream" }
                <span class="hint">{ if props.running { " one box per concurrent stream; first token highlighted at the moment it arrived" } else { " (shown during a run)" } }</span>
            </h2>
            <div class="lanes" ref={props.lanes.clone()}></div>
        </section>
    }
}
