//! Electricity tariffs: the price of a kilowatt-hour at any instant.
//!
//! Prices are in the tariff's currency per kWh (e.g. GBP 0.09), the standing charge in that
//! currency per day. Time-of-use periods and tariff changes are written in LOCAL wall-clock
//! time, as on a bill ("night 00:30-07:30"; "from 1 April"), and every instant is priced by
//! converting it to the tariff's time zone first, so the 23-hour and 25-hour days of a
//! daylight-saving change are priced hour by hour as they happened. Timestamps at this
//! interface are UTC (`DateTime<Utc>` or UTC milliseconds, as the store keeps them).
//!
//! The shape mirrors the config's `[tariff]` section (`currency`, `price_per_kwh`,
//! `standing_charge_per_day`, `[[tariff.period]]` with `start`, `end`, `price_per_kwh`), plus dated
//! changes so history is priced at the price of its day.
//!
//! A tariff may carry price series ([`SeriesSet`]: imported Agile half-hours, day-ahead
//! hours, the live MQTT price); where a series has a slot its price wins, and elsewhere the
//! configured prices above apply ([`Tariff::price_source`] says which priced an instant).

use std::sync::Arc;

use crate::zone::Zone;
use chrono::{DateTime, Duration, NaiveDate, NaiveTime, Offset, TimeZone, Utc};
use thiserror::Error;

use super::series::SeriesSet;

/// Why a tariff is invalid, or an instant cannot be priced.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum TariffError {
    /// The currency is not an ISO 4217 code.
    #[error("currency {0:?} is not a three-letter ISO 4217 code such as \"GBP\"")]
    BadCurrency(String),
    /// A tariff needs at least one price.
    #[error("the tariff has no prices")]
    NoPrices,
    /// A price or charge is negative, NaN or infinite.
    #[error("{what} is {value}: prices and charges must be finite and not negative")]
    BadPrice { what: String, value: f64 },
    /// Two changes take effect on the same date.
    #[error("two tariff changes take effect on {0}")]
    DuplicateChange(NaiveDate),
    /// A period starts when it ends, which could mean all day or never.
    #[error("the period starting {start} in {} ends when it starts", since(*from))]
    EmptyPeriod { from: NaiveDate, start: NaiveTime },
    /// Two periods of the same change overlap.
    #[error("in {}, periods {first} and {second} overlap", since(*from))]
    Overlap {
        from: NaiveDate,
        first: String,
        second: String,
    },
    /// A timestamp outside the range chrono can represent.
    #[error("timestamp {0} ms is out of range")]
    Timestamp(i64),
}

/// A time-of-use window in local time, `start` inclusive to `end` exclusive. When `end` is
/// earlier than `start` the window wraps midnight (`23:00-07:00`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Period {
    /// Local wall-clock start, inclusive.
    pub start: NaiveTime,
    /// Local wall-clock end, exclusive; before `start` to wrap midnight.
    pub end: NaiveTime,
    /// Price in this window, currency per kWh.
    pub price_per_kwh: f64,
}

impl Period {
    /// Whether the local time of day `t` is in this window.
    pub fn contains(&self, t: NaiveTime) -> bool {
        if self.start < self.end {
            self.start <= t && t < self.end
        } else {
            t >= self.start || t < self.end
        }
    }

    /// The window as seconds-of-day ranges (two when it wraps midnight).
    fn ranges(&self) -> Vec<(f64, f64)> {
        let s = seconds_of_day(self.start);
        let e = seconds_of_day(self.end);
        if s < e {
            vec![(s, e)]
        } else {
            vec![(s, 86_400.0), (0.0, e)]
        }
    }

    /// Whether the two windows share a time of day.
    pub fn overlaps(&self, other: &Period) -> bool {
        self.ranges()
            .iter()
            .any(|a| other.ranges().iter().any(|b| a.0 < b.1 && b.0 < a.1))
    }

    /// `HH:MM-HH:MM`.
    pub fn label(&self) -> String {
        format!(
            "{}-{}",
            self.start.format("%H:%M"),
            self.end.format("%H:%M")
        )
    }
}

fn seconds_of_day(t: NaiveTime) -> f64 {
    (t - NaiveTime::MIN).as_seconds_f64()
}

/// The prices in force from one local date (midnight) until the next change.
#[derive(Debug, Clone, PartialEq)]
pub struct TariffChange {
    /// First local date these prices apply to, from local midnight.
    pub effective_from: NaiveDate,
    /// Price outside every period, currency per kWh.
    pub price_per_kwh: f64,
    /// Time-of-use windows; they must not overlap.
    pub periods: Vec<Period>,
}

/// A validated tariff. Build it with [`Tariff::new`] or [`Tariff::simple`].
#[derive(Debug, Clone, PartialEq)]
pub struct Tariff {
    currency: String,
    standing_charge_per_day: f64,
    /// Sorted by `effective_from`, no two on one date.
    changes: Vec<TariffChange>,
    tz: Zone,
    /// Every local time of day at which some price may change, midnight first.
    boundaries: Vec<NaiveTime>,
    /// Price series that take precedence per slot (none: the configured prices only).
    series: Option<Arc<SeriesSet>>,
}

/// Where the price of an instant came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceSource {
    /// The configured prices (`[tariff]`: flat, periods, changes).
    Configured,
    /// The series at this index of [`Tariff::series`].
    Series(usize),
}

impl Tariff {
    /// Validates and builds a tariff. `currency` is an ISO 4217 code ("GBP"); changes may
    /// come in any order. Dates before the earliest change are priced by it (the earliest
    /// known tariff is the best guess for older history).
    pub fn new(
        currency: &str,
        standing_charge_per_day: f64,
        mut changes: Vec<TariffChange>,
        tz: Zone,
    ) -> Result<Self, TariffError> {
        if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(TariffError::BadCurrency(currency.to_string()));
        }
        check_price("the standing charge per day", standing_charge_per_day)?;
        if changes.is_empty() {
            return Err(TariffError::NoPrices);
        }
        changes.sort_by_key(|c| c.effective_from);
        if let Some(w) = changes
            .windows(2)
            .find(|w| w[0].effective_from == w[1].effective_from)
        {
            return Err(TariffError::DuplicateChange(w[0].effective_from));
        }
        let mut boundaries = vec![NaiveTime::MIN];
        for c in &changes {
            check_price(
                &format!("the price in {}", since(c.effective_from)),
                c.price_per_kwh,
            )?;
            for (i, p) in c.periods.iter().enumerate() {
                check_price(
                    &format!("the price in {} for {}", since(c.effective_from), p.label()),
                    p.price_per_kwh,
                )?;
                if p.start == p.end {
                    return Err(TariffError::EmptyPeriod {
                        from: c.effective_from,
                        start: p.start,
                    });
                }
                for q in &c.periods[..i] {
                    if p.overlaps(q) {
                        return Err(TariffError::Overlap {
                            from: c.effective_from,
                            first: q.label(),
                            second: p.label(),
                        });
                    }
                }
                boundaries.extend([p.start, p.end]);
            }
        }
        boundaries.sort();
        boundaries.dedup();
        Ok(Self {
            currency: currency.to_string(),
            standing_charge_per_day,
            changes,
            tz,
            boundaries,
            series: None,
        })
    }

    /// This tariff with `series` taking precedence wherever they have a slot (none when
    /// the set is empty).
    #[must_use]
    pub fn with_series(mut self, series: SeriesSet) -> Self {
        self.series = (!series.is_empty()).then(|| Arc::new(series));
        self
    }

    /// The price series that take precedence, if any.
    pub fn series(&self) -> Option<&SeriesSet> {
        self.series.as_deref()
    }

    /// A tariff that never changed: the config's `[tariff]` section as it stands.
    pub fn simple(
        currency: &str,
        price_per_kwh: f64,
        standing_charge_per_day: f64,
        periods: Vec<Period>,
        tz: Zone,
    ) -> Result<Self, TariffError> {
        let change = TariffChange {
            effective_from: NaiveDate::MIN,
            price_per_kwh,
            periods,
        };
        Self::new(currency, standing_charge_per_day, vec![change], tz)
    }

    /// ISO 4217 currency code.
    pub fn currency(&self) -> &str {
        &self.currency
    }

    /// Standing charge, currency per day.
    pub fn standing_charge_per_day(&self) -> f64 {
        self.standing_charge_per_day
    }

    /// The changes, oldest first.
    pub fn changes(&self) -> &[TariffChange] {
        &self.changes
    }

    /// The time zone periods and dates are written in.
    pub fn tz(&self) -> Zone {
        self.tz
    }

    /// The prices in force on a local date.
    pub fn change_for(&self, date: NaiveDate) -> &TariffChange {
        let i = self.changes.partition_point(|c| c.effective_from <= date);
        &self.changes[i.saturating_sub(1)]
    }

    /// Price per kWh at a UTC instant, by the local date and time of day.
    pub fn price_at(&self, t: DateTime<Utc>) -> f64 {
        self.series
            .as_ref()
            .and_then(|s| s.at(t.timestamp_millis()).hit)
            .map_or_else(|| self.configured_price_at(t), |(p, _)| p)
    }

    /// The configured price per kWh at a UTC instant (series left out).
    pub fn configured_price_at(&self, t: DateTime<Utc>) -> f64 {
        let local = t.with_timezone(&self.tz);
        let change = self.change_for(local.date_naive());
        let tod = local.time();
        change
            .periods
            .iter()
            .find(|p| p.contains(tod))
            .map_or(change.price_per_kwh, |p| p.price_per_kwh)
    }

    /// The price at `t_ms` (UTC milliseconds) and the first millisecond after it at which
    /// the price may change. The price is constant on `t_ms..end_ms`.
    pub fn segment(&self, t_ms: i64) -> Result<(f64, i64), TariffError> {
        self.priced_segment(t_ms).map(|(p, e, _)| (p, e))
    }

    /// [`Tariff::segment`] with where the price came from.
    pub fn priced_segment(&self, t_ms: i64) -> Result<(f64, i64, PriceSource), TariffError> {
        let t = DateTime::from_timestamp_millis(t_ms).ok_or(TariffError::Timestamp(t_ms))?;
        let next = self.next_split(t);
        let mut end_ms = next.timestamp_millis();
        if next > DateTime::from_timestamp_millis(end_ms).unwrap_or(next) {
            end_ms += 1; // a boundary with sub-millisecond precision: round up
        }
        let mut out = (self.configured_price_at(t), end_ms, PriceSource::Configured);
        if let Some(set) = &self.series {
            let l = set.at(t_ms);
            out.1 = out.1.min(l.until_ms);
            if let Some((price, i)) = l.hit {
                out = (price, l.until_ms, PriceSource::Series(i));
            }
        }
        out.1 = out.1.max(t_ms + 1);
        Ok(out)
    }

    /// Whether a price or the local date may change strictly inside `[start_ms, end_ms)`: a
    /// price series (slots of any length), or a time-of-use boundary, local midnight or a
    /// change of the zone's offset within it. Energy over such a span is priced (and put
    /// in its day) by its minutes; over any other span one price holds for all of it.
    pub fn may_change_within(&self, start_ms: i64, end_ms: i64) -> bool {
        if self.series.is_some() {
            return true;
        }
        let Some(t) = DateTime::<Utc>::from_timestamp_millis(start_ms) else {
            return true;
        };
        self.next_split(t).timestamp_millis() < end_ms
    }

    /// Where the price at `t_ms` comes from.
    pub fn price_source(&self, t_ms: i64) -> PriceSource {
        self.series
            .as_ref()
            .and_then(|s| s.at(t_ms).hit)
            .map_or(PriceSource::Configured, |(_, i)| PriceSource::Series(i))
    }

    /// The name of a price source: the series' name, or `tariff` for the configured prices.
    pub fn source_name(&self, source: PriceSource) -> String {
        match source {
            PriceSource::Configured => "tariff".to_owned(),
            PriceSource::Series(i) => self
                .series
                .as_ref()
                .and_then(|s| s.series().get(i))
                .map_or_else(|| format!("series {i}"), |s| s.source.clone()),
        }
    }

    /// Time-weighted mean price per kWh over `start_ms..end_ms` (UTC milliseconds): the
    /// price a constant load pays on average. An empty range gives the price at `start_ms`.
    pub fn mean_price(&self, start_ms: i64, end_ms: i64) -> Result<f64, TariffError> {
        if end_ms <= start_ms {
            return Ok(self.segment(start_ms)?.0);
        }
        let mut t = start_ms;
        let mut sum = 0.0;
        while t < end_ms {
            let (price, next) = self.segment(t)?;
            let until = next.min(end_ms);
            sum += price * (until - t) as f64;
            t = until;
        }
        Ok(sum / (end_ms - start_ms) as f64)
    }

    /// The earliest instant after `t` at which the local date or time-of-day window may
    /// change. Candidates are every boundary time on this and the next two local dates,
    /// mapped to UTC (both instants when the clock goes back, none in a skipped hour); a
    /// change of UTC offset before the candidate is itself a split, found by bisection,
    /// because the local time jumps there and may skip a boundary.
    fn next_split(&self, t: DateTime<Utc>) -> DateTime<Utc> {
        let local = t.with_timezone(&self.tz);
        let mut best = t + Duration::hours(26);
        let mut date = local.date_naive();
        for _ in 0..3 {
            for b in &self.boundaries {
                let mapped = self.tz.from_local_datetime(&date.and_time(*b));
                for cand in [mapped.earliest(), mapped.latest()].into_iter().flatten() {
                    let cand = cand.with_timezone(&Utc);
                    if cand > t && cand < best {
                        best = cand;
                    }
                }
            }
            match date.succ_opt() {
                Some(d) => date = d,
                None => break,
            }
        }
        let offset = |x: DateTime<Utc>| self.tz.offset_from_utc_datetime(&x.naive_utc()).fix();
        let here = offset(t);
        if offset(best) == here {
            return best;
        }
        let (mut lo, mut hi) = (t, best);
        while hi - lo > Duration::milliseconds(1) {
            let mid = lo + (hi - lo) / 2;
            if offset(mid) == here {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }
}

/// Names a change for error messages; a tariff that never changed starts at `NaiveDate::MIN`.
fn since(date: NaiveDate) -> String {
    if date == NaiveDate::MIN {
        "the tariff".to_string()
    } else {
        format!("the tariff from {date}")
    }
}

fn check_price(what: &str, value: f64) -> Result<(), TariffError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(TariffError::BadPrice {
            what: what.to_string(),
            value,
        })
    }
}

#[cfg(test)]
mod tests;
