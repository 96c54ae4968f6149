//! SQLite store: samples, rollups, gaps, configurations, sweeps and tariffs in one file.
//!
//! Speaks SQLite through `rusqlite`; the schema is `schema/NNNN-*.sql`, applied atomically
//! by `rusqlite_migration` and versioned by `PRAGMA user_version`; the file is marked with
//! [`APPLICATION_ID`]. Times are UTC ms since the Unix epoch; values are in the unit of
//! their metric ([`Metric::unit`]); energy is in Wh.
//!
//! Layout (see `schema/0001-initial.sql`):
//! - raw samples live in chunks of [`CHUNK_MS`] per series, encoded by [`codec`]: values are
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
//!   CPU's aggregate channels (`all`, `all/<x>`, `mean`). Per-core channels are raw only.
//! - per-minute rollups are kept forever for power series only, packed per hour in the hour
//!   row: they answer energy at minute precision. Other metrics have minute detail in raw
//!   data for the retention period. This keeps a host-year near its size budget.
//! - power rollups store the energy they integrated and the time it covers ([`integrate`]):
//!   pairs of samples are judged by the series' own spacing ([`Series::spacing_ms`]: the
//!   configured interval, the spacing a fleet host states, or the spacing observed in the
//!   data), so no reader derives energy or covered time from sample counts. Rollups written
//!   before covered time existed are recomputed from raw samples at the first open where
//!   those are kept, and marked approximate where not ([`backfill`]).
//!
//! One thread owns the writing connection ([`StoreHandle`]); readers, in the daemon or in
//! another process, open the file with [`Store::open_read_only`].

mod backfill;
pub mod codec;
mod file;
mod handle;
pub mod health;
pub mod integrate;
pub mod lock;
mod pending;
pub mod quarantine;
mod read;
mod rollup;
pub mod wal;
mod writer;

#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;
use wattson_collectors::SourceId;
use wattson_collectors::source::channel;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use rusqlite_migration::{M, Migrations};
use wattson_collectors::{Metric, Unit};

pub use handle::{FlushStats, StoreHandle};
pub use health::StoreHealth;
pub use quarantine::Quarantined;
pub use read::{Gap, HourSums, Latest, RawSeries, Resolution, Rollup, SeriesFilter};
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
];

/// The schema migrations, in order.
pub const MIGRATIONS: Migrations<'static> = Migrations::from_slice(MIGRATION_LIST);

/// Why a store operation failed. Each variant names the database file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("opening database {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("database {path}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("migrating database {path}")]
    Migrate {
        path: PathBuf,
        #[source]
        source: rusqlite_migration::Error,
    },
    #[error(
        "{path} is not a wattson database (application_id {application_id:#010x}, expected {APPLICATION_ID:#010x})"
    )]
    NotWattson { path: PathBuf, application_id: i32 },
    #[error(
        "database {path} has schema version {found}, this wattson knows up to {supported}: upgrade wattson"
    )]
    SchemaTooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error(
        "database {path} has schema version {found}, this wattson reads {supported}: let the daemon migrate it first"
    )]
    SchemaTooOld {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("database {path}: chunk of series {series_id} at {start_ms} ms is corrupt")]
    Corrupt {
        path: PathBuf,
        series_id: i64,
        start_ms: i64,
        #[source]
        source: codec::DecodeError,
    },
    #[error("database {path}: unknown metric {metric:?} in series {series_id}")]
    UnknownMetric {
        path: PathBuf,
        series_id: i64,
        metric: String,
    },
    #[error("starting the writer thread of database {path}")]
    Thread {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("store queue for {path} is full: batch dropped ({dropped_batches} dropped so far)")]
    QueueFull { path: PathBuf, dropped_batches: u64 },
    #[error("store writer for {path} has stopped")]
    Closed { path: PathBuf },
    #[error(
        "database {path} is already being written by {holder}: one writer per database \
         (`wattson run` and `wattson collect` share [storage] path by default); stop that \
         one, or give this one another [storage] path or --db"
    )]
    Locked { path: PathBuf, holder: String },
    #[error(
        "cannot open the writer lock {path} (wattson runs as uid {uid}): the database's \
         directory and files must be writable by that user"
    )]
    Lock {
        path: PathBuf,
        uid: u32,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "database {path} is read-only for wattson ({detail}): make it writable by the user \
         wattson runs as, or give another [storage] path or --db"
    )]
    ReadOnly { path: PathBuf, detail: String },
    #[error("database {path} was {what} while in use and cannot be created again")]
    Reopen {
        path: PathBuf,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("database {path}: {detail}")]
    Lost { path: PathBuf, detail: String },
}

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
    /// How often expired raw chunks are deleted (default 10 min).
    pub prune_interval: Duration,
    /// Memory for samples whose flush failed, kept for the next attempt (default 8 MiB,
    /// about 100,000 samples); past it the oldest are dropped and counted.
    pub max_held_bytes: usize,
    /// How often a failed flush is tried again (default 1 s); new batches wait for it.
    pub retry_interval: Duration,
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
            prune_interval: Duration::from_mins(10),
            max_held_bytes: 8 * 1024 * 1024,
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

/// Values per unit stored: a value `v` is kept as `round(v * resolution(unit))`.
///
/// W 0.01, V 0.01, A 0.001, ratio 0.001, Hz 0.01, Wh 0.001, share 1e-4, MHz 1, count 1,
/// s 0.001.
pub fn resolution(unit: Unit) -> f64 {
    match unit {
        Unit::Watt | Unit::Volt | Unit::Hertz => 100.0,
        Unit::Ampere | Unit::Ratio | Unit::WattHour | Unit::Second => 1000.0,
        Unit::Share => 10_000.0,
        Unit::Megahertz | Unit::Count => 1.0,
    }
}

/// Quantises `value` to steps of `1 / scale` (saturating at the `i64` range).
pub fn quantise(value: f64, scale: f64) -> i64 {
    (value * scale).round() as i64
}

/// Inverse of [`quantise`].
pub fn dequantise(q: i64, scale: f64) -> f64 {
    q as f64 / scale
}

/// Which rollups a series gets: `(hourly, per_minute)`.
///
/// Every meter metric and every power source is rolled up hourly; power also per minute.
/// CPU metrics are rolled up for their aggregate channels only (`all`, `all/<x>`, `mean`).
pub fn rollup_kind(metric: Metric, channel: &str) -> (bool, bool) {
    match metric {
        Metric::Power => (true, true),
        Metric::Voltage
        | Metric::Current
        | Metric::PowerFactor
        | Metric::Frequency
        | Metric::EnergyCounter
        | Metric::EnergyTotal
        | Metric::GpuUtilisation
        | Metric::GpuClock
        | Metric::PState
        | Metric::GpuProcesses
        | Metric::Rejected => (true, false),
        Metric::CpuBusy => (channel == channel::ALL, false),
        Metric::CoreFrequency => (channel == channel::MEAN, false),
        Metric::CpuTime | Metric::IdleResidency | Metric::PackageResidency => {
            (channel::all_part(channel).is_some(), false)
        }
        // Accounted per service (`crate::services`), never a series of its own.
        Metric::CgroupCpu => (false, false),
    }
}

/// Whether a series' raw samples are detail, kept for the detail retention in their own
/// table: per-core CPU series ([`is_per_core`]) and package C-state residency (its hourly
/// rollups are kept forever).
pub fn is_detail(metric: Metric, channel: &str) -> bool {
    is_per_core(metric, channel) || metric == Metric::PackageResidency
}

/// Whether a series is per-core CPU detail: a CPU metric on channel `cpuN` or `cpuN/<x>`
/// (the CPU collector's per-CPU channels). Aggregate channels (`all`, `all/<x>`, `mean`),
/// meters and power sources are not.
pub fn is_per_core(metric: Metric, channel: &str) -> bool {
    let cpu_metric = matches!(
        metric,
        Metric::CpuBusy | Metric::CpuTime | Metric::CoreFrequency | Metric::IdleResidency
    );
    cpu_metric && channel::is_per_core(channel)
}

/// One stored series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub id: i64,
    pub host: String,
    pub source: SourceId,
    pub metric: Metric,
    pub channel: String,
    pub unit: Unit,
    /// The series' own sample spacing, ms, as the writer last judged pairs by it; `None`
    /// until known.
    pub spacing_ms: Option<i64>,
}

/// One hour of one series, as stored.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HourRollup {
    /// Start of the hour, ms.
    pub hour_ms: i64,
    pub n: u64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Energy in the hour, Wh (power series only).
    pub energy_wh: Option<f64>,
    /// The ms of the hour `energy_wh` covers (power series only; `None` before it was
    /// stored).
    pub covered_ms: Option<i64>,
    /// True when energy and covered time were estimated (rollups from before covered time
    /// was stored, whose raw samples are gone).
    pub approximate: bool,
    /// Per-minute rollups (power series only), in minute order.
    pub minutes: Vec<MinuteRollup>,
}

/// One minute of a power series. Mean, min and max are quantised to the metric's
/// resolution, energy to 0.001 Wh.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MinuteRollup {
    /// Minute of the hour, 0..60.
    pub minute: u8,
    pub n: u64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Wh.
    pub energy_wh: f64,
    /// The ms of the minute `energy_wh` covers (`None` in minutes stored before it was).
    pub covered_ms: Option<i64>,
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

/// What a database file is, by its `application_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Identity {
    Wattson,
    /// No application id and nothing in it: a file SQLite just created.
    New,
}

/// The file's identity: wattson's, or (when `new_allowed`) new and empty; anything else is
/// [`StoreError::NotWattson`].
fn identify(conn: &Connection, path: &Path, new_allowed: bool) -> Result<Identity, StoreError> {
    let sql = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let application_id: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(sql)?;
    if application_id == APPLICATION_ID {
        return Ok(Identity::Wattson);
    }
    if new_allowed && application_id == 0 {
        let objects: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
            .map_err(sql)?;
        if objects == 0 {
            return Ok(Identity::New);
        }
    }
    Err(StoreError::NotWattson {
        path: path.to_owned(),
        application_id,
    })
}

impl Store {
    /// Opens (creating and migrating if needed) the database at `path` for writing.
    pub fn open(path: &Path, options: &StoreOptions) -> Result<Store, StoreError> {
        let mut conn = Connection::open(path).map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
        let sql = |source| StoreError::Sqlite {
            path: path.to_owned(),
            source,
        };
        conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
        // SQLite opens a file it may not write read-only without a word; every flush would
        // then fail.
        if conn.is_readonly(rusqlite::MAIN_DB).map_err(sql)? {
            return Err(StoreError::ReadOnly {
                path: path.to_owned(),
                detail: file::read_only_detail(path),
            });
        }
        if identify(&conn, path, true)? == Identity::New {
            // A new file: 16 KiB pages waste less of each page on raw chunks (about 1.5
            // KiB each) than the default 4 KiB. Must come before anything is written.
            conn.pragma_update(None, "page_size", PAGE_SIZE)
                .map_err(sql)?;
            conn.pragma_update(None, "application_id", APPLICATION_ID)
                .map_err(sql)?;
        }
        check_version(&conn, path, false)?;
        let _mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(sql)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sql)?;
        // A log sized to the file system, so that it can never fill a small disk.
        wal::apply(&conn, path).map_err(sql)?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(sql)?;
        MIGRATIONS
            .to_latest(&mut conn)
            .map_err(|source| StoreError::Migrate {
                path: path.to_owned(),
                source,
            })?;
        let identity = file::identity(path);
        let companions = ["-wal", "-shm"]
            .into_iter()
            .filter_map(|suffix| {
                let mut name = path.as_os_str().to_owned();
                name.push(suffix);
                let p = PathBuf::from(name);
                file::identity(&p).map(|id| (p, id))
            })
            .collect();
        let store = Store {
            conn,
            path: path.to_owned(),
            identity,
            companions,
        };
        backfill::covered_time(&store, options)?;
        Ok(store)
    }

    /// Opens an existing database for reading, alongside a daemon that writes it.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
        let sql = |source| StoreError::Sqlite {
            path: path.to_owned(),
            source,
        };
        conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
        identify(&conn, path, false)?;
        check_version(&conn, path, true)?;
        Ok(Store {
            conn,
            path: path.to_owned(),
            identity: None,
            companions: Vec::new(),
        })
    }

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

    /// The series `(host, source, metric, channel)`, created if new.
    pub fn ensure_series(
        &self,
        host: &str,
        source: &SourceId,
        metric: Metric,
        channel: &str,
    ) -> Result<Series, StoreError> {
        let unit = metric.unit();
        let (hourly, minute) = rollup_kind(metric, channel);
        self.conn
            .prepare_cached(
                "INSERT INTO series (host, source, metric, channel, unit, rollup, minute_rollup)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    host,
                    source.to_string(),
                    metric.as_str(),
                    channel,
                    unit.symbol(),
                    hourly,
                    minute
                ])
            })
            .map_err(|e| self.sql(e))?;
        let id: i64 = self
            .conn
            .prepare_cached(
                "SELECT id FROM series
                 WHERE host = ?1 AND source = ?2 AND metric = ?3 AND channel = ?4 AND unit = ?5",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![
                        host,
                        source.to_string(),
                        metric.as_str(),
                        channel,
                        unit.symbol()
                    ],
                    |r| r.get(0),
                )
            })
            .map_err(|e| self.sql(e))?;
        let spacing_ms: Option<i64> = self
            .conn
            .prepare_cached("SELECT spacing_ms FROM series WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |r| r.get(0)))
            .map_err(|e| self.sql(e))?;
        Ok(Series {
            id,
            host: host.to_owned(),
            source: source.clone(),
            metric,
            channel: channel.to_owned(),
            unit,
            spacing_ms,
        })
    }

    /// Records the spacing the writer judges the series' pairs by, ms.
    pub fn set_spacing(&self, series_id: i64, spacing_ms: i64) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("UPDATE series SET spacing_ms = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![series_id, spacing_ms.max(1)]))
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Writes (inserts or replaces) one hour rollup of series `series`.
    pub fn put_hour_rollup(&self, series: &Series, hour: &HourRollup) -> Result<(), StoreError> {
        let scale = resolution(series.unit);
        let minutes = (!hour.minutes.is_empty()).then(|| encode_minutes(&hour.minutes, scale));
        let (mean, min, max) = if hour.n == 0 {
            (0.0, 0.0, 0.0)
        } else {
            (hour.mean, hour.min, hour.max)
        };
        self.conn
            .prepare_cached(
                "INSERT INTO rollup_hour
                   (series_id, hour_ms, n, mean, min, max, energy_wh, minutes, covered_ms, approximate)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT (series_id, hour_ms) DO UPDATE SET n = excluded.n,
                   mean = excluded.mean, min = excluded.min, max = excluded.max,
                   energy_wh = excluded.energy_wh, minutes = excluded.minutes,
                   covered_ms = excluded.covered_ms, approximate = excluded.approximate",
            )
            .and_then(|mut s| {
                s.execute(params![
                    series.id,
                    hour.hour_ms,
                    hour.n as i64,
                    mean,
                    min,
                    max,
                    hour.energy_wh,
                    minutes,
                    hour.covered_ms.map(|c| c.clamp(0, HOUR_MS)),
                    hour.approximate
                ])
            })
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// The stored hour rollup of `series` at `hour_ms`, if any.
    pub fn hour_rollup(
        &self,
        series: &Series,
        hour_ms: i64,
    ) -> Result<Option<HourRollup>, StoreError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT n, mean, min, max, energy_wh, minutes, covered_ms, approximate
                 FROM rollup_hour WHERE series_id = ?1 AND hour_ms = ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![series.id, hour_ms], |r| {
                    Ok((
                        (
                            r.get::<_, i64>(0)?,
                            r.get::<_, f64>(1)?,
                            r.get::<_, f64>(2)?,
                            r.get::<_, f64>(3)?,
                        ),
                        r.get::<_, Option<f64>>(4)?,
                        r.get::<_, Option<Vec<u8>>>(5)?,
                        r.get::<_, Option<i64>>(6)?,
                        r.get::<_, bool>(7)?,
                    ))
                })
                .optional()
            })
            .map_err(|e| self.sql(e))?;
        let Some(((n, mean, min, max), energy_wh, minutes, covered_ms, approximate)) = row else {
            return Ok(None);
        };
        let minutes = match minutes {
            Some(blob) => decode_minutes(&blob, resolution(series.unit)).map_err(|source| {
                StoreError::Corrupt {
                    path: self.path.clone(),
                    series_id: series.id,
                    start_ms: hour_ms,
                    source,
                }
            })?,
            None => Vec::new(),
        };
        Ok(Some(HourRollup {
            hour_ms,
            n: n.max(0) as u64,
            mean,
            min,
            max,
            energy_wh,
            covered_ms,
            approximate,
            minutes,
        }))
    }

    fn sql(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn corrupt(&self, series_id: i64, start_ms: i64, source: codec::DecodeError) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            series_id,
            start_ms,
            source,
        }
    }
}

fn check_version(conn: &Connection, path: &Path, read_only: bool) -> Result<(), StoreError> {
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|source| StoreError::Sqlite {
            path: path.to_owned(),
            source,
        })?;
    let supported = MIGRATION_LIST.len() as i64;
    if found > supported {
        return Err(StoreError::SchemaTooNew {
            path: path.to_owned(),
            found,
            supported,
        });
    }
    if read_only && found < supported {
        return Err(StoreError::SchemaTooOld {
            path: path.to_owned(),
            found,
            supported,
        });
    }
    Ok(())
}

const MINUTE_ORDERS: [codec::Order; 7] = [codec::Order::Delta; 7];

/// Packs minute rollups: minute index, n, mean, min, max (at `scale`), energy (mWh), covered
/// time (ms).
fn encode_minutes(minutes: &[MinuteRollup], scale: f64) -> Vec<u8> {
    let col = |f: &dyn Fn(&MinuteRollup) -> i64| minutes.iter().map(f).collect::<Vec<i64>>();
    let index = col(&|m| i64::from(m.minute));
    let n = col(&|m| m.n as i64);
    let mean = col(&|m| quantise(m.mean, scale));
    let min = col(&|m| quantise(m.min, scale));
    let max = col(&|m| quantise(m.max, scale));
    let energy = col(&|m| quantise(m.energy_wh, 1000.0));
    // -1: not known (a minute stored before covered time was).
    let covered = col(&|m| m.covered_ms.unwrap_or(-1));
    codec::encode(&[
        (&index, codec::Order::Delta),
        (&n, codec::Order::Delta),
        (&mean, codec::Order::Delta),
        (&min, codec::Order::Delta),
        (&max, codec::Order::Delta),
        (&energy, codec::Order::Delta),
        (&covered, codec::Order::Delta),
    ])
}

/// Unpacks minute rollups; blobs written before covered time was stored have six columns.
fn decode_minutes(blob: &[u8], scale: f64) -> Result<Vec<MinuteRollup>, codec::DecodeError> {
    let (cols, with_covered) = match codec::decode(blob, &MINUTE_ORDERS) {
        Ok(c) => (c, true),
        Err(e) => match codec::decode(blob, &MINUTE_ORDERS[..6]) {
            Ok(c) => (c, false),
            Err(_) => return Err(e),
        },
    };
    let (index, n, mean, min, max, energy) =
        (&cols[0], &cols[1], &cols[2], &cols[3], &cols[4], &cols[5]);
    Ok((0..index.len())
        .map(|i| MinuteRollup {
            minute: index[i].clamp(0, 59) as u8,
            n: n[i].max(0) as u64,
            mean: dequantise(mean[i], scale),
            min: dequantise(min[i], scale),
            max: dequantise(max[i], scale),
            energy_wh: dequantise(energy[i], 1000.0),
            covered_ms: with_covered
                .then(|| cols[6][i])
                .filter(|c| *c >= 0)
                .map(|c| c.min(MINUTE_MS)),
        })
        .collect())
}

/// An error and its causes on one line (SQLite's own reason, such as "database or disk is
/// full", is the cause of the store's error).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
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
