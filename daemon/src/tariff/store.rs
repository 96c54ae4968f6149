//! Price and carbon-intensity series in SQLite (`schema/0008-price-slots.sql`): writing an
//! import (replacing what it overlaps, in one transaction, with a count of what changed),
//! the live MQTT price (one open slot, closed when the next price arrives), and reading
//! the series back as [`SeriesSet`]s for the ledger.
//!
//! Units: UTC ms; values in currency per kWh or g CO2 per kWh.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use crate::store::{HOUR_MS, Store};
use crate::tariff::series::{SeriesSet, Slot, SlotSeries};

/// The series name of the live price (`[tariff] price_topic`).
pub const LIVE_SOURCE: &str = "mqtt";
/// The unit of carbon-intensity series.
pub const CARBON_UNIT: &str = "gCO2/kWh";

/// What a series holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Price,
    Carbon,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Price => "price",
            Kind::Carbon => "carbon",
        }
    }
}

/// One stored series and its extent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesInfo {
    pub source: String,
    pub kind: Kind,
    /// ISO 4217 code, or `gCO2/kWh`.
    pub unit: String,
    /// Prices the ledger's energy (else kept to compare against).
    pub applied: bool,
    pub format: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    pub updated_ms: i64,
    pub slots: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_ms: Option<i64>,
    /// The last slot's end (`None` while the last one is open: a live price).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_ms: Option<i64>,
    /// Time-weighted mean value over the slots, per kWh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
}

/// What an import changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ReplaceCount {
    /// Slots where nothing was stored before.
    pub added: usize,
    /// Slots that replaced stored ones with another price or other times.
    pub changed: usize,
    /// Slots stored already, exactly so.
    pub unchanged: usize,
    /// Stored slots deleted because new ones overlap them.
    pub replaced: usize,
}

/// A series as the importer names it.
#[derive(Debug, Clone)]
pub struct NewSeries<'a> {
    pub source: &'a str,
    pub kind: Kind,
    pub unit: &'a str,
    pub applied: bool,
    pub format: &'a str,
    pub origin: Option<&'a str>,
}

/// Why the price store refused.
#[derive(Debug, thiserror::Error)]
pub enum PriceStoreError {
    #[error(
        "series {name:?} already holds {have} {have_kind} values; this is {new} {new_kind}: \
         give another --name, or `wattson tariff remove {name}` first"
    )]
    Mismatch {
        name: String,
        have: String,
        have_kind: &'static str,
        new: String,
        new_kind: &'static str,
    },
    #[error("no series {0:?} in the database (`wattson tariff list` shows them)")]
    NoSuchSeries(String),
    #[error("the price store")]
    Sql(#[from] rusqlite::Error),
    #[error("its stored slots are not a series wattson wrote, so it is left out")]
    BadSlots(#[source] super::series::SlotError),
}

fn series_id(conn: &Connection, s: &NewSeries<'_>, now_ms: i64) -> Result<i64, PriceStoreError> {
    let found: Option<(i64, String, String)> = conn
        .query_row(
            "SELECT id, kind, unit FROM price_series WHERE source = ?1",
            [s.source],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    if let Some((id, kind, unit)) = found {
        if kind != s.kind.as_str() || unit != s.unit {
            return Err(PriceStoreError::Mismatch {
                name: s.source.to_owned(),
                have: unit,
                have_kind: if kind == "price" { "price" } else { "carbon" },
                new: s.unit.to_owned(),
                new_kind: s.kind.as_str(),
            });
        }
        conn.execute(
            "UPDATE price_series SET applied = ?2, format = ?3, origin = ?4, \
             updated_ms = ?5, revision = revision + 1 WHERE id = ?1",
            params![id, i64::from(s.applied), s.format, s.origin, now_ms],
        )?;
        return Ok(id);
    }
    conn.execute(
        "INSERT INTO price_series (source, kind, unit, applied, format, origin, updated_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            s.source,
            s.kind.as_str(),
            s.unit,
            i64::from(s.applied),
            s.format,
            s.origin,
            now_ms
        ],
    )?;
    Ok(conn.last_insert_rowid())
}

/// Stored slots of a series, by start: `(start, end or None, value)`.
fn stored(conn: &Connection, id: i64) -> Result<Vec<(i64, Option<i64>, f64)>, rusqlite::Error> {
    let mut st = conn.prepare_cached(
        "SELECT start_ms, end_ms, value FROM price_slot WHERE series_id = ?1 ORDER BY start_ms",
    )?;
    st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect()
}

/// Writes `slots` (sorted, none overlapping) into series `s`, replacing every stored slot
/// of that series they overlap, in one transaction: all or nothing.
pub fn replace(
    conn: &Connection,
    s: &NewSeries<'_>,
    slots: &[Slot],
    now_ms: i64,
) -> Result<ReplaceCount, PriceStoreError> {
    let tx = conn.unchecked_transaction()?;
    let id = series_id(&tx, s, now_ms)?;
    let old = stored(&tx, id)?;
    let mut count = ReplaceCount::default();
    let mut doomed: Vec<i64> = Vec::new();
    for n in slots {
        // Stored slots that start before this one ends, and end after it starts.
        let first = old.partition_point(|o| o.1.unwrap_or(i64::MAX) <= n.start_ms);
        let over: Vec<&(i64, Option<i64>, f64)> =
            old[first..].iter().take_while(|o| o.0 < n.end_ms).collect();
        match over.as_slice() {
            [] => count.added += 1,
            [o] if o.0 == n.start_ms && o.1 == Some(n.end_ms) && o.2 == n.value => {
                count.unchanged += 1;
                continue;
            }
            _ => count.changed += 1,
        }
        doomed.extend(over.iter().map(|o| o.0));
    }
    doomed.sort_unstable();
    doomed.dedup();
    count.replaced = doomed.len();
    {
        let mut del =
            tx.prepare_cached("DELETE FROM price_slot WHERE series_id = ?1 AND start_ms = ?2")?;
        for start in &doomed {
            del.execute(params![id, start])?;
        }
        let currency = (s.kind == Kind::Price).then_some(s.unit);
        let mut ins = tx.prepare_cached(
            "INSERT OR REPLACE INTO price_slot (series_id, start_ms, end_ms, value, currency) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        for n in slots {
            ins.execute(params![id, n.start_ms, n.end_ms, n.value, currency])?;
        }
    }
    tx.commit()?;
    Ok(count)
}

/// Records the price topic's `value` from `now_ms` on: the open slot before it (if another
/// price) is closed at `now_ms`, and this one holds until the next arrives. A price equal to
/// the open one changes nothing. Returns whether anything was written.
pub fn apply_topic_price(
    conn: &Connection,
    unit: &str,
    origin: &str,
    value: f64,
    now_ms: i64,
) -> Result<bool, PriceStoreError> {
    let tx = conn.unchecked_transaction()?;
    let spec = NewSeries {
        source: LIVE_SOURCE,
        kind: Kind::Price,
        unit,
        applied: true,
        format: "mqtt",
        origin: Some(origin),
    };
    let existing: Option<i64> = tx
        .query_row(
            "SELECT id FROM price_series WHERE source = ?1",
            [LIVE_SOURCE],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(id) = existing {
        let open: Option<(i64, f64)> = tx
            .query_row(
                "SELECT start_ms, value FROM price_slot WHERE series_id = ?1 AND end_ms IS NULL",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        if open.is_some_and(|(start, v)| v == value && start <= now_ms) {
            return Ok(false);
        }
    }
    let id = series_id(&tx, &spec, now_ms)?;
    // A clock that went back: what was stored for later goes.
    tx.execute(
        "DELETE FROM price_slot WHERE series_id = ?1 AND start_ms >= ?2",
        params![id, now_ms],
    )?;
    tx.execute(
        "UPDATE price_slot SET end_ms = ?2 WHERE series_id = ?1 AND end_ms IS NULL",
        params![id, now_ms],
    )?;
    tx.execute(
        "UPDATE price_slot SET end_ms = ?2 WHERE series_id = ?1 AND end_ms > ?2",
        params![id, now_ms],
    )?;
    tx.execute(
        "INSERT INTO price_slot (series_id, start_ms, end_ms, value, currency) \
         VALUES (?1, ?2, NULL, ?3, ?4)",
        params![id, now_ms, value, unit],
    )?;
    tx.commit()?;
    Ok(true)
}

/// Every series, by name.
pub fn list(store: &Store) -> Result<Vec<SeriesInfo>, PriceStoreError> {
    let conn = store.conn();
    let mut st = conn.prepare_cached(
        "SELECT s.source, s.kind, s.unit, s.applied, s.format, s.origin, s.updated_ms, \
                count(p.start_ms), min(p.start_ms), \
                CASE WHEN sum(p.end_ms IS NULL) > 0 THEN NULL ELSE max(p.end_ms) END, \
                sum(p.value * (p.end_ms - p.start_ms)) / sum(p.end_ms - p.start_ms) \
         FROM price_series s LEFT JOIN price_slot p ON p.series_id = s.id \
         GROUP BY s.id ORDER BY s.source",
    )?;
    let rows = st.query_map([], |r| {
        let kind: String = r.get(1)?;
        Ok(SeriesInfo {
            source: r.get(0)?,
            kind: if kind == "carbon" {
                Kind::Carbon
            } else {
                Kind::Price
            },
            unit: r.get(2)?,
            applied: r.get::<_, i64>(3)? != 0,
            format: r.get(4)?,
            origin: r.get(5)?,
            updated_ms: r.get(6)?,
            slots: r.get::<_, i64>(7)?.max(0) as u64,
            from_ms: r.get(8)?,
            to_ms: r.get(9)?,
            mean: r.get(10)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Deletes a series and its slots; `false` when there was none.
pub fn remove(conn: &Connection, source: &str) -> Result<bool, PriceStoreError> {
    Ok(conn.execute("DELETE FROM price_series WHERE source = ?1", [source])? > 0)
}

/// A cheap fingerprint of every series: changes whenever any slot does.
pub fn revision(store: &Store) -> Result<(i64, i64), PriceStoreError> {
    Ok(store
        .conn()
        .prepare_cached("SELECT count(*), coalesce(sum(revision), 0) FROM price_series")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?)
}

/// One series' slots; an open slot (a live price) holds until `now_ms` plus an hour, so
/// the hour now running is priced by it.
pub fn load(store: &Store, source: &str, now_ms: i64) -> Result<SlotSeries, PriceStoreError> {
    let conn = store.conn();
    let found: Option<(i64, String)> = conn
        .query_row(
            "SELECT id, unit FROM price_series WHERE source = ?1",
            [source],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((id, unit)) = found else {
        return Err(PriceStoreError::NoSuchSeries(source.to_owned()));
    };
    let slots = stored(conn, id)?
        .into_iter()
        .map(|(start_ms, end, value)| Slot {
            start_ms,
            end_ms: end.unwrap_or_else(|| now_ms.saturating_add(HOUR_MS).max(start_ms + 1)),
            value,
        })
        .collect();
    // Slots were checked when written; a series that fails now is left out, not fatal.
    SlotSeries::new(source, &unit, slots).map_err(PriceStoreError::BadSlots)
}

/// Logs `warning` the first time this process meets it: a report reads the series more than
/// once, and the daemon again whenever a series changes, but a series left out is said once.
pub fn warn_once(warning: String) {
    static SAID: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let Ok(mut said) = SAID.lock() else {
        tracing::warn!("{warning}");
        return;
    };
    if !said.contains(&warning) {
        tracing::warn!("{warning}");
        said.insert(warning);
    }
}

/// The series that price (or weigh) the ledger's energy, in precedence order: the live
/// price first, then imports, the newest first. Price series in another currency than
/// `unit` are left out (with a warning).
pub fn applied(
    store: &Store,
    kind: Kind,
    unit: &str,
    now_ms: i64,
) -> Result<SeriesSet, PriceStoreError> {
    let mut names: Vec<(String, String, String)> = {
        let mut st = store.conn().prepare_cached(
            "SELECT source, unit, format FROM price_series WHERE kind = ?1 AND applied = 1 \
             ORDER BY updated_ms DESC, source",
        )?;
        st.query_map([kind.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<Result<_, _>>()?
    };
    names.sort_by_key(|(_, _, format)| format != "mqtt");
    let mut out = Vec::new();
    for (source, u, _) in names {
        if kind == Kind::Price && u != unit {
            warn_once(format!(
                "price series {source:?} is in {u}, the tariff in {unit}: it is left out"
            ));
            continue;
        }
        match load(store, &source, now_ms) {
            Ok(s) => out.push(s),
            Err(e) => warn_once(format!(
                "price series {source:?}: {}",
                wattson_collectors::ErrorChain(&e)
            )),
        }
    }
    Ok(SeriesSet::new(out))
}
