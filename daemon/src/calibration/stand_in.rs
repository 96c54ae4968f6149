//! While the meter was away: the stretches of a window in which the host's wall meter
//! stored nothing and a calibration stood in for it, the energy and money it estimated over
//! each, and how good it was, checked against the wall over the day after the meter came
//! back (the stretch itself has no wall to check against; the model's drift on the
//! meter's return is the nearest measure of its error while it stood in).
//!
//! The model that stood in for a stretch is the newest whose fitted history ended before
//! the stretch began: what could have been used then, and one that never saw the wall it is
//! checked against.

use serde::Serialize;
use wattson_collectors::SourceId;

use super::CalibrationError;
use super::estimate::{self, SideBySide};
use super::model::WallModel;
use super::priced::{Priced, price};
use crate::ledger::energy::power_series;
use crate::store::{DAY_MS, HOUR_MS, MINUTE_MS, Store, floor_to};
use crate::tariff::Tariff;

/// The shortest stretch without the wall that counts as the meter away (shorter ones are
/// the ledger's gaps: a restart, a dropped cable).
pub const MIN_AWAY_MS: i64 = HOUR_MS;
/// How long after the meter's return the model is checked against the wall.
pub const CHECK_MS: i64 = DAY_MS;

/// One stretch the meter was away and a calibration stood in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoodIn {
    /// The stretch the wall meter stored nothing, UTC ms: from the end of its last minute
    /// before to the start of its first minute after (or the window's end).
    pub away_from_ms: i64,
    pub away_to_ms: i64,
    /// When the model that stood in was fitted.
    pub model_created_ms: i64,
    /// Its estimate over the stretch, priced.
    pub estimate: Priced,
    /// Back: the model against the wall over the day after the meter came back; `None`
    /// while it has not (the stretch runs to the window's end) or the day after holds no
    /// minute both cover.
    pub on_return: Option<ReturnCheck>,
}

/// The model against the wall once the meter was back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReturnCheck {
    pub from_ms: i64,
    pub to_ms: i64,
    #[serde(flatten)]
    pub side: SideBySide,
}

/// The stretches in `[from_ms, to_ms)` that `host`'s wall meter `wall` stored nothing for
/// at least [`MIN_AWAY_MS`] and one of its calibrations could stand in, each estimated and
/// priced at `tariff`, and checked on the meter's return with what the database holds up
/// to `now_ms`.
pub fn stretches(
    store: &Store,
    host: &str,
    wall: &SourceId,
    tariff: &Tariff,
    (from_ms, to_ms): (i64, i64),
    now_ms: i64,
) -> Result<Vec<StoodIn>, CalibrationError> {
    let models = super::persist::all(store, host)?;
    if models.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for (away_from, away_to) in away(store, host, wall, from_ms, to_ms)? {
        let Some(model) = models.iter().find(|m| m.to_ms <= away_from) else {
            continue;
        };
        let estimate = price(
            estimate::over(store, host, model, away_from, away_to)?,
            tariff,
        )?;
        if estimate.estimate.minutes == 0 && estimate.estimate.withheld.is_empty() {
            continue;
        }
        out.push(StoodIn {
            away_from_ms: away_from,
            away_to_ms: away_to,
            model_created_ms: model.created_ms,
            estimate,
            on_return: on_return(store, host, model, away_to, to_ms, now_ms)?,
        });
    }
    Ok(out)
}

/// The model against the wall over the day after `back_ms`, when the meter was back
/// before the window's end.
fn on_return(
    store: &Store,
    host: &str,
    model: &WallModel,
    back_ms: i64,
    window_end_ms: i64,
    now_ms: i64,
) -> Result<Option<ReturnCheck>, CalibrationError> {
    if back_ms >= window_end_ms {
        return Ok(None);
    }
    let to_ms = back_ms.saturating_add(CHECK_MS).min(now_ms);
    let e = estimate::over(store, host, model, back_ms, to_ms)?;
    Ok(e.wall.map(|side| ReturnCheck {
        from_ms: back_ms,
        to_ms,
        side,
    }))
}

/// The stretches of `[from_ms, to_ms)`, to the minute, in which the wall stored no energy
/// for at least [`MIN_AWAY_MS`].
fn away(
    store: &Store,
    host: &str,
    wall: &SourceId,
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<(i64, i64)>, CalibrationError> {
    let Some(series) = power_series(store, host, wall)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    // The end of the last minute the wall covered.
    let mut after = None::<i64>;
    let mut covered = |from: i64, to: i64| {
        if let Some(end) = after
            && from - end >= MIN_AWAY_MS
        {
            out.push((end, from));
        }
        after = Some(after.map_or(to, |a| a.max(to)));
    };
    // An hour the wall covered whole needs none of its minutes read: over a year of a meter
    // that stayed in, a few hours' minutes are read, not 8,760.
    for hour in store.hour_rollups(&series, floor_to(from_ms, HOUR_MS), to_ms)? {
        let end = hour.bucket_ms + HOUR_MS;
        if hour.covered_ms == Some(HOUR_MS) && hour.bucket_ms >= from_ms && end <= to_ms {
            covered(hour.bucket_ms, end);
            continue;
        }
        for m in store.minute_rollups(&series, hour.bucket_ms.max(from_ms), end.min(to_ms))? {
            if m.covered_ms.is_some_and(|c| c > 0) || m.n > 0 {
                covered(m.bucket_ms, m.bucket_ms + MINUTE_MS);
            }
        }
    }
    if let Some(end) = after
        && to_ms - end >= MIN_AWAY_MS
    {
        out.push((end, to_ms));
    }
    Ok(out)
}

/// A stretch in lines, for the report: when the meter was away, what the calibration
/// estimated (with what it withheld), and how it did once the meter was back.
pub fn lines(s: &StoodIn) -> Vec<String> {
    let at = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .map(|d| d.format("%Y-%m-%d %H:%M UTC").to_string())
            .unwrap_or_default()
    };
    let mut out = vec![format!(
        "the meter was away from {} to {} ({})",
        at(s.away_from_ms),
        at(s.away_to_ms),
        crate::ledger::interval::hours_text(
            (s.away_to_ms - s.away_from_ms) as f64 / HOUR_MS as f64
        )
    )];
    out.extend(super::priced::lines(&s.estimate));
    out.push(match &s.on_return {
        Some(r) => format!(
            "on the meter's return, over {} minutes both covered to {}: the calibration read \
             {:+.1} % against the wall ({:.3} kWh estimated, {:.3} kWh at the wall), {} its \
             +/- {:.1} %{}",
            r.side.minutes,
            at(r.to_ms),
            r.side.drift_pct,
            r.side.estimated_wh / 1000.0,
            r.side.wall_wh / 1000.0,
            if r.side.outside_interval {
                "outside"
            } else {
                "inside"
            },
            s.estimate.estimate.interval_pct,
            if r.side.outside_interval {
                ": the stretch's estimate is in doubt by as much; fit the calibration again"
            } else {
                ""
            }
        ),
        None => {
            "not checked against the wall: the meter has not come back in the window".to_owned()
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use wattson_collectors::{Metric, Sample};

    use super::*;
    use crate::store::{StoreOptions, Writer};

    /// 2023-11-14T22:00:00Z, an hour boundary.
    const T0: i64 = 1_700_000_000_000 - 1_700_000_000_000 % HOUR_MS;

    #[test]
    fn the_meter_is_away_where_the_wall_stored_nothing_for_an_hour_or_more() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = StoreOptions {
            host: "h".to_owned(),
            ..StoreOptions::default()
        };
        opts.spacing_ms.insert(SourceId::meter("wall"), 10_000);
        let mut w = Writer::new(Store::open(&dir.path().join("a.db"), &opts).unwrap(), opts);
        // The wall every 10 s: 00:00-02:30, 03:00-03:40 (a 30-minute gap: not away),
        // 04:50-06:00; then nothing to the window's end at 08:00.
        let stretches = [(0, 150), (180, 220), (290, 360)];
        let at = |minute: i64| T0 + minute * MINUTE_MS;
        for (a, b) in stretches {
            let samples: Vec<Sample> = (0..=(b - a) * 6)
                .map(|k| {
                    Sample::new(
                        at(a) + k * 10_000,
                        SourceId::meter("wall"),
                        Metric::Power,
                        "",
                        40.0,
                    )
                })
                .collect();
            w.push(None, samples);
        }
        w.flush().unwrap();
        let wall = SourceId::meter("wall");
        let found = away(w.store(), "h", &wall, T0, at(480)).unwrap();
        assert_eq!(found, vec![(at(221), at(290)), (at(361), at(480))]);
        // From inside an hour to inside another: the hours at either end read by the minute.
        let found = away(w.store(), "h", &wall, at(95), at(300)).unwrap();
        assert_eq!(found, vec![(at(221), at(290))]);
    }
}
