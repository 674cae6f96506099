//! The per-request timeline: one row per request from its send to its end, with
//! its headers, token events, first token and (browser) first paint.

use std::fmt::Write as _;

use super::svg::*;
use crate::fmt::escape_html;
use tokenscope_measure::record::{Outcome, RequestRecord};

/// A per-request timeline: one row per request (the first `max_requests` by send
/// time), from its send to its end, with the response headers, every token event,
/// the first token and (browser) its paint marked; rows coloured by outcome.
pub fn request_timeline(records: &[RequestRecord], max_requests: usize) -> String {
    let title = "Request timeline";
    let mut sorted: Vec<&RequestRecord> =
        records.iter().filter(|r| r.t_send_ms.is_finite()).collect();
    sorted.sort_by(|a, b| a.t_reference_ms().total_cmp(&b.t_reference_ms()));
    let shown: Vec<&RequestRecord> = sorted.iter().take(max_requests).copied().collect();
    if shown.is_empty() {
        return empty_chart(title, "No requests: nothing to plot.");
    }
    let t0 = shown
        .iter()
        .map(|r| r.t_reference_ms())
        .fold(f64::INFINITY, f64::min);
    let t1 = shown.iter().map(|r| end_of(r)).fold(t0, f64::max);
    let row_h = ROW_H;
    let height = MARGIN_TOP + row_h * shown.len() as f64 + MARGIN_BOTTOM;
    let heading = if sorted.len() > shown.len() {
        format!(
            "{title} (first {} of {} requests)",
            shown.len(),
            sorted.len()
        )
    } else {
        format!("{title} ({} requests)", shown.len())
    };
    let desc = format!(
        "{heading}: one row per request from its send to its end, in milliseconds since the first send. Grey bar: waiting for headers; coloured bar: the response (blue ok, vermillion error, orange timeout); ticks: token events; circle: first token; diamond: first token painted."
    );
    let mut svg = Svg::new(WIDTH, height, &heading, &desc);
    let plot = Plot::new_rows(
        &mut svg,
        WIDTH,
        height,
        Axis::new(0.0, t1 - t0, "ms since the first send"),
    );
    svg.title_text(&heading);
    for (i, r) in shown.iter().enumerate() {
        request_row(&mut svg, &plot, t0, i, r);
        let mid = plot.top + row_h * (i as f64 + 0.5);
        if shown.len() <= 40 || i.is_multiple_of(5) {
            svg.text(
                plot.left - 6.0,
                mid + 3.5,
                &format!("#{}", i + 1),
                9.0,
                Anchor::End,
                MUTED,
            );
        }
    }
    legend(
        &mut svg,
        MARGIN_LEFT,
        40.0,
        &[
            ("awaiting headers".into(), "#b0b0b0", Dash::Block),
            ("ok".into(), BLUE, Dash::Block),
            ("error".into(), VERMILLION, Dash::Block),
            ("timeout".into(), ORANGE, Dash::Block),
            ("first token".into(), TEXT, Dash::Dot),
            ("painted".into(), GREEN, Dash::Dot),
        ],
    );
    svg.finish()
}

/// One request's row in the timeline, in pixels.
const ROW_H: f64 = 14.0;

/// Where a request's row ends: its last known instant.
fn end_of(r: &RequestRecord) -> f64 {
    [
        r.t_done_ms,
        r.t_first_paint_ms,
        r.t_last_token_ms(),
        r.t_headers_ms,
        Some(r.t_send_ms),
    ]
    .into_iter()
    .flatten()
    .filter(|v| v.is_finite())
    .fold(f64::NEG_INFINITY, f64::max)
}

/// Request `i`'s row: the wait for headers, the response coloured by outcome,
/// its token ticks, the first token and the first paint, titled with its summary.
fn request_row(svg: &mut Svg, plot: &Plot, t0: f64, i: usize, r: &RequestRecord) {
    let y = plot.top + ROW_H * i as f64;
    let mid = y + ROW_H / 2.0;
    let x = |t: f64| plot.sx(t - t0);
    let color = match r.outcome {
        Outcome::Ok => BLUE,
        Outcome::Error { .. } => VERMILLION,
        Outcome::Timeout { .. } => ORANGE,
    };
    let send = r.t_send_ms;
    let done = end_of(r);
    let headers = r.t_headers_ms.filter(|v| v.is_finite()).unwrap_or(done);
    let _ = write!(
        svg.out,
        "<g><title>{}</title>",
        escape_html(&row_summary(i, r))
    );
    if let Some(s) = r.t_scheduled_ms.filter(|s| s.is_finite() && *s < send) {
        svg.line((x(s), mid), (x(send), mid), MUTED, 1.0, Dash::Dotted);
    }
    svg.rect(
        x(send),
        y + 4.0,
        (x(headers) - x(send)).max(0.5),
        ROW_H - 8.0,
        "#b0b0b0",
    );
    svg.rect(
        x(headers),
        y + 3.0,
        (x(done) - x(headers)).max(0.5),
        ROW_H - 6.0,
        color,
    );
    // Token events as one path of short ticks.
    let events: Vec<f64> = r
        .token_events_ms
        .iter()
        .copied()
        .filter(|t| t.is_finite())
        .collect();
    if !events.is_empty() {
        let mut d = String::new();
        for t in &events {
            let _ = write!(d, "M{} {}v{}", f(x(*t)), f(y + 1.0), f(ROW_H - 2.0));
        }
        let _ = write!(
            svg.out,
            r##"<path d="{d}" stroke="#ffffff" stroke-width="0.8" stroke-opacity="0.8"/>"##
        );
    }
    if let Some(t) = r.t_first_token_ms().filter(|t| t.is_finite()) {
        svg.circle(x(t), mid, 3.2, TEXT);
    }
    if let Some(t) = r.t_first_paint_ms.filter(|t| t.is_finite()) {
        let (cx, s) = (x(t), 4.0);
        let _ = write!(
            svg.out,
            r##"<path d="M{} {}l{s} {s}l-{s} {s}l-{s} -{s}z" fill="{GREEN}" stroke="#ffffff" stroke-width="0.8"/>"##,
            f(cx),
            f(mid - s)
        );
    }
    svg.out.push_str("</g>");
}

fn row_summary(i: usize, r: &RequestRecord) -> String {
    let t0 = r.t_reference_ms();
    let rel = |t: Option<f64>| t.filter(|v| v.is_finite()).map(|t| t - t0);
    let outcome = match &r.outcome {
        Outcome::Ok => "ok".to_owned(),
        Outcome::Error { kind, .. } => format!("error {kind}"),
        Outcome::Timeout { phase } => format!("timeout ({phase:?})").to_ascii_lowercase(),
    };
    let mut s = format!("#{}: {outcome}", i + 1);
    for (name, v) in [
        ("headers", rel(r.t_headers_ms)),
        ("TTFT", rel(r.t_first_token_ms())),
        ("painted", rel(r.t_first_paint_ms)),
        ("E2E", rel(r.t_done_ms)),
    ] {
        if let Some(v) = v {
            let _ = write!(s, ", {name} {} ms", fmt_num(v));
        }
    }
    let _ = write!(s, ", {} token events", r.token_events_ms.len());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page's first module reads a record through `shown::record` (what
    /// the timeline draws, nothing else): it draws the same timeline.
    #[test]
    fn a_record_as_the_page_reads_it_draws_the_same_timeline() {
        let mut whole: Vec<RequestRecord> = (0..5)
            .map(|i| tokenscope_core::testing::record(f64::from(i) * 7.0, 30.0, 4.0, 6))
            .collect();
        whole[1].t_scheduled_ms = Some(6.5);
        whole[2].t_first_paint_ms = Some(50.0);
        whole[3].class = Some("chat".into());
        whole[3].images = Some("512x512".into());
        whole[4].outcome = Outcome::Error {
            kind: tokenscope_measure::record::ErrorKind::Http(503),
            message: "unavailable".into(),
        };
        let shown: Vec<RequestRecord> = whole
            .iter()
            .map(|r| {
                let json = serde_json::to_string(r).unwrap();
                tokenscope_core::model::shown::record(&mut serde_json::Deserializer::from_str(
                    &json,
                ))
                .unwrap()
            })
            .collect();
        assert_eq!(request_timeline(&whole, 10), request_timeline(&shown, 10));
        assert_eq!(
            shown[3].class, None,
            "what the timeline does not draw stays off"
        );
        assert_eq!(shown[4].outcome, whole[4].outcome);
    }
}
