//! SVG charts for the HTML report, drawn with plotters' SVG backend into strings: watts per
//! level per configuration with 95 % error bars, annual cost per configuration (at the
//! measured duty cycle where there is one), the candidate machines' cost, energy and cost
//! per day as bars, and C-state residency per sweep level with the busy share. Each
//! function returns `None` (or nothing) when the report has nothing to draw.
//!
//! Every chart is drawn in two [`Layout`]s, one for a desktop's width and one for a
//! phone's; the page shows the one that suits the screen, so that the chart fills its width
//! without being scaled down past legible: its text is at least 11 px at 390 px and
//! 1280 px wide screens. Captions, axis labels and legends are broken at words to fit
//! ([`labels`]), never cut; the x axis has a slot per bar and a tick per label.
//!
//! Units: W, the tariff's currency per year, kWh and currency per day, percent of time;
//! positions in the SVG's user units (px at its natural size).

mod bars;
mod labels;

use plotters::coord::Shift;
use plotters::prelude::*;

pub use bars::{annual_cost, candidates, residency};
use labels::{Anchor, Label, Marks, Stroke, chars_in, height_of};

use super::RenderError;
use crate::analysis::modes::level_loops;

/// Colour of the 95 % error bars (distinct from every series colour, so a reader and a
/// test can tell the bars from the lines).
pub const ERROR_BAR: RGBColor = RGBColor(0x44, 0x44, 0x44);

/// The C-state chart's name for the time no idle state covers: the CPUs were running.
pub const BUSY_STATE: &str = "busy (C0)";
const FONT: &str = "sans-serif";

/// Space around the plot, user units.
const MARGIN: f64 = 12.0;
/// A tick mark's length below the axis.
const TICK: f64 = 5.0;

/// The size a chart is drawn at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// 760 units wide, shown at up to 760 px: a desktop's.
    Wide,
    /// 360 units wide, shown at a phone's width.
    Narrow,
}

impl Layout {
    /// The SVG's width.
    pub fn width(self) -> f64 {
        match self {
            Layout::Wide => 760.0,
            Layout::Narrow => 360.0,
        }
    }

    /// Text size: 11 px or more where the page shows the layout (the wide one from 608 px
    /// of room, 0.8 of its size; the narrow one at 358 px, a 390 px phone's).
    fn text(self) -> f64 {
        match self {
            Layout::Wide => 14.5,
            Layout::Narrow => 12.5,
        }
    }

    fn caption(self) -> f64 {
        match self {
            Layout::Wide => 17.0,
            Layout::Narrow => 14.0,
        }
    }

    /// The plot's own height.
    fn plot_height(self) -> f64 {
        match self {
            Layout::Wide => 280.0,
            Layout::Narrow => 220.0,
        }
    }

    /// The y axis's labels and description.
    fn y_area(self) -> f64 {
        match self {
            Layout::Wide => 70.0,
            Layout::Narrow => 60.0,
        }
    }

    /// The plot's width.
    fn plot_width(self) -> f64 {
        self.width() - 2.0 * MARGIN - self.y_area()
    }

    /// A plotters text style of `size` user units (plotters writes its size / 1.24).
    fn font(size: f64) -> TextStyle<'static> {
        (FONT, size * 1.24).into_text_style(&(1, 1))
    }
}

fn chart_err<E: std::fmt::Display>(chart: &'static str) -> impl Fn(E) -> RenderError {
    move |e| RenderError::Chart {
        chart,
        message: e.to_string(),
    }
}

fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// A chart under its caption: an SVG `layout` wide, the caption wrapped above a plot of
/// the layout's height with `below` units under it (axis labels, legend). `draw` gets the
/// area under the caption and the marks to add; the caption's are added here.
fn drawn(
    layout: Layout,
    chart: &'static str,
    caption: &str,
    below: f64,
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>, &mut Marks) -> Result<(), RenderError>,
) -> Result<String, RenderError> {
    let size = layout.caption();
    let w = layout.width();
    let head = Label::fitted(
        caption,
        (w / 2.0, 8.0),
        Anchor::TopMiddle,
        size,
        w - 2.0 * MARGIN,
        3,
    );
    let head_h = (8.0 + height_of(head.lines.len(), size)).ceil();
    let h = head_h + 2.0 * MARGIN + layout.plot_height() + below.ceil();
    let mut marks = Marks::default();
    marks.labels.push(head);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w as u32, h as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err(chart))?;
        let (_, body) = root.split_vertically(head_h as u32);
        draw(&body, &mut marks)?;
        root.present().map_err(chart_err(chart))?;
    }
    Ok(marks.onto(svg))
}

/// Labels under the x axis at `points` (its pixel x, the text), each centred on a tick
/// and broken to `room` wide, kept inside the SVG; `axis_y` is the axis's pixel y.
fn x_labels(
    marks: &mut Marks,
    layout: Layout,
    axis_y: f64,
    points: &[(f64, String)],
    (room, max_lines): (f64, usize),
) {
    let size = layout.text();
    for (x, text) in points {
        marks.strokes.push(Stroke {
            from: (*x, axis_y),
            to: (*x, axis_y + TICK),
            colour: "#000000".to_owned(),
            width: 1.0,
        });
        let mut l = Label::fitted(
            text,
            (*x, axis_y + TICK + 3.0),
            Anchor::TopMiddle,
            size,
            room,
            max_lines,
        );
        let half = l
            .lines
            .iter()
            .map(|s| s.trim_end().chars().count())
            .max()
            .unwrap_or(0) as f64
            * size
            * 0.3;
        l.x = l.x.clamp(half + 2.0, layout.width() - half - 2.0);
        marks.labels.push(l);
    }
}

/// The room under the plot for one line of x labels, their ticks and gaps.
fn x_label_room(layout: Layout, lines: usize) -> f64 {
    TICK + 3.0 + height_of(lines, layout.text()) + 4.0
}

/// A line of (loops, watts, ci95) points.
struct Series {
    label: String,
    points: Vec<(f64, f64, Option<f64>)>,
}

fn level_series(r: &crate::report::model::Report) -> Vec<Series> {
    let mut out = Vec::new();
    for c in &r.configs {
        if c.levels.is_empty() {
            let mut points: Vec<(f64, f64, Option<f64>)> = c
                .modes
                .iter()
                .filter_map(|m| level_loops(&m.name).map(|n| (f64::from(n), m.watts, m.ci95_watts)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            if !points.is_empty() {
                out.push(Series {
                    label: c.name.clone(),
                    points,
                });
            }
            continue;
        }
        let kinds: std::collections::BTreeSet<&str> =
            c.levels.iter().map(|l| l.kind.as_str()).collect();
        for kind in &kinds {
            let mut points: Vec<(f64, f64, Option<f64>)> = c
                .levels
                .iter()
                .filter(|l| l.kind == *kind)
                .map(|l| (f64::from(l.loops), l.mean_w, Some(l.ci95_w)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let label = if kinds.len() > 1 {
                format!("{} ({kind})", c.name)
            } else {
                c.name.clone()
            };
            out.push(Series { label, points });
        }
    }
    out
}

/// Every `step`-th of `0..n`, so that at most `max` are chosen (the first always).
fn every_nth(n: usize, max: usize) -> impl Iterator<Item = usize> {
    let step = n.div_ceil(max.max(1)).max(1);
    (0..n).step_by(step)
}

/// Watts against busy loops, one line per configuration (and loop kind), with error bars;
/// the legend under the plot names each line in full.
pub fn watts_per_level(
    r: &crate::report::model::Report,
    layout: Layout,
) -> Result<Option<String>, RenderError> {
    let series = level_series(r);
    if series.is_empty() {
        return Ok(None);
    }
    let err = chart_err("watts per level");
    let pts = || series.iter().flat_map(|s| s.points.iter());
    let x_max = pts().map(|p| p.0).fold(1.0, f64::max);
    let y_max = pts().map(|p| p.1 + p.2.unwrap_or(0.0)).fold(1.0, f64::max) * 1.15;
    if !(x_max.is_finite() && y_max.is_finite()) {
        // No axis holds it (the figures are checked as they are read; this is the chart's own
        // guard, as an endless axis would never finish drawing).
        return Ok(None);
    }
    let size = layout.text();
    let colours: Vec<String> = (0..series.len())
        .map(|i| {
            let (r, g, b) = Palette99::pick(i).rgb();
            hex(RGBColor(r, g, b))
        })
        .collect();
    let entries: Vec<(String, Option<String>, bool)> = series
        .iter()
        .zip(&colours)
        .map(|(s, c)| (s.label.clone(), Some(c.clone()), false))
        .collect();
    let legend_w = layout.width() - 2.0 * MARGIN;
    let legend_h = Marks::default().legend(&entries, (0.0, 0.0), legend_w, size);
    let axis_room = x_label_room(layout, 1) + height_of(1, size);
    drawn(
        layout,
        "watts per level",
        "Watts per load level (95 % intervals)",
        axis_room + legend_h + 6.0,
        |area, marks| {
            let mut chart = ChartBuilder::on(area)
                .margin(MARGIN as u32)
                .x_label_area_size((axis_room + legend_h + 6.0) as u32)
                .y_label_area_size(layout.y_area() as u32)
                .build_cartesian_2d(-0.3..x_max + 0.3, 0.0..y_max)
                .map_err(&err)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(0)
                .y_desc("W")
                .label_style(Layout::font(size))
                .axis_desc_style(Layout::font(size))
                .draw()
                .map_err(&err)?;
            let cap = 0.06 * (x_max + 0.6) / 4.0;
            for (i, s) in series.iter().enumerate() {
                let colour = Palette99::pick(i).to_rgba();
                chart
                    .draw_series(LineSeries::new(
                        s.points.iter().map(|p| (p.0, p.1)),
                        colour.stroke_width(2),
                    ))
                    .map_err(&err)?;
                chart
                    .draw_series(
                        s.points
                            .iter()
                            .map(|p| Circle::new((p.0, p.1), 3, colour.filled())),
                    )
                    .map_err(&err)?;
                let bars = s.points.iter().filter_map(|&(x, y, ci)| {
                    let c = ci.filter(|c| c.is_finite() && *c > 0.0)?;
                    Some([
                        PathElement::new(vec![(x, y - c), (x, y + c)], ERROR_BAR.stroke_width(1)),
                        PathElement::new(
                            vec![(x - cap, y - c), (x + cap, y - c)],
                            ERROR_BAR.stroke_width(1),
                        ),
                        PathElement::new(
                            vec![(x - cap, y + c), (x + cap, y + c)],
                            ERROR_BAR.stroke_width(1),
                        ),
                    ])
                });
                chart.draw_series(bars.flatten()).map_err(&err)?;
            }
            // A tick and a label at each whole number of loops (every few, where many).
            let loops = x_max as usize + 1;
            let max = if layout == Layout::Wide { 17 } else { 9 };
            let points: Vec<(f64, String)> = every_nth(loops, max)
                .map(|n| {
                    let (x, _) = chart.backend_coord(&(n as f64, 0.0));
                    (f64::from(x), n.to_string())
                })
                .collect();
            let axis_y = f64::from(chart.backend_coord(&(0.0, 0.0)).1);
            x_labels(marks, layout, axis_y, &points, (40.0, 1));
            let (left, _) = chart.backend_coord(&(-0.3, 0.0));
            let (right, _) = chart.backend_coord(&(x_max + 0.3, 0.0));
            let desc_y = axis_y + x_label_room(layout, 1);
            marks.axis_title_and_legend(
                "busy loops",
                (f64::from(left), f64::from(right)),
                desc_y,
                &entries,
                legend_w,
                size,
            );
            Ok(())
        },
    )
    .map(Some)
}

/// One bar per measured day (one day of history draws one bar; a year, 365): `kwh` picks
/// energy, else cost. The dates under the axis are every few days where there are many.
pub fn per_day(
    r: &crate::report::model::Report,
    kwh: bool,
    layout: Layout,
) -> Result<Option<String>, RenderError> {
    let Some(m) = r.measured.as_ref().filter(|m| !m.daily.is_empty()) else {
        return Ok(None);
    };
    let chart_name = if kwh {
        "energy per day"
    } else {
        "cost per day"
    };
    let err = chart_err(chart_name);
    let values: Vec<f64> = m
        .daily
        .iter()
        .map(|d| if kwh { d.kwh } else { d.cost })
        .collect();
    let y_max = values.iter().copied().fold(0.0, f64::max).max(1e-3) * 1.15;
    if !y_max.is_finite() {
        return Ok(None);
    }
    let n = values.len();
    let (caption, unit) = if kwh {
        ("Energy per day (kWh)".to_string(), "kWh".to_string())
    } else {
        (format!("Cost per day ({})", r.currency), r.currency.clone())
    };
    let size = layout.text();
    // A date is 10 characters: as many as fit side by side, with room between.
    let date_w = 10.0 * size * 0.6 + 14.0;
    let max_labels = (layout.plot_width() / date_w).floor() as usize;
    drawn(
        layout,
        chart_name,
        &caption,
        x_label_room(layout, 1),
        |area, marks| {
            let mut chart = ChartBuilder::on(area)
                .margin(MARGIN as u32)
                .x_label_area_size(x_label_room(layout, 1) as u32)
                .y_label_area_size(layout.y_area() as u32)
                .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..y_max)
                .map_err(&err)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(0)
                .y_desc(unit)
                .label_style(Layout::font(size))
                .axis_desc_style(Layout::font(size))
                .draw()
                .map_err(&err)?;
            let colour = if kwh {
                Palette99::pick(0)
            } else {
                Palette99::pick(1)
            };
            // Bars a fifth of a day apart at most, so that a year of them stays one bar each.
            let half = if n > 60 { 0.5 } else { 0.4 };
            chart
                .draw_series(values.iter().enumerate().map(|(i, v)| {
                    let x = i as f64;
                    Rectangle::new([(x - half, 0.0), (x + half, *v)], colour.filled())
                }))
                .map_err(&err)?;
            let points: Vec<(f64, String)> = every_nth(n, max_labels)
                .map(|i| {
                    let (x, _) = chart.backend_coord(&(i as f64, 0.0));
                    (f64::from(x), m.daily[i].date.clone())
                })
                .collect();
            let axis_y = f64::from(chart.backend_coord(&(0.0, 0.0)).1);
            x_labels(marks, layout, axis_y, &points, (date_w, 1));
            Ok(())
        },
    )
    .map(Some)
}

/// Every chart of `r` in `layout`, in the page's order.
pub fn all(r: &crate::report::model::Report, layout: Layout) -> Result<Vec<String>, RenderError> {
    let mut figures: Vec<String> = Vec::new();
    figures.extend(watts_per_level(r, layout)?);
    figures.extend(annual_cost(r, layout)?);
    figures.extend(candidates(r, layout)?);
    figures.extend(per_day(r, true, layout)?);
    figures.extend(per_day(r, false, layout)?);
    figures.extend(residency(r, layout)?);
    Ok(figures)
}

/// How many characters of the layout's text fit in `width`.
fn chars(layout: Layout, width: f64) -> usize {
    chars_in(width, layout.text())
}
