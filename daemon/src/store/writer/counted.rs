//! Energy over a recorded gap from the device's own counter: when a source's counter
//! reading after a gap is stored, the counter's movement across the gap is settled into the
//! gap's row (`counted_wh`, `counted_step_wh`, `counted_note`), once. Where the counter
//! cannot say (it went back: a reset or a wrap; it moved more than any plausible load; no
//! counter reading at the gap's edges), the gap stays uncounted and the note says why.
//!
//! The counter readings taken are the last at the gap's start (the source's last reading
//! before it, whose counter and power are stamped alike) and the first at least
//! [`SETTLE_MS`] after its end: a meter's first answer after a restart may be a reply left
//! on the line from before the stop, with the counter as it was then. The power sampled
//! between the first reading after the gap and that one is taken off, so the counted energy
//! fills exactly the time the power integral leaves out. Units: Wh, UTC ms.

use std::collections::HashSet;

use rusqlite::params;
use wattson_collectors::SourceId;
use wattson_collectors::counter::{Movement, movement};
use wattson_collectors::plausibility::MAX_POWER_W;

use super::super::{Series, StoreError, dequantise};
use super::Writer;

/// A counter reading this far before a gap's start still stands for it, ms: the gap starts
/// at the source's last reading, whose counter and power are stamped alike, so this only
/// absorbs rounding.
const EDGE_MS: i64 = 2_000;

/// The first counter reading after a gap may come this long after its end (a daemon that
/// took a while to open its meter), ms: no reading of the source lies between them.
const AFTER_MS: i64 = 5 * 60_000;

/// How long after a gap's end the counter reading it is settled by comes, at least, ms.
pub(super) const SETTLE_MS: i64 = 5_000;

/// How far back the counter's resolution is looked for, ms.
const STEP_LOOKBACK_MS: i64 = 10 * 60_000;

/// What the counter says of one gap.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Counted {
    pub wh: Option<f64>,
    pub step_wh: Option<f64>,
    pub note: String,
}

/// The counter's movement from `before` to `after` (`(ts, Wh)`), less `sampled` Wh (what
/// the integral has of that time), with the counter's `step`: counted when it went up by no
/// more than any plausible load could use in that time, else not counted, with why.
pub(super) fn counted(
    before: (i64, f64),
    after: (i64, f64),
    sampled: f64,
    step: Option<f64>,
) -> Counted {
    let ms = (after.0 - before.0).max(0);
    let bound = MAX_POWER_W * ms as f64 / 3_600_000.0 + step.unwrap_or(0.0);
    if after.1 < before.1 {
        return Counted {
            wh: None,
            step_wh: step,
            note: format!(
                "not counted: the meter's counter went back over the gap ({:.0} to {:.0} Wh: \
                 reset or wrapped), so its energy is not known",
                before.1, after.1
            ),
        };
    }
    match movement(before.1, (after.1 - sampled).max(before.1), None) {
        Movement::Up(wh) if wh <= bound => Counted {
            wh: Some(wh),
            step_wh: step,
            note: "counted by the meter, not sampled".to_owned(),
        },
        Movement::Up(wh) => Counted {
            wh: None,
            step_wh: step,
            note: format!(
                "not counted: the meter's counter moved by {wh:.0} Wh over the gap, more than \
                 any plausible load ({MAX_POWER_W:.0} W) uses in that time"
            ),
        },
        Movement::Wrapped(_) | Movement::Down => Counted {
            wh: None,
            step_wh: step,
            note: format!(
                "not counted: the meter's counter went back over the gap ({:.0} to {:.0} Wh: \
                 reset or wrapped), so its energy is not known",
                before.1, after.1
            ),
        },
    }
}

/// The smallest step up between consecutive readings: the counter's resolution as its
/// readings show it.
fn smallest_step(points: &[(i64, f64)]) -> Option<f64> {
    points
        .windows(2)
        .map(|w| w[1].1 - w[0].1)
        .filter(|d| *d > 1e-9)
        .min_by(f64::total_cmp)
}

impl Writer {
    /// Counter series (their state index) that took a sample in this flush, by host and
    /// source.
    pub(super) fn settle_counted_gaps(
        &mut self,
        counters: &HashSet<usize>,
    ) -> Result<(), StoreError> {
        for &i in counters {
            let series = self.states[i].series.clone();
            let key = (series.host.clone(), series.source.clone());
            if self.counted_settled.contains(&key) {
                continue;
            }
            let newest = self.states[i].newest_ms.unwrap_or(i64::MIN);
            let open = self.unsettled_gaps(&series.host, &series.source, newest - SETTLE_MS)?;
            if open.is_empty()
                && self
                    .unsettled_gaps(&series.host, &series.source, newest)?
                    .is_empty()
            {
                self.counted_settled.insert(key);
            }
            for (id, start, end) in open {
                let points = self.points(i, start - STEP_LOOKBACK_MS, end + AFTER_MS + 1)?;
                let before = points
                    .iter()
                    .rev()
                    .find(|p| p.0 <= start)
                    .filter(|p| start - p.0 <= EDGE_MS);
                let after = points
                    .iter()
                    .find(|p| p.0 >= end + SETTLE_MS)
                    .filter(|p| p.0 - end <= AFTER_MS);
                let step = smallest_step(&points);
                // What was sampled from the first reading after the gap to the one it is
                // settled by: the meter counted it, and the integral has it already.
                let sampled = match after {
                    Some(&(t, _)) => self.sampled_wh(&series.host, &series.source, end, t)?,
                    None => 0.0,
                };
                let c = match (before, after) {
                    (Some(&b), Some(&a)) => counted(b, a, sampled, step),
                    _ => Counted {
                        wh: None,
                        step_wh: step,
                        note: "not counted: no counter reading at the gap's edges".to_owned(),
                    },
                };
                self.store
                    .conn
                    .prepare_cached(
                        "UPDATE gap SET counted_wh = ?2, counted_step_wh = ?3, counted_note = ?4
                          WHERE id = ?1",
                    )
                    .and_then(|mut s| s.execute(params![id, c.wh, c.step_wh, c.note]))
                    .map_err(|e| self.store.sql(e))?;
            }
        }
        Ok(())
    }

    /// Recorded gaps of `host`'s `source` not yet settled that end by `until_ms`.
    fn unsettled_gaps(
        &self,
        host: &str,
        source: &SourceId,
        until_ms: i64,
    ) -> Result<Vec<(i64, i64, i64)>, StoreError> {
        self.store
            .conn
            .prepare_cached(
                "SELECT id, start_ms, end_ms FROM gap
                  WHERE host = ?1 AND source = ?2 AND counted_note IS NULL AND end_ms <= ?3",
            )
            .and_then(|mut s| {
                s.query_map(params![host, source.to_string(), until_ms], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| self.store.sql(e))
    }

    /// The power integral of `host`'s `source` from its first reading at or after `from` to
    /// `to`, Wh (trapezoids between consecutive readings, as the writer integrates a
    /// meter's).
    fn sampled_wh(
        &self,
        host: &str,
        source: &SourceId,
        from: i64,
        to: i64,
    ) -> Result<f64, StoreError> {
        let Some(&i) = self
            .index
            .get(host)
            .and_then(|s| s.get(source))
            .and_then(|c| c.get(""))
            .and_then(|m| m.get(&wattson_collectors::Metric::Power))
        else {
            return Ok(0.0);
        };
        let points = self.points(i, from, to + 1)?;
        Ok(points
            .windows(2)
            .map(|w| f64::midpoint(w[0].1, w[1].1) * (w[1].0 - w[0].0) as f64 / 3_600_000.0)
            .sum())
    }

    /// The series' readings in `[from, to)`: the stored ones and those of its open chunk
    /// not yet written.
    fn points(&self, i: usize, from: i64, to: i64) -> Result<Vec<(i64, f64)>, StoreError> {
        let state = &self.states[i];
        let series: &Series = &state.series;
        let mut points = self.store.raw_points(series, from, to)?;
        if let Some(open) = &state.open {
            points.extend(
                open.ts
                    .iter()
                    .zip(&open.q)
                    .filter(|(t, _)| (from..to).contains(*t))
                    .map(|(&t, &q)| (t, dequantise(q, state.scale))),
            );
        }
        points.sort_by_key(|p| p.0);
        points.dedup_by_key(|p| p.0);
        Ok(points)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_that_moved_up_counts_and_one_that_went_back_does_not() {
        let c = counted((0, 1000.0), (600_000, 1500.0), 0.0, Some(1.0));
        assert_eq!(c.wh, Some(500.0));
        assert_eq!(c.note, "counted by the meter, not sampled");
        // What the integral has of the time after the gap is taken off, never below 0.
        assert_eq!(
            counted((0, 1000.0), (600_000, 1500.0), 20.0, None).wh,
            Some(480.0)
        );
        assert_eq!(
            counted((0, 1000.0), (600_000, 1001.0), 3.0, None).wh,
            Some(0.0)
        );
        let reset = counted((0, 1000.0), (600_000, 3.0), 0.0, Some(1.0));
        assert_eq!(reset.wh, None);
        assert!(reset.note.contains("went back"), "{}", reset.note);
        // 10 minutes can hold at most 16 kW x 1/6 h = 2667 Wh (+ a step).
        let jump = counted((0, 0.0), (600_000, 5000.0), 0.0, Some(1.0));
        assert_eq!(jump.wh, None);
        assert!(jump.note.contains("more than"), "{}", jump.note);
        assert_eq!(
            smallest_step(&[(0, 1.0), (1, 1.0), (2, 3.0), (3, 4.0)]),
            Some(1.0)
        );
    }
}
