//! The host's time away, as the kernel tells it: the `kernel_clock` rows (from when, the
//! boot's id and how long the host had slept since that boot) and what a gap was when the
//! host was away (`gap.away`: asleep, or off). See `schema/0022-host-asleep.sql`.

use rusqlite::{OptionalExtension as _, params};

use super::{Store, StoreError};

/// What the host was doing over a gap in its samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Away {
    /// Suspended (to RAM or to idle) or hibernated: the kernel's clocks say it slept.
    Asleep,
    /// Off, or restarting: another boot followed.
    Off,
}

impl Away {
    /// As stored in `gap.away`.
    pub fn as_str(self) -> &'static str {
        match self {
            Away::Asleep => "asleep",
            Away::Off => "off",
        }
    }

    /// From `gap.away`.
    pub fn from_stored(text: &str) -> Option<Away> {
        match text {
            "asleep" => Some(Away::Asleep),
            "off" => Some(Away::Off),
            _ => None,
        }
    }

    /// The mode the time away is, as the seed's table names it.
    pub fn mode(self) -> &'static str {
        match self {
            Away::Asleep => "standby",
            Away::Off => "off",
        }
    }
}

/// One `kernel_clock` row: from `since_ms`, the kernel of boot `boot_id` had slept
/// `slept_ms` since that boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelClockRow {
    pub since_ms: i64,
    pub boot_id: String,
    pub slept_ms: i64,
}

impl Store {
    /// The newest `kernel_clock` row of `host` from before `before_ms`, if any; one whose
    /// boot id is not a UUID or whose sleep is negative (not the daemon's writing) is none.
    pub fn kernel_clock(
        &self,
        host: &str,
        before_ms: i64,
    ) -> Result<Option<KernelClockRow>, StoreError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT since_ms, boot_id, slept_ms FROM kernel_clock
                 WHERE host = ?1 AND since_ms <= ?2 ORDER BY since_ms DESC LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row(params![host, before_ms], |r| {
                    Ok(KernelClockRow {
                        since_ms: r.get(0)?,
                        boot_id: r.get(1)?,
                        slept_ms: r.get(2)?,
                    })
                })
                .optional()
            })
            .map_err(|e| self.sql(e))?;
        Ok(
            row.filter(|r| {
                wattson_collectors::kernel_clock::is_uuid(&r.boot_id) && r.slept_ms >= 0
            }),
        )
    }

    /// Records how the kernel's clocks stand from `since_ms` for `host` (replacing a row of
    /// the same instant).
    pub fn record_kernel_clock(&self, host: &str, row: &KernelClockRow) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO kernel_clock (host, since_ms, boot_id, slept_ms)
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut s| s.execute(params![host, row.since_ms, row.boot_id, row.slept_ms]))
            .map(drop)
            .map_err(|e| self.sql(e))
    }
}
