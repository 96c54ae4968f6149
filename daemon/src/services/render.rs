//! `wattson services` and the report's section "What each service costs" as text: a plain
//! table and Markdown, from one list of rows. Every watt and money figure is marked as an
//! estimate with its interval; the idle floor is its own line; without a sweep the CPU time
//! is shown with why there are no watts.

use std::fmt::Write as _;

use super::attribution::{GroupFigure, ServicesEstimate};
use crate::ledger::estimated_cost::EstimatedCost;
use crate::ledger::price::format_money;

fn pm(value: Option<f64>, ci: Option<f64>, unit: &str) -> String {
    match (value, ci) {
        (Some(v), Some(c)) => format!("~{v:.2} +/- {c:.2} {unit}"),
        (Some(v), None) => format!("~{v:.2} {unit} (interval unknown)"),
        (None, _) => "-".to_owned(),
    }
}

/// One table row: label, kind, CPU share, CPU-hours, watts now, mean watts, kWh a day,
/// money a day, a month, a year.
fn row(f: &GroupFigure, currency: &str) -> [String; 10] {
    let kind = match f.kind.as_str() {
        "other" | "rest" => String::new(),
        k => k.to_owned(),
    };
    let c = f.cost.as_ref();
    let money = |x: fn(&EstimatedCost) -> f64| {
        c.map_or_else(|| "-".to_owned(), |c| format_money(x(c), currency))
    };
    [
        f.label.clone(),
        kind,
        format!("{:.1} %", 100.0 * f.cpu_share),
        format!("{:.2}", f.cpu_hours),
        pm(f.watts_now, f.watts_now_ci95, "W"),
        pm(c.map(|c| c.watts), c.and_then(|c| c.watts_ci95), "W"),
        c.map_or_else(|| "-".to_owned(), |c| format!("{:.3}", c.kwh_per_day)),
        money(|c| c.cost_per_day),
        money(|c| c.cost_per_month),
        money(|c| c.cost_per_year),
    ]
}

const HEADER: [&str; 10] = [
    "group",
    "kind",
    "CPU share",
    "CPU-hours",
    "watts now (est.)",
    "mean watts (est.)",
    "kWh/day",
    "per day",
    "per month",
    "per year",
];

/// wattson's own cost in one line: "wattson itself: 0.04 % of a CPU, about 0.02 W, GBP 0.02 a year".
pub fn wattson_line(e: &ServicesEstimate) -> Option<String> {
    let w = e.wattson.as_ref()?;
    let mut line = format!("wattson itself: {:.3} % of a CPU", 100.0 * w.cpus);
    if let Some(c) = &w.cost {
        let _ = write!(
            line,
            ", about {:.3} W, {} a year (estimated like the services; already inside its own unit's figure)",
            c.watts,
            format_money(c.cost_per_year, &e.currency)
        );
    }
    Some(line)
}

fn heading(e: &ServicesEstimate) -> Vec<String> {
    let mut lines = vec![
        format!(
            "Estimates, not measurements: {} of CPU time recorded, {} of it with wall readings.",
            crate::ledger::interval::hours_text(e.covered_hours),
            crate::ledger::interval::hours_text(e.metered_hours)
        ),
        format!("Basis: {}.", e.basis),
    ];
    if let Some(n) = &e.now {
        let mut now = format!("Now: {:.2} CPUs busy", n.busy_cpus);
        if let Some(w) = n.wall_watts {
            let _ = write!(now, ", {w:.1} W at the wall (measured)");
        }
        if let Some(d) = n.dynamic_watts {
            let _ = write!(now, ", ~{d:.1} W of it above the idle floor (estimate)");
        }
        lines.push(now + ".");
    }
    lines
}

fn footer(e: &ServicesEstimate) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(f) = &e.idle_floor {
        lines.push(format!(
            "The box being on (idle floor, never spread over services): {}, {:.3} kWh/day, {} a year.",
            pm(Some(f.watts), f.watts_ci95, "W"),
            f.kwh_per_day,
            format_money(f.cost_per_year, &e.currency)
        ));
    }
    if let Some(d) = &e.dynamic {
        lines.push(format!(
            "Above the idle floor, all groups together: {}, {} a year.",
            pm(Some(d.watts), d.watts_ci95, "W"),
            format_money(d.cost_per_year, &e.currency)
        ));
    }
    lines.extend(wattson_line(e));
    lines.extend(e.warnings.iter().map(|w| format!("Warning: {w}")));
    lines
}

/// The plain-text table; with no groups, `unrecordable` says why this machine records none
/// (where it cannot), else that none is recorded yet.
pub fn text(e: &ServicesEstimate, unrecordable: Option<&str>) -> String {
    let mut out = String::new();
    for l in heading(e) {
        let _ = writeln!(out, "{l}");
    }
    if e.is_empty() {
        match unrecordable {
            Some(why) => {
                let _ = writeln!(
                    out,
                    "\nno CPU time per service is recorded on this machine, and none will be: {why}"
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "\nno CPU time per service recorded yet (the daemon records it with [services] on cgroup v2)"
                );
            }
        }
    } else {
        let rows: Vec<[String; 10]> = e.groups.iter().map(|g| row(g, &e.currency)).collect();
        let mut width = HEADER.map(str::len);
        for r in &rows {
            for (w, cell) in width.iter_mut().zip(r) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let _ = writeln!(out);
        let line = |cells: &[String]| {
            let mut l = String::new();
            for (i, (cell, w)) in cells.iter().zip(width).enumerate() {
                if i < 2 {
                    let _ = write!(l, "{cell:<w$}  ");
                } else {
                    let _ = write!(l, "{cell:>w$}  ");
                }
            }
            l.trim_end().to_owned()
        };
        let _ = writeln!(out, "{}", line(&HEADER.map(str::to_owned)));
        for r in &rows {
            let _ = writeln!(out, "{}", line(r));
        }
    }
    let foot = footer(e);
    if !foot.is_empty() {
        let _ = writeln!(out);
    }
    for l in foot {
        let _ = writeln!(out, "{l}");
    }
    out
}

/// A Markdown cell: no pipes or newlines.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The Markdown section body (the caller writes the heading).
pub fn markdown(e: &ServicesEstimate) -> String {
    let mut out = String::new();
    for l in heading(e) {
        let _ = writeln!(out, "{}\n", cell(&l));
    }
    if !e.is_empty() {
        let _ = writeln!(out, "| {} |", HEADER.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(HEADER.len()));
        for g in &e.groups {
            let r = row(g, &e.currency);
            let cells: Vec<String> = r.iter().map(|c| cell(c)).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out.push('\n');
    }
    for l in footer(e) {
        let _ = writeln!(out, "{}\n", cell(&l));
    }
    out
}

/// Groups the MQTT state carries (bounded: Home Assistant keeps every attribute).
pub const MQTT_GROUPS: usize = 5;

/// The report section's title.
pub const TITLE: &str = "What each service costs";

/// The report section as lines (table, Markdown and HTML reports list them): the basis,
/// one line per group, the idle floor, wattson itself and the warnings.
pub fn lines(e: &ServicesEstimate) -> Vec<String> {
    let mut out = heading(e);
    for g in &e.groups {
        let mut l = format!(
            "{}{}: {:.1} % of busy CPU time, {:.2} CPU-hours",
            g.label,
            match g.kind.as_str() {
                "other" | "rest" => String::new(),
                k => format!(" ({k})"),
            },
            100.0 * g.cpu_share,
            g.cpu_hours
        );
        if g.watts_now.is_some() {
            let _ = write!(l, "; now {}", pm(g.watts_now, g.watts_now_ci95, "W"));
        }
        if let Some(c) = &g.cost {
            let _ = write!(
                l,
                "; mean {}, {:.3} kWh/day, {} a day, {} a month, {} a year (estimate)",
                pm(Some(c.watts), c.watts_ci95, "W"),
                c.kwh_per_day,
                format_money(c.cost_per_day, &e.currency),
                format_money(c.cost_per_month, &e.currency),
                format_money(c.cost_per_year, &e.currency)
            );
        }
        out.push(l);
    }
    out.extend(footer(e));
    out
}

/// `(group, kind, figures)` per group, then the idle floor and wattson itself: the CSV's rows.
pub fn priced_rows(e: &ServicesEstimate) -> Vec<(String, String, Option<&EstimatedCost>)> {
    let mut out: Vec<(String, String, Option<&EstimatedCost>)> = e
        .groups
        .iter()
        .map(|g| (g.label.clone(), g.kind.clone(), g.cost.as_ref()))
        .collect();
    if let Some(f) = &e.idle_floor {
        out.push((
            "the box being on".to_owned(),
            "idle floor".to_owned(),
            Some(f),
        ));
    }
    if let Some(w) = &e.wattson {
        out.push((w.label.clone(), "wattson".to_owned(), w.cost.as_ref()));
    }
    out
}
