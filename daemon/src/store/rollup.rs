//! The rollup accumulators the writer keeps per series: count, mean, min and max per hour
//! and minute, the energy integrated and the time it covers, and the spacing a series'
//! pairs of samples are judged by. Units: ms, Wh, the series' unit.

use std::collections::{BTreeMap, VecDeque};

use super::{HOUR_MS, HourRollup, MinuteRollup, integrate};

#[derive(Clone, Copy)]
pub(super) struct Acc {
    pub(super) n: u64,
    pub(super) sum: f64,
    pub(super) min: f64,
    pub(super) max: f64,
    pub(super) energy_wh: f64,
    /// ms; `None` in a minute stored before covered time was.
    pub(super) covered_ms: Option<i64>,
}

impl Default for Acc {
    fn default() -> Self {
        Acc {
            n: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            energy_wh: 0.0,
            covered_ms: Some(0),
        }
    }
}

impl Acc {
    pub(super) fn add(&mut self, v: f64) {
        self.n += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub(super) fn from_stored(m: &MinuteRollup) -> Acc {
        if m.n == 0 {
            return Acc {
                energy_wh: m.energy_wh,
                covered_ms: m.covered_ms,
                ..Acc::default()
            };
        }
        Acc {
            n: m.n,
            sum: m.mean * m.n as f64,
            min: m.min,
            max: m.max,
            energy_wh: m.energy_wh,
            covered_ms: m.covered_ms,
        }
    }

    pub(super) fn integrate(&mut self, wh: f64, ms: i64) {
        self.energy_wh += wh;
        if let Some(c) = self.covered_ms.as_mut() {
            *c += ms;
        }
    }

    pub(super) fn stats(&self) -> (f64, f64, f64) {
        if self.n == 0 {
            (0.0, 0.0, 0.0)
        } else {
            (self.sum / self.n as f64, self.min, self.max)
        }
    }
}

pub(super) struct HourAcc {
    pub(super) hour_ms: i64,
    pub(super) all: Acc,
    /// The hour's energy and covered time, kept apart from the minutes' so that they stay
    /// exact (minutes store energy to 1 µWh).
    pub(super) energy_wh: f64,
    pub(super) covered_ms: i64,
    pub(super) approximate: bool,
    pub(super) minutes: BTreeMap<u8, Acc>,
    pub(super) dirty: bool,
}

impl HourAcc {
    pub(super) fn from_stored(hour_ms: i64, stored: Option<HourRollup>) -> HourAcc {
        let Some(h) = stored else {
            return HourAcc {
                hour_ms,
                all: Acc::default(),
                energy_wh: 0.0,
                covered_ms: 0,
                approximate: false,
                minutes: BTreeMap::new(),
                dirty: false,
            };
        };
        let all = MinuteRollup {
            n: h.n,
            mean: h.mean,
            min: h.min,
            max: h.max,
            ..MinuteRollup::default()
        };
        HourAcc {
            hour_ms,
            all: Acc::from_stored(&all),
            energy_wh: h.energy_wh.unwrap_or(0.0),
            covered_ms: h.covered_ms.unwrap_or(0),
            approximate: h.approximate || h.covered_ms.is_none(),
            minutes: h
                .minutes
                .iter()
                .map(|m| (m.minute, Acc::from_stored(m)))
                .collect(),
            dirty: false,
        }
    }

    pub(super) fn integrate(&mut self, minute: u8, wh: f64, ms: i64) {
        self.minutes.entry(minute).or_default().integrate(wh, ms);
        self.energy_wh += wh;
        self.covered_ms += ms;
    }

    pub(super) fn to_rollup(&self, power: bool) -> HourRollup {
        let (mean, min, max) = self.all.stats();
        HourRollup {
            hour_ms: self.hour_ms,
            n: self.all.n,
            mean,
            min,
            max,
            energy_wh: power.then_some(self.energy_wh),
            covered_ms: power.then_some(self.covered_ms.clamp(0, HOUR_MS)),
            approximate: power && self.approximate,
            minutes: self
                .minutes
                .iter()
                .map(|(&minute, m)| {
                    let (mean, min, max) = m.stats();
                    MinuteRollup {
                        minute,
                        n: m.n,
                        mean,
                        min,
                        max,
                        energy_wh: m.energy_wh,
                        covered_ms: m.covered_ms,
                    }
                })
                .collect(),
        }
    }
}

/// The spacing a series' pairs are judged by (see the module documentation).
pub(super) struct Spacing {
    /// Configured for the source, or stated by the batch, ms.
    pub(super) fixed: Option<i64>,
    /// The series' last few sample intervals, ms.
    pub(super) recent: VecDeque<i64>,
    /// What `series.spacing_ms` says.
    pub(super) stored: Option<i64>,
}

/// Intervals the learned spacing is the median of.
const LEARNED_FROM: usize = 5;
/// A series of unknown spacing integrates its first pair up to twice Tasmota's default
/// telemetry period (300 s), so a plug at its defaults is covered from its second reading.
const UNKNOWN_SPACING_MS: i64 = 300_000;

impl Spacing {
    pub(super) fn current(&self) -> Option<i64> {
        self.fixed.or_else(|| {
            let mut v: Vec<i64> = self.recent.iter().copied().collect();
            v.sort_unstable();
            v.get(v.len() / 2).copied()
        })
    }

    pub(super) fn max_pair_ms(&self) -> i64 {
        integrate::max_pair_ms(self.current().unwrap_or(UNKNOWN_SPACING_MS))
    }

    pub(super) fn observe(&mut self, interval_ms: i64) {
        if self.recent.len() == LEARNED_FROM {
            self.recent.pop_front();
        }
        self.recent.push_back(interval_ms);
    }

    /// The spacing to store, when it differs from the stored one by more than a tenth.
    pub(super) fn to_store(&self) -> Option<i64> {
        let now = self.current()?;
        match self.stored {
            Some(s) if (now - s).abs() * 10 <= s => None,
            _ => Some(now),
        }
    }
}
