//! The state's `sleep` object: what sleeping when idle would save, from the last 28 days of
//! this machine's stored history (the report's section, made hourly by the ledger feed),
//! always with where its standby figure came from and what it would interrupt.

use serde::{Deserialize, Serialize};

use crate::report::sleep::SleepReport;

/// `sleep` in the state. Money in the state's currency, a year; hours a week.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SleepPayload {
    /// The proposed nightly windows ("01:00-07:00 every night"); empty with none.
    pub windows: Vec<String>,
    pub hours_a_week: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annual_saving: Option<f64>,
    /// Less the cost of waking, where the energy of a resume is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annual_net_saving: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_watts: Option<f64>,
    /// Where the standby figure came from, or how to give one.
    pub standby_from: String,
    /// What the windows would have slept through: "backup.service at 03:00 on Sundays".
    #[serde(default)]
    pub interrupted: Vec<String>,
    /// What the saving is and its price basis; or why there is no window.
    pub basis: String,
}

impl SleepPayload {
    /// The report's section as the state carries it.
    pub fn of(r: &SleepReport) -> SleepPayload {
        SleepPayload {
            windows: r.windows.clone(),
            hours_a_week: r.hours_a_week,
            annual_saving: r.annual_saving.map(super::round),
            annual_net_saving: r.annual_net_saving.map(super::round),
            standby_watts: r.standby_watts,
            standby_from: r.standby_from.clone(),
            interrupted: r.interrupted.iter().map(|i| i.text.clone()).collect(),
            basis: r
                .unavailable
                .as_ref()
                .map(|u| format!("no window proposed: {u}"))
                .or_else(|| r.saving_basis.clone())
                .unwrap_or_else(|| format!("no saving priced: {}", r.standby_from)),
        }
    }
}
