//! Renders a [`Report`] as text: an aligned terminal table, Markdown, CSV, JSON (the
//! `wattson report --format json` contract) or one self-contained HTML file with SVG charts.
//!
//! Every format shows the same numbers: watts (W), kWh per year and the tariff's currency
//! per year, money rounded to 2 decimals half away from zero (JSON keeps full precision).

mod candidates;
pub mod charts;
pub mod csv;
pub mod html;
pub mod json;
pub mod markdown;
mod sections;
pub mod summary;
pub mod table;

use thiserror::Error;

pub use candidates::candidate_lines;
pub use sections::{Section, gpu_lines, sections};

use super::model::{DUTY_CYCLE, ModeReport, Report};
use crate::analysis::modes::mode_rank;
use crate::ledger::price::format_money;

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
    // Names and notes come from the database, which a hand may have written: the plain-text
    // formats carry no control character but the line break (JSON and HTML escape them).
    let plain = |text: String| crate::output::without_controls(&text).into_owned();
    match format {
        Format::Table => Ok(plain(table::render(report))),
        Format::Markdown => Ok(plain(markdown::render(report))),
        Format::Csv => Ok(plain(csv::render(report))),
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

/// Energy measured over a window, to four significant digits: "2.400 kWh" from 1 kWh up,
/// "833.3 Wh", "0.8333 Wh", "0.01234 Wh" below (a short window's energy would otherwise print
/// as "0.001 kWh", and a candidate's few seconds at a watt as "0.0000 Wh").
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
    } else if wh == 0.0 {
        "0 Wh".to_string()
    } else {
        // Three places after the first significant one (at most 12 places: a nanowatt-hour).
        let first = -wh.abs().log10().floor() as i32;
        let places = usize::try_from((first + 3).clamp(4, 12)).unwrap_or(12);
        format!("{wh:.places$} Wh")
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
        assert_eq!(energy(0.000_012_34), "0.01234 Wh");
        assert_eq!(energy(0.000_000_012_34), "0.00001234 Wh");
        assert_eq!(energy(0.000_000_999_94), "0.0009999 Wh");
        assert_eq!(energy(0.0), "0 Wh");
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
