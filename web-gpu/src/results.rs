//! The GPU view's results panel: the verdict, the bandwidth ceiling, the kernels
//! against it (core's chart and table), a developer's own kernel on the
//! roofline, and the decode floor, from a [`KernelsView`].

use tokenscope_render::page::gpu::KernelsView;
use tokenscope_render::page::view::Shared;
use yew::prelude::*;

/// The results panel's props.
#[derive(Properties, PartialEq)]
pub struct ResultsProps {
    /// What the report shows.
    pub view: Shared<KernelsView>,
    /// The run is still going (the report so far).
    pub partial: bool,
}

/// The results panel.
#[function_component]
pub fn Results(props: &ResultsProps) -> Html {
    let v = &*props.view;
    let bandwidth = v.bandwidth.as_ref().map(|b| {
        html! {
            <p id="gpu-bandwidth">{ "Bandwidth ceiling: " }<strong>{ b.clone() }</strong></p>
        }
    });
    // The same table as the CLI and the combined report (core::kernels::kernel_table).
    let verified_col = v.headers.iter().position(|h| h == "verified");
    let head = v.headers.iter().map(|h| html! { <th>{ h.clone() }</th> });
    let rows = v.rows.iter().map(|row| {
        let bad = verified_col.is_some_and(|c| row.get(c).is_some_and(|x| x == "NO"));
        html! {
            <tr class={classes!(bad.then_some("bad"))}>
                { for row.iter().map(|cell| html! { <td>{ cell.clone() }</td> }) }
            </tr>
        }
    });
    let floors = v.floor.iter().map(|row| {
        html! {
            <tr>
                { for row.iter().take(2).map(|x| html! { <td>{ x.clone() }</td> }) }
                { for row.iter().skip(2).map(|x| html! { <td class="num">{ x.clone() }</td> }) }
            </tr>
        }
    });
    let floor_head = v
        .floor_headers
        .iter()
        .map(|h| html! { <th>{ h.clone() }</th> });
    let verdict = if props.partial {
        "partial results (the run was cancelled or is still going)".to_owned()
    } else if v.verified {
        format!(
            "every kernel matched its CPU reference ({} kernels)",
            v.kernels
        )
    } else {
        "NOT every kernel matched its CPU reference (see the table and errors)".to_owned()
    };
    html! {
        <section class="panel gpu-results" id="gpu-results">
            <h2>{ "Results " }<span class="hint" id="gpu-verdict">{ verdict }</span></h2>
            <p class="hint" id="gpu-timing">{ format!("Timing: {}.", v.timing) }</p>
            <p class="hint" id="gpu-variants">{ format!("Variants: {}.", v.variants) }</p>
            { bandwidth.unwrap_or_default() }
            for m in v.ceiling_remarks.iter() {
                <p class="hint warn">{ m.clone() }</p>
            }
            <figure class="chart" id="chart-gpu-kernels">
                { Html::from_html_unchecked(AttrValue::from(v.chart_svg.clone())) }
            </figure>
            <figure class="chart" id="chart-gpu-roofline">
                { Html::from_html_unchecked(AttrValue::from(v.roofline_svg.clone())) }
            </figure>
            <table class="levels" id="gpu-kernels">
                <thead><tr>{ for head }</tr></thead>
                <tbody>{ for rows }</tbody>
            </table>
            if !v.yours.is_empty() {
                <pre id="user-kernel-result">{ v.yours.clone() }</pre>
            }
            for s in v.skipped.iter() {
                <p class="hint">{ s.clone() }</p>
            }
            for e in v.errors.iter() {
                <p class="error">{ e.clone() }</p>
            }
            if !v.floor.is_empty() {
                <h3>{ "Decode floor " }<span class="hint">{ "the fastest a model can decode on this GPU at batch 1: weights and KV cache read once per token" }</span></h3>
                <table class="levels" id="gpu-floor">
                    <thead><tr>{ for floor_head }</tr></thead>
                    <tbody>{ for floors }</tbody>
                </table>
                <p class="hint" id="gpu-floor-legend">{ v.floor_legend.clone() }</p>
            }
        </section>
    }
}
