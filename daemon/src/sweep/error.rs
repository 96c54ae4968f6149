//! Why a sweep could not run, be stored or be read back ([`SweepError`]).

use std::path::PathBuf;

use super::regression::RegressionError;
use super::workload::WorkloadError;

/// Why a sweep could not run, be stored or be read back.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// `--name` is a configuration of the config file, measured by hand.
    #[error("configuration {name:?} is a manual configuration: choose another --name")]
    ManualName { name: String },
    /// This machine has no cpufreq governors to set (`--governor`).
    #[error(
        "no cpufreq governors under {}: this machine (often a VM) does not let wattson change them",
        dir.display()
    )]
    NoGovernors { dir: PathBuf },
    /// A CPU's governor could not be read.
    #[error("reading {}", path.display())]
    ReadGovernor {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A CPU's governor could not be set.
    #[error(
        "setting governor {governor:?} in {} (needs root; is it in scaling_available_governors?)",
        path.display()
    )]
    SetGovernor {
        governor: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A level ended with fewer than two readings from the meter.
    #[error("the meter gave {readings} readings in {measure_s:.0} s at {loops} loops{why}")]
    TooFewReadings {
        readings: usize,
        measure_s: f64,
        loops: usize,
        /// ": check it is connected and answering", or the first failure.
        why: String,
    },
    /// The loops could not be prepared or started.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// A level's readings make no statistics.
    #[error(transparent)]
    Stats(#[from] crate::analysis::stats::StatsError),
    /// The regression check could not be read or stored.
    #[error(transparent)]
    Regression(#[from] RegressionError),
    /// The sweep tables of the database.
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
    /// A stored sweep's JSON columns.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}
