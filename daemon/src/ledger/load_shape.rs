//! This machine's measured load by local hour of the week: the shape a year on a tariff is
//! priced over ([`super::annual::on_tariff`]). Each of the week's 168 hours holds the
//! energy and covered time measured in it (over as many weeks as the window holds); an
//! hour never measured takes the measured mean, and the projection says so.
//!
//! Units: Wh, ms (UTC), W.

use chrono::{DateTime, Datelike, Timelike};

use super::energy::MS_PER_HOUR;
use crate::store::HOUR_MS;
use crate::zone::Zone;

/// Hours in a week.
pub const WEEK_HOURS: usize = 168;

/// Less covered time than this in an hour of the week leaves it unmeasured, ms: a few
/// seconds say little about an hour.
const MIN_HOUR_MS: i64 = 60_000;

/// Mean power by local hour of the week, from measured energy.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadShape {
    /// Wh and covered ms in each hour of the week, Monday 00:00 local first.
    hours: Vec<(f64, f64)>,
}

impl LoadShape {
    /// The shape of `buckets` (`(start UTC ms, end UTC ms, Wh, covered ms)`), each put in
    /// the hour of the week (local in `tz`) its start falls in: the ledger's buckets are
    /// UTC hours and the ends of a window, so a bucket lies in one local hour wherever the
    /// zone's offset is a whole number of hours.
    pub fn new(buckets: impl IntoIterator<Item = (i64, i64, f64, i64)>, tz: Zone) -> LoadShape {
        LoadShape::of_hours(
            buckets
                .into_iter()
                .map(|(start, _, wh, covered)| (start, wh, covered as f64)),
            tz,
        )
    }

    /// The shape of `(start UTC ms, Wh, covered ms)`: an estimate's hours, whose covered
    /// time is a fraction of a millisecond as often as not (a share of metered seconds).
    pub fn of_hours(hours: impl IntoIterator<Item = (i64, f64, f64)>, tz: Zone) -> LoadShape {
        let mut out = vec![(0.0, 0.0); WEEK_HOURS];
        for (start, wh, covered) in hours {
            if covered <= 0.0 || !covered.is_finite() || !wh.is_finite() {
                continue;
            }
            if let Some(h) = hour_of_week(start, tz) {
                out[h].0 += wh;
                out[h].1 += covered;
            }
        }
        LoadShape { hours: out }
    }

    /// A constant `watts` in every hour of the week (the current draw, before there is
    /// history).
    pub fn flat(watts: f64) -> LoadShape {
        LoadShape {
            hours: vec![(watts, HOUR_MS as f64); WEEK_HOURS],
        }
    }

    /// The shape of the ledger's energy over a window.
    pub fn of(e: &super::energy::Energy, tz: Zone) -> LoadShape {
        LoadShape::new(
            e.buckets
                .iter()
                .map(|b| (b.start_ms, b.end_ms, b.wh, b.covered_ms)),
            tz,
        )
    }

    /// Mean power in hour of the week `h`, W; `None` where it was not measured.
    pub fn watts(&self, h: usize) -> Option<f64> {
        let (wh, ms) = *self.hours.get(h)?;
        (ms >= MIN_HOUR_MS as f64).then(|| wh * MS_PER_HOUR / ms)
    }

    /// Mean power over all covered time, W; `None` with nothing covered.
    pub fn mean_watts(&self) -> Option<f64> {
        let (wh, ms) = self
            .hours
            .iter()
            .fold((0.0, 0.0), |(w, m), &(wh, ms)| (w + wh, m + ms));
        (ms > 0.0).then(|| wh * MS_PER_HOUR / ms)
    }

    /// How many of the week's hours were measured.
    pub fn measured_hours(&self) -> usize {
        (0..WEEK_HOURS).filter(|&h| self.watts(h).is_some()).count()
    }

    /// Hours of covered time in all.
    pub fn covered_hours(&self) -> f64 {
        self.hours.iter().map(|h| h.1).sum::<f64>() / MS_PER_HOUR
    }

    /// The power of hour `h` as the projection takes it: measured, else the mean.
    pub fn assumed_watts(&self, h: usize) -> Option<f64> {
        self.watts(h).or_else(|| self.mean_watts())
    }

    /// The spread of the measured hours' mean power about their mean, as a share of the
    /// mean (their standard deviation over the mean); `None` under two measured hours.
    pub fn spread_ratio(&self) -> Option<f64> {
        let w: Vec<f64> = (0..WEEK_HOURS).filter_map(|h| self.watts(h)).collect();
        if w.len() < 2 {
            return None;
        }
        let mean = w.iter().sum::<f64>() / w.len() as f64;
        let var = w.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (w.len() - 1) as f64;
        (mean > 0.0).then(|| var.sqrt() / mean)
    }
}

/// The local hour of the week `t_ms` falls in (Monday 00:00-01:00 is 0).
pub fn hour_of_week(t_ms: i64, tz: Zone) -> Option<usize> {
    let local = DateTime::from_timestamp_millis(t_ms)?.with_timezone(&tz);
    Some(local.weekday().num_days_from_monday() as usize * 24 + local.hour() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_are_put_in_their_local_hour_of_the_week_and_unmeasured_ones_take_the_mean() {
        let tz = Zone::named("Europe/London").unwrap();
        // Monday 2025-01-13 00:00 UTC (= London), then Monday 01:00.
        let mon = 1_736_726_400_000;
        let hour = 3_600_000;
        let shape = LoadShape::new(
            [
                (mon, mon + hour, 100.0, hour),
                (mon + hour, mon + 2 * hour, 150.0, hour / 2),
                // Too little to say anything of its hour; still in the mean.
                (mon + 2 * hour, mon + 3 * hour, 0.1, 1000),
            ],
            tz,
        );
        assert_eq!(shape.watts(0), Some(100.0));
        assert_eq!(shape.watts(1), Some(300.0));
        assert_eq!(shape.watts(2), None);
        assert_eq!(shape.measured_hours(), 2);
        let mean = 250.1 * MS_PER_HOUR / (1.5 * MS_PER_HOUR + 1000.0);
        assert!((shape.mean_watts().unwrap() - mean).abs() < 1e-9);
        assert_eq!(shape.assumed_watts(100), shape.mean_watts());
        assert!(shape.spread_ratio().unwrap() > 0.0);
        // A week later is the same hour of the week.
        assert_eq!(hour_of_week(mon + 7 * 24 * hour, tz), Some(0));
    }
}
