//! Cumulative counters: the one place a counter's readings become increases. Every counter
//! wattson follows goes through [`movement`], which says whether a reading went up, wrapped
//! or went down:
//! - [`WrappingCounter`]: a hardware counter in integer units that wraps at a known range
//!   (RAPL's `energy_uj` at `max_energy_range_uj`, hwmon's `energyN_input`); a decrease
//!   across no known range is a reset, and no increase can be trusted; a microjoule
//!   counter's step becomes watts by [`microjoule_watts`] over [`since_last_poll`].
//! - [`EnergyTracker`]: a device's own energy counter, Wh (serial meters, smart plugs),
//!   turned into a monotonic total that cannot invent energy (below).
//! - [`run_increase`]: a total that each daemon run counts from zero and the store keeps
//!   (a meter's `energy_total`, the per-reason rejection counts), read back by the ledger.
//!
//! A device counter moves by what the device measured, which cannot be more than its power
//! over the time between two readings. [`EnergyTracker`] checks every step against that
//! bound, `allowed = min(1.5 x max(|P before|, |P now|) + 5 W, 16 kW) x elapsed +
//! resolution` (the slack covers load changes between two polls; without a power reading
//! the plausible maximum, 16 kW, is used), and:
//! - an increase within it is counted;
//! - a decrease is a reset (the device restarted at zero and has counted `raw` since) only
//!   when the new value is itself within the bound, and a wrap only when the distance across
//!   the wrap is; anything else is a glitch;
//! - a glitch (a step back, a jump up beyond the bound) adds nothing: it is rejected, and the
//!   counter's new value becomes the baseline, so a counter that really moved (it counted
//!   while we were not looking) is followed again from the next reading without its jump.
//!
//! Units: Wh, W, UTC ms for the energy tracker; the device's own unit for the others.

use std::ops::{Add, Sub};
use std::time::Duration;

use crate::plausibility::{MAX_POWER_W, Reason, Rejection};

/// Slack on the measured power: load may rise between two readings.
const POWER_SLACK: f64 = 1.5;
/// Slack added to the measured power, W.
const POWER_FLOOR_W: f64 = 5.0;

/// How a cumulative counter moved between two readings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Movement<T> {
    /// It went up (or stayed) by this much.
    Up(T),
    /// It went down from a reading inside its range: across the wrap it moved this much.
    Wrapped(T),
    /// It went down and no wrap explains it: a reset, a new run, or a glitch.
    Down,
}

/// How a counter that wraps at `wrap` (where known) moved from `last` to `raw`. A decrease
/// is a wrap only when `last` was inside the range (`last <= wrap`); the distance is then
/// `(wrap - last) + raw`.
pub fn movement<T>(last: T, raw: T, wrap: Option<T>) -> Movement<T>
where
    T: Copy + PartialOrd + Add<Output = T> + Sub<Output = T>,
{
    if raw >= last {
        return Movement::Up(raw - last);
    }
    match wrap {
        // `raw < last <= w`, so `(w - last) + raw < w`: no overflow for integers.
        Some(w) if w >= last => Movement::Wrapped((w - last) + raw),
        _ => Movement::Down,
    }
}

/// The increase of a total a daemon run counts from zero, from its previous stored value
/// `previous` to `value`: a drop is a new run, which has counted `value` since it started;
/// the first value seen counts whole.
pub fn run_increase(previous: Option<f64>, value: f64) -> f64 {
    match previous.map(|p| movement(p, value, None)) {
        Some(Movement::Up(d)) => d,
        _ => value,
    }
}

/// What one reading of a [`WrappingCounter`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterStep {
    /// The first reading: nothing to compare with.
    First,
    /// A plain increase.
    Diff(u64),
    /// The counter passed its maximum and started again from zero; the corrected increase.
    Wrapped(u64),
    /// It went backwards with no known range (a reset): no increase can be trusted.
    Reset,
}

impl CounterStep {
    /// The increase, where there is one.
    pub fn delta(self) -> Option<u64> {
        match self {
            CounterStep::Diff(d) | CounterStep::Wrapped(d) => Some(d),
            CounterStep::First | CounterStep::Reset => None,
        }
    }
}

/// The time between a poll and the one before it, by a [`crate::MonotonicClock`]'s readings:
/// `last` takes `now`; `None` on the first poll (or a clock that went back).
pub fn since_last_poll(last: &mut Option<Duration>, now: Duration) -> Option<Duration> {
    last.replace(now).and_then(|prev| now.checked_sub(prev))
}

/// Watts from one step of a microjoule energy counter (RAPL's `energy_uj`, hwmon's
/// `energy*_input`) over the time since its previous reading: uJ / us = W. `None` without an
/// increase (the first reading, a reset) or without time between the readings.
pub fn microjoule_watts(step: CounterStep, elapsed: Option<Duration>) -> Option<f64> {
    let us = elapsed?.as_micros() as f64;
    (us > 0.0).then(|| step.delta().map(|uj| uj as f64 / us))?
}

/// A cumulative counter that wraps at `max` (RAPL's `max_energy_range_uj`; 0 if unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrappingCounter {
    max: u64,
    last: Option<u64>,
}

impl WrappingCounter {
    pub fn new(max: u64) -> Self {
        WrappingCounter { max, last: None }
    }

    /// Feed a new raw reading.
    pub fn update(&mut self, raw: u64) -> CounterStep {
        let Some(last) = self.last.replace(raw) else {
            return CounterStep::First;
        };
        match movement(last, raw, Some(self.max)) {
            Movement::Up(d) => CounterStep::Diff(d),
            Movement::Wrapped(d) => CounterStep::Wrapped(d),
            Movement::Down => CounterStep::Reset,
        }
    }
}

/// What one reading did to an [`EnergyTracker`]'s total.
#[derive(Debug, Clone, PartialEq)]
pub enum EnergyStep {
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
    pub fn update(&mut self, ts_ms: i64, raw_wh: f64, power_w: Option<f64>) -> EnergyStep {
        if !raw_wh.is_finite() || raw_wh < 0.0 {
            return EnergyStep::Rejected(Rejection::new(
                Reason::EnergyCounter,
                format!("energy counter {raw_wh} Wh"),
            ));
        }
        let Some((_, last, _)) = self.last else {
            self.last = Some((ts_ms, raw_wh, power_w));
            return EnergyStep::First;
        };
        let allowed = self.allowed_wh(ts_ms, power_w);
        let step = match movement(last, raw_wh, self.wrap_wh) {
            Movement::Up(inc) if inc <= allowed => EnergyStep::Counted(inc),
            Movement::Up(inc) => EnergyStep::Rejected(Rejection::new(
                Reason::EnergyCounter,
                format!(
                    "energy counter jumped {inc:.3} Wh ({last} -> {raw_wh} Wh); the power \
                     allows {allowed:.3} Wh"
                ),
            )),
            Movement::Wrapped(d) if d <= allowed => EnergyStep::Wrapped(d),
            Movement::Wrapped(_) | Movement::Down if raw_wh <= allowed => EnergyStep::Reset(raw_wh),
            Movement::Wrapped(_) | Movement::Down => EnergyStep::Rejected(Rejection::new(
                Reason::EnergyCounter,
                format!(
                    "energy counter stepped back from {last} to {raw_wh} Wh: not a reset \
                     (the new value is more than the {allowed:.3} Wh the power allows)"
                ),
            )),
        };
        if let EnergyStep::Counted(d) | EnergyStep::Reset(d) | EnergyStep::Wrapped(d) = step {
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

#[cfg(test)]
mod tests;
