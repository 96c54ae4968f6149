//! The energy counters of the meters on one line, by address: each a
//! [`crate::counter::EnergyTracker`] (the counter's bound against the power) with the steps
//! it rejected.

use crate::counter::{EnergyStep, EnergyTracker};
use crate::plausibility::{Reason, Rejection, Rejections};

/// The energy counters of the meters on one line, by address, each with the steps it
/// rejected: the collector's half of the plausibility filter (the session checks each
/// reading alone; this checks a counter against the time since the previous reading).
#[derive(Debug, Clone, Default)]
pub struct EnergyBook {
    entries: Vec<(u8, EnergyTracker, Rejections)>,
}

impl EnergyBook {
    /// A tracker per address, for counters that wrap at `wrap_wh` and step by
    /// `resolution_wh`.
    pub fn new(
        addresses: impl IntoIterator<Item = u8>,
        wrap_wh: Option<f64>,
        resolution_wh: f64,
    ) -> Self {
        EnergyBook {
            entries: addresses
                .into_iter()
                .map(|a| {
                    (
                        a,
                        EnergyTracker::new(wrap_wh, resolution_wh),
                        Rejections::default(),
                    )
                })
                .collect(),
        }
    }

    /// Follows `address`'s counter, `raw_wh` read at `ts_ms` with power `power_w`: the
    /// total so far, Wh (`None` for an address not in the book). `Err` when the step is more
    /// than the power allows: the reading is then dropped, and the rejection counted.
    pub fn track(
        &mut self,
        address: u8,
        ts_ms: i64,
        raw_wh: f64,
        power_w: Option<f64>,
    ) -> Result<Option<f64>, Rejection> {
        let Some((_, tracker, rejected)) = self.entries.iter_mut().find(|(a, _, _)| *a == address)
        else {
            return Ok(None);
        };
        match tracker.update(ts_ms, raw_wh, power_w) {
            EnergyStep::Rejected(why) => {
                rejected.record(Reason::EnergyCounter);
                Err(why)
            }
            _ => Ok(Some(tracker.total_wh())),
        }
    }

    /// The counter steps `address`'s meter rejected.
    pub fn rejected(&self, address: u8) -> Option<&Rejections> {
        self.entries
            .iter()
            .find(|(a, _, _)| *a == address)
            .map(|(_, _, r)| r)
    }
}
