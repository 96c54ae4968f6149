//! The rows a calibration's estimates add (see the parent module's documentation): the
//! window's estimate on a host with no wall meter's energy (kind `estimated`), and each
//! stretch the wall meter was away (kind `stood_in`).

use super::{HEADER, Rows, money, num, opt, price_of};
use crate::report::model::Report;

/// The calibration's estimate as one row of kind `estimated` (see the module
/// documentation).
pub(super) fn estimated_row(out: &mut Rows, p: &crate::calibration::priced::Priced, r: &Report) {
    priced_row(
        out,
        p,
        r,
        ("estimated", "estimated"),
        &p.estimate.provenance,
    );
}

/// A stretch the meter was away as one row of kind `stood_in` (see the module
/// documentation).
pub(super) fn stood_in_row(out: &mut Rows, s: &crate::calibration::stand_in::StoodIn, r: &Report) {
    let at = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_default()
    };
    let mode = format!("away {} to {}", at(s.away_from_ms), at(s.away_to_ms));
    let check = s.on_return.as_ref().map_or_else(
        || "not checked: the meter has not come back in the window".to_owned(),
        |c| {
            format!(
                "{:+.1} % against the wall on the meter's return ({} its interval)",
                c.side.drift_pct,
                if c.side.outside_interval {
                    "outside"
                } else {
                    "inside"
                }
            )
        },
    );
    let mut warnings = vec![s.estimate.estimate.provenance.clone()];
    warnings.extend(
        s.estimate
            .estimate
            .withheld
            .iter()
            .map(|w| format!("withheld {} minutes: {}", w.minutes, w.reason)),
    );
    warnings.push(check);
    let warnings = warnings.join("; ");
    if s.estimate.cost.is_none() {
        // Nothing estimated: the row says why, its figures empty.
        let mut row = vec![
            wattson_collectors::SourceId::Estimate.to_string(),
            "stood_in".to_owned(),
            String::from(&mode),
        ];
        row.resize(HEADER.len(), String::new());
        row[9] = String::from(&r.currency);
        row[HEADER.len() - 1] = String::from(&warnings);
        out.row(row);
        return;
    }
    priced_row(out, &s.estimate, r, ("stood_in", &mode), &warnings);
}

/// A calibration's priced estimate as one row of `kind` and `mode`.
fn priced_row(
    out: &mut Rows,
    p: &crate::calibration::priced::Priced,
    r: &Report,
    (kind, mode): (&str, &str),
    warnings: &str,
) {
    let Some(c) = &p.cost else { return };
    let kwh_ci = c
        .cost_per_year_ci95
        .filter(|_| c.cost_per_year > 0.0)
        .map(|ci| c.kwh_per_year * ci / c.cost_per_year);
    let row = [
        wattson_collectors::SourceId::Estimate.to_string(),
        kind.to_owned(),
        String::from(mode),
        num(c.watts, 3),
        opt(c.watts_ci95, 3),
        num(c.kwh_per_year, 3),
        opt(kwh_ci, 3),
        money(c.cost_per_year),
        c.cost_per_year_ci95.map_or_else(String::new, money),
        String::from(&r.currency),
        num(price_of(c.kwh_per_year, c.cost_per_year, r), 6),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        String::from(warnings),
    ];
    out.row(row);
}
