//! Why what each service costs could not be estimated ([`ServicesError`]).

use crate::store::StoreError;

/// Why what each service costs could not be estimated.
#[derive(Debug, thiserror::Error)]
pub enum ServicesError {
    /// Reading the CPU time per service (boxed, as a store error is large).
    #[error(transparent)]
    Store(Box<StoreError>),
    /// Reading the host's sweeps, for its idle floor.
    #[error(transparent)]
    Sweep(#[from] crate::sweep::SweepError),
    /// Pricing the energy.
    #[error(transparent)]
    Ledger(Box<crate::ledger::LedgerError>),
    /// Opening the database (the report's services section).
    #[error(transparent)]
    Existing(#[from] crate::store::ExistingError),
}

impl From<StoreError> for ServicesError {
    fn from(e: StoreError) -> Self {
        ServicesError::Store(Box::new(e))
    }
}

impl From<crate::ledger::LedgerError> for ServicesError {
    fn from(e: crate::ledger::LedgerError) -> Self {
        ServicesError::Ledger(Box::new(e))
    }
}

impl ServicesError {
    /// The exit status it stands for: the store's (74) for a database it cannot read, the
    /// ledger's otherwise.
    pub fn exit_status(&self) -> Option<u8> {
        match self {
            ServicesError::Store(_) => Some(crate::store::EXIT_STORE),
            ServicesError::Ledger(e) => e.exit_status(),
            ServicesError::Existing(e) => e.exit_status(),
            ServicesError::Sweep(_) => None,
        }
    }
}
