//! Why a ledger figure could not be made ([`LedgerError`]).

use crate::ledger::price::CostError;
use crate::store::StoreError;
use crate::tariff::TariffError;
use crate::tariff::store::PriceStoreError;

/// Why the ledger could not price or sum energy.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// `[tariff]` does not make a tariff: a configuration problem (exit status 78). The
    /// tariff's reason is part of the message, which says where it is.
    #[error("[tariff]: {0}")]
    Tariff(TariffError),
    /// Reading the store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reading the stored price series.
    #[error(transparent)]
    PriceSeries(#[from] PriceStoreError),
    /// Pricing the energy.
    #[error(transparent)]
    Cost(#[from] CostError),
}

impl LedgerError {
    /// The exit status it stands for: the configuration's (78) for a tariff it does not
    /// make, the store's (74) for a database it cannot read; none of its own otherwise.
    pub fn exit_status(&self) -> Option<u8> {
        match self {
            LedgerError::Tariff(_) => Some(crate::config::EXIT_CONFIG as u8),
            LedgerError::Store(_) => Some(crate::store::EXIT_STORE),
            LedgerError::PriceSeries(_) | LedgerError::Cost(_) => None,
        }
    }
}
