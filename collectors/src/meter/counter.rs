//! A device's own energy counter turned into a monotonic total that cannot invent energy:
//! shared by serial meters (PZEM, SDM, Watts Up, CSE/HLW), smart plugs and anything else
//! that reports a cumulative Wh figure.
//!
//! A counter moves by what the device measured, which cannot be more than its power over the
//! time between two readings. Every step is checked against that bound,
//! `allowed = min(1.5 x max(|P before|, |P now|) + 5 W, 16 kW) x elapsed + resolution`
//! (the slack covers load changes between two polls; without a power reading the plausible
//! maximum, 16 kW, is used), and:
//! - an increase within it is counted;
//! - a decrease is a reset (the device restarted at zero and has counted `raw` since) only
//!   when the new value is itself within the bound, and a wrap only when the distance across
//!   the wrap is; anything else is a glitch;
//! - a glitch (a step back, a jump up beyond the bound) adds nothing: it is rejected, and the
//!   counter's new value becomes the baseline, so a counter that really moved (it counted
//!   while we were not looking) is followed again from the next reading without its jump.
//!
//! Units: Wh, W, UTC ms.

use crate::plausibility::{MAX_POWER_W, Reason, Rejection, Rejections};

/// Slack on the measured power: load may rise between two readings.
const POWER_SLACK: f64 = 1.5;
/// Slack added to the measured power, W.
const POWER_FLOOR_W: f64 = 5.0;

/// What one reading did to the total.
#[derive(Debug, Clone, PartialEq)]
pub enum CounterStep {
    /// The first reading: the baseline, nothing counted.
    First,
    /// An increase of this many Wh, counted.
    Counted(f64),
    /// The device restarted at zero and counted this many Wh since.
    Reset(f64),
    /// The counter wrapped; this many Wh were counted across the wrap.
    Wrapped(f64),
    /// Nothing counted: the step was more than the power allows. The reading's value is the
    /// new baseline.
    Rejected(Rejection),
}

/// Turns a device's energy counter into a monotonic total, Wh, counted from the first
/// reading seen (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnergyTracker {
    wrap_wh: Option<f64>,
    resolution_wh: f64,
    /// Previous reading: UTC ms, counter Wh, power W.
    last: Option<(i64, f64, Option<f64>)>,
    total: f64,
}

impl EnergyTracker {
    /// `wrap_wh`: where the counter rolls over to zero, if known; `resolution_wh`: its step.
    pub fn new(wrap_wh: Option<f64>, resolution_wh: f64) -> Self {
        EnergyTracker {
            wrap_wh,
            resolution_wh: resolution_wh.max(0.0),
            last: None,
            total: 0.0,
        }
    }

    /// The most the counter may move between the previous reading and one at `ts_ms` with
    /// power `power_w`, Wh.
    pub fn allowed_wh(&self, ts_ms: i64, power_w: Option<f64>) -> f64 {
        let Some((t0, _, p0)) = self.last else {
            return self.resolution_wh;
        };
        let measured = match (p0, power_w) {
            (Some(a), Some(b)) => Some(a.abs().max(b.abs())),
            (a, b) => a.or(b).map(f64::abs),
        };
        let watts = measured.map_or(MAX_POWER_W, |w| {
            (POWER_SLACK * w + POWER_FLOOR_W).min(MAX_POWER_W)
        });
        let hours = (ts_ms - t0).max(0) as f64 / 3_600_000.0;
        watts * hours + self.resolution_wh
    }

    /// Feed the counter (Wh) read at `ts_ms` with power `power_w`.
    pub fn update(&mut self, ts_ms: i64, raw_wh: f64, power_w: Option<f64>) -> CounterStep {
        if !raw_wh.is_finite() || raw_wh < 0.0 {
            return CounterStep::Rejected(Rejection::new(
                Reason::EnergyCounter,
                format!("energy counter {raw_wh} Wh"),
            ));
        }
        let Some((_, last, _)) = self.last else {
            self.last = Some((ts_ms, raw_wh, power_w));
            return CounterStep::First;
        };
        let allowed = self.allowed_wh(ts_ms, power_w);
        let step = if raw_wh >= last {
            let inc = raw_wh - last;
            if inc <= allowed {
                CounterStep::Counted(inc)
            } else {
                CounterStep::Rejected(Rejection::new(
                    Reason::EnergyCounter,
                    format!(
                        "energy counter jumped {inc:.3} Wh ({last} -> {raw_wh} Wh); the power \
                         allows {allowed:.3} Wh"
                    ),
                ))
            }
        } else {
            let across_wrap = self.wrap_wh.map(|w| (w - last) + raw_wh);
            match across_wrap {
                Some(d) if d >= 0.0 && d <= allowed => CounterStep::Wrapped(d),
                _ if raw_wh <= allowed => CounterStep::Reset(raw_wh),
                _ => CounterStep::Rejected(Rejection::new(
                    Reason::EnergyCounter,
                    format!(
                        "energy counter stepped back from {last} to {raw_wh} Wh: not a reset \
                         (the new value is more than the {allowed:.3} Wh the power allows)"
                    ),
                )),
            }
        };
        if let CounterStep::Counted(d) | CounterStep::Reset(d) | CounterStep::Wrapped(d) = step {
            self.total += d;
        }
        self.last = Some((ts_ms, raw_wh, power_w));
        step
    }

    /// The total so far, Wh.
    pub fn total_wh(&self) -> f64 {
        self.total
    }
}

/// The energy counters of the meters on one line, by address, each with the steps it
/// rejected: the collector's half of the plausibility filter (the session checks each
/// reading alone; this checks a counter against the time since the previous reading).
#[derive(Debug, Clone, Default)]
pub struct EnergyBook {
    entries: Vec<(u8, EnergyTracker, Rejections)>,
}

impl EnergyBook {
    /// A tracker per address, for counters that wrap at `wrap_wh` and step by
    /// `resolution_wh`.
    pub fn new(
        addresses: impl IntoIterator<Item = u8>,
        wrap_wh: Option<f64>,
        resolution_wh: f64,
    ) -> Self {
        EnergyBook {
            entries: addresses
                .into_iter()
                .map(|a| {
                    (
                        a,
                        EnergyTracker::new(wrap_wh, resolution_wh),
                        Rejections::default(),
                    )
                })
                .collect(),
        }
    }

    /// Follows `address`'s counter, `raw_wh` read at `ts_ms` with power `power_w`: the
    /// total so far, Wh (`None` for an address not in the book). `Err` when the step is more
    /// than the power allows: the reading is then dropped, and the rejection counted.
    pub fn track(
        &mut self,
        address: u8,
        ts_ms: i64,
        raw_wh: f64,
        power_w: Option<f64>,
    ) -> Result<Option<f64>, Rejection> {
        let Some((_, tracker, rejected)) = self.entries.iter_mut().find(|(a, _, _)| *a == address)
        else {
            return Ok(None);
        };
        match tracker.update(ts_ms, raw_wh, power_w) {
            CounterStep::Rejected(why) => {
                rejected.record(Reason::EnergyCounter);
                Err(why)
            }
            _ => Ok(Some(tracker.total_wh())),
        }
    }

    /// The counter steps `address`'s meter rejected.
    pub fn rejected(&self, address: u8) -> Option<&Rejections> {
        self.entries
            .iter()
            .find(|(a, _, _)| *a == address)
            .map(|(_, _, r)| r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1000;

    #[test]
    fn counts_within_the_power_and_survives_a_reset() {
        let mut t = EnergyTracker::new(None, 1.0);
        assert_eq!(t.update(0, 500.0, Some(50.0)), CounterStep::First);
        // 50 W for 72 s is 1 Wh.
        assert_eq!(
            t.update(72 * S, 501.0, Some(50.0)),
            CounterStep::Counted(1.0)
        );
        // Reset (0x42 or power loss): back at zero, and it has counted 1 Wh since.
        assert_eq!(t.update(144 * S, 1.0, Some(50.0)), CounterStep::Reset(1.0));
        assert_eq!(t.total_wh(), 2.0);
    }

    #[test]
    fn a_wrap_counts_across_the_top() {
        let mut t = EnergyTracker::new(Some(10_000_000.0), 1.0);
        t.update(0, 9_999_999.0, Some(100.0));
        // 100 W for 36 s is 1 Wh, plus the resolution.
        assert_eq!(
            t.update(36 * S, 0.0, Some(100.0)),
            CounterStep::Wrapped(1.0)
        );
    }

    /// Regression: a PZEM counter that stepped back by 10 Wh was taken as a reset and the
    /// whole raw counter added (energy_total 0.3 -> 99,990 Wh).
    #[test]
    fn a_step_back_is_not_a_reset() {
        let mut t = EnergyTracker::new(Some(10_000_000.0), 1.0);
        t.update(0, 100_000.0, Some(50.0));
        assert!(matches!(
            t.update(S, 99_990.0, Some(50.0)),
            CounterStep::Rejected(r) if r.reason == Reason::EnergyCounter
        ));
        assert_eq!(t.total_wh(), 0.0);
        // Followed from its new value.
        assert_eq!(
            t.update(73 * S, 99_991.0, Some(50.0)),
            CounterStep::Counted(1.0)
        );
        assert_eq!(t.total_wh(), 1.0);
    }

    /// Regression: a counter reading 4,000,000 Wh three times became the new baseline with
    /// its jump counted.
    #[test]
    fn a_jump_adds_nothing_however_often_it_repeats() {
        let mut t = EnergyTracker::new(Some(10_000_000.0), 1.0);
        t.update(0, 0.3, Some(50.0));
        for k in 1..=3 {
            let step = t.update(k * S, 4_000_000.0, Some(50.0));
            assert!(t.total_wh() <= 50.0 * 3.0 / 3600.0 * 1.5 + 3.0, "{step:?}");
        }
        // And back to the real counter: a small value, so a reset bounded by the power.
        t.update(4 * S, 0.4, Some(50.0));
        assert!(t.total_wh() < 2.0, "{}", t.total_wh());
    }

    #[test]
    fn no_sequence_adds_more_than_the_plausible_power_allows() {
        let mut t = EnergyTracker::new(Some(10_000_000.0), 1.0);
        let mut rng = 12_345_u64;
        let mut next = || {
            rng = rng
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (rng >> 33) as f64 / f64::from(u32::MAX >> 1)
        };
        let n = 10_000;
        for k in 0..n {
            let raw = next() * 10_000_000.0;
            let p = next() * 20_000.0;
            t.update(k * S, raw, Some(p));
        }
        let bound = MAX_POWER_W * (n - 1) as f64 / 3600.0 + n as f64;
        assert!(t.total_wh() <= bound, "{} > {bound}", t.total_wh());
    }

    #[test]
    fn negative_and_non_finite_counters_are_rejected_without_moving_the_baseline() {
        let mut t = EnergyTracker::new(None, 1.0);
        t.update(0, 10.0, Some(50.0));
        assert!(matches!(t.update(S, -1.0, None), CounterStep::Rejected(_)));
        assert!(matches!(
            t.update(S, f64::NAN, None),
            CounterStep::Rejected(_)
        ));
        assert_eq!(
            t.update(72 * S, 11.0, Some(50.0)),
            CounterStep::Counted(1.0)
        );
    }
}
