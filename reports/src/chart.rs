//! Charts as inline SVG, drawn with plotters: time charts that share one x axis, lane charts
//! (one row per node or tier, with spans and markers) and small histograms.
//!
//! Guarantees: every time chart of a report is drawn on the same [`TimeAxis`] with the same
//! width, margins and label areas, so the plotting areas line up pixel for pixel down the page
//! (CSS scales them together); the liveness phase is shaded with [`LIVENESS_FILL`] on each of
//! them; text is passed to plotters unescaped because its SVG backend escapes text and attribute
//! values itself, and what it draws comes back as an [`Svg`], the one type a page inlines
//! unescaped. Drawing errors come back as strings for the page to show — a chart that cannot
//! be drawn never costs the rest of the report.
//!
//! plotters is built without its `ttf` feature (which needs fontconfig and freetype): text sizes
//! are plotters' own estimates, only used for its layout; the SVG keeps `<text>` elements that the
//! browser sets in its own fonts. Label areas are therefore fixed sizes, not measured.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Width of every time chart; the page scales them all alike on narrow windows.
pub const WIDTH: u32 = 1100;
const Y_LABEL_AREA: u32 = 80;
const X_LABEL_AREA: u32 = 34;
const MARGIN_RIGHT: u32 = 16;
const MARGIN_TOP: u32 = 8;
const LINE_CHART_HEIGHT: u32 = 200;
const LANE_HEIGHT: u32 = 18;
const FONT: &str = "sans-serif";

/// The fill of the liveness-phase shading (tests look for it).
pub const LIVENESS_FILL: RGBColor = RGBColor(0xFF, 0xF1, 0xC9);
/// The colour of a bound drawn across a chart (the scenario's lag bound).
pub const BOUND_COLOR: RGBColor = RGBColor(0xC6, 0x28, 0x28);

/// The vertical line at the first violation, on every time chart.
pub const VIOLATION_COLOR: RGBColor = RGBColor(0xB0, 0x00, 0x20);

/// Distinct colours for up to twelve lines (nodes); more wrap around, which is why many nodes are
/// grouped by tier before they get here.
pub const PALETTE: [RGBColor; 12] = [
    RGBColor(0x1F, 0x77, 0xB4),
    RGBColor(0xFF, 0x7F, 0x0E),
    RGBColor(0x2C, 0xA0, 0x2C),
    RGBColor(0xD6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xBD),
    RGBColor(0x8C, 0x56, 0x4B),
    RGBColor(0xE3, 0x77, 0xC2),
    RGBColor(0x7F, 0x7F, 0x7F),
    RGBColor(0xBC, 0xBD, 0x22),
    RGBColor(0x17, 0xBE, 0xCF),
    RGBColor(0x39, 0x3B, 0x79),
    RGBColor(0x63, 0x79, 0x39),
];

pub fn palette(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// `#RRGGBB`, for HTML legends that must match the SVG.
pub fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// The x axis every time chart of one report shares, in simulated seconds.
#[derive(Clone, Copy, Debug)]
pub struct TimeAxis {
    pub end_s: f64,
    /// Where the liveness phase starts, shaded from there to the end.
    pub liveness_from_s: Option<f64>,
    /// The first violation, drawn as a vertical line across every chart.
    pub first_violation_s: Option<f64>,
}

/// Something drawn on a time chart. Points are (seconds, value).
#[derive(Clone, Debug)]
pub enum Mark {
    /// A line, broken into segments where data is missing; one-point segments become dots.
    Line { color: RGBColor, width: u32, segments: Vec<Vec<(f64, f64)>> },
    /// A filled band between a low and a high value: (seconds, low, high).
    Band { color: RGBColor, segments: Vec<Vec<(f64, f64, f64)>> },
    /// A horizontal dashed line across the whole chart (a bound).
    Bound { color: RGBColor, y: f64 },
}

/// A chart of values over simulated time.
#[derive(Clone, Debug)]
pub struct TimeChart {
    pub y_desc: String,
    pub marks: Vec<Mark>,
    /// The top of the y axis when the data's maximum would squash everything else (outliers are
    /// drawn clipped at the top edge); None: fit the data.
    pub y_top: Option<f64>,
}

fn axis_label(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{v:.2e}")
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A tick label with enough digits to tell ticks `span` apart (a sweep's max lags may differ by a
/// millisecond in 5.5 s, or by days in decades).
fn tick_label(v: f64, span: f64) -> String {
    let step = (span / 4.0).abs().max(f64::MIN_POSITIVE);
    if v.abs() >= 1e6 {
        let digits = ((v.abs().log10() - step.log10()).ceil().max(1.0) as usize).min(8);
        return format!("{v:.digits$e}");
    }
    let decimals = (-step.log10()).ceil().clamp(0.0, 6.0) as usize;
    format!("{v:.decimals$}")
}

/// An SVG document that plotters' SVG backend wrote, to be inlined in a page as it is.
///
/// Only this module makes one, and only from the string an [`SVGBackend`] drew into: no caller
/// can wrap a string of its own. That is what makes inlining it unescaped safe — see the
/// [`Render`](maud::Render) impl.
#[derive(Clone, Debug)]
pub struct Svg(String);

impl Svg {
    /// The SVG text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl maud::Render for Svg {
    fn render_to(&self, buffer: &mut String) {
        // PreEscaped: the markup is plotters' own (its SVG backend writes every tag), and every
        // string that reached it from a trace or a summary — lane labels, span texts, axis
        // descriptions — was escaped by that backend as it wrote it (`<`, `>`, `&`, `"` and `'`,
        // in text and attribute values alike; `time_chart_draws_lines_bounds_and_shading`
        // checks it on text). Escaping it again would print the SVG's source as text.
        maud::PreEscaped(self.0.as_str()).render_to(buffer);
    }
}

/// A drawn chart, or why it could not be drawn.
type Drawn = Result<Svg, String>;

fn err(e: impl std::fmt::Display) -> String {
    format!("plotters: {e}")
}

impl TimeChart {
    fn y_range(&self) -> (f64, f64) {
        let mut hi: f64 = 0.0;
        let mut lo: f64 = 0.0;
        for mark in &self.marks {
            match mark {
                Mark::Line { segments, .. } => {
                    for &(_, v) in segments.iter().flatten() {
                        hi = hi.max(v);
                        lo = lo.min(v);
                    }
                }
                Mark::Band { segments, .. } => {
                    for &(_, l, h) in segments.iter().flatten() {
                        hi = hi.max(h);
                        lo = lo.min(l);
                    }
                }
                Mark::Bound { y, .. } => hi = hi.max(*y),
            }
        }
        if let Some(top) = self.y_top {
            hi = hi.min(top);
        }
        if hi <= lo {
            hi = lo + 1.0;
        }
        (lo, hi + (hi - lo) * 0.05)
    }

    /// Draws the chart as an SVG document.
    pub fn svg(&self, axis: &TimeAxis) -> Drawn {
        let mut out = String::new();
        let (y_lo, y_hi) = self.y_range();
        let clip = |v: f64| v.clamp(y_lo, y_hi);
        {
            let root = SVGBackend::with_string(&mut out, (WIDTH, LINE_CHART_HEIGHT)).into_drawing_area();
            root.fill(&WHITE).map_err(err)?;
            let mut chart = ChartBuilder::on(&root)
                .margin_top(MARGIN_TOP)
                .margin_right(MARGIN_RIGHT)
                .x_label_area_size(X_LABEL_AREA)
                .y_label_area_size(Y_LABEL_AREA)
                .build_cartesian_2d(0f64..axis.end_s, y_lo..y_hi)
                .map_err(err)?;
            shade_liveness(&mut chart, axis, y_lo, y_hi)?;
            chart
                .configure_mesh()
                .x_labels(12)
                .y_labels(5)
                .x_desc("time since the run began (s)")
                .y_desc(self.y_desc.as_str())
                .x_label_formatter(&|x| axis_label(*x))
                .y_label_formatter(&|y| axis_label(*y))
                .label_style((FONT, 12))
                .axis_desc_style((FONT, 12))
                .light_line_style(RGBColor(0xF0, 0xF0, 0xF0))
                .bold_line_style(RGBColor(0xE0, 0xE0, 0xE0))
                .draw()
                .map_err(err)?;
            for mark in &self.marks {
                match mark {
                    Mark::Band { color, segments } => {
                        for seg in segments.iter().filter(|s| !s.is_empty()) {
                            let upper = seg.iter().map(|&(t, _, h)| (t, clip(h)));
                            let lower = seg.iter().rev().map(|&(t, l, _)| (t, clip(l)));
                            let points: Vec<(f64, f64)> = upper.chain(lower).collect();
                            chart
                                .draw_series(std::iter::once(Polygon::new(points, color.mix(0.22).filled())))
                                .map_err(err)?;
                        }
                    }
                    Mark::Line { color, width, segments } => {
                        for seg in segments.iter().filter(|s| !s.is_empty()) {
                            let style = color.stroke_width(*width);
                            if seg.len() == 1 {
                                let (t, v) = seg[0];
                                chart
                                    .draw_series(std::iter::once(Circle::new((t, clip(v)), 3, color.filled())))
                                    .map_err(err)?;
                            } else {
                                chart
                                    .draw_series(LineSeries::new(seg.iter().map(|&(t, v)| (t, clip(v))), style))
                                    .map_err(err)?;
                            }
                        }
                    }
                    Mark::Bound { color, y } => {
                        let points = [(0.0, *y), (axis.end_s, *y)];
                        chart.draw_series(DashedLineSeries::new(points, 8, 5, color.stroke_width(2))).map_err(err)?;
                    }
                }
            }
            mark_violation(&mut chart, axis, y_lo, y_hi)?;
            root.present().map_err(err)?;
        }
        Ok(Svg(out))
    }
}

/// A chart with simulated seconds across and values up, as every time and lane chart is.
type TimeContext<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn shade_liveness<DB: DrawingBackend>(
    chart: &mut TimeContext<'_, DB>,
    axis: &TimeAxis,
    y_lo: f64,
    y_hi: f64,
) -> Result<(), String> {
    if let Some(from) = axis.liveness_from_s.filter(|&from| from < axis.end_s) {
        chart
            .draw_series(std::iter::once(Rectangle::new([(from, y_lo), (axis.end_s, y_hi)], LIVENESS_FILL.filled())))
            .map_err(err)?;
    }
    Ok(())
}

fn mark_violation<DB: DrawingBackend>(
    chart: &mut TimeContext<'_, DB>,
    axis: &TimeAxis,
    y_lo: f64,
    y_hi: f64,
) -> Result<(), String> {
    if let Some(t) = axis.first_violation_s {
        chart
            .draw_series(std::iter::once(PathElement::new(vec![(t, y_lo), (t, y_hi)], VIOLATION_COLOR.stroke_width(2))))
            .map_err(err)?;
    }
    Ok(())
}

/// A span on a lane: a fault from `start_s` to `end_s`.
#[derive(Clone, Debug)]
pub struct Span {
    pub start_s: f64,
    pub end_s: f64,
    pub color: RGBColor,
    /// Written inside the bar when it fits.
    pub text: String,
}

/// One row of a lane chart: a node (or a tier) with its spans and point markers.
#[derive(Clone, Debug)]
pub struct Lane {
    pub label: String,
    pub spans: Vec<Span>,
    pub markers: Vec<(f64, RGBColor)>,
}

/// Longest lane label drawn in the chart; the HTML tables carry the full names.
const LANE_LABEL_CHARS: usize = 12;

fn short(label: &str) -> String {
    if label.chars().count() <= LANE_LABEL_CHARS {
        label.to_string()
    } else {
        let mut s: String = label.chars().take(LANE_LABEL_CHARS - 1).collect();
        s.push('…');
        s
    }
}

/// Draws lanes top to bottom on the shared time axis.
pub fn lanes_svg(axis: &TimeAxis, lanes: &[Lane]) -> Drawn {
    let n = lanes.len().max(1);
    let height = MARGIN_TOP + X_LABEL_AREA + LANE_HEIGHT * n as u32 + 6;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let y_hi = n as f64;
        let mut chart = ChartBuilder::on(&root)
            .margin_top(MARGIN_TOP)
            .margin_right(MARGIN_RIGHT)
            .x_label_area_size(X_LABEL_AREA)
            .y_label_area_size(Y_LABEL_AREA)
            .build_cartesian_2d(0f64..axis.end_s, 0f64..y_hi)
            .map_err(err)?;
        shade_liveness(&mut chart, axis, 0.0, y_hi)?;
        chart
            .configure_mesh()
            .x_labels(12)
            .y_labels(0)
            .disable_y_mesh()
            .x_desc("time since the run began (s)")
            .x_label_formatter(&|x| axis_label(*x))
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 12))
            .light_line_style(RGBColor(0xF0, 0xF0, 0xF0))
            .bold_line_style(RGBColor(0xE0, 0xE0, 0xE0))
            .draw()
            .map_err(err)?;
        let px_per_s = (WIDTH - Y_LABEL_AREA - MARGIN_RIGHT) as f64 / axis.end_s.max(1e-9);
        for (i, lane) in lanes.iter().enumerate() {
            // Row i from the top occupies y in [n-i-1, n-i].
            let top = y_hi - i as f64;
            let mid = top - 0.5;
            for span in &lane.spans {
                let end = span.end_s.min(axis.end_s);
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(span.start_s, top - 0.15), (end, top - 0.85)],
                        span.color.filled(),
                    )))
                    .map_err(err)?;
                let width_px = (end - span.start_s) * px_per_s;
                if width_px > 7.0 * span.text.chars().count() as f64 + 6.0 {
                    let (x, y) = chart.backend_coord(&(span.start_s, mid));
                    root.draw(&Text::new(
                        span.text.clone(),
                        (x + 3, y),
                        (FONT, 11).into_font().color(&WHITE).pos(Pos::new(HPos::Left, VPos::Center)),
                    ))
                    .map_err(err)?;
                }
            }
            for &(t, color) in &lane.markers {
                chart.draw_series(std::iter::once(Circle::new((t, mid), 4, color.filled()))).map_err(err)?;
            }
            let (x, y) = chart.backend_coord(&(0.0, mid));
            root.draw(&Text::new(
                short(&lane.label),
                (x - 6, y),
                (FONT, 12).into_font().color(&BLACK).pos(Pos::new(HPos::Right, VPos::Center)),
            ))
            .map_err(err)?;
        }
        mark_violation(&mut chart, axis, 0.0, y_hi)?;
        root.present().map_err(err)?;
    }
    Ok(Svg(out))
}

/// A small histogram of `values` (already in the unit `x_desc` names), for the sweep page.
pub fn histogram_svg(values: &[f64], x_desc: &str, color: RGBColor) -> Drawn {
    const BINS: usize = 12;
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return Err("no values".into());
    }
    let (lo, hi) = if hi - lo < f64::EPSILON * hi.abs().max(1.0) {
        let pad = (lo.abs() * 0.1).max(0.5);
        (lo - pad, hi + pad)
    } else {
        (lo, hi)
    };
    let width = (hi - lo) / BINS as f64;
    let mut counts = [0u32; BINS];
    for v in values {
        let b = (((v - lo) / width) as usize).min(BINS - 1);
        counts[b] += 1;
    }
    let top = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (360, 150)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(6)
            .margin_right(14)
            .x_label_area_size(32)
            .y_label_area_size(36)
            .build_cartesian_2d(lo..hi, 0f64..top * 1.1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(4)
            .y_labels(3)
            .x_desc(x_desc)
            .y_desc("runs")
            .x_label_formatter(&|x| tick_label(*x, hi - lo))
            .y_label_formatter(&|y| if y.fract() == 0.0 { format!("{y:.0}") } else { String::new() })
            .label_style((FONT, 11))
            .axis_desc_style((FONT, 11))
            .disable_x_mesh()
            .light_line_style(RGBColor(0xF0, 0xF0, 0xF0))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(counts.iter().enumerate().filter(|(_, c)| **c > 0).map(|(b, &c)| {
                let x0 = lo + b as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.92, c as f64)], color.filled())
            }))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(Svg(out))
}

/// One line of an [`xy_svg`] chart.
#[derive(Clone, Debug)]
pub struct XyLine {
    pub label: String,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
}

/// Lines over a numeric x axis (the sizing page's miss ratio against cache share), with an
/// optional shaded x band (the rule's range), points marked.
pub fn xy_svg(lines: &[XyLine], x_desc: &str, y_desc: &str, band: Option<(f64, f64)>) -> Drawn {
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let ys = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    let (x_lo, x_hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let y_hi = ys.fold(0.0f64, f64::max).max(1.0) * 1.08;
    if !x_lo.is_finite() || x_hi <= x_lo {
        return Err("fewer than two x values".into());
    }
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, 320)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .margin_right(20)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..x_hi * 1.04, 0f64..y_hi)
            .map_err(err)?;
        if let Some((lo, hi)) = band {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(lo, 0.0), (hi, y_hi)],
                    RGBColor(0xE8, 0xF5, 0xE9).filled(),
                )))
                .map_err(err)?;
        }
        chart
            .configure_mesh()
            .x_labels(10)
            .y_labels(6)
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&|x| {
                let text = format!("{x:.2}");
                text.trim_end_matches('0').trim_end_matches('.').to_string()
            })
            .y_label_formatter(&|y| tick_label(*y, y_hi))
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 12))
            .light_line_style(RGBColor(0xF0, 0xF0, 0xF0))
            .draw()
            .map_err(err)?;
        for line in lines {
            let style = line.color.stroke_width(2);
            chart.draw_series(LineSeries::new(line.points.iter().copied(), style)).map_err(err)?;
            chart.draw_series(line.points.iter().map(|&p| Circle::new(p, 3, line.color.filled()))).map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(Svg(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis() -> TimeAxis {
        TimeAxis { end_s: 120.0, liveness_from_s: Some(90.0), first_violation_s: Some(60.0) }
    }

    #[test]
    fn time_chart_draws_lines_bounds_and_shading() {
        let chart = TimeChart {
            y_desc: "lag (s) <&>\"'".into(),
            marks: vec![
                Mark::Line {
                    color: palette(0),
                    width: 2,
                    segments: vec![vec![(0.0, 1.0), (10.0, 3.0)], vec![(50.0, 2.0)]],
                },
                Mark::Band { color: palette(1), segments: vec![vec![(0.0, 0.5, 1.5), (10.0, 1.0, 4.0)]] },
                Mark::Bound { color: BOUND_COLOR, y: 35.0 },
            ],
            y_top: None,
        };
        let svg = chart.svg(&axis()).unwrap().0;
        assert!(svg.contains("<polyline"), "{svg}");
        assert!(svg.contains("<polygon"), "{svg}");
        assert!(svg.contains("<circle"), "one-point segments are dots: {svg}");
        assert!(svg.contains(&format!("fill=\"{}\"", hex(LIVENESS_FILL))), "{svg}");
        assert!(svg.contains("lag (s) &lt;&amp;&gt;&quot;&apos;"), "plotters escapes text: {svg}");
        assert!(svg.contains(&format!("stroke=\"{}\"", hex(VIOLATION_COLOR))), "{svg}");
    }

    #[test]
    fn lanes_and_histograms_draw() {
        let lanes = vec![Lane {
            label: "mid-1".into(),
            spans: vec![Span { start_s: 30.0, end_s: 50.0, color: palette(3), text: "kill".into() }],
            markers: vec![(31.0, palette(0))],
        }];
        let svg = lanes_svg(&axis(), &lanes).unwrap().0;
        assert!(svg.contains(">\nmid-1\n</text>") || svg.contains("mid-1"), "{svg}");
        assert!(svg.contains("kill"), "{svg}");
        let svg = histogram_svg(&[1.0, 2.0, 2.5, 9.0], "max lag (s)", palette(0)).unwrap().0;
        assert!(svg.matches("<rect").count() >= 4, "{svg}");
        assert!(histogram_svg(&[5.0, 5.0], "x", palette(0)).is_ok());
        assert!(histogram_svg(&[], "x", palette(0)).is_err());
        assert_eq!(tick_label(5.4935, 0.001), "5.4935");
        assert_eq!(tick_label(20.0, 100.0), "20");
        assert_eq!(tick_label(1.66e9, 7e6), "1.660e9");
    }
}
