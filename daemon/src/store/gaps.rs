//! Gaps as read back: a period without data from one source, what its meter's counter
//! said of it, and whether the host was away over it.

use rusqlite::params;
use wattson_collectors::SourceId;

use super::{Store, StoreError};

/// A period without data from one source.
#[derive(Debug, Clone, PartialEq)]
pub struct Gap {
    pub host: String,
    pub source: SourceId,
    /// UTC ms.
    pub start_ms: i64,
    /// UTC ms.
    pub end_ms: i64,
    pub reason: String,
    /// What the source's own counter says of the gap, once settled (the writer reads it at
    /// the first counter reading after the gap): `None` until then, and for sources with
    /// no counter.
    pub counted: Option<CountedGap>,
    /// Where the host was away over it (asleep, off), as the kernel told it.
    pub away: Option<super::Away>,
}

/// A gap's energy as the source's own counter moved over it.
#[derive(Debug, Clone, PartialEq)]
pub struct CountedGap {
    /// Wh; `None` where the counter cannot say (`note` says why).
    pub wh: Option<f64>,
    /// The counter's resolution as its readings show it, Wh.
    pub step_wh: Option<f64>,
    /// "counted by the meter, not sampled", or why it is not counted.
    pub note: String,
}

impl Store {
    /// Gaps of `host` that overlap `[from_ms, to_ms)`, by start.
    pub fn gaps(&self, host: &str, from_ms: i64, to_ms: i64) -> Result<Vec<Gap>, StoreError> {
        self.gaps_where(host, (from_ms, to_ms), false)
    }

    /// The spans `(start_ms, end_ms)` of `series`' own gaps overlapping `[from_ms, to_ms)`,
    /// by start: what integrating the series leaves out.
    pub fn gap_spans(
        &self,
        series: &super::Series,
        (from_ms, to_ms): (i64, i64),
    ) -> Result<Vec<(i64, i64)>, StoreError> {
        Ok(self
            .gaps(&series.host, from_ms, to_ms)?
            .into_iter()
            .filter(|g| g.source == series.source)
            .map(|g| (g.start_ms, g.end_ms))
            .collect())
    }

    /// The gaps of `host` overlapping `[from_ms, to_ms)` in which the host was away
    /// (asleep, off), by start: the few rows standby is measured from, read at every
    /// publish, so the others are left in the database.
    pub fn away_gaps(&self, host: &str, from_ms: i64, to_ms: i64) -> Result<Vec<Gap>, StoreError> {
        self.gaps_where(host, (from_ms, to_ms), true)
    }

    fn gaps_where(
        &self,
        host: &str,
        (from_ms, to_ms): (i64, i64),
        away_only: bool,
    ) -> Result<Vec<Gap>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT host, source, start_ms, end_ms, reason,
                        counted_wh, counted_step_wh, counted_note, away FROM gap
                 WHERE host = ?1 AND end_ms >= ?2 AND start_ms < ?3
                   AND (?4 = 0 OR away IS NOT NULL) ORDER BY start_ms",
            )
            .map_err(|e| self.sql(e))?;
        stmt.query_map(params![host, from_ms, to_ms, away_only], |r| {
            Ok(Gap {
                host: r.get(0)?,
                source: SourceId::from_text(&r.get::<_, String>(1)?),
                start_ms: r.get(2)?,
                end_ms: r.get(3)?,
                reason: r.get(4)?,
                counted: r.get::<_, Option<String>>(7)?.map(|note| CountedGap {
                    wh: r
                        .get::<_, Option<f64>>(5)
                        .ok()
                        .flatten()
                        .filter(|w| w.is_finite()),
                    step_wh: r
                        .get::<_, Option<f64>>(6)
                        .ok()
                        .flatten()
                        .filter(|w| w.is_finite()),
                    note,
                }),
                away: r
                    .get::<_, Option<String>>(8)?
                    .as_deref()
                    .and_then(super::Away::from_stored),
            })
        })
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| self.sql(e))
    }
}
