//! A calibration's estimate priced: the estimated energy of a stretch at the tariff's
//! price of each hour, projected to a year with the model's interval carried into the
//! money. `wattson calibration estimate`, and on a host with no meter `wattson status`, the
//! MQTT state, `/metrics` and the live page all show this ([`figures`] for the last four),
//! so they give one answer.

use serde::Serialize;

use super::CalibrationError;
use super::estimate::{self, Estimated};
use super::model::WallModel;
use crate::ledger::estimated_cost::{EstimatedCost, project};
use crate::store::Store;
use crate::tariff::Tariff;

/// An estimate over a stretch, and its money.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Priced {
    #[serde(flatten)]
    pub estimate: Estimated,
    pub currency: String,
    /// The energy cost of the minutes estimated (standing charge not included).
    pub window_cost: Option<f64>,
    /// Projected from the minutes estimated: per day, month, year, with the interval.
    pub cost: Option<EstimatedCost>,
}

/// `model` over `host`'s history in `[from_ms, to_ms)`, priced at `tariff`.
pub fn priced(
    store: &Store,
    host: &str,
    model: &WallModel,
    tariff: &Tariff,
    from_ms: i64,
    to_ms: i64,
) -> Result<Priced, CalibrationError> {
    price(estimate::over(store, host, model, from_ms, to_ms)?, tariff)
}

/// An estimate priced at `tariff`.
pub fn price(estimate: Estimated, tariff: &Tariff) -> Result<Priced, CalibrationError> {
    let covered_hours = estimate.minutes as f64 / 60.0;
    // The estimate keeps its minutes in all, not hour by hour: each hour its share.
    let share_ms = estimate.minutes as f64 * 60_000.0 / estimate.hours.len().max(1) as f64;
    let hours: Vec<(i64, f64, f64)> = estimate
        .hours
        .iter()
        .map(|&(h, wh)| (h, wh, share_ms))
        .collect();
    let cost = project(tariff, &hours, Some(estimate.interval_wh))?;
    Ok(Priced {
        window_cost: cost.as_ref().map(|c| c.cost_per_day * covered_hours / 24.0),
        currency: tariff.currency().to_owned(),
        cost,
        estimate,
    })
}

/// The money of a priced estimate in one line, as `calibration estimate`, `status` and the
/// report print it; `None` when nothing was estimated.
pub fn cost_line(p: &Priced) -> Option<String> {
    let c = p.cost.as_ref()?;
    let money = |v: f64| crate::ledger::price::format_money(v, &p.currency);
    Some(format!(
        "{} of energy over those minutes; a year at this rate: {:.0} kWh, {}{} (estimated, not \
         measured)",
        money(p.window_cost.unwrap_or(0.0)),
        c.kwh_per_year,
        money(c.cost_per_year),
        c.cost_per_year_ci95
            .map(|ci| format!(" +/- {}", money(ci)))
            .unwrap_or_default()
    ))
}

/// A priced estimate over a window in lines, for the report: what it rests on, the energy
/// and the minutes, what was withheld and why, and the money.
pub fn lines(p: &Priced) -> Vec<String> {
    let e = &p.estimate;
    let mut out = vec![format!(
        "{}: {:.3} kWh over {} minutes estimated{}",
        e.provenance,
        e.energy_wh / 1000.0,
        e.minutes,
        e.mean_w
            .map(|w| format!(", {w:.1} W on average"))
            .unwrap_or_default()
    )];
    for w in &e.withheld {
        out.push(format!(
            "withheld {} minutes from {}: {}",
            w.minutes,
            chrono::DateTime::from_timestamp_millis(w.from_ms)
                .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                .unwrap_or_default(),
            w.reason
        ));
    }
    if e.minutes_without_signals > 0 {
        out.push(format!(
            "{} minutes without a reading of every signal the model needs: not estimated",
            e.minutes_without_signals
        ));
    }
    out.push(cost_line(p).unwrap_or_else(|| "nothing estimated: no money to show".to_owned()));
    out
}

/// A host's energy and money estimated from its newest calibration, as `wattson
/// calibration estimate` prices it: today so far (from local midnight in the tariff's zone),
/// and the last 7 days, whose rate gives the year with the model's interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EstimatedFigures {
    /// Where it came from and how sure ([`crate::calibration::WallModel::provenance`]): "estimated
    /// from the calibration of DATE on ordinary running, +/- X %", "estimated from a sweep on
    /// DATE, +/- B W (X %)".
    pub provenance: String,
    pub today: Priced,
    pub last_7_days: Priced,
}

/// [`EstimatedFigures`] of `host` at `now`; `None` when it has no calibration.
pub fn figures(
    store: &Store,
    host: &str,
    tariff: &Tariff,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<EstimatedFigures>, CalibrationError> {
    let Some(model) = super::persist::latest(store, host)? else {
        return Ok(None);
    };
    let (day_start, now_ms) = today(tariff, now);
    Ok(Some(EstimatedFigures {
        provenance: model.provenance(),
        today: priced(store, host, &model, tariff, day_start, now_ms)?,
        last_7_days: priced(
            store,
            host,
            &model,
            tariff,
            now_ms - 7 * crate::store::DAY_MS,
            now_ms,
        )?,
    }))
}

/// Today so far: local midnight in the tariff's zone, and `now`, UTC ms.
pub fn today(tariff: &Tariff, now: chrono::DateTime<chrono::Utc>) -> (i64, i64) {
    use chrono::TimeZone as _;
    let tz = tariff.tz();
    let midnight = crate::ledger::costs::local_midnight(
        tz,
        tz.from_utc_datetime(&now.naive_utc()).date_naive(),
    );
    (midnight, now.timestamp_millis())
}

/// With the meter in: the newest calibration beside the wall over a stretch, so `wattson
/// status` can say how far the estimate has drifted and whether to fit again.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriftCheck {
    /// Where it came from and how sure ([`crate::calibration::WallModel::provenance`]): "estimated
    /// from the calibration of DATE on ordinary running, +/- X %", "estimated from a sweep on
    /// DATE, +/- B W (X %)".
    pub provenance: String,
    pub from_ms: i64,
    pub to_ms: i64,
    /// The model's stated interval, %.
    pub interval_pct: f64,
    #[serde(flatten)]
    pub side: super::estimate::SideBySide,
}

/// `host`'s newest calibration against its wall meter over the last 24 hours before `now`;
/// `None` without a calibration or without minutes both cover.
pub fn drift(
    store: &Store,
    host: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<DriftCheck>, CalibrationError> {
    let Some(model) = super::persist::latest(store, host)? else {
        return Ok(None);
    };
    let to_ms = now.timestamp_millis();
    let from_ms = to_ms - crate::store::DAY_MS;
    let e = estimate::over(store, host, &model, from_ms, to_ms)?;
    Ok(e.wall.map(|side| DriftCheck {
        provenance: model.provenance(),
        from_ms,
        to_ms,
        interval_pct: model.interval_pct,
        side,
    }))
}

/// A stored calibration that cannot be applied here (a signal it reads is not stored), as
/// the words `status` and the report show instead of a figure; other errors stay errors.
pub fn unavailable<T>(
    r: Result<Option<T>, CalibrationError>,
) -> Result<(Option<T>, Option<String>), CalibrationError> {
    match r {
        Ok(v) => Ok((v, None)),
        Err(CalibrationError::NotEnough(why)) => Ok((None, Some(why))),
        Err(e) => Err(e),
    }
}
