//! A fitted model of the wall draw and what it saw while fitted.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use wattson_collectors::{Metric, SourceId};

/// A software-visible signal a model reads: one stored series of the host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Feature {
    pub source: SourceId,
    pub metric: Metric,
    pub channel: String,
}

impl Feature {
    pub fn new(source: SourceId, metric: Metric, channel: &str) -> Feature {
        Feature {
            source,
            metric,
            channel: channel.to_owned(),
        }
    }

    /// `source/metric/channel`, e.g. `rapl/power/package-0`, `cpu/cpu_busy/all`: how the
    /// command line names it (`--feature`).
    pub fn name(&self) -> String {
        format!("{}/{}/{}", self.source, self.metric.as_str(), self.channel)
    }

    /// The feature `name` names (`source/metric/channel`); `None` when it is not of that
    /// form or names no metric.
    pub fn parse(name: &str) -> Option<Feature> {
        let (source, rest) = name.split_once('/')?;
        let (metric, channel) = rest.split_once('/').unwrap_or((rest, ""));
        let metric = Metric::parse(metric)?;
        (!source.is_empty()).then(|| Feature::new(SourceId::from_text(source), metric, channel))
    }

    /// The feature's unit as printed.
    pub fn unit(&self) -> &'static str {
        match self.metric {
            Metric::CpuBusy
            | Metric::PackageResidency
            | Metric::IdleResidency
            | Metric::DiskSpunUp => "share",
            Metric::GpuUtilisation => "%",
            m => m.unit().symbol(),
        }
    }
}

/// How the wall follows the features.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Shape {
    /// `wall = intercept_w + sum of coefficients[i] x feature[i]`.
    Linear {
        intercept_w: f64,
        coefficients: Vec<f64>,
    },
    /// Over the first feature: straight lines between `(value, W)` points in increasing
    /// value (powercalc's calibrate table), the end segments continued a little past the
    /// ends; plus, for each further feature, `plus[i]` x its value (watts that add to
    /// whatever the first draws: a disk spun up, by its share of the minute).
    Table {
        points: Vec<(f64, f64)>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        plus: Vec<f64>,
    },
}

/// Why a model is not whole ([`Model::check`], [`WallModel::check`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("a model reads at least one signal")]
    NoSignal,
    #[error("{coefficients} coefficients for {signals} signals")]
    Coefficients { coefficients: usize, signals: usize },
    #[error("a coefficient is not a finite number")]
    Coefficient,
    /// A table's signal and those `added` to it are not the model's `signals`.
    #[error("a calibrate table reads one signal and {added} added, not {signals}")]
    TableSignals { added: usize, signals: usize },
    #[error("{0} table points (2 to 64)")]
    TablePoints(usize),
    #[error("table points are not finite and increasing")]
    PointsOrder,
    #[error("a range for each signal is missing")]
    RangeMissing,
    #[error("a figure is not a finite number")]
    Figure,
}

/// A signal read at `lo` to `hi`, outside the `min` to `max` its model saw: why estimates
/// are withheld.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "{signal} at {}, outside the {} to {} the model saw",
    read_at(*lo, *hi),
    sig(*min),
    sig(*max)
)]
pub struct Outside {
    pub signal: String,
    pub lo: f64,
    pub hi: f64,
    pub min: f64,
    pub max: f64,
}

/// `lo`, or `lo to hi` where they differ as shown.
fn read_at(lo: f64, hi: f64) -> String {
    if sig(lo) == sig(hi) {
        sig(lo)
    } else {
        format!("{} to {}", sig(lo), sig(hi))
    }
}

/// A model: features and the shape that maps them to the wall's watts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub features: Vec<Feature>,
    pub shape: Shape,
}

impl Model {
    /// The wall watts for one minute's feature values (in `features`' order).
    pub fn predict(&self, x: &[f64]) -> f64 {
        match &self.shape {
            Shape::Linear {
                intercept_w,
                coefficients,
            } => intercept_w + coefficients.iter().zip(x).map(|(c, v)| c * v).sum::<f64>(),
            Shape::Table { points, plus } => {
                interpolate(points, x[0])
                    + plus.iter().zip(&x[1..]).map(|(c, v)| c * v).sum::<f64>()
            }
        }
    }

    /// Whether the model is internally whole: as many coefficients as features, a table
    /// over one feature with at least two points in increasing order and a coefficient for
    /// each feature added to it, every number finite.
    /// A model read from a database or a file is checked with this before it is used.
    pub fn check(&self) -> Result<(), ModelError> {
        if self.features.is_empty() {
            return Err(ModelError::NoSignal);
        }
        match &self.shape {
            Shape::Linear {
                intercept_w,
                coefficients,
            } => {
                if coefficients.len() != self.features.len() {
                    return Err(ModelError::Coefficients {
                        coefficients: coefficients.len(),
                        signals: self.features.len(),
                    });
                }
                if !intercept_w.is_finite() || !coefficients.iter().all(|c| c.is_finite()) {
                    return Err(ModelError::Coefficient);
                }
            }
            Shape::Table { points, plus } => {
                if self.features.len() != 1 + plus.len() {
                    return Err(ModelError::TableSignals {
                        added: plus.len(),
                        signals: self.features.len(),
                    });
                }
                if !plus.iter().all(|c| c.is_finite()) {
                    return Err(ModelError::Coefficient);
                }
                if points.len() < 2 || points.len() > 64 {
                    return Err(ModelError::TablePoints(points.len()));
                }
                if !points.iter().all(|(x, w)| x.is_finite() && w.is_finite())
                    || !points.windows(2).all(|p| p[0].0 < p[1].0)
                {
                    return Err(ModelError::PointsOrder);
                }
            }
        }
        Ok(())
    }

    /// One line: the formula, e.g. `23.1 W + 1.12 x rapl/power/package-0`, or `table over
    /// cpu/cpu_busy/all (6 points)`.
    pub fn describe(&self) -> String {
        match &self.shape {
            Shape::Linear {
                intercept_w,
                coefficients,
            } => {
                let mut s = format!("{intercept_w:.2} W");
                for (c, f) in coefficients.iter().zip(&self.features) {
                    let sign = if *c < 0.0 { '-' } else { '+' };
                    let _ = write!(s, " {sign} {} x {}", sig(c.abs()), f.name());
                }
                s
            }
            Shape::Table { points, plus } => {
                let mut s = format!(
                    "calibrate table over {} ({} points)",
                    self.features[0].name(),
                    points.len()
                );
                for (c, f) in plus.iter().zip(&self.features[1..]) {
                    let sign = if *c < 0.0 { '-' } else { '+' };
                    let _ = write!(s, " {sign} {} W x {}", sig(c.abs()), f.name());
                }
                s
            }
        }
    }
}

/// Four significant digits.
fn sig(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
    let text = format!("{v:.digits$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// Straight lines between `points`; past either end the end segment continued.
pub fn interpolate(points: &[(f64, f64)], x: f64) -> f64 {
    let i = points
        .windows(2)
        .position(|p| x <= p[1].0)
        .unwrap_or(points.len() - 2);
    let ((x0, y0), (x1, y1)) = (points[i], points[i + 1]);
    y0 + (y1 - y0) * (x - x0) / (x1 - x0)
}

/// The least and most of a value the model saw.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Span {
    pub min: f64,
    pub max: f64,
}

impl Span {
    /// How far past its ends a value still counts as seen: 2 % of the span (the minute
    /// means of a signal wander that much between one day and the next), at least a
    /// millionth of the value's size.
    fn slack(&self) -> f64 {
        ((self.max - self.min) * 0.02).max(self.max.abs().max(self.min.abs()) * 1e-6)
    }

    pub fn holds(&self, v: f64) -> bool {
        let (lo, hi) = self.bounds();
        v >= lo && v <= hi
    }

    /// The least and most a value may be and still count as seen ([`Span::holds`]).
    pub fn bounds(&self) -> (f64, f64) {
        (self.min - self.slack(), self.max + self.slack())
    }
}

/// The hardware a model was fitted on: a model is only lent to a host with the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hardware {
    pub cpu_model: Option<String>,
    pub logical_cpus: usize,
    pub memory_bytes: Option<u64>,
}

impl Hardware {
    /// What makes `other` different hardware, if anything: the CPU model, the number of
    /// CPUs, or memory more than 5 % apart (the kernel reserves a little more or less).
    pub fn differs_from(&self, other: &Hardware) -> Option<String> {
        if self.cpu_model != other.cpu_model {
            return Some(format!(
                "CPU {:?}, this host's {:?}",
                self.cpu_model.as_deref().unwrap_or("unknown"),
                other.cpu_model.as_deref().unwrap_or("unknown")
            ));
        }
        if self.logical_cpus != other.logical_cpus {
            return Some(format!(
                "{} CPUs, this host has {}",
                self.logical_cpus, other.logical_cpus
            ));
        }
        if let (Some(a), Some(b)) = (self.memory_bytes, other.memory_bytes)
            && (a as f64 - b as f64).abs() > 0.05 * a.max(b) as f64
        {
            return Some(format!(
                "{:.1} GiB of memory, this host has {:.1} GiB",
                a as f64 / f64::from(1 << 30),
                b as f64 / f64::from(1 << 30)
            ));
        }
        None
    }
}

/// Where a model's fit came from.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// Fitted on ordinary running with the meter in (`wattson calibration fit`, the daemon's
    /// refit, or imported), chosen by its error on a later stretch it was not fitted on.
    #[default]
    Running,
    /// A sweep's fit of the wall against one signal over its `levels` levels' means, with
    /// the fit's `r2` ([`super::swept`]). Nothing was held out: `heldout_rms_w` is the rms of
    /// the levels' residuals.
    Sweep { levels: usize, r2: f64 },
}

impl Origin {
    fn is_running(&self) -> bool {
        matches!(self, Origin::Running)
    }
}

/// A stored calibration: the model, what it saw, and how well it did on history it was
/// not fitted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WallModel {
    /// The host whose history it was fitted on.
    pub host: String,
    /// When it was fitted.
    pub created_ms: i64,
    /// The wall meter's source it was fitted against, e.g. `meter:wall`.
    pub wall_source: String,
    pub model: Model,
    /// The history fitted: first and last minute (UTC ms), and how many minutes.
    pub from_ms: i64,
    pub to_ms: i64,
    pub minutes: usize,
    /// Each feature's range over those minutes, in `model.features`' order. Empty only in a
    /// sweep's fit stored before sweeps recorded the range they saw ([`Origin::Sweep`]):
    /// nothing is withheld then, and every surface that shows the model says so.
    pub feature_spans: Vec<Span>,
    /// The wall's range over those minutes, W; `None` where `feature_spans` is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_span: Option<Span>,
    /// The held-out stretch (the later part of the history, fitted without it): where it
    /// began, its minutes, the rms of a minute's error (W), and the error of its energy
    /// (%, the estimate over the wall, signed).
    pub heldout_from_ms: i64,
    pub heldout_minutes: usize,
    pub heldout_rms_w: f64,
    pub heldout_energy_error_pct: f64,
    /// The 95 % half-width of an estimated energy, % of it, from the held-out hours.
    pub interval_pct: f64,
    /// The other candidates and their held-out rms, W, for `show`.
    pub considered: Vec<(String, f64)>,
    pub hardware: Hardware,
    /// Set when imported: the host it was fitted on (this host borrows it).
    #[serde(default)]
    pub borrowed_from: Option<String>,
    /// Ordinary running (what `wattson calibration fit` stores; absent from its JSON) or a
    /// sweep.
    #[serde(default, skip_serializing_if = "Origin::is_running")]
    pub origin: Origin,
}

impl WallModel {
    /// Checks a model read from a database or file: whole, one span per feature, finite.
    /// A sweep's fit may lack the range it saw (both the signals' and the wall's), nothing
    /// else may.
    pub fn check(&self) -> Result<(), ModelError> {
        self.model.check()?;
        let whole = self.feature_spans.len() == self.model.features.len();
        let unrecorded = self.feature_spans.is_empty() && self.wall_span.is_none();
        match self.origin {
            _ if whole && self.wall_span.is_some() => {}
            Origin::Sweep { .. } if unrecorded => {}
            Origin::Running | Origin::Sweep { .. } => {
                return Err(ModelError::RangeMissing);
            }
        }
        let r2 = match self.origin {
            Origin::Sweep { r2, .. } => r2,
            Origin::Running => 0.0,
        };
        let finite = [
            self.heldout_rms_w,
            self.heldout_energy_error_pct,
            self.interval_pct,
            r2,
        ]
        .iter()
        .chain(self.wall_span.iter().flat_map(|s| [&s.min, &s.max]))
        .chain(self.feature_spans.iter().flat_map(|s| [&s.min, &s.max]))
        .all(|v| v.is_finite());
        if !finite || self.interval_pct < 0.0 {
            return Err(ModelError::Figure);
        }
        Ok(())
    }

    /// The first signal of this minute's `x` outside what the model saw, by its index in
    /// `model.features` (`None`: every one inside).
    pub fn outside(&self, x: &[f64]) -> Option<usize> {
        self.feature_spans
            .iter()
            .zip(x)
            .position(|(s, v)| !s.holds(*v))
    }

    /// Why minutes were withheld: signal `feature` read `lo` to `hi` in them, outside the
    /// range the model saw.
    pub fn outside_reason(&self, feature: usize, lo: f64, hi: f64) -> String {
        self.outside_of(feature, lo, hi).to_string()
    }

    /// Signal `feature` read at `lo` to `hi`, outside the range the model saw.
    pub fn outside_of(&self, feature: usize, lo: f64, hi: f64) -> Outside {
        let s = self.feature_spans[feature];
        Outside {
            signal: self.model.features[feature].name(),
            lo,
            hi,
            min: s.min,
            max: s.max,
        }
    }

    /// Whether the model holds the range it saw (only an old sweep's fit does not).
    pub fn range_recorded(&self) -> bool {
        !self.feature_spans.is_empty()
    }

    /// The half-width of one estimate's band, W: twice the rms of a minute's error (about
    /// 95 % when the errors are normal).
    pub fn band_w(&self) -> f64 {
        2.0 * self.heldout_rms_w.abs()
    }

    /// Where the estimate comes from and how sure it is (DATE as YYYY-MM-DD, UTC):
    /// "estimated from the calibration of DATE on ordinary running, +/- X %" (and
    /// "borrowed from HOST" when imported), or "estimated from a sweep on DATE, +/- B W
    /// (X %)" (and "the range it saw not recorded" for an old sweep's).
    pub fn provenance(&self) -> String {
        let date = chrono::DateTime::from_timestamp_millis(self.created_ms)
            .map_or_else(|| "?".into(), |d| d.format("%Y-%m-%d").to_string());
        let mut s = match self.origin {
            Origin::Running => format!(
                "estimated from the calibration of {date} on ordinary running, +/- {:.1} %",
                self.interval_pct
            ),
            Origin::Sweep { .. } => format!(
                "estimated from a sweep on {date}, +/- {:.1} W ({:.1} %)",
                self.band_w(),
                self.interval_pct
            ),
        };
        if !self.range_recorded() {
            s.push_str(", the range it saw not recorded");
        }
        if let Some(h) = &self.borrowed_from {
            let _ = write!(s, ", borrowed from {h}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_interpolates_and_continues_its_end_segments() {
        let pts = [(0.0, 30.0), (0.5, 50.0), (1.0, 90.0)];
        assert_eq!(interpolate(&pts, 0.25), 40.0);
        assert_eq!(interpolate(&pts, 0.75), 70.0);
        assert_eq!(interpolate(&pts, -0.1), 26.0);
        assert!((interpolate(&pts, 1.1) - 98.0).abs() < 1e-9);
    }

    #[test]
    fn figures_keep_four_significant_digits_without_trailing_zeros() {
        assert_eq!(sig(0.05), "0.05");
        assert_eq!(sig(0.979_23), "0.9792");
        assert_eq!(sig(116.23), "116.2");
        assert_eq!(sig(2000.0), "2000");
        assert_eq!(sig(0.0), "0");
    }

    #[test]
    fn feature_names_round_trip() {
        for name in [
            format!("{}/power/package-0", SourceId::Rapl),
            format!("{}/cpu_busy/all", SourceId::Cpu),
            format!("{}/power/", SourceId::ups("rack")),
        ] {
            assert_eq!(Feature::parse(&name).unwrap().name(), name);
        }
        assert!(Feature::parse(&format!("{}/volts/x", SourceId::Rapl)).is_none());
        assert!(Feature::parse(&SourceId::Rapl.to_string()).is_none());
    }

    #[test]
    fn a_hostile_model_is_refused() {
        let mut m = Model {
            features: vec![Feature::parse("cpu/cpu_busy/all").unwrap()],
            shape: Shape::Table {
                points: vec![(0.5, 1.0), (0.2, 2.0)],
                plus: Vec::new(),
            },
        };
        assert!(m.check().is_err());
        // A coefficient for a signal the model does not read.
        m.shape = Shape::Table {
            points: vec![(0.2, 1.0), (0.5, 2.0)],
            plus: vec![6.0],
        };
        assert!(m.check().is_err());
        m.shape = Shape::Linear {
            intercept_w: 1.0,
            coefficients: vec![f64::NAN],
        };
        assert!(m.check().is_err());
        m.shape = Shape::Linear {
            intercept_w: 1.0,
            coefficients: vec![1.0, 2.0],
        };
        assert!(m.check().is_err());
    }
}
