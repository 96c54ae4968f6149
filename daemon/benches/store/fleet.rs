//! A fleet collector's database after a year (`WATTSON_BENCH_FLEET=PATH cargo bench -p
//! wattson --bench store`): [`FLEET_HOSTS`] synthetic hosts (each the store benchmark's
//! synthetic host, drawn from its own seed) at 1 Hz over 2025, stored as `wattson collect`
//! stores them: one database, each sample with its host, the collector's default retention
//! (30 days raw, 3 days for per-core CPU series) and hourly rollups kept for ever.
//!
//! How the year is written, and why: the first 334 days of every host as hourly (and, for
//! power, per-minute) rollups written directly, because a year through the writer is
//! 10 x 978 M samples (hours of CPU on this machine) only for the writer to prune all but
//! the last 30 days of them; then the last 31 days of every host through the store's own
//! [`Writer`], the hosts interleaved second by second as the collector receives them,
//! flushed every 60 s of data (the collector commits each message; the closed chunks and
//! rollups are the same, only the open chunk is rewritten less often) and pruned hourly, so
//! the raw window, the rollups of its hours and the freed pages are what the writer leaves.

use std::path::Path;
use std::time::Instant;

use wattson::store::{DAY_MS, Store, StoreOptions, Writer};

use super::{Host, YEAR_MS, ingest, write_rollups};

/// Hosts in the fleet.
pub(crate) const FLEET_HOSTS: usize = 10;
/// 2025-01-01T00:00:00Z: a whole calendar year (not a leap year) of 365 days.
pub(crate) const FLEET_YEAR_START: i64 = 1_735_689_600_000;
/// The collector's own `[host] name`.
const COLLECTOR: &str = "collector";

/// The fleet's host names: `host-00`, `host-01`, ...
pub(crate) fn host_name(i: usize) -> String {
    format!("host-{i:02}")
}

/// Builds the fleet database at `path` (which must not exist yet), reporting progress on
/// stderr.
pub(crate) fn build(path: &Path, hosts: usize) {
    assert!(!path.exists(), "{} exists: remove it first", path.display());
    let options = StoreOptions {
        host: COLLECTOR.to_owned(),
        ..StoreOptions::default()
    };
    let end = FLEET_YEAR_START + YEAR_MS;
    let raw_from = end - 31 * DAY_MS;
    let start = Instant::now();
    let store = Store::open(path, &options).unwrap();
    for h in 0..hosts {
        write_rollups(
            &store,
            &host_name(h),
            100 + h as u64,
            FLEET_YEAR_START,
            raw_from,
        );
    }
    eprintln!(
        "fleet: rollups of {hosts} hosts for 334 days written in {:.1?}",
        start.elapsed()
    );
    let mut writer = Writer::new(store, options);
    let mut fleet: Vec<(Option<String>, Host)> = (0..hosts)
        .map(|h| (Some(host_name(h)), Host::new(1000 + h as u64)))
        .collect();
    let samples = ingest(&mut writer, &mut fleet, raw_from, end, 60);
    drop(writer);
    let store = Store::open(path, &StoreOptions::default()).unwrap();
    store
        .conn()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let bytes = std::fs::metadata(path).unwrap().len();
    eprintln!(
        "fleet: {samples} samples of the last 31 days ingested; {} hosts, {bytes} bytes = {:.1} MB, in {:.1?}",
        hosts,
        bytes as f64 / 1e6,
        start.elapsed()
    );
}
