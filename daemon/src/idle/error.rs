//! Why `wattson idle` could not record, change, measure, restore or store a setting
//! ([`IdleError`]).

use std::path::PathBuf;

use crate::store::StoreError;

/// Why `wattson idle` could not record, change, measure, restore or store a setting.
#[derive(Debug, thiserror::Error)]
pub enum IdleError {
    /// A setting's file could not be read.
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The settings as found could not be stored before any is changed.
    #[error("storing the original settings in {}", db.display())]
    StoreOriginals {
        db: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// A write to a file this run did not record first.
    #[error("refusing to write {}: not among the files this run recorded", path.display())]
    NotRecorded { path: PathBuf },
    /// A setting could not be written.
    #[error("writing {value:?} to {} (is it a value this kernel offers?)", path.display())]
    Write {
        value: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The measurement's lock file could not be opened.
    #[error("opening the lock file {}", path.display())]
    LockFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Another measurement holds the lock.
    #[error(
        "another `wattson idle --measure` is running on {} (it holds {}): wait for it to \
         finish",
        db.display(),
        lock.display()
    )]
    Busy { db: PathBuf, lock: PathBuf },
    /// The lock could not be taken for another reason.
    #[error("locking {}", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: nix::errno::Errno,
    },
    /// The database could not be opened (boxed, as a store error is large).
    #[error("opening the database {}", db.display())]
    OpenDatabase {
        db: PathBuf,
        #[source]
        source: Box<StoreError>,
    },
    /// A phase ended with fewer than three readings from the meter.
    #[error("the meter gave {readings} readings in a {phase_s:.0} s phase{why}")]
    TooFewReadings {
        readings: usize,
        phase_s: f64,
        /// The first failure, in brackets, where there was one.
        why: String,
    },
    /// A setting could not be restored after its measurement.
    #[error("could not restore {name}: {}", failed.join("; "))]
    NotRestored { name: String, failed: Vec<String> },
    /// A setting could not be put back between its phases.
    #[error("could not put {name} back: {}", failed.join("; "))]
    NotPutBack { name: String, failed: Vec<String> },
    /// The phases do not alternate as measured.
    #[error("phases do not alternate A B A")]
    PhasesOutOfOrder,
    /// A phase's readings make no statistics.
    #[error(transparent)]
    Stats(#[from] crate::analysis::stats::StatsError),
    /// The idle tables of the database.
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
    /// Storing a measured setting as configurations.
    #[error(transparent)]
    Sweep(#[from] crate::sweep::SweepError),
}

impl IdleError {
    /// The exit status it stands for: the store's (74) for a database it cannot open;
    /// none of its own otherwise.
    pub fn exit_status(&self) -> Option<u8> {
        match self {
            IdleError::OpenDatabase { .. } => Some(crate::store::EXIT_STORE),
            _ => None,
        }
    }
}
