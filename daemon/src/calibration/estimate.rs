//! A stored model over a stretch of history: the estimated wall energy of the minutes it
//! can vouch for, the minutes it withheld and why, and the wall beside it where a meter was
//! there (how far the estimate has drifted).

use serde::Serialize;

use super::CalibrationError;
use super::history::{Table, minute_means, series_of, wall_series};
use super::model::WallModel;
use crate::store::{MINUTE_MS, Store};

/// Minutes withheld for one reason, as one stretch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Withheld {
    pub from_ms: i64,
    /// The end of its last minute.
    pub to_ms: i64,
    pub minutes: usize,
    pub reason: String,
}

/// The estimate and the wall over the minutes both cover.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideBySide {
    pub wall_source: String,
    pub minutes: usize,
    pub estimated_wh: f64,
    pub wall_wh: f64,
    /// The estimate over the wall, %, signed: positive when the estimate reads high.
    pub drift_pct: f64,
    /// Whether the drift is outside the model's stated interval: time to fit again.
    pub outside_interval: bool,
}

/// What a model estimates over `[from_ms, to_ms)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimated {
    pub from_ms: i64,
    pub to_ms: i64,
    /// Minutes estimated (each signal inside the range the model saw).
    pub minutes: usize,
    pub energy_wh: f64,
    /// 95 % half-width of `energy_wh`, Wh (the model's `interval_pct` of it).
    pub interval_wh: f64,
    pub interval_pct: f64,
    pub mean_w: Option<f64>,
    /// Where it came from and how sure ([`crate::calibration::WallModel::provenance`]): "estimated
    /// from the calibration of DATE on ordinary running, +/- X %", "estimated from a sweep on
    /// DATE, +/- B W (X %)".
    pub provenance: String,
    pub withheld: Vec<Withheld>,
    /// Minutes in the window with no reading of some signal the model needs.
    pub minutes_without_signals: usize,
    pub wall: Option<SideBySide>,
    /// The estimated energy by UTC hour: `(hour start ms, Wh)`, for pricing each hour at
    /// its own price.
    #[serde(skip)]
    pub hours: Vec<(i64, f64)>,
}

/// `model` over `host`'s history in `[from_ms, to_ms)`.
pub fn over(
    store: &Store,
    host: &str,
    model: &WallModel,
    from_ms: i64,
    to_ms: i64,
) -> Result<Estimated, CalibrationError> {
    let mut columns = Vec::new();
    for f in &model.model.features {
        let Some(series) = series_of(store, host, f)? else {
            return Err(CalibrationError::NotEnough(format!(
                "{host} has no stored {} (the model reads {}): nothing to estimate from",
                f.name(),
                model.model.describe()
            )));
        };
        columns.push(minute_means(store, &series, from_ms, to_ms)?);
    }
    let table = Table::aligned(None, &columns);
    let window_minutes = usize::try_from((to_ms - from_ms).max(0) / MINUTE_MS).unwrap_or(0);
    let mut withheld: Vec<Withheld> = Vec::new();
    // The stretch being withheld: its signal, the least and most it read.
    let mut open: Option<(usize, f64, f64)> = None;
    let mut estimates: Vec<(i64, f64)> = Vec::new();
    for (i, &minute) in table.minutes.iter().enumerate() {
        let values = table.row(i);
        let Some(signal) = model.outside(&values) else {
            estimates.push((minute, model.model.predict(&values).max(0.0)));
            continue;
        };
        match (withheld.last_mut(), open.as_mut()) {
            (Some(w), Some((k, lo, hi))) if *k == signal && w.to_ms == minute => {
                w.to_ms = minute + MINUTE_MS;
                w.minutes += 1;
                *lo = lo.min(values[signal]);
                *hi = hi.max(values[signal]);
                w.reason = model.outside_reason(signal, *lo, *hi);
            }
            _ => {
                open = Some((signal, values[signal], values[signal]));
                withheld.push(Withheld {
                    from_ms: minute,
                    to_ms: minute + MINUTE_MS,
                    minutes: 1,
                    reason: model.outside_reason(signal, values[signal], values[signal]),
                });
            }
        }
    }
    let mut hours: Vec<(i64, f64)> = Vec::new();
    for (m, w) in &estimates {
        let h = crate::store::floor_to(*m, crate::store::HOUR_MS);
        match hours.last_mut() {
            Some((start, wh)) if *start == h => *wh += w / 60.0,
            _ => hours.push((h, w / 60.0)),
        }
    }
    // Hour by hour, so a sum of stretches kept hour by hour ([`super::running`]) is the
    // same number to the last bit.
    let energy_wh = energy_of(&hours);
    let wall = side_by_side(store, host, model, &estimates, from_ms, to_ms)?;
    Ok(Estimated {
        from_ms,
        to_ms,
        minutes: estimates.len(),
        energy_wh,
        interval_wh: energy_wh * model.interval_pct / 100.0,
        interval_pct: model.interval_pct,
        mean_w: (!estimates.is_empty()).then(|| energy_wh * 60.0 / estimates.len() as f64),
        provenance: model.provenance(),
        withheld,
        minutes_without_signals: window_minutes.saturating_sub(table.len()),
        wall,
        hours,
    })
}

/// The energy of `hours` (`(hour start, Wh)`), added in order.
pub fn energy_of(hours: &[(i64, f64)]) -> f64 {
    hours.iter().fold(0.0, |e, (_, wh)| e + wh)
}

/// The wall meter's minutes beside the estimated ones, where the host had one.
fn side_by_side(
    store: &Store,
    host: &str,
    model: &WallModel,
    estimates: &[(i64, f64)],
    from_ms: i64,
    to_ms: i64,
) -> Result<Option<SideBySide>, CalibrationError> {
    let Some(series) = wall_series(store, host, Some(&model.wall_source))?
        .into_iter()
        .next()
        .or(wall_series(store, host, None)?.into_iter().next())
    else {
        return Ok(None);
    };
    let wall = minute_means(store, &series, from_ms, to_ms)?;
    let (mut est, mut got, mut minutes) = (0.0, 0.0, 0);
    for (m, e) in estimates {
        if let Some(w) = wall.get(m) {
            est += e / 60.0;
            got += w / 60.0;
            minutes += 1;
        }
    }
    if minutes == 0 || got <= 0.0 {
        return Ok(None);
    }
    let drift_pct = 100.0 * (est - got) / got;
    Ok(Some(SideBySide {
        wall_source: series.source.to_string(),
        minutes,
        estimated_wh: est,
        wall_wh: got,
        drift_pct,
        outside_interval: drift_pct.abs() > model.interval_pct,
    }))
}
