//! With a wall meter configured: the host's calibration checked against the wall every hour
//! on the store's writer thread ([`crate::calibration::refit::check`]), fitted again and
//! stored when it has drifted outside its interval or was borrowed, and said in the log.

use std::time::Duration;

use wattson_collectors::SysRoot;

use crate::calibration::model::Hardware;
use crate::calibration::refit::{Checked, check};
use crate::config::Config;
use crate::store::{Routine, RoutineId, StoreHandle};

/// How often the calibration is checked against the wall.
const EVERY: Duration = Duration::from_secs(3600);

/// The running check; removed when dropped.
#[derive(Debug)]
pub struct CalibrationRefit {
    store: StoreHandle,
    routine: RoutineId,
}

impl Drop for CalibrationRefit {
    fn drop(&mut self) {
        self.store.remove_routine(self.routine);
    }
}

/// Starts the hourly check (its first at once) where `config` has a wall meter.
pub fn spawn(config: &Config, store: &StoreHandle) -> Option<CalibrationRefit> {
    crate::ledger::PrimaryPower::from_config(config).wall()?;
    let root = SysRoot::new(&config.host.sysfs, &config.host.procfs);
    let routine = Refit {
        host: config.host.name.clone(),
        hardware: crate::calibration::refit::hardware(&root, &config.host.name),
        said: None,
    };
    let id = store
        .add_routine(Box::new(routine), EVERY)
        .map_err(|e| tracing::warn!("calibration check: {}", wattson_collectors::ErrorChain(&e)))
        .ok()?;
    Some(CalibrationRefit {
        store: store.clone(),
        routine: id,
    })
}

struct Refit {
    host: String,
    hardware: Hardware,
    /// The last failure said, so an hourly failure is logged once.
    said: Option<String>,
}

impl Routine for Refit {
    fn run(&mut self, store: &crate::store::Store, _asked: bool) -> bool {
        match check(store, &self.host, self.hardware.clone(), chrono::Utc::now()) {
            Ok(Some(Checked::Refitted { why, model })) => {
                tracing::info!(
                    "calibration fitted again ({why}): {}, held-out error {:.1} W rms, +/- \
                     {:.1} % on energy",
                    model.model.describe(),
                    model.heldout_rms_w,
                    model.interval_pct
                );
                self.said = None;
            }
            Ok(Some(Checked::Kept(d))) => tracing::debug!(
                "calibration kept: {:+.1} % against the wall over {} minutes",
                d.side.drift_pct,
                d.side.minutes
            ),
            Ok(None) => {}
            Err(e) => {
                let text = wattson_collectors::ErrorChain(&e).to_string();
                if self.said.as_deref() != Some(text.as_str()) {
                    tracing::warn!("calibration check against the wall: {text}");
                    self.said = Some(text);
                }
            }
        }
        true
    }
}
