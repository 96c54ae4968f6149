//! Rows of kind `tariff` (the measured energy under each tariff of `--tariffs`, and the duty
//! cycle by time of day) and of kind `co2` (CO2 per carbon-intensity slot): the real-tariff
//! section (see the parent module's documentation).

use super::{Rows, money, num};
use crate::report::model::Report;
use crate::report::real_tariffs::TariffReport;

/// The real-tariff rows (see the module documentation).
pub(super) fn tariff_rows(out: &mut Rows, t: &TariffReport, r: &Report) {
    let per_year = r
        .measured
        .as_ref()
        .filter(|m| m.kwh > 0.0)
        .map_or(0.0, |m| m.annual_kwh / m.kwh);
    let mut rows: Vec<[String; 18]> = Vec::new();
    let blank = String::new;
    if let Some(d) = &t.time_of_day {
        rows.push([
            "current".to_string(),
            "tariff".to_string(),
            "by time of day".to_string(),
            blank(),
            blank(),
            num(d.annual_kwh, 3),
            blank(),
            money(d.annual_cost),
            blank(),
            String::from(&r.currency),
            num(d.annual_cost / d.annual_kwh.max(f64::MIN_POSITIVE), 6),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            String::from(&d.basis),
        ]);
    }
    for row in &t.comparison {
        let mut notes = vec![row.origin.clone()];
        if row.fallback_kwh > 0.0 {
            notes.push(format!(
                "{} kWh at its configured price (no slot)",
                num(row.fallback_kwh, 3)
            ));
        }
        rows.push([
            String::from(&row.name),
            "tariff".to_string(),
            "measured".to_string(),
            blank(),
            blank(),
            num(row.kwh * per_year, 3),
            blank(),
            money(row.annual_cost),
            blank(),
            String::from(&r.currency),
            num(row.cost / row.kwh.max(f64::MIN_POSITIVE), 6),
            blank(),
            money(row.annual_saving_vs_first),
            blank(),
            blank(),
            blank(),
            blank(),
            String::from(&notes.join("; ")),
        ]);
    }
    if let Some(c) = &t.carbon {
        rows.push([
            String::from(&c.figure.sources.join(" ")),
            "co2".to_string(),
            "measured".to_string(),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            blank(),
            String::from(&format!(
                "{} kg CO2 per year per slot ({} kg over the window)",
                num(c.annual_co2_kg, 3),
                num(c.figure.co2_kg, 3)
            )),
        ]);
    }
    for row in rows {
        out.row(row);
    }
}
