//! With no wall meter: today's energy and a year's cost estimated from the host's
//! calibration (`wattson calibration`), the figures `wattson status` shows. Bounded: one
//! series per family.

use super::{Families, J_PER_KWH, Labels, Snapshot};

pub(super) fn estimated_families(f: &mut Families<'_>, s: &Snapshot) {
    let Some(e) = &s.extras.estimated else {
        return;
    };
    let host = || -> Labels { vec![("host", s.host.clone())] };
    let priced = || -> Labels {
        vec![
            ("host", s.host.clone()),
            ("currency", s.extras.currency.clone()),
        ]
    };
    let one = |v: Option<f64>, l: Labels| v.map(|v| vec![(l, v)]).unwrap_or_default();
    f.gauge(
        "estimated_energy_today",
        "Energy since local midnight estimated from the host's calibration (no wall meter): the model's watts over the minutes whose signals it saw, as wattson status shows it",
        Some("joules"),
        one(Some(e.energy_today * J_PER_KWH), host()),
    );
    f.gauge(
        "estimated_annual_cost",
        "A year's running cost estimated from the host's calibration (no wall meter): the last 7 days' estimated energy at the prices of their hours, scaled to a year by the minutes estimated",
        None,
        one(e.cost_annual, priced()),
    );
    f.gauge(
        "estimated_annual_cost_ci95",
        "The 95 % half-width of wattson_estimated_annual_cost, from the calibration's held-out error",
        None,
        one(e.cost_annual_ci95, priced()),
    );
    f.gauge(
        "estimated_minutes_withheld",
        "Minutes of the last 7 days not estimated because a signal read outside what the calibration saw",
        None,
        one(Some(e.minutes_withheld as f64), host()),
    );
}
