//! The services collector in the daemon: built from `[services]` with the other sources
//! (`sources::wiring`), polled by the sampler like any source, and its samples taken out of
//! each batch before the store sees them
//! ([`crate::services::Account`]), so that short-lived groups never become series; each
//! closed interval is added to its hour on the store's thread, without waiting for it.

use wattson_collectors::Sample;

use crate::config::Config;
use crate::services::{Account, account};
use crate::store::StoreHandle;

/// Takes the services samples out of the sampler's batches and stores their intervals.
pub struct ServicesSink {
    account: Account,
    store: StoreHandle,
    host: String,
    top: usize,
    retention_ms: i64,
}

impl ServicesSink {
    pub fn new(config: &Config, store: StoreHandle) -> ServicesSink {
        ServicesSink {
            account: Account::new(
                crate::ledger::costs::wall_source(config),
                account::process_cpu_time(),
            ),
            store,
            host: config.host.name.clone(),
            top: config.services.top,
            retention_ms: i64::try_from(config.storage.raw_retention.as_millis())
                .unwrap_or(i64::MAX),
        }
    }

    /// Removes the services samples from `batch` and queues their intervals.
    pub fn take(&mut self, batch: &mut Vec<Sample>) {
        for interval in self.account.take(batch) {
            let (host, top, retention) = (self.host.clone(), self.top, self.retention_ms);
            let queued = self.store.submit(move |store| {
                if let Err(e) =
                    crate::services::store::record(store, &host, &interval, top, retention)
                {
                    tracing::warn!(
                        "services: interval not stored: {}",
                        wattson_collectors::ErrorChain(&e)
                    );
                }
            });
            if let Err(e) = queued {
                tracing::warn!("services: interval not stored: {e}");
            }
        }
    }
}
