//! The SVG primitives every chart is drawn with: the palette and sizes, axes with
//! round ticks, the plotting area and its scales, the SVG writer (escaped text,
//! presentation attributes only, no `NaN`), legends, and the empty chart.

use std::fmt::Write as _;

use crate::fmt::escape_html;

/// Okabe-Ito colours: distinguishable with the common colour-vision deficiencies.
pub(super) const PALETTE: [&str; 7] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
];
pub(super) const BLUE: &str = PALETTE[0];
pub(super) const VERMILLION: &str = PALETTE[1];
pub(super) const GREEN: &str = PALETTE[2];
pub(super) const PURPLE: &str = PALETTE[3];
pub(super) const ORANGE: &str = PALETTE[4];
pub(super) const SKY: &str = PALETTE[5];
pub(super) const GRID: &str = "#e3e3e3";
pub(super) const AXIS: &str = "#555555";
pub(super) const TEXT: &str = "#222222";
pub(super) const MUTED: &str = "#666666";

pub(super) const WIDTH: f64 = 720.0;
pub(super) const HEIGHT: f64 = 400.0;
pub(super) const MARGIN_LEFT: f64 = 70.0;
pub(super) const MARGIN_RIGHT: f64 = 24.0;
pub(super) const MARGIN_TOP: f64 = 64.0;
pub(super) const MARGIN_BOTTOM: f64 = 52.0;

pub(super) fn min_max(v: &[f64]) -> (f64, f64) {
    let lo = v
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(f64::INFINITY, f64::min);
    let hi = v
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(f64::NEG_INFINITY, f64::max);
    if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

/// A chart that says why it is empty (still a valid, titled SVG).
pub(super) fn empty_chart(title: &str, message: &str) -> String {
    let h = 120.0;
    let mut svg = Svg::new(WIDTH, h, title, message);
    svg.title_text(title);
    svg.text(WIDTH / 2.0, 80.0, message, 13.0, Anchor::Middle, MUTED);
    svg.finish()
}

/// Line styles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dash {
    Solid,
    Dashed,
    Dotted,
    Guide,
    /// Legend only: a dot marker.
    Dot,
    /// Legend only: a filled block.
    Block,
}

impl Dash {
    pub(super) fn attr(self) -> &'static str {
        match self {
            Dash::Solid | Dash::Dot | Dash::Block => "",
            Dash::Dashed => r#" stroke-dasharray="7 4""#,
            Dash::Dotted => r#" stroke-dasharray="2 3""#,
            Dash::Guide => r#" stroke-dasharray="10 5""#,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// One axis: a data range widened to round ticks, and a label with its unit.
#[derive(Debug, Clone)]
pub(super) struct Axis {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) ticks: Vec<f64>,
    pub(super) step: f64,
    pub(super) label: String,
    pub(super) percent: bool,
    /// Values are log10 of the data; ticks at whole decades, labelled as the data.
    pub(super) log10: bool,
}

impl Axis {
    pub(super) fn new(lo: f64, hi: f64, label: &str) -> Self {
        let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
            (lo.min(hi), lo.max(hi))
        } else {
            (0.0, 1.0)
        };
        if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
            let pad = (hi.abs() * 0.1).max(1.0);
            lo = (lo - pad).max(if lo >= 0.0 { 0.0 } else { f64::MIN });
            hi += pad;
        }
        let step = nice_step((hi - lo) / 5.0);
        let lo = (lo / step).floor() * step;
        let hi = (hi / step).ceil() * step;
        let n = ((hi - lo) / step).round() as usize;
        let ticks = (0..=n).map(|k| lo + step * k as f64).collect();
        Self {
            lo,
            hi,
            ticks,
            step,
            label: label.to_owned(),
            percent: false,
            log10: false,
        }
    }

    /// A log10 axis spanning whole decades around `lo..hi` (positive data values);
    /// callers place `v.log10()`.
    pub(super) fn log10(lo: f64, hi: f64, label: &str) -> Self {
        let lo = lo.max(f64::MIN_POSITIVE).log10().floor();
        let hi = hi.max(f64::MIN_POSITIVE).log10().ceil().max(lo + 1.0);
        Self {
            lo,
            hi,
            ticks: (lo as i32..=hi as i32).map(f64::from).collect(),
            step: 1.0,
            label: label.to_owned(),
            percent: false,
            log10: true,
        }
    }

    pub(super) fn percent(label: &str) -> Self {
        Self {
            lo: 0.0,
            hi: 100.0,
            ticks: vec![0.0, 25.0, 50.0, 75.0, 100.0],
            step: 25.0,
            label: label.to_owned(),
            percent: true,
            log10: false,
        }
    }

    pub(super) fn tick_label(&self, v: f64) -> String {
        if self.log10 {
            return decade_label(v.round() as i32);
        }
        let s = fmt_tick(v, self.step);
        if self.percent { format!("{s}%") } else { s }
    }
}

/// `10^e` for people: 0.01, 0.1, 1, 10, 100, 1k, 10k, 100k, 1M, 10M, ...
pub(super) fn decade_label(e: i32) -> String {
    match e {
        ..0 => format!("{:.*}", (-e) as usize, 10f64.powi(e)),
        0..3 => 10u64.pow(e as u32).to_string(),
        3..6 => format!("{}k", 10u64.pow(e as u32 - 3)),
        6..9 => format!("{}M", 10u64.pow(e as u32 - 6)),
        _ => format!("1e{e}"),
    }
}

/// 1, 2, 2.5 or 5 times a power of ten, at least `raw`.
pub(super) fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 2.5 {
        2.5
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// A tick label with as many decimals as the step needs (`12`, `0.25`, `15k`).
pub(super) fn fmt_tick(v: f64, step: f64) -> String {
    let v = if v.abs() < step * 1e-9 { 0.0 } else { v };
    if step >= 1000.0 && v.abs() >= 10_000.0 && (v / 1000.0).fract().abs() < 1e-9 {
        return format!("{}k", (v / 1000.0).round());
    }
    // As many decimals as the step has (0.25 -> 2, 0.5 -> 1, 20 -> 0).
    let decimals = (0..=6)
        .find(|&d| {
            let scaled = step * 10f64.powi(d);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
        })
        .unwrap_or(6) as usize;
    format!("{v:.decimals$}")
}

/// A number for people: `0.42`, `12.3`, `420`.
pub(super) fn fmt_num(v: f64) -> String {
    crate::fmt::fmt_ms(v.is_finite().then_some(v))
}

/// A coordinate: one decimal, never `NaN`.
pub(super) fn f(v: f64) -> String {
    if v.is_finite() {
        let r = (v * 10.0).round() / 10.0;
        if r == r.trunc() {
            format!("{}", r as i64)
        } else {
            format!("{r:.1}")
        }
    } else {
        "0".into()
    }
}

/// The SVG being written.
pub(super) struct Svg {
    pub(super) out: String,
}

impl Svg {
    pub(super) fn new(width: f64, height: f64, title: &str, desc: &str) -> Self {
        let mut out = String::with_capacity(8192);
        let _ = write!(
            out,
            r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif" font-size="12"><title>{}</title><desc>{}</desc><rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>"##,
            escape_html(title),
            escape_html(desc),
            w = f(width),
            h = f(height),
        );
        Self { out }
    }

    pub(super) fn title_text(&mut self, title: &str) {
        self.text_weight(MARGIN_LEFT, 22.0, title, 15.0, Anchor::Start, TEXT, true);
    }

    pub(super) fn line(
        &mut self,
        (x1, y1): (f64, f64),
        (x2, y2): (f64, f64),
        color: &str,
        width: f64,
        dash: Dash,
    ) {
        let _ = write!(
            self.out,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{color}" stroke-width="{}"{}/>"#,
            f(x1),
            f(y1),
            f(x2),
            f(y2),
            f(width),
            dash.attr()
        );
    }

    pub(super) fn polyline(&mut self, pts: &[(f64, f64)], color: &str, width: f64, dash: Dash) {
        if pts.len() < 2 {
            return;
        }
        let mut d = String::new();
        for (i, (x, y)) in pts.iter().enumerate() {
            if i > 0 {
                d.push(' ');
            }
            let _ = write!(d, "{},{}", f(*x), f(*y));
        }
        let _ = write!(
            self.out,
            r#"<polyline points="{d}" fill="none" stroke="{color}" stroke-width="{}" stroke-linejoin="round"{}/>"#,
            f(width),
            dash.attr()
        );
    }

    pub(super) fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str) {
        let _ = write!(
            self.out,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{fill}"/>"#,
            f(x),
            f(y),
            f(w.max(0.0)),
            f(h.max(0.0))
        );
    }

    pub(super) fn rect_titled(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, title: &str) {
        let _ = write!(
            self.out,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{fill}"><title>{}</title></rect>"#,
            f(x),
            f(y),
            f(w.max(0.0)),
            f(h.max(0.0)),
            escape_html(title)
        );
    }

    pub(super) fn circle(&mut self, x: f64, y: f64, r: f64, fill: &str) {
        let _ = write!(
            self.out,
            r#"<circle cx="{}" cy="{}" r="{}" fill="{fill}"/>"#,
            f(x),
            f(y),
            f(r)
        );
    }

    /// An unfilled ring (a marked point).
    pub(super) fn ring(&mut self, x: f64, y: f64, r: f64, stroke: &str) {
        let _ = write!(
            self.out,
            r#"<circle cx="{}" cy="{}" r="{}" fill="none" stroke="{stroke}" stroke-width="2"/>"#,
            f(x),
            f(y),
            f(r)
        );
    }

    pub(super) fn circle_titled(&mut self, x: f64, y: f64, r: f64, fill: &str, title: &str) {
        let _ = write!(
            self.out,
            r#"<circle cx="{}" cy="{}" r="{}" fill="{fill}"><title>{}</title></circle>"#,
            f(x),
            f(y),
            f(r),
            escape_html(title)
        );
    }

    pub(super) fn text(&mut self, x: f64, y: f64, s: &str, size: f64, anchor: Anchor, fill: &str) {
        self.text_weight(x, y, s, size, anchor, fill, false);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn text_weight(
        &mut self,
        x: f64,
        y: f64,
        s: &str,
        size: f64,
        anchor: Anchor,
        fill: &str,
        bold: bool,
    ) {
        let _ = write!(
            self.out,
            r#"<text x="{}" y="{}" font-size="{}" text-anchor="{}" fill="{fill}"{}>{}</text>"#,
            f(x),
            f(y),
            f(size),
            anchor.as_str(),
            if bold { r#" font-weight="600""# } else { "" },
            escape_html(s)
        );
    }

    pub(super) fn finish(mut self) -> String {
        self.out.push_str("</svg>");
        self.out
    }
}

/// The plotting area and its scales.
pub(super) struct Plot {
    pub(super) left: f64,
    pub(super) right: f64,
    pub(super) top: f64,
    pub(super) bottom: f64,
    pub(super) x: Axis,
    pub(super) y: Option<Axis>,
}

impl Plot {
    /// Draw a grid, axes, ticks and labels for an x-y chart.
    pub(super) fn new(svg: &mut Svg, width: f64, height: f64, x: Axis, y: Axis) -> Self {
        let p = Plot {
            left: MARGIN_LEFT,
            right: width - MARGIN_RIGHT,
            top: MARGIN_TOP,
            bottom: height - MARGIN_BOTTOM,
            x,
            y: Some(y),
        };
        p.draw_x(svg);
        if let Some(y) = &p.y {
            for t in &y.ticks {
                let py = p.sy(*t);
                svg.line((p.left, py), (p.right, py), GRID, 1.0, Dash::Solid);
                svg.text(
                    p.left - 6.0,
                    py + 4.0,
                    &y.tick_label(*t),
                    11.0,
                    Anchor::End,
                    AXIS,
                );
            }
            let cy = (p.top + p.bottom) / 2.0;
            let _ = write!(
                svg.out,
                r#"<text x="16" y="{}" font-size="12" text-anchor="middle" fill="{TEXT}" transform="rotate(-90 16 {})">{}</text>"#,
                f(cy),
                f(cy),
                escape_html(&y.label)
            );
        }
        svg.line(
            (p.left, p.bottom),
            (p.right, p.bottom),
            AXIS,
            1.0,
            Dash::Solid,
        );
        svg.line((p.left, p.top), (p.left, p.bottom), AXIS, 1.0, Dash::Solid);
        p
    }

    /// Rows (one per item) against an x axis: vertical grid lines only.
    pub(super) fn new_rows(svg: &mut Svg, width: f64, height: f64, x: Axis) -> Self {
        Self::new_rows_at(svg, width, height, MARGIN_LEFT, x)
    }

    /// Rows with a left gutter of `left` px for the labels.
    pub(super) fn new_rows_at(svg: &mut Svg, width: f64, height: f64, left: f64, x: Axis) -> Self {
        let p = Plot {
            left,
            right: width - MARGIN_RIGHT,
            top: MARGIN_TOP,
            bottom: height - MARGIN_BOTTOM,
            x,
            y: None,
        };
        p.draw_x(svg);
        svg.line(
            (p.left, p.bottom),
            (p.right, p.bottom),
            AXIS,
            1.0,
            Dash::Solid,
        );
        p
    }

    pub(super) fn draw_x(&self, svg: &mut Svg) {
        for t in &self.x.ticks {
            let px = self.sx(*t);
            svg.line((px, self.top), (px, self.bottom), GRID, 1.0, Dash::Solid);
            svg.text(
                px,
                self.bottom + 16.0,
                &self.x.tick_label(*t),
                11.0,
                Anchor::Middle,
                AXIS,
            );
        }
        svg.text(
            (self.left + self.right) / 2.0,
            self.bottom + 38.0,
            &self.x.label,
            12.0,
            Anchor::Middle,
            TEXT,
        );
    }

    pub(super) fn sx(&self, v: f64) -> f64 {
        let span = (self.x.hi - self.x.lo).max(f64::MIN_POSITIVE);
        self.left + (v - self.x.lo) / span * (self.right - self.left)
    }

    pub(super) fn sy(&self, v: f64) -> f64 {
        match &self.y {
            Some(y) => {
                let span = (y.hi - y.lo).max(f64::MIN_POSITIVE);
                self.bottom - (v - y.lo) / span * (self.bottom - self.top)
            }
            None => self.top,
        }
    }
}

/// A one-row legend.
pub(super) fn legend(svg: &mut Svg, x0: f64, y: f64, items: &[(String, &str, Dash)]) {
    let mut x = x0;
    for (name, color, dash) in items {
        match dash {
            Dash::Dot => svg.circle(x + 8.0, y - 4.0, 4.5, color),
            Dash::Block => svg.rect(x, y - 9.0, 16.0, 10.0, color),
            d => svg.line((x, y - 4.0), (x + 18.0, y - 4.0), color, 2.0, *d),
        }
        svg.text(x + 22.0, y, name, 11.0, Anchor::Start, TEXT);
        // About 6 px per character at 11 px.
        x += 34.0 + 6.2 * name.chars().count() as f64;
    }
}
