//! SVG charts for the HTML report, drawn with plotters' SVG backend into strings: watts per
//! level per configuration with 95 % error bars, annual cost per configuration (at the
//! measured duty cycle where there is one), energy and cost per day as bars, and C-state
//! residency per sweep level with the busy share. Each function returns `None` when the
//! report has nothing to draw.
//!
//! Units: W, the tariff's currency per year, kWh and currency per day, percent of time.

use std::collections::BTreeSet;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::RenderError;
use crate::analysis::modes::level_loops;
use crate::ledger::price::format_money;
use crate::report::model::{DUTY_CYCLE, Report};

/// Colour of the 95 % error bars (distinct from every series colour, so a reader and a
/// test can tell the bars from the lines).
pub const ERROR_BAR: RGBColor = RGBColor(0x44, 0x44, 0x44);

const SIZE: (u32, u32) = (760, 380);

/// The C-state chart's name for the time no idle state covers: the CPUs were running.
pub const BUSY_STATE: &str = "busy (C0)";
const FONT: &str = "sans-serif";

fn chart_err<E: std::fmt::Display>(chart: &'static str) -> impl Fn(E) -> RenderError {
    move |e| RenderError::Chart {
        chart,
        message: e.to_string(),
    }
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

/// A line of (loops, watts, ci95) points.
struct Series {
    label: String,
    points: Vec<(f64, f64, Option<f64>)>,
}

fn level_series(r: &Report) -> Vec<Series> {
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
        let kinds: BTreeSet<&str> = c.levels.iter().map(|l| l.kind.as_str()).collect();
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

/// Watts against busy loops, one line per configuration (and loop kind), with error bars.
pub fn watts_per_level(r: &Report) -> Result<Option<String>, RenderError> {
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
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(&err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Watts per load level (95 % intervals)", (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(-0.3..x_max + 0.3, 0.0..y_max)
            .map_err(&err)?;
        chart
            .configure_mesh()
            .x_desc("busy loops")
            .y_desc("W")
            .x_labels((x_max as usize + 1).min(17))
            .x_label_formatter(&|x| {
                if (x - x.round()).abs() < 1e-9 {
                    format!("{x:.0}")
                } else {
                    String::new()
                }
            })
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
                .map_err(&err)?
                .label(short(&s.label, 40))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                });
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
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.85))
            .draw()
            .map_err(&err)?;
        root.present().map_err(&err)?;
    }
    Ok(Some(svg))
}

/// What each configuration costs a year as bars: at this machine's measured duty cycle
/// where the report has one for it (the utilisation history priced through its fit or
/// modes), else at the comparisons' headline mode (named under the bar).
pub fn annual_cost(r: &Report) -> Result<Option<String>, RenderError> {
    let fallback = if r.headline_mode == DUTY_CYCLE {
        "idle"
    } else {
        r.headline_mode.as_str()
    };
    // (name, cost, at the duty cycle)
    let bars: Vec<(String, f64, bool)> = r
        .configs
        .iter()
        .filter_map(|c| match c.duty_cycle.as_ref() {
            Some(m) => Some((c.name.clone(), m.annual_cost, true)),
            None => c
                .modes
                .iter()
                .find(|m| m.name == fallback)
                .map(|m| (c.name.clone(), m.annual_cost, false)),
        })
        .collect();
    if bars.is_empty() {
        return Ok(None);
    }
    let at_duty = bars.iter().filter(|b| b.2).count();
    let caption = if at_duty == bars.len() {
        format!(
            "Annual cost per configuration at this machine's measured duty cycle ({})",
            r.currency
        )
    } else if at_duty == 0 {
        format!(
            "Annual cost per configuration at {fallback} ({})",
            r.currency
        )
    } else {
        format!(
            "Annual cost per configuration at the measured duty cycle, else at {fallback} ({})",
            r.currency
        )
    };
    let names: Vec<String> = bars
        .iter()
        .map(|b| {
            if b.2 || at_duty == 0 {
                short(&b.0, 28)
            } else {
                format!("{} ({fallback})", short(&b.0, 22))
            }
        })
        .collect();
    let costs: Vec<f64> = bars.iter().map(|b| b.1).collect();
    money_bars("annual cost", caption, &names, &costs, &r.currency).map(Some)
}

/// A bar of money a year per name, each labelled with its amount, under `caption`
/// (`chart` names it in errors).
fn money_bars(
    chart: &'static str,
    caption: String,
    names: &[String],
    costs: &[f64],
    currency: &str,
) -> Result<String, RenderError> {
    let err = chart_err(chart);
    let n = costs.len() as u32;
    // A cost no axis holds is drawn as none (an endless axis would never finish drawing).
    let y_max = costs
        .iter()
        .copied()
        .filter(|c| c.is_finite())
        .fold(1.0, f64::max)
        * 1.2;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(&err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((0..n).into_segmented(), 0.0..y_max)
            .map_err(&err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc(format!("{currency} per year"))
            .x_labels(costs.len())
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                    names.get(*i as usize).cloned().unwrap_or_default()
                }
                SegmentValue::Last => String::new(),
            })
            .draw()
            .map_err(&err)?;
        chart
            .draw_series(costs.iter().enumerate().map(|(i, cost)| {
                let i = i as u32;
                let mut rect = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), *cost),
                    ],
                    Palette99::pick(i as usize).filled(),
                );
                rect.set_margin(0, 0, 20, 20);
                rect
            }))
            .map_err(&err)?;
        // The label's bottom edge sits just above its bar, centred on it.
        let above = (FONT, 14)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        chart
            .draw_series(costs.iter().enumerate().map(|(i, cost)| {
                Text::new(
                    format_money(*cost, currency),
                    (SegmentValue::CenterOf(i as u32), *cost + y_max * 0.01),
                    above.clone(),
                )
            }))
            .map_err(&err)?;
        root.present().map_err(&err)?;
    }
    Ok(svg)
}

/// What keeping this machine and each candidate cost a year on its load: one bar each,
/// the candidate's name marked `(interpolated)` for a two-point curve and `(cannot carry)`
/// where it cannot carry the load.
pub fn candidates(r: &Report) -> Result<Option<String>, RenderError> {
    let Some(c) = r.candidates.as_ref().filter(|c| !c.candidates.is_empty()) else {
        return Ok(None);
    };
    let mut bars: Vec<(String, f64)> = Vec::new();
    if let Some(k) = &c.keep {
        bars.push((format!("keep {}", short(&k.name, 20)), k.annual_cost));
    }
    for x in &c.candidates {
        let mark = if !x.carries {
            " (cannot carry)"
        } else if x.interpolated {
            " (interpolated)"
        } else {
            ""
        };
        bars.push((format!("{}{mark}", short(&x.name, 20)), x.annual_cost));
    }
    let caption = format!(
        "Keep this box or buy another: annual cost on this load ({})",
        r.currency
    );
    let (names, costs): (Vec<String>, Vec<f64>) = bars.into_iter().unzip();
    money_bars("candidates", caption, &names, &costs, &r.currency).map(Some)
}

/// One bar per measured day (one day of history draws one bar; a year, 365): `kwh` picks
/// energy, else cost.
pub fn per_day(r: &Report, kwh: bool) -> Result<Option<String>, RenderError> {
    let Some(m) = r.measured.as_ref().filter(|m| !m.daily.is_empty()) else {
        return Ok(None);
    };
    let err = chart_err(if kwh {
        "energy per day"
    } else {
        "cost per day"
    });
    let values: Vec<f64> = m
        .daily
        .iter()
        .map(|d| if kwh { d.kwh } else { d.cost })
        .collect();
    let dates: Vec<String> = m.daily.iter().map(|d| d.date.clone()).collect();
    let y_max = values.iter().copied().fold(0.0, f64::max).max(1e-3) * 1.15;
    if !y_max.is_finite() {
        return Ok(None);
    }
    let n = values.len() as f64;
    let (caption, unit) = if kwh {
        ("Energy per day (kWh)".to_string(), "kWh".to_string())
    } else {
        (format!("Cost per day ({})", r.currency), r.currency.clone())
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, 300)).into_drawing_area();
        root.fill(&WHITE).map_err(&err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, (FONT, 18))
            .margin(12)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(-0.5..n - 0.5, 0.0..y_max)
            .map_err(&err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc(unit)
            .x_labels(6)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-9 && i >= 0.0 {
                    dates.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .draw()
            .map_err(&err)?;
        let colour = if kwh {
            Palette99::pick(0)
        } else {
            Palette99::pick(1)
        };
        // Bars a fifth of a day apart at most, so that a year of them stays one bar each.
        let half = if values.len() > 60 { 0.5 } else { 0.4 };
        chart
            .draw_series(values.iter().enumerate().map(|(i, v)| {
                let x = i as f64;
                Rectangle::new([(x - half, 0.0), (x + half, *v)], colour.filled())
            }))
            .map_err(&err)?;
        root.present().map_err(&err)?;
    }
    Ok(Some(svg))
}

/// C-state residency per sweep level, one stacked-bar chart per configuration with
/// residency data.
pub fn residency(r: &Report) -> Result<Vec<String>, RenderError> {
    let mut out = Vec::new();
    let err = chart_err("C-state residency");
    for c in &r.configs {
        let levels: Vec<_> = c
            .levels
            .iter()
            .filter(|l| !l.residency.is_empty())
            .collect();
        if levels.is_empty() {
            continue;
        }
        let idle_states: Vec<&String> = levels
            .iter()
            .flat_map(|l| l.residency.keys())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        // cpuidle reports the idle states only: the rest of the time the CPUs were busy
        // (C0), which is most of it at the busy levels. Shown first, at the bottom.
        let busy = BUSY_STATE.to_string();
        let has_c0 = idle_states.iter().any(|s| s.as_str() == "C0");
        let states: Vec<&String> = (!has_c0)
            .then_some(&busy)
            .into_iter()
            .chain(idle_states)
            .collect();
        let names: Vec<String> = levels
            .iter()
            .map(|l| format!("{} {}", l.kind, l.loops))
            .collect();
        let n = levels.len() as u32;
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            root.fill(&WHITE).map_err(&err)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(
                    format!("C-state residency per level: {}", short(&c.name, 40)),
                    (FONT, 18),
                )
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(55)
                .build_cartesian_2d((0..n).into_segmented(), 0.0..100.0)
                .map_err(&err)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .y_desc("% of time")
                .x_desc("loop kind and busy loops")
                .x_labels(levels.len())
                .x_label_formatter(&|v| match v {
                    SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                        names.get(*i as usize).cloned().unwrap_or_default()
                    }
                    SegmentValue::Last => String::new(),
                })
                .draw()
                .map_err(&err)?;
            let mut base = vec![0.0; levels.len()];
            for (si, state) in states.iter().enumerate() {
                let colour = Palette99::pick(si).to_rgba();
                let rects: Vec<Rectangle<(SegmentValue<u32>, f64)>> = levels
                    .iter()
                    .enumerate()
                    .map(|(i, l)| {
                        let share = if *state == &busy {
                            (1.0 - l.residency.values().sum::<f64>()).clamp(0.0, 1.0) * 100.0
                        } else {
                            l.residency.get(*state).copied().unwrap_or(0.0) * 100.0
                        };
                        let lo = base[i];
                        base[i] += share.max(0.0);
                        let mut rect = Rectangle::new(
                            [
                                (SegmentValue::Exact(i as u32), lo),
                                (SegmentValue::Exact(i as u32 + 1), base[i].min(100.0)),
                            ],
                            colour.filled(),
                        );
                        rect.set_margin(0, 0, 12, 12);
                        rect
                    })
                    .collect();
                chart
                    .draw_series(rects)
                    .map_err(&err)?
                    .label(state.as_str())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                    });
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .border_style(BLACK)
                .background_style(WHITE.mix(0.85))
                .draw()
                .map_err(&err)?;
            root.present().map_err(&err)?;
        }
        out.push(svg);
    }
    Ok(out)
}
