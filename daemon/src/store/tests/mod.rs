//! Store tests on real SQLite files in temp directories, by topic; the helpers they share
//! are here.

use std::path::Path;
use wattson_collectors::SourceId;
use wattson_collectors::source::channel;

use wattson_collectors::{Metric, Sample};

use super::*;

mod energy;
mod retention;
mod samples;
mod schema;
mod writer;

/// 2023-11-14T22:00:00Z, an hour boundary.
const T0: i64 = 1_700_000_000_000 - 1_700_000_000_000 % HOUR_MS;

fn options() -> StoreOptions {
    StoreOptions {
        host: "basket".to_owned(),
        ..StoreOptions::default()
    }
}

fn writer(path: &Path) -> Writer {
    Writer::new(Store::open(path, &options()).unwrap(), options())
}

fn power(ts: i64, w: f64) -> Sample {
    Sample::new(ts, SourceId::meter("wall"), Metric::Power, "", w)
}

/// The ledger's energy of basket's wall meter over `[from, to)`, Wh.
fn ledger_wh(store: &Store, from: i64, to: i64) -> f64 {
    crate::ledger::energy::energy(store, "basket", &SourceId::meter("wall"), from, to)
        .unwrap()
        .wh
}

/// The ledger's buckets of basket's wall meter over `[from, to)`: `(start, end, Wh)`.
fn ledger_buckets(store: &Store, from: i64, to: i64) -> Vec<(i64, i64, f64)> {
    crate::ledger::energy::energy(store, "basket", &SourceId::meter("wall"), from, to)
        .unwrap()
        .priced_buckets()
}

fn wall() -> SeriesFilter {
    SeriesFilter::all()
        .host("basket")
        .source(&SourceId::meter("wall"))
        .metric(Metric::Power)
}

pub(super) fn stored_samples(path: &Path) -> usize {
    let store = Store::open_read_only(path).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    store
        .raw(&SeriesFilter::all(), i64::MIN / 2, i64::MAX / 2)
        .unwrap()
        .iter()
        .map(|(_, p)| p.len())
        .sum()
}
