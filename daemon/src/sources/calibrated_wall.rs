//! Estimated wall power from a calibration fitted on ordinary running
//! ([`crate::calibration`]), once the meter has moved on: the collectors of the model's
//! signals polled together, the model applied to what they read, and stored as source
//! [`SourceId::Estimate`] like the sweep's single-signal estimate
//! ([`super::estimated_wall`]): channel `""` the watts, channel [`ERROR_CHANNEL`] the
//! band (twice the model's held-out rms error a minute).
//!
//! A poll whose signals lie outside what the model saw is refused with the reason, which
//! the sampler keeps as the gap's cause once the estimate is back: never extrapolated.

use wattson_collectors::{CollectError, Collector, Metric, Sample, Scope, SourceId, SysRoot};

use super::estimated_wall::{ERROR_CHANNEL, Unavailable};
use crate::calibration::WallModel;

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
                return Err(Unavailable::Signal {
                    signal: source.to_string(),
                    why: format!("{key} is off (turn it on for the estimate to read it)"),
                });
            }
            let wired = super::wiring::power_source(config, root, source).map_err(|why| {
                Unavailable::Signal {
                    signal: source.to_string(),
                    why,
                }
            })?;
            interval = interval.max(wired.interval);
            inner.push(wired.collector);
        }
        Ok((CalibratedWall { inner, model }, interval))
    }

    /// The model applied.
    pub fn model(&self) -> &WallModel {
        &self.model
    }

    /// The estimate from one poll's samples of every signal: `Ok(None)` while a signal has
    /// no reading yet (a counter's first), `Err` with the reason when one lies outside what
    /// the model saw.
    pub fn estimate(&self, samples: &[Sample]) -> Result<Option<(f64, f64)>, String> {
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
            return Err(format!(
                "estimate withheld: {}",
                self.model.outside_reason(j, values[j], values[j])
            ));
        }
        let watts = self.model.model.predict(&values);
        Ok(watts
            .is_finite()
            .then_some((watts.max(0.0), 2.0 * self.model.heldout_rms_w)))
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
            Err(detail) => Err(CollectError::Failed {
                source_name: SourceId::Estimate.to_string(),
                detail,
            }),
        }
    }
}
