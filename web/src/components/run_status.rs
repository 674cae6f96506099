//! Where the run is: state, progress, model, protocol, and `#run-error`.

use yew::prelude::*;

use crate::services::runner::Progress;
use crate::state::RunState;

/// Status props.
#[derive(Properties, PartialEq)]
pub struct RunStatusProps {
    /// Run state.
    pub run: RunState,
    /// Progress.
    pub progress: Option<Progress>,
    /// The model used.
    pub model: Option<AttrValue>,
    /// The protocol seen.
    pub protocol: Option<AttrValue>,
    /// Against the simulator.
    pub simulated: bool,
    /// A saved report is shown.
    pub loaded: bool,
    /// Why the run failed.
    pub error: Option<AttrValue>,
}

/// The status line.
#[function_component]
pub fn RunStatus(props: &RunStatusProps) -> Html {
    let state = match props.run {
        RunState::Idle if props.loaded => "showing a saved report",
        RunState::Idle => "ready",
        RunState::Running => "running",
        RunState::Done => "done",
        RunState::Failed => "failed",
    };
    let bar = props.progress.as_ref().map(|p| {
        let frac = if p.planned > 0 {
            p.finished as f64 / p.planned as f64
        } else {
            0.0
        };
        html! {
            <div class="progress">
                <span>{ format!("level {}/{} · {} · {}/{} requests", p.level + 1, p.levels, p.phase, p.finished, p.planned) }</span>
                <progress max="1" value={ format!("{frac:.3}") }></progress>
            </div>
        }
    });
    html! {
        <section class={classes!("panel", "status", props.run.as_str())}>
            <div class="status-line">
                <span class="state" id="run-state-label">{ state }</span>
                if let Some(m) = &props.model {
                    <span class="fact">{ "model " }<code>{ m.clone() }</code></span>
                }
                if props.simulated {
                    <span class="fact sim">{ "endpoint: simulated (in the page)" }</span>
                } else if let Some(p) = &props.protocol {
                    <span class="fact">{ "protocol " }<code>{ p.clone() }</code></span>
                }
            </div>
            { bar.unwrap_or_default() }
            <div id="run-error" role="alert" class="run-error">{ props.error.clone().unwrap_or_default() }</div>
        </section>
    }
}
