//! The calibration's estimate kept hour by hour for the daemon, so the MQTT state,
//! `/metrics` and the live page can show today's and the last 7 days' estimated energy and
//! money without reading a week of raw samples for every publish: each closed UTC hour is
//! estimated once ([`super::estimate::over`] over that hour) and kept; the stretches at
//! either end of a window are estimated again at each read. The figures are those
//! [`super::priced::figures`] gives over the same window, to the last bit: the same
//! minutes, the same hours, added in the same order.

use std::collections::BTreeMap;

use super::CalibrationError;
use super::estimate::{Estimated, energy_of, over};
use super::model::WallModel;
use super::priced::{EstimatedFigures, Priced, price};
use crate::store::{DAY_MS, HOUR_MS, Store, ceil_to, floor_to};
use crate::tariff::Tariff;

/// An hour is kept once it ended this long ago: samples of its last seconds may still be
/// on their way to the store.
const SETTLED_MS: i64 = 2 * 60 * 1000;

/// The kept hours of one model.
#[derive(Debug, Default)]
pub struct RunningEstimate {
    /// The model they were estimated with: its host and when it was fitted.
    model: Option<(String, i64)>,
    hours: BTreeMap<i64, Estimated>,
}

impl RunningEstimate {
    /// Today's and the last 7 days' figures of `host` at `now` from its newest model, as
    /// [`super::priced::figures`] gives them; `None` without a model. `oldest_ms` is the
    /// oldest raw sample the store keeps (`[storage] raw_retention` back from now): a kept
    /// hour before it is dropped, as the samples it was estimated from are.
    pub fn figures(
        &mut self,
        store: &Store,
        host: &str,
        tariff: &Tariff,
        now: chrono::DateTime<chrono::Utc>,
        oldest_ms: i64,
    ) -> Result<Option<EstimatedFigures>, CalibrationError> {
        let Some(model) = super::persist::latest(store, host)? else {
            self.hours.clear();
            return Ok(None);
        };
        let key = (model.host.clone(), model.created_ms);
        if self.model.as_ref() != Some(&key) {
            self.hours.clear();
            self.model = Some(key);
        }
        let now_ms = now.timestamp_millis();
        let week_from = now_ms - 7 * DAY_MS;
        self.hours.retain(|h, _| {
            *h >= floor_to(week_from, HOUR_MS) && *h >= floor_to(oldest_ms, HOUR_MS)
        });
        let (today_from, _) = super::priced::today(tariff, now);
        Ok(Some(EstimatedFigures {
            provenance: model.provenance(),
            today: self.priced(store, host, &model, tariff, (today_from, now_ms), now_ms)?,
            last_7_days: self.priced(store, host, &model, tariff, (week_from, now_ms), now_ms)?,
        }))
    }

    /// The window `[from, to)` estimated from the kept hours and the stretches at its ends,
    /// priced.
    fn priced(
        &mut self,
        store: &Store,
        host: &str,
        model: &WallModel,
        tariff: &Tariff,
        (from, to): (i64, i64),
        now_ms: i64,
    ) -> Result<Priced, CalibrationError> {
        let (first, last) = (ceil_to(from, HOUR_MS), floor_to(to, HOUR_MS));
        let mut parts: Vec<Estimated> = Vec::new();
        if first >= last {
            parts.push(over(store, host, model, from, to)?);
        } else {
            if from < first {
                parts.push(over(store, host, model, from, first)?);
            }
            let mut h = first;
            while h < last {
                if h + HOUR_MS + SETTLED_MS <= now_ms {
                    let kept = match self.hours.entry(h) {
                        std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                        std::collections::btree_map::Entry::Vacant(e) => {
                            e.insert(over(store, host, model, h, h + HOUR_MS)?)
                        }
                    };
                    parts.push(kept.clone());
                } else {
                    parts.push(over(store, host, model, h, h + HOUR_MS)?);
                }
                h += HOUR_MS;
            }
            if last < to {
                parts.push(over(store, host, model, last, to)?);
            }
        }
        price(joined(model, from, to, parts), tariff)
    }
}

/// Stretches of one window, in order, as one estimate (without the wall beside it).
fn joined(model: &WallModel, from_ms: i64, to_ms: i64, parts: Vec<Estimated>) -> Estimated {
    let mut hours: Vec<(i64, f64)> = Vec::new();
    let (mut minutes, mut without) = (0, 0);
    let mut withheld = Vec::new();
    for p in parts {
        minutes += p.minutes;
        without += p.minutes_without_signals;
        withheld.extend(p.withheld);
        hours.extend(p.hours);
    }
    let energy_wh = energy_of(&hours);
    Estimated {
        from_ms,
        to_ms,
        minutes,
        energy_wh,
        interval_wh: energy_wh * model.interval_pct / 100.0,
        interval_pct: model.interval_pct,
        mean_w: (minutes > 0).then(|| energy_wh * 60.0 / minutes as f64),
        provenance: model.provenance(),
        withheld,
        minutes_without_signals: without,
        wall: None,
        hours,
    }
}

#[cfg(test)]
mod tests {
    use wattson_collectors::{Metric, Sample, SourceId};

    use super::*;
    use crate::calibration::history::Table;
    use crate::calibration::model::{Feature, Hardware};
    use crate::store::{MINUTE_MS, StoreOptions, Writer};

    /// An hour-aligned start in 2023, and the simulated package power at second `s`: a
    /// load that rises and falls, above what the model saw for a stretch at 20 h.
    const T0: i64 = 1_699_999_200_000;

    fn package_w(s: i64) -> f64 {
        let load = ((s as f64) / 1800.0).sin().abs();
        if (72_000..73_800).contains(&s) {
            95.0
        } else {
            8.0 + 50.0 * load
        }
    }

    /// `seconds` of the package's power every 10 s from `from_s`.
    fn write(w: &mut Writer, from_s: i64, seconds: i64) {
        let batch: Vec<Sample> = (from_s..from_s + seconds)
            .step_by(10)
            .map(|s| {
                Sample::new(
                    T0 + s * 1000,
                    SourceId::Rapl,
                    Metric::Power,
                    "package-0",
                    package_w(s),
                )
            })
            .collect();
        w.push(None, batch);
        w.flush().unwrap();
    }

    fn tariff() -> Tariff {
        Tariff::simple("GBP", 0.30, 0.0, Vec::new(), crate::zone::Zone::UTC).unwrap()
    }

    fn at(s: i64) -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::from_timestamp_millis(T0 + s * 1000).unwrap()
    }

    #[test]
    fn kept_hours_give_the_figures_a_fresh_estimate_gives_to_the_last_bit() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = StoreOptions {
            host: "h".to_owned(),
            ..StoreOptions::default()
        };
        opts.spacing_ms.insert(SourceId::Rapl, 10_000);
        let mut w = Writer::new(Store::open(&dir.path().join("e.db"), &opts).unwrap(), opts);
        // A model fitted on the first 10 hours' minutes: wall = 23 W + 1.12 x package.
        let minutes: Vec<i64> = (0..600).map(|m| T0 + m * MINUTE_MS).collect();
        let pkg: Vec<f64> = (0..600).map(|m| package_w(m * 60)).collect();
        let table = Table {
            minutes,
            wall: pkg.iter().map(|p| 23.0 + 1.12 * p).collect(),
            columns: vec![pkg],
        };
        let features = [Feature::parse("rapl/power/package-0").unwrap()];
        let hardware = Hardware {
            cpu_model: None,
            logical_cpus: 2,
            memory_bytes: None,
        };
        let model = crate::calibration::choose::calibrate(
            "h",
            &SourceId::meter("wall").to_string(),
            &table,
            &features,
            0.3,
            hardware,
            T0,
        )
        .unwrap();
        // 26.5 hours of history, then 50 minutes more.
        write(&mut w, 0, 95_400);
        let store = w.store();
        crate::calibration::persist::save(store, "h", &model).unwrap();
        let mut running = RunningEstimate::default();
        let t = tariff();
        for (now_s, more) in [(95_400, 0), (98_400, 3_000)] {
            if more > 0 {
                write(&mut w, now_s - more, more);
            }
            let store = w.store();
            let kept = running
                .figures(store, "h", &t, at(now_s), T0)
                .unwrap()
                .unwrap();
            let fresh = crate::calibration::priced::figures(store, "h", &t, at(now_s))
                .unwrap()
                .unwrap();
            for (k, f) in [
                (&kept.today, &fresh.today),
                (&kept.last_7_days, &fresh.last_7_days),
            ] {
                assert_eq!(k.cost, f.cost, "at {now_s} s");
                assert_eq!(k.window_cost, f.window_cost);
                assert_eq!(k.estimate.energy_wh, f.estimate.energy_wh);
                assert_eq!(k.estimate.minutes, f.estimate.minutes);
                let withheld =
                    |p: &Priced| p.estimate.withheld.iter().map(|w| w.minutes).sum::<usize>();
                assert_eq!(withheld(k), withheld(f));
            }
            assert!(
                kept.last_7_days.estimate.minutes > 1500,
                "{:?}",
                kept.last_7_days.estimate.minutes
            );
            assert!(
                kept.last_7_days
                    .estimate
                    .withheld
                    .iter()
                    .map(|w| w.minutes)
                    .sum::<usize>()
                    >= 29
            );
            assert_eq!(kept.provenance, fresh.provenance);
        }
        assert!(
            running.hours.len() >= 26,
            "closed hours kept: {}",
            running.hours.len()
        );
    }
}
