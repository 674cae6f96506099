//! The charts, drawn by `core::charts` as SVG strings (the same code the HTML
//! report uses): throughput vs latency with the knee, the TTFT stages, and for one
//! level the TTFT CDF (network vs painted), the ITL histogram and a per-request
//! timeline.

use tokenscope_core::analyze::slo::Slo;
use tokenscope_core::report::{Knee, LevelReport};
use tokenscope_measure::record::RequestRecord;
use tokenscope_render::charts;
use yew::prelude::*;

use crate::services::lazy_run::LevelRecord;
use crate::state::Shared;

/// Rows of the per-request timeline.
const TIMELINE_ROWS: usize = 48;

/// An SVG string from `core::charts`, inlined. The string is our own: every text
/// in it is escaped by core, and it holds no script or style attribute.
#[derive(Properties, PartialEq)]
pub struct SvgProps {
    /// The SVG markup.
    pub svg: AttrValue,
    /// An id for the figure.
    pub id: AttrValue,
}

/// One chart.
#[function_component]
pub fn Svg(props: &SvgProps) -> Html {
    html! {
        <figure class="chart" id={props.id.clone()}>
            { Html::from_html_unchecked(props.svg.clone()) }
        </figure>
    }
}

/// Chart props.
#[derive(Properties, PartialEq)]
pub struct ChartsProps {
    /// The levels.
    pub levels: Shared<Vec<LevelReport>>,
    /// The knee (final reports).
    pub knee: Option<Knee>,
    /// SLOs.
    pub slos: Vec<Slo>,
    /// The measured requests (runs made here).
    pub records: Shared<Vec<LevelRecord>>,
    /// The level shown in the distribution views.
    pub view_level: usize,
    /// Pick another level.
    pub onlevel: Callback<usize>,
}

/// The charts.
#[function_component]
pub fn Charts(props: &ChartsProps) -> Html {
    let sweep = {
        let levels = props.levels.clone();
        let knee = props.knee.clone();
        let slos = props.slos.clone();
        use_memo((levels, knee, slos), |(levels, knee, slos)| {
            (
                AttrValue::from(charts::throughput_latency(levels, knee.as_ref(), slos)),
                AttrValue::from(charts::ttft_stages(levels)),
            )
        })
    };
    let detail = {
        let levels = props.levels.clone();
        let records = props.records.clone();
        use_memo(
            (levels, records, props.view_level),
            |(levels, records, i)| {
                let l = levels.get(*i)?;
                let q = |k: &str| l.quantiles.get(k).map(Vec::as_slice).unwrap_or_default();
                let cdf = charts::cdf(
                    &[
                        ("TTFT (network)", q("ttft_ms")),
                        ("TTFT (painted)", q("rendered_ttft_ms")),
                    ],
                    "TTFT (ms)",
                );
                let hist = charts::histogram_from_quantiles(q("itl_ms"), 30, "ITL (ms)");
                let level_records: Vec<RequestRecord> = records
                    .iter()
                    .filter(|r| r.level == *i)
                    .map(|r| r.record.clone())
                    .collect();
                let timeline = (!level_records.is_empty()).then(|| {
                    AttrValue::from(charts::request_timeline(&level_records, TIMELINE_ROWS))
                });
                Some((AttrValue::from(cdf), AttrValue::from(hist), timeline))
            },
        )
    };
    if props.levels.is_empty() {
        return html! { <section class="panel charts"></section> };
    }
    let buttons = props.levels.iter().enumerate().map(|(i, l)| {
        let cb = props.onlevel.clone();
        html! {
            <button type="button" class={classes!((i == props.view_level).then_some("active"))}
                aria-pressed={(i == props.view_level).to_string()}
                onclick={Callback::from(move |_: MouseEvent| cb.emit(i))}>{ l.label() }</button>
        }
    });
    html! {
        <section class="panel charts">
            <h2>{ "Sweep" }</h2>
            <div class="chart-grid">
                <Svg id="chart-throughput-latency" svg={sweep.0.clone()} />
                <Svg id="chart-ttft-stages" svg={sweep.1.clone()} />
            </div>
            <h2>{ "One level" }<span class="level-picker">{ for buttons }</span></h2>
            if let Some((cdf, hist, timeline)) = &*detail {
                <div class="chart-grid">
                    <Svg id="chart-ttft-cdf" svg={cdf.clone()} />
                    <Svg id="chart-itl-histogram" svg={hist.clone()} />
                </div>
                if let Some(t) = timeline {
                    <Svg id="chart-request-timeline" svg={t.clone()} />
                } else {
                    <p class="hint">{ "The per-request timeline needs the requests' records: it is shown for runs made in this page (a saved report holds only the summaries)." }</p>
                }
            }
        </section>
    }
}
