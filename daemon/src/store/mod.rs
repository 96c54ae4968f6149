//! SQLite store: samples, rollups, gaps, configurations, sweeps and tariffs in one file.
//!
//! Speaks SQLite through `rusqlite`; the schema is `schema/NNNN-*.sql`, applied atomically
//! by `rusqlite_migration` and versioned by `PRAGMA user_version`; the file is marked with
//! [`APPLICATION_ID`]. Times are UTC ms since the Unix epoch; values are in the unit of
//! their metric ([`Metric::unit`]); energy is in Wh.
//!
//! Layout (see `schema/0001-initial.sql`):
//! - raw samples live in chunks of [`CHUNK_MS`] per series, encoded by [`chunk_codec`]: values are
//!   quantised to the resolution of their unit ([`resolution`]), lossless at meter resolution.
//!   Raw chunks are kept for the raw retention (default 30 days), except detail
//!   ([`is_detail`]): per-core CPU series, which are most of the raw data and have no
//!   rollups, so older per-core history is simply gone, and package C-state residency,
//!   whose hourly rollups keep its history (five to seven noisy share series at 1 Hz, at the
//!   1.38 bytes a sample BENCHMARKS.md measured for core residency, would otherwise keep
//!   18-25 MB raw); they are kept for the shorter detail retention
//!   (default 3 days), while the CPU's other aggregate channels keep the full raw retention.
//!   Their closed chunks live in their own table, so that pruning them frees whole pages.
//! - hourly rollups (count, mean, min, max; energy for power) are kept forever for series
//!   worth rolling up ([`rollup_kind`]): every meter metric, RAPL/hwmon/GPU power, and the
//!   CPU's aggregate channels (`all`, `all/<x>`, `interval_mean`). Per-core channels are raw only.
//! - per-minute rollups are kept forever for power series only, packed per hour in the hour
//!   row: they answer energy at minute precision. Other metrics have minute detail in raw
//!   data for the retention period. This keeps a host-year near its size budget.
//! - power rollups store the energy they integrated and the time it covers ([`integrate`]):
//!   pairs of samples are judged by the series' own spacing ([`Series::spacing_ms`]: the
//!   configured interval, the spacing a fleet host states, or the spacing observed in the
//!   data), so no reader derives energy or covered time from sample counts. How a
//!   series' readings stand between them is its own rule, stored with it
//!   ([`Series::readings`]: `sampled`, or `hold` for a plug that reports on change, each
//!   reading standing until the next for at most its `max_hold`, the rest of a longer
//!   silence recorded as a gap), and every reader integrates it by that rule. Rollups written
//!   before covered time existed are recomputed from raw samples at the first open where
//!   those are kept, and marked approximate where not ([`backfill`]).
//!
//! One thread owns the writing connection ([`StoreHandle`]); readers, in the daemon or in
//! another process, open the file with [`Store::open_read_only`].

mod away;
mod backfill;
pub mod chunk_codec;
mod directory;
mod error;
mod existing;
mod file;
mod gaps;
mod handle;
pub mod health;
mod hour_rollup;
pub mod integrate;
pub mod lock;
mod open;
mod pending;
pub mod quarantine;
mod read;
mod rollup;
pub mod routine;
mod series;
pub mod wal;
mod writer;

#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;
use wattson_collectors::{Metric, SourceId};

use rusqlite::Connection;
use rusqlite_migration::{M, Migrations};

pub use away::{Away, KernelClockRow};
pub use error::{StoreError, error_chain};
pub use existing::{ExistingError, UnknownHost, check_host, database_exists, open_database};
pub use gaps::{CountedGap, Gap};
pub use handle::{FlushStats, StoreHandle};
pub use health::StoreHealth;
pub use hour_rollup::{HourRollup, MinuteRollup};
pub use quarantine::Quarantined;
pub use read::{HourSums, Latest, RawSeries, Resolution, Rollup, SeriesFilter};
pub use routine::{Routine, RoutineId};
pub use series::{Series, dequantise, is_detail, is_per_core, quantise, resolution, rollup_kind};
pub use writer::Writer;

/// `PRAGMA application_id` of a wattson database: `WatS` in ASCII.
pub const APPLICATION_ID: i32 = 0x5761_7453;
/// Length of one raw chunk, ms. Short enough that a chunk fits in a fraction of a page.
pub const CHUNK_MS: i64 = 15 * MINUTE_MS;
/// Page size of new database files, bytes.
pub const PAGE_SIZE: i64 = 16_384;

/// Exit status of a command stopped by the database (cannot open or write it, another
/// writer holds it, samples were lost): `EX_IOERR` from sysexits.h.
pub const EXIT_STORE: u8 = 74;
/// One minute, ms.
pub const MINUTE_MS: i64 = 60_000;
/// One hour, ms.
pub const HOUR_MS: i64 = 3_600_000;
/// One day, ms.
pub const DAY_MS: i64 = 86_400_000;

const MIGRATION_LIST: &[M<'static>] = &[
    M::up(include_str!("../../../schema/0001-initial.sql")),
    M::up(include_str!("../../../schema/0002-raw-detail-chunk.sql")),
    M::up(include_str!("../../../schema/0003-dashboard-views.sql")),
    M::up(include_str!("../../../schema/0004-idle-regression.sql")),
    M::up(include_str!("../../../schema/0005-ledger.sql")),
    M::up(include_str!("../../../schema/0006-quarantine.sql")),
    M::up(include_str!("../../../schema/0007-idle-measure.sql")),
    M::up(include_str!("../../../schema/0008-price-slots.sql")),
    M::up(include_str!("../../../schema/0009-services.sql")),
    M::up(include_str!("../../../schema/0010-candidates.sql")),
    M::up(include_str!("../../../schema/0011-measured-candidates.sql")),
    M::up(include_str!("../../../schema/0012-idle-applied.sql")),
    M::up(include_str!("../../../schema/0013-wakeup-hours.sql")),
    M::up(include_str!("../../../schema/0014-remote-write.sql")),
    M::up(include_str!("../../../schema/0015-disks.sql")),
    M::up(include_str!("../../../schema/0016-remote-write-gaps.sql")),
    M::up(include_str!("../../../schema/0017-wall-models.sql")),
    M::up(include_str!(
        "../../../schema/0018-minute-energy-micro-wh.sql"
    )),
    M::up(include_str!("../../../schema/0019-meter-protocols.sql")),
    M::up(include_str!("../../../schema/0020-held-readings.sql")),
    M::up(include_str!("../../../schema/0021-counted-gaps.sql")),
    M::up(include_str!("../../../schema/0022-host-asleep.sql")),
];

/// The schema migrations, in order.
pub const MIGRATIONS: Migrations<'static> = Migrations::from_slice(MIGRATION_LIST);

/// How the store is written.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Host name stored with samples that do not name one.
    pub host: String,
    /// How long raw samples are kept, ms (default 30 days). Rollups are kept forever.
    pub raw_retention_ms: i64,
    /// How long raw samples of detail series ([`is_detail`]) are kept, ms (default 3 days);
    /// never longer than `raw_retention_ms`.
    pub detail_retention_ms: i64,
    /// Longest time samples wait in memory before a flush (default 2 s).
    pub flush_interval: Duration,
    /// A flush starts early once this many samples wait (default 50,000).
    pub max_batch_samples: usize,
    /// Batches the queue holds before `insert` drops (default 1024).
    pub queue_batches: usize,
    /// Each source's own sample spacing, ms, by source (a meter -> its configured
    /// interval). A pair of a series' samples further apart than
    /// [`integrate::max_pair_ms`] of its spacing is a gap: no energy is integrated across
    /// it. Sources not named here (smart plugs, fleet hosts that state no interval) have
    /// their spacing learned from the data.
    pub spacing_ms: std::collections::HashMap<SourceId, i64>,
    /// How the power readings of this host's sources stand ([`integrate::Readings`]) and,
    /// for `hold`, their `max_hold`, ms, where the configuration says (smart plugs): stored
    /// with each power series. A source not named keeps what its series stores (`sampled`
    /// unless declared otherwise).
    pub readings: std::collections::HashMap<SourceId, (integrate::Readings, Option<i64>)>,
    /// How often expired raw chunks are deleted (default 10 min).
    pub prune_interval: Duration,
    /// Memory for samples whose flush failed, kept for the next attempt (default 8 MiB,
    /// about 100,000 samples); past it the oldest are dropped and counted.
    pub max_held_bytes: usize,
    /// How often a failed flush is tried again (default 1 s); new batches wait for it.
    pub retry_interval: Duration,
    /// Whether a failed flush's samples are held and tried again (default). A fleet
    /// collector sets it off: what it could not commit it does not acknowledge, the broker
    /// delivers it again, and a copy written later by the writer's own retry would run ahead
    /// of messages the broker still has to deliver.
    pub hold_failed: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            host: "localhost".to_owned(),
            raw_retention_ms: 30 * DAY_MS,
            detail_retention_ms: 3 * DAY_MS,
            flush_interval: Duration::from_secs(2),
            max_batch_samples: 50_000,
            queue_batches: 1024,
            spacing_ms: std::collections::HashMap::new(),
            readings: std::collections::HashMap::new(),
            prune_interval: Duration::from_mins(10),
            max_held_bytes: 8 * 1024 * 1024,
            hold_failed: true,
            retry_interval: Duration::from_secs(1),
        }
    }
}

impl StoreOptions {
    /// How long raw samples of a series are kept, ms: the detail retention for per-core
    /// CPU series, the raw retention for everything else.
    pub fn retention_ms(&self, metric: Metric, channel: &str) -> i64 {
        if is_detail(metric, channel) {
            self.detail_retention_ms.min(self.raw_retention_ms)
        } else {
            self.raw_retention_ms
        }
    }
}

/// A database handle: the read API, plus what the writer needs.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// Device and inode of the file a writing store opened: a path that no longer leads to
    /// it means the file (or its directory) was deleted or replaced.
    identity: Option<(u64, u64)>,
    /// Its write-ahead log and shared-memory index (`-wal`, `-shm`) with their device and
    /// inode: see [`Store::close_moved`].
    companions: Vec<(PathBuf, (u64, u64))>,
}

impl Store {
    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection, for tables without a typed API yet (configurations, sweeps,
    /// tariffs). Writes through it from outside the writer thread are not allowed.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// `PRAGMA integrity_check`: `"ok"` for a sound file.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        self.conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| self.sql(e))
    }

    fn sql(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn corrupt(
        &self,
        series_id: i64,
        start_ms: i64,
        source: chunk_codec::DecodeError,
    ) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            series_id,
            start_ms,
            source,
        }
    }
}

/// `t` rounded down to a multiple of `step` (saturating at the `i64` range).
pub fn floor_to(t: i64, step: i64) -> i64 {
    t.div_euclid(step).saturating_mul(step)
}

/// `t` rounded up to a multiple of `step`.
pub fn ceil_to(t: i64, step: i64) -> i64 {
    let f = floor_to(t, step);
    if f == t { t } else { f.saturating_add(step) }
}
