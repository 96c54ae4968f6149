//! Tariffs: the price of a kilowatt-hour at any instant, and the real tariffs' series. The
//! configured prices (`[tariff]`: flat, time-of-use periods, dated changes), price series
//! (Octopus Agile half-hours, ENTSO-E / Nord Pool day-ahead hours, plain CSV, the live
//! price of `[tariff] price_topic` over MQTT) and carbon-intensity series (the GB National
//! Grid API, plain CSV), stored as slots in SQLite and applied by the ledger per slot, with
//! the configured `[tariff]` as the fallback.
//!
//! - [`pricing`]: a [`Tariff`], pure: the configured prices by local time of day and date,
//!   with any series taking precedence per slot, and which of them priced an instant.
//! - [`series`]: price and carbon-intensity slots, pure (a series, the set that applies,
//!   CO2 of energy per slot).
//! - [`import`]: the file formats, parsed into checked slots (`wattson tariff import`).
//! - [`store`]: the slots in SQLite (`schema/0008-price-slots.sql`).
//! - the price topic's subscription is an input: `sources::price_topic`; the configured
//!   tariff with the stored series applied is the ledger's
//!   (`ledger::costs::tariff_with_series`), the config's `[tariff]` section is validated in
//!   `config::tariff_section`, and the report's real-tariff section is `report::real_tariffs`.
//!
//! This module sits low, below `analysis`, `config` and `ledger`, which price with its
//! types: it imports only `store`, `zone` and `csv_line`.
//!
//! Units: UTC ms; currency per kWh (negative allowed); g CO2 per kWh.

pub mod import;
pub mod pricing;
pub mod series;
pub mod store;

pub use pricing::{Period, PriceSource, Tariff, TariffChange, TariffError};

use crate::store::Store;
use series::SeriesSet;

/// The longest slot a price or carbon series takes, ms (31 days): a slot from year 1 to
/// 9999 would otherwise replace every slot it overlaps and price 8,000 years at one price.
pub const MAX_SLOT_MS: i64 = 31 * 86_400_000;

/// Where a price or carbon slot may lie, UTC ms: from 1970 to 2100. A slot in year 1 (or
/// 9999) would stretch a series' window over millennia, and the year's mean price is
/// worked out across that window.
pub const SLOT_RANGE_MS: std::ops::Range<i64> = 0..4_102_444_800_000;

/// The applied carbon-intensity series (empty when none was imported).
pub fn carbon_series(store: &Store, now_ms: i64) -> Result<SeriesSet, store::PriceStoreError> {
    store::applied(store, store::Kind::Carbon, store::CARBON_UNIT, now_ms)
}
#[cfg(test)]
mod tests;
