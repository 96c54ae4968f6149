//! Price and carbon-intensity series: values per slot (an Octopus Agile half-hour, a
//! day-ahead hour, the time a live price held), as stored by `wattson tariff import` and
//! `[tariff] price_topic`.
//!
//! A [`SlotSeries`] is one source's slots, sorted and never overlapping; a [`SeriesSet`] is
//! the series that apply, in order of precedence (the first that has a slot at an instant
//! gives its value). Instants no series covers have no value here: the caller falls back
//! (the configured tariff's price, the constant carbon intensity) and says how much energy
//! that covered.
//!
//! Units: UTC ms; values in currency per kWh (negative allowed: Agile and day-ahead prices
//! go below zero) or g CO2 per kWh.

use std::fmt;

/// One slot: `value` on `start_ms..end_ms` (UTC ms, end exclusive).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slot {
    pub start_ms: i64,
    pub end_ms: i64,
    /// Currency per kWh, or g CO2 per kWh.
    pub value: f64,
}

/// Why slots do not make a series.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SlotError {
    #[error("slot {index} ends ({end_ms} ms) at or before it starts ({start_ms} ms)")]
    Empty {
        index: usize,
        start_ms: i64,
        end_ms: i64,
    },
    #[error("slot {index} has value {value}, which is not a finite number")]
    NotFinite { index: usize, value: f64 },
    #[error(
        "slot {index} ({start_ms}..{end_ms} ms) lies outside 1970..2100 or is longer than 31 days"
    )]
    OutOfRange {
        index: usize,
        start_ms: i64,
        end_ms: i64,
    },
    #[error("slots starting {first_ms} ms and {second_ms} ms overlap")]
    Overlap { first_ms: i64, second_ms: i64 },
}

/// One source's slots, sorted by start, none overlapping.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotSeries {
    /// The series' name (`agile`, `mqtt`, `carbon`).
    pub source: String,
    /// ISO 4217 code for prices, `gCO2/kWh` for carbon.
    pub unit: String,
    slots: Vec<Slot>,
}

impl SlotSeries {
    /// Sorts and checks the slots (each non-empty, finite, within [`super::SLOT_RANGE_MS`] and
    /// at most [`super::MAX_SLOT_MS`] long, none overlapping).
    pub fn new(source: &str, unit: &str, mut slots: Vec<Slot>) -> Result<Self, SlotError> {
        for (index, s) in slots.iter().enumerate() {
            if s.end_ms <= s.start_ms {
                return Err(SlotError::Empty {
                    index,
                    start_ms: s.start_ms,
                    end_ms: s.end_ms,
                });
            }
            if !super::SLOT_RANGE_MS.contains(&s.start_ms)
                || s.end_ms > super::SLOT_RANGE_MS.end
                || s.end_ms - s.start_ms > super::MAX_SLOT_MS
            {
                return Err(SlotError::OutOfRange {
                    index,
                    start_ms: s.start_ms,
                    end_ms: s.end_ms,
                });
            }
            if !s.value.is_finite() {
                return Err(SlotError::NotFinite {
                    index,
                    value: s.value,
                });
            }
        }
        slots.sort_by_key(|s| s.start_ms);
        if let Some(w) = slots.windows(2).find(|w| w[1].start_ms < w[0].end_ms) {
            return Err(SlotError::Overlap {
                first_ms: w[0].start_ms,
                second_ms: w[1].start_ms,
            });
        }
        Ok(SlotSeries {
            source: source.to_owned(),
            unit: unit.to_owned(),
            slots,
        })
    }

    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// First start and last end, UTC ms.
    pub fn window(&self) -> Option<(i64, i64)> {
        Some((self.slots.first()?.start_ms, self.slots.last()?.end_ms))
    }

    /// The slot holding `t_ms`, else the start of the next slot after it.
    fn at(&self, t_ms: i64) -> Result<&Slot, Option<i64>> {
        let i = self.slots.partition_point(|s| s.end_ms <= t_ms);
        match self.slots.get(i) {
            Some(s) if s.start_ms <= t_ms => Ok(s),
            Some(s) => Err(Some(s.start_ms)),
            None => Err(None),
        }
    }

    /// Time-weighted mean value over the slots' own time (gaps between slots left out).
    pub fn mean(&self) -> Option<f64> {
        let ms: i64 = self.slots.iter().map(|s| s.end_ms - s.start_ms).sum();
        (ms > 0).then(|| {
            self.slots
                .iter()
                .map(|s| s.value * (s.end_ms - s.start_ms) as f64)
                .sum::<f64>()
                / ms as f64
        })
    }
}

/// The series that apply, first one first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SeriesSet {
    series: Vec<SlotSeries>,
}

/// What a [`SeriesSet`] says about an instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lookup {
    /// The value and the index of the series it came from; `None`: no series has a slot.
    pub hit: Option<(f64, usize)>,
    /// The first instant after the lookup's at which the answer may change, UTC ms
    /// (`i64::MAX`: never).
    pub until_ms: i64,
}

impl SeriesSet {
    /// `series` in order of precedence; empty series are left out.
    pub fn new(series: Vec<SlotSeries>) -> SeriesSet {
        SeriesSet {
            series: series.into_iter().filter(|s| !s.slots.is_empty()).collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    pub fn series(&self) -> &[SlotSeries] {
        &self.series
    }

    /// The value at `t_ms` and until when it holds.
    pub fn at(&self, t_ms: i64) -> Lookup {
        let mut hit = None;
        let mut until = i64::MAX;
        for (i, s) in self.series.iter().enumerate() {
            match s.at(t_ms) {
                Ok(slot) => {
                    until = until.min(slot.end_ms);
                    if hit.is_none() {
                        hit = Some((slot.value, i));
                        // Lower-precedence series cannot change the answer while this
                        // slot holds.
                        break;
                    }
                }
                Err(next) => until = until.min(next.unwrap_or(i64::MAX)),
            }
        }
        Lookup {
            hit,
            until_ms: until,
        }
    }

    /// First start and last end over every series, UTC ms.
    pub fn window(&self) -> Option<(i64, i64)> {
        self.series
            .iter()
            .filter_map(SlotSeries::window)
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
    }

    /// The names of the series, in precedence order.
    pub fn sources(&self) -> Vec<String> {
        self.series.iter().map(|s| s.source.clone()).collect()
    }
}

/// CO2 of measured energy priced per slot of a carbon-intensity series, with a constant
/// fallback where no slot covers the energy.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CarbonFigure {
    /// kg CO2.
    pub co2_kg: f64,
    /// kWh whose intensity came from the series.
    pub series_kwh: f64,
    /// kWh at the constant intensity (`fallback_g_per_kwh`), or with none (`co2_kg` then
    /// leaves them out).
    pub fallback_kwh: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_g_per_kwh: Option<f64>,
    /// The series used, in precedence order.
    pub sources: Vec<String>,
}

/// The CO2 of `buckets` (`(start UTC ms, end UTC ms, Wh)`, energy spread evenly over each)
/// at each slot's intensity, `fallback_g_per_kwh` elsewhere.
pub fn carbon_of_energy(
    set: &SeriesSet,
    fallback_g_per_kwh: Option<f64>,
    buckets: &[(i64, i64, f64)],
) -> CarbonFigure {
    let mut out = CarbonFigure {
        co2_kg: 0.0,
        series_kwh: 0.0,
        fallback_kwh: 0.0,
        fallback_g_per_kwh,
        sources: set.sources(),
    };
    let mut add = |g: Option<f64>, wh: f64| {
        if let Some(g) = g {
            out.series_kwh += wh / 1000.0;
            out.co2_kg += wh / 1000.0 * g / 1000.0;
        } else {
            out.fallback_kwh += wh / 1000.0;
            if let Some(f) = fallback_g_per_kwh {
                out.co2_kg += wh / 1000.0 * f / 1000.0;
            }
        }
    };
    for &(start, end, wh) in buckets {
        if !wh.is_finite() || end < start {
            continue;
        }
        if end == start {
            add(set.at(start).hit.map(|h| h.0), wh);
            continue;
        }
        let span = (end - start) as f64;
        let mut t = start;
        while t < end {
            let l = set.at(t);
            let until = l.until_ms.min(end).max(t + 1);
            add(l.hit.map(|h| h.0), wh * (until - t) as f64 / span);
            t = until;
        }
    }
    out
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{} ms: {}", self.start_ms, self.end_ms, self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(a: i64, b: i64, v: f64) -> Slot {
        Slot {
            start_ms: a,
            end_ms: b,
            value: v,
        }
    }

    #[test]
    fn slots_are_checked_and_sorted() {
        let x = SlotSeries::new("a", "GBP", vec![s(10, 20, 2.0), s(0, 10, 1.0)]).unwrap();
        assert_eq!(x.slots()[0].start_ms, 0);
        assert_eq!(x.window(), Some((0, 20)));
        assert_eq!(x.mean(), Some(1.5));
        assert!(matches!(
            SlotSeries::new("a", "GBP", vec![s(0, 10, 1.0), s(5, 15, 1.0)]),
            Err(SlotError::Overlap { .. })
        ));
        assert!(matches!(
            SlotSeries::new("a", "GBP", vec![s(10, 10, 1.0)]),
            Err(SlotError::Empty { index: 0, .. })
        ));
        assert!(matches!(
            SlotSeries::new("a", "GBP", vec![s(0, 10, f64::NAN)]),
            Err(SlotError::NotFinite { .. })
        ));
    }

    #[test]
    fn the_first_series_wins_and_boundaries_of_every_series_split() {
        let live = SlotSeries::new("mqtt", "GBP", vec![s(50, 70, 9.0)]).unwrap();
        let agile = SlotSeries::new("agile", "GBP", vec![s(0, 30, 1.0), s(30, 60, -2.0)]).unwrap();
        let set = SeriesSet::new(vec![live, agile]);
        assert_eq!(
            set.at(0),
            Lookup {
                hit: Some((1.0, 1)),
                until_ms: 30
            }
        );
        assert_eq!(set.at(40).hit, Some((-2.0, 1)));
        assert_eq!(set.at(40).until_ms, 50);
        assert_eq!(set.at(55).hit, Some((9.0, 0)));
        assert_eq!(set.at(55).until_ms, 70);
        assert_eq!(
            set.at(80),
            Lookup {
                hit: None,
                until_ms: i64::MAX
            }
        );
        assert_eq!(set.at(-5).until_ms, 0);
        assert_eq!(set.window(), Some((0, 70)));
    }

    #[test]
    fn carbon_per_slot_with_a_constant_fallback() {
        let c = SlotSeries::new("carbon", "gCO2/kWh", vec![s(0, 1800, 100.0)]).unwrap();
        let set = SeriesSet::new(vec![c]);
        // 2 kWh spread over 0..3600: half at 100 g, half at the 200 g fallback.
        let f = carbon_of_energy(&set, Some(200.0), &[(0, 3600, 2000.0)]);
        assert!((f.co2_kg - 0.3).abs() < 1e-12, "{f:?}");
        assert!((f.series_kwh - 1.0).abs() < 1e-12 && (f.fallback_kwh - 1.0).abs() < 1e-12);
    }
}
