//! The week as the store holds it, for the sleep analysis: over a window, each local hour
//! of the week's mean wall power (the ledger's energy over its covered time), CPU busy
//! share, each service's wake-ups per second and the disks spun up in it.

use wattson_collectors::Metric;
use wattson_collectors::SourceId;
use wattson_collectors::source::channel;

use crate::analysis::sleep::{HourOfWeek, WEEK_HOURS};
use crate::ledger::load_shape::{LoadShape, hour_of_week};
use crate::store::{HOUR_MS, Resolution, SeriesFilter, Store, StoreError, floor_to};
use crate::zone::Zone;

/// Each hour of the week of `host` over `[from_ms, to_ms)`, its wall power from `source`,
/// local in `tz`; how many hours of wall power the window holds, and where they begin.
pub fn hours_of_week(
    store: &Store,
    host: &str,
    source: &SourceId,
    (from_ms, to_ms): (i64, i64),
    tz: Zone,
) -> Result<(Vec<HourOfWeek>, f64, Option<i64>), StoreError> {
    let e = crate::ledger::energy::energy(store, host, source, from_ms, to_ms)?;
    // Sampled buckets only: what a counter counted over a gap covers no time.
    let shape = LoadShape::new(
        e.buckets
            .iter()
            .filter(|b| !b.counted)
            .map(|b| (b.start_ms, b.end_ms, b.wh, b.covered_ms)),
        tz,
    );
    let mut hours: Vec<HourOfWeek> = (0..WEEK_HOURS)
        .map(|h| HourOfWeek {
            watts: shape.watts(h),
            ..HourOfWeek::default()
        })
        .collect();
    cpu(store, host, (from_ms, to_ms), tz, &mut hours)?;
    wakeups(store, host, (from_ms, to_ms), tz, &mut hours)?;
    for (ts, disk, by) in crate::idle::activity_hours::spinups(store, host, from_ms, to_ms)? {
        if let Some(h) = hour_of_week(ts, tz) {
            let seen = (disk, by);
            if !hours[h].disk_spinups.contains(&seen) {
                hours[h].disk_spinups.push(seen);
            }
        }
    }
    let first = e
        .buckets
        .iter()
        .find(|b| !b.counted && b.covered_ms > 0)
        .map(|b| b.start_ms.max(from_ms));
    Ok((hours, shape.covered_hours(), first))
}

/// The mean of the hourly CPU busy shares in each hour of the week.
fn cpu(
    store: &Store,
    host: &str,
    (from_ms, to_ms): (i64, i64),
    tz: Zone,
    hours: &mut [HourOfWeek],
) -> Result<(), StoreError> {
    let mut sum = vec![(0.0, 0_u32); WEEK_HOURS];
    let filter = SeriesFilter::all()
        .host(host)
        .metric(Metric::CpuBusy)
        .channel(channel::ALL);
    for (_, rows) in store.rollups(&filter, Resolution::Hour, floor_to(from_ms, HOUR_MS), to_ms)? {
        for r in rows.iter().filter(|r| r.mean.is_finite()) {
            if let Some(h) = hour_of_week(r.bucket_ms, tz) {
                sum[h].0 += r.mean;
                sum[h].1 += 1;
            }
        }
    }
    for (h, (s, n)) in hours.iter_mut().zip(sum) {
        h.cpu_busy = (n > 0).then(|| s / f64::from(n));
    }
    Ok(())
}

/// Each service's wake-ups per second in each hour of the week: its mean over the stored
/// hours that fall there (an hour it is absent from counts as none of its).
fn wakeups(
    store: &Store,
    host: &str,
    (from_ms, to_ms): (i64, i64),
    tz: Zone,
    hours: &mut [HourOfWeek],
) -> Result<(), StoreError> {
    let mut stored = vec![0_u32; WEEK_HOURS];
    let from = floor_to(from_ms, HOUR_MS);
    for (hour, rates) in crate::idle::activity_hours::wakeups_by_hour(store, host, from, to_ms)? {
        let Some(h) = hour_of_week(hour, tz) else {
            continue;
        };
        stored[h] += 1;
        for (name, rate) in rates {
            match hours[h].wakeups.iter_mut().find(|(n, _)| *n == name) {
                Some((_, r)) => *r += rate,
                None => hours[h].wakeups.push((name, rate)),
            }
        }
    }
    for (h, n) in hours.iter_mut().zip(stored).filter(|(_, n)| *n > 1) {
        for (_, r) in &mut h.wakeups {
            *r /= f64::from(n);
        }
    }
    Ok(())
}

/// How far back the section looks without `--since`, days: four of each day of the week.
pub const DEFAULT_DAYS: i64 = 28;

/// How the hours are judged and priced: `[sleep]`'s thresholds and resume energy, and the
/// standby figure with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub thresholds: crate::analysis::sleep::Thresholds,
    pub standby: Option<(f64, Option<f64>, String)>,
    /// Whether `standby` was given with `--standby-watts`: it then stands before the
    /// standby measured at the wall, which stands before what the file gives.
    pub standby_by_flag: bool,
    pub wake_wh: Option<f64>,
}

impl Settings {
    /// `config`'s, for this machine (`own`) or another host (whose standby only `flag`,
    /// `--standby-watts`, can give), the flag first.
    pub fn of(config: &crate::config::Config, own: bool, flag: Option<f64>) -> Settings {
        Settings {
            thresholds: config.sleep.thresholds,
            standby: if own {
                super::standby::standby_watts(config, flag)
            } else {
                flag.map(|w| (w, None, "given with --standby-watts".to_owned()))
            },
            standby_by_flag: flag.is_some(),
            wake_wh: config.sleep.wake_wh,
        }
    }
}

/// What one sleep section is asked for.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub host: &'a str,
    /// The configured wall source, for this machine [default: the store's meter].
    pub wall: Option<&'a SourceId>,
    /// The window, UTC ms [default: the [`DEFAULT_DAYS`] to `now_ms`].
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub now_ms: i64,
    pub settings: &'a Settings,
}

/// The sleep section of `asked.host` from `store`, priced at `tariff` (with the store's
/// price series) from today; `None` where the store holds no wall power of the host.
pub fn section(
    store: &Store,
    tariff: &crate::tariff::Tariff,
    asked: &Asked<'_>,
) -> Result<Option<super::SleepReport>, crate::report::ProduceError> {
    let primary = crate::ledger::PrimaryPower::new(asked.wall.cloned());
    let Some(source) = crate::ledger::energy::wall_power_source(store, asked.host, &primary)?
    else {
        return Ok(None);
    };
    let to = asked.until.unwrap_or(asked.now_ms);
    let from = asked
        .since
        .unwrap_or(to - DEFAULT_DAYS * 24 * HOUR_MS)
        .min(to);
    let tz = tariff.tz();
    let (hours, covered_hours, first) = hours_of_week(store, asked.host, &source, (from, to), tz)?;
    if covered_hours <= 0.0 {
        return Ok(None);
    }
    let date = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .map(|d| d.with_timezone(&tz).format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_default()
    };
    let input = super::SleepInput {
        hours,
        history: format!(
            "{source}'s stored history of {} from {} to {} ({} of wall power)",
            asked.host,
            date(first.unwrap_or(from)),
            date(to),
            crate::ledger::interval::hours_text(covered_hours)
        ),
        covered_hours,
        thresholds: asked.settings.thresholds,
        standby: super::standby::with_measured(
            asked.settings,
            &crate::ledger::standby::measured(
                store,
                asked.host,
                &source,
                (0, asked.now_ms + 1),
                tariff,
            )?,
        ),
        wake: wake(store, asked, &source, (from, to))?,
    };
    let today = chrono::DateTime::from_timestamp_millis(asked.now_ms)
        .map(|d| d.with_timezone(&tz).date_naive())
        .ok_or(crate::tariff::TariffError::Timestamp(asked.now_ms))
        .map_err(|e| cost_error("the day", e.into()))?;
    let day_ms = tz.start_of_day(today).timestamp_millis();
    super::build(&input, tariff, day_ms)
        .map(Some)
        .map_err(|e| cost_error("sleeping when idle", e))
}

/// The energy of one resume: measured at the wall where the history holds resumes (their
/// mean), else `[sleep] wake_wh`; with where it came from.
fn wake(
    store: &Store,
    asked: &Asked<'_>,
    source: &SourceId,
    window: (i64, i64),
) -> Result<Option<(f64, String)>, crate::report::ProduceError> {
    let measured = crate::ledger::standby::resumes(store, asked.host, source, window)?;
    if !measured.is_empty() {
        let n = measured.len();
        return Ok(Some((
            measured.iter().sum::<f64>() / n as f64,
            format!(
                "measured at the wall: the energy above the draw before the sleep in the {} min \
                 after each of {n} resume{}",
                crate::ledger::standby::RESUME_MS / 60_000,
                if n == 1 { "" } else { "s" }
            ),
        )));
    }
    Ok(asked
        .settings
        .wake_wh
        .map(|wh| (wh, "entered by hand: [sleep] wake_wh".to_owned())))
}

fn cost_error(what: &str, source: crate::ledger::price::CostError) -> crate::report::ProduceError {
    crate::report::ReportError::Cost {
        what: what.to_owned(),
        source,
    }
    .into()
}
