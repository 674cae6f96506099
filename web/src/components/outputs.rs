//! The automation outputs: `#report-json` (the client report), `#records-json`
//! (every request as a `tokenscope.raw/1` line, warm-up included) and `#run-error`.

use yew::prelude::*;

use crate::state::Shared;

/// Output props.
#[derive(Properties, PartialEq)]
pub struct OutputsProps {
    /// The report JSON, once the run ended.
    pub report_json: Option<Shared<String>>,
    /// The records JSON, once the run ended.
    pub records_json: Option<Shared<String>>,
}

/// The report JSON (visible on demand) and the records (hidden).
#[function_component]
pub fn Outputs(props: &OutputsProps) -> Html {
    let report = props
        .report_json
        .as_ref()
        .map(|s| s.0.as_str().to_owned())
        .unwrap_or_default();
    let records = props
        .records_json
        .as_ref()
        .map(|s| s.0.as_str().to_owned())
        .unwrap_or_default();
    html! {
        <section class="panel outputs">
            <details>
                <summary>{ "Report JSON (tokenscope.client/1)" }</summary>
                <pre id="report-json">{ report }</pre>
            </details>
            <pre id="records-json" hidden=true>{ records }</pre>
        </section>
    }
}
