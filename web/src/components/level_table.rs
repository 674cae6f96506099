//! The per-level tables: the summary (TTFT beside rendered TTFT and render delay)
//! and the TTFT stage breakdown. Figures are read from core's `LevelReport`s and
//! formatted with core's `fmt_ms`; nothing is computed here.

use tokenscope_core::report::LevelReport;
use tokenscope_stats::fmt::{fmt_ms, fmt_rate};
use tokenscope_stats::stats::Summary;
use yew::prelude::*;

use crate::state::Shared;

/// Table props.
#[derive(Properties, PartialEq)]
pub struct LevelTableProps {
    /// The levels (live or final).
    pub levels: Shared<Vec<LevelReport>>,
    /// Index of the knee level, when found.
    pub knee: Option<usize>,
}

fn p(s: &Summary, k: &str) -> String {
    fmt_ms(s.get(k))
}

fn opt(s: Option<&Summary>, k: &str) -> String {
    s.map_or_else(|| "-".into(), |s| p(s, k))
}

/// The summary and stage tables.
#[function_component]
pub fn LevelTable(props: &LevelTableProps) -> Html {
    if props.levels.is_empty() {
        return html! {
            <section class="panel tables"><h2>{ "Results" }</h2><p class="hint">{ "No level measured yet." }</p></section>
        };
    }
    let goodput = props.levels.iter().any(|l| l.goodput_per_s.is_some());
    let rows = props.levels.iter().enumerate().map(|(i, l)| {
        let m = &l.metrics;
        let knee = props.knee == Some(i);
        html! {
            <tr class={classes!(knee.then_some("knee"))}>
                <th scope="row">{ l.label() }{ if knee { " (knee)" } else { "" } }</th>
                <td>{ l.sent }</td><td>{ l.ok }</td><td>{ l.errors }</td><td>{ l.timeouts }</td>
                <td>{ p(&m.ttft_ms, "p50") }</td><td>{ p(&m.ttft_ms, "p95") }</td>
                <td class="painted">{ opt(m.rendered_ttft_ms.as_ref(), "p50") }</td>
                <td class="painted">{ opt(m.rendered_ttft_ms.as_ref(), "p95") }</td>
                <td class="painted">{ opt(m.render_delay_ms.as_ref(), "p50") }</td>
                <td class="painted">{ opt(m.render_delay_ms.as_ref(), "p95") }</td>
                <td>{ p(&m.tpot_ms, "p50") }</td>
                <td>{ p(&m.itl_ms, "p50") }</td><td>{ p(&m.itl_ms, "p99") }</td>
                <td>{ p(&m.e2e_ms, "p50") }</td><td>{ p(&m.e2e_ms, "p95") }</td>
                <td>{ fmt_rate(l.output_tokens_per_s) }</td>
                <td>{ fmt_rate(l.requests_per_s) }</td>
                if goodput {
                    <td>{ l.goodput_per_s.map(fmt_rate).unwrap_or_else(|| "-".into()) }</td>
                }
            </tr>
        }
    });
    let stage_rows = props.levels.iter().map(|l| {
        let m = &l.metrics;
        let methods = if l.paint_methods.is_empty() {
            "-".to_owned()
        } else {
            l.paint_methods
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        html! {
            <tr>
                <th scope="row">{ l.label() }</th>
                <td>{ p(&m.time_to_headers_ms, "p50") }</td>
                <td>{ p(&m.time_to_first_byte_ms, "p50") }</td>
                <td>{ p(&m.ttft_ms, "p50") }</td>
                <td class="painted">{ opt(m.rendered_ttft_ms.as_ref(), "p50") }</td>
                <td class="painted">{ opt(m.render_delay_ms.as_ref(), "max") }</td>
                <td>{ methods }</td>
            </tr>
        }
    });
    html! {
        <section class="panel tables">
            <h2>{ "Results per level" }<span class="hint">{ " ms unless stated; painted = user-perceived" }</span></h2>
            <div class="scroll">
            <table id="summary-table">
                <thead>
                    <tr>
                        <th rowspan="2">{ "load" }</th><th rowspan="2">{ "sent" }</th><th rowspan="2">{ "ok" }</th>
                        <th rowspan="2">{ "err" }</th><th rowspan="2">{ "t/o" }</th>
                        <th colspan="2">{ "TTFT" }</th><th colspan="2" class="painted">{ "TTFT painted" }</th>
                        <th colspan="2" class="painted">{ "render delay" }</th>
                        <th>{ "TPOT" }</th><th colspan="2">{ "ITL" }</th><th colspan="2">{ "E2E" }</th>
                        <th rowspan="2">{ "out tok/s" }</th><th rowspan="2">{ "req/s" }</th>
                        if goodput { <th rowspan="2">{ "goodput/s" }</th> }
                    </tr>
                    <tr>
                        <th>{ "p50" }</th><th>{ "p95" }</th><th class="painted">{ "p50" }</th><th class="painted">{ "p95" }</th>
                        <th class="painted">{ "p50" }</th><th class="painted">{ "p95" }</th>
                        <th>{ "p50" }</th><th>{ "p50" }</th><th>{ "p99" }</th><th>{ "p50" }</th><th>{ "p95" }</th>
                    </tr>
                </thead>
                <tbody>{ for rows }</tbody>
            </table>
            </div>
            <h3>{ "TTFT stages (medians, ms since the send)" }</h3>
            <div class="scroll">
            <table id="stages-table">
                <thead><tr>
                    <th>{ "load" }</th><th>{ "headers" }</th><th>{ "first byte" }</th><th>{ "first token parsed" }</th>
                    <th class="painted">{ "first token painted" }</th><th class="painted">{ "render delay max" }</th><th>{ "paint method" }</th>
                </tr></thead>
                <tbody>{ for stage_rows }</tbody>
            </table>
            </div>
        </section>
    }
}
