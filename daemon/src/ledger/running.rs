//! Running totals: today's, this month's and all-time energy and cost of a source, kept up
//! to date cheaply for the live outputs (the MQTT state, `/metrics`), which read them every
//! few seconds: hours that closed before the previous one are priced once, so a refresh
//! prices only the last two hours, however old the database. Once a minute the stored
//! energy of the closed hours is summed again (one aggregate query); where samples were
//! stored late into them (a flush that failed for over an hour, a fleet host's backlog)
//! the closed hours are priced again, so late samples reach the outputs without a restart.
//!
//! Units: kWh, the tariff's currency, UTC ms.

use chrono::{DateTime, Datelike, Utc};
use wattson_collectors::SourceId;

use super::LedgerError;
use super::costs::local_midnight;
use super::energy::{self, MS_PER_HOUR};
use crate::ledger::price;
use crate::store::{HOUR_MS, Store, floor_to};
use crate::tariff::Tariff;

/// All-time energy and cost of a source, kept up to date cheaply: hours that closed before
/// the previous one are summed once, so each refresh prices only the last two hours.
#[derive(Debug, Clone, Default)]
pub struct RunningTotal {
    /// Where the total starts (UTC ms; `None`: at the source's first sample).
    start_ms: Option<i64>,
    /// Everything before this (UTC ms, an hour boundary) is in `closed`.
    until_ms: Option<i64>,
    closed: TotalFigures,
    /// When the closed hours were last summed again (UTC ms).
    checked_ms: i64,
    /// How often they were found changed and counted again.
    recounts: u32,
}

/// How often the closed hours' stored energy is summed again, ms.
const RECHECK_MS: i64 = 60_000;

/// A running total's figures.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TotalFigures {
    pub kwh: f64,
    pub cost: f64,
    pub covered_hours: f64,
}

impl RunningTotal {
    /// The total at `now_ms`.
    pub fn refresh(
        &mut self,
        store: &Store,
        host: &str,
        source: &SourceId,
        tariff: &Tariff,
        now_ms: i64,
    ) -> Result<TotalFigures, LedgerError> {
        self.recheck(store, host, source, now_ms)?;
        let from = match self.until_ms {
            Some(t) => t,
            None => match energy::total(store, host, source)?.since_ms {
                Some(t) => t,
                None => return Ok(TotalFigures::default()),
            },
        };
        let e = energy::energy(store, host, source, from, now_ms)?;
        let boundary = floor_to(now_ms, HOUR_MS) - HOUR_MS;
        let (closed, open): (Vec<_>, Vec<_>) = e.buckets.iter().partition(|b| b.end_ms <= boundary);
        // The hours in which a price may change, by their minutes: the closed buckets' all
        // end by the boundary, the open ones' after it.
        let fine =
            e.minute_buckets_where(store, |start, end| tariff.may_change_within(start, end))?;
        let price = |closed: bool| -> Result<f64, LedgerError> {
            let v: Vec<(i64, i64, f64)> = fine
                .iter()
                .filter(|m| (m.1 <= boundary) == closed)
                .copied()
                .collect();
            Ok(price::cost_of_energy(tariff, &v)?.energy_cost)
        };
        let sum = |bs: &[&energy::Bucket], closed: bool| -> Result<TotalFigures, LedgerError> {
            Ok(TotalFigures {
                kwh: bs.iter().map(|b| b.wh).sum::<f64>() / 1000.0,
                cost: price(closed)?,
                covered_hours: bs.iter().map(|b| b.covered_ms).sum::<i64>() as f64 / MS_PER_HOUR,
            })
        };
        let c = sum(&closed, true)?;
        self.closed.kwh += c.kwh;
        self.closed.cost += c.cost;
        self.closed.covered_hours += c.covered_hours;
        self.until_ms = Some(boundary.max(from));
        let o = sum(&open, false)?;
        Ok(TotalFigures {
            kwh: self.closed.kwh + o.kwh + 0.0,
            cost: self.closed.cost + o.cost + 0.0,
            covered_hours: self.closed.covered_hours + o.covered_hours,
        })
    }
}

impl RunningTotal {
    /// A running total of what was measured from `from_ms` (UTC ms) on.
    pub fn since(from_ms: i64) -> RunningTotal {
        RunningTotal {
            start_ms: Some(from_ms),
            until_ms: Some(from_ms),
            ..RunningTotal::default()
        }
    }

    /// Start again from the beginning when the store holds more (or less) energy in the
    /// closed hours than they were summed at. Only for a total that starts on an hour (the
    /// closed hours are then whole hour rollups); at most once a [`RECHECK_MS`].
    fn recheck(
        &mut self,
        store: &Store,
        host: &str,
        source: &SourceId,
        now_ms: i64,
    ) -> Result<(), LedgerError> {
        let Some(until) = self.until_ms else {
            return Ok(());
        };
        let start = self.start_ms.unwrap_or(i64::MIN);
        if now_ms - self.checked_ms < RECHECK_MS || (start != i64::MIN && start % HOUR_MS != 0) {
            return Ok(());
        }
        self.checked_ms = now_ms;
        let Some(series) = energy::power_series(store, host, source)? else {
            return Ok(());
        };
        let stored_kwh = (store.hour_sums(&series, start, until)?.energy_wh
            + energy::counted_wh(store, host, source, start, until)?)
            / 1000.0;
        if (stored_kwh - self.closed.kwh).abs() > 1e-6 {
            tracing::info!(
                "{source}: {:.6} kWh stored in hours already counted ({:.6} kWh when they \
                 were): counting them again",
                stored_kwh,
                self.closed.kwh
            );
            self.until_ms = self.start_ms;
            self.closed = TotalFigures::default();
            self.recounts += 1;
        }
        Ok(())
    }

    /// How often samples stored late into counted hours made it count them again.
    pub fn recounts(&self) -> u32 {
        self.recounts
    }
}

/// Today's (from local midnight), this month's and all-time figures, each a
/// [`RunningTotal`]; today's and this month's start again when the day or month changes in
/// the tariff's time zone.
#[derive(Debug, Clone, Default)]
pub struct RunningPeriods {
    day: Option<(i64, RunningTotal)>,
    month: Option<(i64, RunningTotal)>,
    all: RunningTotal,
    /// The figures of the last refresh that succeeded.
    last: Option<PeriodFigures>,
}

/// What [`RunningPeriods::refresh`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PeriodFigures {
    pub today: TotalFigures,
    pub month: TotalFigures,
    pub total: TotalFigures,
}

impl RunningPeriods {
    /// The figures at `now`.
    pub fn refresh(
        &mut self,
        store: &Store,
        host: &str,
        source: &SourceId,
        tariff: &Tariff,
        now: DateTime<Utc>,
    ) -> Result<PeriodFigures, LedgerError> {
        let tz = tariff.tz();
        let date = now.with_timezone(&tz).date_naive();
        let day_start = local_midnight(tz, date);
        let month_start = local_midnight(tz, date.with_day(1).unwrap_or(date));
        let now_ms = now.timestamp_millis();
        let period = |slot: &mut Option<(i64, RunningTotal)>, start: i64| {
            if slot.as_ref().is_none_or(|(s, _)| *s != start) {
                *slot = Some((start, RunningTotal::since(start)));
            }
            match slot {
                Some((_, t)) => t.refresh(store, host, source, tariff, now_ms),
                None => Ok(TotalFigures::default()),
            }
        };
        let figures = PeriodFigures {
            today: period(&mut self.day, day_start)?,
            month: period(&mut self.month, month_start)?,
            total: self.all.refresh(store, host, source, tariff, now_ms)?,
        };
        self.last = Some(figures);
        Ok(figures)
    }

    /// The figures of the last refresh that succeeded.
    pub fn last(&self) -> Option<PeriodFigures> {
        self.last
    }
}
