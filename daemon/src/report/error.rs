//! Why a report could not be made ([`ProduceError`]): what [`super::produce`] and the
//! gathering from the database ([`super::gather`]) refuse or fail on. The building and the
//! rendering keep their own ([`super::ReportError`], [`super::RenderError`]).

use std::path::PathBuf;

use crate::store::{ExistingError, StoreError};

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProduceError {
    /// `--upgrade-cost` is negative or not a number.
    #[error("--upgrade-cost {0} is not a price: give a non-negative amount")]
    UpgradeCost(f64),
    /// `--co2` is negative or not a number.
    #[error("--co2 {0} is not a carbon intensity: give g CO2 per kWh, 0 or more")]
    Co2(f64),
    /// No database and no configuration measured by hand.
    #[error(
        "no database at {} and no [[config]] in the configuration: nothing to report; run \
         `wattson run` (this machine's history) or `wattson sweep --name NAME` (its modes) \
         first, add a [[config]] measured by hand, or pass --db PATH",
        db.display()
    )]
    NothingToReport { db: PathBuf },
    /// `--tariffs` names a tariff that is neither configured nor imported.
    #[error(
        "--tariffs: no tariff {name:?}; known: {known} (add [[tariff.alternative]] to the \
         config, or import a series with wattson tariff import)"
    )]
    UnknownTariff { name: String, known: String },
    /// `[tariff]` or a `[[tariff.alternative]]` makes no tariff: a configuration problem
    /// (exit status 78). `what` says which.
    #[error("{what}")]
    Tariff {
        what: String,
        #[source]
        source: crate::tariff::TariffError,
    },
    /// What each service costs could not be read.
    #[error("reading what each service costs from {}", db.display())]
    Services {
        db: PathBuf,
        #[source]
        source: Box<crate::services::ServicesError>,
    },
    /// The calibration's estimate could not be made.
    #[error("estimating the wall from the calibration in {}", db.display())]
    Calibration {
        db: PathBuf,
        #[source]
        source: Box<crate::calibration::CalibrationError>,
    },
    /// The window asked for holds no time.
    #[error(transparent)]
    EmptyWindow(#[from] super::request::EmptyWindow),
    /// The database cannot be opened, or lacks the host asked for.
    #[error(transparent)]
    Existing(#[from] ExistingError),
    /// Reading the store (boxed, as a store error is large).
    #[error(transparent)]
    Store(Box<StoreError>),
    /// The ledger's figures.
    #[error(transparent)]
    Ledger(Box<crate::ledger::LedgerError>),
    /// The stored sweeps.
    #[error(transparent)]
    Sweep(#[from] crate::sweep::SweepError),
    /// The stored regression checks.
    #[error(transparent)]
    Regression(#[from] crate::sweep::regression::RegressionError),
    /// The stored candidate machines.
    #[error(transparent)]
    Candidates(#[from] crate::candidate::store::CandidateStoreError),
    /// The stored price and carbon series.
    #[error(transparent)]
    PriceSeries(#[from] crate::tariff::store::PriceStoreError),
    /// Building the report from what was gathered.
    #[error(transparent)]
    Build(#[from] super::ReportError),
    /// Rendering it.
    #[error(transparent)]
    Render(#[from] super::RenderError),
}

impl From<StoreError> for ProduceError {
    fn from(e: StoreError) -> Self {
        ProduceError::Store(Box::new(e))
    }
}

impl From<crate::ledger::LedgerError> for ProduceError {
    fn from(e: crate::ledger::LedgerError) -> Self {
        ProduceError::Ledger(Box::new(e))
    }
}

impl ProduceError {
    /// The exit status it stands for: the configuration's (78) for a tariff the config
    /// does not make, the store's (74) for a database it cannot read; none of its own
    /// otherwise.
    pub fn exit_status(&self) -> Option<u8> {
        match self {
            ProduceError::Tariff { .. } => Some(crate::config::EXIT_CONFIG as u8),
            ProduceError::Store(_) => Some(crate::store::EXIT_STORE),
            ProduceError::Existing(e) => e.exit_status(),
            ProduceError::Ledger(e) => e.exit_status(),
            ProduceError::Services { source, .. } => source.exit_status(),
            ProduceError::Calibration { source, .. } => source.exit_status(),
            ProduceError::UpgradeCost(_)
            | ProduceError::Co2(_)
            | ProduceError::NothingToReport { .. }
            | ProduceError::UnknownTariff { .. }
            | ProduceError::EmptyWindow(_)
            | ProduceError::Sweep(_)
            | ProduceError::Regression(_)
            | ProduceError::Candidates(_)
            | ProduceError::PriceSeries(_)
            | ProduceError::Build(_)
            | ProduceError::Render(_) => None,
        }
    }

    /// Whether it is what the request asked for that is not there (an empty window, a host,
    /// mode or configuration the database does not have): the HTTP report's 400.
    pub fn asked_for_what_is_not_there(&self) -> bool {
        matches!(
            self,
            ProduceError::EmptyWindow(_)
                | ProduceError::Existing(ExistingError::UnknownHost(_))
                | ProduceError::Build(
                    super::ReportError::UnknownMode { .. }
                        | super::ReportError::UnknownConfig { .. }
                )
        )
    }
}
