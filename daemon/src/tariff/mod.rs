//! Real tariffs: price series (Octopus Agile half-hours, ENTSO-E / Nord Pool day-ahead hours,
//! plain CSV, the live price of `[tariff] price_topic` over MQTT) and carbon-intensity
//! series (the GB National Grid API, plain CSV), stored as slots in SQLite and applied by
//! the ledger per slot, with the configured `[tariff]` as the fallback.
//!
//! - [`import`]: the file formats, parsed into checked slots (`wattson tariff import`).
//! - [`store`]: the slots in SQLite (`schema/0008-price-slots.sql`).
//! - the price topic's subscription is an input: `sources::live_price`.
//!
//! Units: UTC ms; currency per kWh (negative allowed); g CO2 per kWh.

pub mod import;
pub mod store;

use crate::analysis::price_series::SeriesSet;
use crate::analysis::tariff::Tariff;
use crate::config::TariffConfig;
use crate::store::Store;

/// The longest slot a price or carbon series takes, ms (31 days): a slot from year 1 to
/// 9999 would otherwise replace every slot it overlaps and price 8,000 years at one price.
pub const MAX_SLOT_MS: i64 = 31 * 86_400_000;

/// The configured tariff with the applied price series of the database taking precedence
/// per slot.
pub fn tariff_with_series(
    cfg: &TariffConfig,
    store: &Store,
    now_ms: i64,
) -> anyhow::Result<Tariff> {
    let base = crate::ledger::costs::tariff(cfg)?;
    let set = store::applied(store, store::Kind::Price, &cfg.currency, now_ms)?;
    Ok(base.with_series(set))
}

/// The applied carbon-intensity series (empty when none was imported).
pub fn carbon_series(store: &Store, now_ms: i64) -> anyhow::Result<SeriesSet> {
    Ok(store::applied(
        store,
        store::Kind::Carbon,
        store::CARBON_UNIT,
        now_ms,
    )?)
}
#[cfg(test)]
mod tests;
