//! Calibration from ordinary running: a model of the wall draw fitted, while a meter is
//! plugged in, against the software-visible signals this host stores (RAPL, hwmon, GPU and
//! UPS power, the CPU's busy share, frequency and package C-state residency), chosen by its
//! error on a later part of the history it was not fitted on, and kept with the range of
//! every signal it saw. Once the meter has moved on (or on a host of the same hardware that
//! imports it), it estimates the wall draw from the same signals; a minute whose signals lie
//! outside what the model saw is withheld with the reason, never extrapolated. A sweep's
//! fit of the wall against one signal is a calibration too, read as a one-signal model:
//! every estimate of the wall, live and over history, is a [`WallModel`] applied one way.
//!
//! - [`history`]: the host's stored series as aligned minute means (the wall and the
//!   candidate signals);
//! - [`model`]: a fitted model (a straight line over several signals, or a calibrate table
//!   over one), evaluated on a minute;
//! - [`choose`]: the candidate models fitted (one least-squares solve) and the one chosen
//!   by held-out error;
//! - [`estimate`]: a model over a stretch of history, with the minutes it withheld and the
//!   wall beside it where a meter was there;
//! - [`persist`]: the `wall_model` table, and a host's calibrations in the order the estimate
//!   takes them;
//! - [`swept`]: a sweep's stored fit read as a one-signal model (a sweep's is the estimate
//!   where no model from ordinary running is stored);
//! - [`priced`]: an estimate's energy at the tariff, projected to a year with its interval;
//! - [`running`]: the same kept hour by hour, for the daemon's publishes;
//! - [`stand_in`]: the stretches a calibration stood in for the meter in a report's
//!   window, and how good it was, checked on the meter's return;
//! - [`refit`]: fitting from the stored history, on demand and by the daemon when the meter
//!   is back and the calibration has drifted;
//! - [`export`]: the model as a file another host of the same hardware imports (the forms
//!   Home Assistant and Prometheus read are [`crate::publish::calibration`]'s).
//!
//! Units: W for power, the signal's own unit for each feature (a busy share 0..1, MHz, a
//! residency share); times UTC ms.

pub mod choose;
pub mod estimate;
pub mod export;
pub mod history;
pub mod model;
pub mod persist;
pub mod priced;
pub mod refit;
pub mod running;
pub mod stand_in;
pub mod swept;

pub use model::{Feature, Model, Origin, Shape, WallModel};

/// Why a calibration could not be made, used or moved.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The tariff the estimate is priced at.
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerError),
    #[error("{path}")]
    Sqlite {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    /// Not enough history, an unknown signal, a window with nothing in it: what to do is
    /// in the text.
    #[error("{0}")]
    NotEnough(String),
    /// A file or a stored model that is not one wattson wrote, or one for other hardware.
    #[error("{0}")]
    BadInput(String),
}
