//! The state's `estimated` object: on a host with no wall meter, today's and the last 7
//! days' energy and money estimated from its calibration (the figures `wattson status`
//! shows, made by the ledger feed), always with what they rest on.

use serde::{Deserialize, Serialize};

/// `estimated` in the state, and what `/metrics` and the live page show of it. Energy in
/// kWh, power in W, money in the state's currency; `*_ci95` are 95 % half-widths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EstimatedPayload {
    /// Where it came from and how sure ([`crate::calibration::WallModel::provenance`]): "estimated
    /// from the calibration of DATE on ordinary running, +/- X %", "estimated from a sweep on
    /// DATE, +/- B W (X %)".
    pub basis: String,
    pub energy_today: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_today: Option<f64>,
    /// The mean over the last 7 days' estimated minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_ci95: Option<f64>,
    /// A year at the last 7 days' rate, at the prices of their hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_annual: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_annual_ci95: Option<f64>,
    /// Minutes of the last 7 days estimated, and withheld (a signal outside what the model
    /// saw).
    pub minutes: usize,
    pub minutes_withheld: usize,
}
