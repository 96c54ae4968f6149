//! Estimated wall power on a machine whose meter has moved on: a sweep stored a fit of wall
//! watts against a software-visible source (RAPL package, hwmon sensor) for this host (see
//! [`crate::sweep::persist::Calibration`]); while no wall meter is there, the daemon applies
//! that fit to the live source and stores the result as source [`SourceId::Estimate`].
//!
//! Samples (all [`Metric::Power`], W): channel `""` is the estimated wall draw,
//! `intercept + slope x source`; channel [`ERROR_CHANNEL`] is its error, twice the root mean
//! square of the calibration's residuals (about a 95 % band when the residuals are normal).
//! The source name says "estimate" wherever it is shown: `wattson status` prints
//! "estimated +/- X W" and the MQTT state marks the power as an estimate.

use wattson_collectors::{CollectError, Collector, Metric, Sample, Scope, SourceId, SysRoot};

use crate::sweep::persist::Calibration;

/// The channel of the estimate's error, W.
pub const ERROR_CHANNEL: &str = wattson_collectors::source::channel::ESTIMATE_ERROR;

/// One estimate: the wall draw and its error, W.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Estimated wall watts.
    pub watts: f64,
    /// Half-width of the estimate's band, W (twice the calibration's rms error).
    pub error_w: f64,
}

/// Applies one stored calibration to the samples of its source.
#[derive(Debug, Clone)]
pub struct WallEstimator {
    calibration: Calibration,
    source: SourceId,
    channel: String,
}

impl WallEstimator {
    /// The estimator for `calibration`; `None` when its source is not `source/channel`
    /// (e.g. `rapl/package-0`) or its figures are not finite.
    pub fn new(calibration: Calibration) -> Option<WallEstimator> {
        let (source, channel) = calibration.source.split_once('/')?;
        let (source, channel) = (SourceId::from_text(source), channel.to_owned());
        let finite = [
            calibration.intercept_w,
            calibration.slope,
            calibration.rms_error_w,
        ]
        .iter()
        .all(|x| x.is_finite());
        (finite && !source.is_text("")).then_some(WallEstimator {
            calibration,
            source,
            channel,
        })
    }

    /// The source this estimator reads (RAPL, hwmon).
    pub fn source(&self) -> &SourceId {
        &self.source
    }

    /// The calibration applied.
    pub fn calibration(&self) -> &Calibration {
        &self.calibration
    }

    /// The estimate from one poll of the source; `None` when the poll holds no power sample
    /// of the calibrated channel (a counter's first reading, say).
    pub fn estimate(&self, samples: &[Sample]) -> Option<Estimate> {
        let x = samples
            .iter()
            .find(|s| {
                s.metric == Metric::Power && s.source == self.source && s.channel == self.channel
            })?
            .value;
        let watts = self.calibration.intercept_w + self.calibration.slope * x;
        watts.is_finite().then_some(Estimate {
            // A wall draw is never below zero, whatever a line extrapolates to.
            watts: watts.max(0.0),
            error_w: 2.0 * self.calibration.rms_error_w.abs(),
        })
    }
}

/// A [`Collector`] of estimated wall power: polls the calibrated source and turns each
/// reading into the two [`SourceId::Estimate`] samples.
pub struct EstimateCollector {
    inner: Box<dyn Collector>,
    estimator: WallEstimator,
}

/// Why the source a calibration was made against is not available here (one line: the
/// collector's reason is part of it).
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    #[error("{0}")]
    Rapl(wattson_collectors::power::rapl::RaplError),
    #[error("{0}")]
    Hwmon(wattson_collectors::power::hwmon::HwmonError),
    /// A source no sweep calibrates against.
    #[error("no collector for calibrated source {0:?}")]
    NotCalibratable(String),
    /// A calibration's signal whose source cannot be read here.
    #[error("{signal}: {why}")]
    Signal { signal: String, why: String },
}

impl EstimateCollector {
    /// Wraps `inner`, which must be the collector of `estimator.source()`.
    pub fn new(inner: Box<dyn Collector>, estimator: WallEstimator) -> EstimateCollector {
        EstimateCollector { inner, estimator }
    }

    /// Builds the source an estimator reads, under `root` (`rapl` and `hwmon`: the sources a
    /// sweep calibrates against). `Err` says why it is not available here.
    pub fn for_machine(
        root: &SysRoot,
        estimator: WallEstimator,
    ) -> Result<EstimateCollector, Unavailable> {
        use wattson_collectors::power::{hwmon, rapl};
        let inner: Box<dyn Collector> = match estimator.source() {
            SourceId::Rapl => Box::new(rapl::RaplCollector::new(root).map_err(Unavailable::Rapl)?),
            SourceId::Hwmon => {
                Box::new(hwmon::HwmonCollector::new(root).map_err(Unavailable::Hwmon)?)
            }
            other => return Err(Unavailable::NotCalibratable(other.to_string())),
        };
        Ok(EstimateCollector::new(inner, estimator))
    }

    /// The estimator applied.
    pub fn estimator(&self) -> &WallEstimator {
        &self.estimator
    }
}

impl Collector for EstimateCollector {
    fn source(&self) -> &SourceId {
        &SourceId::Estimate
    }

    fn scope(&self) -> Option<Scope> {
        Some(Scope::Wall)
    }

    fn poll(&mut self, now_ms: i64) -> Result<Vec<Sample>, CollectError> {
        let samples = self.inner.poll(now_ms)?;
        Ok(match self.estimator.estimate(&samples) {
            Some(e) => vec![
                Sample::new(now_ms, SourceId::Estimate, Metric::Power, "", e.watts),
                Sample::new(
                    now_ms,
                    SourceId::Estimate,
                    Metric::Power,
                    ERROR_CHANNEL,
                    e.error_w,
                ),
            ],
            None => Vec::new(),
        })
    }
}

/// The estimator for `host` from the calibrations stored in `store`, best first, whose
/// source works on this machine; `None` when there is none.
pub fn collector_for_host(
    store: &crate::store::Store,
    host: &str,
    root: &SysRoot,
) -> Result<Option<EstimateCollector>, super::SourcesError> {
    for cal in crate::sweep::persist::latest_calibrations(store, host)? {
        let name = cal.source.clone();
        let Some(estimator) = WallEstimator::new(cal) else {
            continue;
        };
        match EstimateCollector::for_machine(root, estimator) {
            Ok(c) => return Ok(Some(c)),
            Err(why) => tracing::info!("calibration against {name}: source unavailable: {why}"),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calibration(source: &str) -> Calibration {
        Calibration {
            source: source.into(),
            intercept_w: 30.0,
            slope: 1.1,
            r2: 0.999,
            rms_error_w: 0.75,
            levels: 3,
            estimate: true,
            source_range_w: None,
            wall_range_w: None,
        }
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
        let est = WallEstimator::new(calibration("rapl/package-0")).unwrap();
        assert_eq!(est.source(), &SourceId::Rapl);
        let samples = [
            Sample::new(1, SourceId::Rapl, Metric::Power, "core", 5.0),
            Sample::new(1, SourceId::Rapl, Metric::Power, "package-0", 20.0),
        ];
        let e = est.estimate(&samples).unwrap();
        assert!((e.watts - 52.0).abs() < 1e-9, "{e:?}");
        assert!((e.error_w - 1.5).abs() < 1e-12, "{e:?}");
        assert_eq!(
            est.estimate(&[Sample::new(1, SourceId::Rapl, Metric::Power, "core", 5.0)]),
            None
        );
    }

    #[test]
    fn malformed_calibrations_are_refused() {
        assert!(WallEstimator::new(calibration(&SourceId::Rapl.to_string())).is_none());
        assert!(WallEstimator::new(calibration("/package-0")).is_none());
        let mut c = calibration("rapl/package-0");
        c.slope = f64::NAN;
        assert!(WallEstimator::new(c).is_none());
    }

    #[test]
    fn the_collector_labels_its_samples_as_an_estimate_with_an_error_channel() {
        let est = WallEstimator::new(calibration("rapl/package-0")).unwrap();
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
        let mut c = EstimateCollector::new(Box::new(inner), est);
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
    fn stored_calibration_drives_an_estimate_from_a_fixture_powercap_tree() {
        let dir = tempfile::tempdir().unwrap();
        let zone = dir.path().join("sys/class/powercap/intel-rapl:0");
        std::fs::create_dir_all(&zone).unwrap();
        std::fs::write(zone.join("name"), "package-0\n").unwrap();
        std::fs::write(zone.join("energy_uj"), "1000000\n").unwrap();
        std::fs::write(zone.join("max_energy_range_uj"), "262143328850\n").unwrap();
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let store = crate::store::Store::open(
            &dir.path().join("w.db"),
            &crate::store::StoreOptions::default(),
        )
        .unwrap();
        store
            .conn()
            .execute(
                "INSERT INTO calibration (host, source, fit, created_ms) VALUES ('basket', 'rapl/package-0', ?1, 1)",
                [serde_json::to_string(&calibration("rapl/package-0")).unwrap()],
            )
            .unwrap();
        assert!(
            collector_for_host(&store, "other", &root)
                .unwrap()
                .is_none()
        );
        let mut c = collector_for_host(&store, "basket", &root)
            .unwrap()
            .expect("an estimator from the stored calibration");
        assert_eq!(c.estimator().calibration().source, "rapl/package-0");
        assert!(c.poll(1).unwrap().is_empty(), "first reading: no watts yet");
        // 20 J more after a moment: whatever the elapsed time, the estimate is the
        // calibration applied to the package watts the collector saw, never below 30 W.
        std::fs::write(zone.join("energy_uj"), "21000000\n").unwrap();
        let s = c.poll(2).unwrap();
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].value > 30.0, "{s:?}");
        assert!((s[1].value - 1.5).abs() < 1e-12);
    }

    #[test]
    fn a_calibration_whose_source_is_missing_gives_no_estimator() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::new(dir.path().join("sys"), dir.path().join("proc"));
        let store = crate::store::Store::open(
            &dir.path().join("w.db"),
            &crate::store::StoreOptions::default(),
        )
        .unwrap();
        store
            .conn()
            .execute(
                "INSERT INTO calibration (host, source, fit, created_ms) VALUES ('basket', 'rapl/package-0', ?1, 1)",
                [serde_json::to_string(&calibration("rapl/package-0")).unwrap()],
            )
            .unwrap();
        assert!(
            collector_for_host(&store, "basket", &root)
                .unwrap()
                .is_none()
        );
    }
}
