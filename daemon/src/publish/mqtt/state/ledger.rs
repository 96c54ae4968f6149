//! The ledger's figures in the state: energy and cost (today, this month, all time), the
//! year on the tariff with its standing charge and all-in figure, the price now; brought up
//! to the newest sample by the live trail.

use super::{StateExtras, StatePayload, finite};

/// The ledger's figures brought up to the newest sample: the energy the live trail
/// integrated after the sample they count (`energy_ts_ms`) is added to the energy totals,
/// and priced at the price now in the cost totals, so every read of a counter includes
/// every sample so far, flushed or not. The total never goes down between reads.
pub fn with_live_energy(extras: &StateExtras, live: &crate::live::LiveState) -> StateExtras {
    let mut x = extras.clone();
    let Some(total) = x.energy_total_kwh else {
        return x;
    };
    // No stored sample yet: only while nothing is stored may the whole trail be added.
    if x.energy_ts_ms.is_none() && total > 0.0 {
        return x;
    }
    let Some((added, newest)) = live
        .energy_since(x.energy_ts_ms)
        .filter(|(wh, _)| wh.is_finite() && *wh >= 0.0)
        .map(|(wh, newest)| (wh / 1000.0, newest))
    else {
        return x;
    };
    let served = live.never_less(total + added);
    let added = served - total;
    x.energy_total_kwh = Some(served);
    x.energy_ts_ms = Some(newest);
    x.energy_today_kwh = x.energy_today_kwh.map(|t| t + added);
    if let Some((price, _)) = x.price_now.as_ref().filter(|p| p.0.is_finite()) {
        let cost = added * price;
        x.cost_total = x.cost_total.map(|c| c + cost);
        x.cost_today = x.cost_today.map(|c| c + cost);
        x.cost_month = x.cost_month.map(|c| c + cost);
    }
    x
}

/// The ledger's energy and cost figures and the price now.
pub(super) fn ledger_figures(p: &mut StatePayload, extras: &StateExtras) {
    p.energy = extras.energy_total_kwh.and_then(finite);
    p.energy_ts = extras.energy_ts_ms.filter(|_| p.energy.is_some());
    p.energy_today = extras.energy_today_kwh.and_then(finite);
    p.currency = (!extras.currency.is_empty()).then(|| extras.currency.clone());
    p.cost_today = extras.cost_today.and_then(finite);
    p.cost_month = extras.cost_month.and_then(finite);
    p.cost_total = extras.cost_total.and_then(finite);
    p.cost_annual_projection = extras.annual_projection.and_then(finite);
    p.cost_annual_basis = p.cost_annual_projection.and(extras.annual_basis.clone());
    p.cost_annual_standing_charge = extras.standing_charge_annual.and_then(finite);
    p.cost_annual_all_in = p
        .cost_annual_projection
        .map(|a| a + p.cost_annual_standing_charge.unwrap_or(0.0))
        .and_then(finite);
    if let Some((w, ci95)) = extras.standby_watts {
        p.standby_power = finite(w);
        p.standby_power_ci95 = ci95.and_then(finite).filter(|_| p.standby_power.is_some());
    }
    p.estimated.clone_from(&extras.estimated);
    if let Some((price, source)) = &extras.price_now {
        p.price = finite(*price);
        p.price_source = p.price.map(|_| source.clone());
    }
}
