//! The charts of one bar per thing: what each configuration and each candidate machine
//! costs a year (one colour for all, the cheapest in green, so a costlier one is never
//! drawn as the good one), and C-state residency per sweep level, stacked. A slot per bar,
//! a tick and a label (broken at words, never cut) under each.

use plotters::prelude::*;

use super::labels::{Anchor, Label, Marks, height_of, wrap};
use super::{Layout, MARGIN, RenderError, chars, chart_err, drawn, hex, x_label_room, x_labels};
use crate::ledger::price::format_money;
use crate::report::model::{DUTY_CYCLE, LevelReport, Report};

/// Every bar but the cheapest.
pub(super) const NEUTRAL: RGBColor = RGBColor(0x8A, 0x97, 0xA6);
/// The cheapest bar (of those that carry the load).
pub(super) const CHEAPEST: RGBColor = RGBColor(0x2E, 0x7D, 0x32);

/// A bar's share of its slot.
const BAR: f64 = 0.7;

/// At most this many lines of a bar's name (a phone's slots are narrower).
fn name_lines(layout: Layout) -> usize {
    match layout {
        Layout::Wide => 3,
        Layout::Narrow => 4,
    }
}

/// What each configuration costs a year as bars: at this machine's measured duty cycle
/// where the report has one for it (the utilisation history priced through its fit or
/// modes), else at the comparisons' headline mode (named under the bar).
pub fn annual_cost(r: &Report, layout: Layout) -> Result<Option<String>, RenderError> {
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
                b.0.clone()
            } else {
                format!("{} ({fallback})", b.0)
            }
        })
        .collect();
    let costs: Vec<f64> = bars.iter().map(|b| b.1).collect();
    let cheapest = cheapest(&costs, &vec![true; costs.len()]);
    money_bars(
        "annual cost",
        &format!("{caption}; the cheapest in green"),
        (&names, &costs),
        cheapest,
        &r.currency,
        layout,
    )
    .map(Some)
}

/// The index of the cheapest of `costs` among those `eligible`.
fn cheapest(costs: &[f64], eligible: &[bool]) -> Option<usize> {
    costs
        .iter()
        .zip(eligible)
        .enumerate()
        .filter(|(_, (c, ok))| **ok && c.is_finite())
        .min_by(|a, b| a.1.0.total_cmp(b.1.0))
        .map(|(i, _)| i)
}

/// What keeping this machine and each candidate cost a year on its load: one bar each,
/// the candidate's name marked `(interpolated)` for a two-point curve and `(cannot carry)`
/// where it cannot carry the load (never the cheapest).
pub fn candidates(r: &Report, layout: Layout) -> Result<Option<String>, RenderError> {
    let Some(c) = r.candidates.as_ref().filter(|c| !c.candidates.is_empty()) else {
        return Ok(None);
    };
    // (name, cost, carries the load)
    let mut bars: Vec<(String, f64, bool)> = Vec::new();
    if let Some(k) = &c.keep {
        bars.push((format!("keep {}", k.name), k.annual_cost, true));
    }
    for x in &c.candidates {
        let mark = if !x.carries {
            " (cannot carry)"
        } else if x.interpolated {
            " (interpolated)"
        } else {
            ""
        };
        bars.push((format!("{}{mark}", x.name), x.annual_cost, x.carries));
    }
    let caption = format!(
        "Keep this box or buy another: annual cost on this load ({}); the cheapest that \
         carries it in green",
        r.currency
    );
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let costs: Vec<f64> = bars.iter().map(|b| b.1).collect();
    let carries: Vec<bool> = bars.iter().map(|b| b.2).collect();
    money_bars(
        "candidates",
        &caption,
        (&names, &costs),
        cheapest(&costs, &carries),
        &r.currency,
        layout,
    )
    .map(Some)
}

/// A bar of money a year per name, each labelled with its amount above and its name below,
/// the `good` one in [`CHEAPEST`], the rest in [`NEUTRAL`], under `caption` (`chart` names
/// it in errors).
fn money_bars(
    chart: &'static str,
    caption: &str,
    (names, costs): (&[String], &[f64]),
    good: Option<usize>,
    currency: &str,
    layout: Layout,
) -> Result<String, RenderError> {
    let err = chart_err(chart);
    let n = costs.len();
    let size = layout.text();
    let slot = layout.plot_width() / n.max(1) as f64;
    let bar_names = BarNames::of(names, layout, slot);
    let amounts: Vec<String> = costs.iter().map(|c| format_money(*c, currency)).collect();
    let amount_lines = amounts
        .iter()
        .map(|s| wrap(s, chars(layout, slot - 2.0), 2).lines.len())
        .max()
        .unwrap_or(1);
    // The tallest bar stops where its amount still fits above it. A cost no axis holds
    // is drawn as none (an endless axis would never finish drawing).
    let top = costs
        .iter()
        .copied()
        .filter(|c| c.is_finite())
        .fold(1e-9, f64::max);
    let above = height_of(amount_lines, size) + 6.0;
    let y_max = top / (1.0 - above / layout.plot_height()).max(0.3);
    let below = bar_names.room(layout);
    drawn(layout, chart, caption, below, |area, marks| {
        let mut chart = ChartBuilder::on(area)
            .margin(MARGIN as u32)
            .x_label_area_size(below as u32)
            .y_label_area_size(layout.y_area() as u32)
            .build_cartesian_2d(0.0..n as f64, 0.0..y_max)
            .map_err(&err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(6)
            .y_desc(format!("{currency} per year"))
            .label_style(Layout::font(size))
            .axis_desc_style(Layout::font(size))
            .draw()
            .map_err(&err)?;
        let pad = (1.0 - BAR) / 2.0;
        chart
            .draw_series(costs.iter().enumerate().map(|(i, cost)| {
                let x = i as f64;
                let colour = if good == Some(i) { CHEAPEST } else { NEUTRAL };
                Rectangle::new(
                    [(x + pad, 0.0), (x + 1.0 - pad, cost.min(y_max))],
                    colour.filled(),
                )
            }))
            .map_err(&err)?;
        let mut points = Vec::with_capacity(n);
        for (i, (cost, amount)) in costs.iter().zip(&amounts).enumerate() {
            let centre = i as f64 + 0.5;
            let (x, y) = chart.backend_coord(&(centre, cost.min(y_max).max(0.0)));
            marks.labels.push(Label::fitted(
                amount,
                (f64::from(x), f64::from(y) - 3.0),
                Anchor::BottomMiddle,
                size,
                slot - 2.0,
                2,
            ));
            points.push(f64::from(x));
        }
        let axis_y = f64::from(chart.backend_coord(&(0.0, 0.0)).1);
        bar_names.draw(marks, layout, axis_y, &points, slot);
        Ok(())
    })
}

/// Each state's share of each level's time, percent: the busy share (C0) first, at the
/// bottom of the stack. cpuidle reports the idle states only: the rest of the time the CPUs
/// were busy (C0), which is most of it at the busy levels.
fn shares(levels: &[&LevelReport]) -> Vec<(String, Vec<f64>)> {
    let idle_states: std::collections::BTreeSet<&String> =
        levels.iter().flat_map(|l| l.residency.keys()).collect();
    let busy = (!idle_states.iter().any(|s| s.as_str() == "C0")).then(|| {
        let share =
            |l: &&LevelReport| (1.0 - l.residency.values().sum::<f64>()).clamp(0.0, 1.0) * 100.0;
        (
            super::BUSY_STATE.to_owned(),
            levels.iter().map(share).collect(),
        )
    });
    busy.into_iter()
        .chain(idle_states.into_iter().map(|s| {
            let of = |l: &&LevelReport| l.residency.get(s).copied().unwrap_or(0.0) * 100.0;
            (s.clone(), levels.iter().map(of).collect())
        }))
        .collect()
}

/// C-state residency per sweep level, one stacked-bar chart per configuration with
/// residency data, the states in a legend under it.
pub fn residency(r: &Report, layout: Layout) -> Result<Vec<String>, RenderError> {
    let mut out = Vec::new();
    for c in &r.configs {
        let levels: Vec<&LevelReport> = c
            .levels
            .iter()
            .filter(|l| !l.residency.is_empty())
            .collect();
        if !levels.is_empty() {
            out.push(residency_chart(&c.name, &levels, layout)?);
        }
    }
    Ok(out)
}

/// One configuration's C-state residency chart.
fn residency_chart(
    name: &str,
    levels: &[&LevelReport],
    layout: Layout,
) -> Result<String, RenderError> {
    let err = chart_err("C-state residency");
    let size = layout.text();
    let states = shares(levels);
    let names: Vec<String> = levels
        .iter()
        .map(|l| format!("{} {}", l.kind, l.loops))
        .collect();
    let n = levels.len();
    let slot = layout.plot_width() / n as f64;
    let bar_names = BarNames::of(&names, layout, slot);
    let colours: Vec<RGBColor> = (0..states.len())
        .map(|i| {
            let (r, g, b) = Palette99::pick(i).rgb();
            RGBColor(r, g, b)
        })
        .collect();
    let entries: Vec<(String, Option<String>, bool)> = states
        .iter()
        .zip(&colours)
        .map(|((s, _), c)| (s.clone(), Some(hex(*c)), true))
        .collect();
    let legend_w = layout.width() - 2.0 * MARGIN;
    let legend_h = Marks::default().legend(&entries, (0.0, 0.0), legend_w, size);
    let axis_room = bar_names.room(layout) + height_of(1, size);
    let below = axis_room + legend_h + 6.0;
    let caption = format!("C-state residency per level: {name}");
    drawn(
        layout,
        "C-state residency",
        &caption,
        below,
        |area, marks| {
            let mut chart = ChartBuilder::on(area)
                .margin(MARGIN as u32)
                .x_label_area_size(below as u32)
                .y_label_area_size(layout.y_area() as u32)
                .build_cartesian_2d(0.0..n as f64, 0.0..100.0)
                .map_err(&err)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(0)
                .y_desc("% of time")
                .label_style(Layout::font(size))
                .axis_desc_style(Layout::font(size))
                .draw()
                .map_err(&err)?;
            let pad = (1.0 - BAR) / 2.0;
            let mut base = vec![0.0; n];
            for ((_, share), colour) in states.iter().zip(&colours) {
                let mut rects = Vec::with_capacity(n);
                for (i, s) in share.iter().enumerate() {
                    let lo = base[i];
                    base[i] += s.max(0.0);
                    let x = i as f64;
                    rects.push(Rectangle::new(
                        [(x + pad, lo), (x + 1.0 - pad, base[i].min(100.0))],
                        colour.filled(),
                    ));
                }
                chart.draw_series(rects).map_err(&err)?;
            }
            let xs: Vec<f64> = (0..n)
                .map(|i| f64::from(chart.backend_coord(&(i as f64 + 0.5, 0.0)).0))
                .collect();
            let axis_y = f64::from(chart.backend_coord(&(0.0, 0.0)).1);
            bar_names.draw(marks, layout, axis_y, &xs, slot);
            let (left, _) = chart.backend_coord(&(0.0, 0.0));
            let (right, _) = chart.backend_coord(&(n as f64, 0.0));
            let desc_y = axis_y + bar_names.room(layout);
            marks.axis_title_and_legend(
                "loop kind and busy loops",
                (f64::from(left), f64::from(right)),
                desc_y,
                &entries,
                legend_w,
                size,
            );
            Ok(())
        },
    )
}

/// How bars are named: each under its bar where every name fits its slot with its words
/// whole, else by number under each bar and in full in a key under the axis.
struct BarNames {
    under: Vec<String>,
    /// "1: keep this machine (measured)", ...; empty where the names are under the bars.
    key: Vec<(String, Option<String>, bool)>,
    /// Lines of the names under the bars.
    lines: usize,
}

impl BarNames {
    fn of(names: &[String], layout: Layout, slot: f64) -> BarNames {
        let wrapped: Vec<_> = names
            .iter()
            .map(|s| wrap(s, chars(layout, slot - 6.0), name_lines(layout)))
            .collect();
        if wrapped.iter().all(super::labels::Wrapped::whole) {
            return BarNames {
                under: names.to_vec(),
                key: Vec::new(),
                lines: wrapped.iter().map(|w| w.lines.len()).max().unwrap_or(1),
            };
        }
        BarNames {
            under: (1..=names.len()).map(|i| i.to_string()).collect(),
            key: names
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("{}: {s}", i + 1), None, false))
                .collect(),
            lines: 1,
        }
    }

    /// The room under the plot for the names and their key.
    fn room(&self, layout: Layout) -> f64 {
        let key = if self.key.is_empty() {
            0.0
        } else {
            let width = layout.width() - 2.0 * MARGIN;
            Marks::default().legend(&self.key, (0.0, 0.0), width, layout.text()) + 4.0
        };
        x_label_room(layout, self.lines) + key
    }

    /// The names under the bars centred at `xs`, and the key under them.
    fn draw(&self, marks: &mut Marks, layout: Layout, axis_y: f64, xs: &[f64], slot: f64) {
        let points: Vec<(f64, String)> = xs.iter().copied().zip(self.under.clone()).collect();
        x_labels(
            marks,
            layout,
            axis_y,
            &points,
            (slot - 6.0, name_lines(layout)),
        );
        if !self.key.is_empty() {
            marks.legend(
                &self.key,
                (MARGIN, axis_y + x_label_room(layout, self.lines)),
                layout.width() - 2.0 * MARGIN,
                layout.text(),
            );
        }
    }
}
