//! A calibration's estimate priced: the estimated energy of a stretch at the tariff's
//! price of each hour, projected to a year with the model's interval carried into the
//! money. `wattson calibration estimate` and `wattson status` (on a host with no meter)
//! both show this, so the two give one answer.

use serde::Serialize;

use super::CalibrationError;
use super::estimate::{self, Estimated};
use super::model::WallModel;
use crate::ledger::estimated_cost::{EstimatedCost, project};
use crate::store::Store;
use crate::tariff::Tariff;

/// An estimate over a stretch, and its money.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Priced {
    #[serde(flatten)]
    pub estimate: Estimated,
    pub currency: String,
    /// The energy cost of the minutes estimated (standing charge not included).
    pub window_cost: Option<f64>,
    /// Projected from the minutes estimated: per day, month, year, with the interval.
    pub cost: Option<EstimatedCost>,
}

/// `model` over `host`'s history in `[from_ms, to_ms)`, priced at `tariff`.
pub fn priced(
    store: &Store,
    host: &str,
    model: &WallModel,
    tariff: &Tariff,
    from_ms: i64,
    to_ms: i64,
) -> Result<Priced, CalibrationError> {
    let estimate = estimate::over(store, host, model, from_ms, to_ms)?;
    let covered_hours = estimate.minutes as f64 / 60.0;
    let cost = project(
        tariff,
        &estimate.hours,
        covered_hours,
        Some(estimate.interval_wh),
    )?;
    Ok(Priced {
        window_cost: cost.as_ref().map(|c| c.cost_per_day * covered_hours / 24.0),
        currency: tariff.currency().to_owned(),
        cost,
        estimate,
    })
}
