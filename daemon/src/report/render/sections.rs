//! The prose every text format shows after the table ([`sections`]): tariff, fits,
//! comparisons, measured vs modelled, idle-power regression, GPUs, services, notes.

use std::fmt::Write as _;

use super::{energy, kwh, money_per_year, num, watts};
use crate::ledger::price::format_money;
use crate::report::measured::MeasuredReport;
use crate::report::model::{ComparisonReport, RegressionStatus, Report};

/// A titled list of lines every text format shows after the table.
pub struct Section {
    pub title: String,
    pub lines: Vec<String>,
}

/// The report's prose: tariff, fits, comparisons, measured vs modelled, idle-power
/// regression, notes.
pub fn sections(r: &Report) -> Vec<Section> {
    let cur = r.currency.as_str();
    let mut out: Vec<Section> = configurations_section(r).into_iter().collect();
    out.push(tariff_section(r));
    if let Some(t) = &r.tariffs {
        out.push(Section {
            title: "Real tariffs (price per slot, comparison, CO2 per slot)".into(),
            lines: crate::report::real_tariffs::lines(t, cur),
        });
    }
    if let Some(s) = &r.schedule {
        out.push(Section {
            title: "On a schedule: each configuration's modes, hour by hour".into(),
            lines: crate::report::model::schedule_lines(s, cur),
        });
    }
    out.extend(fits_section(r));
    out.extend(warnings_section(r));
    out.extend(comparisons_section(r));
    if let Some(m) = &r.measured {
        out.push(Section {
            title: "This machine: measured and modelled".into(),
            lines: measured_lines(m, cur),
        });
    }
    if let Some(s) = &r.sleep {
        out.push(Section {
            title: "Sleeping when idle: what a suspend schedule would save".into(),
            lines: crate::report::sleep::lines(s, cur),
        });
    }
    if let Some(p) = &r.estimated {
        out.push(Section {
            title: "This machine: estimated from its calibration (no meter at the wall)".into(),
            lines: crate::calibration::priced::lines(p),
        });
    }
    for s in &r.stood_in {
        out.push(Section {
            title: "This machine: estimated from its calibration while the meter was away".into(),
            lines: crate::calibration::stand_in::lines(s),
        });
    }
    if let Some(c) = &r.candidates {
        out.push(Section {
            title: "Keep this box or buy another: candidates on this machine's load".into(),
            lines: super::candidate_lines(c, cur),
        });
    }
    out.push(regression_section(r));
    if let Some(idle) = &r.idle {
        out.push(Section {
            title: "Idle: where the watts go".into(),
            lines: crate::report::idle::lines(idle, cur),
        });
    }
    if !r.gpus.is_empty() {
        out.push(Section {
            title: "GPU idle: what a resident process costs".into(),
            lines: gpu_lines(r),
        });
    }
    if let Some(e) = &r.services {
        out.push(Section {
            title: crate::services::render::TITLE.into(),
            lines: crate::services::render::lines(e),
        });
    }
    // The measured figure's warnings are printed under it; the notes say them for the JSON.
    let under_the_figure: Vec<String> = (r.measured.iter())
        .flat_map(|m| {
            m.warnings
                .iter()
                .map(|w| crate::report::model::measured_note(w))
        })
        .collect();
    let notes: Vec<String> = (r.notes.iter())
        .filter(|n| !under_the_figure.contains(n))
        .cloned()
        .collect();
    if !notes.is_empty() {
        out.push(Section {
            title: "Notes".into(),
            lines: notes,
        });
    }
    out
}

/// "Tariff": the configured and mean prices, the standing charge, the carbon intensity.
fn tariff_section(r: &Report) -> Section {
    let cur = r.currency.as_str();
    let mut tariff = vec![format!(
        "configured price {} (the fallback where no slot or period applies); the year's mean \
         price {} ({}); a year is {} h (365 days x 24 h)",
        crate::ledger::annual::price_text(r.price_per_kwh, cur),
        crate::ledger::annual::price_text(r.mean_price_per_kwh, cur),
        r.mean_price_from,
        num(r.year_hours, 0)
    )];
    if r.standing_charge_per_day > 0.0 {
        tariff.push(format!(
            "standing charge {} per day ({} per year), paid whatever runs: not in any figure below",
            format_money(r.standing_charge_per_day, cur),
            format_money(r.standing_charge_per_year, cur)
        ));
    }
    if let Some(g) = r.co2_g_per_kwh {
        tariff.push(format!("grid carbon intensity {} g CO2 per kWh", num(g, 1)));
    }
    Section {
        title: "Tariff".into(),
        lines: tariff,
    }
}

/// "Fits": per configuration with a fit, its idle and per-loop watts and their costs.
fn fits_section(r: &Report) -> Option<Section> {
    let cur = r.currency.as_str();
    let fits: Vec<String> = r
        .configs
        .iter()
        .filter_map(|c| c.fit.as_ref().map(|f| (c, f)))
        .flat_map(|(c, f)| {
            let ci = |x: Option<f64>, dp: usize| {
                x.map_or_else(String::new, |v| format!(" ± {v:.dp$}"))
            };
            let mut v = vec![format!(
                "{}: idle {:.1}{} W, {:.2}{} W per {} loop, r2 {:.3}; idle costs {}, each busy loop {}",
                c.name,
                f.idle_watts,
                ci(f.idle_ci95, 1),
                f.watts_per_loop,
                ci(f.watts_per_loop_ci95, 2),
                f.kind,
                f.r2,
                money_per_year(f.idle_annual_cost, None, cur),
                money_per_year(f.per_loop_annual_cost, None, cur)
            )];
            v.extend(f.notes.iter().map(|n| format!("  {}: {n}", c.name)));
            v
        })
        .collect();
    (!fits.is_empty()).then(|| Section {
        title: "Fits (watts = idle + watts per loop x busy loops)".into(),
        lines: fits,
    })
}

/// "Warnings on the figures above": each mode's warnings, named by configuration and mode.
fn warnings_section(r: &Report) -> Option<Section> {
    let weakened: Vec<String> = r
        .configs
        .iter()
        .flat_map(|c| {
            c.modes.iter().flat_map(move |m| {
                m.warnings
                    .iter()
                    .map(move |w| format!("{} {}: {w}", c.name, m.name))
            })
        })
        .collect();
    (!weakened.is_empty()).then(|| Section {
        title: "Warnings on the figures above".into(),
        lines: weakened,
    })
}

/// "Comparisons": per pair of configurations, the saving and the upgrade's payback.
fn comparisons_section(r: &Report) -> Option<Section> {
    if r.comparisons.is_empty() {
        return None;
    }
    let cur = r.currency.as_str();
    Some(Section {
        title: format!(
            "Comparisons (from the {} configuration; headline at {})",
            match r.baseline {
                crate::report::model::Baseline::Costliest => "costliest",
                crate::report::model::Baseline::First => "first",
            },
            r.headline_mode
        ),
        lines: r
            .comparisons
            .iter()
            .flat_map(|c| {
                // A sweep's upgrade cost is given on the command line only; a [[config]]
                // may also carry its own.
                let manual = r
                    .configs
                    .iter()
                    .any(|k| k.name == c.to && k.kind == crate::report::ConfigKind::Manual);
                comparison_lines(c, cur, manual)
            })
            .collect(),
    })
}

/// Where each configuration's watts come from: typed in by hand, or measured at the wall
/// (how, and whether the sweep ran to its end). Shown before the figures' sections.
fn configurations_section(r: &Report) -> Option<Section> {
    use crate::report::{ConfigKind, ConfigStatus};
    if r.configs.is_empty() {
        return None;
    }
    let lines = r
        .configs
        .iter()
        .map(|c| {
            let how = c.description.as_deref().unwrap_or("a sweep");
            let partial = if c.status == ConfigStatus::Partial {
                " (partial: the sweep was stopped before its last level)"
            } else {
                ""
            };
            match c.kind {
                ConfigKind::Manual => format!(
                    "{}: typed in by hand ([[config]] in the configuration file): the watts as \
                     given, with no interval",
                    c.name
                ),
                ConfigKind::Sweep => format!("{}: measured at the wall, {how}{partial}", c.name),
                ConfigKind::IdleMeasure => {
                    format!("{}: measured at the wall at idle, {how}{partial}", c.name)
                }
            }
        })
        .collect();
    Some(Section {
        title: "Configurations (where each column's watts come from)".into(),
        lines,
    })
}

/// One comparison: the headline line, then the saving per mode where there is one.
fn comparison_lines(c: &ComparisonReport, cur: &str, manual_target: bool) -> Vec<String> {
    let saving = match c.annual_saving_ci95 {
        Some(ci) => format!("{} ± {}", format_money(c.annual_saving, cur), num(ci, 2)),
        None => format_money(c.annual_saving, cur),
    };
    let measured = c.delta_ci95_watts.map_or_else(String::new, |ci| {
        let delta = c.to_watts - c.from_watts;
        format!(
            " ({}{delta:+.1} +/- {ci:.1} W, measured in alternating phases)",
            if delta.abs() > ci {
                ""
            } else {
                "no effect that this meter can distinguish: "
            }
        )
    });
    let mut head = format!(
        "{} -> {} at {}: {} -> {}{measured} saves {} kWh, {saving}/yr",
        c.from,
        c.to,
        c.mode,
        watts(c.from_watts, None),
        watts(c.to_watts, None),
        num(c.annual_kwh_saved, 2)
    );
    if let Some(co2) = c.co2_kg_saved {
        let _ = write!(head, ", {} kg CO2/yr", num(co2, 1));
    }
    let range = match (c.payback_years_low, c.payback_years_high) {
        (Some(lo), Some(hi)) => format!(" ({} to {} years)", num(lo, 2), num(hi, 2)),
        (Some(lo), None) => format!(
            " (from {} years; within the saving's interval it may never pay back)",
            num(lo, 2)
        ),
        _ => String::new(),
    };
    let _ = match (c.upgrade_cost, c.payback_years) {
        (Some(u), Some(p)) => write!(
            head,
            "; the upgrade ({}) pays for itself in {} years{range}",
            format_money(u, cur),
            num(p, 2)
        ),
        (Some(u), None) => write!(
            head,
            "; the upgrade ({}) never pays for itself: it saves nothing",
            format_money(u, cur)
        ),
        (None, _) if manual_target => write!(
            head,
            "; no upgrade cost given (--upgrade-cost, or upgrade_cost in the [[config]] of {:?})",
            c.to
        ),
        (None, _) => write!(head, "; no upgrade cost given (--upgrade-cost)"),
    };
    let mut v = vec![head];
    let per_mode: Vec<String> = c
        .per_mode
        .iter()
        .map(|m| {
            format!(
                "{} {} kWh {}",
                m.mode,
                num(m.annual_kwh_saved, 2),
                format_money(m.annual_saving, cur)
            )
        })
        .collect();
    if !per_mode.is_empty() {
        v.push(format!("  per mode: {}", per_mode.join("; ")));
    }
    v
}

/// "This machine: measured and modelled": the measured energy and its year, the interval's
/// parts, the meter's counter, the modelled year and the gaps.
fn measured_lines(m: &MeasuredReport, cur: &str) -> Vec<String> {
    let mut lines = vec![
        format!(
            "measured {}{} to {}: {} over {} covered of {} ({}%), {}, mean {}",
            m.source
                .as_ref()
                .map_or_else(String::new, |s| format!("({s}) ")),
            m.from,
            m.to,
            energy(m.kwh),
            crate::ledger::interval::hours_text(m.covered_hours),
            crate::ledger::interval::hours_text(m.window_hours),
            num(m.coverage_percent, 1),
            format_money(m.energy_cost, cur),
            watts(m.mean_watts, m.mean_watts_ci95)
        ),
        format!(
            "{}: {}, {}",
            m.annual_basis,
            kwh(m.annual_kwh, m.annual_kwh_ci95),
            money_per_year(m.annual_cost, m.annual_cost_ci95, cur)
        ),
    ];
    if let Some(ci) = m.mean_watts_ci95 {
        lines.push(format!(
            "interval (95 %): {} W = meter accuracy {} + sampling {}",
            num(ci, 2),
            m.accuracy_watts.map_or_else(
                || "unknown".to_string(),
                |a| format!(
                    "{} W ({})",
                    num(a, 2),
                    m.accuracy_source.as_deref().unwrap_or("datasheet")
                )
            ),
            m.sampling_watts
                .map_or_else(|| "unknown".to_string(), |s| format!("{} W", num(s, 2)))
        ));
    }
    if let Some(c) = &m.counter {
        lines.push(format!(
            "the meter's own counter: {} against the integral's {}: {} (the integral is the energy of record)",
            energy(c.counter_wh / 1000.0),
            energy(c.integral_wh / 1000.0),
            c.describe()
        ));
    }
    lines.extend(m.warnings.iter().map(|w| format!("warning: {w}")));
    if let Some(md) = &m.modelled {
        lines.push(format!(
            "a year, {} ({} + {} W x busy CPUs; mean {} of {} CPUs busy, {}): {}, {}",
            md.annual_basis,
            num(md.idle_watts, 1),
            num(md.watts_per_loop, 2),
            num(md.mean_busy_cpus, 2),
            md.cpus,
            watts(md.mean_watts, None),
            kwh(md.annual_kwh, None),
            money_per_year(md.annual_cost, None, cur)
        ));
    }
    if let (Some(k), Some(c)) = (m.difference_kwh_percent, m.difference_cost_percent) {
        lines.push(format!(
            "modelled differs from measured by {k:+.1}% in energy and {c:+.1}% in cost"
        ));
    }
    for a in &m.away {
        lines.push(format!(
            "{}: {}; {}, {}",
            a.mode,
            crate::ledger::standby::phrase(a),
            energy(a.wh / 1000.0),
            format_money(a.cost, cur)
        ));
    }
    for g in &m.gaps {
        let counted = match (&g.counted, g.counted_wh) {
            (Some(note), Some(wh)) => format!(
                "; {wh:.0}{} Wh {note} (priced)",
                g.counted_ci95_wh
                    .map(|c| format!(" \u{b1} {c:.0}"))
                    .unwrap_or_default()
            ),
            (Some(note), None) => format!("; {note}"),
            (None, _) => String::new(),
        };
        lines.push(format!(
            "gap {} to {} ({}): {}{counted}",
            g.from,
            g.to,
            crate::ledger::interval::hours_text(g.hours),
            g.reason
        ));
    }
    lines
}

/// "Idle-power regression": the status, then one line per configuration checked.
fn regression_section(r: &Report) -> Section {
    let g = &r.regression;
    let mut lines = vec![match g.status {
        RegressionStatus::NotChecked => {
            "none checked: `wattson sweep --name NAME --levels 0,1 --regression-check` compares idle with the baseline".to_string()
        }
        s => s.as_str().to_string(),
    }];
    for c in &g.checks {
        lines.push(format!(
            "{}: {} idle {} now against {} at the baseline ({}{:.1} ± {:.1} W, {}/yr; threshold {:.1} W), checked {}",
            c.config,
            if c.detected { "detected:" } else { "none:" },
            watts(c.latest_idle_watts, Some(c.latest_ci95_watts)),
            watts(c.baseline_idle_watts, Some(c.baseline_ci95_watts)),
            if c.delta_watts >= 0.0 { "+" } else { "" },
            c.delta_watts,
            c.delta_ci95_watts,
            format_money(c.delta_annual_cost, &r.currency),
            c.threshold_watts,
            c.checked_at
        ));
    }
    Section {
        title: "Idle-power regression".into(),
        lines,
    }
}

/// "119.6 W, 60.0%" or "not seen" for one GPU state.
fn gpu_state(w: Option<f64>, share: f64) -> String {
    w.map_or_else(
        || "not seen".to_string(),
        |w| format!("{w:.1} W, {}% of the time", num(share * 100.0, 1)),
    )
}

/// The GPU section's lines: per GPU its states, the rule, and the resident cost.
pub fn gpu_lines(r: &Report) -> Vec<String> {
    let cur = r.currency.as_str();
    let mut lines = Vec::new();
    for g in &r.gpus {
        lines.push(format!(
            "{}: busy {}; idle with a resident process {}; idle bare {} (over {})",
            g.channel,
            gpu_state(g.busy_watts, g.busy_share),
            gpu_state(g.idle_resident_watts, g.idle_resident_share),
            gpu_state(g.idle_bare_watts, g.idle_bare_share),
            crate::ledger::interval::hours_text(g.covered_hours)
        ));
        lines.push(format!(
            "  {}: idle classified {}",
            g.channel, g.rule_explanation
        ));
        if let (Some(extra), Some(cost), Some(all_year)) = (
            g.resident_extra_watts,
            g.resident_annual_cost,
            g.resident_all_year_cost,
        ) {
            lines.push(format!(
                "  {}: a resident process adds {} at idle: {} at the {}% of the time it was \
                 resident and idle ({}), {} if resident all year ({})",
                g.channel,
                watts(extra, None),
                money_per_year(cost, None, cur),
                num(g.idle_resident_share * 100.0, 1),
                kwh(g.resident_annual_kwh.unwrap_or(0.0), None),
                money_per_year(all_year, None, cur),
                kwh(g.resident_all_year_kwh.unwrap_or(0.0), None)
            ));
        }
        lines.extend(g.notes.iter().map(|n| format!("  {}: {n}", g.channel)));
    }
    lines
}
