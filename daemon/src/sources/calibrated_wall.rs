//! Estimated wall power on a machine whose meter has moved on, from the host's calibration
//! ([`crate::calibration`]: a model fitted on ordinary running, imported, or a sweep's fit
//! read as a one-signal model): the collectors of the model's signals polled together, the
//! model applied to what they read, and stored as source [`SourceId::Estimate`].
//!
//! Samples (all [`Metric::Power`], W): channel `""` is the estimated wall draw, never below
//! 0 W; channel [`ERROR_CHANNEL`] is its band, twice the model's rms error a minute (about a
//! 95 % band when the errors are normal). The source name says "estimate" wherever it is
//! shown: `wattson status` prints "estimated +/- X W" with where it came from, and the MQTT
//! state marks the power as an estimate.
//!
//! A poll whose signals lie outside what the model saw is refused with the reason, which
//! the sampler keeps as the gap's cause once the estimate is back: never extrapolated (an
//! old sweep's fit that did not record its range is the one exception, said in the log at
//! start and wherever the model is shown).

use wattson_collectors::{CollectError, Collector, Metric, Sample, Scope, SourceId, SysRoot};

use crate::calibration::WallModel;

/// The channel of the estimate's error, W.
pub const ERROR_CHANNEL: &str = wattson_collectors::source::channel::ESTIMATE_ERROR;

/// Why a signal a calibration reads cannot be read here (one line: the collector's reason
/// is part of it).
#[derive(Debug, thiserror::Error)]
#[error("{signal}: {why}")]
pub struct Unavailable {
    pub signal: String,
    pub why: super::wiring::PowerSourceError,
}

/// Why no estimate is given for a poll: a signal the model reads lies outside what it saw.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("estimate withheld: {0}")]
pub struct Withheld(pub crate::calibration::model::Outside);

/// The model's signals' collectors and the model.
pub struct CalibratedWall {
    inner: Vec<Box<dyn Collector>>,
    model: WallModel,
}

impl CalibratedWall {
    /// The collectors `model`'s signals come from, as the config and `root` build them
    /// ([`super::wiring::power_source`]: RAPL, hwmon, GPUs, IPMI, a UPS, the CPU with its
    /// package C-states), and the interval to poll them together at: the slowest of theirs.
    /// IPMI and GPUs only where `[power]` turns them on, a UPS only as `[[ups]]` configures
    /// it. `Err` names a signal there is no live reader for here, and why.
    pub fn for_machine(
        config: &crate::config::Config,
        root: &SysRoot,
        model: WallModel,
    ) -> Result<(CalibratedWall, std::time::Duration), Unavailable> {
        let mut sources: Vec<&SourceId> = model.model.features.iter().map(|f| &f.source).collect();
        sources.sort();
        sources.dedup();
        let mut inner: Vec<Box<dyn Collector>> = Vec::new();
        let mut interval = config.power.interval;
        for source in sources {
            // The model (read from the database) chooses among what the configuration
            // allows: a source that starts a program or loads a library only where
            // `[power]` turns it on.
            let off = match source {
                SourceId::Ipmi if !config.power.ipmi => Some("[power] ipmi"),
                SourceId::Gpu if !config.power.gpu => Some("[power] gpu"),
                _ => None,
            };
            if let Some(key) = off {
                return Err(Unavailable {
                    signal: source.to_string(),
                    why: super::wiring::PowerSourceError::Off { key },
                });
            }
            let wired =
                super::wiring::power_source(config, root, source).map_err(|why| Unavailable {
                    signal: source.to_string(),
                    why,
                })?;
            interval = interval.max(wired.interval);
            inner.push(wired.collector);
        }
        Ok((CalibratedWall { inner, model }, interval))
    }

    /// `model` applied to what `inner` (the collectors of its signals) read.
    pub fn new(inner: Vec<Box<dyn Collector>>, model: WallModel) -> CalibratedWall {
        CalibratedWall { inner, model }
    }

    /// The model applied.
    pub fn model(&self) -> &WallModel {
        &self.model
    }

    /// The estimate from one poll's samples of every signal: `Ok(None)` while a signal has
    /// no reading yet (a counter's first), `Err` with the reason when one lies outside what
    /// the model saw.
    pub fn estimate(&self, samples: &[Sample]) -> Result<Option<(f64, f64)>, Withheld> {
        let mut values = Vec::with_capacity(self.model.model.features.len());
        for f in &self.model.model.features {
            let Some(s) = samples
                .iter()
                .find(|s| s.source == f.source && s.metric == f.metric && s.channel == f.channel)
            else {
                return Ok(None);
            };
            values.push(s.value);
        }
        if let Some(j) = self.model.outside(&values) {
            return Err(Withheld(self.model.outside_of(j, values[j], values[j])));
        }
        let watts = self.model.model.predict(&values);
        Ok(watts
            .is_finite()
            .then_some((watts.max(0.0), self.model.band_w())))
    }
}

impl Collector for CalibratedWall {
    fn source(&self) -> &SourceId {
        &SourceId::Estimate
    }

    fn scope(&self) -> Option<Scope> {
        Some(Scope::Wall)
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        let mut samples = Vec::new();
        for c in &mut self.inner {
            samples.extend(c.poll(now_ms)?);
        }
        match self.estimate(&samples) {
            Ok(Some((watts, error_w))) => Ok(vec![
                Sample::new(now_ms, SourceId::Estimate, Metric::Power, "", watts),
                Sample::new(
                    now_ms,
                    SourceId::Estimate,
                    Metric::Power,
                    ERROR_CHANNEL,
                    error_w,
                ),
            ]),
            Ok(None) => Ok(Vec::new()),
            Err(withheld) => Err(CollectError::Failed {
                source_name: SourceId::Estimate.to_string(),
                detail: withheld.to_string(),
            }),
        }
    }
}

/// The estimate of `config`'s host from the calibrations `store` holds for it, the first
/// ([`crate::calibration::persist::candidates`]) whose signals can be read here, with the
/// interval to poll it at; `None` when there is none. Each one passed over is logged with
/// why, and the one taken with what it is and where it came from.
pub fn for_host(
    config: &crate::config::Config,
    store: &crate::store::Store,
    root: &SysRoot,
) -> Result<Option<(CalibratedWall, std::time::Duration)>, crate::calibration::CalibrationError> {
    for model in crate::calibration::persist::candidates(store, &config.host.name)? {
        let (described, provenance) = (model.model.describe(), model.provenance());
        match CalibratedWall::for_machine(config, root, model) {
            Ok((c, interval)) => {
                tracing::info!("no wall meter: estimating wall power as {described}: {provenance}");
                if !c.model.range_recorded() {
                    tracing::warn!(
                        "the estimate is not withheld anywhere: the sweep it comes from did not \
                         record the range of {} it saw (sweep again to record it)",
                        c.model.model.features[0].name()
                    );
                }
                return Ok(Some((c, interval)));
            }
            Err(why) => tracing::info!(
                "no wall estimate from the calibration ({described}): a signal it reads is not \
                 available here: {why}"
            ),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::swept;
    use crate::sweep::persist::Calibration;

    /// A sweep's fit as stored before sweeps recorded the range they saw.
    fn calibration(source: &str) -> Calibration {
        swept::tests::old_row(source)
    }

    fn model(c: &Calibration) -> Option<WallModel> {
        swept::model("basket", 1, c).ok()
    }

    /// A source that replays fixed polls.
    struct Replay(Vec<Vec<Sample>>);

    impl Collector for Replay {
        fn source(&self) -> &SourceId {
            &SourceId::Rapl
        }

        fn poll(&mut self, _now_ms: i64) -> Result<Vec<Sample>, CollectError> {
            Ok(if self.0.is_empty() {
                Vec::new()
            } else {
                self.0.remove(0)
            })
        }
    }

    #[test]
    fn wall_is_estimated_from_the_calibrated_channel_only() {
        let est = CalibratedWall::new(Vec::new(), model(&calibration("rapl/package-0")).unwrap());
        assert_eq!(est.model().model.features[0].source, SourceId::Rapl);
        let samples = [
            Sample::new(1, SourceId::Rapl, Metric::Power, "core", 5.0),
            Sample::new(1, SourceId::Rapl, Metric::Power, "package-0", 20.0),
        ];
        let (watts, error_w) = est.estimate(&samples).unwrap().unwrap();
        assert!((watts - 52.0).abs() < 1e-9, "{watts}");
        assert!((error_w - 1.5).abs() < 1e-12, "{error_w}");
        assert_eq!(
            est.estimate(&[Sample::new(1, SourceId::Rapl, Metric::Power, "core", 5.0)]),
            Ok(None)
        );
    }

    #[test]
    fn malformed_calibrations_are_refused() {
        assert!(model(&calibration(&SourceId::Rapl.to_string())).is_none());
        assert!(model(&calibration("/package-0")).is_none());
        let mut c = calibration("rapl/package-0");
        c.slope = f64::NAN;
        assert!(model(&c).is_none());
    }

    #[test]
    fn the_collector_labels_its_samples_as_an_estimate_with_an_error_channel() {
        let est = model(&calibration("rapl/package-0")).unwrap();
        let inner = Replay(vec![
            Vec::new(), // a counter's first reading has no watts yet
            vec![Sample::new(
                9,
                SourceId::Rapl,
                Metric::Power,
                "package-0",
                10.0,
            )],
        ]);
        let mut c = CalibratedWall::new(vec![Box::new(inner)], est);
        assert_eq!(c.source(), &SourceId::Estimate);
        assert_eq!(c.scope(), Some(Scope::Wall));
        assert!(c.poll(5).unwrap().is_empty());
        let s = c.poll(10).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            (&s[0].source, s[0].channel.as_str()),
            (&SourceId::Estimate, "")
        );
        assert!((s[0].value - 41.0).abs() < 1e-9);
        assert_eq!(s[1].channel, ERROR_CHANNEL);
        assert!((s[1].value - 1.5).abs() < 1e-12);
        assert!(s.iter().all(|x| x.metric == Metric::Power && x.ts_ms == 10));
    }

    #[test]
    fn a_sweeps_fit_with_its_range_withholds_a_reading_outside_it() {
        let mut c = calibration("rapl/package-0");
        c.source_range_w = Some([8.0, 32.0]);
        c.wall_range_w = Some([38.0, 66.0]);
        let reading = |w: f64| {
            vec![Sample::new(
                9,
                SourceId::Rapl,
                Metric::Power,
                "package-0",
                w,
            )]
        };
        let inner = Replay(vec![reading(20.0), reading(40.0)]);
        let mut est = CalibratedWall::new(vec![Box::new(inner)], model(&c).unwrap());
        assert!((est.poll(1).unwrap()[0].value - 52.0).abs() < 1e-9);
        let refused = est.poll(2).unwrap_err().to_string();
        assert!(
            refused.contains("rapl/power/package-0 at 40, outside the 8 to 32 the model saw"),
            "{refused}"
        );
    }

    /// A fixture host with one RAPL package zone, a config of that root, and a database
    /// holding a sweep's fit against it.
    fn fixture_host(
        dir: &std::path::Path,
    ) -> (crate::config::Config, SysRoot, crate::store::Store) {
        let zone = dir.join("sys/class/powercap/intel-rapl:0");
        std::fs::create_dir_all(&zone).unwrap();
        std::fs::write(zone.join("name"), "package-0\n").unwrap();
        std::fs::write(zone.join("energy_uj"), "1000000\n").unwrap();
        std::fs::write(zone.join("max_energy_range_uj"), "262143328850\n").unwrap();
        let root = SysRoot::new(dir.join("sys"), dir.join("proc"));
        let config = crate::config::Config::from_toml(
            &format!(
                "[host]\nname = \"basket\"\nsysfs = {:?}\nprocfs = {:?}\n",
                dir.join("sys"),
                dir.join("proc")
            ),
            std::path::Path::new("test.toml"),
        )
        .unwrap();
        let store =
            crate::store::Store::open(&dir.join("w.db"), &crate::store::StoreOptions::default())
                .unwrap();
        store
            .conn()
            .execute(
                "INSERT INTO calibration (host, source, fit, created_ms) VALUES ('basket', 'rapl/package-0', ?1, 1)",
                [serde_json::to_string(&calibration("rapl/package-0")).unwrap()],
            )
            .unwrap();
        (config, root, store)
    }

    #[test]
    fn stored_calibration_drives_an_estimate_from_a_fixture_powercap_tree() {
        let dir = tempfile::tempdir().unwrap();
        let (config, root, store) = fixture_host(dir.path());
        let other = crate::config::Config {
            host: crate::config::HostConfig {
                name: "other".into(),
                ..config.host.clone()
            },
            ..config.clone()
        };
        assert!(for_host(&other, &store, &root).unwrap().is_none());
        let (mut c, _) = for_host(&config, &store, &root)
            .unwrap()
            .expect("an estimator from the stored calibration");
        assert_eq!(c.model().model.features[0].name(), "rapl/power/package-0");
        assert!(c.poll(1).unwrap().is_empty(), "first reading: no watts yet");
        // 20 J more after a moment: whatever the elapsed time, the estimate is the
        // calibration applied to the package watts the collector saw, never below 30 W.
        std::fs::write(
            dir.path().join("sys/class/powercap/intel-rapl:0/energy_uj"),
            "21000000\n",
        )
        .unwrap();
        let s = c.poll(2).unwrap();
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].value > 30.0, "{s:?}");
        assert!((s[1].value - 1.5).abs() < 1e-12);
    }

    #[test]
    fn a_calibration_whose_source_is_missing_gives_no_estimator() {
        let dir = tempfile::tempdir().unwrap();
        let (config, root, store) = fixture_host(dir.path());
        std::fs::remove_dir_all(dir.path().join("sys/class/powercap")).unwrap();
        assert!(for_host(&config, &store, &root).unwrap().is_none());
    }
}
