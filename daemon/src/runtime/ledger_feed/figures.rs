//! The ledger's figures as one store read gives them, on the store's writer thread: the
//! running totals, the year on the tariff (priced again when an hour closes or the price
//! series change) and the newest sample; and how they enter the state.

use std::time::{Duration, Instant};
use wattson_collectors::SourceId;

use crate::ledger::costs::{self, PeriodCost};
use crate::ledger::running::{PeriodFigures, RunningPeriods};
use crate::publish::mqtt::StateExtras;
use crate::tariff::Tariff;
use crate::tariff::store::Kind;

/// What one store read says.
#[derive(Debug, Clone, Default)]
pub(super) struct StoreFigures {
    pub(super) periods: Option<PeriodFigures>,
    /// The year on the tariff, and its basis phrase.
    pub(super) annual_cost: Option<(f64, String)>,
    pub(super) newest_ms: Option<i64>,
    /// The price now (currency per kWh) and its source.
    pub(super) price_now: Option<(f64, String)>,
    /// Standby measured at the wall, W, and its 95 % band.
    pub(super) standby: StandbyRead,
}

/// What the read says of standby measured at the wall.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) enum StandbyRead {
    /// W and its 95 % band; `None` where the host has not slept with the meter in.
    Read(Option<(f64, Option<f64>)>),
    /// The read failed: the last one read is served.
    #[default]
    Unread,
}

/// The configured tariff with the store's price series, loaded again only when their
/// revision changed; a change starts the running totals again, whose closed hours were
/// priced by the old slots, and prices the year again at once.
pub(super) fn with_series<'a>(
    s: &crate::store::Store,
    base: &'a Tariff,
    cached: &'a mut Option<((i64, i64), Tariff)>,
    running: &mut RunningPeriods,
    projection: &mut Projection,
) -> &'a Tariff {
    let rev = crate::tariff::store::revision(s).ok().map(|rev| {
        // A live price's open slot holds until "now plus an hour" as loaded: reload hourly.
        let hour = chrono::Utc::now().timestamp_millis() / crate::store::HOUR_MS;
        (rev.0 * 1_000_003 + rev.1, hour)
    });
    let fresh = match (rev, cached.as_ref()) {
        (Some(rev), Some((r, _))) => *r == rev,
        // The revision cannot be read: keep what was loaded.
        (None, Some(_)) => true,
        (_, None) => false,
    };
    if !fresh {
        let now_ms = chrono::Utc::now().timestamp_millis();
        let t = match crate::tariff::store::applied(s, Kind::Price, base.currency(), now_ms) {
            Ok(set) => base.clone().with_series(set),
            Err(e) => {
                tracing::warn!(
                    "reading the price series: {}",
                    wattson_collectors::ErrorChain(&e)
                );
                base.clone()
            }
        };
        let rev = rev.unwrap_or_default();
        if cached.as_ref().is_some_and(|c| c.0.0 != rev.0) {
            *running = RunningPeriods::default();
            projection.0 = None;
        }
        *cached = Some((rev, t));
    }
    cached.as_ref().map_or(base, |c| &c.1)
}

/// The annual projection and its basis phrase, and when (and in which UTC hour) it was
/// computed.
pub(super) type Projection = (Option<(Instant, i64)>, Option<(f64, String)>);

/// How often the annual projection is computed again.
const PROJECTION_EVERY: Duration = Duration::from_secs(60);
/// How often it is tried while there is none yet.
pub(super) const PROJECTION_RETRY: Duration = Duration::from_secs(5);

/// On the store's thread: today's, this month's and all-time figures (running totals, so a
/// read prices only the last two hours), the projection when it is due, and the newest
/// sample.
pub(super) fn read_figures(
    s: &crate::store::Store,
    (host, source): (&str, &SourceId),
    accuracy: Option<wattson_collectors::meter::Accuracy>,
    tariff: &Tariff,
    running: &mut RunningPeriods,
    projection: &mut Projection,
    now: chrono::DateTime<chrono::Utc>,
) -> StoreFigures {
    // A read that fails (the database busy with another writer's commit) serves the last
    // figures read, never none: a publish without them would blank today's cost, and its
    // year would fall back to the current draw's.
    let periods = match running.refresh(s, host, source, tariff, now) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(
                "ledger totals (the last ones are served): {}",
                wattson_collectors::ErrorChain(&e)
            );
            running.last()
        }
    };
    // Until there is a projection, a read tries every few seconds (so it appears soon
    // after there is enough history, not a minute later, and a daemon whose meter never
    // answers does not price its history on every publish); then once a minute.
    let every = if projection.1.is_none() {
        PROJECTION_RETRY
    } else {
        PROJECTION_EVERY
    };
    // A year's price starts on the local day, and its load shape counts the closed hours:
    // read again as soon as an hour closes, so that no surface shows the last hour's
    // figure after `status` shows the next.
    let hour = now.timestamp_millis().div_euclid(crate::store::HOUR_MS);
    if projection
        .0
        .is_none_or(|(at, h)| at.elapsed() >= every || h != hour)
    {
        let total = periods.map(|p| PeriodCost {
            from_ms: 0,
            to_ms: now.timestamp_millis(),
            kwh: p.total.kwh,
            cost: p.total.cost,
            covered_hours: p.total.covered_hours,
            mean_watts: None,
            gaps: 0,
            counted_kwh: 0.0,
            approximate_hours: 0,
        });
        let annual = match costs::summary_with_total(s, host, source, accuracy, tariff, now, total)
        {
            Ok(summary) => summary.annual_cost.zip(summary.annual_basis),
            Err(e) => {
                tracing::warn!(
                    "ledger projection (the last one is served): {}",
                    wattson_collectors::ErrorChain(&e)
                );
                projection.1.clone()
            }
        };
        *projection = (Some((Instant::now(), hour)), annual);
    }
    // A few rows (the gaps the host was away in): read at every publish, so a sleep's
    // standby shows as soon as the meter's counter settles it.
    let standby =
        crate::ledger::standby::measured(s, host, source, (0, now.timestamp_millis() + 1), tariff)
            .inspect_err(|e| tracing::debug!("standby: {}", wattson_collectors::ErrorChain(e)))
            .map_or(StandbyRead::Unread, |figures| {
                StandbyRead::Read(
                    figures
                        .into_iter()
                        .find(|f| f.away == crate::store::Away::Asleep)
                        .map(|f| (f.watts, f.ci95_watts)),
                )
            });
    let newest_ms = crate::ledger::energy::power_series(s, host, source)
        .ok()
        .flatten()
        .and_then(|series| s.newest_ms(&series).ok().flatten());
    StoreFigures {
        periods,
        annual_cost: projection.1.clone(),
        newest_ms,
        price_now: None,
        standby,
    }
}

/// The store's figures into the state; the published energy never goes down in a run.
pub(super) fn apply(extras: &mut StateExtras, f: &StoreFigures, last_energy: &mut Option<f64>) {
    extras.price_now.clone_from(&f.price_now);
    if let StandbyRead::Read(standby) = f.standby {
        extras.standby_watts = standby;
    }
    let Some(p) = &f.periods else { return };
    // `+ 0.0` turns a -0.0 from rounding into 0.0.
    let energy = last_energy.map_or(p.total.kwh, |l| l.max(p.total.kwh)) + 0.0;
    *last_energy = Some(energy);
    extras.energy_total_kwh = Some(energy);
    extras.energy_ts_ms = f.newest_ms;
    extras.energy_today_kwh = Some(p.today.kwh + 0.0);
    extras.cost_today = Some(p.today.cost + 0.0);
    extras.cost_month = Some(p.month.cost + 0.0);
    extras.cost_total = Some(p.total.cost + 0.0);
    extras.annual_projection = f.annual_cost.as_ref().map(|a| a.0);
    extras.annual_basis = f.annual_cost.as_ref().map(|a| a.1.clone());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{HOUR_MS, Store, StoreOptions, Writer};
    use wattson_collectors::{Metric, Sample};

    /// The year is priced again as soon as an hour closes, not up to a minute later: at
    /// 01:00:00, 30 s after the figure read at 00:59:30, the hour that just closed is in it.
    #[test]
    fn the_year_is_read_again_when_an_hour_closes() {
        let dir = tempfile::tempdir().unwrap();
        let wall = SourceId::meter("wall");
        let mut opts = StoreOptions {
            host: "h".into(),
            ..StoreOptions::default()
        };
        opts.spacing_ms.insert(wall.clone(), 1000);
        let mut w = Writer::new(
            Store::open(&dir.path().join("f.db"), &opts).unwrap(),
            opts.clone(),
        );
        // Monday 2025-01-13 00:00 UTC: 100 W to 00:59:30, then 5 kW to 01:00:00.
        let t0 = 1_736_726_400_000;
        let push = |w: &mut Writer, from_s: i64, to_s: i64, watts: f64| {
            let samples: Vec<Sample> = (from_s..=to_s)
                .map(|s| Sample::new(t0 + s * 1000, wall.clone(), Metric::Power, "", watts))
                .collect();
            w.push(None, samples);
            w.flush().unwrap();
        };
        push(&mut w, 0, 3570, 100.0);
        let tariff = crate::ledger::costs::tariff(&crate::config::TariffConfig::default()).unwrap();
        let (mut running, mut projection) = (RunningPeriods::default(), (None, None));
        let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap();
        let first = read_figures(
            w.store(),
            ("h", &wall),
            None,
            &tariff,
            &mut running,
            &mut projection,
            at(t0 + 3_570_000),
        );
        push(&mut w, 3571, 3600, 5000.0);
        let next = read_figures(
            w.store(),
            ("h", &wall),
            None,
            &tariff,
            &mut running,
            &mut projection,
            at(t0 + HOUR_MS),
        );
        let (a, b) = (first.annual_cost.unwrap().0, next.annual_cost.unwrap().0);
        assert!(
            b > a * 1.01,
            "{a} then {b}: the closed hour's 5 kW is not in it"
        );
    }
}
