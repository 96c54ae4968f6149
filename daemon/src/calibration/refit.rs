//! Fitting from the stored history: on demand (`wattson calibration fit`), and by the daemon
//! when the meter is back and the newest calibration has drifted outside its interval
//! against it, or was borrowed from another host ([`check`]).

use std::collections::BTreeMap;

use wattson_collectors::SysRoot;

use super::CalibrationError;
use super::history::{Table, minute_means, signals, wall_series};
use super::model::{Feature, Hardware, WallModel};
use super::priced::DriftCheck;
use crate::store::{DAY_MS, Series, Store};

/// What to fit.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The signals to fit over; empty: every one the host stores.
    pub features: Vec<Feature>,
    /// The wall meter's source (`meter:wall`); `None`: the one with the most minutes.
    pub wall: Option<String>,
    pub from_ms: i64,
    pub to_ms: i64,
    /// The later share of the minutes each candidate is tested on.
    pub holdout: f64,
}

/// This machine's hardware under `root`, as a calibration records it.
pub fn hardware(root: &SysRoot, host: &str) -> Hardware {
    let f = crate::sweep::fingerprint::gather(root, host, "");
    Hardware {
        cpu_model: f.cpu.model_name,
        logical_cpus: f.cpu.logical_cpus,
        memory_bytes: f.memory_bytes,
    }
}

/// A calibration of `host` fitted on its history as `request` asks (not stored).
pub fn from_history(
    store: &Store,
    host: &str,
    request: &Request,
    hardware: Hardware,
    now_ms: i64,
) -> Result<WallModel, CalibrationError> {
    let (from, to) = (request.from_ms, request.to_ms);
    let wanted = &request.features;
    let mut stored = signals(store, host)?;
    if !wanted.is_empty() {
        if let Some(w) = wanted.iter().find(|w| !stored.iter().any(|(f, _)| f == *w)) {
            return Err(CalibrationError::NotEnough(format!(
                "{host} has no stored {}: it has {}",
                w.name(),
                names(&stored)
            )));
        }
        stored.retain(|(f, _)| wanted.contains(f));
    }
    if stored.is_empty() {
        return Err(CalibrationError::NotEnough(format!(
            "{host} stores no signal a model could read (RAPL, hwmon, GPU, IPMI or UPS power, \
             the CPU's busy share or frequency): enable the collectors in [cpu] and [power]"
        )));
    }
    let walls = wall_series(store, host, request.wall.as_deref())?;
    let mut best: Option<(Series, BTreeMap<i64, f64>)> = None;
    for w in walls {
        let m = minute_means(store, &w, from, to)?;
        if best.as_ref().is_none_or(|(_, b)| m.len() > b.len()) {
            best = Some((w, m));
        }
    }
    let Some((wall, wall_minutes)) = best else {
        return Err(CalibrationError::NotEnough(format!(
            "{host} has no wall meter's power stored{}: a calibration needs the meter in",
            request
                .wall
                .as_deref()
                .map(|w| format!(" from {w}"))
                .unwrap_or_default()
        )));
    };
    // Signals stored for at least nine in ten of the wall's minutes; the rest would leave
    // too few minutes in which every signal is there.
    let mut kept: Vec<(Feature, BTreeMap<i64, f64>)> = Vec::new();
    for (f, s) in stored {
        let m = minute_means(store, &s, from, to)?;
        let shared = wall_minutes.keys().filter(|k| m.contains_key(k)).count();
        if shared * 10 >= wall_minutes.len() * 9 && shared > 0 {
            kept.push((f, m));
        }
    }
    let (features, columns): (Vec<Feature>, Vec<_>) = kept.into_iter().unzip();
    let table = Table::aligned(Some(&wall_minutes), &columns);
    super::choose::calibrate(
        host,
        &wall.source.to_string(),
        &table,
        &features,
        request.holdout,
        hardware,
        now_ms,
    )
}

fn names(stored: &[(Feature, Series)]) -> String {
    if stored.is_empty() {
        return "none".into();
    }
    stored
        .iter()
        .map(|(f, _)| f.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The daemon fits again once the meter and the estimate have shared this many minutes of
/// the last 24 hours: half a day, enough to see a drift from noise.
pub const MIN_SHARED_MINUTES: usize = 12 * 60;

/// The share of the history a refit tests its candidates on, as `calibration fit` does by
/// default.
pub const HOLDOUT: f64 = 0.3;

/// What the daemon's check found.
#[derive(Debug, Clone, PartialEq)]
pub enum Checked {
    /// The calibration stands: its drift against the wall over the last 24 hours.
    Kept(DriftCheck),
    /// Fitted again and stored: why, and the new calibration.
    Refitted { why: String, model: Box<WallModel> },
}

/// With the meter in: `host`'s newest calibration beside the wall over the last 24 hours,
/// once it is a day old and the two share [`MIN_SHARED_MINUTES`] (`None` before, or without
/// a calibration). Fitted again (its own signals and wall source) and stored when it drifted
/// outside its interval, on those 24 hours (the machine as it is now: a disk added, a
/// setting changed); or when it was borrowed from another host, on the last 30 days of this
/// host's own.
pub fn check(
    store: &Store,
    host: &str,
    hardware: Hardware,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<Checked>, CalibrationError> {
    let now_ms = now.timestamp_millis();
    let Some(model) = super::persist::latest(store, host)? else {
        return Ok(None);
    };
    if model.created_ms > now_ms - DAY_MS {
        return Ok(None);
    }
    let Some(drift) = super::priced::drift(store, host, now)? else {
        return Ok(None);
    };
    if drift.side.minutes < MIN_SHARED_MINUTES {
        return Ok(None);
    }
    let (why, span) = if drift.side.outside_interval {
        let why = format!(
            "the estimate read {:+.1} % against {} over the last 24 h's {} minutes, outside \
             its +/- {:.1} %",
            drift.side.drift_pct, drift.side.wall_source, drift.side.minutes, drift.interval_pct
        );
        (why, DAY_MS)
    } else if let Some(from) = &model.borrowed_from {
        (
            format!("borrowed from {from}, and {host}'s own meter is in"),
            30 * DAY_MS,
        )
    } else {
        return Ok(Some(Checked::Kept(drift)));
    };
    let request = Request {
        features: model.model.features.clone(),
        wall: Some(drift.side.wall_source.clone()),
        from_ms: now_ms - span,
        to_ms: now_ms,
        holdout: HOLDOUT,
    };
    let fitted = from_history(store, host, &request, hardware, now_ms)?;
    super::persist::save(store, host, &fitted)?;
    Ok(Some(Checked::Refitted {
        why,
        model: Box::new(fitted),
    }))
}

#[cfg(test)]
mod tests {
    use wattson_collectors::{Metric, Sample, SourceId};

    use super::*;
    use crate::store::{HOUR_MS, StoreOptions, Writer};

    /// An hour-aligned start in 2023.
    const T0: i64 = 1_699_999_200_000;

    fn package_w(s: i64) -> f64 {
        8.0 + 50.0 * ((s as f64) / 1800.0).sin().abs()
    }

    /// The wall: 23 W + 1.12 x the package, and 5 W more from 12 h on (a disk added).
    fn wall_w(s: i64) -> f64 {
        23.0 + 1.12 * package_w(s) + if s >= 12 * 3600 { 5.0 } else { 0.0 }
    }

    #[test]
    fn a_calibration_drifted_outside_its_interval_is_fitted_again_on_the_last_day() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = StoreOptions {
            host: "h".to_owned(),
            ..StoreOptions::default()
        };
        opts.spacing_ms.insert(SourceId::Rapl, 10_000);
        opts.spacing_ms.insert(SourceId::meter("wall"), 10_000);
        let mut w = Writer::new(Store::open(&dir.path().join("r.db"), &opts).unwrap(), opts);
        let batch: Vec<Sample> = (0..36 * 3600)
            .step_by(10)
            .flat_map(|s| {
                [
                    Sample::new(
                        T0 + s * 1000,
                        SourceId::Rapl,
                        Metric::Power,
                        "package-0",
                        package_w(s),
                    ),
                    Sample::new(
                        T0 + s * 1000,
                        SourceId::meter("wall"),
                        Metric::Power,
                        "",
                        wall_w(s),
                    ),
                ]
            })
            .collect();
        w.push(None, batch);
        w.flush().unwrap();
        let store = w.store();
        let hardware = Hardware {
            cpu_model: None,
            logical_cpus: 2,
            memory_bytes: None,
        };
        let first = Request {
            features: vec![Feature::parse("rapl/power/package-0").unwrap()],
            wall: None,
            from_ms: T0,
            to_ms: T0 + 10 * HOUR_MS,
            holdout: HOLDOUT,
        };
        let at = |h: i64| chrono::DateTime::from_timestamp_millis(T0 + h * HOUR_MS).unwrap();
        let model = from_history(store, "h", &first, hardware.clone(), T0 + 10 * HOUR_MS).unwrap();
        crate::calibration::persist::save(store, "h", &model).unwrap();
        // A day after the model: 24 h shared, 5 W off from 12 h on.
        let Some(Checked::Refitted { why, model: again }) =
            check(store, "h", hardware.clone(), at(36)).unwrap()
        else {
            panic!("not fitted again");
        };
        assert!(why.contains("outside its +/- "), "{why}");
        assert_eq!(again.from_ms, T0 + 12 * HOUR_MS, "fitted on the last 24 h");
        assert_eq!(again.model.features, model.model.features);
        let d = crate::calibration::priced::drift(store, "h", at(36))
            .unwrap()
            .unwrap();
        assert!(!d.side.outside_interval, "{d:?}");
        assert!(d.side.drift_pct.abs() < 0.5, "{d:?}");
        // The new one is not judged before it is a day old.
        assert!(check(store, "h", hardware, at(36)).unwrap().is_none());
        assert_eq!(again.minutes, 24 * 60);
    }
}
