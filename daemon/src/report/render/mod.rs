//! Renders a [`Report`] as text: an aligned terminal table, Markdown, CSV, JSON (the
//! `wattson report --format json` contract) or one self-contained HTML file with SVG charts.
//!
//! Every format shows the same numbers: watts (W), kWh per year and the tariff's currency
//! per year, money rounded to 2 decimals half away from zero (JSON keeps full precision).

pub mod charts;
pub mod csv;
pub mod html;
pub mod json;
pub mod markdown;
pub mod table;

use std::fmt::Write as _;

use thiserror::Error;

use super::model::{DUTY_CYCLE, ModeReport, RegressionStatus, Report};
use crate::analysis::cost::format_money;
use crate::analysis::modes::mode_rank;

/// Output formats of `wattson report --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text for a terminal.
    Table,
    /// A Markdown document with the same table.
    Markdown,
    /// One row per configuration and mode, with a header.
    Csv,
    /// One JSON object (the documented contract).
    Json,
    /// One self-contained HTML file with SVG charts and the JSON embedded.
    Html,
}

/// Why a report could not be rendered.
#[derive(Debug, Error)]
pub enum RenderError {
    /// JSON serialisation failed.
    #[error("writing the report as JSON")]
    Json(#[from] serde_json::Error),
    /// A chart could not be drawn.
    #[error("drawing the {chart} chart: {message}")]
    Chart {
        chart: &'static str,
        message: String,
    },
}

/// Renders `report` in `format`.
pub fn render(report: &Report, format: Format) -> Result<String, RenderError> {
    match format {
        Format::Table => Ok(table::render(report)),
        Format::Markdown => Ok(markdown::render(report)),
        Format::Csv => Ok(csv::render(report)),
        Format::Json => json::render(report),
        Format::Html => html::render(report),
    }
}

/// `x` with at most `max_dp` decimals, trailing zeros dropped: 2102.40 -> "2102.4",
/// 240.0 -> "240". Non-finite values print as "n/a".
pub fn num(x: f64, max_dp: usize) -> String {
    if !x.is_finite() {
        return "n/a".to_string();
    }
    let s = format!("{x:.max_dp$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" { "0".to_string() } else { s }
}

/// "240 W", or "240.0 ± 1.2 W" with an interval.
pub fn watts(w: f64, ci95: Option<f64>) -> String {
    match ci95 {
        Some(c) => format!("{w:.1} ± {c:.1} W"),
        None => format!("{} W", num(w, 1)),
    }
}

/// Energy measured over a window, to at least four significant digits: "2.400 kWh" from
/// 1 kWh up, "833.3 Wh", "0.8333 Wh" below (a short window's energy would otherwise print as
/// "0.001 kWh").
pub fn energy(kwh: f64) -> String {
    let wh = kwh * 1000.0;
    if !kwh.is_finite() {
        "n/a".to_string()
    } else if kwh.abs() >= 1.0 {
        format!("{kwh:.3} kWh")
    } else if wh.abs() >= 100.0 {
        format!("{wh:.1} Wh")
    } else if wh.abs() >= 10.0 {
        format!("{wh:.2} Wh")
    } else if wh.abs() >= 1.0 {
        format!("{wh:.3} Wh")
    } else {
        format!("{wh:.4} Wh")
    }
}

/// "2102.4 kWh", or "2102.4 ± 10.5 kWh".
pub fn kwh(k: f64, ci95: Option<f64>) -> String {
    match ci95 {
        Some(c) => format!("{} ± {} kWh", num(k, 2), num(c, 2)),
        None => format!("{} kWh", num(k, 2)),
    }
}

/// "GBP 189.22/yr", or "GBP 189.22 ± 0.95/yr".
pub fn money_per_year(cost: f64, ci95: Option<f64>, currency: &str) -> String {
    match ci95 {
        Some(c) => format!(
            "{} ± {}/yr",
            format_money(cost, currency),
            format_money(c, currency)
                .trim_start_matches(currency)
                .trim()
        ),
        None => format!("{}/yr", format_money(cost, currency)),
    }
}

/// One table cell's parts: watts, annual kWh, annual cost.
pub fn cell_parts(m: &ModeReport, currency: &str) -> [String; 3] {
    [
        watts(m.watts, m.ci95_watts),
        kwh(m.annual_kwh, m.annual_kwh_ci95),
        money_per_year(m.annual_cost, m.annual_cost_ci95, currency),
    ]
}

/// One table cell: "240 W  2102.4 kWh  GBP 189.22/yr".
pub fn cell(m: &ModeReport, currency: &str) -> String {
    cell_parts(m, currency).join("  ")
}

/// The mode-by-configuration grid: row names (modes in standard order, then the duty
/// cycle where measured) and per row one optional figure per configuration.
pub fn grid(report: &Report) -> Vec<(String, Vec<Option<&ModeReport>>)> {
    let mut names: Vec<&str> = report
        .configs
        .iter()
        .flat_map(|c| c.modes.iter().map(|m| m.name.as_str()))
        .collect();
    names.sort_by_key(|n| mode_rank(n));
    names.dedup();
    let mut rows: Vec<(String, Vec<Option<&ModeReport>>)> = names
        .iter()
        .map(|n| {
            (
                (*n).to_string(),
                report
                    .configs
                    .iter()
                    .map(|c| c.modes.iter().find(|m| m.name == *n))
                    .collect(),
            )
        })
        .collect();
    if report.configs.iter().any(|c| c.duty_cycle.is_some()) {
        rows.push((
            DUTY_CYCLE.to_string(),
            report
                .configs
                .iter()
                .map(|c| c.duty_cycle.as_ref())
                .collect(),
        ));
    }
    rows
}

/// A titled list of lines every text format shows after the table.
pub struct Section {
    pub title: String,
    pub lines: Vec<String>,
}

/// The report's prose: tariff, fits, comparisons, measured vs modelled, idle-power
/// regression, notes.
pub fn sections(r: &Report) -> Vec<Section> {
    let cur = r.currency.as_str();
    let mut out = Vec::new();

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
    out.push(Section {
        title: "Tariff".into(),
        lines: tariff,
    });
    if let Some(t) = &r.tariffs {
        out.push(Section {
            title: "Real tariffs (price per slot, comparison, CO2 per slot)".into(),
            lines: crate::report::tariffs::lines(t, cur),
        });
    }

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
    if !fits.is_empty() {
        out.push(Section {
            title: "Fits (watts = idle + watts per loop x busy loops)".into(),
            lines: fits,
        });
    }

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
    if !weakened.is_empty() {
        out.push(Section {
            title: "Warnings on the figures above".into(),
            lines: weakened,
        });
    }

    if !r.comparisons.is_empty() {
        let lines = r
            .comparisons
            .iter()
            .flat_map(|c| {
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
                    (None, _) => write!(
                        head,
                        "; no upgrade cost given (--upgrade-cost, or upgrade_cost in the [[config]] of {:?})",
                        c.to
                    ),
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
            })
            .collect();
        out.push(Section {
            title: format!(
                "Comparisons (from the {} configuration; headline at {})",
                match r.baseline {
                    crate::report::model::Baseline::Costliest => "costliest",
                    crate::report::model::Baseline::First => "first",
                },
                r.headline_mode
            ),
            lines,
        });
    }

    if let Some(m) = &r.measured {
        let mut lines = vec![
            format!(
                "measured {}{} to {}: {} over {} covered of {} h ({}%), {}, mean {}",
                m.source
                    .as_ref()
                    .map_or_else(String::new, |s| format!("({s}) ")),
                m.from,
                m.to,
                energy(m.kwh),
                crate::ledger::interval::hours_text(m.covered_hours),
                num(m.window_hours, 1),
                num(m.coverage_percent, 1),
                format_money(m.energy_cost, cur),
                watts(m.mean_watts, m.mean_watts_ci95)
            ),
            format!(
                "a year, {}: {}, {}",
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
        for g in &m.gaps {
            lines.push(format!(
                "gap {} to {} ({} h): {}",
                g.from,
                g.to,
                num(g.hours, 2),
                g.reason
            ));
        }
        out.push(Section {
            title: "This machine: measured and modelled".into(),
            lines,
        });
    }

    if let Some(c) = &r.candidates {
        out.push(Section {
            title: "Keep this box or buy another: candidates on this machine's load".into(),
            lines: candidate_lines(c, cur),
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

    if !r.notes.is_empty() {
        out.push(Section {
            title: "Notes".into(),
            lines: r.notes.clone(),
        });
    }
    out
}

/// The candidates' section: what they are priced on, keeping this machine, then each
/// candidate (cheapest that carries the load first) with its saving and payback.
pub fn candidate_lines(c: &crate::report::model::CandidatesReport, cur: &str) -> Vec<String> {
    let mut lines = vec![format!("priced on {}", c.load_basis)];
    if let Some(k) = &c.keep {
        let co2 = k
            .annual_co2_kg
            .map_or_else(String::new, |c| format!(", {} kg CO2", num(c, 1)));
        lines.push(format!(
            "keep {}: {}, {} a year{co2} [{}]",
            k.name,
            energy(k.annual_kwh),
            format_money(k.annual_cost, cur),
            k.basis
        ));
    }
    for x in &c.candidates {
        let rank = x
            .rank
            .map_or_else(|| "not ranked".to_owned(), |n| format!("#{n}"));
        let mut line = format!(
            "{rank} {}: {} W mean, {}, {} a year",
            x.name,
            num(x.mean_watts, 1),
            energy(x.annual_kwh),
            format_money(x.annual_cost, cur)
        );
        if let Some(s) = x.annual_saving {
            if s >= 0.0 {
                let _ = write!(line, ", saves {} a year", format_money(s, cur));
            } else {
                let _ = write!(line, ", costs {} a year more", format_money(-s, cur));
            }
        }
        match (x.price, x.payback_years) {
            (Some(p), Some(y)) => {
                let _ = write!(
                    line,
                    "; at {} it pays for itself in {} years",
                    format_money(p, cur),
                    num(y, 1)
                );
            }
            (Some(p), None) if x.annual_saving.is_some() => {
                let _ = write!(
                    line,
                    "; at {} it never pays for itself",
                    format_money(p, cur)
                );
            }
            _ => {}
        }
        if let Some(co2) = x.annual_co2_kg {
            let _ = write!(line, "; {} kg CO2 a year", num(co2, 1));
            match x.annual_co2_saved_kg {
                Some(s) if s >= 0.0 => {
                    let _ = write!(
                        line,
                        ", {} kg CO2 less than keeping this machine",
                        num(s, 1)
                    );
                }
                Some(s) => {
                    let _ = write!(
                        line,
                        ", {} kg CO2 more than keeping this machine",
                        num(-s, 1)
                    );
                }
                None => {}
            }
        }
        if let Some(w) = x.cost_per_full_load_hour {
            let _ = write!(
                line,
                "; {} per hour of this machine's full-throughput work",
                format_money(w, cur)
            );
        }
        if let Some(b) = x.cost_per_billion_ssj_ops {
            let _ = write!(line, "; {} per 10^9 ssj_ops", format_money(b, cur));
        }
        lines.push(line);
        lines.push(format!(
            "  curve {}; perf ratio {} ({}); mean load {} % of its maximum, peak {} %",
            x.curve_basis,
            num(x.perf_ratio, 2),
            x.perf_ratio_from,
            num(x.mean_load * 100.0, 1),
            num(x.peak_load * 100.0, 1)
        ));
        for w in &x.warnings {
            lines.push(format!("  warning: {w}"));
        }
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
            "{}: busy {}; idle with a resident process {}; idle bare {} (over {} h)",
            g.channel,
            gpu_state(g.busy_watts, g.busy_share),
            gpu_state(g.idle_resident_watts, g.idle_resident_share),
            gpu_state(g.idle_bare_watts, g.idle_bare_share),
            num(g.covered_hours, 2)
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

/// The report's title line: the year's mean price, which every modelled figure is priced
/// at (a measured figure states its own prices).
pub fn title(r: &Report) -> String {
    let price = if (r.mean_price_per_kwh - r.price_per_kwh).abs() > 1e-9 {
        format!(
            "modelled at the year's mean price {} ({})",
            crate::ledger::annual::price_text(r.mean_price_per_kwh, &r.currency),
            r.mean_price_from
        )
    } else {
        format!(
            "modelled at {}",
            crate::ledger::annual::price_text(r.price_per_kwh, &r.currency)
        )
    };
    format!(
        "wattson report: annual running cost, {price}{}",
        r.host
            .as_ref()
            .map_or_else(String::new, |h| format!(" (host {h})"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_keeps_four_significant_digits() {
        assert_eq!(energy(2.4), "2.400 kWh");
        assert_eq!(energy(0.8333), "833.3 Wh");
        assert_eq!(energy(0.000_833_33), "0.8333 Wh");
        assert_eq!(energy(0.012_345), "12.35 Wh");
    }

    #[test]
    fn numbers_print_without_trailing_zeros() {
        assert_eq!(num(2102.4, 2), "2102.4");
        assert_eq!(num(240.0, 1), "240");
        assert_eq!(num(1419.12 + 1e-13, 2), "1419.12");
        assert_eq!(num(-0.001, 2), "0");
        assert_eq!(num(f64::NAN, 2), "n/a");
        assert_eq!(watts(240.0, None), "240 W");
        assert_eq!(watts(40.04, Some(0.3)), "40.0 ± 0.3 W");
        assert_eq!(
            money_per_year(189.216, Some(0.951), "GBP"),
            "GBP 189.22 ± 0.95/yr"
        );
    }
}
