//! The wall source's energy between the store's newest figures and the newest sample, so
//! the counters the outputs serve (`/metrics`' `energy_joules_total`, the MQTT state's
//! `energy`) move with every sample, not only when the store flushes: Prometheus'
//! `rate()` over any window of two scrapes or more reads the meter's watts.
//!
//! The sampler feeds every wall power sample; the trail integrates them as the store does
//! (trapezoids between consecutive samples, a pair longer than
//! [`crate::store::integrate::max_pair_ms`] of the spacing before it is a gap; for a source
//! whose readings are held, each reading standing until the next, at most `max_hold`) and keeps
//! the running integral at each sample for as long as the store may take to flush them
//! ([`EnergyTrail::keep_for`]: twice the flush interval and a minute). The ledger's figures
//! say up to which sample they count (`energy_ts_ms`); [`EnergyTrail::since`] is what came
//! after it. A store that falls further behind (a failing disk) leaves the counter short
//! until it catches up, never counted twice.
//!
//! Units: UTC ms, W, Wh.

use std::collections::VecDeque;

/// How long the trail keeps its points unless told ([`EnergyTrail::keep_for`]): the
/// default flush interval (10 s) twice, and a minute.
const DEFAULT_KEEP_MS: i64 = 80_000;

/// At most this many points (16 bytes each): a 10 Hz meter for 7 minutes.
const MAX_POINTS: usize = 4096;

/// The running integral of one power series.
#[derive(Debug, Default)]
pub struct EnergyTrail {
    /// `(ts_ms, Wh integrated up to that sample)`, oldest first.
    points: VecDeque<(i64, f64)>,
    /// The previous sample: time and watts.
    prev: Option<(i64, f64)>,
    /// The previous sample interval, ms.
    spacing_ms: Option<i64>,
    /// How long points are kept, ms (`None`: [`DEFAULT_KEEP_MS`]).
    keep_ms: Option<i64>,
    /// `max_hold`, ms, where each reading stands until the next (`hold`).
    hold_ms: Option<i64>,
}

impl EnergyTrail {
    /// Keep points for as long as a store flushing every `flush_interval` may take to
    /// count them: twice the interval, and a minute.
    pub fn keep_for(&mut self, flush_interval: std::time::Duration) {
        self.keep_ms = Some(2 * flush_interval.as_millis() as i64 + 60_000);
    }

    /// Each reading stands until the next, at most `max_hold_ms` (`Some`), or readings are
    /// sampled (`None`, the default).
    pub fn hold_for(&mut self, max_hold_ms: Option<i64>) {
        self.hold_ms = max_hold_ms;
    }

    /// Add one sample of the series (in time order; an older one is ignored).
    pub fn observe(&mut self, ts_ms: i64, watts: f64) {
        if !watts.is_finite() {
            return;
        }
        let cum = self.points.back().map_or(0.0, |p| p.1);
        let step = match self.prev {
            Some((t0, _)) if ts_ms <= t0 => return,
            Some((t0, w0)) if self.hold_ms.is_some() => {
                let max = self.hold_ms.unwrap_or(i64::MAX);
                w0 * (ts_ms - t0).min(max) as f64 / 3_600_000.0
            }
            Some((t0, w0)) => {
                let dt = ts_ms - t0;
                let bridged = self
                    .spacing_ms
                    .is_none_or(|s| dt <= crate::store::integrate::max_pair_ms(s));
                self.spacing_ms = Some(dt);
                if bridged {
                    f64::midpoint(w0, watts) * dt as f64 / 3_600_000.0
                } else {
                    0.0
                }
            }
            None => 0.0,
        };
        self.prev = Some((ts_ms, watts));
        self.points.push_back((ts_ms, cum + step));
        while self.points.len() > MAX_POINTS
            || self
                .points
                .front()
                .is_some_and(|p| p.0 < ts_ms - self.keep_ms.unwrap_or(DEFAULT_KEEP_MS))
        {
            self.points.pop_front();
        }
    }

    /// Wh integrated after the sample at `ts_ms` up to the newest one, and the newest
    /// sample's time. With no stored sample yet (`None`), or one from before the trail
    /// began (an earlier run: the daemon's own downtime is a gap, so the store adds
    /// nothing across it), all the trail integrated. `None` when `ts_ms` is within the
    /// trail but not one of its samples, so nothing is added that cannot be vouched for.
    pub fn since(&self, ts_ms: Option<i64>) -> Option<(f64, i64)> {
        let (newest_ms, newest) = *self.points.back()?;
        let (first_ms, first) = *self.points.front()?;
        let Some(ts_ms) = ts_ms.filter(|t| *t >= first_ms) else {
            return Some((newest - first, newest_ms));
        };
        if newest_ms <= ts_ms {
            return Some((0.0, newest_ms));
        }
        let i = self.points.partition_point(|p| p.0 <= ts_ms);
        // The point at or just before `ts_ms` must be in the trail.
        let at = self.points.get(i.checked_sub(1)?)?;
        if at.0 != ts_ms {
            return None;
        }
        Some((newest - at.1, newest_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_after_a_sample_is_what_the_trail_integrated_since() {
        let mut t = EnergyTrail::default();
        for i in 0..=10 {
            t.observe(1_000_000 + i * 1000, 36.0);
        }
        // 36 W for 4 s after the sample at +6 s: 0.04 Wh.
        let (wh, newest) = t.since(Some(1_006_000)).unwrap();
        assert!((wh - 0.04).abs() < 1e-12, "{wh}");
        assert_eq!(newest, 1_010_000);
        assert_eq!(t.since(Some(1_010_000)), Some((0.0, 1_010_000)));
        // Nothing stored yet, or stored before the trail began: all of it (10 s, 0.1 Wh).
        for stored in [None, Some(999_000)] {
            assert!((t.since(stored).unwrap().0 - 0.1).abs() < 1e-12);
        }
        assert_eq!(t.since(Some(1_006_500)), None, "not a sample's time");
        // A pause longer than the pair limit is a gap, as in the store.
        t.observe(1_060_000, 36.0);
        assert!((t.since(Some(1_010_000)).unwrap().0).abs() < 1e-12);
    }

    #[test]
    fn a_held_reading_counts_until_the_next_at_most_max_hold() {
        let mut t = EnergyTrail::default();
        t.hold_for(Some(30_000));
        t.observe(1_000_000, 3600.0);
        // 3600 W stands 10 s: 10 Wh; 360 W reported next is followed 50 s later by the
        // next report, and stands 30 s of them: 3 Wh.
        t.observe(1_010_000, 0.0);
        t.observe(1_020_000, 360.0);
        t.observe(1_070_000, 0.0);
        let (wh, _) = t.since(None).unwrap();
        assert!((wh - (10.0 + 360.0 * 30.0 / 3600.0)).abs() < 1e-9, "{wh}");
    }
}
