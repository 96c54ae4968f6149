//! The writer's hour rollups: each sample added to its hour and minute, the energy of the
//! pair it ends integrated per minute, and hours other than the open one read and written
//! back.

use super::super::integrate::{Readings, Rule};
use super::super::quarantine::{Kind, Quarantined};
use super::super::rollup::HourAcc;
use super::super::{HOUR_MS, HourRollup, MINUTE_MS, Series, Store, StoreError, floor_to};
use super::Writer;

impl Writer {
    pub(super) fn roll_up(&mut self, i: usize, ts: i64, value: f64) -> Result<(), StoreError> {
        let state = &mut self.states[i];
        // (minute start, Wh, covered ms) of the pair that ends at this sample.
        let mut pieces: Vec<(i64, f64, i64)> = Vec::new();
        let mut overrun = None;
        if state.minutes
            && let Some((t0, v0)) = state.prev
            && ts > t0
        {
            let key = (state.series.host.clone(), state.series.source.clone());
            let gaps = self.gaps.get(&key).map_or(&[][..], Vec::as_slice);
            let rule = state.rule();
            if let Some(piece) = rule.piece((t0, v0), (ts, value), gaps) {
                let mut m = floor_to(piece.t0, MINUTE_MS);
                while m < piece.t1 {
                    let end = m + MINUTE_MS;
                    pieces.push((m, piece.wh_in(m, end), piece.ms_in(m, end)));
                    m = end;
                }
            }
            // A held reading (or a fleet host's mean) that stood longer than its limit ends
            // in a gap, so that what the coverage leaves out is listed.
            if rule.readings != Readings::Sampled {
                overrun = rule
                    .overrun(t0, ts, gaps)
                    .map(|span| (key, span, overrun_reason(rule, ts - t0)));
            }
            state.spacing.observe(ts - t0);
        }
        if let Some(((host, source), span, reason)) = overrun {
            self.insert_gap(&host, &source, span, &reason, None)?;
        }
        for (minute_ms, wh, ms) in pieces {
            self.with_hour(i, minute_ms, |h| h.integrate(minute_of(minute_ms), wh, ms))?;
        }
        let minutes = self.states[i].minutes;
        self.with_hour(i, ts, |h| {
            h.all.add(value);
            if minutes {
                h.minutes.entry(minute_of(ts)).or_default().add(value);
            }
        })?;
        let state = &mut self.states[i];
        if state.prev.is_none_or(|(t, _)| ts > t) {
            state.prev = Some((ts, value));
        }
        Ok(())
    }

    /// Applies `f` to the rollup of the hour holding `ts`: the open hour in memory, a
    /// later hour (which becomes the open one), or an earlier hour read and written back.
    fn with_hour(
        &mut self,
        i: usize,
        ts: i64,
        f: impl FnOnce(&mut HourAcc),
    ) -> Result<(), StoreError> {
        let hour_ms = floor_to(ts, HOUR_MS);
        let state = &mut self.states[i];
        match state.hour.as_mut() {
            Some(h) if h.hour_ms == hour_ms => {
                f(h);
                h.dirty = true;
            }
            Some(h) if h.hour_ms > hour_ms => {
                let stored =
                    stored_hour(&self.store, &mut self.quarantined, &state.series, hour_ms)?;
                let mut old = HourAcc::from_stored(hour_ms, stored);
                f(&mut old);
                self.store
                    .put_hour_rollup(&state.series, &old.to_rollup(state.minutes))?;
            }
            _ => {
                if let Some(h) = state.hour.take().filter(|h| h.dirty) {
                    self.store
                        .put_hour_rollup(&state.series, &h.to_rollup(state.minutes))?;
                }
                let stored =
                    stored_hour(&self.store, &mut self.quarantined, &state.series, hour_ms)?;
                let mut h = HourAcc::from_stored(hour_ms, stored);
                f(&mut h);
                h.dirty = true;
                state.hour = Some(h);
            }
        }
        Ok(())
    }
}

/// The stored rollup of `series` at `hour_ms`; one whose minutes cannot be decoded is set
/// aside (into `quarantined`) and the hour starts afresh.
fn stored_hour(
    store: &Store,
    quarantined: &mut Vec<Quarantined>,
    series: &Series,
    hour_ms: i64,
) -> Result<Option<HourRollup>, StoreError> {
    match store.hour_rollup(series, hour_ms) {
        Err(StoreError::Corrupt { source, .. }) => {
            quarantined.push(store.quarantine(Kind::RollupHour, series, hour_ms, &source)?);
            Ok(None)
        }
        other => other,
    }
}

/// Why a pair of `rule`'s readings `span_ms` apart ends in a gap.
fn overrun_reason(rule: Rule, span_ms: i64) -> String {
    let s = |ms: i64| format!("{:.0} s", ms as f64 / 1000.0);
    match rule.readings {
        Readings::Hold => format!(
            "no reading for {} (a reading stands at most max_hold, {})",
            s(span_ms),
            s(rule.max_ms)
        ),
        Readings::Mean | Readings::Sampled => format!(
            "no state for {} (longer than the {} a mean of its host covers)",
            s(span_ms),
            s(rule.max_ms)
        ),
    }
}

fn minute_of(ts: i64) -> u8 {
    (ts.rem_euclid(HOUR_MS) / MINUTE_MS) as u8
}
